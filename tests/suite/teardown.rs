//! Deleting a federation end to end against the sandbox: with a member lost and fenced, the
//! deletion finishes once the members that answer are clean, the fenced member's MemberCluster
//! records what it still holds, and when it answers again that is removed (shrunk first, its
//! pods gone) and the record cleared; with a member lost but not fenced, the federation stays
//! Terminating and says which member it waits for and the two ways on, until it is fenced;
//! and a Secret two federations carry survives the deletion of one of them, and comes back
//! at once when deleted by hand, with no new term and no spec change. No ordinal starts
//! anywhere while a deletion runs (the ledger's incarnations, polled over the whole run), and
//! each phase is held to its account: volumes provisioned, spanset's writes per member, nothing
//! of the federation left in a member that answers.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{Pod, Secret, Service},
};
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams},
};
use serde_json::json;
use spanset_api::{FederatedStatefulSet, Leftover, MemberCluster};
use support::federation::{Controller, Federation};

use crate::support;

const THIRDS: [(&str, i32, i32); 3] = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];

/// The example federation `name`, carrying Secret `creds`, with the Manual policy and a short
/// grace; its pods tolerate an unreachable node for ever (as databases often do), so nothing
/// evicts a lost member's pods before it returns.
fn federation(f: &Federation, name: &str, app: &str, replicas: i32) -> FederatedStatefulSet {
    let mut v = serde_json::to_value(f.placing(name, &["east", "west", "central"])).unwrap();
    v["spec"]["replicas"] = json!(replicas);
    v["spec"]["failover"] = json!({"policy": "Manual", "unreachableAfterSeconds": 6});
    v["spec"]["migration"] = json!({"carry": [{"kind": "Secret", "name": "creds"}]});
    v["spec"]["template"]["serviceName"] = json!(name);
    v["spec"]["template"]["selector"] = json!({"matchLabels": {"app": app}});
    v["spec"]["template"]["template"]["metadata"]["labels"] = json!({"app": app});
    v["spec"]["template"]["template"]["spec"]["tolerations"] =
        json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]);
    serde_json::from_value(v).unwrap()
}

async fn host_secret(f: &Federation) {
    let mut s = Secret::default();
    s.metadata.name = Some("creds".into());
    // Its owner lets federations carry it.
    s.metadata.labels = Some([("spanset.dev/carry".to_string(), "true".to_string())].into());
    s.string_data = Some([("password".to_string(), "hunter2".to_string())].into());
    Api::<Secret>::namespaced(f.host.clone(), "default").create(&PostParams::default(), &s).await.expect("Secret");
}

async fn member_cluster(f: &Federation, name: &str) -> MemberCluster {
    Api::<MemberCluster>::all(f.host.clone()).get(name).await.expect("MemberCluster read")
}

/// Waits until member `name`'s MemberCluster says it is not Reachable (what a fence needs).
async fn unreachable(f: &Federation, name: &str) {
    support::eventually(&format!("{name} Unreachable in its MemberCluster"), || async {
        let mc = member_cluster(f, name).await;
        let conditions = mc.status.map(|s| s.conditions).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == "Reachable" && c.status == "False")
    })
    .await;
}

async fn leftovers(f: &Federation, name: &str) -> Vec<Leftover> {
    member_cluster(f, name).await.status.map(|s| s.leftovers).unwrap_or_default()
}

/// What of federation `name` a member holds: its StatefulSet, its pods, its Service and the
/// carried Secret (by presence).
async fn holds(f: &Federation, member: &str, name: &str) -> Vec<String> {
    let c = f.member(member).await;
    let mut out = Vec::new();
    if Api::<StatefulSet>::namespaced(c.clone(), "default").get_opt(name).await.unwrap().is_some() {
        out.push(format!("StatefulSet {name}"));
    }
    let lp = ListParams::default().labels(&format!("spanset.dev/federation={name}"));
    for p in Api::<Pod>::namespaced(c.clone(), "default").list(&lp).await.unwrap().items {
        out.push(format!("Pod {}", p.name_any()));
    }
    if Api::<Service>::namespaced(c.clone(), "default").get_opt(name).await.unwrap().is_some() {
        out.push(format!("Service {name}"));
    }
    if Api::<Secret>::namespaced(c, "default").get_opt("creds").await.unwrap().is_some() {
        out.push("Secret creds".into());
    }
    out
}

