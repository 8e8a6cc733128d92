//! Failover figures for self-fencing pods (`cargo bench --bench pod_lease`, about six minutes,
//! set by the Automatic policy's default fence, 300 s): how long after member `central` is cut
//! off its ordinals are Ready elsewhere, under three policies on one federation shape (3
//! members east/west/central, 6 replicas in thirds, `Parallel`, every pod a real busybox
//! process beside the real `spanset guard` where a pod lease is set):
//!
//! 1. `podLease: {seconds: 10}` under `policy: Automatic` whose own fence waits an hour: the
//!    lease alone re-homes;
//! 2. `policy: Manual`, the bench fencing central as an operator would (`spanset fence`'s
//!    code), 0 s after its MemberCluster turns `Reachable=False` (the operator's reaction time
//!    is modelled as nothing);
//! 3. `policy: Automatic` with its default `fenceAfterSeconds`, no pod lease.
//!
//! Each runs once *partitioned* (`sim-ctl partition central`: central's API is cut off, its
//! pods keep running, as in a network split) and once *lost* (its nodes powered off, then the
//! partition: a dead datacenter). Per run: partition → `ClusterUnreachable` naming central, →
//! central's main processes gone (read from /proc), → fenced (a MemberCluster fence, by the
//! bench or the automatic policy), → every ordinal Ready elsewhere (status `ready` 6/6 and no
//! move, the slices outside central Ready for all six, ordinals 4 and 5 running outside
//! central), and whether any ordinal was seen running twice (/proc) or in the sandbox's ledger.
//!
//! The sandbox runs as a `spanset sim` process (not in this one), because it runs its own binary
//! for spanset's image: the guard must be spanset, not this bench. The two scenario-3 runs start
//! first and wait out their 300 s side by side while the others run one after the other.
//! Arguments (after `--`) that are not flags keep only the runs whose name contains one of them
//! (`-- lease` runs scenario 1's two, in about a minute and a half).

mod support;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use serde_json::json;
use spanset_api::{FederatedStatefulSet, MemberCluster};
use spanset_controller::{
    decisions::reconcile::{DEFAULT_FENCE_AFTER_SECONDS, DEFAULT_UNREACHABLE_AFTER},
    host::{events::Recorder, fencing},
    pod_lease::Timing,
};
use tokio::io::AsyncBufReadExt;

use support::client;

const MEMBERS: [&str; 3] = ["east", "west", "central"];
const LOST: &str = "central";
/// Central's ordinals (the top third of six).
const LOST_ORDINALS: [u32; 2] = [4, 5];
const REPLICAS: i32 = 6;
/// L: the shortest lease spanset takes.
const LEASE_SECONDS: u64 = 10;
/// W: the sandbox answers or refuses a request within seconds even on a loaded machine, so a
/// write it did not answer within twenty never lands (the end-to-end test's setting; the
/// flag's default is 60, for a kube-apiserver's one-minute request timeout).
const WRITE_DEADLINE_SECONDS: u64 = 20;
/// ρ: `--pod-lease-drift`'s default, passed explicitly so the figures name what was used.
const DRIFT: f64 = 0.01;
/// The sandbox's time factor (its kubelets' and controllers' delays), as in the suite.
const TIME_FACTOR: f64 = 0.01;
/// The grace period of the pods, which bounds the guard's SIGTERM budget.
const GRACE_SECONDS: u64 = 2;
/// How long any one run may take before the bench gives up on it.
const RUN_DEADLINE: Duration = Duration::from_secs(600);
/// How often a run looks at /proc and the federation.
const LOOK_EVERY: Duration = Duration::from_millis(100);
/// What each main process's command line carries (then the run's name, the pod's name and uid).
const MARKER: &str = "pod-lease-bench";

/// Who re-homes the cut-off member's ordinals.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Scenario 1: the pod lease's lapse, under Automatic with its fence an hour away.
    Lease,
    /// Scenario 2: an operator's fence at once.
    Manual,
    /// Scenario 3: the Automatic policy's own fence, at its defaults.
    Automatic,
}

/// What happened to the member.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Its API cut off; its pods keep running.
    Partitioned,
    /// Its nodes powered off (its pods die with them), then its API cut off.
    Lost,
}

#[derive(Clone, Copy)]
struct Scenario {
    policy: Policy,
    fault: Fault,
}

