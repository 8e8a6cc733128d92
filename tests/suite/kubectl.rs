//! The real kubectl, every installed version from 1.27 to 1.33, against `spanset sim`: each
//! command must print what it prints against a real cluster.

use crate::support;

use support::{Background, DEADLINE, Kubectl, Sandbox, wait_until};

const STS: &str = r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  replicas: REPLICAS
  serviceName: web
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
"#;

const WIDGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wg]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

const NODE: &str = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-9"},
  "status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"}],
            "nodeInfo":{"kubeletVersion":"v1.33.1"}}}"#;

const PVC: &str = r#"{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data-web-0"},
  "spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}"#;

fn pod_on_node(name: &str, app: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","labels":{{"app":"{app}"}}}},
  "spec":{{"nodeName":"node-9","containers":[{{"name":"c","image":"nginx"}}]}}}}"#
    )
}

fn sts(replicas: u32) -> String {
    STS.replace("REPLICAS", &replicas.to_string())
}

fn jsonpath(k: &Kubectl, what: &[&str], path: &str) -> String {
    let arg = format!("jsonpath={path}");
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", &arg]);
    k.ok(&args)
}

/// Runs every kubectl check for one version against its own sandbox.
fn kubectl_behaves_as_against_a_real_cluster(minor: u32) {
    let sandbox = Sandbox::start("source,destination");
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };

    // version and api-resources come from /version and discovery.
    let version = k.ok(&["version"]);
    // 1.27 prints `Server Version: version.Info{... GitVersion:"v1.33.1" ...}`, later ones `v1.33.1`.
    let server = version.lines().find(|l| l.starts_with("Server Version:")).unwrap_or("");
    assert!(server.contains("v1.33.1"), "kubectl 1.{minor} version: {version}");
    let resources = k.ok(&["api-resources"]);
    let sts_line = resources.lines().find(|l| l.starts_with("statefulsets")).expect("statefulsets listed");
    let cols: Vec<&str> = sts_line.split_whitespace().collect();
    assert_eq!(cols, ["statefulsets", "sts", "apps/v1", "true", "StatefulSet"], "kubectl 1.{minor}");
    assert!(resources.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["pods", "po", "v1", "true", "Pod"]));

    // Client-side apply: created, then configured, then unchanged (OpenAPI must be served).
    assert_eq!(k.ok_with_stdin(&["apply", "-f", "-"], &sts(3)).trim(), "statefulset.apps/web created");
    assert_eq!(k.ok_with_stdin(&["apply", "-f", "-"], &sts(4)).trim(), "statefulset.apps/web configured");
    assert_eq!(k.ok_with_stdin(&["apply", "-f", "-"], &sts(4)).trim(), "statefulset.apps/web unchanged");
    assert_eq!(jsonpath(&k, &["sts", "web"], "{.spec.replicas} {.metadata.generation}"), "4 2");
    assert_eq!(
        k.ok_with_stdin(&["apply", "--server-side", "-f", "-"], &sts(5)).trim(),
        "statefulset.apps/web serverside-applied"
    );
    assert_eq!(jsonpath(&k, &["sts", "web"], "{.spec.replicas}"), "5");

    // get: the server-side Table columns.
    let table = k.ok(&["get", "sts"]);
    let header: Vec<&str> = table.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "AGE"], "kubectl 1.{minor} get sts:\n{table}");
    let row: Vec<&str> = table.lines().nth(1).unwrap_or("").split_whitespace().collect();
    // READY is readyReplicas/replicas; the simulated controller may have started some pods.
    assert_eq!(row[0], "web", "kubectl 1.{minor} get sts:\n{table}");
    assert!(row[1].ends_with("/5") && row[1].len() == 3, "kubectl 1.{minor} get sts:\n{table}");
    let yaml = k.ok(&["get", "sts", "web", "-o", "yaml"]);
    let doc: serde_json::Value = serde_yaml::from_str(&yaml).expect("get -o yaml is YAML");
    assert_eq!((doc["kind"].as_str(), doc["metadata"]["name"].as_str()), (Some("StatefulSet"), Some("web")));
    assert!(doc["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()));

    // patch: default strategic (the blog's command), merge, and JSON patch.
    let out = k.ok(&["patch", "sts", "web", "-p", r#"{"spec": {"ordinals": {"start": 5}, "replicas": 1}}"#]);
    assert_eq!(out.trim(), "statefulset.apps/web patched");
    assert_eq!(jsonpath(&k, &["sts", "web"], "{.spec.ordinals.start} {.spec.replicas}"), "5 1");
    k.ok(&["patch", "sts", "web", "--type", "merge", "-p", r#"{"spec":{"replicas":2}}"#]);
    assert_eq!(jsonpath(&k, &["sts", "web"], "{.spec.replicas}"), "2");
    k.ok(&["patch", "sts", "web", "--type", "json", "-p", r#"[{"op":"replace","path":"/spec/replicas","value":3}]"#]);
    assert_eq!(jsonpath(&k, &["sts", "web"], "{.spec.replicas}"), "3");

    // scale goes through statefulsets/scale.
    assert_eq!(k.ok(&["scale", "sts", "web", "--replicas", "6"]).trim(), "statefulset.apps/web scaled");
    assert_eq!(jsonpath(&k, &["sts", "web"], "{.spec.replicas}"), "6");

    // replace of a stale object: the Conflict message, verbatim.
    let stale = k.ok(&["get", "sts", "web", "-o", "yaml"]);
    k.ok(&["scale", "sts", "web", "--replicas", "7"]);
    let err = String::from_utf8_lossy(&k.run_with_stdin(&["replace", "-f", "-"], &stale).stderr).into_owned();
    assert!(
        err.contains(r#"Error from server (Conflict): error when replacing "STDIN": Operation cannot be fulfilled on statefulsets.apps "web": the object has been modified; please apply your changes to the latest version and try again"#),
        "kubectl 1.{minor} replace stale: {err}"
    );
    assert_eq!(jsonpath(&k, &["sts", "web"], "{.spec.replicas}"), "7", "a refused replace changes nothing");

    // NotFound.
    let err = k.fails(&["get", "sts", "nope"]);
    assert_eq!(err.trim(), r#"Error from server (NotFound): statefulsets.apps "nope" not found"#);

    // get --watch sees additions, changes and deletions.
    let mut watch = k.command();
    watch.args(["get", "configmaps", "--watch", "--output-watch-events"]);
    let watcher = Background::spawn(watch);
    // The watch has started once the initial list is printed; the list is empty here, so wait
    // for the first object instead: create until it is seen.
    k.ok(&["create", "configmap", "w1", "--from-literal=k=v1"]);
    watcher.wait_for_line("ADDED w1", |l| l.split_whitespace().take(2).eq(["ADDED", "w1"]));
    k.ok(&["patch", "configmap", "w1", "-p", r#"{"data":{"k":"v2"}}"#]);
    watcher.wait_for_line("MODIFIED w1", |l| l.split_whitespace().take(2).eq(["MODIFIED", "w1"]));
    k.ok(&["delete", "configmap", "w1"]);
    watcher.wait_for_line("DELETED w1", |l| l.split_whitespace().take(2).eq(["DELETED", "w1"]));
    drop(watcher);

    // Tables for nodes, pods (a pod on a node without a kubelet stays Terminating after a
    // graceful delete, as on a real cluster whose node died) and PVCs; a watch with a label
    // selector sees only matching pods.
    k.ok_with_stdin(&["create", "-f", "-"], NODE);
    let nodes = k.ok(&["get", "nodes"]);
    let header: Vec<&str> = nodes.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "STATUS", "ROLES", "AGE", "VERSION"], "kubectl 1.{minor} get nodes:\n{nodes}");
    let names: Vec<&str> = nodes.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(names, ["node-1", "node-2", "node-3", "node-9"], "kubectl 1.{minor}:\n{nodes}");
    let row: Vec<&str> = nodes.lines().nth(4).unwrap_or("").split_whitespace().collect();
    assert_eq!((row[1], row[2], row[4]), ("Ready", "<none>", "v1.33.1"), "kubectl 1.{minor}:\n{nodes}");
    let mut pod_watch = k.command();
    pod_watch.args(["get", "pods", "-l", "app=quiz", "--watch", "--output-watch-events"]);
    let pod_watcher = Background::spawn(pod_watch);
    k.ok_with_stdin(&["create", "-f", "-"], &pod_on_node("other", "db"));
    k.ok_with_stdin(&["create", "-f", "-"], &pod_on_node("quiz-0", "quiz"));
    pod_watcher.wait_for_line("ADDED quiz-0", |l| l.split_whitespace().take(2).eq(["ADDED", "quiz-0"]));
    let pods = k.ok(&["get", "pods"]);
    let header: Vec<&str> = pods.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], "kubectl 1.{minor} get pods:\n{pods}");
    assert_eq!(k.ok(&["delete", "pod", "quiz-0", "--wait=false"]).trim(), r#"pod "quiz-0" deleted"#);
    let pods = k.ok(&["get", "pods", "quiz-0"]);
    let row: Vec<&str> = pods.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!((row[0], row[1], row[2]), ("quiz-0", "0/1", "Terminating"), "kubectl 1.{minor}:\n{pods}");
    pod_watcher.wait_for_line("MODIFIED quiz-0", |l| l.split_whitespace().take(2).eq(["MODIFIED", "quiz-0"]));
    let out = k.run(&["delete", "pod", "quiz-0", "--force", "--grace-period", "0"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("Immediate deletion does not wait for confirmation"));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), r#"pod "quiz-0" force deleted"#);
    pod_watcher.wait_for_line("DELETED quiz-0", |l| l.split_whitespace().take(2).eq(["DELETED", "quiz-0"]));
    assert!(
        !pod_watcher.lines().iter().any(|l| l.contains("other")),
        "the selector filters the watch: {:?}",
        pod_watcher.lines()
    );
    drop(pod_watcher);
    k.ok_with_stdin(&["create", "-f", "-"], PVC);
    wait_until("the claim to bind", DEADLINE, || jsonpath(&k, &["pvc", "data-web-0"], "{.status.phase}") == "Bound");
    let pvcs = k.ok(&["get", "pvc"]);
    let header: Vec<&str> = pvcs.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"],
        "kubectl 1.{minor} get pvc:\n{pvcs}"
    );
    let row: Vec<&str> = pvcs.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!(
        (row[0], row[1], row[3], row[4], row[5]),
        ("data-web-0", "Bound", "1Gi", "RWO", "standard"),
        "kubectl 1.{minor}:\n{pvcs}"
    );
    assert!(row[2].starts_with("pvc-"), "a provisioned volume: {pvcs}");

    // delete --cascade=orphan keeps dependents (without their owner reference); the default
    // cascade removes them, and wait --for=delete sees it.
    let uid = jsonpath(&k, &["sts", "web"], "{.metadata.uid}");
    let dependent = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"web-config","ownerReferences":[{{"apiVersion":"apps/v1","kind":"StatefulSet","name":"web","uid":"{uid}","controller":false,"blockOwnerDeletion":true}}]}},"data":{{"k":"v"}}}}"#
    );
    k.ok_with_stdin(&["create", "-f", "-"], &dependent);
    let out = k.ok(&["delete", "sts", "web", "--cascade=orphan"]);
    assert_eq!(out.trim(), r#"statefulset.apps "web" deleted"#);
    wait_until("the orphaned pod to lose its owner reference", DEADLINE, || {
        jsonpath(&k, &["configmap", "web-config"], "{.metadata.ownerReferences}").is_empty()
    });
    k.fails(&["get", "sts", "web"]);

    k.ok_with_stdin(&["apply", "-f", "-"], &sts(1));
    let uid = jsonpath(&k, &["sts", "web"], "{.metadata.uid}");
    k.ok(&["patch", "configmap", "web-config", "--type", "merge", "-p", &format!(
        r#"{{"metadata":{{"ownerReferences":[{{"apiVersion":"apps/v1","kind":"StatefulSet","name":"web","uid":"{uid}","controller":false,"blockOwnerDeletion":true}}]}}}}"#
    )]);
    let mut wait = k.command();
    wait.args(["wait", "--for=delete", "configmap/web-config", "--timeout=60s"]);
    let mut waiter = Background::spawn(wait);
    k.ok(&["delete", "sts", "web"]);
    assert!(waiter.wait_exit().success(), "kubectl 1.{minor} wait --for=delete: {:?}", waiter.lines());
    k.fails(&["get", "configmap", "web-config"]);

    // A CustomResourceDefinition makes its resource served and discoverable.
    k.ok_with_stdin(&["apply", "-f", "-"], WIDGET_CRD);
    k.ok(&["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=60s"]);
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n";
    assert_eq!(k.ok_with_stdin(&["apply", "-f", "-"], widget).trim(), "widget.example.com/w1 created");
    assert_eq!(jsonpath(&k, &["wg", "w1"], "{.spec.size}"), "3", "short name from the CRD");
    let table = k.ok(&["get", "widgets"]);
    assert!(table.lines().nth(1).is_some_and(|l| l.starts_with("w1 ")), "kubectl 1.{minor} get widgets:\n{table}");
    assert!(k.ok(&["api-resources", "--api-group=example.com"]).contains("widgets"));

    // Namespaces resolve per context; both clusters are independent.
    let mut dst = Kubectl::new(minor, &sandbox).expect("same binary");
    dst.context = Some("destination".into());
    assert!(dst.ok(&["get", "configmaps", "-o", "name"]).trim().is_empty());
    assert_eq!(sandbox.stop().code(), Some(0), "spanset sim exits 0 on SIGTERM");
}

/// What a new user looks at first on a fresh cluster: the `kubernetes` Service, node
/// addresses and OS in `get nodes -o wide`, and a pod's IP from its node's pod CIDR with the
/// node's address as host IP in `get pods -o wide`.
fn cluster_furniture_shows_in_wide_tables(minor: u32) {
    let sandbox = Sandbox::start("solo");
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    let svc = k.ok(&["get", "svc", "-A"]);
    let row: Vec<&str> = svc.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!(
        row.get(..6),
        Some(&["default", "kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"][..]),
        "kubectl 1.{minor} get svc -A:\n{svc}"
    );
    assert_eq!(jsonpath(&k, &["endpoints", "kubernetes"], "{.subsets[0].ports[0].port}"), "6443");

    let nodes = k.ok(&["get", "nodes", "-o", "wide"]);
    let node1 = nodes.lines().find(|l| l.starts_with("node-1 ")).unwrap_or("");
    for want in ["192.168.0.11", "Ubuntu 22.04.4 LTS", "5.15.0-105-generic", "containerd://1.7.0"] {
        assert!(node1.contains(want), "kubectl 1.{minor} get nodes -o wide lacks {want}:\n{nodes}");
    }
    assert_eq!(
        jsonpath(&k, &["node", "node-2"], "{.spec.podCIDR} {.status.addresses[1].type}"),
        "10.100.2.0/24 Hostname"
    );

    k.ok(&["run", "probe", "--image", "nginx:1.25"]);
    wait_until("pod probe has an IP", DEADLINE, || !jsonpath(&k, &["pod", "probe"], "{.status.podIP}").is_empty());
    let fields = jsonpath(&k, &["pod", "probe"], "{.spec.nodeName} {.status.podIP} {.status.hostIP}");
    let [node, ip, host] = fields.split(' ').collect::<Vec<_>>()[..] else { panic!("kubectl 1.{minor}: {fields}") };
    let i = node.trim_start_matches("node-");
    assert!(
        ip.starts_with(&format!("10.100.{i}.")),
        "pod IP {ip} outside {node}'s pod CIDR (the first cluster's 10.100.0.0/16)"
    );
    assert_eq!(host, format!("192.168.0.{}", 10 + i.parse::<u32>().expect("node-N")));
    let pods = k.ok(&["get", "pods", "-o", "wide"]);
    let row: Vec<&str> = pods.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!((row.get(5), row.get(6)), (Some(&ip), Some(&node)), "kubectl 1.{minor} get pods -o wide:\n{pods}");
}

/// A StatefulSet whose pod template carries a scheduling gate: its pod waits, shown as
/// `SchedulingGated`, never bound while other pods run; a gate cannot be added to it; a JSON
/// patch removing the gate lets it run.
fn scheduling_gates_hold_pods(minor: u32) {
    let sandbox = Sandbox::start("solo");
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    let gated = sts(1).replace(
        "    spec:\n      containers:",
        "    spec:\n      schedulingGates:\n      - name: example.com/hold\n      containers:",
    );
    k.ok_with_stdin(&["apply", "-f", "-"], &gated);
    wait_until("web-0 is created", DEADLINE, || k.run(&["get", "pod", "web-0"]).status.success());
    let row = |name: &str| -> Vec<String> {
        let out = k.ok(&["get", "pod", name]);
        out.lines().nth(1).unwrap_or("").split_whitespace().map(str::to_string).collect()
    };
    assert_eq!(row("web-0").get(1..3), Some(&["0/1".to_string(), "SchedulingGated".to_string()][..]));
    assert_eq!(
        jsonpath(&k, &["pod", "web-0"], "{.spec.schedulingGates[0].name}"),
        "example.com/hold",
        "the StatefulSet controller copies the template's gates"
    );
    // Another pod is scheduled and runs meanwhile: the scheduler has passed the gated one by.
    k.ok(&["run", "free", "--image", "nginx:1.25"]);
    wait_until("pod free runs", DEADLINE, || jsonpath(&k, &["pod", "free"], "{.status.phase}") == "Running");
    let cond = r#"{.status.phase} {.status.conditions[?(@.type=="PodScheduled")].status} {.status.conditions[?(@.type=="PodScheduled")].reason}"#;
    assert_eq!(jsonpath(&k, &["pod", "web-0"], cond), "Pending False SchedulingGated");
    assert_eq!(
        jsonpath(&k, &["pod", "web-0"], r#"{.status.conditions[?(@.type=="PodScheduled")].message}"#),
        "Scheduling is blocked due to non-empty scheduling gates"
    );
    assert_eq!(jsonpath(&k, &["pod", "web-0"], "{.spec.nodeName}"), "", "a gated pod is never bound");
    assert_eq!(row("web-0").get(2).map(String::as_str), Some("SchedulingGated"));

    let add = r#"[{"op":"add","path":"/spec/schedulingGates/-","value":{"name":"example.com/another"}}]"#;
    let err = k.fails(&["patch", "pod", "web-0", "--type=json", "-p", add]);
    assert!(
        err.contains(r#"The Pod "web-0" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/another'"#),
        "kubectl 1.{minor}: {err}"
    );
    k.ok(&["patch", "pod", "web-0", "--type=json", "-p", r#"[{"op":"remove","path":"/spec/schedulingGates"}]"#]);
    wait_until("web-0 runs once its gate is gone", DEADLINE, || {
        row("web-0").get(2).map(String::as_str) == Some("Running")
    });
    assert!(!jsonpath(&k, &["pod", "web-0"], "{.spec.nodeName}").is_empty());
}

/// The words of one table line.
fn cells(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

const ROBOT_SA: &str = r#"apiVersion: v1
kind: ServiceAccount
metadata: {name: deployer}
secrets: [{name: creds}]
"#;

/// `kubectl get secrets,sa` prints the apiserver's columns: NAME TYPE DATA AGE, then NAME
/// SECRETS AGE (server-side tables, as kubectl asks for them).
fn secrets_and_service_accounts_print_their_columns(minor: u32) {
    let sandbox = Sandbox::start("solo");
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    let v = format!("kubectl 1.{minor}");
    k.ok(&["create", "secret", "generic", "creds", "--from-literal=user=a", "--from-literal=password=b"]);
    k.ok(&["create", "secret", "generic", "empty"]);
    k.ok(&["create", "serviceaccount", "robot"]);
    k.ok_with_stdin(&["apply", "-f", "-"], ROBOT_SA);
    let out = k.ok(&["get", "secrets,sa"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 8, "{v}:\n{out}");
    assert_eq!(cells(lines[0]), ["NAME", "TYPE", "DATA", "AGE"], "{v}:\n{out}");
    assert_eq!(cells(lines[1])[..3], ["secret/creds", "Opaque", "2"], "{v}:\n{out}");
    assert_eq!(cells(lines[2])[..3], ["secret/empty", "Opaque", "0"], "{v}:\n{out}");
    assert_eq!(lines[3], "", "{v}:\n{out}");
    assert_eq!(cells(lines[4]), ["NAME", "SECRETS", "AGE"], "{v}:\n{out}");
    // The namespace's own `default` account, as in every cluster.
    assert_eq!(cells(lines[5])[..2], ["serviceaccount/default", "0"], "{v}:\n{out}");
    assert_eq!(cells(lines[6])[..2], ["serviceaccount/deployer", "1"], "{v}:\n{out}");
    assert_eq!(cells(lines[7])[..2], ["serviceaccount/robot", "0"], "{v}:\n{out}");
    for row in [lines[1], lines[6]] {
        let age = cells(row).last().copied().unwrap_or_default();
        assert!(age.ends_with('s') || age.ends_with('m'), "{v}: an AGE cell in {row:?}");
    }
}

#[test]
fn secrets_and_service_accounts_1_27() {
    secrets_and_service_accounts_print_their_columns(27);
}

#[test]
fn secrets_and_service_accounts_1_33() {
    secrets_and_service_accounts_print_their_columns(33);
}

#[test]
fn scheduling_gates_1_27() {
    scheduling_gates_hold_pods(27);
}

#[test]
fn scheduling_gates_1_33() {
    scheduling_gates_hold_pods(33);
}

#[test]
fn cluster_furniture_1_27() {
    cluster_furniture_shows_in_wide_tables(27);
}

#[test]
fn cluster_furniture_1_33() {
    cluster_furniture_shows_in_wide_tables(33);
}

macro_rules! per_version {
    ($($name:ident => $minor:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            kubectl_behaves_as_against_a_real_cluster($minor);
        }
    )*};
}

per_version! {
    kubectl_1_27 => 27,
    kubectl_1_28 => 28,
    kubectl_1_29 => 29,
    kubectl_1_30 => 30,
    kubectl_1_31 => 31,
    kubectl_1_32 => 32,
    kubectl_1_33 => 33,
}
