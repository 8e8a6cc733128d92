//! A pod guarded by spanset's pod-lease guard on the sandbox's process runtime, end to end with
//! real processes and no spanset controller: the pod is made from spanset's own injection of
//! the guard into a template, and the test plays spanset, writing the member's pod Lease itself
//! (every write an extension). It judges at every look that the pod's main process runs only
//! while spanset could not yet take its ordinal as stopped — before the lapse of the latest
//! write naming the ordinal (answered at A: `A + (L + P)·(1+ρ)/(1−ρ)` on the test's clock,
//! spanset's measure).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;
use spanset_controller::pod_lease::{
    EXTENSION, ORDINALS, RELEASED, Timing, inject, parse_ordinals, settings::Settings,
};

use crate::support::{DEADLINE, Kubectl, Sandbox, program};

/// The lease: the shortest spanset accepts, to keep the test short.
const LEASE_SECONDS: u64 = 10;
/// The pod's stop budget (SIGTERM that long before the guard's deadline).
const GRACE: u64 = 2;
/// The uid of the federation the guard reads the Lease for.
const UID: &str = "7c1d7b9e-0000-4000-8000-000000000001";

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
  labels: {spanset.dev/federation-uid: 7c1d7b9e-0000-4000-8000-000000000001}
  annotations: {spanset.dev/ordinals: "2", spanset.dev/extension: "1"}
spec: {holderIdentity: solo, leaseDurationSeconds: 10}
"#;

/// Pod `cache-2` (ordinal 2, by its name) as spanset makes it from a template whose main
/// container's process carries `marker`: the guard injected by spanset itself.
fn guarded_pod(marker: &str) -> String {
    let mut template: PodTemplateSpec = serde_json::from_value(serde_json::json!({"spec": {
        "serviceAccountName": "guard", "terminationGracePeriodSeconds": GRACE,
        "containers": [{"name": "main", "image": "busybox",
            "command": ["sh", "-c", "while :; do sleep 0.1; done", marker]}]}}))
    .expect("a template");
    assert!(inject::refusals(&template).is_empty());
    let settings = Settings { guard_image: "ghcr.io/spanset/spanset:test".into(), ..Settings::default() };
    inject::inject(&mut template, "default", "cache", UID, LEASE_SECONDS as i32, &settings);
    serde_json::to_string(&serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cache-2"},
        "spec": template.spec}))
    .expect("JSON")
}

/// The main container's own processes: those with `marker` as an argument of their own (not
/// inside a longer one, as in the script that sets a container up), but for the container's
/// first process (and what starts it), which carries the command's arguments while it waits.
fn mains(marker: &str) -> Vec<u32> {
    crate::processes::live_processes_with(marker)
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            // The first process, and the commands that start it, name it before the command.
            let guard = args.iter().any(|a| a.ends_with(b"spanset-guard-exec"));
            args.contains(&marker.as_bytes()) && !guard
        })
        .collect()
}

/// Whether the main container's own process runs.
fn main_runs(marker: &str) -> bool {
    !mains(marker).is_empty()
}

