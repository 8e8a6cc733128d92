//! `spanset::audit`, which judges real clusters from their pods alone, agrees with the
//! sandbox's ledger, which records every process the sandbox ran: on a move, the same
//! incarnations and no identity twice; on a twin made by hand, both name it.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::PostParams};
use spanset::audit::Audit;

use crate::support::{
    DEADLINE,
    federation::{Controller, Federation},
};

/// The audit's incarnations that ran, as the ledger names them (`member/uid`).
fn ran(audit: &Audit) -> std::collections::BTreeSet<String> {
    audit.timeline().incarnations().filter(|i| !i.ran.is_empty()).map(|i| format!("{}/{}", i.member, i.uid)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_sees_what_the_ledger_records_a_clean_move_and_a_twin_alike() {
    // An open sandbox (no member guards), so that the twin below can be made by hand.
    let f = Federation::start_with(&["east", "west"], &[]).await;
    let mut controller = Controller::start(&f.sandbox, "controller");
    let members = vec![("east".to_string(), f.member("east").await), ("west".to_string(), f.member("west").await)];
    let audit = Audit::start(members, "default", "redis", None);
    f.create(&f.placing("redis", &["east", "west"])).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "halves").await;
    f.api()
        .patch(
            "redis",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"placement": {"clusters": [
                {"name": "east", "weight": 1}, {"name": "west", "weight": 0}]}}})),
        )
        .await
        .unwrap();
    f.wait_settled("redis", &[("east", 0, 6)], "everything in east").await;
    f.assert_ledger_clean();
    // The same incarnations: the audit's view reaches the ledger's once its watches deliver.
    let ledger = f.incarnations();
    let deadline = Instant::now() + DEADLINE;
    while ran(&audit) != ledger {
        assert!(Instant::now() < deadline, "the audit saw {:?}, the ledger has {ledger:?}", ran(&audit));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ledger.len(), 9, "six, and one for each of west's three: {ledger:?}");
    assert!(audit.timeline().overlaps().is_empty(), "{:?}", audit.timeline().overlaps());

    // A second redis-1 made by hand in west while east runs the first, spanset stopped (it
    // would delete it) and outside the selector of west's StatefulSet (which would adopt and
    // delete it): it runs, and both judges name it.
    let twin: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "redis-1", "labels": {"spanset.dev/federation": "redis"}},
        "spec": {"containers": [{"name": "redis", "image": "redis:7"}]},
    }))
    .unwrap();
    let west: Api<Pod> = Api::namespaced(f.member("west").await, "default");
    controller.kill();
    west.create(&PostParams::default(), &twin).await.unwrap();
    let deadline = Instant::now() + DEADLINE;
    let overlap = loop {
        if let Some(o) = audit.timeline().overlaps().into_iter().next() {
            break o;
        }
        assert!(
            Instant::now() < deadline,
            "the audit never saw the twin run: {:#?}\n{:?}",
            audit.timeline().incarnations().filter(|i| i.name == "redis-1").collect::<Vec<_>>(),
            west.get_opt("redis-1").await.ok().flatten().map(|p| (p.status, p.spec.map(|s| s.node_name)))
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        (overlap.name.as_str(), overlap.first.0.as_str(), overlap.second.0.as_str()),
        ("redis-1", "east", "west")
    );
    let check = f.sandbox.ctl(&["ledger", "--check"]);
    assert!(!check.status.success(), "the ledger names the twin too");
    let said = String::from_utf8_lossy(&check.stdout).to_string() + &String::from_utf8_lossy(&check.stderr);
    assert!(said.contains("redis-1"), "{said}");
}
