//! The sandbox's process runtime runs pods as a kubelet does: init containers one at a time
//! before the main containers, native sidecars beside them (stopped after them), a PID
//! namespace shared by a pod's containers when it asks, and the API reachable from inside a pod
//! with its ServiceAccount's token — all through `spanset sim` and the real `kubectl`.

use std::time::Instant;

use serde_json::Value;

use crate::{
    processes::live_processes_with,
    support::{Background, DEADLINE, Kubectl, Sandbox, program, wait_until},
};

/// A sandbox running `busybox` images for real (with `flags`), and kubectl on it; `None` when
/// `sh` or `kubectl` is missing (skipped outside CI).
fn sandbox(flags: &[&str]) -> Option<(Sandbox, Kubectl)> {
    program("sh", "dash")?;
    program("kubectl", "kubectl")?;
    let mut all = vec!["--run-images", "busybox"];
    all.extend(flags);
    let sandbox = Sandbox::start_with("solo", &all);
    let k = Kubectl::installed(&sandbox)?;
    Some((sandbox, k))
}

fn pod(k: &Kubectl, name: &str) -> Value {
    serde_json::from_str(&k.ok(&["get", "pod", name, "-o", "json"])).expect("a pod as JSON")
}

/// The `STATUS` column of `kubectl get pod NAME` (and `READY`, `RESTARTS`).
fn columns(k: &Kubectl, name: &str) -> (String, String, String) {
    let line = k.ok(&["get", "pod", name, "--no-headers"]);
    let cells: Vec<&str> = line.split_whitespace().collect();
    (cells[2].to_string(), cells[1].to_string(), cells[3].to_string())
}

/// A marker unique to this test process, for finding a container's processes on the machine.
fn marker(what: &str) -> String {
    format!("spanset-{what}-{}", std::process::id())
}

#[test]
fn init_containers_run_in_order_each_to_its_end_before_the_main_container_starts() {
    let Some((_sandbox, k)) = sandbox(&[]) else { return };
    let main = marker("main-after-init");
    let manifest = format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "ordered"}},
  "spec": {{"volumes": [{{"name": "w", "emptyDir": {{}}}}],
    "initContainers": [
      {{"name": "first", "image": "busybox", "volumeMounts": [{{"name": "w", "mountPath": "/w"}}],
        "command": ["sh", "-c", "echo first >> /w/order; until [ -e /w/go ]; do echo waiting; sleep 0.02; done"]}},
      {{"name": "second", "image": "busybox", "volumeMounts": [{{"name": "w", "mountPath": "/w"}}],
        "command": ["sh", "-c", "echo second >> /w/order; echo second done"]}}],
    "containers": [{{"name": "main", "image": "busybox", "volumeMounts": [{{"name": "w", "mountPath": "/w"}}],
      "command": ["sh", "-c", "echo main >> /w/order; cat /w/order; while :; do sleep 0.1; done", "{main}"]}}]}}}}"#
    );
    k.ok_with_stdin(&["apply", "-f", "-"], &manifest);
    // While `first` waits, the pod initializes and its main container is nowhere: judged at
    // every look until `first` has waited through many rounds of its own.
    let start = Instant::now();
    let mut looks = 0;
    loop {
        assert!(live_processes_with(&main).is_empty(), "the main container started while `first` ran");
        let (status, ready, _) = columns(&k, "ordered");
        let rounds = k.run(&["logs", "ordered", "-c", "first"]);
        let rounds = String::from_utf8_lossy(&rounds.stdout).lines().filter(|l| *l == "waiting").count();
        if rounds > 0 {
            assert_eq!((status.as_str(), ready.as_str()), ("Init:0/2", "0/1"), "kubectl shows the init stage");
            looks += 1;
        }
        if rounds >= 40 && looks >= 5 {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "`first` kept waiting ({rounds} rounds)");
    }
    let p = pod(&k, "ordered");
    let initialized =
        p["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Initialized").cloned();
    assert_eq!(initialized.map(|c| c["status"].clone()), Some("False".into()), "{p}");
    assert_eq!(p["status"]["phase"], "Pending");
    assert!(p["status"]["initContainerStatuses"][0]["state"]["running"].is_object(), "{p}");
    assert_eq!(p["status"]["initContainerStatuses"][1]["state"]["waiting"]["reason"], "PodInitializing", "{p}");

    // Every status the pod goes through from here, as `kubectl get -w` prints them.
    let mut watch = k.command();
    watch.args(["get", "pod", "ordered", "--watch", "--no-headers"]);
    let watch = Background::spawn(watch);
    watch.wait_for_line("the watch's first row", |l| l.contains("Init:0/2"));
    // (The exec may end with `first`, whose namespace ends with it: its status says nothing.)
    k.run(&["exec", "ordered", "-c", "first", "--", "touch", "/w/go"]);
    wait_until("the main container runs", DEADLINE, || !live_processes_with(&main).is_empty());
    watch.wait_for_line("Running", |l| l.split_whitespace().nth(2) == Some("Running"));
    let statuses: Vec<String> =
        watch.lines().iter().filter_map(|l| l.split_whitespace().nth(2).map(str::to_string)).collect();
    let mut seen = statuses.clone();
    seen.dedup();
    assert_eq!(
        seen,
        ["Init:0/2", "Init:1/2", "PodInitializing", "Running"],
        "as kubectl shows a kubelet's: {statuses:?}"
    );
    // The main container found both init containers' work, in order, before its own (its
    // output reaches its log a moment after it runs).
    wait_until("the main container's log has its three lines", DEADLINE, || {
        k.ok(&["logs", "ordered", "-c", "main"]).lines().count() >= 3
    });
    let out = k.ok(&["logs", "ordered", "-c", "main"]);
    assert_eq!(out.lines().collect::<Vec<_>>(), ["first", "second", "main"], "{out}");
    assert_eq!(
        k.ok(&["logs", "ordered", "-c", "second"]).trim(),
        "second done",
        "kubectl logs -c shows an init container"
    );
    let p = pod(&k, "ordered");
    for s in p["status"]["initContainerStatuses"].as_array().unwrap() {
        assert_eq!((&s["state"]["terminated"]["reason"], &s["ready"]), (&"Completed".into(), &true.into()), "{s}");
    }
}