/// The test as spanset: its writes of the Lease and what it concludes from them.
struct Spanset {
    k: Kubectl,
    timing: Timing,
    marker: String,
    counter: u64,
    /// The ordinals every write names.
    ordinals: String,
    /// What the test waits for now, for its messages.
    stage: String,
    /// Whether it keeps extending (a write every R).
    extending: bool,
    /// Whether its writes release the pods.
    releasing: bool,
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
            stage: String::new(),
            extending: false,
            releasing: false,
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
        let released = if self.releasing { format!("{RELEASED}=true") } else { format!("{RELEASED}-") };
        self.k.ok(&["annotate", "lease", "cache-pods", "--overwrite", &ext, &ords, &released]);
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
        let alive = main_runs(&self.marker);
        let now = Instant::now();
        if alive && !self.releasing {
            let lapse = self.lapse().expect("the main process runs before any write named its ordinal");
            assert!(now < lapse, "{}: the main process ran {:?} past the lapse", self.stage, now - lapse);
        }
        alive
    }

    /// Looks (extending as set) until `cond` holds; `judge` is asserted at every look.
    fn until(&mut self, what: &str, mut judge: impl FnMut(bool), mut cond: impl FnMut(&mut Self, bool) -> bool) {
        self.stage = what.to_string();
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

fn programs() -> bool {
    program("sh", "dash").is_some() && program("kubectl", "kubectl").is_some()
}

#[test]
fn a_guarded_pod_runs_only_while_its_lease_is_extended_naming_it_and_stops_before_the_lapse() {
    if !programs() {
        return;
    }
    let sandbox = Sandbox::start_with("solo", &["--run-images", "busybox", "--auth"]);
    let Some(k) = Kubectl::installed(&sandbox) else { return };
    let marker = format!("spanset-guarded-main-{}", std::process::id());
    let mut s = Spanset::new(k, &marker);
    s.k.ok_with_stdin(&["apply", "-f", "-"], &guarded_pod(&marker));

    // (a) Named but never extended: the guard waits, and says why.
    s.until("the guard waits for an extension", never, |s, _| s.log("spanset-guard").contains("no extension seen yet"));
    // Extended every R, but naming other ordinals: it still waits, through several extensions.
    s.ordinals = "0-1".into();
    s.extending = true;
    s.until("the guard sees the lease name others", never, |s, _| {
        s.log("spanset-guard").contains("lease names ordinals 0-1, not 2")
    });
    let writes = s.writes;
    s.until("three more extensions", never, |s, _| s.writes >= writes + 3);
    assert!(s.pod()["status"]["initContainerStatuses"][0]["state"]["running"].is_object(), "wait still runs");

    // (b) Extended naming it: the main container runs.
    s.ordinals = "2".into();
    s.until("the main container runs", |_| {}, |_, alive| alive);
    let first_run = mains(&marker);

    // (c) No more extensions: the main process is gone before the lapse (judged at every look);
    // the container's first process stays, waiting, so the pod is not made anew.
    s.extending = false;
    let lapse = s.lapse().expect("a write named the ordinal");
    s.until("the main process is gone", |_| {}, |_, alive| !alive);
    eprintln!("(c) the main process was gone {:?} before the lapse", lapse.saturating_duration_since(Instant::now()));
    let writes = s.writes;
    s.extending = true;
    s.ordinals = "0-1".into();
    s.until("extensions naming others", never, |s, _| s.writes >= writes + 3);
    assert_eq!(s.init_restarts(0), 0, "the pod's init containers ran once: no new sandbox");
    let main = s.log("main");
    assert!(main.contains("waiting for a fresh extension"), "{main}");

    // (e) Extended naming it again: it runs again (a new process, in the same container).
    s.ordinals = "2".into();
    s.until("the main container runs again", |_| {}, |_, alive| alive);
    assert_ne!(mains(&marker), first_run, "a new process");

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
    // It waits while the lease names others, and runs once it names it.
    s.extending = true;
    s.ordinals = "2".into();
    s.until("the main container runs a third time", |_| {}, |_, alive| alive);
    let watch_log = s.log("spanset-guard-watch");
    assert!(watch_log.contains("no longer names the ordinal"), "{watch_log}");

    // (f) Released: no more extensions, and the main container runs on past any lapse.
    s.releasing = true;
    s.ordinals = "2".into();
    s.write();
    s.extending = false;
    let released = Instant::now();
    s.until(
        "three leases after the release",
        |alive| assert!(alive, "a released pod stopped"),
        |_, _| released.elapsed() > Duration::from_secs(3 * LEASE_SECONDS),
    );
    assert!(s.log("spanset-guard-watch").contains("released"), "{}", s.log("spanset-guard-watch"));
}

#[test]
fn a_pod_sharing_its_process_namespace_never_runs_its_command() {
    if !programs() {
        return;
    }
    let sandbox = Sandbox::start_with("solo", &["--run-images", "busybox", "--auth"]);
    let Some(k) = Kubectl::installed(&sandbox) else { return };
    let marker = format!("spanset-shared-main-{}", std::process::id());
    let mut s = Spanset::new(k, &marker);
    // Made by hand around spanset's refusal: a shared PID namespace, so the containers' first
    // process is not PID 1 and could not stop its command.
    let mut pod: Value = serde_json::from_str(&guarded_pod(&marker)).unwrap();
    pod["spec"]["shareProcessNamespace"] = true.into();
    s.k.ok_with_stdin(&["apply", "-f", "-"], &pod.to_string());
    s.extending = true;
    let writes = s.writes;
    s.until("the main container refused through extensions naming it", never, |s, _| {
        s.writes >= writes + 4 && s.pod()["status"]["containerStatuses"][0]["restartCount"].as_u64().unwrap_or(0) >= 1
    });
    let status = s.pod()["status"]["containerStatuses"][0].clone();
    let said = status["lastState"]["terminated"]["message"].as_str().unwrap_or_default().to_string();
    assert!(said.contains("not 1") && said.contains("does not start"), "{status}");
}
