//! The controller keeps at-most-one through crashes at every move phase, spec edits in the
//! middle of a migration, members drained and added, and a member partitioned during a move.
//! Each test ends with `ledger --check` over its whole run.

use crate::support;

use kube::api::{Patch, PatchParams};
use spanset::cli::sandbox::example;
use support::{
    federation::{Controller, Federation},
    timeline,
};

fn placement(clusters: &[(&str, i32)]) -> serde_json::Value {
    let clusters: Vec<serde_json::Value> =
        clusters.iter().map(|(m, w)| serde_json::json!({"name": m, "weight": w})).collect();
    serde_json::json!({"spec": {"placement": {"clusters": clusters}}})
}

async fn patch(f: &Federation, body: serde_json::Value) {
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("federation patched");
}

const THIRDS: [(&str, i32, i32); 3] = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];

/// Kills the controller at failpoint `point` during a migration of everything to east, then
/// restarts it and checks that the migration completes with the ledger clean.
async fn crash_and_resume(point: &str) {
    let f = Federation::start(&["east", "west", "central"]).await;
    let mut first = Controller::start(&f.sandbox, "first");
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    first.terminate();
    let mut crashing = Controller::start_with(&f.sandbox, "crashing", &[("FAILPOINTS", &format!("{point}=return"))]);
    patch(&f, placement(&[("east", 1), ("west", 0), ("central", 0)])).await;
    assert_eq!(crashing.wait_exit(), Some(86), "the controller stops at {point}: {}", crashing.log_text());
    let phase = point.rsplit('-').next().unwrap();
    let moves = f.status("redis").await.moves;
    assert!(moves.iter().any(|m| m.phase == phase), "a move is recorded in phase {phase}: {moves:?}");
    let _resumed = Controller::start(&f.sandbox, "resumed");
    f.wait_settled("redis", &[("east", 0, 6)], "the migration resumed and completed").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_after_recording_a_draining_move_resumes() {
    crash_and_resume("move-persisted-Draining").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_after_shrinking_the_source_resumes() {
    crash_and_resume("move-written-Draining").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_after_recording_a_release_resumes() {
    crash_and_resume("move-persisted-Released").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_after_recording_a_start_resumes() {
    crash_and_resume("move-persisted-Starting").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_after_growing_the_destination_resumes() {
    crash_and_resume("move-written-Starting").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_edited_in_the_middle_of_a_migration_converges_on_the_new_target() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    patch(&f, placement(&[("east", 1), ("west", 0), ("central", 0)])).await;
    support::eventually("a move under way", || async { !f.status("redis").await.moves.is_empty() }).await;
    patch(&f, placement(&[("east", 0), ("west", 0), ("central", 1)])).await;
    f.wait_settled("redis", &[("central", 0, 6)], "everything in central").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_drained_by_weight_zero_and_one_added_take_the_ordinals_over() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut fsts = example(&f.members);
    fsts.spec.placement.clusters.truncate(2);
    f.create(&fsts).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "east and west").await;
    patch(&f, placement(&[("east", 0), ("west", 1), ("central", 1)])).await;
    f.wait_settled("redis", &[("west", 0, 3), ("central", 3, 3)], "east drained, central added").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_partitioned_during_a_migration_holds_its_ordinals_until_healed() {
    let f = Federation::start(&["east", "west", "central"]).await;
    // The round that records a move in phase Draining holds its member writes until `go`
    // exists: central is cut off with its own move recorded and its shrink about to leave.
    let go = f.sandbox.dir.path().join("go");
    let hold = format!("hold-writes-Draining=return({})", go.display());
    let c = Controller::start_with(&f.sandbox, "controller", &[("FAILPOINTS", &hold)]);
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    // Central's ordinals go to west (east keeps 0-1, west grows to 2-5): central is the only source.
    patch(&f, placement(&[("east", 1), ("west", 2), ("central", 0)])).await;
    let moving = f.wait_moving_from("redis", "central", "Draining").await;
    // Only the API is cut off: central's pods keep running.
    f.sandbox.ctl_ok(&["partition", "central"]);
    std::fs::write(&go, "").expect("the held writes released");
    let now_moving = f.moving_from("redis", "central").await;
    assert!(moving.iter().all(|k| now_moving.contains(k)), "central's moves {moving:?} in flight after the cut");
    support::eventually("central unreachable in the status", || async {
        f.status("redis").await.conditions.iter().any(|c| c.type_ == "ClusterUnreachable" && c.status == "True")
    })
    .await;
    // The controller gets reconciles to finish the move wrongly in; it may not before the heal.
    tokio::task::block_in_place(|| c.wait_reconciles("redis", 3));
    let still = f.moving_from("redis", "central").await;
    assert!(moving.iter().all(|k| still.contains(k)), "central's moves {moving:?} still in flight before the heal");
    let so_far = timeline::runs(&f.sandbox, "redis");
    let early = timeline::started_elsewhere_before(&so_far, "central", &[4, 5], jiff::Timestamp::now());
    assert!(early.is_empty(), "central's ordinals started elsewhere while it was cut off: {early:?}");
    assert_eq!(f.member_slice("west", "redis").await, Some((2, 2)), "west holds 2-3, not central's 4-5");
    let healed = jiff::Timestamp::now();
    f.sandbox.ctl_ok(&["heal", "central"]);
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 4)], "central's ordinals moved after the heal").await;
    // Over the whole run: 4 and 5 started in west only once central answered again.
    let runs = timeline::runs(&f.sandbox, "redis");
    let early = timeline::started_elsewhere_before(&runs, "central", &[4, 5], healed);
    assert!(early.is_empty(), "central's ordinals started elsewhere before the heal at {healed}: {early:?}");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_goes_on_after_its_release_though_the_host_s_watch_lags() {
    // A release is stored before the grow that takes the ordinal, which the next reconcile
    // writes. Were that reconcile woken only by the host's watch event of the status write, it
    // would run only when the event arrived while the writing reconcile still ran (later, it is
    // not newer than the object the write answered): on a loaded machine the move would stay
    // `Released` until the 5-minute safety resync. Here every event of the federation reaches
    // its coordinator 1.5 s late, so none arrives in time; the deadline is far below 5 minutes.
    let f = Federation::start(&["east", "west"]).await;
    let _c = Controller::start_with(&f.sandbox, "controller", &[("FAILPOINTS", "spec-event-lag=return(1500)")]);
    let mut fsts = example(&f.members);
    fsts.spec.replicas = 2;
    fsts.spec.placement.clusters[1].weight = Some(0);
    f.create(&fsts).await;
    f.wait_settled("redis", &[("east", 0, 2)], "both in east").await;
    patch(&f, placement(&[("east", 0), ("west", 1)])).await;
    f.wait_settled("redis", &[("west", 0, 2)], "both moved to west, released and grown").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_member_logs_its_state_changes_not_every_failed_call() {
    let f = Federation::start(&["east", "west", "central"]).await;
    // The default filter of `spanset run` (RUST_LOG unset), for every crate.
    let c = Controller::start_with(&f.sandbox, "controller", &[("RUST_LOG", "")]);
    f.create(&spanset_api::example(&f.members)).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "settled").await;
    // What an operator reads at the default level (the harness also records DEBUG).
    let shown = |l: &str| !l.contains(" DEBUG ") && !l.contains(" TRACE ");
    // Every line shown, whoever logs it (kube's own retries do not name the member).
    let lines_about_central = || c.log_text().lines().filter(|l| shown(l)).count();
    let before = lines_about_central();
    f.sandbox.ctl_ok(&["partition", "central"]);
    // Unreachable, then ten more failed calls to central (some 20 s of probes and retries;
    // an idle federation is no longer planned on every probe, so calls are what is counted).
    support::eventually("central unreachable in the status", || async {
        f.status("redis").await.conditions.iter().any(|c| c.type_ == "ClusterUnreachable" && c.status == "True")
    })
    .await;
    let failed_calls = || {
        c.metrics_text()
            .lines()
            .filter(|l| l.starts_with("spanset_member_http_requests_total{") && l.contains("cluster=\"central\""))
            .filter(|l| l.contains("code=\"error\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let then = failed_calls();
    support::wait_until("ten more failed calls to central", support::DEADLINE, || failed_calls() >= then + 10.0);
    let during = lines_about_central() - before;
    assert!(
        c.log_text().lines().any(|l| l.contains("WARN") && l.contains("member unreachable") && l.contains("central")),
        "the state change is logged once, naming the member"
    );
    eprintln!("log lines about central during the partition: {during}");
    let excerpt: Vec<String> =
        c.log_text().lines().filter(|l| shown(l)).skip(before).take(12).map(String::from).collect();
    assert!(during <= 10, "{during} log lines about one partitioned member:\n{}", excerpt.join("\n"));
    f.sandbox.ctl_ok(&["heal", "central"]);
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "healed").await;
}