#[test]
fn a_failing_init_container_backs_off_and_fails_the_pod_under_never_and_the_main_never_starts() {
    let Some((_sandbox, k)) = sandbox(&[]) else { return };
    let main = marker("main-after-failed-init");
    let manifest = |name: &str, policy: &str| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}"}},
  "spec": {{"restartPolicy": "{policy}",
    "initContainers": [{{"name": "setup", "image": "busybox", "command": ["sh", "-c", "echo cannot set up; exit 3"]}}],
    "containers": [{{"name": "main", "image": "busybox", "command": ["sh", "-c", "while :; do sleep 0.1; done", "{main}"]}}]}}}}"#
        )
    };
    k.ok_with_stdin(&["apply", "-f", "-"], &manifest("crashing", "Always"));
    k.ok_with_stdin(&["apply", "-f", "-"], &manifest("once", "Never"));
    // Retried on the back-off, shown as kubectl shows it; the main container never runs.
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        assert!(live_processes_with(&main).is_empty(), "a main container started after a failed init container");
        let (status, _, restarts) = columns(&k, "crashing");
        if !seen.contains(&status) {
            seen.push(status.clone());
        }
        let restarts: u32 = restarts.parse().unwrap_or(0);
        if seen.iter().any(|s| s == "Init:CrashLoopBackOff") && restarts >= 2 {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "back-off shown: seen {seen:?}, {restarts} restarts");
    }
    assert!(seen.iter().all(|s| s.starts_with("Init:") || s == "Pending"), "only the init stage: {seen:?}");
    let p = pod(&k, "crashing");
    let s = &p["status"]["initContainerStatuses"][0];
    assert_eq!(s["lastState"]["terminated"]["exitCode"], 3, "{s}");
    assert_eq!(p["status"]["phase"], "Pending");
    // The previous run's output (the current one may not have printed yet).
    assert_eq!(k.ok(&["logs", "crashing", "-c", "setup", "--previous"]).trim(), "cannot set up");

    wait_until("the Never pod failed", DEADLINE, || pod(&k, "once")["status"]["phase"] == "Failed");
    assert_eq!(columns(&k, "once").0, "Init:Error");
    let p = pod(&k, "once");
    assert_eq!(p["status"]["initContainerStatuses"][0]["restartCount"], 0, "never restarted: {p}");
    assert_eq!(p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"], "PodInitializing", "{p}");
    assert!(live_processes_with(&main).is_empty());
}

/// A pod of two sidecars (init containers that run until the file `quit` exists) and a main
/// container, all writing to a shared log on this machine when they stop (the later ones
/// taking their time). Its `restartPolicy` is `Never`, which a sidecar ignores.
fn sidecar_pod(name: &str, quit: &str, sidecar_marker: &str, main_marker: &str) -> String {
    let log = "/shared/stops";
    format!(
        r#"{{"apiVersion": "v1", "kind": "List", "items": [
{{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {{"name": "{name}-shared"}},
  "spec": {{"accessModes": ["ReadWriteOnce"], "resources": {{"requests": {{"storage": "1Mi"}}}}}}}},
{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}"}},
  "spec": {{"terminationGracePeriodSeconds": 30, "restartPolicy": "Never",
    "volumes": [{{"name": "shared", "persistentVolumeClaim": {{"claimName": "{name}-shared"}}}}],
    "initContainers": [{{"name": "helper", "image": "busybox", "restartPolicy": "Always",
      "volumeMounts": [{{"name": "shared", "mountPath": "/shared"}}],
      "command": ["sh", "-c", "trap 'echo helper stopped >> {log}; exit 0' TERM; echo helper up; until [ -e {quit} ]; do sleep 0.05; done", "{sidecar_marker}"]}},
      {{"name": "second-helper", "image": "busybox", "restartPolicy": "Always",
      "volumeMounts": [{{"name": "shared", "mountPath": "/shared"}}],
      "command": ["sh", "-c", "trap 'sleep 0.3; echo second-helper stopped >> {log}; exit 0' TERM; until [ -e {quit} ]; do sleep 0.05; done"]}}],
    "containers": [{{"name": "main", "image": "busybox", "volumeMounts": [{{"name": "shared", "mountPath": "/shared"}}],
      "command": ["sh", "-c", "trap 'sleep 0.5; echo main stopped >> {log}; exit 0' TERM; while :; do sleep 0.05; done", "{main_marker}"]}}]}}}}]}}"#
    )
}

