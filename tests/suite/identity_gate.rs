//! The identity gate end to end: a member's own StatefulSet controller creates pods spanset did
//! not ask for — a hand scale of a member StatefulSet, a lost member whose nodes and API come
//! back together with its stale slice — and reverting the StatefulSet after the fact cannot
//! keep an identity single. With `spec.identityGate` (default `Enabled`) such pods wait,
//! unscheduled (`SchedulingGated`), until spanset has undone them; the ledger stays clean over
//! the whole run. Each scenario also runs with the gate `Disabled`, where the same steps end in
//! the ledger's violation: the gate is what keeps it clean.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{Event, Pod},
};
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams},
    runtime::{WatchStreamExt, watcher},
};
use spanset::cli::sandbox::example;
use spanset_api::{FederatedStatefulSet, IdentityGate};
use support::federation::{Controller, Federation};

use crate::support;

/// The example federation with `replicas`, the gate setting and a failover section.
fn federation(f: &Federation, replicas: i32, gate: IdentityGate, failover: serde_json::Value) -> FederatedStatefulSet {
    let mut fsts = example(&f.members);
    fsts.spec.replicas = replicas;
    fsts.spec.identity_gate = Some(gate);
    fsts.spec.failover = serde_json::from_value(failover).expect("a failover section");
    fsts
}

/// Whether a pod is waiting behind the identity gate, as the apiserver and scheduler show it.
fn scheduling_gated(p: &Pod) -> bool {
    let gated = p
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == "spanset.dev/identity"));
    let condition = p.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
        cs.iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("SchedulingGated"))
    });
    gated && condition && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
}

/// Whether a pod was bound to a node or reported running.
fn ran(p: &Pod) -> bool {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty())
        || p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// Every state a member's watch delivers of its pods, from its first list on, until the
/// task is aborted (before the sandbox goes: a watch of a dead server retries without end).
fn record_pods(api: Api<Pod>) -> (Arc<Mutex<Vec<Pod>>>, Recording) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = seen.clone();
    let task = tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).default_backoff().touched_objects().boxed();
        while let Some(ev) = stream.next().await {
            if let Ok(p) = ev {
                out.lock().unwrap().push(p);
            }
        }
    });
    (seen, Recording(task.abort_handle()))
}

/// Stops a recording task when dropped, also when a test panics.
struct Recording(tokio::task::AbortHandle);

