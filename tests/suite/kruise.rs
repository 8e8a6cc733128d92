//! The simulated OpenKruise (`spanset sim --kruise`): the Advanced StatefulSet CRD with its
//! short name and printer columns, the documented `reserveOrdinals` examples replayed through
//! kubectl — replicas 4 reserving [1] runs 0,2,3,4; reserving 3 as well runs 0,2,4,5; and with
//! replicas 3, 0,2,4 —, specified deletion by label, scaling at `scaleStrategy.maxUnavailable`
//! with pods held unready, the in-place image update (same uid, `InPlaceUpdateReady`) against a
//! recreating env change and `ReCreate`, and, through kube-rs, `scaleStrategy.maxUnavailable`
//! with `specified-delete`.

use crate::support;

use support::{DEADLINE, Kubectl, Sandbox, wait_until};

const ASTS: &str = r#"apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata:
  name: sample
spec:
  replicas: 4
  reserveOrdinals: [1]
  serviceName: sample
  selector:
    matchLabels: {app: sample}
  template:
    metadata:
      labels: {app: sample}
    spec:
      containers:
      - name: main
        image: nginx:alpine
"#;

fn pods(k: &Kubectl) -> Vec<String> {
    let mut names: Vec<String> = k
        .ok(&["get", "pods", "-l", "app=sample", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}"])
        .lines()
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

fn runs(k: &Kubectl, want: &[u32], what: &str) {
    let want: Vec<String> = want.iter().map(|o| format!("sample-{o}")).collect();
    wait_until(what, DEADLINE, || pods(k) == want);
}

fn reserve_ordinals_as_documented(minor: u32) {
    let sandbox = Sandbox::start_with("solo", &["--kruise"]);
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    k.ok_with_stdin(&["apply", "-f", "-"], ASTS);
    runs(&k, &[0, 2, 3, 4], "replicas 4, reserveOrdinals [1]: 0,2,3,4");
    k.ok(&["patch", "asts", "sample", "--type", "merge", "-p", r#"{"spec":{"reserveOrdinals":[1,3]}}"#]);
    runs(&k, &[0, 2, 4, 5], "reserving 3 as well: 0,2,4,5");
    k.ok(&["patch", "asts", "sample", "--type", "merge", "-p", r#"{"spec":{"replicas":3}}"#]);
    runs(&k, &[0, 2, 4], "replicas 3: 0,2,4");
    wait_until("the status counts three ready", DEADLINE, || {
        k.ok(&["get", "asts", "sample", "-o", "jsonpath={.status.readyReplicas} {.status.labelSelector}"])
            == "3 app=sample"
    });
    let table = k.ok(&["get", "asts"]);
    let header: Vec<&str> = table.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "DESIRED", "CURRENT", "UPDATED", "READY", "AVAILABLE", "AGE"],
        "kubectl 1.{minor}:\n{table}"
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!(row.get(..6), Some(&["sample", "3", "3", "3", "3", "3"][..]), "kubectl 1.{minor}:\n{table}");
    // The scale subresource works through the short name.
    k.ok(&["scale", "asts", "sample", "--replicas", "2"]);
    runs(&k, &[0, 2], "scaled to 2: 0,2");
    // Pods name their owner as Kruise's StatefulSet.
    let owner = k.ok(&["get", "pod", "sample-0", "-o", "jsonpath={.metadata.ownerReferences[0].apiVersion}"]);
    assert_eq!(owner, "apps.kruise.io/v1beta1");
    // Specified deletion, as documented: label a pod and the controller deletes it and creates
    // it again at its ordinal (a new uid, without the label).
    let uid = k.ok(&["get", "pod", "sample-2", "-o", "jsonpath={.metadata.uid}"]);
    k.ok(&["label", "pod", "sample-2", "apps.kruise.io/specified-delete=true"]);
    wait_until("sample-2 recreated", DEADLINE, || {
        let out = k.run(&["get", "pod", "sample-2", "-o", "jsonpath={.metadata.uid} {.metadata.labels}"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        out.status.success() && !text.starts_with(&uid) && !text.contains("specified-delete")
    });
    runs(&k, &[0, 2], "still 0,2");
}

/// The StatefulSet controller's sweeps so far in cluster `solo` (admin API), so that "nothing
/// happened" is waited for as a fact, never as a sleep.
fn sweeps(sandbox: &Sandbox) -> u64 {
    let out = sandbox.ctl(&["clusters"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("sim-ctl clusters prints JSON");
    doc["clusters"][0]["statefulsetSweeps"].as_u64().expect("a sweep count")
}

const RATE_LIMITED: &str = r#"apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata:
  name: limited
spec:
  replicas: 1
  serviceName: limited
  podManagementPolicy: Parallel
  scaleStrategy:
    maxUnavailable: 50%
  selector:
    matchLabels: {app: limited}
  template:
    metadata:
      labels: {app: limited}
    spec:
      containers:
      - name: main
        image: nginx:alpine
"#;

/// The documented scaling with `scaleStrategy.maxUnavailable` (Parallel): scaled from 1 to 4
/// at 50% (2 pods), two new pods held unready spend the budget and the fourth waits for them.
fn max_unavailable_as_documented(minor: u32) {
    let sandbox = Sandbox::start_with("solo", &["--kruise"]);
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    k.ok_with_stdin(&["apply", "-f", "-"], RATE_LIMITED);
    let names = |k: &Kubectl| {
        let out = k.ok(&["get", "pods", "-l", "app=limited", "-o", "jsonpath={.items[*].metadata.name}"]);
        let mut v: Vec<String> = out.split_whitespace().map(str::to_string).collect();
        v.sort();
        v
    };
    wait_until("limited-0 runs", DEADLINE, || names(&k) == ["limited-0"]);
    wait_until("limited-0 ready", DEADLINE, || {
        k.ok(&["get", "asts", "limited", "-o", "jsonpath={.status.readyReplicas}"]) == "1"
    });
    for pod in ["limited-1", "limited-2"] {
        sandbox.ctl_ok(&["pod-ready", "solo", pod, "false"]);
    }
    k.ok(&["scale", "asts", "limited", "--replicas", "4"]);
    wait_until("limited-1 and limited-2 created", DEADLINE, || names(&k).len() >= 3);
    let from = sweeps(&sandbox);
    wait_until("twenty more sweeps", DEADLINE, || {
        sandbox.ctl_ok(&["resync", "solo"]);
        sweeps(&sandbox) >= from + 20
    });
    assert_eq!(names(&k), ["limited-0", "limited-1", "limited-2"], "kubectl 1.{minor}: the budget of 2 is spent");
    for pod in ["limited-1", "limited-2"] {
        sandbox.ctl_ok(&["pod-ready", "solo", pod, "auto"]);
    }
    wait_until("all four", DEADLINE, || names(&k) == ["limited-0", "limited-1", "limited-2", "limited-3"]);
}

#[test]
fn max_unavailable_1_27() {
    max_unavailable_as_documented(27);
}

#[test]
fn max_unavailable_1_33() {
    max_unavailable_as_documented(33);
}

#[test]
fn reserve_ordinals_1_27() {
    reserve_ordinals_as_documented(27);
}

#[test]
fn reserve_ordinals_1_33() {
    reserve_ordinals_as_documented(33);
}

fn pod_field(k: &Kubectl, pod: &str, path: &str) -> String {
    k.ok(&["get", "pod", pod, "-o", &format!("jsonpath={path}")])
}

/// Both pods run `image` and are Ready.
fn updated(k: &Kubectl, image: &str, what: &str) {
    wait_until(what, DEADLINE, || {
        ["web-0", "web-1"].iter().all(|p| {
            let out = k.run(&["get", "pod", p, "-o", "jsonpath={.spec.containers[0].image} {.status.containerStatuses[0].image} {.status.conditions[?(@.type==\"Ready\")].status}"]);
            String::from_utf8_lossy(&out.stdout) == format!("{image} {image} True")
        })
    });
}

/// The documented in-place update: with `podUpdatePolicy: InPlaceIfPossible` a new image is
/// applied to the running pods (same uid, the container restarted once, the
/// `InPlaceUpdateReady` condition back to True); an env change recreates them; `ReCreate`
/// recreates too.
fn in_place_update_as_documented(minor: u32) {
    let sandbox = Sandbox::start_with("solo", &["--kruise"]);
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    k.ok_with_stdin(&["apply", "-f", "-"], support::KRUISE_IN_PLACE);
    updated(&k, "nginx:1.24", "both pods run nginx:1.24");
    assert_eq!(pod_field(&k, "web-0", "{.status.conditions[?(@.type==\"InPlaceUpdateReady\")].status}"), "True");
    // Empty for a pod that is gone for the moment (between its deletion and its recreation).
    let uids = |k: &Kubectl| {
        ["web-0", "web-1"].map(|p| {
            let out = k.run(&["get", "pod", p, "-o", "jsonpath={.metadata.uid}"]);
            if out.status.success() { String::from_utf8_lossy(&out.stdout).into_owned() } else { String::new() }
        })
    };
    let before = uids(&k);

    let image = r#"{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:1.25"}]}}}}"#;
    k.ok(&["patch", "asts", "web", "--type", "merge", "-p", image]);
    updated(&k, "nginx:1.25", "both pods updated in place to nginx:1.25");
    assert_eq!(uids(&k), before, "kubectl 1.{minor}: the pods were updated in place, not recreated");
    for p in ["web-0", "web-1"] {
        assert_eq!(
            pod_field(&k, p, "{.status.containerStatuses[0].restartCount}"),
            "1",
            "{p} restarted its container once"
        );
        assert_eq!(pod_field(&k, p, "{.status.conditions[?(@.type==\"InPlaceUpdateReady\")].status}"), "True");
        let state = pod_field(&k, p, "{.metadata.annotations.apps\\.kruise\\.io/inplace-update-state}");
        assert!(state.contains("\"revision\""), "{p}'s in-place state annotation: {state}");
    }
    let events =
        k.ok(&["get", "events", "--field-selector", "involvedObject.name=web", "-o", "jsonpath={.items[*].reason}"]);
    assert!(events.contains("SuccessfulUpdatePodInPlace"), "kubectl 1.{minor}: {events}");
    let kubelet =
        k.ok(&["get", "events", "--field-selector", "involvedObject.name=web-0", "-o", "jsonpath={.items[*].message}"]);
    assert!(kubelet.contains("Container main definition changed, will be restarted"), "{kubelet}");
    wait_until("the status counts both updated and ready", DEADLINE, || {
        let fields =
            "jsonpath={.status.updatedReplicas} {.status.updatedReadyReplicas} {.status.updatedAvailableReplicas}";
        k.ok(&["get", "asts", "web", "-o", fields]) == "2 2 2"
    });

    // An env change cannot be made in place: the pods are recreated.
    let env = r#"{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:1.25","env":[{"name":"A","value":"1"}]}]}}}}"#;
    k.ok(&["patch", "asts", "web", "--type", "merge", "-p", env]);
    wait_until("both pods recreated", DEADLINE, || {
        let now = uids(&k);
        now.iter().zip(&before).all(|(a, b)| !a.is_empty() && a != b)
    });
    updated(&k, "nginx:1.25", "the recreated pods are ready");
    // ReCreate: an image change recreates too.
    let recreate = r#"{"spec":{"updateStrategy":{"rollingUpdate":{"podUpdatePolicy":"ReCreate"}},"template":{"spec":{"containers":[{"name":"main","image":"nginx:1.26","env":[{"name":"A","value":"1"}]}]}}}}"#;
    let middle = uids(&k);
    k.ok(&["patch", "asts", "web", "--type", "merge", "-p", recreate]);
    updated(&k, "nginx:1.26", "ReCreate rolled nginx:1.26");
    let after = uids(&k);
    assert!(after.iter().zip(&middle).all(|(a, b)| a != b), "ReCreate recreated: {middle:?} → {after:?}");
}

#[test]
fn in_place_update_1_27() {
    in_place_update_as_documented(27);
}

#[test]
fn in_place_update_1_33() {
    in_place_update_as_documented(33);
}

mod scale_strategy {
    //! `scaleStrategy.maxUnavailable` and `apps.kruise.io/specified-delete`, through kube-rs.

    use k8s_openapi::api::core::v1::Pod;
    use kube::{
        Api, Client, ResourceExt,
        api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams},
    };
    use serde_json::json;
    use spanset_sim::{cluster::ClusterConfig, sandbox::fleet::Fleet};

    use super::support::eventually;

    async fn sandbox() -> (Fleet, Client) {
        let config = ClusterConfig { kruise: true, time_factor: 0.01, ..ClusterConfig::named("a") };
        let fleet = Fleet::start(vec![config], None).await.expect("sandbox starts");
        let client = Client::try_from(kube::Config::new(fleet.servers[0].url().parse().unwrap())).unwrap();
        (fleet, client)
    }

    fn asts(max_unavailable: Option<i64>) -> DynamicObject {
        let mut spec = json!({"replicas": 3, "podManagementPolicy": "Parallel", "serviceName": "s",
            "selector": {"matchLabels": {"app": "s"}},
            "template": {"metadata": {"labels": {"app": "s"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}});
        if let Some(m) = max_unavailable {
            spec["scaleStrategy"] = json!({"maxUnavailable": m});
        }
        serde_json::from_value(json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
            "metadata": {"name": "s"}, "spec": spec}))
        .unwrap()
    }

    async fn pod_names(client: &Client) -> Vec<String> {
        let mut names: Vec<String> = Api::<Pod>::default_namespaced(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| p.name_any())
            .collect();
        names.sort();
        names
    }

    fn api(client: &Client) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk("apps.kruise.io", "v1beta1", "StatefulSet");
        Api::default_namespaced_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "statefulsets"))
    }

    /// Waits for `n` more sweeps of the StatefulSet controller, so that "nothing happened" is
    /// a fact and not a guess.
    async fn sweeps(fleet: &Fleet, n: u64) {
        let counter = &fleet.servers[0].cluster.counters.statefulset_sweeps;
        let from = counter.load(std::sync::atomic::Ordering::Relaxed);
        eventually("more sweeps", || async {
            fleet.servers[0].cluster.faults.resync();
            counter.load(std::sync::atomic::Ordering::Relaxed) >= from + n
        })
        .await;
    }

    #[tokio::test]
    async fn max_unavailable_holds_new_pods_while_one_is_not_ready_and_specified_delete_waits_its_turn() {
        let (fleet, client) = sandbox().await;
        let faults = &fleet.servers[0].cluster.faults;
        faults.set_pod_ready("default", "s-0", Some(false));
        api(&client).create(&PostParams::default(), &asts(Some(1))).await.unwrap();
        eventually("s-0 created", || async { pod_names(&client).await == ["s-0"] }).await;
        sweeps(&fleet, 20).await;
        assert_eq!(pod_names(&client).await, ["s-0"], "one unavailable pod spends the budget of 1");
        faults.set_pod_ready("default", "s-0", None);
        eventually("all three", || async { pod_names(&client).await == ["s-0", "s-1", "s-2"] }).await;
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        eventually("all ready", || async {
            pods.list(&ListParams::default()).await.unwrap().items.iter().all(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
        })
        .await;

        // specified-delete: s-1 is deleted and recreated at its ordinal, but not while s-2 is
        // unavailable.
        faults.set_pod_ready("default", "s-2", Some(false));
        eventually("s-2 unready", || async {
            pods.get("s-2")
                .await
                .unwrap()
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "False"))
        })
        .await;
        let uid = pods.get("s-1").await.unwrap().uid().unwrap();
        let mark = json!({"metadata": {"labels": {"apps.kruise.io/specified-delete": "true"}}});
        pods.patch("s-1", &PatchParams::default(), &Patch::Merge(&mark)).await.unwrap();
        sweeps(&fleet, 20).await;
        assert_eq!(pods.get("s-1").await.unwrap().uid(), Some(uid.clone()), "no room while s-2 is unavailable");
        faults.set_pod_ready("default", "s-2", None);
        eventually("s-1 recreated", || async {
            pods.get_opt("s-1").await.unwrap().is_some_and(|p| p.uid() != Some(uid.clone()))
        })
        .await;
    }

    #[tokio::test]
    async fn without_max_unavailable_parallel_creates_every_pod_at_once() {
        let (fleet, client) = sandbox().await;
        fleet.servers[0].cluster.faults.set_pod_ready("default", "s-0", Some(false));
        api(&client).create(&PostParams::default(), &asts(None)).await.unwrap();
        eventually("all three created", || async { pod_names(&client).await == ["s-0", "s-1", "s-2"] }).await;
    }
}