/// The directory on this machine behind the claim `{pod}-shared` of [`sidecar_pod`], once its
/// containers run: where a test reads what they wrote, or leaves a file for them.
fn shared_on_machine(sandbox: &Sandbox, k: &Kubectl, pod: &str) -> std::path::PathBuf {
    let pv = k.ok(&["get", "pvc", &format!("{pod}-shared"), "-o", "jsonpath={.spec.volumeName}"]);
    let handle = k.ok(&["get", "pv", pv.trim(), "-o", "jsonpath={.spec.csi.volumeHandle}"]);
    crate::support::volume_on_machine(sandbox.pid(), handle.trim()).expect("the claim's volume on this machine")
}

#[test]
fn a_native_sidecar_runs_beside_the_main_container_is_restarted_when_it_exits_and_stops_after_it() {
    let Some((sandbox, k)) = sandbox(&[]) else { return };
    let (helper, main) = (marker("sidecar-helper"), marker("sidecar-main"));
    k.ok_with_stdin(&["apply", "-f", "-"], &sidecar_pod("with-helper", "/tmp/quit", &helper, &main));
    wait_until("both run", DEADLINE, || {
        !live_processes_with(&helper).is_empty() && !live_processes_with(&main).is_empty()
    });
    wait_until("Running, all three ready", DEADLINE, || {
        columns(&k, "with-helper").0 == "Running" && columns(&k, "with-helper").1 == "3/3"
    });
    let p = pod(&k, "with-helper");
    let s = &p["status"]["initContainerStatuses"][0];
    assert!(s["state"]["running"].is_object() && s["started"] == true, "the sidecar runs: {s}");
    let log = shared_on_machine(&sandbox, &k, "with-helper").join("stops");

    // It exits: it is restarted (a fresh /tmp), the main container untouched.
    k.run(&["exec", "with-helper", "-c", "helper", "--", "touch", "/tmp/quit"]);
    wait_until("the sidecar restarted", DEADLINE, || {
        let p = pod(&k, "with-helper");
        p["status"]["initContainerStatuses"][0]["restartCount"] == 1
            && p["status"]["initContainerStatuses"][0]["state"]["running"].is_object()
    });
    wait_until("the new sidecar runs", DEADLINE, || !live_processes_with(&helper).is_empty());
    let p = pod(&k, "with-helper");
    assert_eq!(p["status"]["containerStatuses"][0]["restartCount"], 0, "the main container was not restarted");
    assert_eq!(k.ok(&["logs", "with-helper", "-c", "helper"]).trim(), "helper up");

    // Deleted: the main container stops first (it takes its time), then the sidecars, the last
    // one first.
    k.ok(&["delete", "pod", "with-helper", "--wait=false"]);
    wait_until("both stopped", DEADLINE, || {
        live_processes_with(&helper).is_empty() && live_processes_with(&main).is_empty()
    });
    let stops = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        stops.lines().collect::<Vec<_>>(),
        ["main stopped", "second-helper stopped", "helper stopped"],
        "{stops}"
    );
}

#[test]
fn a_sidecar_with_a_startup_probe_holds_the_next_container_until_the_probe_passes() {
    let Some((_sandbox, k)) = sandbox(&[]) else { return };
    let main = marker("main-after-probed-sidecar");
    let manifest = format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "probed-helper"}},
  "spec": {{"initContainers": [{{"name": "helper", "image": "busybox", "restartPolicy": "Always",
      "command": ["sh", "-c", "while :; do echo tick; sleep 0.02; done"],
      "startupProbe": {{"exec": {{"command": ["test", "-e", "/tmp/up"]}}, "periodSeconds": 1, "failureThreshold": 1000}}}}],
    "containers": [{{"name": "main", "image": "busybox", "command": ["sh", "-c", "while :; do sleep 0.1; done", "{main}"]}}]}}}}"#
    );
    k.ok_with_stdin(&["apply", "-f", "-"], &manifest);
    // Until its probe passes, the sidecar runs, is not started, and the main container waits.
    let start = Instant::now();
    loop {
        assert!(live_processes_with(&main).is_empty(), "the main container started before the sidecar's probe passed");
        let p = pod(&k, "probed-helper");
        let s = &p["status"]["initContainerStatuses"][0];
        let ticks = k.run(&["logs", "probed-helper", "-c", "helper"]);
        let ticks = String::from_utf8_lossy(&ticks.stdout).lines().count();
        if ticks > 0 {
            assert_eq!(s["started"], false, "{s}");
        }
        if ticks >= 100 {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "the helper kept running ({ticks} ticks)");
    }
    assert_eq!(columns(&k, "probed-helper").0, "Init:0/1");
    k.ok(&["exec", "probed-helper", "-c", "helper", "--", "touch", "/tmp/up"]);
    wait_until("the main container runs once the probe passed", DEADLINE, || !live_processes_with(&main).is_empty());
    wait_until("Running, both ready", DEADLINE, || columns(&k, "probed-helper").1 == "2/2");
}

