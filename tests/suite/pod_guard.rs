//! A pod guarded by `spanset guard` on the sandbox's process runtime, end to end with real
//! processes and no spanset controller: the test plays spanset, writing the member's pod Lease
//! itself (every write an extension), and judges at every look that the pod's main process
//! runs only while spanset could not yet take its ordinal as stopped — before the lapse of the
//! latest write naming the ordinal (answered at A: `A + (L + P)·(1+ρ)/(1−ρ)` on the test's
//! clock, spanset's measure).

use std::time::{Duration, Instant};

use serde_json::Value;
use spanset::controller::pod_lease::{EXTENSION, ORDINALS, Timing, parse_ordinals};

use crate::{
    processes::live_processes_with,
    support::{DEADLINE, Kubectl, Sandbox, program},
};

/// The lease: the shortest spanset accepts, to keep the test short.
const LEASE_SECONDS: u64 = 10;
/// The pod's stop budget (SIGTERM that long before the guard's deadline).
const GRACE: u64 = 2;

const SETUP: &str = r#"apiVersion: v1
kind: ServiceAccount
metadata: {name: guard}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read-cache-pods-lease}
rules:
- {apiGroups: [coordination.k8s.io], resources: [leases], resourceNames: [cache-pods], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: guard-reads-its-lease}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-cache-pods-lease}
subjects:
- {kind: ServiceAccount, name: guard, namespace: default}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: cache-pods
  annotations: {spanset.dev/ordinals: "2", spanset.dev/extension: "1"}
spec: {holderIdentity: solo, leaseDurationSeconds: 10}
"#;

/// Pod `cache-2` (ordinal 2, by its name): `spanset guard wait` as its first init container,
/// `spanset guard watch` as a native sidecar (reading its state from `watch_state`, where
/// `wait` writes `/guard/state`), and a main container whose process carries `marker`.
fn guarded_pod(marker: &str, watch_state: &str) -> String {
    guarded_pod_sharing(marker, watch_state, true)
}

/// [`guarded_pod`], sharing its process namespace or not.
fn guarded_pod_sharing(marker: &str, watch_state: &str, share: bool) -> String {
    let guard = |half: &str| {
        let state = if half == "watch" { watch_state } else { "/guard/state" };
        format!(
            r#"{{"name": "guard-{half}", "image": "ghcr.io/spanset/spanset:test",
      "args": ["guard", "{half}", "--lease", "default/cache-pods", "--lease-seconds", "{LEASE_SECONDS}",
               "--grace", "{GRACE}", "--state", "{state}"],
      "env": [{{"name": "POD_NAME", "valueFrom": {{"fieldRef": {{"fieldPath": "metadata.name"}}}}}}],
      "volumeMounts": [{{"name": "guard", "mountPath": "/guard"}}]{sidecar}}}"#,
            sidecar = if half == "watch" { r#", "restartPolicy": "Always""# } else { "" }
        )
    };
    format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "cache-2"}},
  "spec": {{"serviceAccountName": "guard", "shareProcessNamespace": {share}, "terminationGracePeriodSeconds": {GRACE},
    "volumes": [{{"name": "guard", "emptyDir": {{}}}}],
    "initContainers": [{wait}, {watch}],
    "containers": [{{"name": "main", "image": "busybox",
      "command": ["sh", "-c", "while :; do sleep 0.1; done", "{marker}"]}}]}}}}"#,
        wait = guard("wait"),
        watch = guard("watch"),
    )
}

/// The test as spanset: its writes of the Lease and what it concludes from them.
struct Spanset {
    k: Kubectl,
    timing: Timing,
    marker: String,
    counter: u64,
    /// The ordinals every write names.
    ordinals: String,
    /// Whether it keeps extending (a write every R).
    extending: bool,
    next_write: Instant,
    /// When the latest write naming ordinal 2 was answered (landed by then).
    last_named: Option<Instant>,
    writes: u64,
}

impl Spanset {
    /// The Lease and its reader set up, nothing written since (extension 1, naming 2).
    fn new(k: Kubectl, marker: &str) -> Spanset {
        let timing = Timing::new(Duration::from_secs(LEASE_SECONDS), 0.01, Duration::ZERO, Duration::from_secs(GRACE))
            .expect("a valid lease");
        k.ok_with_stdin(&["apply", "-f", "-"], SETUP);
        Spanset {
            k,
            timing,
            marker: marker.to_string(),
            counter: 1,
            ordinals: "2".into(),
            extending: false,
            next_write: Instant::now(),
            last_named: None,
            writes: 0,
        }
    }

