//! PodDisruptionBudgets, the eviction subresource and `kubectl drain` in the sandbox, as on a
//! real cluster: a budget's status follows its pods, an eviction past the budget is refused
//! with 429 and deletes nothing, two evictions racing for the last disruption get it once, and
//! the real kubectl's drain waits (retrying every 5 s) while the budget is spent and finishes
//! once a pod is Ready again. How many pods were down at once is judged from the ledger's
//! Ready spans over the whole of each test (every instant, not polled), and the identity
//! ledger must stay clean.

use std::sync::Arc;

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{Event, Pod},
    policy::v1::PodDisruptionBudget,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use spanset_sim::{
    cluster::{Cluster, ClusterConfig},
    sandbox::fleet::Fleet,
};
use support::{Background, DEADLINE, Kubectl, Sandbox, eventually, timeline, wait_until};

use crate::support;

const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

struct Sim {
    fleet: Fleet,
    cluster: Arc<Cluster>,
    sets: Api<StatefulSet>,
    pods: Api<Pod>,
    pdbs: Api<PodDisruptionBudget>,
}

/// One simulated cluster, and a client that does not retry (a 429 must reach the test).
async fn sim() -> Sim {
    let config = ClusterConfig { time_factor: 0.01, ..ClusterConfig::named("east") };
    let fleet = Fleet::start(vec![config], None).await.expect("sandbox starts");
    let mut client_config = kube::Config::new(fleet.servers[0].url().parse().unwrap());
    client_config.default_retry = false;
    let client = Client::try_from(client_config).unwrap();
    let cluster = fleet.servers[0].cluster.clone();
    Sim {
        fleet,
        cluster,
        sets: Api::default_namespaced(client.clone()),
        pods: Api::default_namespaced(client.clone()),
        pdbs: Api::default_namespaced(client),
    }
}