#[test]
fn on_a_1_28_member_an_init_container_is_never_a_sidecar_and_blocks_the_pod() {
    let Some((sandbox, k)) = sandbox(&["--cluster-version", "solo=1.28.9"]) else { return };
    let (helper, main) = (marker("old-helper"), marker("old-main"));
    let manifest = sidecar_pod("old", "/shared/quit", &helper, &main);
    k.ok_with_stdin(&["apply", "-f", "-"], &manifest);
    let p = pod(&k, "old");
    assert!(p["spec"]["initContainers"][0].get("restartPolicy").is_none(), "1.28 does not keep the field: {p}");
    // The helper runs as an ordinary init container: the main container waits for it to end.
    wait_until("the helper runs", DEADLINE, || !live_processes_with(&helper).is_empty());
    let start = Instant::now();
    let mut looks = 0;
    while looks < 10 {
        assert!(live_processes_with(&main).is_empty(), "the main container started beside an init container");
        assert_eq!(columns(&k, "old").0, "Init:0/2");
        looks += 1;
        assert!(start.elapsed() < DEADLINE);
    }
    // (kubectl execs into a 1.28 member over SPDY, which the sandbox does not serve: the
    // helper's file is left in its volume, on this machine.)
    std::fs::write(shared_on_machine(&sandbox, &k, "old").join("quit"), "").unwrap();
    wait_until("the main container runs once the helper ended", DEADLINE, || !live_processes_with(&main).is_empty());
}

/// A pod of two containers, `target` (which says when SIGTERM reaches it, and alone mounts a
/// volume at `/mine`) and `tool`.
fn two_containers(name: &str, share: bool, target: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}"}},
  "spec": {{"shareProcessNamespace": {share}, "restartPolicy": "Never", "volumes": [{{"name": "v", "emptyDir": {{}}}}],
    "containers": [
      {{"name": "target", "image": "busybox", "volumeMounts": [{{"name": "v", "mountPath": "/mine"}}],
        "command": ["sh", "-c", "trap 'echo got TERM; exit 0' TERM; while :; do sleep 0.05; done", "{target}"]}},
      {{"name": "tool", "image": "busybox", "command": ["sh", "-c", "while :; do sleep 0.1; done"]}}]}}}}"#
    )
}

/// Run in `tool`: SIGTERM every process whose command line names `target`; prints how many.
/// The name is split in two quoted halves, so that the script's own command line does not hold
/// it.
fn kill_script(target: &str) -> String {
    let (a, b) = target.split_at(target.len() / 2);
    format!(
        "n=0; for p in /proc/[0-9]*; do if tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '{a}''{b}'; then kill -TERM ${{p#/proc/}} && n=$((n+1)); fi; done; echo $n"
    )
}