    /// One write of the Lease: a new counter with `self.ordinals`; answers its send instant.
    fn write(&mut self) -> Instant {
        self.counter += 1;
        let sent = Instant::now();
        let (ext, ords) = (format!("{EXTENSION}={}", self.counter), format!("{ORDINALS}={}", self.ordinals));
        self.k.ok(&["annotate", "lease", "cache-pods", "--overwrite", &ext, &ords]);
        if parse_ordinals(&self.ordinals).is_ok_and(|o| o.contains(2)) {
            self.last_named = Some(Instant::now());
        }
        self.writes += 1;
        sent
    }

    /// The instant spanset takes ordinal 2 as stopped in this member: the lapse of its latest
    /// write naming it.
    fn lapse(&self) -> Option<Instant> {
        let t = self.timing;
        self.last_named.map(|a| a + t.hastened(t.lease + t.poll))
    }

    /// One look: writes when an extension is due, then whether the main process runs — which
    /// must not be past the lapse.
    fn look(&mut self) -> bool {
        if self.extending && Instant::now() >= self.next_write {
            self.write();
            self.next_write = Instant::now() + self.timing.renew;
        }
        let alive = !live_processes_with(&self.marker).is_empty();
        let now = Instant::now();
        if alive {
            let lapse = self.lapse().expect("the main process runs before any write named its ordinal");
            assert!(now < lapse, "the main process ran {:?} past the lapse", now - lapse);
        }
        alive
    }

