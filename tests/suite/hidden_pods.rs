//! A pod of a federation cannot hide from spanset, nor be created around the identity gate,
//! end to end with the real binary, kubectl and the sandbox's ledger:
//!
//! - a member's guards refuse `kubectl label pod redis-2 spanset.dev/federation-`;
//! - with that guard's binding deleted (an administrator's emergency step), the label removed,
//!   the pod's node cut off (its containers keep running) and the member's weight set to 0, the
//!   pod's ordinal starts nowhere else while the hidden pod runs: spanset knows the pod by its
//!   name (also a controller started while it hides), its `Degraded` condition names it, and
//!   the ordinal moves once the pod is really gone;
//! - a bare pod with redis-0's name and the federation's label created in another member while
//!   redis-0 runs (not the StatefulSet's selector: west's StatefulSet would adopt such a pod and
//!   delete it, as outside its slice, as kube-controller-manager's does) is
//!   refused by the guards; with their bindings deleted it is accepted, and then the ledger
//!   reports the identity running twice and spanset's `IdentityConflict` names the bare pod.

use crate::support;

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
};
use support::{
    Kubectl,
    federation::{Controller, Federation},
};

/// East's slice and west's of the example federation over the two members.
const HALVES: [(&str, i32, i32); 2] = [("east", 0, 3), ("west", 3, 3)];

/// The example federation (six redis, east and west 1:1), settled, with a controller.
async fn settled() -> (Federation, Controller) {
    let f = Federation::start(&["east", "west"]).await;
    let c = Controller::start(&f.sandbox, "controller");
    f.create(&f.placing("redis", &["east", "west"])).await;
    f.wait_settled("redis", &HALVES, "three ordinals in each member").await;
    (f, c)
}

/// The ledger's verdict: `None` when clean, else its report.
fn ledger_violation(f: &Federation) -> Option<String> {
    let check = f.sandbox.ctl(&["ledger", "--check"]);
    (!check.status.success())
        .then(|| String::from_utf8_lossy(&check.stdout).to_string() + &String::from_utf8_lossy(&check.stderr))
}

/// The runs of ordinal `k` of `default/redis` in the ledger, in start order: `(cluster, pod
/// uid, from, until)`.
fn runs_of(f: &Federation, k: u64) -> Vec<(String, String, jiff::Timestamp, Option<jiff::Timestamp>)> {
    let ledger: serde_json::Value = serde_json::from_str(&f.sandbox.ctl_ok(&["ledger"])).expect("ledger JSON");
    let mut runs: Vec<_> = ledger["incarnations"]
        .as_array()
        .expect("incarnations")
        .iter()
        .filter(|i| i["identity"]["statefulset"] == "redis" && i["identity"]["ordinal"] == k)
        .map(|i| {
            let at = |v: &serde_json::Value| v.as_str().map(|t| t.parse::<jiff::Timestamp>().expect("a timestamp"));
            let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            (s(&i["cluster"]), s(&i["uid"]), at(&i["runningFrom"]).expect("a start"), at(&i["runningUntil"]))
        })
        .collect();
    runs.sort_by_key(|r| r.2);
    runs
}