#[test]
fn a_shared_process_namespace_lets_one_container_signal_anothers_process_and_only_then() {
    let Some((_sandbox, k)) = sandbox(&[]) else { return };
    let (shared, private) = (marker("shared-target"), marker("private-target"));
    k.ok_with_stdin(&["apply", "-f", "-"], &two_containers("shared", true, &shared));
    k.ok_with_stdin(&["apply", "-f", "-"], &two_containers("private", false, &private));
    for name in ["shared", "private"] {
        wait_until("Running, both ready", DEADLINE, || columns(&k, name).1 == "2/2");
    }
    // Without sharing, `tool` sees its own processes only, and its signal reaches nobody.
    assert_eq!(k.ok(&["exec", "private", "-c", "tool", "--", "sh", "-c", &kill_script(&private)]).trim(), "0");
    assert!(!live_processes_with(&private).is_empty(), "the private target still runs");
    let first = k.ok(&["exec", "private", "-c", "tool", "--", "sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"]);
    assert!(first.starts_with("sh -c while"), "tool's own process is PID 1 of its namespace: {first}");

    // Shared: each container keeps its own mounts, and exec joins the one named.
    let mounts = |c: &str| k.run(&["exec", "shared", "-c", c, "--", "test", "-d", "/mine"]).status.success();
    assert!(mounts("target") && !mounts("tool"), "only target mounts /mine");
    // PID 1 is the pod's holder (as the pause container), and `tool` stops `target`.
    let first = k.ok(&["exec", "shared", "-c", "tool", "--", "sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"]);
    assert!(first.contains("sleep 3600"), "the holder is PID 1 of the shared namespace: {first}");
    assert_eq!(k.ok(&["exec", "shared", "-c", "tool", "--", "sh", "-c", &kill_script(&shared)]).trim(), "1");
    wait_until("target ended on the signal", DEADLINE, || {
        pod(&k, "shared")["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    });
    assert_eq!(k.ok(&["logs", "shared", "-c", "target"]).trim(), "got TERM");
    assert_eq!(k.ok(&["exec", "shared", "-c", "tool", "--", "hostname"]).trim(), "shared");
    assert!(live_processes_with(&shared).is_empty());
}

/// A ServiceAccount, a Lease it may read once a Role allows it, and a pod running as it.
const IN_CLUSTER: &str = r#"apiVersion: v1
kind: ServiceAccount
metadata: {name: guard}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: fence}
spec: {holderIdentity: east}
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  serviceAccountName: guard
  containers:
  - {name: c, image: busybox, command: [sh, -c, 'while :; do sleep 0.1; done']}
"#;

const LEASE_READER: &str = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: lease-reader}
rules:
- {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: guard-reads-leases}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lease-reader}
subjects:
- {kind: ServiceAccount, name: guard, namespace: default}
"#;

/// `curl` with the pod's token and CA, to its API; prints the HTTP status.
const CURL: &str = r#"sa=/var/run/secrets/kubernetes.io/serviceaccount
curl -s -o /dev/null -w '%{http_code}' --cacert $sa/ca.crt -H "Authorization: Bearer $(cat $sa/token)" \
  "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/apis/coordination.k8s.io/v1/namespaces/$(cat $sa/namespace)/leases/fence""#;

#[test]
fn a_pod_reaches_its_api_as_its_service_account_under_rbac_and_without_a_mount_cannot() {
    let Some((_sandbox, k)) = sandbox(&["--auth"]) else { return };
    if program("curl", "curl").is_none() {
        return;
    }
    k.ok_with_stdin(&["apply", "-f", "-"], IN_CLUSTER);
    wait_until("client Ready", DEADLINE, || columns(&k, "client").1 == "1/1");
    let inside = |script: &str| k.run(&["exec", "client", "--", "sh", "-c", script]);
    // kubectl inside the pod, without a kubeconfig: its in-cluster config, refused by RBAC.
    let denied = inside("kubectl get lease fence -o name");
    let err = String::from_utf8_lossy(&denied.stderr);
    assert!(!denied.status.success(), "no Role yet");
    assert!(
        err.contains(r#"User "system:serviceaccount:default:guard" cannot get resource "leases""#),
        "refused as the pod's ServiceAccount: {err}"
    );
    assert_eq!(String::from_utf8_lossy(&inside(CURL).stdout), "403");

    k.ok_with_stdin(&["apply", "-f", "-"], LEASE_READER);
    let allowed = inside("kubectl get lease fence -o jsonpath={.spec.holderIdentity}");
    assert_eq!(String::from_utf8_lossy(&allowed.stdout), "east", "{}", String::from_utf8_lossy(&allowed.stderr));
    assert_eq!(String::from_utf8_lossy(&inside(CURL).stdout), "200");

    // Automounting off, on the pod or on its ServiceAccount: no token in the container.
    let quiet = r#"apiVersion: v1
kind: ServiceAccount
metadata: {name: quiet}
automountServiceAccountToken: false
---
apiVersion: v1
kind: Pod
metadata: {name: by-account}
spec:
  serviceAccountName: quiet
  containers: [{name: c, image: busybox, command: [sh, -c, 'while :; do sleep 0.1; done']}]
---
apiVersion: v1
kind: Pod
metadata: {name: by-pod}
spec:
  serviceAccountName: guard
  automountServiceAccountToken: false
  containers: [{name: c, image: busybox, command: [sh, -c, 'while :; do sleep 0.1; done']}]
"#;
    k.ok_with_stdin(&["apply", "-f", "-"], quiet);
    for name in ["by-account", "by-pod"] {
        wait_until("Ready", DEADLINE, || columns(&k, name).1 == "1/1");
        let out = k.run(&["exec", name, "--", "sh", "-c", "ls /var/run/secrets/kubernetes.io/serviceaccount"]);
        assert!(!out.status.success(), "{name}: no service-account volume: {}", String::from_utf8_lossy(&out.stdout));
    }
    let env = k.ok(&["exec", "by-pod", "--", "sh", "-c", "echo $KUBERNETES_SERVICE_HOST"]);
    let (host, ip) = (env.trim(), k.ok(&["get", "pod", "by-pod", "-o", "jsonpath={.status.podIP}"]));
    let gateway = ip.rsplitn(3, '.').nth(2).map(|net| format!("{net}.0.1")).unwrap_or_default();
    assert_eq!(host, gateway, "the Service's variables are there all the same: the cluster's gateway");
}

#[test]
fn a_shared_process_namespace_dies_with_the_sandbox_even_when_it_is_killed() {
    let Some((sandbox, k)) = sandbox(&[]) else { return };
    let target = marker("shared-orphan-check");
    k.ok_with_stdin(&["apply", "-f", "-"], &two_containers("shared", true, &target));
    wait_until("both containers run", DEADLINE, || columns(&k, "shared").1 == "2/2");
    assert!(!live_processes_with(&target).is_empty());
    std::process::Command::new("kill").args(["-KILL", &sandbox.pid().to_string()]).status().unwrap();
    wait_until("the pod's processes ended with the sandbox", DEADLINE, || live_processes_with(&target).is_empty());
}

/// The securityContext spanset gives its guard's containers.
const GUARD_SECURITY: &str = r#"{"runAsUser": 65532, "runAsGroup": 65532, "runAsNonRoot": true,
  "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}"#;

/// A pod of spanset's image alone (its first container runs the image's entrypoint, the
/// second a shell as the guard's user), in a sandbox that lists only `busybox`.
fn spanset_image_pod(name: &str, marker: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}"}},
  "spec": {{"volumes": [{{"name": "w", "emptyDir": {{}}}}],
    "initContainers": [{{"name": "version", "image": "ghcr.io/spanset/spanset:test", "args": ["version"]}}],
    "containers": [{{"name": "guard", "image": "ghcr.io/spanset/spanset:test",
      "command": ["sh", "-c", "while :; do sleep 0.1; done", "{marker}"],
      "volumeMounts": [{{"name": "w", "mountPath": "/w"}}], "securityContext": {GUARD_SECURITY},
      "readinessProbe": {{"exec": {{"command": ["/spanset", "version"]}}, "periodSeconds": 1}}}}]}}}}"#
    )
}

