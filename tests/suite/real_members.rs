//! spanset on real Kubernetes, installed as the README tells a user: a host and three members,
//! each a real control plane (`spanset-control-plane`), the CRDs and `deploy/` applied with the
//! real kubectl, each member joined with `spanset join`, the controller running as its shipped
//! ServiceAccount, and the README's tour done on it. Judged by the audit of every member's pods
//! over the whole run (not by spanset's own status) and by what the run left: volumes,
//! incarnations, StatefulSets.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::PersistentVolume};
use kube::{Api, api::ListParams};
use serde_json::Value;
use spanset::audit::Audit;
use spanset_control_plane::RealFleet;

use crate::support::{Kubectl, real_kube};

const MEMBERS: [&str; 3] = ["east", "west", "central"];

/// How long one step of a scenario may take on a loaded 2-core machine running four control
/// planes.
const STEP: Duration = Duration::from_secs(300);

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path).display().to_string()
}

/// A `spanset` command, to its end; its output, or a panic with it.
fn spanset(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_spanset")).args(args).output().expect("spanset runs");
    assert!(
        out.status.success(),
        "spanset {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The controller as a process, as the shipped ServiceAccount; killed on drop.
struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    fn start(kubeconfig: &Path, log: PathBuf) -> Self {
        let file = std::fs::File::create(&log).expect("a log file");
        let child = Command::new(env!("CARGO_BIN_EXE_spanset"))
            .args(["run", "--context", "host", "--lease-namespace", "spanset-system", "--metrics-addr", "127.0.0.1:0"])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .env("RUST_LOG", "spanset=debug")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spanset run starts");
        Self { child, log }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A kubeconfig for the host as the controller's ServiceAccount, with a token the host mints
/// (`kubectl create token`), as a Deployment's pod would be given one.
fn controller_kubeconfig(k: &Kubectl, fleet: &RealFleet, path: &Path) {
    let token = k.ok(&["--context", "host", "-n", "spanset-system", "create", "token", "spanset", "--duration", "24h"]);
    let admin: Value = serde_json::from_str(&std::fs::read_to_string(fleet.kubeconfig()).unwrap()).unwrap();
    let cluster = admin["clusters"].as_array().unwrap().iter().find(|c| c["name"] == "host").unwrap().clone();
    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "host",
        "clusters": [cluster],
        "users": [{"name": "spanset", "user": {"token": token.trim()}}],
        "contexts": [{"name": "host", "context": {"cluster": "host", "user": "spanset"}}],
    });
    std::fs::write(path, config.to_string()).unwrap();
}

fn federation(k: &Kubectl) -> Value {
    serde_json::from_str(&k.ok(&["--context", "host", "get", "fsts", "redis", "-o", "json"])).unwrap()
}

/// Waits until the federation is Ready 6/6 with no move under way and each member's slice is
/// as `want` says (member, replicas), reading only what the members' StatefulSets and the
/// federation's status say.
async fn settled(k: &Kubectl, fleet: &RealFleet, want: &[(&str, i32)], what: &str, controller: &Controller) {
    let deadline = Instant::now() + STEP;
    loop {
        let f = federation(k);
        let status = &f["status"];
        let quiet = status["ready"] == "6/6" && status["moves"].as_array().is_none_or(|m| m.is_empty());
        let mut slices_ok = quiet;
        if quiet {
            for (member, replicas) in want {
                let client = fleet.cluster(member).unwrap().client().await.unwrap();
                let sets: Api<StatefulSet> = Api::namespaced(client, "default");
                let set = sets.get_opt("redis").await.unwrap();
                let (spec, ready) = set
                    .map(|s| {
                        (
                            s.spec.and_then(|s| s.replicas).unwrap_or(0),
                            s.status.and_then(|s| s.ready_replicas).unwrap_or(0),
                        )
                    })
                    .unwrap_or((0, 0));
                slices_ok &= spec == *replicas && ready == *replicas;
            }
        }
        if slices_ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not settled within {STEP:?}; status {status}\ncontroller log:\n{}",
            controller.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn placement(weights: [u32; 3]) -> String {
    let clusters: Vec<Value> =
        MEMBERS.iter().zip(weights).map(|(m, w)| serde_json::json!({"name": m, "weight": w})).collect();
    serde_json::json!({"spec": {"placement": {"clusters": clusters}}}).to_string()
}

/// The volumes of each member by phase: what a scenario left.
async fn volumes(fleet: &RealFleet) -> Vec<(String, String)> {
    let mut out = vec![];
    for m in MEMBERS {
        let client = fleet.cluster(m).unwrap().client().await.unwrap();
        let pvs: Api<PersistentVolume> = Api::all(client);
        for pv in pvs.list(&ListParams::default()).await.unwrap() {
            let phase = pv.status.and_then(|s| s.phase).unwrap_or_default();
            out.push((m.to_string(), phase));
        }
    }
    out
}

fn count(volumes: &[(String, String)], member: &str, phase: &str) -> usize {
    volumes.iter().filter(|(m, p)| m == member && p == phase).count()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_tour_on_real_1_37_members_moves_every_ordinal_to_east_and_back_running_none_twice() {
    let Some(binaries) = real_kube::binaries(real_kube::NEWEST) else { return };
    let dir = tempfile::tempdir().unwrap();
    let clusters: Vec<(&str, &_)> = ["host"].into_iter().chain(MEMBERS).map(|n| (n, &binaries)).collect();
    let started = Instant::now();
    let fleet = RealFleet::start(&clusters, dir.path()).await.unwrap();
    let up = started.elapsed();
    let kubeconfig = fleet.kubeconfig().to_path_buf();
    let k = Kubectl::at(binaries.program("kubectl"), kubeconfig.clone(), dir.path().join("kubectl-cache"));

    // The README's install, verbatim but for the kubeconfig.
    k.ok(&["--context", "host", "apply", "-f", &repo("deploy/crds/")]);
    k.ok(&["--context", "host", "apply", "-k", &repo("deploy/")]);
    let config = kubeconfig.display().to_string();
    for m in MEMBERS {
        let joined = spanset(&["join", m, "--kubeconfig", &config, "--context", m, "--host-context", "host"]);
        assert!(!joined.contains("not installed"), "a 1.37 member takes every guard: {joined}");
    }
    // The Deployment's pod is kwok's (no kubelet runs images here): the controller runs beside
    // the clusters instead, as that pod would, with its ServiceAccount's token.
    let ctl = dir.path().join("controller.kubeconfig");
    controller_kubeconfig(&k, &fleet, &ctl);
    let controller = Controller::start(&ctl, dir.path().join("controller.log"));

    let members = {
        let mut v = vec![];
        for m in MEMBERS {
            v.push((m.to_string(), fleet.cluster(m).unwrap().client().await.unwrap()));
        }
        v
    };
    let record = dir.path().join("audit.jsonl");
    let audit = Audit::start(members, "default", "redis", Some(std::fs::File::create(&record).unwrap()));

    let members: Vec<String> = MEMBERS.iter().map(|m| m.to_string()).collect();
    let example = serde_json::to_string(&spanset_api::example(&members)).unwrap();
    k.ok_with_stdin(&["--context", "host", "apply", "-f", "-"], &example);
    let mark = Instant::now();
    settled(&k, &fleet, &[("east", 2), ("west", 2), ("central", 2)], "the example", &controller).await;
    let placed = mark.elapsed();

    // The tour: every ordinal to east, then back to 1:1:1.
    let mark = Instant::now();
    k.ok(&["--context", "host", "patch", "fsts", "redis", "--type", "merge", "-p", &placement([1, 0, 0])]);
    settled(&k, &fleet, &[("east", 6), ("west", 0), ("central", 0)], "all to east", &controller).await;
    let to_east = mark.elapsed();
    let mark = Instant::now();
    k.ok(&["--context", "host", "patch", "fsts", "redis", "--type", "merge", "-p", &placement([1, 1, 1])]);
    settled(&k, &fleet, &[("east", 2), ("west", 2), ("central", 2)], "back to 1:1:1", &controller).await;
    let back = mark.elapsed();
    println!(
        "real 1.37 members: four control planes up in {up:?}; the example Ready in {placed:?}; \
         four ordinals to east in {to_east:?} and back in {back:?}"
    );

    // The judge: the members' own pods, over the whole run.
    let timeline = audit.timeline();
    let overlaps = timeline.overlaps();
    assert!(overlaps.is_empty(), "an identity ran in two members at once: {overlaps:?}");
    // What it cost: six pods to start with, one more for each of the four ordinals that went to
    // east and for each of the four that left it; a pod recreated for any other reason is a
    // cost the tour should not have.
    let incarnations: Vec<_> = timeline.incarnations().collect();
    assert_eq!(incarnations.len(), 14, "6 + 4 + 4 pods: {incarnations:#?}");
    assert_eq!(incarnations.iter().filter(|i| i.ready.is_some()).count(), 14, "each of them was Ready");
    // The recording judges alike.
    let replayed = spanset(&["audit", "redis", "--from", &record.display().to_string(), "-o", "json"]);
    let replayed: Value = serde_json::from_str(&replayed).unwrap();
    assert_eq!(replayed["incarnations"].as_array().map(Vec::len), Some(14), "{replayed}");
    assert_eq!(replayed["overlaps"], serde_json::json!([]));

    // The README's count of volumes: one Released per ordinal that left a member (east 4,
    // west 2, central 2), one Bound per ordinal where it is, nothing else.
    let left = volumes(&fleet).await;
    for (member, released) in [("east", 4), ("west", 2), ("central", 2)] {
        assert_eq!(count(&left, member, "Released"), released, "{member}: {left:?}");
        assert_eq!(count(&left, member, "Bound"), 2, "{member}: {left:?}");
    }
    assert_eq!(left.len(), 14, "no other volume: {left:?}");
    drop(controller);
}

/// `spanset sandbox --control-plane DIR` as a user runs it: the sandbox's own steps (CRDs, the
/// shipped identities, `spanset join`'s work, the example, the controller) on real control
/// planes, `ready` printed, kubectl answered by the real release, and nothing left running
/// after SIGTERM.
#[test]
fn spanset_sandbox_on_real_control_planes_places_the_example_and_stops_them_all() {
    use std::io::BufRead;
    let Some(binaries) = real_kube::binaries(real_kube::NEWEST) else { return };
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("sandbox.kubeconfig");
    let plane = binaries.dir().display().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["sandbox", "--clusters", "east,west", "--metrics-addr", "127.0.0.1:0", "--control-plane", &plane])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spanset sandbox starts");
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    let row = |cluster: &str, ordinals: &str| {
        lines.lock().unwrap().iter().any(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells.len() >= 4 && cells[..4] == ["default/redis", cluster, ordinals, "3/3"]
        })
    };
    let deadline = Instant::now() + STEP;
    while !(row("east", "0-2") && row("west", "3-5")) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the sandbox exited with {status}: {:?}", lines.lock().unwrap());
        }
        assert!(Instant::now() < deadline, "the example never placed: {:?}", lines.lock().unwrap());
        std::thread::sleep(Duration::from_millis(200));
    }
    let printed = lines.lock().unwrap().clone();
    assert!(printed.iter().any(|l| l == "ready"), "{printed:?}");
    assert!(
        printed.iter().any(|l| l.starts_with("cluster west: https://127.0.0.1:") && l.contains(&plane)),
        "{printed:?}"
    );

    let k = Kubectl::at(binaries.program("kubectl"), kubeconfig.clone(), dir.path().join("kubectl-cache"));
    let version: Value = serde_json::from_str(&k.ok(&["--context", "west", "version", "-o", "json"])).unwrap();
    assert!(plane.contains(version["serverVersion"]["gitVersion"].as_str().unwrap()), "{version}");
    let start = k.ok(&["--context", "west", "get", "sts", "redis", "-o", "jsonpath={.spec.ordinals.start}"]);
    assert_eq!(start, "3", "west's StatefulSet selects ordinals 3-5");
    // The member's own guard, in the real apiserver's words.
    let out = k.run(&["--context", "west", "scale", "sts", "redis", "--replicas", "1"]);
    let refusal = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && refusal.contains("spanset-owner-scale"), "{refusal}");

    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + STEP;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the sandbox stops on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    let clusters = kubeconfig.with_extension("clusters").display().to_string();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&clusters))
        .collect();
    assert!(left.is_empty(), "processes of the sandbox's clusters left: {left:?}");
}

/// What only a simulated cluster can do is refused with `--control-plane`, naming the flag,
/// before anything starts; so is a directory without the programs.
#[test]
fn spanset_sandbox_refuses_simulated_only_flags_and_a_bare_directory_with_control_planes() {
    let dir = tempfile::tempdir().unwrap();
    let run = |flags: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_spanset"))
            .args(["sandbox", "--kubeconfig"])
            .arg(dir.path().join("k"))
            .args(flags)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let empty = dir.path().display().to_string();
    let (code, err) = run(&["--control-plane", &empty, "--time-factor", "0.5"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--time-factor cannot be combined with --control-plane"), "{err}");
    let (code, err) = run(&["--control-plane", &empty, "--example", "redis-cluster", "--clusters", "east,west"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--run-images cannot be combined with --control-plane"), "{err}");
    let (code, err) = run(&["--control-plane", &empty]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("--control-plane {empty}: {empty}: no etcd")), "{err}");
    let (code, err) = run(&["--control-plane", &format!("north={empty}")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("\"north\" is neither \"host\" nor one of --clusters"), "{err}");
    assert!(!dir.path().join("k").exists(), "no kubeconfig written");
}
