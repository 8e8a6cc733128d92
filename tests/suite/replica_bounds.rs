//! Bounds that protect clusters from a mistyped `spec.replicas`: a value above the controller's
//! ceiling, or a change larger than its step, is held at the replicas accepted before with
//! `ReplicasHeld` saying how to lift it; no pod beyond them ever starts (the ledger, over the
//! whole run); an approval of exactly that value lifts the step; a new federation above the
//! ceiling is `Blocked` and nothing is written (judged from what the members received from
//! spanset's identity, not from the end state).

use crate::support;

use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::{
    federation::{Controller, Federation},
    timeline,
};

/// Every ordinal that ever ran for `set`, per the ledger.
fn ordinals_ever(f: &Federation, set: &str) -> std::collections::BTreeSet<u32> {
    timeline::runs(&f.sandbox, set).iter().map(|r| r.ordinal).collect()
}

async fn patch(f: &Federation, name: &str, body: serde_json::Value) {
    f.api().patch(name, &PatchParams::default(), &Patch::Merge(&body)).await.expect("patched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_beyond_the_bounds_are_held_and_no_pod_beyond_them_starts() {
    let f = Federation::start(&["east", "west"]).await;
    let flags = ["--max-federation-replicas", "20", "--max-replica-step", "2"];
    let c = Controller::start_full(&f.sandbox, "c1", &[], &flags);
    f.create(&f.placing("redis", &["east", "west"])).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "settled at 6").await;

    // A stray 000: held at 6, saying which flag lifts it.
    patch(&f, "redis", json!({"spec": {"replicas": 100_000}})).await;
    let message = f.wait_condition("redis", "ReplicasHeld", "AboveCeiling").await;
    assert!(message.contains("spec.replicas 100000 is above the ceiling of 20 replicas per federation"), "{message}");
    assert!(message.contains("held at 6") && message.contains("--max-federation-replicas"), "{message}");
    c.wait_reconciles("redis", 5);
    assert_eq!(f.status("redis").await.accepted_replicas, Some(6));

    // A jump of 3 with a step of 2: held too, naming the annotation that approves it.
    patch(&f, "redis", json!({"spec": {"replicas": 9}})).await;
    let message = f.wait_condition("redis", "ReplicasHeld", "StepTooLarge").await;
    assert!(message.contains("changed from 6 to 9, more than the step of 2"), "{message}");
    assert!(message.contains("spanset.dev/approve-replicas=9"), "{message}");
    c.wait_reconciles("redis", 5);
    // Over the whole run so far, no ordinal beyond the accepted 6 ever ran anywhere.
    assert_eq!(ordinals_ever(&f, "redis"), (0..6).collect(), "nothing beyond the accepted replicas started");
    let events = f.events("redis").await;
    assert_eq!(events.iter().filter(|e| e.1 == "StepTooLarge").count(), 1, "one Event per hold: {events:?}");

    // Approved for exactly 9: it scales.
    patch(&f, "redis", json!({"metadata": {"annotations": {"spanset.dev/approve-replicas": "9"}}})).await;
    let start = std::time::Instant::now();
    let status = loop {
        let status = f.status("redis").await;
        if status.ready_replicas == Some(9) && status.moves.is_empty() {
            break status;
        }
        assert!(start.elapsed() < support::DEADLINE * 2, "the approved 9 never became Ready: {status:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!((status.accepted_replicas, status.ready_replicas), (Some(9), Some(9)), "{status:?}");
    let held = status.conditions.iter().find(|c| c.type_ == "ReplicasHeld").expect("the condition is kept");
    assert_eq!(held.status, "False", "{held:?}");

    // A new federation above the ceiling has nothing to hold at: Blocked, nothing written.
    // Judged from what the members received from spanset's identity once redis is done:
    // nothing at all, not only no StatefulSet `big` at the end.
    c.wait_quiet("default/redis");
    let mark = f.sandbox.account();
    let mut big = f.placing("big", &["east", "west"]);
    big.spec.replicas = 50;
    f.create(&big).await;
    let message = f.wait_condition("big", "Blocked", "ReplicasAboveCeiling").await;
    assert!(message.contains("spec.replicas 50 is above the ceiling of 20"), "{message}");
    c.wait_reconciles("default/big", 3);
    let changed = f.sandbox.spanset_changes_since(&mark, &f.members);
    assert!(changed.is_empty(), "spanset wrote in the members for a federation above the ceiling: {changed:?}");
    for m in &f.members {
        assert_eq!(f.member_slice_now(m, "big").await, None, "{m} must hold nothing of big");
    }
    f.assert_ledger_clean();
}