impl Scenario {
    /// The run's name: what the filter matches and what tags its processes.
    fn name(&self) -> String {
        let policy = match self.policy {
            Policy::Lease => "lease",
            Policy::Manual => "manual",
            Policy::Automatic => "automatic",
        };
        let fault = match self.fault {
            Fault::Partitioned => "partitioned",
            Fault::Lost => "lost",
        };
        format!("{policy}-{fault}")
    }

    fn title(&self) -> &'static str {
        match self.policy {
            Policy::Lease => "1. podLease 10 s, Automatic (fenceAfterSeconds 3600)",
            Policy::Manual => "2. Manual, fenced 0 s after Reachable=False",
            Policy::Automatic => "3. Automatic, default fenceAfterSeconds",
        }
    }

    /// The federation: six ordinals in thirds, each pod a real process tagged with the run's
    /// name and its pod's name and uid.
    fn federation(&self) -> FederatedStatefulSet {
        let failover = match self.policy {
            Policy::Lease => json!({"policy": "Automatic", "fenceAfterSeconds": 3600,
                "podLease": {"seconds": LEASE_SECONDS}}),
            Policy::Manual => json!({"policy": "Manual"}),
            Policy::Automatic => json!({"policy": "Automatic"}),
        };
        let tag = format!("{MARKER}-{}:$(POD_NAME):$(POD_UID)", self.name());
        serde_json::from_value(json!({
            "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {
                "replicas": REPLICAS,
                "placement": {"clusters": [{"name": "east", "weight": 1}, {"name": "west", "weight": 1}, {"name": "central", "weight": 1}]},
                "failover": failover,
                "template": {"serviceName": "db", "podManagementPolicy": "Parallel",
                    "selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                        "terminationGracePeriodSeconds": GRACE_SECONDS,
                        // They tolerate an unreachable node, as databases do: nothing evicts them.
                        "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}],
                        "containers": [{"name": "db", "image": "busybox",
                            "command": ["sh", "-c", "while :; do sleep 0.1; done", tag],
                            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                    {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]}]}}}
            }
        }))
        .expect("the federation parses")
    }
}

/// What one run measured, in seconds from the partition.
struct Figures {
    scenario: Scenario,
    /// The federation's `ClusterUnreachable` condition naming central; not seen: `None`.
    detected: Option<f64>,
    /// Central's MemberCluster fenced (by the bench or the automatic policy); never: `None`.
    fenced: Option<f64>,
    /// Central's last main process gone; before the partition (powered off): 0; still running
    /// at the end: `None`.
    gone: Option<f64>,
    /// Every ordinal Ready elsewhere.
    ready: f64,
    /// Whether an ordinal's main process was seen running twice at once in /proc.
    double_seen: bool,
    /// The sandbox ledger's violations (an ordinal running in two clusters at once).
    ledger_violations: usize,
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |s: &Scenario| filters.is_empty() || filters.iter().any(|f| s.name().contains(f.as_str()));
    let background: Vec<Scenario> = [Fault::Partitioned, Fault::Lost]
        .into_iter()
        .map(|fault| Scenario { policy: Policy::Automatic, fault })
        .filter(|s| wanted(s))
        .collect();
    let foreground: Vec<Scenario> = [Policy::Lease, Policy::Manual]
        .into_iter()
        .flat_map(|policy| [Fault::Partitioned, Fault::Lost].map(|fault| Scenario { policy, fault }))
        .filter(|s| wanted(s))
        .collect();
    if !processes_can_run() {
        eprintln!("pod_lease: skipped: the sandbox cannot run real processes here (needs sh, unshare, root)");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let started = Instant::now();
    let figures = rt.block_on(async move {
        // The 300-s runs first, side by side: the others run while they wait.
        let background: Vec<_> = background.into_iter().map(|s| tokio::spawn(run(s))).collect();
        let mut all = Vec::new();
        for s in foreground {
            all.push(run(s).await);
        }
        for b in background {
            all.push(b.await.expect("a scenario-3 run"));
        }
        all
    });
    print_figures(&figures, started.elapsed());
}

/// Whether `spanset sim --run-images` can run processes on this machine (its preflight, in
/// short): a shell, `unshare` and friends, and root for the namespaces.
fn processes_can_run() -> bool {
    let on_path = |p: &str| {
        std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(p).is_file()))
    };
    ["sh", "unshare", "nsenter", "chroot", "setpriv", "mount"].iter().all(|p| on_path(p))
}

