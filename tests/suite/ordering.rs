//! One StatefulSet's order and availability across clusters: `OrderedReady` creates ordinal k
//! only once every ordinal below it is Ready wherever it runs, and scales down highest first,
//! one at a time; moves wait while the disruption budget is spent by pods unavailable anywhere.
//! Judged on the sandbox ledger's runs and Ready spans.

use kube::api::{Patch, PatchParams};
use spanset_api::FederatedStatefulSet;
use support::{
    eventually,
    federation::{Controller, Federation},
    timeline,
};

use crate::support;

const MEMBERS: [&str; 3] = ["east", "west", "central"];

async fn patch(f: &Federation, body: serde_json::Value) {
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("federation patched");
}

fn weights(f: &Federation, w: &[i32]) -> serde_json::Value {
    let clusters: Vec<serde_json::Value> =
        f.members.iter().zip(w).map(|(m, w)| serde_json::json!({"name": m, "weight": w})).collect();
    serde_json::json!({"spec": {"placement": {"clusters": clusters}}})
}

async fn start(edit: impl FnOnce(&mut FederatedStatefulSet)) -> (Federation, Controller) {
    start_with(&[], edit).await
}

async fn start_with(flags: &[&str], edit: impl FnOnce(&mut FederatedStatefulSet)) -> (Federation, Controller) {
    let f = Federation::start_flags(&MEMBERS, flags).await;
    let c = Controller::start(&f.sandbox, "controller");
    let mut fsts = spanset_api::example(&f.members);
    edit(&mut fsts);
    f.create(&fsts).await;
    (f, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_starts_each_ordinal_after_every_lower_one_is_ready_across_clusters() {
    let (f, _c) = start(|_| {}).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "created").await;
    let runs = timeline::runs(&f.sandbox, "redis");
    for k in 1..6u32 {
        let first = runs.iter().find(|r| r.ordinal == k).expect("ordinal ran");
        let below = timeline::ready_with(&runs, k - 1, "redis:7").expect("the one below was Ready");
        assert!(
            first.from >= below,
            "redis-{k} (in {}) started at {}, before redis-{} was Ready at {below}",
            first.cluster,
            first.from,
            k - 1
        );
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_holds_across_clusters_on_advanced_statefulsets_too() {
    let (f, _c) = start_with(&["--kruise"], |fsts| fsts.spec.backend = spanset_api::Backend::AdvancedStatefulSet).await;
    eventually("6/6 ready", || async {
        let s = f.status("redis").await;
        s.ready.as_deref() == Some("6/6") && s.moves.is_empty()
    })
    .await;
    let runs = timeline::runs(&f.sandbox, "redis");
    for k in 1..6u32 {
        let first = runs.iter().find(|r| r.ordinal == k).expect("ordinal ran");
        let below = timeline::ready_with(&runs, k - 1, "redis:7").expect("the one below was Ready");
        assert!(first.from >= below, "redis-{k} (in {}) started before redis-{} was Ready", first.cluster, k - 1);
    }
    // Scale-down: highest first, one at a time.
    patch(&f, serde_json::json!({"spec": {"replicas": 2}})).await;
    eventually("2/2 ready", || async {
        let s = f.status("redis").await;
        s.ready.as_deref() == Some("2/2") && s.moves.is_empty() && s.replicas == Some(2)
    })
    .await;
    let runs = timeline::runs(&f.sandbox, "redis");
    let end = |k: u32| runs.iter().find(|r| r.ordinal == k).and_then(|r| r.until).expect("ended");
    for k in 2..5u32 {
        assert!(end(k) >= end(k + 1), "redis-{k} ended before redis-{}", k + 1);
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_starts_every_cluster_at_once() {
    // The control for the test above: with Parallel, west and central do not wait for east.
    let (f, _c) = start(|fsts| fsts.spec.template.pod_management_policy = Some("Parallel".into())).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "created").await;
    let runs = timeline::runs(&f.sandbox, "redis");
    let early = (1..6u32).any(|k| {
        let first = runs.iter().find(|r| r.ordinal == k).expect("ordinal ran");
        timeline::ready_with(&runs, k - 1, "redis:7").is_none_or(|below| first.from < below)
    });
    assert!(early, "Parallel: some ordinal started before the one below was Ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_scales_down_highest_first_one_at_a_time_across_clusters_restarting_nothing() {
    let (f, _c) = start(|_| {}).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "created").await;
    let t0 = jiff::Timestamp::now();
    patch(&f, serde_json::json!({"spec": {"replicas": 2}})).await;
    f.wait_settled("redis", &[("east", 0, 2)], "scaled down to 2").await;
    let runs = timeline::runs(&f.sandbox, "redis");
    // Ordinals 0 and 1 kept their one run throughout.
    for k in 0..2u32 {
        let of_k: Vec<_> = runs.iter().filter(|r| r.ordinal == k).collect();
        assert_eq!(of_k.len(), 1, "redis-{k} restarted: {of_k:?}");
        assert!(of_k[0].until.is_none(), "redis-{k} still runs");
    }
    // 5, 4, 3, 2 ended in that order, each after the one above had ended.
    let end = |k: u32| runs.iter().find(|r| r.ordinal == k).and_then(|r| r.until).expect("ended");
    for k in 2..5u32 {
        assert!(end(k) >= end(k + 1), "redis-{k} ended at {}, before redis-{} at {}", end(k), k + 1, end(k + 1));
        assert!(end(k) >= t0);
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_wait_while_a_pod_elsewhere_spends_the_budget() {
    let (f, _c) = start(|fsts| {
        fsts.spec.template.pod_management_policy = Some("Parallel".into());
        fsts.spec.migration.max_concurrent_moves = Some(2);
    })
    .await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "created").await;
    // redis-0 in east goes unready for reasons of its own.
    f.sandbox.ctl_ok(&["pod-ready", "east", "redis-0", "false"]);
    eventually("redis-0 unready in the status", || async { f.status("redis").await.available_replicas == Some(5) })
        .await;
    let t0 = jiff::Timestamp::now();
    // Drain central: 4 and 5 could both leave at once within maxConcurrentMoves 2 (and 2 moves
    // from west to east); with one pod down already, only one may be in flight at a time.
    patch(&f, weights(&f, &[1, 1, 0])).await;
    eventually("the budget named in Progressing", || async {
        let s = f.status("redis").await;
        s.conditions
            .iter()
            .any(|c| c.type_ == "Progressing" && c.reason == "DisruptionBudget" && c.message.contains("redis-0"))
    })
    .await;
    // Settled but for redis-0, still held unready.
    eventually("central drained", || async {
        let s = f.status("redis").await;
        let at =
            |c: &str| s.slices.iter().find(|sl| sl.cluster == c).map(|sl| (sl.start, sl.replicas, sl.ready_replicas));
        s.moves.is_empty()
            && at("east") == Some((0, 3, 2))
            && at("west") == Some((3, 3, 3))
            && at("central").is_none_or(|c| c.1 == 0)
            && f.member_slice("central", "redis").await.is_none_or(|sl| sl.1 == 0)
    })
    .await;
    let t1 = jiff::Timestamp::now();
    let runs = timeline::runs(&f.sandbox, "redis");
    let (most, at, which) = timeline::most_unavailable(&runs, 0..6, t0, t1);
    assert!(most <= 2, "{most} pods down at once at {at} (budget 2): ordinals {which:?}");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_federation_disruption_budget_holds_moves_below_max_concurrent_moves() {
    let (f, _c) = start(|fsts| {
        fsts.spec.template.pod_management_policy = Some("Parallel".into());
        fsts.spec.migration.max_concurrent_moves = Some(3);
        fsts.spec.disruption = Some(serde_json::from_value(serde_json::json!({"maxUnavailable": 1})).unwrap());
    })
    .await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "created").await;
    let t0 = jiff::Timestamp::now();
    patch(&f, weights(&f, &[0, 1, 1])).await;
    f.wait_settled("redis", &[("west", 0, 3), ("central", 3, 3)], "east drained").await;
    let t1 = jiff::Timestamp::now();
    let runs = timeline::runs(&f.sandbox, "redis");
    let (most, at, which) = timeline::most_unavailable(&runs, 0..6, t0, t1);
    assert!(most <= 1, "{most} pods down at once at {at} (spec.disruption.maxUnavailable 1): ordinals {which:?}");
    f.assert_ledger_clean();
}