    /// Looks (extending as set) until `cond` holds; `judge` is asserted at every look.
    fn until(&mut self, what: &str, mut judge: impl FnMut(bool), mut cond: impl FnMut(&mut Self, bool) -> bool) {
        let start = Instant::now();
        loop {
            let alive = self.look();
            judge(alive);
            if cond(self, alive) {
                return;
            }
            assert!(start.elapsed() < DEADLINE * 2, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn pod(&self) -> Value {
        serde_json::from_str(&self.k.ok(&["get", "pod", "cache-2", "-o", "json"])).expect("a pod as JSON")
    }

    fn log(&self, container: &str) -> String {
        String::from_utf8_lossy(&self.k.run(&["logs", "cache-2", "-c", container]).stdout).into_owned()
    }

    /// The restart count of init container `i`.
    fn init_restarts(&self, i: usize) -> u64 {
        self.pod()["status"]["initContainerStatuses"][i]["restartCount"].as_u64().unwrap_or(0)
    }
}

fn never(alive: bool) {
    assert!(!alive, "the main container runs while its guard waits");
}

#[test]
fn a_guarded_pod_runs_only_while_its_lease_is_extended_naming_it_and_stops_before_the_lapse() {
    if program("sh", "dash").is_none() || program("kubectl", "kubectl").is_none() {
        return;
    }
    let sandbox = Sandbox::start_with("solo", &["--run-images", "busybox,spanset", "--auth"]);
    let Some(k) = Kubectl::installed(&sandbox) else { return };
    let marker = format!("spanset-guarded-main-{}", std::process::id());
    let mut s = Spanset::new(k, &marker);
    s.k.ok_with_stdin(&["apply", "-f", "-"], &guarded_pod(&marker, "/guard/state"));

    // (a) Named but never extended: the guard waits, and says why.
    s.until("the guard waits for an extension", never, |s, _| s.log("guard-wait").contains("no extension seen yet"));
    // Extended every R, but naming other ordinals: it still waits, through several extensions.
    s.ordinals = "0-1".into();
    s.extending = true;
    s.until("the guard sees the lease name others", never, |s, _| {
        s.log("guard-wait").contains("lease names ordinals 0-1, not 2")
    });
    let writes = s.writes;
    s.until("three more extensions", never, |s, _| s.writes >= writes + 3);
    assert!(s.pod()["status"]["initContainerStatuses"][0]["state"]["running"].is_object(), "wait still runs");

    // (b) Extended naming it: the main container runs.
    s.ordinals = "2".into();
    s.until("the main container runs", |_| {}, |_, alive| alive);
    let first_run = live_processes_with(&marker);

    // (c) No more extensions: the guard stops the pod before the lapse (judged at every look),
    // and its sandbox is recreated: the init container waits again.
    // (Between the guard's SIGTERM and its SIGKILL the kubelet may restart the main container
    // in the old sandbox: the lapse is what every look judges.)
    s.extending = false;
    let lapse = s.lapse().expect("a write named the ordinal");
    s.until("the main process is gone", |_| {}, |_, alive| !alive);
    eprintln!("(c) the main process was gone {:?} before the lapse", lapse.saturating_duration_since(Instant::now()));
    s.until(
        "the pod's sandbox is recreated and its guard waits again",
        |_| {},
        |s, _| {
            let p = s.pod();
            s.init_restarts(0) >= 1 && p["status"]["initContainerStatuses"][0]["state"]["running"].is_object()
        },
    );
    let events = s.k.ok(&["get", "events", "--field-selector", "involvedObject.name=cache-2"]);
    assert!(events.contains("SandboxChanged"), "{events}");
    let restarts = s.init_restarts(0);
    let writes = s.writes;
    s.extending = true;
    s.ordinals = "0-1".into();
    s.until("the fresh guard sees extensions naming others", never, |s, _| s.writes >= writes + 3);
    assert_eq!(s.init_restarts(0), restarts, "the fresh guard kept waiting");

    // (e) Extended naming it again: it runs again (a new process).
    s.ordinals = "2".into();
    s.until("the main container runs again", |_| {}, |_, alive| alive);
    assert_ne!(live_processes_with(&marker), first_run, "a new process");

    // (d) A write that takes the ordinal away stops the pod at once: well before even the
    // guard's own deadline from the write just before it, which named the ordinal.
    s.extending = false;
    let named_sent = s.write();
    s.ordinals = "0-1".into();
    s.write();
    let t = s.timing;
    // The guard's SIGTERM from that write's extension comes no earlier than this.
    let deadline_stop = named_sent + t.slowed(t.lease) - t.stop_budget - t.poll;
    s.until("the main process is gone", |_| {}, |_, alive| !alive);
    let gone = Instant::now();
    eprintln!("(d) the main process was gone {:?} after the write naming it was sent", gone - named_sent);
    assert!(
        gone < deadline_stop,
        "the pod stopped {:?} after the deadline would have stopped it: not at the revocation",
        gone - deadline_stop
    );
    // Its fresh guard waits while the lease names others, and lets it run once it names it.
    s.until("the pod's sandbox is recreated again", never, |s, _| s.init_restarts(0) > restarts);
    s.extending = true;
    s.ordinals = "2".into();
    s.until("the main container runs a third time", |_| {}, |_, alive| alive);
    let wait_log = s.log("guard-wait");
    assert!(wait_log.contains("the pod may run"), "{wait_log}");
}

#[test]
fn a_watch_without_its_state_stops_the_pod_at_once_however_the_lease_stands() {
    if program("sh", "dash").is_none() || program("kubectl", "kubectl").is_none() {
        return;
    }
    let sandbox = Sandbox::start_with("solo", &["--run-images", "busybox,spanset", "--auth"]);
    let Some(k) = Kubectl::installed(&sandbox) else { return };
    let marker = format!("spanset-stateless-main-{}", std::process::id());
    let mut s = Spanset::new(k, &marker);
    // `wait` hands over in a file `watch` does not read: nothing proves to `watch` that the pod
    // may run, while the lease is extended naming it all along.
    s.k.ok_with_stdin(&["apply", "-f", "-"], &guarded_pod(&marker, "/guard/elsewhere"));
    s.extending = true;
    s.until("the pod's sandbox is recreated twice", |_| {}, |s, _| s.init_restarts(0) >= 2);
    let watch =
        String::from_utf8_lossy(&s.k.run(&["logs", "cache-2", "-c", "guard-watch", "--previous"]).stdout).into_owned();
    assert!(watch.contains("nothing proves the pod may run; stopping it"), "{watch}");
    // The lease stood throughout: `wait` let the pod run each time; only the missing state
    // stopped it.
    let wait =
        String::from_utf8_lossy(&s.k.run(&["logs", "cache-2", "-c", "guard-wait", "--previous"]).stdout).into_owned();
    assert!(wait.contains("the pod may run"), "{wait}");
}

#[test]
fn a_guard_that_could_not_stop_its_pod_never_lets_it_run() {
    if program("sh", "dash").is_none() || program("kubectl", "kubectl").is_none() {
        return;
    }
    let sandbox = Sandbox::start_with("solo", &["--run-images", "busybox,spanset", "--auth"]);
    let Some(k) = Kubectl::installed(&sandbox) else { return };
    let marker = format!("spanset-unshared-main-{}", std::process::id());
    let mut s = Spanset::new(k, &marker);
    // Without a shared process namespace `watch` would see none of the pod's processes.
    s.k.ok_with_stdin(&["apply", "-f", "-"], &guarded_pod_sharing(&marker, "/guard/state", false));
    s.extending = true;
    let writes = s.writes;
    s.until("the guard refused twice through extensions naming it", never, |s, _| {
        s.init_restarts(0) >= 2 && s.writes >= writes + 3
    });
    let wait =
        String::from_utf8_lossy(&s.k.run(&["logs", "cache-2", "-c", "guard-wait", "--previous"]).stdout).into_owned();
    assert!(wait.contains("shareProcessNamespace: true"), "{wait}");
}
