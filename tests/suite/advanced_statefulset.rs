//! `backend: AdvancedStatefulSet` end to end: the controller writes OpenKruise Advanced
//! StatefulSets (`apps.kruise.io/v1beta1`) in members whose discovery lists them, with
//! `reserveOrdinals` as the planner's any-set slice in its smallest form; an ordinal leaving a
//! cluster goes straight to its new cluster without shifting a neighbour (pod uids of the
//! others unchanged), where apps/v1 must shift one; a member without OpenKruise gets no slice
//! and a condition saying why; a backend changed under running members blocks. Every run ends
//! with the sandbox's ledger: no ordinal ever ran in two clusters at once.

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams},
};
use serde_json::{Value, json};
use spanset_api::{Backend, FederatedStatefulSet};
use support::{
    eventually,
    federation::{Controller, Federation},
};

use crate::support;

fn advanced() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps.kruise.io", "v1beta1", "StatefulSet"),
        "statefulsets",
    )
}

/// A federation of `replicas` over `clusters` in placement order (weight 1 each).
fn federation(f: &Federation, name: &str, backend: Backend, clusters: &[&str], replicas: i32) -> FederatedStatefulSet {
    let mut fsts = f.placing(name, clusters);
    fsts.spec.replicas = replicas;
    fsts.spec.backend = backend;
    fsts.spec.template.volume_claim_templates.clear();
    fsts
}

/// The member's Advanced StatefulSet spec `(start, replicas, reserveOrdinals)`, if any; a read
/// that fails fails the test (it is never taken for "none there").
async fn advanced_spec(member: &Client, name: &str) -> Option<(i64, i64, Value)> {
    let api = Api::<DynamicObject>::namespaced_with(member.clone(), "default", &advanced());
    let o = api.get_opt(name).await.unwrap_or_else(|e| panic!("reading Advanced StatefulSet {name}: {e}"))?;
    let spec = &o.data["spec"];
    Some((
        spec["ordinals"]["start"].as_i64().unwrap_or(0),
        spec["replicas"].as_i64().unwrap_or(1),
        spec.get("reserveOrdinals").cloned().unwrap_or(json!([])),
    ))
}

/// Waits until the status says `n/n` ready, nothing moves, and each member runs exactly the
/// ordinals `want` gives it.
async fn wait_running(f: &Federation, name: &str, want: &[(&str, &[u32])], what: &str) {
    let total: usize = want.iter().map(|w| w.1.len()).sum();
    eventually(what, || async {
        let status = f.status(name).await;
        let ready = status.ready.as_deref() == Some(format!("{total}/{total}").as_str()) && status.moves.is_empty();
        let now = f.placement(name).await;
        let placed = f.members.iter().all(|m| {
            let wanted: Vec<u32> = want.iter().find(|w| w.0 == m).map(|w| w.1.to_vec()).unwrap_or_default();
            now[m].keys().copied().collect::<Vec<_>>() == wanted
        });
        ready && placed
    })
    .await;
}