fn print_figures(figures: &[Figures], took: Duration) {
    let timing = Timing::new(
        Duration::from_secs(LEASE_SECONDS),
        DRIFT,
        Duration::from_secs(WRITE_DEADLINE_SECONDS),
        Duration::from_secs(GRACE_SECONDS),
    )
    .expect("a valid timing");
    println!(
        "pod-lease failover figures (3 members, {REPLICAS} replicas in thirds, Parallel, real busybox processes, \
         time factor {TIME_FACTOR}; {:.0} s in all)",
        took.as_secs_f64()
    );
    println!(
        "  controller: L (podLease) {LEASE_SECONDS} s, W (--member-write-deadline) {WRITE_DEADLINE_SECONDS} s, \
         drift ρ (--pod-lease-drift) {DRIFT}; extended every R = L/4 = {:.1} s, guard poll P = {:.1} s; \
         an unanswered extension lands by its send + (W/4 + W)·(1+ρ) = {:.2} s, the lease lapses (L+P)·(1+ρ)/(1−ρ) = \
         {:.2} s after the latest landing (docs/failover.md: about L/4 + W/4 + W + L = {:.1} s)",
        timing.renew.as_secs_f64(),
        timing.poll.as_secs_f64(),
        timing.stretched(timing.landing_deadline()).as_secs_f64(),
        timing.hastened(timing.lease + timing.poll).as_secs_f64(),
        (timing.renew + timing.landing_deadline() + timing.lease).as_secs_f64()
    );
    println!(
        "  federation: unreachableAfterSeconds default ({} s); Automatic's default fenceAfterSeconds {} s; \
         the Manual operator fences 0 s after Reachable=False",
        DEFAULT_UNREACHABLE_AFTER.as_secs(),
        DEFAULT_FENCE_AFTER_SECONDS
    );
    println!("  seconds from `partition central`:");
    println!(
        "  {:<52} {:<12} {:>9} {:>18} {:>8} {:>14} {:>14}",
        "scenario", "central", "detected", "processes gone", "fenced", "Ready elsewhere", "doubles"
    );
    for f in figures {
        let gone = match (f.scenario.fault, f.gone) {
            (Fault::Lost, _) => "at power-off".to_string(),
            (Fault::Partitioned, Some(s)) => format!("{s:.2}"),
            (Fault::Partitioned, None) => "still running".to_string(),
        };
        let fenced = f.fenced.map_or("never".to_string(), |s| format!("{s:.2}"));
        let doubles = match (f.double_seen, f.ledger_violations) {
            (false, 0) => "none".to_string(),
            (seen, n) => format!("{}ledger {n}", if seen { "/proc yes, " } else { "" }),
        };
        let fault = match f.scenario.fault {
            Fault::Partitioned => "partitioned",
            Fault::Lost => "lost",
        };
        println!(
            "  {:<52} {:<12} {:>9} {:>18} {:>8} {:>14.2} {:>14}",
            f.scenario.title(),
            fault,
            f.detected.map_or("not seen".to_string(), |s| format!("{s:.2}")),
            gone,
            fenced,
            f.ready,
            doubles
        );
    }
}

/// A `spanset sim` process under `--auth` with the shipped identities set up, and a `spanset
/// run` controller as spanset's own identity.
struct Sim {
    sim: tokio::process::Child,
    controller: Option<tokio::process::Child>,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    admin: String,
    host: Client,
}

impl Sim {
    async fn start(name: &str) -> Sim {
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        let clusters = std::iter::once("host").chain(MEMBERS).collect::<Vec<_>>().join(",");
        let log = std::fs::File::create(dir.path().join("sim.log")).expect("log file");
        let mut sim = tokio::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
            .args(["sim", "--time-factor", &TIME_FACTOR.to_string(), "--clusters", &clusters, "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--auth", "--run-images", "busybox,spanset"])
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("spanset sim starts");
        let mut lines = tokio::io::BufReader::new(sim.stdout.take().expect("stdout")).lines();
        let mut admin = None;
        loop {
            let line = tokio::time::timeout(support::DEADLINE, lines.next_line()).await;
            let line =
                line.expect("spanset sim ready in time").expect("its stdout").expect("spanset sim printed `ready`");
            if line == "ready" {
                break;
            }
            if let Some(a) = line.strip_prefix("admin: ") {
                admin = Some(a.to_string());
            }
        }
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let admin = admin.expect("an `admin:` line before `ready`");
        let host = client(&kubeconfig, "host").await;
        spanset::cli::sandbox::install_crds(&host).await.expect("CRDs installed");
        let members: Vec<String> = MEMBERS.iter().map(|m| m.to_string()).collect();
        let identity = spanset::cli::sandbox::secure(&host, &kubeconfig, &members).await.expect("identities");
        let log = std::fs::File::create(dir.path().join("controller.log")).expect("log file");
        let controller = tokio::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
            .args(["run", "--context", "host", "--metrics-addr", "127.0.0.1:0", "--identity", name])
            .args(["--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5"])
            .args(["--lease-namespace", "spanset-system", "--kubeconfig"])
            .arg(&identity)
            .args(["--member-write-deadline", &WRITE_DEADLINE_SECONDS.to_string()])
            .args(["--pod-lease-drift", &DRIFT.to_string()])
            .env("RUST_LOG", "spanset=info")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("spanset run starts");
        Sim { sim, controller: Some(controller), dir, kubeconfig, admin, host }
    }

