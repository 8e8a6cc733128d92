//! One disruption budget across clusters: with `spec.disruption`, spanset writes in every
//! member holding part of the federation a PodDisruptionBudget with that member's share of what
//! the federation's budget has left, given first where a drain waits. Two real `kubectl drain`s
//! in two members at once never take more of the federation down than the budget — judged on
//! the sandbox ledger's Ready spans at every instant — and both finish. Removing
//! `spec.disruption` removes the budgets; so does deleting the federation.

use std::collections::BTreeMap;

use k8s_openapi::api::{core::v1::Pod, policy::v1::PodDisruptionBudget};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use spanset_api::Backend;
use support::{
    Kubectl, eventually,
    federation::{Controller, Federation},
    timeline,
};

use crate::support;

const MEMBERS: [&str; 3] = ["east", "west", "central"];

/// Three members, a controller, and the example federation (6 replicas, 2 per member) with
/// `spec.disruption.maxUnavailable: 1`, settled, with a budget in every member.
async fn settled() -> (Federation, Controller) {
    settled_on(Backend::StatefulSet).await
}

/// [`settled`] with the members' workloads of `backend` (OpenKruise in the sandbox for
/// Advanced StatefulSets).
async fn settled_on(backend: Backend) -> (Federation, Controller) {
    let flags: &[&str] = if backend == Backend::AdvancedStatefulSet { &["--kruise"] } else { &[] };
    let f = Federation::start_flags(&MEMBERS, flags).await;
    let c = Controller::start(&f.sandbox, "controller");
    let mut fsts = spanset_api::example(&f.members);
    fsts.spec.backend = backend;
    fsts.spec.disruption = Some(serde_json::from_value(serde_json::json!({"maxUnavailable": 1})).unwrap());
    f.create(&fsts).await;
    wait_thirds(&f, "settled").await;
    eventually("a budget in every member", || async { minimums(&f).await.values().all(Option::is_some) }).await;
    (f, c)
}

/// Waits until the federation runs 2 Ready pods in each member and nothing moves (read from the
/// status, which says so for either backend).
async fn wait_thirds(f: &Federation, what: &str) {
    eventually(what, || async {
        let s = f.status("redis").await;
        s.ready.as_deref() == Some("6/6")
            && s.moves.is_empty()
            && MEMBERS
                .iter()
                .all(|m| s.slices.iter().any(|sl| sl.cluster == *m && sl.replicas == 2 && sl.ready_replicas == 2))
    })
    .await;
}

/// `minAvailable` of spanset's budget in each member (`None`: no budget).
async fn minimums(f: &Federation) -> BTreeMap<String, Option<i32>> {
    let mut out = BTreeMap::new();
    for m in MEMBERS {
        let api: Api<PodDisruptionBudget> = Api::namespaced(f.member(m).await, "default");
        let min =
            api.get_opt("redis").await.expect("budgets read").map(|b| match b.spec.and_then(|s| s.min_available) {
                Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) => n,
                other => panic!("spanset writes an absolute minAvailable, found {other:?}"),
            });
        out.insert(m.to_string(), min);
    }
    out
}

async fn wait_minimums(f: &Federation, want: &[(&str, i32)]) {
    let want: BTreeMap<String, Option<i32>> = want.iter().map(|(m, n)| (m.to_string(), Some(*n))).collect();
    eventually(&format!("budgets {want:?}"), || async { minimums(f).await == want }).await;
}

/// The node of one of the federation's pods in `member`.
async fn node_with_a_pod(f: &Federation, member: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(f.member(member).await, "default");
    let list = pods.list(&ListParams::default().labels("spanset.dev/federation=redis")).await.expect("pods listed");
    list.items
        .iter()
        .find_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .unwrap_or_else(|| panic!("a pod of redis runs in {member}"))
}