/// Every object in `member` labelled as federation `name`'s, of each kind spanset writes there
/// or its StatefulSet makes (claims aside: they stay by the StatefulSet's retention policy,
/// `Retain` here, for an operator to keep or delete). A list that fails fails the test: an
/// error is not "nothing left".
async fn labelled(f: &Federation, member: &str, name: &str) -> Vec<String> {
    let c = f.member(member).await;
    let lp = ListParams::default().labels(&format!("spanset.dev/federation={name}"));
    let kinds = [
        ("apps", "StatefulSet", "statefulsets"),
        ("", "Pod", "pods"),
        ("", "Service", "services"),
        ("", "Secret", "secrets"),
        ("", "ConfigMap", "configmaps"),
        ("policy", "PodDisruptionBudget", "poddisruptionbudgets"),
        ("discovery.k8s.io", "EndpointSlice", "endpointslices"),
    ];
    let mut out = Vec::new();
    for (group, kind, plural) in kinds {
        let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural);
        let api: Api<DynamicObject> = Api::all_with(c.clone(), &resource);
        let listed = api.list(&lp).await.unwrap_or_else(|e| panic!("{member}: listing {plural}: {e}"));
        out.extend(listed.items.iter().map(|o| format!("{kind} {}", o.name_any())));
    }
    out
}