    /// `spanset sim-ctl ARGS` against this sandbox; its stdout, or a panic naming what failed.
    async fn ctl(&self, args: &[&str]) -> String {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
            .args(["sim-ctl", "--admin", &self.admin])
            .args(args)
            .output()
            .await
            .expect("spanset sim-ctl runs");
        assert!(out.status.success(), "sim-ctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    async fn ledger(&self) -> serde_json::Value {
        serde_json::from_str(&self.ctl(&["ledger"]).await).expect("ledger JSON")
    }

    /// Stops the controller, then the sandbox with SIGTERM, so that it stops the processes it
    /// runs (a SIGKILL would leave them behind).
    async fn stop(mut self) {
        if let Some(mut c) = self.controller.take() {
            let _ = c.kill().await;
        }
        if let Some(pid) = self.sim.id() {
            let _ = tokio::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().await;
        }
        if tokio::time::timeout(support::DEADLINE, self.sim.wait()).await.is_err() {
            let _ = self.sim.kill().await;
        }
        if std::env::var_os("SPANSET_KEEP_LOGS").is_some() {
            eprintln!("pod_lease: logs kept in {}", self.dir.keep().display());
        }
    }
}

/// Every main process of run `name` alive now: ordinal → pod uids, from the command lines of
/// the machine's processes (the sandbox runs each container as a real process). A guarded
/// container's first process (`spanset-guard-exec`), and what starts it, carry the command's
/// arguments after its own name without running it: not counted.
fn running(name: &str) -> BTreeMap<u32, BTreeSet<String>> {
    let prefix = format!("{MARKER}-{name}:");
    let mut out: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for entry in dir.flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let text = String::from_utf8_lossy(&cmdline);
        if text.split('\0').any(|a| a.ends_with("spanset-guard-exec")) {
            continue;
        }
        for arg in text.split('\0') {
            let Some((pod, uid)) = arg.strip_prefix(&prefix).and_then(|rest| rest.split_once(':')) else { continue };
            if let Some(k) = pod.rsplit_once('-').and_then(|(_, k)| k.parse().ok()) {
                out.entry(k).or_default().insert(uid.to_string());
            }
        }
    }
    out
}