/// The container process carrying `marker` (its command `sh -c …`; `unshare`, which started
/// it, carries it too in its script).
fn container_process(marker: &str) -> u32 {
    let shells: Vec<u32> = live_processes_with(marker)
        .into_iter()
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default().starts_with(b"sh\0"))
        .collect();
    assert_eq!(shells.len(), 1, "one container process carries {marker}: {shells:?}");
    shells[0]
}

/// The `Uid:` and `Gid:` lines of a process (real, effective, saved, filesystem).
fn ids_of(pid: u32) -> (String, String) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = |key: &str| {
        status.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    (line("Uid:").unwrap_or_default(), line("Gid:").unwrap_or_default())
}

#[test]
fn spanset_s_image_is_its_two_binaries_its_entrypoint_runs_and_probes_and_exec_run_them_as_its_user() {
    let Some((_sandbox, k)) = sandbox(&[]) else { return };
    let main = marker("spanset-image");
    k.ok_with_stdin(&["apply", "-f", "-"], &spanset_image_pod("image", &main));
    // Ready by its exec probe: `/spanset version` inside it, as its user.
    wait_until("Running and Ready by its probe", DEADLINE, || columns(&k, "image").1 == "1/1");
    // The image's entrypoint is `/spanset`, which ran `version` (listed without --run-images).
    let version = k.ok(&["logs", "image", "-c", "version"]);
    assert!(version.starts_with("version:  0.1.0"), "{version}");
    let inside = |script: &str| k.run(&["exec", "image", "-c", "guard", "--", "sh", "-c", script]);
    let out = |script: &str| String::from_utf8_lossy(&inside(script).stdout).trim().to_string();
    assert_eq!(out("echo $(id -u) $(id -g) $(id -G)"), "65532 65532 65532", "exec as the guard's user");
    assert!(out("/spanset version").starts_with("version:  0.1.0"), "kubectl exec runs /spanset");
    let usage = inside("/spanset-guard-exec");
    assert_eq!(usage.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&usage.stderr).contains("usage: spanset-guard-exec"), "the second binary");
    // `spanset guard wait` finds the second binary beside itself (`/proc/self/exe`'s sibling)
    // and puts it where the pod's containers run it, then fails to read its Lease (the pod
    // has no token) and says why in its termination message.
    let wait = inside(
        "/spanset guard wait --lease default/none --lease-seconds 10 --ordinal 0 --state /w/state \
         --exec-dir /w --termination-log /w/why",
    );
    assert_eq!(wait.status.code(), Some(1), "{}", String::from_utf8_lossy(&wait.stderr));
    assert!(!out("cat /w/why").is_empty(), "the guard wrote why it failed");
    assert_eq!(inside("/w/spanset-guard-exec").status.code(), Some(2), "installed and runnable");
    assert_eq!(out("stat -c '%u %a' /w/spanset-guard-exec"), "65532 755", "by the guard's user, for every user");
    // The image's files are read-only, and so is its whole root; its volume and termination
    // message file are not.
    assert!(!inside("echo x >> /spanset").status.success(), "/spanset is read-only");
    assert!(!inside("touch /tmp/x").status.success(), "readOnlyRootFilesystem: /tmp too");
    assert!(inside("touch /w/x && echo bye > /dev/termination-log").status.success());
    // Outside, on this machine, the container's process is the guard's user of the pod's user
    // namespace: 65532 from launch::ID_BASE up.
    let outside = (spanset_sim::cluster::processes::launch::ID_BASE + 65532).to_string();
    let ids = ids_of(container_process(&main));
    assert_eq!(ids, (vec![outside.clone(); 4].join(" "), vec![outside; 4].join(" ")));
}

