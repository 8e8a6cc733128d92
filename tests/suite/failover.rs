//! Failover end to end against the sandbox: a hung member and a refusing one are detected with
//! their reasons while a short blip flips nothing; the Manual policy holds a lost member's
//! ordinals until `spanset fence`, then re-homes them, shrinks the member first when it
//! answers again and keeps it fenced until `spanset unfence`; the Automatic policy fences by
//! itself, also a member lost while no controller ran (its silence counted from the watcher's
//! start, its slice held from the status meanwhile); and fencing a member that is only partitioned, its pods still running, is the
//! operator error the ledger exposes.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node};
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use spanset::cli::sandbox::example;
use spanset_api::{FederatedStatefulSet, MemberCluster};
use spanset_controller::decisions::reconcile::DEFAULT_UNREACHABLE_AFTER;
use support::{
    federation::{Controller, Federation},
    timeline,
};

use crate::support;

const THIRDS: [(&str, i32, i32); 3] = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];

/// The example federation with a failover section.
fn federation(members: &[String], failover: serde_json::Value) -> FederatedStatefulSet {
    let mut f = serde_json::to_value(example(members)).unwrap();
    f["spec"]["failover"] = failover;
    serde_json::from_value(f).unwrap()
}

fn condition(
    conds: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    type_: &str,
) -> Option<(String, String, String, String)> {
    conds
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone(), c.last_transition_time.0.to_string()))
}

async fn member_cluster(f: &Federation, name: &str) -> MemberCluster {
    Api::<MemberCluster>::all(f.host.clone()).get(name).await.expect("MemberCluster read")
}

async fn reachable(f: &Federation, name: &str) -> Option<(String, String, String, String)> {
    let mc = member_cluster(f, name).await;
    condition(&mc.status.map(|s| s.conditions).unwrap_or_default(), "Reachable")
}

/// Waits until the listed members' StatefulSets hold exactly these slices and the
/// federation reports `ready`.
async fn wait_slices(f: &Federation, want: &[(&str, i32, i32)], ready: &str, what: &str) {
    support::eventually(what, || async {
        let mut ok = f.status("redis").await.ready.as_deref() == Some(ready);
        for (m, s, r) in want {
            ok &= f.member_slice(m, "redis").await == Some((*s, *r));
        }
        ok
    })
    .await;
}