fn web(replicas: i32) -> StatefulSet {
    serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {
        "replicas": replicas, "serviceName": "web", "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"terminationGracePeriodSeconds": 10, "containers": [{"name": "web", "image": "web:1"}]}}}}))
    .unwrap()
}

fn budget(name: &str, spec: Value) -> PodDisruptionBudget {
    let mut spec = spec;
    if spec.get("selector").is_none() {
        spec["selector"] = json!({"matchLabels": {"app": "web"}});
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Pods of the set that are up: Ready and not being deleted.
fn up(pods: &[Pod]) -> usize {
    pods.iter().filter(|p| ready(p) && p.metadata.deletion_timestamp.is_none()).count()
}

async fn all_up(s: &Sim, n: usize) {
    eventually(&format!("{n} pods up"), || async {
        up(&s.pods.list(&ListParams::default()).await.unwrap().items) == n
    })
    .await;
}

/// `[expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed]` of a budget, once its
/// status is of its current generation.
async fn counts(s: &Sim, name: &str) -> Option<[i32; 4]> {
    let pdb = s.pdbs.get(name).await.unwrap();
    let st = pdb.status?;
    (st.observed_generation == pdb.metadata.generation).then_some([
        st.expected_pods,
        st.desired_healthy,
        st.current_healthy,
        st.disruptions_allowed,
    ])
}

async fn wait_counts(s: &Sim, name: &str, want: [i32; 4]) {
    eventually(&format!("budget {name} at {want:?}"), || async { counts(s, name).await == Some(want) }).await;
}

fn condition(pdb: &PodDisruptionBudget) -> (String, String) {
    let c = pdb.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|cs| cs.first()).cloned().unwrap();
    assert_eq!(c.type_, "DisruptionAllowed");
    (c.status, c.reason)
}

/// The most ordinals of the set `web` (`0..replicas`) not Ready at one instant between `from`
/// and now, with the first such instant and which, from the ledger's Ready spans: every
/// instant counts, not only those a poll happened to see (at the sandbox's time factor a pod
/// is down for a few tens of milliseconds).
fn most_down(s: &Sim, replicas: u32, from: jiff::Timestamp) -> (usize, jiff::Timestamp, Vec<u32>) {
    let runs = timeline::runs_of(&s.fleet.ledger, "web");
    timeline::most_unavailable(&runs, 0..replicas, from, jiff::Timestamp::now())
}

fn api_error(r: Result<kube::core::Status, kube::Error>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_budgets_status_follows_its_pods_and_its_controllers_scale() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &web(3)).await.unwrap();
    all_up(&s, 3).await;
    s.pdbs.create(&PostParams::default(), &budget("web", json!({"maxUnavailable": 1}))).await.unwrap();
    wait_counts(&s, "web", [3, 2, 3, 1]).await;
    assert_eq!(condition(&s.pdbs.get("web").await.unwrap()), ("True".into(), "SufficientPods".into()));
    // A pod unready: the budget is spent.
    s.cluster.faults.set_pod_ready("default", "web-1", Some(false));
    wait_counts(&s, "web", [3, 2, 2, 0]).await;
    assert_eq!(condition(&s.pdbs.get("web").await.unwrap()), ("False".into(), "InsufficientPods".into()));
    s.cluster.faults.set_pod_ready("default", "web-1", None);
    wait_counts(&s, "web", [3, 2, 3, 1]).await;
    // Percentages resolve against the StatefulSet's replicas, not the pods there are.
    s.pdbs
        .patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"maxUnavailable": "50%"}})))
        .await
        .unwrap();
    wait_counts(&s, "web", [3, 1, 3, 2]).await;
    s.sets.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 4}}))).await.unwrap();
    wait_counts(&s, "web", [4, 2, 4, 2]).await;
    let pdb = s.pdbs.get("web").await.unwrap();
    assert_eq!((pdb.metadata.generation, pdb.status.unwrap().observed_generation), (Some(2), Some(2)));
    // An integer minAvailable counts the pods.
    s.pdbs.create(&PostParams::default(), &budget("floor", json!({"minAvailable": 4}))).await.unwrap();
    wait_counts(&s, "floor", [4, 4, 4, 0]).await;
    // A budget selecting nothing says so, as kube-controller-manager does.
    let nothing = budget("nothing", json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "none"}}}));
    s.pdbs.create(&PostParams::default(), &nothing).await.unwrap();
    wait_counts(&s, "nothing", [0, 1, 0, 0]).await;
    let events: Api<Event> = Api::default_namespaced(s.pods.clone().into_client());
    eventually("the NoPods event", || async {
        let lp = ListParams::default().fields("involvedObject.name=nothing");
        events.list(&lp).await.unwrap().items.iter().any(|e| {
            e.reason.as_deref() == Some("NoPods")
                && e.message.as_deref() == Some("No matching pods found")
                && e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("controllermanager")
        })
    })
    .await;
    assert!(s.fleet.ledger.overlaps().is_empty(), "{:?}", s.fleet.ledger.overlaps());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_eviction_past_the_budget_is_refused_with_429_and_deletes_nothing() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &web(3)).await.unwrap();
    all_up(&s, 3).await;
    let t0 = jiff::Timestamp::now();
    s.pdbs.create(&PostParams::default(), &budget("web", json!({"minAvailable": 3}))).await.unwrap();
    wait_counts(&s, "web", [3, 3, 3, 0]).await;
    let before = s.pods.get("web-0").await.unwrap();
    let refused = api_error(s.pods.evict("web-0", &EvictParams::default()).await);
    assert_eq!((refused.code, refused.reason.as_str(), refused.message.as_str()), (429, "TooManyRequests", REFUSED));
    let cause = &refused.details.as_ref().unwrap().causes[0];
    assert_eq!(
        (cause.reason.as_str(), cause.message.as_str()),
        ("DisruptionBudget", "The disruption budget web needs 3 healthy pods and has 3 currently")
    );
    let after = s.pods.get("web-0").await.unwrap();
    assert_eq!(after.uid(), before.uid());
    assert!(after.metadata.deletion_timestamp.is_none(), "a refused eviction deletes nothing");
    assert_eq!(counts(&s, "web").await, Some([3, 3, 3, 0]), "nor spends anything");

    // A dry run with an allowance spends nothing and deletes nothing.
    s.pdbs.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"minAvailable": 2}}))).await.unwrap();
    wait_counts(&s, "web", [3, 2, 3, 1]).await;
    let dry = EvictParams { post_options: PostParams { dry_run: true, ..Default::default() }, ..Default::default() };
    s.pods.evict("web-0", &dry).await.expect("a dry run is allowed");
    assert!(s.pods.get("web-0").await.unwrap().metadata.deletion_timestamp.is_none());
    assert_eq!(counts(&s, "web").await, Some([3, 2, 3, 1]));

    // A second budget over the same pods: the apiserver's 500.
    s.pdbs.create(&PostParams::default(), &budget("other", json!({"minAvailable": 0}))).await.unwrap();
    let two = api_error(s.pods.evict("web-0", &EvictParams::default()).await);
    assert_eq!(
        (two.code, two.message.as_str()),
        (500, "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
    );
    s.pdbs.delete("other", &DeleteParams::default()).await.unwrap();

    // Allowed: spent in the status, the pod marked and deleted gracefully, then recreated. A
    // finalizer holds the pod while it terminates, so that the evictions of a terminating pod
    // below do not race its containers' exit on a loaded machine.
    let hold = json!({"metadata": {"finalizers": ["test.spanset.dev/hold"]}});
    s.pods.patch("web-0", &PatchParams::default(), &Patch::Merge(hold)).await.unwrap();
    s.pods.evict("web-0", &EvictParams::default()).await.expect("one disruption is allowed");
    let evicted = s.pods.get("web-0").await.unwrap();
    assert_eq!(evicted.uid(), before.uid());
    assert!(evicted.metadata.deletion_timestamp.is_some(), "deleted gracefully");
    let conditions = evicted.status.unwrap().conditions.unwrap();
    let target = conditions.iter().find(|c| c.type_ == "DisruptionTarget").expect("marked DisruptionTarget");
    assert_eq!(
        (target.reason.as_deref(), target.message.as_deref()),
        (Some("EvictionByEvictionAPI"), Some("Eviction API: evicting"))
    );
    // The pod being deleted answers like the apiserver: deleted again, no budget asked.
    s.pods.evict("web-0", &EvictParams::default()).await.expect("a terminating pod is evictable");
    let gone = api_error(s.pods.evict("nope", &EvictParams::default()).await);
    assert_eq!((gone.code, gone.message.as_str()), (404, "pods \"nope\" not found"));
    let release = json!({"metadata": {"finalizers": null}});
    s.pods.patch("web-0", &PatchParams::default(), &Patch::Merge(release)).await.unwrap();
    all_up(&s, 3).await;
    assert!(s.pods.get("web-0").await.unwrap().uid() != before.uid(), "recreated");
    let (most, at, which) = most_down(&s, 3, t0);
    assert_eq!(most, 1, "never more than the budget down, and the one eviction allowed took one: {which:?} at {at}");
    assert!(s.fleet.ledger.overlaps().is_empty(), "{:?}", s.fleet.ledger.overlaps());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unready_pod_is_evictable_as_its_budgets_policy_says() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &web(3)).await.unwrap();
    all_up(&s, 3).await;
    s.pdbs.create(&PostParams::default(), &budget("web", json!({"minAvailable": 3}))).await.unwrap();
    s.cluster.faults.set_pod_ready("default", "web-2", Some(false));
    wait_counts(&s, "web", [3, 3, 2, 0]).await;
    // IfHealthyBudget (the default): the budget lacks healthy pods, so even the unready one stays.
    let refused = api_error(s.pods.evict("web-2", &EvictParams::default()).await);
    assert_eq!(refused.code, 429);
    // AlwaysAllow: an unready pod may always go, and spends nothing.
    s.pdbs
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}})),
        )
        .await
        .unwrap();
    wait_counts(&s, "web", [3, 3, 2, 0]).await;
    s.pods.evict("web-2", &EvictParams::default()).await.expect("AlwaysAllow lets the unready pod go");
    assert!(s.pods.get("web-2").await.unwrap().metadata.deletion_timestamp.is_some());
    // Healthy pods stay guarded.
    assert_eq!(api_error(s.pods.evict("web-1", &EvictParams::default()).await).code, 429);
    s.cluster.faults.set_pod_ready("default", "web-2", None);
    all_up(&s, 3).await;
    assert!(s.fleet.ledger.overlaps().is_empty(), "{:?}", s.fleet.ledger.overlaps());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn evictions_racing_for_the_last_disruption_get_it_once() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &web(5)).await.unwrap();
    all_up(&s, 5).await;
    s.pdbs.create(&PostParams::default(), &budget("web", json!({"maxUnavailable": 1}))).await.unwrap();
    let t0 = jiff::Timestamp::now();
    for round in 0..16 {
        wait_counts(&s, "web", [5, 4, 5, 1]).await;
        // Every pod at once, each request on its own connection and server task.
        let evictions = (0..5).map(|i| {
            let pods = s.pods.clone();
            tokio::spawn(async move { pods.evict(&format!("web-{i}"), &EvictParams::default()).await })
        });
        let mut allowed = 0;
        for e in evictions.collect::<Vec<_>>() {
            match e.await.unwrap() {
                Ok(_) => allowed += 1,
                Err(kube::Error::Api(st)) => {
                    assert_eq!((st.code, st.message.as_str()), (429, REFUSED), "round {round}")
                }
                Err(other) => panic!("round {round}: {other:?}"),
            }
        }
        assert_eq!(allowed, 1, "round {round}: exactly one eviction spends the one disruption allowed");
        all_up(&s, 5).await;
    }
    let (most, at, which) = most_down(&s, 5, t0);
    assert_eq!(most, 1, "one pod down at a time: {which:?} down at once at {at}");
    assert!(s.fleet.ledger.overlaps().is_empty(), "{:?}", s.fleet.ledger.overlaps());
}

