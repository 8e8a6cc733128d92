//! Terms keep growing past what the Lease remembers: the stamps in the members are a record of
//! past terms too, so a new leader takes a term above every stamp it sees, whether the Lease
//! was deleted or renamed; and a write refused as stale says so loudly.

use k8s_openapi::api::{apps::v1::StatefulSet, coordination::v1::Lease};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use spanset::cli::sandbox::example;
use spanset_api::labels::TERM;
use support::federation::{Controller, Federation};

use crate::support;

const HALVES: [(&str, i32, i32); 2] = [("east", 0, 3), ("west", 3, 3)];

/// The term stamped on the federation's StatefulSet in each member (`None`: none there yet).
async fn stamps(f: &Federation) -> Vec<Option<u64>> {
    let mut out = Vec::new();
    for m in &f.members {
        let api: Api<StatefulSet> = Api::namespaced(f.member(m).await, "default");
        let sts = api.get_opt("redis").await.ok().flatten();
        out.push(sts.and_then(|s| s.metadata.annotations?.get(TERM)?.parse().ok()));
    }
    out
}

/// Settles the example over east and west, then has a second controller take over, so that
/// every member carries term 2; leaves the second controller killed (its Lease still held).
async fn stamped_in_term_two(f: &Federation) {
    let mut first = Controller::start(&f.sandbox, "first");
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &HALVES, "initial slices").await;
    first.kill();
    let mut second = Controller::start(&f.sandbox, "second");
    support::eventually("term 2 stamped in every member", || async { stamps(f).await.iter().all(|t| *t == Some(2)) })
        .await;
    second.kill();
}

/// Checks that the new leader stamps every member above term 2 and that its writes go
/// through (a scale to 8 settles), with no ordinal ever running twice.
async fn stamps_grow_and_writes_go_through(f: &Federation, leader: &Controller) {
    support::eventually("every member stamped above term 2", || async {
        stamps(f).await.iter().all(|t| t.is_some_and(|t| t > 2))
    })
    .await;
    let body = serde_json::json!({"spec": {"replicas": 8}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("scaled");
    // onScale Keep: the new ordinals 6-7 go to west (the top slice), nothing moves.
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 5)], "the scale written by the new leader").await;
    let log = without_colours(&leader.log_text());
    let terms: Vec<u64> = log
        .lines()
        .filter(|l| l.contains("acquired leadership"))
        .filter_map(|l| l.split("term=").nth(1)?.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect();
    assert!(!terms.is_empty() && terms.iter().all(|t| *t > 2), "every term taken is above the stamps: {terms:?}");
    f.assert_ledger_clean();
}

/// The text without its terminal colour sequences (`ESC [ … m`).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_after_the_lease_was_deleted_takes_a_term_above_every_stamp() {
    let f = Federation::start(&["east", "west"]).await;
    stamped_in_term_two(&f).await;
    let leases: Api<Lease> = Api::namespaced(f.host.clone(), f.lease_namespace());
    leases.delete("spanset-leader", &DeleteParams::default()).await.expect("the Lease deleted");
    let third = Controller::start(&f.sandbox, "third");
    stamps_grow_and_writes_go_through(&f, &third).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_of_a_renamed_lease_takes_a_term_above_every_stamp() {
    // As the administrator: the shipped Role names the default Lease only.
    let f = Federation::start_with(&["east", "west"], &[]).await;
    stamped_in_term_two(&f).await;
    let third = Controller::start_full(&f.sandbox, "third", &[], &["--lease-name", "spanset-renamed"]);
    stamps_grow_and_writes_go_through(&f, &third).await;
}

/// `spec.placement` with these weights, in this order.
fn placement(weights: &[(&str, i32)]) -> serde_json::Value {
    let clusters: Vec<serde_json::Value> =
        weights.iter().map(|(m, w)| serde_json::json!({"name": m, "weight": w})).collect();
    serde_json::json!({"spec": {"placement": {"clusters": clusters}}})
}

/// Whether a controller's watchers have listed a member's StatefulSets and pods.
fn has_listed(metrics: &str, cluster: &str) -> bool {
    ["statefulsets", "pods"].iter().all(|resource| {
        metrics.lines().any(|l| {
            l.starts_with("spanset_watch_events_total{")
                && l.contains(&format!("cluster=\"{cluster}\""))
                && l.contains(&format!("resource=\"{resource}\""))
                && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).is_some_and(|v| v >= 1.0)
        })
    })
}