async fn events_about(f: &Federation, name: &str) -> Vec<(String, String, String)> {
    let api: Api<Event> = Api::namespaced(f.host.clone(), "default");
    api.list(&ListParams::default())
        .await
        .expect("events listed")
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

/// How many of the controller's GETs to a member (its probes among them) got no answer.
fn failed_gets(c: &Controller, member: &str) -> f64 {
    let labels = [format!("cluster=\"{member}\""), "code=\"error\"".into(), "verb=\"get\"".into()];
    c.metrics_text()
        .lines()
        .filter(|l| {
            l.starts_with("spanset_member_http_requests_total{") && labels.iter().all(|x| l.contains(x.as_str()))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Cuts `member` off for longer than a probe period (its next probe fails) and shorter than
/// `threshold` seconds, once every member is Reachable; answers the member's `Reachable`
/// condition and the federation's `ClusterUnreachable` from before. The silence is measured
/// by the controller's own contact times (its last-contact metric moves with every answer):
/// from the last answer before the cut (read while cut off) to the first seen after the heal,
/// at least as long as the real one. A blip that a loaded machine stretched towards the
/// threshold is not one, and is tried again: what the caller then asserts holds for a silence
/// longer than a probe period and shorter than the threshold.
async fn blip(
    f: &Federation,
    c: &Controller,
    member: &str,
    threshold: f64,
) -> ((String, String, String, String), (String, String, String, String)) {
    let period = spanset_controller::actors::watcher::PROBE_PERIOD.as_secs_f64();
    let unix_now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    for _ in 0..5 {
        support::eventually("every member Reachable, the federation's condition False", || async {
            let mut all = true;
            for m in &f.members {
                all &= reachable(f, m).await.is_some_and(|c| c.0 == "True");
            }
            all && condition(&f.status("redis").await.conditions, "ClusterUnreachable").is_some_and(|c| c.0 == "False")
        })
        .await;
        let before = (
            reachable(f, member).await.unwrap(),
            condition(&f.status("redis").await.conditions, "ClusterUnreachable").unwrap(),
        );
        let failed = failed_gets(c, member);
        f.sandbox.ctl_ok(&["partition", member]);
        // Cut off (its connections closed): its last answer stays put from here on.
        let last = c.last_contact(member);
        // A call failed, and a probe period has passed without an answer: its next probe fails.
        support::eventually("a failed call, and a probe period without an answer", || async {
            failed_gets(c, member) > failed && unix_now() > last + period + 0.5
        })
        .await;
        assert_eq!(c.last_contact(member), last, "{member} answered while cut off");
        f.sandbox.ctl_ok(&["heal", member]);
        support::eventually("an answer again", || async { c.last_contact(member) > last }).await;
        let silence = c.last_contact(member) - last;
        println!("blip of {member}: {silence:.1} s without an answer");
        if silence < threshold - 0.5 {
            return before;
        }
    }
    panic!("five blips of {member} were each stretched to the {threshold} s threshold");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_and_refusing_members_are_detected_with_their_reasons_and_a_blip_flips_nothing() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f.members, serde_json::json!({"unreachableAfterSeconds": 6}))).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    let fsts_conds = || async { f.status("redis").await.conditions };
    let (before_member, before_fsts) = blip(&f, &c, "west", 6.0).await;
    // West takes part in a change after the blip: the controller has seen it answer again
    // (`onScale: Rebalance`, so that a scale re-divides by weight and west grows).
    let scale = serde_json::json!({"spec": {"replicas": 9, "placement": {"onScale": "Rebalance"}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(scale)).await.unwrap();
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3), ("central", 6, 3)], "scaled to 9 after the blip").await;
    // Whole seconds of lastTransitionTime: any flip and back would have changed them.
    assert_eq!(reachable(&f, "west").await.unwrap(), before_member, "a blip never flips the member's condition");
    assert_eq!(
        condition(&fsts_conds().await, "ClusterUnreachable").unwrap(),
        before_fsts,
        "a blip never flips the federation's condition"
    );

    // A hung member and a refusing one.
    let lost = Instant::now();
    f.sandbox.ctl_ok(&["partition", "central", "--hang"]);
    f.sandbox.ctl_ok(&["partition", "west"]);
    support::eventually("the federation reports both members unreachable with reasons", || async {
        condition(&fsts_conds().await, "ClusterUnreachable")
            .is_some_and(|c| c.0 == "True" && c.2.contains("central (Timeout)") && c.2.contains("west (Refused)"))
    })
    .await;
    println!("federation detection at unreachableAfterSeconds 6: {:?}", lost.elapsed());
    // Silence counts from the last answer: the condition turned once the first of the two had
    // been silent for the threshold, never earlier. Both instants are the controller's own (the
    // last probe answers it recorded, the transition it wrote), so no delay of this test's
    // makes this pass or fail; lastTransitionTime holds whole seconds.
    let turned: jiff::Timestamp =
        condition(&fsts_conds().await, "ClusterUnreachable").unwrap().3.parse().expect("lastTransitionTime");
    let last = c.last_contact("central").min(c.last_contact("west"));
    assert!(
        turned.as_millisecond() as f64 / 1000.0 + 1.0 >= last + 6.0,
        "ClusterUnreachable turned at {turned}, before 6 s of silence since the last answer at {last}"
    );
    println!("MemberCluster detection at the default {DEFAULT_UNREACHABLE_AFTER:?}: {:?}", lost.elapsed());
    // The lost members' ordinals stay where they are: east takes none of central's 6-8 (a
    // move from west may have started in the moment west still answered and central did not).
    let (start, replicas) = f.member_slice("east", "redis").await.unwrap();
    assert!(start == 0 && replicas <= 6, "east holds {start}+{replicas}, none of central's ordinals");
    assert!(f.status("redis").await.moves.iter().all(|m| m.from != "central"), "nothing leaves central");
    f.sandbox.ctl_ok(&["heal", "central"]);
    f.sandbox.ctl_ok(&["heal", "west"]);
    support::eventually("both Reachable again", || async {
        reachable(&f, "central").await.is_some_and(|c| c.0 == "True")
            && reachable(&f, "west").await.is_some_and(|c| c.0 == "True")
    })
    .await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_policy_rehomes_a_lost_member_only_once_fenced_and_shrinks_it_first_when_it_returns() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let c = Controller::start(&f.sandbox, "controller");
    let mut fsts = federation(&f.members, serde_json::json!({"policy": "Manual", "unreachableAfterSeconds": 6}));
    // As databases often do, the pods tolerate an unreachable node (here for ever): nothing
    // evicts central's pods before it returns, so each is still bound and not being deleted
    // unless spanset deletes it (an OrderedReady scale-down deletes one, which then waits on its
    // dead node, and leaves the other to restart when the nodes power on).
    fsts.spec.template.template.spec.as_mut().expect("a pod spec").tolerations =
        Some(vec![k8s_openapi::api::core::v1::Toleration {
            key: Some("node.kubernetes.io/unreachable".into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            ..Default::default()
        }]);
    f.create(&fsts).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;

    // A reachable member is not fenced without --force.
    let refused = f.spanset(&["fence", "central", "--reason", "drill"]).await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is not Unreachable"), "{refused:?}");
    assert!(!member_cluster(&f, "central").await.spec.fenced);

    f.lose("central").await;
    support::eventually("central Unreachable in its MemberCluster", || async {
        reachable(&f, "central").await.is_some_and(|c| c.0 == "False")
    })
    .await;
    // The healthy members keep what they hold (an unreachable member is no placement change:
    // onScale Keep), and central's ordinals 4 and 5 start nowhere until an operator fences it.
    wait_slices(&f, &[("east", 0, 2), ("west", 2, 2)], "4/6", "east and west keep theirs around central").await;
    // The controller gets reconciles to act wrongly in before the fence; the ledger judges them
    // once the ordinals are re-homed.
    tokio::task::block_in_place(|| c.wait_reconciles("redis", 3));
    for m in ["east", "west"] {
        let (start, replicas) = f.member_slice(m, "redis").await.unwrap();
        assert!(start + replicas <= 4, "{m} holds none of central's ordinals before the fence");
    }

    let fenced = jiff::Timestamp::now();
    let out = f.spanset(&["fence", "central", "--reason", "datacenter flooded"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("membercluster/central fenced"));
    let mc = member_cluster(&f, "central").await;
    assert!(mc.spec.fenced);
    assert_eq!(mc.annotations().get("spanset.dev/fence-reason").map(String::as_str), Some("datacenter flooded"));
    assert!(
        mc.annotations().contains_key("spanset.dev/fenced-by")
            && mc.annotations().contains_key("spanset.dev/fenced-at")
    );
    assert!(
        events_about(&f, "central")
            .await
            .iter()
            .any(|e| e.0 == "Warning" && e.1 == "Fenced" && e.2.contains("flooded")),
        "a Warning Event records the fence"
    );
    // Fencing again changes nothing; with --force it fences anew (a new fenced-at, the new
    // reason): a member heard from since its fence is declared dead again.
    let again = f.spanset(&["fence", "central", "--reason", "other"]).await;
    assert!(again.status.success() && String::from_utf8_lossy(&again.stdout).contains("already fenced"));
    let at = |mc: &MemberCluster| mc.annotations().get("spanset.dev/fenced-at").cloned();
    let first = at(&member_cluster(&f, "central").await);
    // (fenced-at has whole seconds: the new one must fall in another.)
    let second = || jiff::Timestamp::now().round(jiff::Unit::Second).map(|t| t.to_string()).ok();
    support::eventually("the next second", || async { second() != first }).await;
    let anew = f.spanset(&["fence", "central", "--reason", "still flooded", "--force"]).await;
    assert!(anew.status.success(), "{anew:?}");
    let mc = member_cluster(&f, "central").await;
    assert!(mc.spec.fenced && at(&mc) != first, "{:?} then {:?}", first, at(&mc));
    assert_eq!(mc.annotations().get("spanset.dev/fence-reason").map(String::as_str), Some("still flooded"));

    // Re-homed among the healthy members (weights 1:1 of the rest).
    wait_slices(&f, &[("east", 0, 3), ("west", 3, 3)], "6/6", "central's ordinals re-homed").await;
    assert_rehomed_after(&f, fenced);
    // Central was never shrunk (it has not answered since); unfenced now, its own StatefulSet
    // controller would restart 4-5 when it returns. Refused, naming them.
    let refused = f.spanset(&["unfence", "central"]).await;
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("default/redis ordinals 4-5") && stderr.contains("--force"), "{stderr}");
    assert!(member_cluster(&f, "central").await.spec.fenced, "nothing changed");

    // Central comes back: its nodes restart, the partition heals. Its StatefulSet is shrunk
    // before anything else, and it stays fenced.
    let nodes: Api<Node> = Api::all(f.member("east").await);
    let names: Vec<String> =
        nodes.list(&ListParams::default()).await.unwrap().items.iter().map(|n| n.name_any()).collect();
    // Its API answers first and spanset shrinks it; only then do its nodes restart (were they
    // to restart first, central's own StatefulSet controller would bring back pods of its stale
    // slice before anyone could shrink it: fencing promises those workloads stay dead).
    f.sandbox.ctl_ok(&["heal", "central"]);
    let central_pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(f.member("central").await, "default");
    support::eventually("central's StatefulSet shrunk to nothing and every pod of it being deleted", || async {
        let pods = central_pods.list(&ListParams::default()).await.unwrap().items;
        f.member_slice("central", "redis").await.is_some_and(|s| s.1 == 0)
            && pods.iter().all(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    for n in names.iter().filter(|n| n.starts_with("node-")) {
        f.sandbox.ctl_ok(&["node-up", "central", n]);
    }
    assert!(member_cluster(&f, "central").await.spec.fenced, "still fenced until an operator unfences");
    // The status shows central holding nothing once the shrink is observed: unfence then goes.
    support::eventually("the status shows central shrunk", || async {
        f.status("redis").await.slices.iter().all(|s| s.cluster != "central" || s.replicas == 0)
    })
    .await;
    assert_eq!(f.member_slice("east", "redis").await, Some((0, 3)));

    let out = f.spanset(&["unfence", "central"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mc = member_cluster(&f, "central").await;
    assert!(!mc.spec.fenced && mc.annotations().contains_key("spanset.dev/unfenced-by"));
    f.wait_settled("redis", &THIRDS, "thirds again after the unfence").await;
    f.assert_ledger_clean();
}

/// Fencing asserts that a member's workloads are dead. A member whose nodes only lost their
/// network (the book's case) still runs its containers, so once its ordinals are re-homed the
/// ledger records them running in two clusters: the ledger sees what a StatefulSet fears, and
/// the failover tests that stay clean do so because their loss is a real one (a power-off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_a_member_whose_nodes_only_lost_their_network_runs_its_ordinals_twice() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f.members, serde_json::json!({"policy": "Manual", "unreachableAfterSeconds": 6}))).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    let nodes: Api<Node> = Api::all(f.member("central").await);
    for n in nodes.list(&ListParams::default()).await.expect("nodes listed").items {
        if n.name_any().starts_with("node-") {
            f.sandbox.ctl_ok(&["node-down", "central", &n.name_any()]);
        }
    }
    f.sandbox.ctl_ok(&["partition", "central"]);
    support::eventually("central Unreachable in its MemberCluster", || async {
        reachable(&f, "central").await.is_some_and(|c| c.0 == "False")
    })
    .await;
    let out = f.spanset(&["fence", "central", "--reason", "its network is gone"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_slices(&f, &[("east", 0, 3), ("west", 3, 3)], "6/6", "central's ordinals re-homed").await;
    let west: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(f.member("west").await, "default");
    support::eventually("redis-4 and redis-5 running in west", || async {
        let mut both = true;
        for pod in ["redis-4", "redis-5"] {
            both &= west
                .get_opt(pod)
                .await
                .ok()
                .flatten()
                .is_some_and(|p| p.status.and_then(|s| s.phase).as_deref() == Some("Running"));
        }
        both
    })
    .await;
    let ledger: serde_json::Value = serde_json::from_str(&f.sandbox.ctl_ok(&["ledger"])).expect("ledger JSON");
    let violations: Vec<String> = ledger["violations"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect();
    for k in [4, 5] {
        assert!(
            violations.iter().any(|v| v.contains(&format!("ordinal {k} ran in two places at once"))
                && v.contains("central pod redis-")
                && v.contains("west pod redis-")),
            "ordinal {k} recorded in central and west: {violations:?}\n{}",
            ledger["incarnations"]
        );
    }
    let out = f.sandbox.ctl(&["ledger", "--check"]);
    assert!(!out.status.success(), "ledger --check fails on the violation");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_policy_fences_a_lost_member_by_itself_and_says_so() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let c = Controller::start(&f.sandbox, "controller");
    let failover = serde_json::json!({"policy": "Automatic", "unreachableAfterSeconds": 6, "fenceAfterSeconds": 2});
    f.create(&federation(&f.members, failover)).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    let lost = Instant::now();
    f.lose("central").await;
    wait_slices(&f, &[("east", 0, 3), ("west", 3, 3)], "6/6", "central's ordinals re-homed automatically").await;
    println!("automatic failover, loss to re-homed: {:?}", lost.elapsed());
    // Fenced once central had been silent for unreachable (6 s) + fence (2 s) since its last
    // answer, and nothing of it started elsewhere before the fence.
    let fenced = f.fenced_at("central").await;
    assert_not_before(fenced, c.last_contact("central") + 8.0, "the fence, 8 s after central's last answer");
    assert_rehomed_after(&f, fenced);
    let mc = member_cluster(&f, "central").await;
    assert!(mc.spec.fenced);
    assert!(mc.annotations().get("spanset.dev/fenced-by").is_some_and(|b| b.contains("automatic")), "{mc:?}");
    assert!(
        events_about(&f, "central")
            .await
            .iter()
            .any(|e| e.0 == "Warning" && e.1 == "Fenced" && e.2.contains("automatic")),
        "a Warning Event says it was automatic"
    );
    let log = c.log_text();
    assert!(log.contains("WARN") && log.contains("may still run its pods"), "a warn line names the risk");
    let metrics = c.metrics_text();
    assert!(metrics.contains("spanset_failovers_total{cluster=\"central\"} 1"), "a metric counts it: {metrics}");
    assert!(metrics.contains("spanset_member_fenced{cluster=\"central\"} 1"), "{metrics}");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_lost_while_no_controller_ran_is_fenced_automatically_by_the_next_one() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let mut first = Controller::start(&f.sandbox, "first");
    let failover = serde_json::json!({"policy": "Automatic", "unreachableAfterSeconds": 6, "fenceAfterSeconds": 2});
    f.create(&federation(&f.members, failover)).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    first.terminate();
    // Central is lost while no controller runs: the next one never hears from it.
    f.lose("central").await;
    let started = jiff::Timestamp::now();
    let _second = Controller::start(&f.sandbox, "second");
    // Until the fence, central's 4-5 are held where they were last seen, never grown elsewhere.
    wait_slices(&f, &[("east", 0, 3), ("west", 3, 3)], "6/6", "central fenced and its ordinals re-homed").await;
    // Its watcher started after the process did: silence counted from there.
    let fenced = f.fenced_at("central").await;
    let from = started.as_millisecond() as f64 / 1000.0;
    assert_not_before(fenced, from + 8.0, "the fence, unreachable (6 s) + fence (2 s) after the watcher's start");
    assert_rehomed_after(&f, fenced);
    let mc = member_cluster(&f, "central").await;
    assert!(mc.spec.fenced && mc.annotations().get("spanset.dev/fenced-by").is_some_and(|b| b.contains("automatic")));
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_a_member_that_is_only_partitioned_is_caught_by_the_ledger() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f.members, serde_json::json!({"unreachableAfterSeconds": 6}))).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    // Only the API is cut off: central's pods keep running.
    f.sandbox.ctl_ok(&["partition", "central"]);
    support::eventually("central Unreachable", || async {
        reachable(&f, "central").await.is_some_and(|c| c.0 == "False")
    })
    .await;
    let out = f.spanset(&["fence", "central", "--reason", "wrongly believed dead"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_slices(&f, &[("east", 0, 3), ("west", 3, 3)], "6/6", "central's ordinals given to west").await;
    let west: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(f.member("west").await, "default");
    support::eventually("redis-4 and redis-5 running in west", || async {
        let mut both = true;
        for pod in ["redis-4", "redis-5"] {
            both &= west.get_opt(pod).await.ok().flatten().is_some_and(|p| {
                p.status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            });
        }
        both
    })
    .await;
    let check = f.sandbox.ctl(&["ledger", "--check"]);
    assert!(!check.status.success(), "the ledger reports the identities that ran twice");
    let report = String::from_utf8_lossy(&check.stdout).to_string() + &String::from_utf8_lossy(&check.stderr);
    assert!(report.contains("redis-4") || report.contains("redis-5"), "{report}");
    // Central still has 4-5 written (never shrunk): unfence is refused, naming them, and
    // `--force` is the operator's explicit word.
    let refused = f.spanset(&["unfence", "central"]).await;
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("default/redis ordinals 4-5"), "{refused:?}");
    assert!(member_cluster(&f, "central").await.spec.fenced);
    let forced = f.spanset(&["unfence", "central", "--force"]).await;
    assert!(forced.status.success(), "{}", String::from_utf8_lossy(&forced.stderr));
    assert!(!member_cluster(&f, "central").await.spec.fenced);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_failure_inside_a_member_is_not_cluster_loss_and_moves_nothing() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(
        &f.members,
        serde_json::json!({"policy": "Automatic", "unreachableAfterSeconds": 6, "fenceAfterSeconds": 1}),
    ))
    .await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(f.member("central").await, "default");
    let node = pods.get("redis-4").await.unwrap().spec.and_then(|s| s.node_name).expect("redis-4 is scheduled");
    let on_node = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str()))
        .count();
    f.sandbox.ctl_ok(&["node-down", "central", &node]);
    // The book's case: the pod is evicted and stays Terminating, as nobody confirms its end.
    support::eventually("redis-4 stuck Terminating on its dead node", || async {
        pods.get_opt("redis-4").await.ok().flatten().is_some_and(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    // Past unreachableAfterSeconds + fenceAfterSeconds of the Automatic policy: central answers
    // all along, so it is neither unreachable nor fenced, and nothing moves.
    let since = Instant::now();
    support::eventually("the federation has watched past the failover thresholds", || async {
        since.elapsed() > Duration::from_secs(8)
            && condition(&f.status("redis").await.conditions, "ClusterUnreachable").is_some_and(|c| c.0 == "False")
    })
    .await;
    assert!(!member_cluster(&f, "central").await.spec.fenced);
    assert_eq!(reachable(&f, "central").await.map(|c| c.0), Some("True".into()));
    assert!(f.status("redis").await.moves.is_empty());
    for (m, s, r) in THIRDS {
        assert_eq!(f.member_slice(m, "redis").await, Some((s, r)), "{m} keeps its slice");
    }
    let ready = format!("{}/6", 6 - on_node);
    support::eventually("the dead node's pods counted down, not moved", || async {
        f.status("redis").await.ready.as_deref() == Some(ready.as_str())
    })
    .await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_lost_during_a_migration_is_fenced_and_the_migration_completes() {
    let f = Federation::start(&["east", "west", "central"]).await;
    // The round that records a move in phase Draining holds its member writes until `go`
    // exists: central is lost with its own move recorded and its shrink about to leave.
    let go = f.sandbox.dir.path().join("go");
    let hold = format!("hold-writes-Draining=return({})", go.display());
    let c = Controller::start_with(&f.sandbox, "controller", &[("FAILPOINTS", &hold)]);
    f.create(&federation(&f.members, serde_json::json!({"policy": "Manual", "unreachableAfterSeconds": 6}))).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    // Central's ordinals go to west (east keeps 0-1, west grows to 2-5): central is the only source.
    let body = serde_json::json!({"spec": {"placement": {"clusters": [
        {"name": "east", "weight": 1}, {"name": "west", "weight": 2}, {"name": "central", "weight": 0}]}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(body)).await.unwrap();
    let moving = f.wait_moving_from("redis", "central", "Draining").await;
    f.lose("central").await;
    std::fs::write(&go, "").expect("the held writes released");
    let now_moving = f.moving_from("redis", "central").await;
    assert!(moving.iter().all(|k| now_moving.contains(k)), "central's moves {moving:?} in flight after the loss");
    support::eventually("central Unreachable", || async {
        reachable(&f, "central").await.is_some_and(|c| c.0 == "False")
    })
    .await;
    // The controller gets reconciles to finish the move wrongly in; it may not before the fence.
    tokio::task::block_in_place(|| c.wait_reconciles("redis", 3));
    let still = f.moving_from("redis", "central").await;
    assert!(moving.iter().all(|k| still.contains(k)), "central's moves {moving:?} still in flight before the fence");
    let fenced = jiff::Timestamp::now();
    let out = f.spanset(&["fence", "central", "--reason", "lost mid-migration"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_slices(&f, &[("east", 0, 2), ("west", 2, 4)], "6/6", "central's ordinals in west").await;
    assert!(f.status("redis").await.moves.is_empty());
    assert_rehomed_after(&f, fenced);
    f.assert_ledger_clean();
}

/// Asserts that a `fenced-at` annotation (whole seconds, rounded to the nearest) is no earlier
/// than `earliest` (Unix seconds) allows.
fn assert_not_before(fenced: jiff::Timestamp, earliest: f64, what: &str) {
    let at = fenced.as_millisecond() as f64 / 1000.0;
    assert!(at + 0.5 >= earliest, "{what}: fenced at {fenced}, {:.1} s too early", earliest - at);
}

/// Asserts over the whole run that central's ordinals 4 and 5 started elsewhere only after
/// `fenced`, and did: the moment an operator fenced central, or its `fenced-at` annotation
/// (whole seconds, rounded to the nearest: half a second is allowed).
fn assert_rehomed_after(f: &Federation, fenced: jiff::Timestamp) {
    let runs = timeline::runs(&f.sandbox, "redis");
    let early = timeline::started_elsewhere_before(&runs, "central", &[4, 5], fenced - Duration::from_millis(500));
    assert!(early.is_empty(), "central's ordinals started elsewhere before its fence at {fenced}: {early:?}");
    assert!(runs.iter().any(|r| r.cluster != "central" && r.ordinal == 4), "4 re-homed: {runs:?}");
}

/// Whether a pod of that name exists in a member (running or terminating).
async fn pod_exists(f: &Federation, member: &str, pod: &str) -> bool {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(f.member(member).await, "default");
    pods.get_opt(pod).await.expect("pod read").is_some()
}

/// Fails if east or west has a pod of ordinal 4 or 5 while central still has its pod object:
/// the survivors are read first, so a pod seen in central afterwards existed then too.
async fn assert_not_twice(f: &Federation, when: &str) {
    for pod in ["redis-4", "redis-5"] {
        for m in ["east", "west"] {
            if pod_exists(f, m, pod).await {
                assert!(
                    !pod_exists(f, "central", pod).await,
                    "{when}: {pod} started in {m} while central's still exists"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_member_is_kept_while_its_pods_may_still_run_and_goes_once_it_holds_nothing() {
    // `kubectl delete mc central` must not erase what spanset knows of central: 4-5 would start
    // in west while their pods still exist (stuck Terminating) in central.
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f.members, serde_json::json!({"unreachableAfterSeconds": 6}))).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    let mcs: Api<MemberCluster> = Api::all(f.host.clone());
    support::eventually("the controller's finalizer on every MemberCluster", || async {
        let list = mcs.list(&ListParams::default()).await.unwrap();
        list.items.len() == 3
            && list.items.iter().all(|mc| mc.finalizers().iter().any(|x| x == "spanset.dev/member-in-use"))
    })
    .await;
    // Every node of central stops; its API still answers.
    let nodes: Api<Node> = Api::all(f.member("central").await);
    let names: Vec<String> =
        nodes.list(&ListParams::default()).await.unwrap().items.iter().map(|n| n.name_any()).collect();
    for n in names.iter().filter(|n| n.starts_with("node-")) {
        f.sandbox.ctl_ok(&["node-down", "central", n]);
    }
    // Central leaves the placement: its slice is shrunk, 4-5 wait for their pods to be gone.
    let body = serde_json::json!({"spec": {"placement": {"clusters": [
        {"name": "east", "weight": 1}, {"name": "west", "weight": 1}]}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(body)).await.unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(f.member("central").await, "default");
    // West takes 4 next and 5 after it, so central gives up 4 first and keeps 5 meanwhile.
    support::eventually("central gave up 4, its pods 4-5 stuck Terminating, 4's move recorded", || async {
        let mut ok = f.member_slice("central", "redis").await == Some((5, 1));
        for pod in ["redis-4", "redis-5"] {
            ok &= pods.get_opt(pod).await.ok().flatten().is_some_and(|p| p.metadata.deletion_timestamp.is_some());
        }
        ok && f.status("redis").await.moves.iter().any(|m| m.ordinal == 4 && m.from == "central")
    })
    .await;
    assert_not_twice(&f, "before the delete").await;
    // unjoin is refused (moves), and changes nothing.
    let unjoin = |args: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_spanset"));
        cmd.args(["unjoin", "central", "--host-kubeconfig"])
            .arg(&f.sandbox.kubeconfig)
            .args(["--host-context", "host"]);
        cmd.args(args);
        cmd
    };
    let out = tokio::task::spawn_blocking({
        let mut cmd = unjoin(&[]);
        move || cmd.output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("ordinals 4 are moving from or to it"), "{out:?}");
    assert!(mcs.get_opt("central").await.unwrap().is_some_and(|mc| mc.metadata.deletion_timestamp.is_none()));

    // The delete is accepted but held: the MemberCluster stays, and so does what spanset knows.
    mcs.delete("central", &Default::default()).await.expect("delete accepted");
    support::eventually("the deletion is held and says why", || async {
        assert_not_twice(&f, "while the deletion is held").await;
        let mc = mcs.get_opt("central").await.unwrap().expect("central is kept while it holds pods");
        assert!(mc.metadata.deletion_timestamp.is_some());
        events_about(&f, "central")
            .await
            .iter()
            .any(|e| e.0 == "Warning" && e.1 == "DeletionHeld" && e.2.contains("pods of ordinals 4-5"))
    })
    .await;
    assert_not_twice(&f, "after the hold was reported").await;

    // Central's nodes return: its kubelets confirm the ends, its pods go, 4-5 start in west,
    // and the MemberCluster goes once central holds nothing.
    for n in names.iter().filter(|n| n.starts_with("node-")) {
        f.sandbox.ctl_ok(&["node-up", "central", n]);
    }
    support::eventually("the MemberCluster gone once central holds nothing", || async {
        assert_not_twice(&f, "while central's pods go").await;
        mcs.get_opt("central").await.unwrap().is_none()
    })
    .await;
    support::eventually("east and west hold everything", || async {
        let status = f.status("redis").await;
        f.member_slice("east", "redis").await == Some((0, 3))
            && f.member_slice("west", "redis").await == Some((3, 3))
            && status.ready.as_deref() == Some("6/6")
            && status.moves.is_empty()
    })
    .await;
    // unjoin now finishes the job (the Secret goes).
    let out = tokio::task::spawn_blocking({
        let mut cmd = unjoin(&[]);
        move || cmd.output().unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_counts_silence_for_the_automatic_fence_only_from_its_own_leadership() {
    // A standby that has no route to central (the leader reaches it) must not fence it the
    // moment it takes over, on the silence it counted as a standby.
    let f = Federation::start_with(&["east", "west", "central"], &[]).await;
    let mut first = Controller::start(&f.sandbox, "first");
    let failover = serde_json::json!({"policy": "Automatic", "unreachableAfterSeconds": 6, "fenceAfterSeconds": 10});
    f.create(&federation(&f.members, failover)).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    // The second controller's kubeconfig sends central's context to a closed port.
    let mut kc = kube::config::Kubeconfig::read_from(&f.sandbox.kubeconfig).unwrap();
    let cluster = kc.contexts.iter().find(|c| c.name == "central").unwrap().context.as_ref().unwrap().cluster.clone();
    for c in kc.clusters.iter_mut().filter(|c| c.name == cluster) {
        c.cluster.as_mut().unwrap().server = Some("https://127.0.0.1:1".into());
    }
    let cut = f.sandbox.dir.path().join("no-route-to-central.kubeconfig");
    std::fs::write(&cut, serde_yaml::to_string(&kc).unwrap()).unwrap();
    let second = Controller::start_as(&f.sandbox, "second", &cut, &[], &[]);
    let standby = Instant::now();
    // As a standby, the second counts central silent past 6 + 10 s before the takeover.
    support::eventually("the standby has counted central silent past the fence threshold", || async {
        standby.elapsed() > Duration::from_secs(17)
            && std::fs::read_to_string(&second.log).unwrap_or_default().contains("metrics_addr")
            && second.metrics_text().contains("spanset_member_reachable{cluster=\"central\"} 0")
    })
    .await;
    assert!(!member_cluster(&f, "central").await.spec.fenced, "the leader reaches central");
    first.kill();
    let killed = Instant::now();
    support::eventually("the new leader fences central once its own silence is long enough", || async {
        member_cluster(&f, "central").await.spec.fenced
    })
    .await;
    println!("fenced {:?} after the old leader died", killed.elapsed());
    // The second began leading when it stamped the Lease's acquireTime (just before its write
    // took the Lease): the fence comes unreachableAfterSeconds (6) + fenceAfterSeconds (10) later.
    let lease = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(f.host.clone(), f.lease_namespace())
        .get("spanset-leader")
        .await
        .expect("the leader Lease");
    let spec = lease.spec.expect("a Lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("second"), "the second leads");
    let acquired = spec.acquire_time.expect("an acquireTime").0;
    let from = acquired.as_millisecond() as f64 / 1000.0;
    assert_not_before(f.fenced_at("central").await, from + 16.0, "the fence, 16 s into the new leader's term");
}