/// The real kubectl: `drain` cordons the node, is refused while the budget is spent (a pod on
/// another node held unready), retries every 5 s printing the apiserver's message, and finishes
/// once that pod is Ready again; the evicted pod comes back on another node; `uncordon` works.
fn kubectl_drain_waits_for_the_budget(kubectl: Option<u32>) {
    let sandbox = Sandbox::start("east");
    let k = match kubectl {
        Some(minor) => match Kubectl::new(minor, &sandbox) {
            Some(k) => k,
            None => return,
        },
        None => Kubectl::on_path(&sandbox),
    };
    let manifest = r#"apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 3
  serviceName: web
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "web:1"}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"#;
    k.ok_with_stdin(&["apply", "-f", "-"], manifest);
    let pods_up = || {
        let out = k.ok(&["get", "pods", "-l", "app=web", "-o", "json"]);
        let list: Value = serde_json::from_str(&out).unwrap();
        let items: Vec<Pod> = serde_json::from_value(list["items"].clone()).unwrap();
        (up(&items), items)
    };
    wait_until("three pods up", DEADLINE, || pods_up().0 == 3);
    let allowed = || k.ok(&["get", "pdb", "web", "-o", "jsonpath={.status.disruptionsAllowed}"]);
    wait_until("one disruption allowed", DEADLINE, || allowed() == "1");
    let table = k.ok(&["get", "pdb"]);
    let header: Vec<&str> = table.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]);
    let row: Vec<&str> = table.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!(row[..4], ["web", "N/A", "1", "1"], "{table}");

    // The pod on node-1 is the one drained; another one is held unready: the budget is spent.
    let (_, items) = pods_up();
    let node_of = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
    let victim = items.iter().find(|p| node_of(p) == "node-1").expect("a pod on node-1").name_any();
    let other = items.iter().find(|p| node_of(p) != "node-1").expect("a pod elsewhere").name_any();
    sandbox.ctl_ok(&["pod-ready", "east", &other, "false"]);
    wait_until("the budget spent", DEADLINE, || allowed() == "0");

    let mut drain = Background::spawn({
        let mut cmd = k.command();
        cmd.args(["drain", "node-1", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s"]);
        cmd
    });
    let refusal = format!("error when evicting pods/\"{victim}\" -n \"default\" (will retry after 5s): {REFUSED}");
    wait_until("drain to be refused", DEADLINE, || drain.err_lines().contains(&refusal));
    drain.wait_for_line("the node cordoned", |l| l == "node/node-1 cordoned");
    assert_eq!(k.ok(&["get", "node", "node-1", "-o", "jsonpath={.spec.unschedulable}"]), "true");
    // While refused, the pod runs on: nothing was deleted.
    let (_, items) = pods_up();
    let v = items.iter().find(|p| p.name_any() == victim).expect("the victim is still there");
    assert!(v.metadata.deletion_timestamp.is_none(), "a refused eviction deletes nothing");
    assert_eq!(k.ok(&["get", "pdb", "web", "-o", "jsonpath={.status.disruptionsAllowed}"]), "0");

    // The held pod is Ready again: the next retry is allowed, and the drain completes.
    sandbox.ctl_ok(&["pod-ready", "east", &other, "auto"]);
    let status = drain.wait_exit();
    assert!(status.success(), "drain failed: {:?} {:?}", drain.lines(), drain.err_lines());
    assert!(drain.lines().iter().any(|l| *l == format!("pod/{victim} evicted")), "{:?}", drain.lines());
    assert!(drain.lines().iter().any(|l| l == "node/node-1 drained"), "{:?}", drain.lines());
    wait_until("the evicted pod back, elsewhere", DEADLINE, || {
        let (n, items) = pods_up();
        n == 3 && items.iter().all(|p| node_of(p) != "node-1")
    });
    let nodes = k.ok(&["get", "nodes"]);
    assert!(nodes.lines().any(|l| l.starts_with("node-1") && l.contains("SchedulingDisabled")), "{nodes}");
    assert_eq!(k.ok(&["uncordon", "node-1"]).trim(), "node/node-1 uncordoned");
    assert_eq!(k.ok(&["get", "node", "node-1", "-o", "jsonpath={.spec.unschedulable}"]), "");
    sandbox.ctl_ok(&["ledger", "--check"]);
}

#[test]
fn kubectl_drain_waits_for_the_budget_with_kubectl_on_path() {
    kubectl_drain_waits_for_the_budget(None);
}

#[test]
fn kubectl_drain_waits_for_the_budget_1_27() {
    kubectl_drain_waits_for_the_budget(Some(27));
}

#[test]
fn kubectl_drain_waits_for_the_budget_1_33() {
    kubectl_drain_waits_for_the_budget(Some(33));
}

#[test]
fn kubectl_validates_budgets_as_the_apiserver_does() {
    let sandbox = Sandbox::start("east");
    for minor in [27, 33] {
        let Some(k) = Kubectl::new(minor, &sandbox) else { continue };
        let both = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: both}\nspec: {minAvailable: 1, maxUnavailable: 1, selector: {matchLabels: {app: web}}}\n";
        let err = String::from_utf8_lossy(&k.run_with_stdin(&["apply", "-f", "-"], both).stderr).into_owned();
        assert!(
            err.contains(
                "The PodDisruptionBudget \"both\" is invalid: spec: Invalid value: policy.PodDisruptionBudgetSpec{"
            ) && err.contains("}: minAvailable and maxUnavailable cannot be both set"),
            "kubectl 1.{minor}: {err}"
        );
        // `kubectl create pdb` (protobuf from 1.32 on) and the table.
        let name = format!("made-{minor}");
        let out = k.ok(&["create", "pdb", &name, "--selector=app=web", "--min-available=50%"]);
        assert_eq!(out.trim(), format!("poddisruptionbudget.policy/{name} created"));
        let row = k.ok(&["get", "pdb", &name, "--no-headers"]);
        assert_eq!(row.split_whitespace().take(4).collect::<Vec<_>>(), [name.as_str(), "50%", "N/A", "0"]);
        let resources = k.ok(&["api-resources", "--api-group=policy"]);
        assert!(
            resources.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["poddisruptionbudgets", "pdb", "policy/v1", "true", "PodDisruptionBudget"]),
            "{resources}"
        );
    }
}