impl Drop for Recording {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The ledger's verdict: `None` when clean, else its report.
fn ledger_violation(f: &Federation) -> Option<String> {
    let check = f.sandbox.ctl(&["ledger", "--check"]);
    (!check.status.success())
        .then(|| String::from_utf8_lossy(&check.stdout).to_string() + &String::from_utf8_lossy(&check.stderr))
}

/// A hand scale: nine replicas 3/3/3, and someone scales west's StatefulSet to 5 by hand.
/// West's StatefulSet controller creates redis-6 at once, which central runs. Member requests
/// to west are slowed (1.5 s each) so that spanset's revert lands well after that pod could
/// start. Answers the federation and what west's watch saw of redis-6 and redis-7.
async fn hand_scale(gate: IdentityGate) -> (Federation, Vec<Pod>) {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f, 9, gate, serde_json::json!({}))).await;
    let thirds = [("east", 0, 3), ("west", 3, 3), ("central", 6, 3)];
    f.wait_settled("redis", &thirds, "three slices of three").await;
    let central: Api<Pod> = Api::namespaced(f.member("central").await, "default");
    let central_six = central.get("redis-6").await.expect("central runs redis-6").uid();
    let west_client = f.member("west").await;
    let (seen, recording) = record_pods(Api::namespaced(west_client.clone(), "default"));
    // The watch has listed (west's own redis-3 is in it) before anything changes.
    support::eventually("the recording watch listed west's pods", || {
        let listed = seen.lock().unwrap().iter().any(|p| p.name_any() == "redis-3");
        async move { listed }
    })
    .await;

    // West's admission policy (deploy/member/admission.yaml, installed by `spanset join`)
    // refuses a hand scale of spanset's StatefulSet; the gate is what holds where that guard is
    // missing (a member joined without it, or an operator who removed it).
    let bindings = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding"),
        "validatingadmissionpolicybindings",
    );
    let bindings: Api<kube::api::DynamicObject> = Api::all_with(west_client.clone(), &bindings);
    for name in ["spanset-owner", "spanset-owner-scale"] {
        match bindings.delete(name, &Default::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => panic!("deleting west's binding {name}: {e}"),
        }
    }
    f.sandbox.ctl_ok(&["latency", "west", "1500"]);
    // `kubectl --context west scale sts redis --replicas 5`: the scale subresource.
    let sts: Api<StatefulSet> = Api::namespaced(west_client.clone(), "default");
    sts.patch_scale("redis", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"replicas": 5}})))
        .await
        .expect("west scaled by hand");
    let west_pods: Api<Pod> = Api::namespaced(west_client, "default");
    support::eventually("spanset reverted west's scale and west's redis-6 is gone", || async {
        let gone = west_pods.get_opt("redis-6").await.is_ok_and(|p| p.is_none());
        gone && f.member_slice("west", "redis").await == Some((3, 3))
    })
    .await;
    f.sandbox.ctl_ok(&["heal", "west"]);
    f.wait_settled("redis", &thirds, "three slices of three again").await;
    let six = central.get("redis-6").await.expect("central still runs redis-6");
    assert_eq!(six.uid(), central_six, "central's redis-6 was never disturbed");
    drop(recording);
    let states = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|p| ["redis-6", "redis-7"].contains(&p.name_any().as_str()))
        .cloned()
        .collect();
    (f, states)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_scaled_member_statefulset_runs_no_duplicate_identity() {
    let (f, states) = hand_scale(IdentityGate::Enabled).await;
    f.assert_ledger_clean();
    let six: Vec<&Pod> = states.iter().filter(|p| p.name_any() == "redis-6").collect();
    assert!(six.iter().any(|p| scheduling_gated(p)), "west's redis-6 was seen Pending/SchedulingGated: {six:#?}");
    let bound: Vec<&Pod> = states.iter().filter(|p| ran(p)).collect();
    assert!(bound.is_empty(), "a hand-scaled pod in west was bound or ran: {bound:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gate_a_hand_scaled_member_statefulset_runs_an_identity_twice() {
    let (f, states) = hand_scale(IdentityGate::Disabled).await;
    assert!(states.iter().any(|p| p.name_any() == "redis-6" && ran(p)), "west's redis-6 ran: {states:#?}");
    let report = ledger_violation(&f).expect("the ledger sees ordinal 6 twice");
    assert!(report.contains("redis-6"), "{report}");
}

/// How many times west's StatefulSet controller reported creating `pod`.
async fn creations(f: &Federation, member: &str, pod: &str) -> i32 {
    let events: Api<Event> = Api::namespaced(f.member(member).await, "default");
    let message = format!("create Pod {pod} in StatefulSet redis successful");
    events
        .list(&ListParams::default())
        .await
        .expect("events listed")
        .items
        .iter()
        .filter(|e| e.message.as_deref() == Some(message.as_str()))
        .map(|e| e.count.unwrap_or(1))
        .sum()
}

/// A lost member returning with its stale slice: six replicas 2/2/2, Manual policy. West loses
/// power (every node powered off) and its API; an operator fences it and its ordinals 2-3 are
/// re-homed. Then its nodes restart and its API heals together — the nodes first, so that
/// west's own StatefulSet controller has recreated its stale slice's pods before spanset can
/// reach west to shrink it.
async fn returning_member(gate: IdentityGate) -> Federation {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let manual = serde_json::json!({"policy": "Manual", "unreachableAfterSeconds": 6});
    f.create(&federation(&f, 6, gate, manual)).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "thirds").await;
    let created_before = creations(&f, "west", "redis-2").await + creations(&f, "west", "redis-3").await;
    let nodes = f.node_names("west").await;
    for n in &nodes {
        f.sandbox.ctl_ok(&["node-down", "west", n, "--power-off"]);
    }
    // A power loss: the ledger records west's pods stopped at once.
    let start = Instant::now();
    loop {
        let ledger: serde_json::Value = serde_json::from_str(&f.sandbox.ctl_ok(&["ledger"])).expect("ledger JSON");
        let west: Vec<&serde_json::Value> =
            ledger["incarnations"].as_array().expect("a list").iter().filter(|e| e["cluster"] == "west").collect();
        if !west.is_empty() && west.iter().all(|e| !e["runningUntil"].is_null()) {
            break;
        }
        assert!(start.elapsed() < support::DEADLINE, "west's pods never recorded as stopped: {west:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    f.sandbox.ctl_ok(&["partition", "west"]);
    let out = loop {
        let out = f.spanset(&["fence", "west", "--reason", "power lost"]).await;
        if out.status.success() {
            break out;
        }
        // Refused until west is Unreachable.
        assert!(start.elapsed() < support::DEADLINE, "{}", String::from_utf8_lossy(&out.stderr));
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(String::from_utf8_lossy(&out.stdout).contains("fenced"));
    support::eventually("west's ordinals re-homed", || async {
        f.status("redis").await.ready.as_deref() == Some("6/6")
            && f.member_slice("east", "redis").await == Some((0, 3))
            && f.member_slice("central", "redis").await == Some((3, 3))
    })
    .await;

    for n in &nodes {
        f.sandbox.ctl_ok(&["node-up", "west", n]);
    }
    f.sandbox.ctl_ok(&["heal", "west"]);
    let west_pods: Api<Pod> = Api::namespaced(f.member("west").await, "default");
    support::eventually("west shrunk to nothing and its pods gone", || async {
        let none = west_pods
            .list(&ListParams::default())
            .await
            .is_ok_and(|l| l.items.iter().all(|p| !p.name_any().starts_with("redis-")));
        none && f.member_slice("west", "redis").await.is_some_and(|s| s.1 == 0)
    })
    .await;
    let created_after = creations(&f, "west", "redis-2").await + creations(&f, "west", "redis-3").await;
    assert!(created_after > created_before, "west's own controller recreated its stale slice's pods");
    assert_eq!(f.status("redis").await.ready.as_deref(), Some("6/6"));
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_member_returning_all_at_once_restarts_nothing_of_its_stale_slice() {
    let f = returning_member(IdentityGate::Enabled).await;
    f.assert_ledger_clean();
    let ledger: serde_json::Value = serde_json::from_str(&f.sandbox.ctl_ok(&["ledger"])).expect("ledger JSON");
    let west_uids: BTreeSet<&str> = ledger["incarnations"]
        .as_array()
        .expect("a list")
        .iter()
        .filter(|e| e["cluster"] == "west")
        .filter_map(|e| e["uid"].as_str())
        .collect();
    assert_eq!(west_uids.len(), 2, "only west's two original pods ever ran there: {ledger:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gate_a_lost_member_returning_all_at_once_runs_identities_twice() {
    let f = returning_member(IdentityGate::Disabled).await;
    let report = ledger_violation(&f).expect("the ledger sees west's stale ordinals twice");
    assert!(report.contains("redis-2") || report.contains("redis-3"), "{report}");
}

/// Turning the gate on for a running federation restarts nothing: its pods were made without
/// the gate, which matters only when a pod is created, so each member StatefulSet is recreated
/// with the gate over its orphaned pods, which it adopts and holds (see
/// `spanset_controller::member::ungated`). A pod made afterwards — here one deleted by hand —
/// waits behind the gate until spanset releases it: recreating (rather than replacing) is what
/// keeps the member from making it again from the old template.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turning_the_gate_on_restarts_no_pod_and_a_pod_made_afterwards_waits_for_it() {
    let f = Federation::start(&["east", "west"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f, 4, IdentityGate::Disabled, serde_json::json!({}))).await;
    let halves = [("east", 0, 2), ("west", 2, 2)];
    f.wait_settled("redis", &halves, "two halves, ungated").await;
    let mut before = BTreeSet::new();
    let mut uids = Vec::new();
    for m in &f.members {
        let sts: Api<StatefulSet> = Api::namespaced(f.member(m).await, "default");
        uids.push(sts.get("redis").await.unwrap().uid());
        let pods: Api<Pod> = Api::namespaced(f.member(m).await, "default");
        before.extend(pods.list(&ListParams::default()).await.unwrap().items.iter().map(|p| p.uid().unwrap()));
    }
    let east: Api<Pod> = Api::namespaced(f.member("east").await, "default");
    let (seen, recording) = record_pods(east.clone());

    f.api()
        .patch(
            "redis",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"identityGate": "Enabled"}})),
        )
        .await
        .expect("the gate turned on");
    for m in &f.members {
        let sts: Api<StatefulSet> = Api::namespaced(f.member(m).await, "default");
        support::eventually(&format!("{m}: written with the gate, holding its pods"), || async {
            sts.get_opt("redis").await.ok().flatten().is_some_and(|s| {
                let gated =
                    s.spec.as_ref().and_then(|s| s.template.spec.as_ref()).and_then(|p| p.scheduling_gates.as_ref());
                gated.is_some_and(|g| g.iter().any(|g| g.name == "spanset.dev/identity"))
                    && s.annotations().contains_key("spanset.dev/ungated-revision")
            })
        })
        .await;
    }
    f.wait_settled("redis", &halves, "two halves, gated").await;
    let mut after = BTreeSet::new();
    for m in &f.members {
        let pods: Api<Pod> = Api::namespaced(f.member(m).await, "default");
        after.extend(pods.list(&ListParams::default()).await.unwrap().items.iter().map(|p| p.uid().unwrap()));
    }
    assert_eq!(after, before, "the same four pods, adopted by the recreated StatefulSets");
    let runs = support::timeline::runs(&f.sandbox, "redis");
    assert!(runs.len() == 4 && runs.iter().all(|r| r.until.is_none()), "no pod restarted: {runs:?}");

    let old = east.get("redis-1").await.unwrap().uid();
    east.delete("redis-1", &Default::default()).await.expect("redis-1 deleted by hand");
    support::eventually("a new redis-1 Ready", || async {
        east.get_opt("redis-1").await.ok().flatten().is_some_and(|p| {
            p.uid() != old
                && p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
    })
    .await;
    drop(recording);
    let new: Vec<Pod> =
        seen.lock().unwrap().iter().filter(|p| p.name_any() == "redis-1" && p.uid() != old).cloned().collect();
    assert!(new.iter().any(scheduling_gated), "the new redis-1 waited behind the gate: {new:#?}");
    f.assert_ledger_clean();
    for (m, old) in f.members.iter().zip(&uids) {
        let sts: Api<StatefulSet> = Api::namespaced(f.member(m).await, "default");
        assert_ne!(sts.get("redis").await.unwrap().uid(), *old, "{m}: the StatefulSet was recreated");
    }
}