#[test]
fn spanset_s_image_without_spanset_guard_exec_beside_the_sandbox_fails_to_start_saying_how_to_build_it() {
    if program("sh", "dash").is_none() || program("kubectl", "kubectl").is_none() {
        return;
    }
    // The sandbox's binary alone in a directory (a hard link: the same file, nothing beside it).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let alone = dir.path().join("spanset");
    std::fs::hard_link(env!("CARGO_BIN_EXE_spanset"), &alone).unwrap();
    let sandbox = Sandbox::start_from(&alone, "solo", &["--run-images", "busybox"]);
    let Some(k) = Kubectl::installed(&sandbox) else { return };
    let manifest = spanset_image_pod("image", &marker("no-exec"))
        .replace(r#""spec": {"#, r#""spec": {"restartPolicy": "Never", "#);
    k.ok_with_stdin(&["apply", "-f", "-"], &manifest);
    wait_until("the init container failed", DEADLINE, || {
        pod(&k, "image")["status"]["initContainerStatuses"][0]["state"]["terminated"].is_object()
    });
    let p = pod(&k, "image");
    let t = &p["status"]["initContainerStatuses"][0]["state"]["terminated"];
    let message = t["message"].as_str().unwrap_or_default();
    assert!(message.contains("/spanset-guard-exec") && message.contains("build it with `cargo build`"), "{t}");
    assert_eq!(t["exitCode"], 128, "{t}");
    assert_eq!(p["status"]["phase"], "Failed", "{p}");
}

#[test]
fn containers_run_as_their_security_contexts_users_and_share_an_empty_dir() {
    let Some((_sandbox, k)) = sandbox(&[]) else { return };
    let (a, b) = (marker("user-a"), marker("user-b"));
    let manifest = format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "users"}},
  "spec": {{"securityContext": {{"runAsUser": 1001, "runAsGroup": 2001}}, "volumes": [{{"name": "w", "emptyDir": {{}}}}],
    "containers": [
      {{"name": "a", "image": "busybox", "volumeMounts": [{{"name": "w", "mountPath": "/w"}}],
        "command": ["sh", "-c", "echo from-a > /w/a; while :; do sleep 0.1; done", "{a}"]}},
      {{"name": "b", "image": "busybox", "securityContext": {{"runAsUser": 1002}},
        "volumeMounts": [{{"name": "w", "mountPath": "/w"}}],
        "command": ["sh", "-c", "until [ -e /w/a ]; do sleep 0.05; done; cat /w/a > /w/b; while :; do sleep 0.1; done", "{b}"],
        "readinessProbe": {{"exec": {{"command": ["sh", "-c", "test $(id -u) = 1002 && test -s /w/b"]}}, "periodSeconds": 1}}}}]}}}}"#
    );
    k.ok_with_stdin(&["apply", "-f", "-"], &manifest);
    // Ready by b's probe: run as b's user, after b read a's file and wrote its own beside it.
    wait_until("Running, both ready", DEADLINE, || columns(&k, "users").1 == "2/2");
    let ids = |c: &str| k.ok(&["exec", "users", "-c", c, "--", "sh", "-c", "echo $(id -u) $(id -g) $(id -G)"]);
    assert_eq!(ids("a").trim(), "1001 2001 2001", "the pod's user and group, no other group");
    assert_eq!(ids("b").trim(), "1002 2001 2001", "the container's user over the pod's");
    let owners = k.ok(&["exec", "users", "-c", "a", "--", "sh", "-c", "stat -c '%u:%g' /w/a /w/b; cat /w/b"]);
    assert_eq!(owners.lines().collect::<Vec<_>>(), ["1001:2001", "1002:2001", "from-a"]);
    // On this machine they are those users of the pod's user namespace: the same IDs from
    // launch::ID_BASE up, which no account of the machine has.
    let base = spanset_sim::cluster::processes::launch::ID_BASE;
    for (marker, uid) in [(&a, 1001), (&b, 1002)] {
        let pid = container_process(marker);
        let (uids, gids) = ids_of(pid);
        assert_eq!(uids, vec![(base + uid).to_string(); 4].join(" "), "its process's user on this machine");
        assert_eq!(gids, vec![(base + 2001).to_string(); 4].join(" "));
        let groups = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let groups = groups.lines().find_map(|l| l.strip_prefix("Groups:")).unwrap_or("?").trim().to_string();
        assert_eq!(groups, "", "supplementary groups cleared");
    }
}