/// One run: the federation placed in thirds, the fault, then a look every 100 ms until every
/// ordinal is Ready elsewhere.
async fn run(scenario: Scenario) -> Figures {
    let name = scenario.name();
    eprintln!("pod_lease: {name}: starting");
    let sim = Sim::start(&name).await;
    let fsts: Api<FederatedStatefulSet> = Api::namespaced(sim.host.clone(), "default");
    fsts.create(&PostParams::default(), &scenario.federation()).await.expect("federation created");
    let central = client(&sim.kubeconfig, LOST).await;
    let central_uids = placed(&fsts, &central, &name).await;

    if scenario.fault == Fault::Lost {
        // Its machines power off (its processes die at once), then its API goes, as the drill
        // does: the ledger has its pods stopped before the partition.
        let clusters: serde_json::Value = serde_json::from_str(&sim.ctl(&["clusters"]).await).expect("clusters JSON");
        let nodes: Vec<String> = clusters["clusters"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == LOST))
            .and_then(|c| c["nodes"].as_array())
            .expect("central's nodes")
            .iter()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect();
        for n in &nodes {
            sim.ctl(&["node-down", LOST, n, "--power-off"]).await;
        }
        let deadline = Instant::now() + support::DEADLINE;
        loop {
            let ledger = sim.ledger().await;
            let mine: Vec<&serde_json::Value> =
                ledger["incarnations"].as_array().expect("a list").iter().filter(|e| e["cluster"] == LOST).collect();
            if !mine.is_empty() && mine.iter().all(|e| !e["runningUntil"].is_null()) {
                break;
            }
            assert!(Instant::now() < deadline, "{name}: central's pods recorded as stopped");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    sim.ctl(&["partition", LOST]).await;
    let partitioned = Instant::now();
    let since = || partitioned.elapsed().as_secs_f64();
    eprintln!("pod_lease: {name}: central cut off");

    let mcs: Api<MemberCluster> = Api::all(sim.host.clone());
    let mut recorder = Recorder::for_component(sim.host.clone(), "spanset.dev/bench", "bench".into());
    let (mut detected, mut fenced, mut gone, mut double_seen) = (None, None, None, false);
    let ready = loop {
        let now = running(&name);
        double_seen |= now.values().any(|uids| uids.len() > 1);
        let central_runs = now.values().flatten().any(|uid| central_uids.contains(uid));
        if gone.is_none() && !central_runs {
            gone = Some(if scenario.fault == Fault::Lost { 0.0 } else { since() });
        }
        let status = fsts.get("db").await.ok().and_then(|f| f.status).unwrap_or_default();
        if detected.is_none()
            && status
                .conditions
                .iter()
                .any(|c| c.type_ == "ClusterUnreachable" && c.status == "True" && c.message.contains(LOST))
        {
            detected = Some(since());
        }
        if fenced.is_none()
            && let Ok(mc) = mcs.get(LOST).await
        {
            if mc.spec.fenced {
                fenced = Some(since());
            } else if scenario.policy == Policy::Manual && unreachable(&mc) {
                // The operator, at once: `spanset fence central` (refused unless Reachable=False).
                let by = "operator (bench)";
                if fencing::fence(&sim.host, LOST, "central lost", by, false, &mut recorder).await.is_ok() {
                    fenced = Some(since());
                }
            }
        }
        let elsewhere: i32 = status.slices.iter().filter(|s| s.cluster != LOST).map(|s| s.ready_replicas).sum();
        let moved = LOST_ORDINALS
            .iter()
            .all(|k| now.get(k).is_some_and(|uids| uids.iter().any(|uid| !central_uids.contains(uid))));
        if moved && elsewhere == REPLICAS && status.moves.is_empty() && status.ready.as_deref() == Some("6/6") {
            break since();
        }
        assert!(partitioned.elapsed() < RUN_DEADLINE, "{name}: every ordinal Ready elsewhere: {now:?} {status:?}");
        tokio::time::sleep(LOOK_EVERY).await;
    };
    // Central's processes still running at the end, in a partition without a lease, are the
    // doubles the ledger names.
    if running(&name).values().flatten().any(|uid| central_uids.contains(uid)) {
        gone = None;
    }
    let ledger = sim.ledger().await;
    let ledger_violations = ledger["violations"].as_array().map_or(0, Vec::len);
    eprintln!("pod_lease: {name}: Ready elsewhere after {ready:.2} s");
    sim.stop().await;
    Figures { scenario, detected, fenced, gone, ready, double_seen, ledger_violations }
}

/// Whether central's MemberCluster says spanset cannot reach it (`Reachable=False`): what an
/// operator waits for, and what `spanset fence` requires without `--force`.
fn unreachable(mc: &MemberCluster) -> bool {
    mc.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Reachable" && c.status == "False"))
}

/// Waits until the federation is placed in thirds with every ordinal's main process running;
/// answers the uids of central's pods.
async fn placed(fsts: &Api<FederatedStatefulSet>, central: &Client, name: &str) -> BTreeSet<String> {
    let pods: Api<Pod> = Api::namespaced(central.clone(), "default");
    let deadline = Instant::now() + support::DEADLINE;
    loop {
        let status = fsts.get("db").await.ok().and_then(|f| f.status).unwrap_or_default();
        let thirds = status.slices.iter().any(|s| s.cluster == LOST && s.start == 4 && s.replicas == 2);
        let now = running(name);
        if thirds && status.ready.as_deref() == Some("6/6") && status.moves.is_empty() && now.len() == 6 {
            let listed = pods.list(&ListParams::default()).await.expect("central's pods");
            let uids: BTreeSet<String> = listed.items.into_iter().filter_map(|p| p.metadata.uid).collect();
            let central: Vec<u32> =
                now.iter().filter(|(_, us)| us.iter().any(|u| uids.contains(u))).map(|(k, _)| *k).collect();
            if central == LOST_ORDINALS {
                return uids;
            }
        }
        assert!(Instant::now() < deadline, "{name}: placed in thirds, every main process running: {status:?}");
        tokio::time::sleep(LOOK_EVERY).await;
    }
}
