//! A hung member freezes nothing: six replicas 2/2/2 over east, west and central, Parallel;
//! central hangs (connections accepted, never answered) at the moment the pod template changes,
//! so a write to central is due. Then the federation is scaled to 8 over east and west only.
//! Every member request has a deadline and a coordinator never waits on one member without
//! bound: the status tells the truth all along (polled over the whole hang), the healthy
//! members get their writes, and no ordinal central may run starts elsewhere until it answers
//! again.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use k8s_openapi::{api::apps::v1::StatefulSet, apimachinery::pkg::apis::meta::v1::Condition};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use spanset::cli::sandbox::example;
use spanset_api::{FederatedStatefulSet, FederatedStatefulSetStatus};
use support::federation::{Controller, Federation};

use crate::support;

const THIRDS: [(&str, i32, i32); 3] = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];

fn condition<'a>(s: &'a FederatedStatefulSetStatus, type_: &str) -> Option<&'a Condition> {
    s.conditions.iter().find(|c| c.type_ == type_)
}

/// The pod template annotation `rollout` of the member's StatefulSet.
async fn rollout(f: &Federation, member: &str) -> Option<String> {
    let api: Api<StatefulSet> = Api::namespaced(f.member(member).await, "default");
    let sts = api.get_opt("redis").await.ok().flatten()?;
    sts.spec?.template.metadata?.annotations?.get("rollout").cloned()
}

/// Polls the federation's status until `stop`, keeping every one seen, in order.
fn record(
    api: Api<FederatedStatefulSet>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<FederatedStatefulSetStatus>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            if let Ok(f) = api.get("redis").await
                && let Some(s) = f.status
            {
                seen.push(s);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        seen
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_member_neither_freezes_the_federation_nor_makes_its_status_lie() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut fsts = example(&f.members);
    fsts.spec.template.pod_management_policy = Some("Parallel".into());
    f.create(&fsts).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;

    // Central hangs as the template changes: a write to central is due.
    let stop = Arc::new(AtomicBool::new(false));
    let recorder = record(f.api(), stop.clone());
    f.sandbox.ctl_ok(&["partition", "central", "--hang"]);
    let body = serde_json::json!({"spec": {"template": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}}});
    let patched = f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("patched");
    let new_template = patched.metadata.generation;

    support::eventually("the federation says central is unreachable", || async {
        let s = f.status("redis").await;
        condition(&s, "ClusterUnreachable")
            .is_some_and(|c| c.status == "True" && c.message.contains("central (Timeout)"))
    })
    .await;
    support::eventually("east and west run the new template", || async {
        rollout(&f, "east").await.as_deref() == Some("2") && rollout(&f, "west").await.as_deref() == Some("2")
    })
    .await;
    // Nothing more can be written while central hangs: the status of that state is the truth
    // to tell (before: `Reconciling`, naming nothing, with central's pods counted as ready).
    let started = std::time::Instant::now();
    let s = loop {
        let s = f.status("redis").await;
        // East and west keep theirs: an unreachable member is no placement change (onScale
        // Keep), and its 4-5 cannot move before a fence.
        let slice = |c: &str| s.slices.iter().find(|x| x.cluster == c).map(|x| (x.start, x.replicas, x.ready_replicas));
        if s.observed_generation == new_template
            && s.moves.is_empty()
            && slice("east") == Some((0, 2, 2))
            && slice("west") == Some((2, 2, 2))
            && condition(&s, "ClusterUnreachable").is_some_and(|c| c.status == "True")
            // A term's stamp still on its way to the members is reported as such for a moment
            // (Ready False, Writing); what the status says of the hung member comes after.
            && condition(&s, "Ready").is_some_and(|c| c.reason != "Writing")
        {
            break s;
        }
        assert!(
            started.elapsed() < support::DEADLINE,
            "timed out waiting for the status of the new template with nothing left to write: {}",
            serde_json::to_string(&s).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let ready = condition(&s, "Ready").expect("a Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "MembersUnreachable"),
        "{}",
        serde_json::to_string(&s).unwrap_or_default()
    );
    assert!(ready.message.starts_with("central cannot be reached"), "{}", ready.message);
    assert_eq!(s.ready.as_deref(), Some("4/6"), "central's pods are not counted while it hangs");
    let central = s.slices.iter().find(|x| x.cluster == "central").expect("central's slice stays in the status");
    assert_eq!((central.start, central.replicas, central.ready_replicas), (4, 2, 0));

    // Eight replicas over east and west only: east takes 0-3; west takes 6-7 while central
    // still holds 4-5 (nothing may confirm that central does not run them).
    let body = serde_json::json!({"spec": {"replicas": 8, "placement": {"clusters": [
        {"name": "east", "weight": 1}, {"name": "west", "weight": 1}, {"name": "central", "weight": 0}]}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("patched");
    support::eventually("east and west got their writes while central hangs", || async {
        f.member_slice("east", "redis").await == Some((0, 4)) && f.member_slice("west", "redis").await == Some((6, 2))
    })
    .await;

    stop.store(true, Ordering::SeqCst);
    let seen = recorder.await.expect("the recorder");
    let mut said_unreachable = false;
    for s in &seen {
        let unreachable = condition(s, "ClusterUnreachable").is_some_and(|c| c.status == "True");
        assert!(
            !said_unreachable || unreachable,
            "the status forgot central while it still hung: {}",
            serde_json::to_string(s).unwrap_or_default()
        );
        said_unreachable |= unreachable;
        if s.observed_generation >= new_template {
            let ready = condition(s, "Ready").map(|c| c.status.as_str());
            let progressing = condition(s, "Progressing").map(|c| (c.status.as_str(), c.reason.as_str()));
            assert_ne!(
                ready,
                Some("True"),
                "Ready while central hangs with the old template: {}",
                serde_json::to_string(s).unwrap_or_default()
            );
            assert_ne!(
                progressing,
                Some(("False", "Complete")),
                "Complete while central hangs: {}",
                serde_json::to_string(s).unwrap_or_default()
            );
        }
    }
    assert!(said_unreachable, "the status said central was unreachable");

    // Central answers again: it gives up 4-5 to west and takes the template on the way.
    f.sandbox.ctl_ok(&["heal", "central"]);
    f.wait_settled("redis", &[("east", 0, 4), ("west", 4, 4)], "eight replicas over east and west").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_hangs_within_its_grace_costs_the_others_one_request_deadline_not_the_grace() {
    // A grace far longer than the test: central stays "reachable" for the coordinator all
    // along, so its writes are attempted in every round and never answered. The others'
    // writes must not wait for them.
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut fsts = example(&f.members);
    fsts.spec.failover.unreachable_after_seconds = Some(3600);
    f.create(&fsts).await;
    f.wait_settled("redis", &THIRDS, "initial slices").await;
    f.sandbox.ctl_ok(&["partition", "central", "--hang"]);
    let body = serde_json::json!({"spec": {"template": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("patched");
    support::eventually("east and west run the new template while central hangs", || async {
        rollout(&f, "east").await.as_deref() == Some("2") && rollout(&f, "west").await.as_deref() == Some("2")
    })
    .await;
    f.sandbox.ctl_ok(&["heal", "central"]);
    support::eventually("central runs the new template once it answers", || async {
        rollout(&f, "central").await.as_deref() == Some("2")
    })
    .await;
    f.wait_settled("redis", &THIRDS, "all three settled again").await;
    f.assert_ledger_clean();
}