fn kubectl(f: &Federation, context: &str) -> Kubectl {
    let mut k = Kubectl::on_path(&f.sandbox);
    k.context = Some(context.to_string());
    k
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_drains_in_two_members_never_take_more_than_the_federation_budget_and_both_finish() {
    two_drains(Backend::StatefulSet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_drains_of_advanced_statefulsets_never_take_more_than_the_federation_budget() {
    two_drains(Backend::AdvancedStatefulSet).await;
}

async fn two_drains(backend: Backend) {
    let (f, _c) = settled_on(backend).await;
    let targets = [("west", node_with_a_pod(&f, "west").await), ("central", node_with_a_pod(&f, "central").await)];
    let t0 = jiff::Timestamp::now();
    // Both drains at once, each with the real kubectl against its member: each cordons its node
    // and evicts, retrying every 5 s while its member's budget refuses.
    let drains: Vec<_> = targets
        .iter()
        .map(|(member, node)| {
            let mut cmd = kubectl(&f, member).command();
            cmd.args(["drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=400s"]);
            let what = format!("drain of {node} in {member}");
            std::thread::spawn(move || (what, cmd.output().expect("kubectl runs")))
        })
        .collect();
    let outputs =
        tokio::task::spawn_blocking(move || drains.into_iter().map(|d| d.join().unwrap()).collect::<Vec<_>>())
            .await
            .unwrap();
    let t1 = jiff::Timestamp::now();
    for (what, out) in &outputs {
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{what} failed:\n{stdout}\n{stderr}");
        assert!(stdout.lines().any(|l| l.ends_with(" drained")), "{what}:\n{stdout}");
    }
    let runs = timeline::runs(&f.sandbox, "redis");
    let (most, at, which) = timeline::most_unavailable(&runs, 0..6, t0, t1);
    assert!(most <= 1, "{most} pods of the federation were down at once at {at} (budget 1): ordinals {which:?}");
    let evicted = runs.iter().filter(|r| r.until.is_some_and(|u| u >= t0 && u <= t1)).count();
    assert!(evicted >= 2, "both drains evicted a pod of the federation: {evicted}");
    // Settled again, every pod off the cordoned nodes, and the budget's status visible with
    // kubectl: east holds the one disruption left, the others none.
    wait_thirds(&f, "settled after the drains").await;
    wait_minimums(&f, &[("east", 1), ("west", 2), ("central", 2)]).await;
    for (member, allowed) in [("east", "1"), ("west", "0"), ("central", "0")] {
        let k = kubectl(&f, member);
        eventually(&format!("{member}'s budget allows {allowed}"), || async {
            k.ok(&["get", "pdb", "redis", "-o", "jsonpath={.status.disruptionsAllowed}"]) == allowed
        })
        .await;
        let table = k.ok(&["get", "pdb"]);
        let row: Vec<&str> = table.lines().find(|l| l.starts_with("redis ")).unwrap_or("").split_whitespace().collect();
        let min = if member == "east" { "1" } else { "2" };
        assert_eq!(row[..4], ["redis", min, "N/A", allowed], "{member}:\n{table}");
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_budget_or_the_federation_removes_the_members_budgets() {
    let (f, _c) = settled().await;
    // What is left (1) goes round-robin from the first member: east may lose one pod.
    wait_minimums(&f, &[("east", 1), ("west", 2), ("central", 2)]).await;
    let none: BTreeMap<String, Option<i32>> = MEMBERS.iter().map(|m| (m.to_string(), None)).collect();
    let unset = serde_json::json!({"spec": {"disruption": null}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&unset)).await.expect("budget removed");
    eventually("no budget left in any member", || async { minimums(&f).await == none }).await;
    let set = serde_json::json!({"spec": {"disruption": {"minAvailable": "50%"}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&set)).await.expect("budget set");
    // 3 of 6 must stay: 3 are left, one for each member.
    wait_minimums(&f, &[("east", 1), ("west", 1), ("central", 1)]).await;
    f.api().delete("redis", &DeleteParams::default()).await.expect("federation deleted");
    eventually("the federation gone", || async { f.api().get_opt("redis").await.unwrap().is_none() }).await;
    assert_eq!(minimums(&f).await, none, "its budgets went with it");
    for m in MEMBERS {
        let api: Api<PodDisruptionBudget> = Api::namespaced(f.member(m).await, "default");
        let left: Vec<String> =
            api.list(&ListParams::default()).await.unwrap().items.iter().map(|b| b.name_any()).collect();
        assert!(left.is_empty(), "{m}: {left:?}");
    }
    f.assert_ledger_clean();
}