#[test]
fn a_sidecar_s_readiness_follows_its_probe_in_its_status_and_the_pod_s() {
    let Some((_sandbox, k)) = sandbox(&[]) else { return };
    let manifest = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ready-helper"},
  "spec": {"initContainers": [{"name": "helper", "image": "busybox", "restartPolicy": "Always",
      "command": ["sh", "-c", "while :; do sleep 0.05; done"],
      "startupProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
      "readinessProbe": {"exec": {"command": ["test", "-e", "/tmp/ready"]}, "periodSeconds": 1, "failureThreshold": 1}}],
    "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "while :; do sleep 0.1; done"]}]}}"#;
    k.ok_with_stdin(&["apply", "-f", "-"], manifest);
    let helper = |k: &Kubectl| pod(k, "ready-helper")["status"]["initContainerStatuses"][0].clone();
    // Started (its startup probe passed, so the main container runs), not ready.
    wait_until("the main container runs beside the started sidecar", DEADLINE, || {
        pod(&k, "ready-helper")["status"]["containerStatuses"][0]["state"]["running"].is_object()
    });
    let s = helper(&k);
    assert_eq!((&s["started"], &s["ready"]), (&true.into(), &false.into()), "{s}");
    assert_eq!(columns(&k, "ready-helper").1, "1/2");
    k.ok(&["exec", "ready-helper", "-c", "helper", "--", "touch", "/tmp/ready"]);
    wait_until("the sidecar ready, the pod too", DEADLINE, || {
        helper(&k)["ready"] == true && columns(&k, "ready-helper").1 == "2/2"
    });
    let conditions = pod(&k, "ready-helper")["status"]["conditions"].clone();
    assert!(
        conditions.as_array().unwrap().iter().any(|c| c["type"] == "Ready" && c["status"] == "True"),
        "{conditions}"
    );
    k.ok(&["exec", "ready-helper", "-c", "helper", "--", "rm", "/tmp/ready"]);
    wait_until("not ready again", DEADLINE, || helper(&k)["ready"] == false && columns(&k, "ready-helper").1 == "1/2");
    let p = pod(&k, "ready-helper");
    assert!(
        p["status"]["conditions"].as_array().unwrap().iter().any(|c| c["type"] == "Ready" && c["status"] == "False")
    );
    assert_eq!(p["status"]["initContainerStatuses"][0]["restartCount"], 0, "readiness restarts nothing");
}

#[test]
fn a_post_start_hook_runs_in_its_container_before_the_next_container_starts_and_one_that_fails_kills_it() {
    let Some((_sandbox, k)) = sandbox(&[]) else { return };
    let (first, second) = (marker("hooked-first"), marker("hooked-second"));
    // The hook of `first` takes a second and leaves a file; `second` says whether it found it.
    let manifest = format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "hooked"}},
  "spec": {{"volumes": [{{"name": "w", "emptyDir": {{}}}}],
    "containers": [
      {{"name": "first", "image": "busybox", "volumeMounts": [{{"name": "w", "mountPath": "/w"}}],
        "command": ["sh", "-c", "while :; do sleep 0.1; done", "{first}"],
        "lifecycle": {{"postStart": {{"exec": {{"command": ["sh", "-c", "sleep 1; echo hooked > /w/hook"]}}}}}}}},
      {{"name": "second", "image": "busybox", "volumeMounts": [{{"name": "w", "mountPath": "/w"}}],
        "command": ["sh", "-c", "if [ -e /w/hook ]; then echo after the hook; else echo before the hook; fi; while :; do sleep 0.1; done", "{second}"]}}]}}}}"#
    );
    k.ok_with_stdin(&["apply", "-f", "-"], &manifest);
    wait_until("both containers run", DEADLINE, || {
        !live_processes_with(&first).is_empty() && !live_processes_with(&second).is_empty()
    });
    wait_until("second says when it started", DEADLINE, || k.ok(&["logs", "hooked", "-c", "second"]).contains("hook"));
    assert_eq!(k.ok(&["logs", "hooked", "-c", "second"]).trim(), "after the hook");

    // A hook that fails kills its container, which the kubelet restarts.
    let failing = marker("hook-fails");
    let manifest = format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "hook-fails"}},
  "spec": {{"containers": [{{"name": "main", "image": "busybox",
        "command": ["sh", "-c", "while :; do sleep 0.1; done", "{failing}"],
        "lifecycle": {{"postStart": {{"exec": {{"command": ["sh", "-c", "echo no; exit 3"]}}}}}}}}]}}}}"#
    );
    k.ok_with_stdin(&["apply", "-f", "-"], &manifest);
    wait_until("the failed hook's container restarted", DEADLINE, || {
        pod(&k, "hook-fails")["status"]["containerStatuses"][0]["restartCount"].as_u64().unwrap_or(0) >= 1
    });
}
