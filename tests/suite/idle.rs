//! Idle costs nothing, end to end on the sandbox: once a federation is settled, the controller
//! keeps probing its members (their last contact keeps advancing) and the watchers keep
//! refreshing the MemberClusters' status, yet the federation is neither planned again nor woken
//! to look at its members' silence; and a member that falls silent is still judged Unreachable,
//! its coordinator told by the watcher once the member is quiet.

use std::time::Instant;

use kube::api::{Patch, PatchParams};
use serde_json::json;
use spanset_api::MemberCluster;
use support::{
    DEADLINE,
    federation::{Controller, Federation},
};

use crate::support;

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

/// `spanset_silence_checks_total`: how often coordinators looked at their members' silence.
fn silence_checks(c: &Controller) -> f64 {
    sum(c, "spanset_silence_checks_total", "")
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
    // which the federation is not reconciled once, nor woken to look at its members' silence,
    // while a MemberCluster's status changes too (as its watcher's periodic refresh does).
    // It once failed: every probe report and a two-second resync planned every federation
    // again, and until the quiet notice each coordinator woke at its members' 10-s silence
    // threshold to learn that they had answered: no such window ever came.
    let mcs: kube::Api<MemberCluster> = kube::Api::all(f.host.clone());
    let start = Instant::now();
    let mut windows = 0;
    loop {
        let (r0, east0, west0) = (reconciles(&c, "idle"), last_contact(&c, "east"), last_contact(&c, "west"));
        let s0 = silence_checks(&c);
        let mark = json!({"status": {"lastContact": jiff::Timestamp::now().to_string()}});
        mcs.patch_status("west", &PatchParams::default(), &Patch::Merge(&mark)).await.expect("status patched");
        // Five probes of each member answered (probes every 2 s).
        support::eventually("both members probed five more times", || async {
            last_contact(&c, "east") >= east0 + 10.0 && last_contact(&c, "west") >= west0 + 10.0
        })
        .await;
        windows += 1;
        let (r1, s1) = (reconciles(&c, "idle"), silence_checks(&c));
        if r1 == r0 && s1 == s0 {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the settled federation was planned or woken again in every one of {windows} windows of five \
             probes (last window: {} reconciles, {} silence checks)",
            r1 - r0,
            s1 - s0
        );
    }

    // Silence is still noticed, from the watcher's last noted answer: east stops answering,
    // the federation says so, and its coordinator looked at east's silence when east's watcher
    // told it east was quiet (without that notice it sets no timer while its members answer,
    // and would learn of east only from the watcher's reports).
    let checks = silence_checks(&c);
    f.sandbox.ctl_ok(&["partition", "east"]);
    let message = f.wait_condition("idle", "ClusterUnreachable", "Unreachable").await;
    assert!(message.contains("east"), "the condition names east: {message}");
    assert!(
        silence_checks(&c) > checks,
        "the coordinator never looked at east's silence: the watcher did not tell it east was quiet"
    );
    drop(c);
    f.assert_ledger_clean();
}

/// `spanset_member_http_requests_total` of `member` for `verb`, all codes.
fn requests(c: &Controller, member: &str, verb: &str) -> f64 {
    c.metrics_text()
        .lines()
        .filter(|l| l.starts_with("spanset_member_http_requests_total{"))
        .filter(|l| l.contains(&format!("cluster=\"{member}\"")) && l.contains(&format!("verb=\"{verb}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_taking_over_many_federations_confirms_them_with_a_few_lists_per_member() {
    const N: usize = 24;
    let f = Federation::start(&["east", "west"]).await;
    for i in 0..N {
        let mut fsts = f.placing(&format!("many-{i:02}"), &["east", "west"]);
        fsts.spec.replicas = 2;
        fsts.spec.template.volume_claim_templates.clear();
        f.create(&fsts).await;
    }
    let mut first = Controller::start(&f.sandbox, "many-1");
    for i in 0..N {
        f.wait_settled(&format!("many-{i:02}"), &[("east", 0, 1), ("west", 1, 1)], "settled").await;
    }
    first.kill();
    // A successor starts with every federation settled: each one's absence or presence in
    // each member must be confirmed by a quorum list before it is planned from. One list per
    // federation and member (as the controller once did) would be 24 per member at least.
    let second = Controller::start(&f.sandbox, "many-2");
    support::eventually("the successor planned every federation", || async {
        second.log_text().contains("metrics_addr")
            && (0..N).all(|i| reconciles(&second, &format!("many-{i:02}\"")) >= 1.0)
    })
    .await;
    tokio::task::block_in_place(|| second.wait_reconciles("many-00", 1000));
    // Its watches' own lists (a handful of resources) and the confirmations, per member.
    for member in ["east", "west"] {
        let lists = requests(&second, member, "list");
        assert!(lists < N as f64 / 2.0, "{lists} lists of {member} to take over {N} federations");
    }
    drop(second);
    f.assert_ledger_clean();
}