/// The requests a hung member holds now (`METHOD PATH`).
fn held(f: &Federation, cluster: &str) -> Vec<String> {
    let doc: serde_json::Value = serde_json::from_str(&f.sandbox.ctl_ok(&["clusters"])).expect("JSON");
    let c = doc["clusters"].as_array().into_iter().flatten().find(|c| c["name"] == cluster).expect("the cluster");
    c["faults"]["held"].as_array().into_iter().flatten().filter_map(|r| r.as_str().map(str::to_string)).collect()
}

/// Whether the MemberCluster says it is unreachable.
async fn reported_unreachable(f: &Federation, cluster: &str) -> bool {
    let api: Api<spanset_api::MemberCluster> = Api::all(f.host.clone());
    let Ok(mc) = api.get(cluster).await else { return false };
    mc.status.is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Reachable" && c.status == "False"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_leader_s_grow_still_in_flight_to_a_member_the_new_leader_cannot_reach_starts_nothing_twice() {
    // The old leader records ordinal 1 moving east → central (Starting) and sends central its
    // grow; central hangs, so the grow stays in flight. The old leader is paused, a standby
    // that had listed central before the hang takes over and cannot reach it, and the operator
    // sends ordinal 1 to west instead. When central answers again, the old grow lands there.
    // Nothing of that may make ordinal 1 run in two clusters.
    let f = Federation::start(&["east", "west", "central"]).await;
    let go = f.sandbox.dir.path().join("go");
    let failpoint = format!("hold-writes-Starting=return({})", go.display());
    let first = Controller::start_with(&f.sandbox, "first", &[("FAILPOINTS", &failpoint)]);
    let mut fsts = example(&f.members);
    fsts.spec.replicas = 4;
    for c in &mut fsts.spec.placement.clusters {
        c.weight = Some(if c.name == "west" { 0 } else { 1 });
    }
    f.create(&fsts).await;
    f.wait_settled("redis", &[("east", 0, 2), ("central", 2, 2)], "initial slices").await;
    let second = Controller::start(&f.sandbox, "second");
    support::eventually("the standby listed central", || async {
        second.log_text().contains("metrics_addr") && has_listed(&second.metrics_text(), "central")
    })
    .await;

    let to_central = placement(&[("east", 0), ("west", 0), ("central", 1)]);
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&to_central)).await.expect("patched");
    support::eventually("ordinal 1 recorded Starting towards central", || async {
        f.status("redis").await.moves.iter().any(|m| m.ordinal == 1 && m.phase == "Starting" && m.to == "central")
    })
    .await;
    // The first leader now holds its grow of central; central stops answering.
    f.sandbox.ctl_ok(&["partition", "central", "--hang"]);
    support::eventually("central reported unreachable", || reported_unreachable(&f, "central")).await;
    std::fs::write(&go, "").expect("the failpoint's file");
    let grow = "PUT /apis/apps/v1/namespaces/default/statefulsets/redis".to_string();
    support::wait_until("the grow held at central", support::DEADLINE, || held(&f, "central").contains(&grow));
    first.signal("-STOP");

    // The standby takes over; ordinal 1 is sent to west instead.
    let to_west = placement(&[("east", 0), ("west", 1), ("central", 0)]);
    let patched = f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&to_west)).await.expect("patched");
    let generation = patched.metadata.generation;
    support::eventually("the new leader grew west with ordinal 1, or said why it does not", || async {
        let in_west = f.member_slice("west", "redis").await.is_some_and(|(s, r)| s <= 1 && 1 < s + r);
        let status = f.status("redis").await;
        let waits = status.observed_generation == generation
            && status.conditions.iter().any(|c| {
                c.type_ == "Progressing" && c.reason == "MembersUnconfirmed" && c.message.starts_with("central")
            });
        in_west || waits
    })
    .await;
    // Central answers again: the old grow lands there.
    f.sandbox.ctl_ok(&["heal", "central"]);
    // The ledger first: a federation that ran ordinal 1 twice may also never settle.
    let settled = std::panic::AssertUnwindSafe(f.wait_settled("redis", &[("west", 0, 4)], "everything in west"));
    let settled = futures::FutureExt::catch_unwind(settled).await;
    f.assert_ledger_clean();
    if let Err(panic) = settled {
        std::panic::resume_unwind(panic);
    }
    assert!(second.log_text().contains("acquired leadership"), "the standby led");
}
