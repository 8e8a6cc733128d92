//! Idle costs nothing (issue 24, item 1), end to end on the sandbox: once a federation is
//! settled, the controller keeps probing its members (their last contact keeps advancing) and
//! the watchers keep refreshing the MemberClusters' status, yet the federation is not planned
//! again; and a member that falls silent is still judged Unreachable on time, from the last
//! answer its watcher noted, with no report to wake the coordinator.

mod support;

use std::time::Instant;

use kube::api::{Patch, PatchParams};
use serde_json::json;
use spanset::api::MemberCluster;
use support::{
    DEADLINE,
    federation::{Controller, Federation},
};

/// `spanset_reconciles_total` of `federation`, all outcomes.
fn reconciles(c: &Controller, federation: &str) -> f64 {
    sum(c, "spanset_reconciles_total{", federation)
}

/// The sum of the series starting with `prefix` whose labels mention `label`.
fn sum(c: &Controller, prefix: &str, label: &str) -> f64 {
    c.metrics_text()
        .lines()
        .filter(|l| l.starts_with(prefix) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `spanset_member_last_contact_timestamp_seconds` of `member` (Unix seconds).
fn last_contact(c: &Controller, member: &str) -> f64 {
    sum(c, "spanset_member_last_contact_timestamp_seconds{", &format!("cluster=\"{member}\""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settled_federation_is_not_planned_again_while_its_members_are_only_probed() {
    let f = Federation::start(&["east", "west"]).await;
    let mut fsts = f.placing("idle", &["east", "west"]);
    fsts.spec.replicas = 4;
    fsts.spec.template.volume_claim_templates.clear();
    f.create(&fsts).await;
    let c = Controller::start(&f.sandbox, "idle-1");
    f.wait_settled("idle", &[("east", 0, 2), ("west", 2, 2)], "the federation settled").await;

    // Within the deadline there must be a window of five probe periods of both members during
    // which the federation is not reconciled once, while a MemberCluster's status changes too
    // (as its watcher's periodic refresh does). Before issue 24 every probe report and a
    // two-second resync planned every federation again: no such window ever came.
    let mcs: kube::Api<MemberCluster> = kube::Api::all(f.host.clone());
    let start = Instant::now();
    let mut windows = 0;
    loop {
        let (r0, east0, west0) = (reconciles(&c, "idle"), last_contact(&c, "east"), last_contact(&c, "west"));
        let mark = json!({"status": {"lastContact": jiff::Timestamp::now().to_string()}});
        mcs.patch_status("west", &PatchParams::default(), &Patch::Merge(&mark)).await.expect("status patched");
        // Five probes of each member answered (probes every 2 s).
        support::eventually("both members probed five more times", || async {
            last_contact(&c, "east") >= east0 + 10.0 && last_contact(&c, "west") >= west0 + 10.0
        })
        .await;
        windows += 1;
        let r1 = reconciles(&c, "idle");
        if r1 == r0 {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the settled federation was planned again in every one of {windows} windows of five probes \
             (last window: {} reconciles)",
            r1 - r0
        );
    }

    // Silence is still noticed on time, from the watcher's last noted answer: east stops
    // answering, and the federation says so within its threshold plus a margin, with no
    // report from east's watcher (nothing changes in east) to wake it.
    f.sandbox.ctl_ok(&["partition", "east"]);
    let message = f.wait_condition("idle", "ClusterUnreachable", "Unreachable").await;
    assert!(message.contains("east"), "the condition names east: {message}");
    drop(c);
    f.assert_ledger_clean();
}