async fn set_weights(f: &Federation, name: &str, weights: &[(&str, i32)]) {
    let clusters: Vec<Value> = weights.iter().map(|(c, w)| json!({"name": c, "weight": w})).collect();
    let patch = json!({"spec": {"placement": {"clusters": clusters}}});
    f.api().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("weights patched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordinal_goes_straight_to_its_new_cluster_without_restarting_any_neighbour() {
    let f = Federation::start_flags(&["central", "east", "west"], &["--kruise"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    // Two federations of 6 over central, east, west (weights 1:1:1, placement order central
    // first): one of Advanced StatefulSets, one of apps/v1 StatefulSets for comparison.
    let order = ["central", "east", "west"];
    f.create(&federation(&f, "kv", Backend::AdvancedStatefulSet, &order, 6)).await;
    f.create(&federation(&f, "plain", Backend::StatefulSet, &order, 6)).await;
    let thirds: &[(&str, &[u32])] = &[("central", &[0, 1]), ("east", &[2, 3]), ("west", &[4, 5])];
    wait_running(&f, "kv", thirds, "kv runs 0-1 in central, 2-3 in east, 4-5 in west").await;
    wait_running(&f, "plain", thirds, "plain runs the same thirds").await;
    let kv_before = f.placement("kv").await;
    let plain_before = f.placement("plain").await;

    // Central's weight goes to 0.
    let zero = [("central", 0), ("east", 1), ("west", 1)];
    set_weights(&f, "kv", &zero).await;
    set_weights(&f, "plain", &zero).await;
    // Advanced: central's two ordinals go to east and west; nothing else moves.
    wait_running(&f, "kv", &[("east", &[0, 2, 3]), ("west", &[1, 4, 5])], "kv re-homed central's ordinals").await;
    // apps/v1: east and west must stay contiguous, in placement order: 0-2 and 3-5, so
    // east's ordinal 3 has to move to west.
    wait_running(&f, "plain", &[("east", &[0, 1, 2]), ("west", &[3, 4, 5])], "plain shifted through east").await;

    let kv_after = f.placement("kv").await;
    for cluster in ["east", "west"] {
        for (k, uid) in &kv_before[cluster] {
            assert_eq!(
                kv_after[cluster].get(k),
                Some(uid),
                "Advanced StatefulSet: pod {k} of {cluster} was restarted or moved: before {kv_before:?}, after {kv_after:?}"
            );
        }
    }
    let plain_after = f.placement("plain").await;
    assert!(!plain_after["east"].contains_key(&3), "apps/v1: east gave up its neighbour ordinal 3");
    assert_ne!(plain_after["west"].get(&3), plain_before["east"].get(&3), "apps/v1: ordinal 3 runs a new pod in west");

    // The member objects say it in the fewest reservations: east runs 0,2,3 as start 0,
    // replicas 3, reserving 1; west 1,4,5 as start 1, replicas 3, reserving 2-3; central none.
    assert_eq!(advanced_spec(&f.member("east").await, "kv").await, Some((0, 3, json!([1]))));
    assert_eq!(advanced_spec(&f.member("west").await, "kv").await, Some((1, 3, json!([2, 3]))));
    assert_eq!(advanced_spec(&f.member("central").await, "kv").await.map(|s| s.1), Some(0));
    let status = f.status("kv").await;
    let west = status.slices.iter().find(|s| s.cluster == "west").expect("west's slice");
    assert_eq!((west.start, west.replicas, west.reserved_ordinals.clone()), (1, 3, vec![2, 3]));
    let events = f.events("kv").await;
    let started: Vec<&str> = events.iter().filter(|e| e.1 == "MoveStarted").map(|e| e.2.as_str()).collect();
    assert!(
        started.iter().any(|m| m.contains("ordinal 0: central → east"))
            && started.iter().any(|m| m.contains("ordinal 1: central → west")),
        "each ordinal went straight to its cluster: {started:?}"
    );
    assert!(!started.iter().any(|m| m.starts_with("ordinal 2") || m.starts_with("ordinal 3")), "{started:?}");

    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_without_openkruise_gets_no_slice_and_the_condition_says_why() {
    let f = Federation::start_flags(&["east", "west", "north"], &["--kruise", "east,west"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f, "kv", Backend::AdvancedStatefulSet, &["east", "west", "north"], 4)).await;
    f.create(&federation(&f, "plain", Backend::StatefulSet, &["north"], 1)).await;
    wait_running(&f, "kv", &[("east", &[0, 1]), ("west", &[2, 3])], "kv placed on the members with OpenKruise").await;
    eventually("kv is Degraded, naming north and OpenKruise", || async {
        let status = f.status("kv").await;
        status.conditions.iter().any(|c| {
            c.type_ == "Degraded"
                && c.status == "True"
                && c.message.contains("north (Incompatible")
                && c.message.contains("statefulsets.apps.kruise.io/v1beta1")
        })
    })
    .await;
    // The MemberClusters say which members serve Advanced StatefulSets.
    let mcs: Api<spanset_api::MemberCluster> = Api::all(f.host.clone());
    eventually("the MemberClusters report OpenKruise: east and west yes, north no", || async {
        let mut seen = Vec::new();
        for m in ["east", "west", "north"] {
            let status = mcs.get(m).await.ok().and_then(|mc| mc.status);
            seen.push(status.and_then(|s| s.serves_advanced_stateful_sets));
        }
        seen == [Some(true), Some(true), Some(false)]
    })
    .await;
    // Nothing was written for kv in north: no write request of an Advanced StatefulSet (kv is
    // the only one) nor one naming kv ever reached north from spanset's identity; and the
    // apps/v1 federation runs there all the same.
    let sent: Vec<String> = f
        .spanset_write_requests("north", 0)
        .into_iter()
        .filter(|r| r.contains(" statefulsets.apps.kruise.io ") || r.ends_with("/kv"))
        .collect();
    assert!(sent.is_empty(), "north received writes of kv from spanset's identity: {sent:?}");
    assert!(f.pod_uids_now("north", "kv").await.is_empty(), "no pod of kv in north");
    wait_running(&f, "plain", &[("north", &[0])], "an apps/v1 federation runs in north").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_changed_under_running_members_blocks_and_writes_nothing() {
    let f = Federation::start_flags(&["east", "west"], &["--kruise"]).await;
    let c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f, "db", Backend::StatefulSet, &["east", "west"], 2)).await;
    wait_running(&f, "db", &[("east", &[0]), ("west", &[1])], "db placed").await;
    c.wait_quiet("default/db");
    let before = f.placement_now("db").await;
    let marks: Vec<usize> = f.members.iter().map(|m| f.audit(m).len()).collect();
    // Today's schema refuses the change (`spec.backend is immutable`); a cluster whose CRD
    // predates that rule lets it through, and the controller must survive it.
    f.drop_crd_rule("spec.backend is immutable").await;
    let patch = json!({"spec": {"backend": "AdvancedStatefulSet", "replicas": 4}});
    f.api().patch("db", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("backend patched");
    eventually("db is Blocked with BackendMismatch naming spec.backend", || async {
        f.status("db").await.conditions.iter().any(|c| {
            c.type_ == "Blocked"
                && c.status == "True"
                && c.reason == "BackendMismatch"
                && c.message.starts_with("spec.backend: AdvancedStatefulSet")
                && c.message.contains("east (apps/v1 StatefulSet)")
        })
    })
    .await;
    c.wait_reconciles("default/db", 3);
    for (m, since) in f.members.iter().zip(marks) {
        let sent = f.spanset_write_requests(m, since);
        assert!(sent.is_empty(), "{m} received writes from spanset's identity while db was blocked: {sent:?}");
    }
    assert_eq!(f.placement_now("db").await, before, "the pods run on, untouched");
    for m in ["east", "west"] {
        assert!(advanced_spec(&f.member(m).await, "db").await.is_none(), "no Advanced StatefulSet in {m}");
    }
    // Set back, the federation carries on with the new replica count: west, whose slice
    // borders the new ordinals, takes them (`onScale: Keep`: east's ordinal 1 stays put).
    let back = json!({"spec": {"backend": "StatefulSet"}});
    f.api().patch("db", &PatchParams::default(), &Patch::Merge(&back)).await.expect("backend patched back");
    wait_running(&f, "db", &[("east", &[0]), ("west", &[1, 2, 3])], "db grew to 4 once set back").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_image_is_rolled_in_place_in_every_member_with_in_place_if_possible() {
    let f = Federation::start_flags(&["east", "west"], &["--kruise"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut fsts = federation(&f, "kv", Backend::AdvancedStatefulSet, &["east", "west"], 4);
    fsts.spec.template.update_strategy = Some(
        serde_json::from_value(json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}})).expect("a strategy"),
    );
    f.create(&fsts).await;
    wait_running(&f, "kv", &[("east", &[0, 1]), ("west", &[2, 3])], "kv placed").await;
    let before = f.placement("kv").await;
    // The member objects carry the policy; the pods the readiness gate Kruise injects.
    let east = f.member("east").await;
    let api = Api::<DynamicObject>::namespaced_with(east.clone(), "default", &advanced());
    let stored = api.get("kv").await.expect("east's Advanced StatefulSet");
    assert_eq!(stored.data["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"], "InPlaceIfPossible");
    let pod = Api::<Pod>::namespaced(east.clone(), "default").get("kv-0").await.expect("kv-0");
    let gates: Vec<String> =
        pod.spec.and_then(|s| s.readiness_gates).into_iter().flatten().map(|g| g.condition_type).collect();
    assert_eq!(gates, ["InPlaceUpdateReady"]);

    let image = json!({"spec": {"template": {"template": {"spec": {"containers": [{"name": "redis", "image": "redis:7.4",
        "ports": [{"name": "redis", "containerPort": 6379}]}]}}}}});
    f.api().patch("kv", &PatchParams::default(), &Patch::Merge(&image)).await.expect("image patched");
    eventually("every pod runs redis:7.4 and is Ready", || async {
        let mut all = true;
        for m in ["east", "west"] {
            let pods: Api<Pod> = Api::namespaced(f.member(m).await, "default");
            let lp = ListParams::default().labels("spanset.dev/federation=kv");
            for p in pods.list(&lp).await.map(|l| l.items).unwrap_or_default() {
                let status = p.status.unwrap_or_default();
                let running = status.container_statuses.unwrap_or_default().first().map(|c| c.image.clone());
                let ready =
                    status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True");
                all &= running.as_deref() == Some("redis:7.4") && ready;
            }
        }
        all && f.status("kv").await.ready.as_deref() == Some("4/4")
    })
    .await;
    assert_eq!(f.placement("kv").await, before, "every pod was updated in place: same ordinals, same uids");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openkruise_leaving_a_member_re_homes_its_ordinals_and_returning_brings_them_back() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let f = Federation::start_flags(&["east", "west"], &["--kruise"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f, "kv", Backend::AdvancedStatefulSet, &["east", "west"], 4)).await;
    f.create(&federation(&f, "plain", Backend::StatefulSet, &["west"], 1)).await;
    wait_running(&f, "kv", &[("east", &[0, 1]), ("west", &[2, 3])], "kv placed").await;
    wait_running(&f, "plain", &[("west", &[0])], "plain placed").await;

    // OpenKruise is removed from west: its CRD, and with it every Advanced StatefulSet there.
    let crds: Api<CustomResourceDefinition> = Api::all(f.member("west").await);
    let mut crd = crds.get("statefulsets.apps.kruise.io").await.expect("west has OpenKruise");
    crds.delete("statefulsets.apps.kruise.io", &Default::default()).await.expect("CRD deleted");
    wait_running(&f, "kv", &[("east", &[0, 1, 2, 3])], "west's ordinals re-homed to east").await;
    let status = f.status("kv").await;
    let degraded = status.conditions.iter().find(|c| c.type_ == "Degraded").expect("Degraded");
    assert!(degraded.message.contains("west (Incompatible"), "{}", degraded.message);
    // West itself is fine: its apps/v1 federation runs on, and it stays Reachable.
    assert_eq!(f.status("plain").await.ready.as_deref(), Some("1/1"));
    let mcs: Api<spanset_api::MemberCluster> = Api::all(f.host.clone());
    eventually("west's MemberCluster reports Reachable (a missing resource is not a dead member)", || async {
        let west = mcs.get("west").await.ok().and_then(|m| m.status);
        west.is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Reachable" && c.status == "True"))
    })
    .await;
    let cluster_unreachable = f.status("kv").await.conditions.into_iter().find(|c| c.type_ == "ClusterUnreachable");
    assert_eq!(cluster_unreachable.map(|c| c.status).as_deref(), Some("False"));

    // OpenKruise comes back: discovery notices (within 30 s) and west gets its share again.
    crd.metadata.resource_version = None;
    crd.metadata.uid = None;
    crd.metadata.creation_timestamp = None;
    crd.status = None;
    crds.create(&Default::default(), &crd).await.expect("CRD created again");
    eventually("west's MemberCluster says it serves Advanced StatefulSets again", || async {
        let west = mcs.get("west").await.ok().and_then(|m| m.status);
        west.is_some_and(|s| s.serves_advanced_stateful_sets == Some(true))
    })
    .await;
    wait_running(&f, "kv", &[("east", &[0, 1]), ("west", &[2, 3])], "west holds 2-3 again").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openkruise_that_drops_ordinals_excludes_its_member_for_advanced_federations_only() {
    let f = Federation::start_flags(&["east", "west"], &["--kruise"]).await;
    // West's OpenKruise is too old for `.spec.ordinals`: its schema prunes the field.
    f.sandbox.ctl_ok(&["drop-ordinals", "west", "true", "--kruise"]);
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f, "kv", Backend::AdvancedStatefulSet, &["east", "west"], 4)).await;
    f.create(&federation(&f, "plain", Backend::StatefulSet, &["east", "west"], 2)).await;
    wait_running(&f, "kv", &[("east", &[0, 1, 2, 3])], "kv entirely in east").await;
    let degraded = f.status("kv").await.conditions.into_iter().find(|c| c.type_ == "Degraded").expect("Degraded");
    assert!(
        degraded.message.contains("west (Incompatible: its OpenKruise drops .spec.ordinals of Advanced StatefulSets"),
        "{}",
        degraded.message
    );
    // The apps/v1 federation is not affected: west keeps its apps/v1 ordinals.
    wait_running(&f, "plain", &[("east", &[0]), ("west", &[1])], "plain over both").await;
    // West's Advanced StatefulSet was created empty and never given a slice.
    assert_eq!(advanced_spec(&f.member("west").await, "kv").await.map(|s| s.1), Some(0));
    f.assert_ledger_clean();
}