/// The message of the federation's condition `type_` while it is True with `reason`.
async fn condition(f: &Federation, type_: &str, reason: &str) -> Option<String> {
    let status = f.status("redis").await;
    status
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_ && c.status == "True" && c.reason == reason)
        .map(|c| c.message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_spanset_s_label_from_a_pod_is_refused_by_the_member() {
    let (f, _c) = settled().await;
    let mut k = Kubectl::on_path(&f.sandbox);
    k.context = Some("east".into());
    let err = k.fails(&["label", "pod", "redis-2", "spanset.dev/federation-"]);
    assert!(
        err.contains(
            "ValidatingAdmissionPolicy 'spanset-owner-labels' with binding 'spanset-owner-labels' denied request: \
             the spanset.dev/ labels and annotations of pod default/redis-2 are owned by spanset \
             (FederatedStatefulSet default/redis in the host cluster)"
        ),
        "{err}"
    );
    let err = k.fails(&["label", "pvc", "data-redis-2", "spanset.dev/federation-"]);
    assert!(err.contains("PersistentVolumeClaim default/data-redis-2 are owned by spanset"), "{err}");
    let pod = Api::<Pod>::namespaced(f.member("east").await, "default").get("redis-2").await.expect("redis-2");
    assert_eq!(pod.labels().get("spanset.dev/federation").map(String::as_str), Some("redis"), "nothing changed");
    // Other labels are the user's.
    k.ok(&["label", "pod", "redis-2", "team=db"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_label_was_removed_keeps_its_ordinal_from_starting_elsewhere() {
    let (f, mut c) = settled().await;
    let east_pods: Api<Pod> = Api::namespaced(f.member("east").await, "default");
    let west_pods: Api<Pod> = Api::namespaced(f.member("west").await, "default");
    // East's highest ordinal, the one a move to west takes first.
    let hidden = east_pods.get("redis-2").await.expect("redis-2 runs in east");
    let node = hidden.spec.as_ref().and_then(|s| s.node_name.clone()).expect("redis-2 is scheduled");

    // The administrator's emergency step, then the label removed, the node's network lost.
    f.delete_bindings("east", &["spanset-owner-labels"]).await;
    let unlabel = serde_json::json!({"metadata": {"labels": {"spanset.dev/federation": null}}});
    east_pods.patch("redis-2", &PatchParams::default(), &Patch::Merge(&unlabel)).await.expect("label removed");
    f.sandbox.ctl_ok(&["node-down", "east", &node]);
    let body = serde_json::json!({"spec": {"placement": {"clusters": [
        {"name": "east", "weight": 0}, {"name": "west", "weight": 1}]}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(body)).await.expect("east's weight set to 0");

    // East shrinks to let ordinal 2 go; its pod, hidden from the label and on a node that lost
    // its network, keeps running. Until spanset says it sees that pod, every look finds
    // ordinal 2 running nowhere but east and the ledger clean.
    let named = "redis-2 in east (its spanset.dev/federation label was removed)";
    let not_twice = || async {
        if let Some(p) = west_pods.get_opt("redis-2").await.expect("west's pods read") {
            let phase = p.status.and_then(|s| s.phase);
            assert_ne!(phase.as_deref(), Some("Running"), "ordinal 2 started in west while east's hidden pod runs");
        }
        if let Some(v) = ledger_violation(&f) {
            panic!("the ledger found an identity running twice: {v}");
        }
    };
    support::eventually("Degraded names the hidden pod while east's StatefulSet lets ordinal 2 go", || async {
        not_twice().await;
        let shrunk = f.member_slice("east", "redis").await.is_some_and(|(_, r)| r < 3);
        shrunk && condition(&f, "Degraded", "StrayPods").await.is_some_and(|m| m.contains(named))
    })
    .await;
    assert_eq!(f.member_slice("west", "redis").await, Some((3, 3)), "west's spec never gained ordinal 2");

    // A controller that starts now never saw the pod labelled: its watches' first lists and its
    // confirming lists find it by name alone. It takes over (stamping the members with its
    // term) and is given every chance to act wrongly.
    let term = || async {
        let sts: Api<k8s_openapi::api::apps::v1::StatefulSet> = Api::namespaced(f.member("east").await, "default");
        let sts = sts.get("redis").await.expect("east's StatefulSet");
        sts.annotations().get("spanset.dev/term").and_then(|t| t.parse::<u64>().ok()).unwrap_or(0)
    };
    let old_term = term().await;
    c.kill();
    let next = Controller::start(&f.sandbox, "controller-2");
    support::eventually("the new controller leads and has stamped east", || async {
        not_twice().await;
        term().await > old_term
    })
    .await;
    tokio::task::block_in_place(|| next.wait_reconciles("redis", 5));
    not_twice().await;
    assert_eq!(f.member_slice("west", "redis").await, Some((3, 3)), "west's spec never gained ordinal 2");
    support::eventually("the new controller names the hidden pod", || async {
        condition(&f, "Degraded", "StrayPods").await.is_some_and(|m| m.contains(named))
    })
    .await;
    let still = east_pods.get("redis-2").await.expect("the hidden pod is still there");
    assert_eq!(still.uid(), hidden.uid());

    // The node comes back: its kubelet stops the pod, and only then does ordinal 2 move.
    f.sandbox.ctl_ok(&["node-up", "east", &node]);
    f.wait_settled("redis", &[("west", 0, 6)], "every ordinal in west").await;
    f.assert_ledger_clean();
    let runs = runs_of(&f, 2);
    let first_west = runs.iter().position(|r| r.0 == "west").expect("ordinal 2 runs in west at last");
    let east_run = runs.iter().find(|r| r.1 == hidden.uid().unwrap()).expect("the hidden pod's run");
    let ended = east_run.3.expect("the hidden pod's run ended when its node came back");
    assert!(ended <= runs[first_west].2, "ordinal 2 started in west before east's hidden pod stopped: {runs:?}");
    for pair in runs.windows(2) {
        assert!(pair[0].3.is_some_and(|until| until <= pair[1].2), "ordinal 2's runs overlap: {runs:?}");
    }
    assert!(condition(&f, "Degraded", "StrayPods").await.is_none(), "the hidden pod is gone");
}

/// A bare pod with `name` and the federation's labels (a copied manifest), no gate.
fn bare_pod(name: &str, labelled: bool) -> String {
    // `app: copy`: outside the StatefulSets' selector (`app: redis`), so no member adopts it.
    let labels = if labelled { r#"{"app": "copy", "spanset.dev/federation": "redis"}"# } else { r#"{"app": "x"}"# };
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "namespace": "default", "labels": {labels}}},
            "spec": {{"containers": [{{"name": "redis", "image": "redis:7"}}]}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_pod_with_a_running_identity_s_name_is_refused_and_if_let_in_is_seen_by_spanset_and_the_ledger() {
    let (f, c) = settled().await;
    let mut k = Kubectl::on_path(&f.sandbox);
    k.context = Some("west".into());
    // West's guards: by label, and by name (west has its own StatefulSet redis).
    let err = k.run_with_stdin(&["create", "-f", "-"], &bare_pod("redis-0", true));
    let stderr = String::from_utf8_lossy(&err.stderr);
    assert!(!err.status.success(), "a labelled bare redis-0 was accepted");
    assert!(
        stderr.contains("pod default/redis-0") && stderr.contains("without the spanset.dev/identity scheduling gate"),
        "{stderr}"
    );
    let err = k.run_with_stdin(&["create", "-f", "-"], &bare_pod("redis-0", false));
    let stderr = String::from_utf8_lossy(&err.stderr);
    assert!(!err.status.success(), "an unlabelled bare redis-0 was accepted");
    assert!(
        stderr.contains(
            "ValidatingAdmissionPolicy 'spanset-identity-gate-names' with binding 'spanset-identity-gate-names' denied \
             request: pod default/redis-0 bears the name of a pod of StatefulSet default/redis"
        ),
        "{stderr}"
    );
    assert!(ledger_violation(&f).is_none(), "nothing ran twice");

    // With the bindings deleted, the copy is accepted and runs beside east's redis-0.
    f.delete_bindings("west", &["spanset-identity-gate", "spanset-identity-gate-names"]).await;
    k.ok_with_stdin(&["create", "-f", "-"], &bare_pod("redis-0", true));
    let west_pods: Api<Pod> = Api::namespaced(f.member("west").await, "default");
    support::eventually("west's bare redis-0 runs", || async {
        west_pods
            .get_opt("redis-0")
            .await
            .ok()
            .flatten()
            .is_some_and(|p| p.status.and_then(|s| s.phase).as_deref() == Some("Running"))
    })
    .await;
    let violation = ledger_violation(&f).expect("the ledger sees the bare pod");
    assert!(
        violation.contains("default/redis ordinal 0 ran in two places at once")
            && violation.contains("east pod redis-0")
            && violation.contains("west pod redis-0"),
        "{violation}"
    );
    let conflict = "redis-0 runs in east and west (in west: not made by a StatefulSet)";
    support::eventually("IdentityConflict names the bare pod", || async {
        condition(&f, "IdentityConflict", "RunningTwice").await.is_some_and(|m| m.contains(conflict))
    })
    .await;
    let degraded = condition(&f, "Degraded", "StrayPods").await.expect("Degraded names it too");
    assert!(degraded.contains("redis-0 in west (not made by a StatefulSet)"), "{degraded}");
    // The gauge the SpansetIdentityConflict alert reads is 1 while the conflict lasts and goes
    // back to 0 when the copy is gone, so the alert resolves; the counter keeps the occurrence.
    let gauge = r#"spanset_identity_conflict{federation="default/redis"}"#;
    let counter = r#"spanset_identity_conflicts_total{federation="default/redis"}"#;
    support::wait_until("the identity conflict gauge at 1", support::DEADLINE, || c.sample(gauge) == Some(1.0));
    k.ok(&["delete", "pod", "redis-0", "--grace-period=0", "--force"]);
    support::eventually("IdentityConflict is False again", || async {
        let status = f.status("redis").await;
        status.conditions.iter().any(|c| c.type_ == "IdentityConflict" && c.status == "False")
    })
    .await;
    support::wait_until("the identity conflict gauge back at 0", support::DEADLINE, || c.sample(gauge) == Some(0.0));
    assert!(c.sample(counter).is_some_and(|n| n >= 1.0), "the occurrence stays counted: {:?}", c.sample(counter));
}