/// Waits until `name` is gone from the host; meanwhile (the whole deletion) no new pod
/// incarnation appears anywhere, and `each` holds on every poll.
async fn deleted_while<F, Fut>(f: &Federation, name: &str, before: &BTreeSet<String>, mut each: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let start = std::time::Instant::now();
    loop {
        each().await;
        let started: Vec<String> = f.incarnations().difference(before).cloned().collect();
        assert!(started.is_empty(), "pods started during the deletion: {started:?}");
        if f.api().get_opt(name).await.unwrap().is_none() {
            return;
        }
        assert!(start.elapsed() < support::DEADLINE, "{name} never went from the host: {:?}", f.status(name).await);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Heals a member lost with its nodes powered off: its API answers first, and only once the
/// sweep shrank its StatefulSet and is deleting its pods do its nodes restart (restarted first,
/// its own StatefulSet controller would bring back its stale slice before anyone could shrink
/// it). Then waits until nothing of `name` is left there and the record is cleared; no pod
/// incarnation starts anywhere meanwhile.
async fn returns_and_is_swept(f: &Federation, member: &str, name: &str, powered_off: bool, before: &BTreeSet<String>) {
    let node_names = f.node_names("east").await;
    let mark = writes(f, member, 0).1;
    f.sandbox.ctl_ok(&["heal", member]);
    let pods: Api<Pod> = Api::namespaced(f.member(member).await, "default");
    let lp = ListParams::default().labels(&format!("spanset.dev/federation={name}"));
    support::eventually(&format!("{member}'s StatefulSet shrunk, and every pod of it being deleted"), || async {
        let shrunk = f.member_slice(member, name).await.is_none_or(|s| s.1 == 0);
        shrunk && pods.list(&lp).await.unwrap().items.iter().all(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    if powered_off {
        for n in &node_names {
            f.sandbox.ctl_ok(&["node-up", member, n]);
        }
    }
    support::eventually(&format!("nothing of {name} left in {member}, and its record cleared"), || async {
        let started: Vec<String> = f.incarnations().difference(before).cloned().collect();
        assert!(started.is_empty(), "pods started while {member} was swept: {started:?}");
        holds(f, member, name).await.is_empty() && leftovers(f, member).await.is_empty()
    })
    .await;
    // In that order, as spanset wrote there: the StatefulSet shrunk before anything else, its
    // pods deleted before it, and it deleted only after them.
    let (order, _) = writes(f, member, mark);
    let at = |w: &str| order.iter().position(|x| x == w);
    let shrink = at(&format!("update statefulsets/{name}")).unwrap_or_else(|| panic!("no shrink in {order:?}"));
    let removed = at(&format!("delete statefulsets/{name}")).unwrap_or_else(|| panic!("no delete in {order:?}"));
    assert_eq!(shrink, 0, "the shrink goes first: {order:?}");
    let last_pod = order.iter().rposition(|w| w.starts_with("delete pods/"));
    assert!(last_pod.is_none_or(|p| p < removed), "every pod deleted before the StatefulSet: {order:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_with_a_fenced_lost_member_finishes_and_the_member_is_swept_when_it_returns() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    host_secret(&f).await;
    f.create(&federation(&f, "redis", "redis", 6)).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    let uid = f.api().get("redis").await.unwrap().uid().unwrap();

    let mark = f.sandbox.account();
    f.lose("central").await;
    unreachable(&f, "central").await;
    let out = f.spanset(&["fence", "central", "--reason", "datacenter flooded"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    support::eventually("central's ordinals re-homed in east and west", || async {
        f.status("redis").await.ready.as_deref() == Some("6/6")
            && f.member_slice("east", "redis").await == Some((0, 3))
            && f.member_slice("west", "redis").await == Some((3, 3))
    })
    .await;
    // The re-home's account: one fresh claim per ordinal that arrived in a member (2 moved
    // from west to east, 4 and 5 re-homed in west), nothing sent to the fenced member.
    let cost = f.sandbox.account().since(&mark);
    let provisioned = (cost.cluster("east").provisioned(), cost.cluster("west").provisioned());
    assert_eq!(provisioned, (1, 2), "one volume per arrival: {cost:?}");
    assert_eq!(cost.cluster("central").by_actor("spanset").writes(), 0, "spanset wrote in fenced central: {cost:?}");

    let before = f.incarnations();
    let mark = f.sandbox.account();
    f.api().delete("redis", &DeleteParams::default()).await.expect("deleted");
    deleted_while(&f, "redis", &before, || async {}).await;
    // East and west are clean; central's MemberCluster says what it still holds.
    for m in ["east", "west"] {
        assert_eq!(holds(&f, m, "redis").await, Vec::<String>::new(), "{m} clean");
        assert_eq!(labelled(&f, m, "redis").await, Vec::<String>::new(), "nothing of redis left in {m}");
    }
    // The deletion's account: in each member that answers, spanset deletes what it wrote
    // (StatefulSet, Service, carried Secret, EndpointSlice: measured 4) and creates nothing;
    // no volume is provisioned anywhere; fenced central receives nothing.
    let cost = f.sandbox.account().since(&mark);
    for m in ["east", "west"] {
        let c = cost.cluster(m);
        let spanset = c.by_actor("spanset");
        assert_eq!((c.provisioned(), spanset.created), (0, 0), "{m}: {c:?}");
        assert!(spanset.writes() <= 6, "{m}: spanset wrote {} times to delete redis: {c:?}", spanset.writes());
    }
    assert_eq!(cost.cluster("central").by_actor("spanset").writes(), 0, "spanset wrote in fenced central: {cost:?}");
    let record = leftovers(&f, "central").await;
    assert_eq!(record.len(), 1, "{record:?}");
    let l = &record[0];
    assert_eq!((l.federation.as_str(), l.namespace.as_str(), l.uid.as_str()), ("redis", "default", uid.as_str()));
    let objects: BTreeSet<(String, Option<String>)> =
        l.objects.iter().map(|o| (o.kind.clone(), o.name.clone())).collect();
    for (kind, name) in [("StatefulSet", "redis"), ("Service", "redis"), ("Secret", "creds")] {
        assert!(objects.contains(&(kind.to_string(), Some(name.to_string()))), "{kind} {name} in {objects:?}");
    }

    let mark = f.sandbox.account();
    returns_and_is_swept(&f, "central", "redis", true, &before).await;
    assert_eq!(labelled(&f, "central", "redis").await, Vec::<String>::new(), "nothing of redis left in central");
    // The sweep's account: only central is written (its shrink, its pods, then its objects:
    // measured 7 writes), nothing provisioned.
    let cost = f.sandbox.account().since(&mark);
    let central = cost.cluster("central").by_actor("spanset");
    assert!(central.writes() <= 10, "spanset wrote {} times to sweep central: {cost:?}", central.writes());
    for m in ["east", "west", "central"] {
        assert_eq!(cost.cluster(m).provisioned(), 0, "{m}: {cost:?}");
    }
    for m in ["east", "west"] {
        assert_eq!(cost.cluster(m).by_actor("spanset").writes(), 0, "the sweep wrote in {m}: {cost:?}");
    }
    assert!(member_cluster(&f, "central").await.spec.fenced, "still fenced until an operator unfences");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_with_an_unfenced_lost_member_says_what_it_waits_for_until_the_member_is_fenced() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    host_secret(&f).await;
    f.create(&federation(&f, "redis", "redis", 6)).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;

    // Central is only cut off: its pods keep running, and nothing is re-homed.
    f.sandbox.ctl_ok(&["partition", "central"]);
    support::eventually("central Unreachable in the federation", || async {
        f.status("redis").await.conditions.iter().any(|c| c.type_ == "ClusterUnreachable" && c.status == "True")
    })
    .await;
    let before = f.incarnations();
    f.api().delete("redis", &DeleteParams::default()).await.expect("deleted");
    let blocked = f.wait_condition("redis", "Blocked", "DeletionWaitsForMember").await;
    assert!(
        blocked.contains("central does not answer")
            && blocked.contains("answers again")
            && blocked.contains("spanset fence central"),
        "{blocked}"
    );
    support::eventually("east and west torn down while central is waited for", || async {
        holds(&f, "east", "redis").await.is_empty() && holds(&f, "west", "redis").await.is_empty()
    })
    .await;
    // Once east and west are clean, Ready and Progressing say only that it is being deleted
    // and waits for central; nothing of a rollout is said any more.
    support::eventually("Ready and Progressing say the deletion waits for central", || async {
        let status = f.status("redis").await;
        let deleting = |t: &str| {
            status.conditions.iter().any(|c| {
                c.type_ == t
                    && c.status == "False"
                    && c.reason == "Deleting"
                    && c.message == "being deleted: central not answering"
            })
        };
        deleting("Ready") && deleting("Progressing")
    })
    .await;
    let status = f.status("redis").await;
    assert!(!status.conditions.iter().any(|c| c.message.contains("waits for redis-")), "{:?}", status.conditions);
    // Still held: the finalizer stays while central may run its pods.
    _c.wait_reconciles("redis", 3);
    let held = f.api().get("redis").await.expect("still there");
    assert!(held.finalizers().iter().any(|x| x == "spanset.dev/cleanup") && held.metadata.deletion_timestamp.is_some());
    assert!(leftovers(&f, "central").await.is_empty(), "nothing recorded before the deletion can finish");

    unreachable(&f, "central").await;
    let out = f.spanset(&["fence", "central", "--reason", "gone for good"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    deleted_while(&f, "redis", &before, || async {}).await;
    assert_eq!(leftovers(&f, "central").await.len(), 1, "central's holdings recorded once fenced");
    returns_and_is_swept(&f, "central", "redis", false, &before).await;
    f.assert_ledger_clean();
}

/// The writes (updates and deletes) of spanset's member identity in `member` after the `skip`
/// first audit records, in order: `verb resource/name`; and how many records there are.
fn writes(f: &Federation, member: &str, skip: usize) -> (Vec<String>, usize) {
    let url = format!("{}/clusters/{member}/audit", f.sandbox.admin);
    let out = std::process::Command::new("curl").args(["-sf", &url]).output().expect("curl runs");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("audit JSON");
    let records = doc["records"].as_array().cloned().unwrap_or_default();
    let mine = records
        .iter()
        .skip(skip)
        .filter(|r| r["user"] == "system:serviceaccount:spanset-system:spanset-member" && r["allowed"] == true)
        .filter(|r| r["verb"] == "delete" || r["verb"] == "update")
        .map(|r| {
            format!(
                "{} {}/{}",
                r["verb"].as_str().unwrap_or(""),
                r["resource"].as_str().unwrap_or(""),
                r["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    (mine, records.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_two_federations_carry_survives_deleting_one_and_comes_back_when_deleted_by_hand() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    host_secret(&f).await;
    f.create(&federation(&f, "redis", "redis", 3)).await;
    f.create(&federation(&f, "kv", "kv", 3)).await;
    let each = [("east", 0, 1), ("west", 1, 1), ("central", 2, 1)];
    f.wait_settled("redis", &each, "redis placed").await;
    f.wait_settled("kv", &each, "kv placed").await;
    let members = ["east", "west", "central"];
    let secret = |m: &'static str| {
        let f = &f;
        async move { Api::<Secret>::namespaced(f.member(m).await, "default").get_opt("creds").await.unwrap() }
    };
    support::eventually("the Secret names both federations that keep it, in every member", || async {
        let mut all = true;
        for m in members {
            all &= secret(m)
                .await
                .is_some_and(|s| s.annotations().get("spanset.dev/carried-by").map(String::as_str) == Some("kv,redis"));
        }
        all
    })
    .await;
    // kv's objects in every member, by uid: none may change.
    let kv_objects = || async {
        let mut out = BTreeMap::new();
        for m in members {
            let c = f.member(m).await;
            let sts = Api::<StatefulSet>::namespaced(c.clone(), "default").get("kv").await.unwrap();
            let svc = Api::<Service>::namespaced(c.clone(), "default").get("kv").await.unwrap();
            out.insert(m, (sts.uid(), sts.metadata.generation, svc.uid(), f.pod_uids(m, "kv").await));
        }
        out
    };
    let kv_before = kv_objects().await;
    let kv_generation = f.api().get("kv").await.unwrap().metadata.generation;
    let marks: BTreeMap<&str, usize> = members.iter().map(|m| (*m, writes(&f, m, 0).1)).collect();

    let before = f.incarnations();
    f.api().delete("redis", &DeleteParams::default()).await.expect("deleted");
    deleted_while(&f, "redis", &before, || async {
        for m in members {
            assert!(secret(m).await.is_some(), "the Secret kv carries was deleted in {m}");
        }
    })
    .await;
    support::eventually("redis's StatefulSets and pods gone from every member", || async {
        let mut gone = true;
        for m in members {
            for s in secret(m).await.into_iter() {
                assert_eq!(s.annotations().get("spanset.dev/carried-by").map(String::as_str), Some("kv"), "{m}");
            }
            let h = holds(&f, m, "redis").await;
            gone &= h == ["Secret creds"];
        }
        gone
    })
    .await;
    assert_eq!(kv_objects().await, kv_before, "nothing of kv changed");
    // What the deletion cost in each member: its own StatefulSet, Service and published
    // EndpointSlices deleted, the shared Secret rewritten without redis's name; nothing of
    // kv's touched, and nothing else written.
    for m in members {
        let (writes, _) = writes(&f, m, marks[m]);
        for w in ["delete statefulsets/redis", "delete services/redis", "update secrets/creds"] {
            assert!(writes.iter().any(|x| x == w), "{m}: {w} in {writes:?}");
        }
        let redis_s = |w: &str| {
            ["delete statefulsets/redis", "delete services/redis", "update secrets/creds"].contains(&w)
                || w.starts_with("delete endpointslices/redis")
        };
        let others: Vec<&String> = writes.iter().filter(|w| !redis_s(w)).collect();
        assert!(others.is_empty(), "{m}: writes beyond redis's objects: {others:?}");
    }

    // Deleted by hand in west: put back at once, with no new term and no spec change.
    let term = |sts: StatefulSet| sts.annotations().get("spanset.dev/term").cloned();
    let west = f.member("west").await;
    let term_before = term(Api::<StatefulSet>::namespaced(west.clone(), "default").get("kv").await.unwrap());
    Api::<Secret>::namespaced(west.clone(), "default")
        .delete("creds", &DeleteParams::default())
        .await
        .expect("deleted");
    support::eventually("the Secret kv carries put back in west", || async { secret("west").await.is_some() }).await;
    let back = secret("west").await.unwrap();
    assert_eq!(back.annotations().get("spanset.dev/carried-by").map(String::as_str), Some("kv"));
    assert_eq!(term(Api::<StatefulSet>::namespaced(west, "default").get("kv").await.unwrap()), term_before);
    assert_eq!(f.api().get("kv").await.unwrap().metadata.generation, kv_generation, "no spec change");
    f.assert_ledger_clean();
}
