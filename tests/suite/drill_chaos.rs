//! `spanset drill chaos` against the sandbox, as a user runs it: a seeded soak with two
//! controller replicas of its own injects faults of many kinds and spec changes, sees moves
//! complete, keeps every data marker and the ledger clean, and converges after the heal; the
//! same seed plans the same schedule; and a wrong marker written mid-soak fails it, naming the
//! ordinal.

use crate::support;

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Api;
use support::{Background, federation::Federation};

/// The soaks run one at a time: each loads both cores for a minute.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The drill's flags against `f`, running two controllers of its own as the shipped identity.
fn chaos_args(f: &Federation, seed: &str, duration: &str, controllers: &str) -> Vec<String> {
    let mut args: Vec<String> = ["drill", "chaos", "--admin", &f.sandbox.admin, "--seed", seed, "--duration", duration]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(["--controllers", controllers, "--converge-timeout", "240s", "-o", "json"].map(String::from));
    args.extend(["--lease-namespace".into(), f.lease_namespace().into()]);
    if let Some(k) = &f.sandbox.controller_kubeconfig {
        args.extend(["--controller-kubeconfig".into(), k.display().to_string()]);
    }
    args
}

async fn run(f: &Federation, args: &[String]) -> std::process::Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    f.spanset(&args).await
}

/// The steps `--plan` prints (after its `seed N` line).
async fn plan(f: &Federation, seed: &str) -> Vec<String> {
    let mut args = chaos_args(f, seed, "60s", "2");
    args.push("--plan".into());
    let out = run(f, &args).await;
    let text = support::succeeded("drill chaos --plan", out);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(format!("seed {seed}").as_str()), "{text}");
    lines.map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_seeded_soaks_with_two_controllers_inject_many_faults_move_keep_every_marker_and_converge() {
    let _one = ONE_AT_A_TIME.lock().await;
    let f = Federation::start(&["east", "west", "central"]).await;
    let planned = plan(&f, "4").await;
    assert_eq!(plan(&f, "4").await, planned, "the same seed plans the same schedule");
    assert_ne!(plan(&f, "5").await, planned, "another seed another");
    let out = run(&f, &chaos_args(&f, "4", "60s", "2")).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("a JSON report ({e}): {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    println!("{}\n{stderr}", serde_json::to_string_pretty(&report).unwrap());
    assert!(out.status.success(), "exit {:?}: {report}\n{stderr}", out.status.code());
    assert!(stderr.contains("seed 4"), "the seed is printed: {stderr}");
    let performed: Vec<String> =
        report["schedule"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect();
    assert_eq!(performed, planned, "the run performed the planned schedule");
    let faults = report["faults"].as_object().unwrap();
    assert!(faults.len() >= 5, "faults of several kinds: {faults:?}");
    for kind in ["controller-kill", "controller-pause"] {
        assert!(faults.get(kind).and_then(|n| n.as_u64()).unwrap_or(0) > 0, "{kind} injected: {faults:?}");
    }
    assert!(report["specChanges"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum::<u64>() > 0);
    assert!(report["movesCompleted"].as_u64().unwrap() > 0, "moves completed: {report}");
    assert_eq!(report["converged"], true, "{report}");
    assert_eq!(report["ledgerViolations"], serde_json::json!([]), "{report}");
    assert_eq!(report["markerViolations"], serde_json::json!([]), "{report}");
    assert!(report["markersChecked"].as_u64().unwrap() >= report["markersWritten"].as_u64().unwrap());
    assert!(report["markersWritten"].as_u64().unwrap() > 0);
    assert_eq!(report["verdict"], "clean");
    // What the run cost: spanset wrote in every member, where volumes were provisioned.
    for m in ["east", "west", "central"] {
        let cost = &report["cost"][m];
        assert!(cost["spanset"]["created"].as_u64().unwrap() > 0, "{m}: {cost}");
        assert!(cost["volumesProvisioned"].as_u64().unwrap() > 0, "{m}: {cost}");
        assert!(cost["events"].as_object().is_some(), "{m}: {cost}");
    }
    f.assert_ledger_clean();

    // A second fixed seed on a fresh sandbox, in the same test so that no other soak's test
    // waits for this one's turn: two controllers killed or paused, and it must end clean too.
    let f = Federation::start(&["east", "west", "central"]).await;
    let out = run(&f, &chaos_args(&f, "6", "60s", "2")).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("a JSON report ({e}): {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
    assert!(out.status.success(), "seed 6: exit {:?}: {report}\n{stderr}", out.status.code());
    let faults = report["faults"].as_object().unwrap();
    let injected = |kind: &str| faults.get(kind).and_then(|n| n.as_u64()).unwrap_or(0);
    assert!(injected("controller-kill") + injected("controller-pause") > 0, "seed 6: {faults:?}");
    assert!(report["movesCompleted"].as_u64().unwrap() > 0, "seed 6: moves completed: {report}");
    assert_eq!(report["converged"], true, "seed 6: {report}");
    assert_eq!(report["verdict"], "clean", "seed 6: {report}");
    f.assert_ledger_clean();
}

/// Sends SIGTERM to the drill a failing test leaves running, so that it stops the controllers it
/// started (the SIGKILL of [`Background`]'s drop would leave them behind), and waits for it.
struct StopOnDrop(u32);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let _ = Command::new("kill").args(["-TERM", &self.0.to_string()]).status();
        // Gone, or a zombie waiting to be reaped.
        let gone = || {
            std::fs::read_to_string(format!("/proc/{}/stat", self.0))
                .map_or(true, |s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
        };
        let start = Instant::now();
        while !gone() && start.elapsed() < support::DEADLINE {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A 20-second drill (seed 3, one controller of its own) against `f`, once it has written its
/// markers, drawing its picture at `report` if given; a failing test stops it on the way out.
fn short_soak_with_markers(f: &Federation, report: Option<&Path>) -> (Background, StopOnDrop) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spanset"));
    cmd.args(chaos_args(f, "3", "20s", "1")).arg("--kubeconfig").arg(&f.sandbox.kubeconfig).args(["--context", "host"]);
    if let Some(page) = report {
        cmd.arg("--report").arg(page);
    }
    let drill = Background::spawn(cmd);
    let stop = StopOnDrop(drill.pid());
    support::wait_until("the drill wrote its markers", Duration::from_secs(240), || {
        drill.err_lines().iter().any(|l| l.starts_with("markers: written on"))
    });
    (drill, stop)
}

/// The drill's exit code and its JSON report, once it ends.
async fn exit_and_report(drill: &mut Background) -> (Option<i32>, serde_json::Value) {
    let start = Instant::now();
    let code = loop {
        if let Some(code) = drill.try_exit() {
            break code;
        }
        assert!(start.elapsed() < Duration::from_secs(400), "the drill did not end");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // The reader thread may still be collecting the last lines.
    let parsed = || serde_json::from_str::<serde_json::Value>(&drill.lines().join("\n")).ok();
    support::wait_until("the whole JSON report read", support::DEADLINE, || parsed().is_some());
    let report = parsed().expect("a JSON report");
    println!("{report}");
    (code, report)
}

/// The member and PersistentVolume of ordinal `k` of `chaos`, once its claim is bound.
async fn volume_of(f: &Federation, k: u32) -> (String, String) {
    let start = Instant::now();
    loop {
        for m in &f.members {
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(f.member(m).await, "default");
            let pvc = pvcs.get_opt(&format!("data-chaos-{k}")).await.ok().flatten();
            if let Some(pv) = pvc.and_then(|c| c.spec?.volume_name) {
                return (m.clone(), pv);
            }
        }
        assert!(start.elapsed() < support::DEADLINE, "ordinal {k}'s claim never bound");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_marker_written_mid_soak_fails_the_drill_naming_the_ordinal() {
    let _one = ONE_AT_A_TIME.lock().await;
    let f = Federation::start(&["east", "west", "central"]).await;
    let (mut drill, _stop) = short_soak_with_markers(&f, None);
    // Ordinal 0 stays whatever the replicas: the drill never forgets its marker.
    let (cluster, pv) = volume_of(&f, 0).await;
    f.sandbox.ctl_ok(&["volume", &cluster, &pv, "--write", "tampered"]);
    let (code, report) = exit_and_report(&mut drill).await;
    assert_eq!(code, Some(1), "a marker violation exits 1: {report}");
    let wrong = report["markerViolations"].as_array().unwrap();
    assert_eq!(wrong.len(), 1, "{report}");
    let line = wrong[0].as_str().unwrap();
    assert!(line.starts_with("ordinal 0 ") && line.contains("\"tampered\""), "{line}");
    assert!(report["verdict"].as_str().unwrap().contains("1 marker violation"), "{report}");
    assert_eq!(report["ledgerViolations"], serde_json::json!([]), "{report}");
}

/// A second copy of ordinal 0 started by hand in another member, mid-soak (a pod with the
/// StatefulSet's identity that spanset never planned): the drill's ledger check must see the
/// identity run twice and fail, naming it — the verdict is not clean by construction.
/// The member where pod `<name>-<k>` runs (Running, not being deleted) while the federation
/// moves nothing of `k`, and another member where no pod of that name exists.
async fn running_and_elsewhere(f: &Federation, name: &str, k: u32) -> (String, String) {
    let pod_name = format!("{name}-{k}");
    let start = Instant::now();
    loop {
        let moving = f.status(name).await.moves.iter().any(|m| m.ordinal == k as i32);
        let mut running = None;
        let mut absent = None;
        for m in &f.members {
            let pods: Api<Pod> = Api::namespaced(f.member(m).await, "default");
            match pods.get_opt(&pod_name).await.unwrap_or_else(|e| panic!("{m}: reading {pod_name}: {e}")) {
                Some(p)
                    if p.metadata.deletion_timestamp.is_none()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") =>
                {
                    running = Some(m.clone())
                }
                Some(_) => {}
                None => absent = absent.or(Some(m.clone())),
            }
        }
        if let Some(found) = running.zip(absent).filter(|_| !moving) {
            return found;
        }
        assert!(start.elapsed() < support::DEADLINE, "{pod_name} never ran still beside a member without it");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_copy_of_a_pod_started_by_hand_mid_soak_fails_the_drill_naming_the_identity() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use kube::api::PostParams;
    let _one = ONE_AT_A_TIME.lock().await;
    let f = Federation::start(&["east", "west", "central"]).await;
    // Kept under target/ for a person to look at after the run.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("drill-report");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("chaos-two-copies.html");
    let _ = std::fs::remove_file(&page);
    let (mut drill, _stop) = short_soak_with_markers(&f, Some(&page));
    // The copy goes to a member where ordinal 0 does not run, while it runs elsewhere and is
    // not moving (a move might stop it before the copy starts). The copy is bare and carries
    // no label: nothing the member runs adopts it or collects it, so it runs until the drill
    // ends; it bears ordinal 0's identity by its name alone, which is what the ledger (and
    // spanset) go by.
    let (home, other) = running_and_elsewhere(&f, "chaos", 0).await;
    // The member's guards refuse a pod with an identity's name made without spanset's gate;
    // an administrator takes them away first, as one restoring a copied manifest by hand might.
    f.delete_bindings(&other, &["spanset-identity-gate", "spanset-identity-gate-names"]).await;
    let client = f.member(&other).await;
    let sts = Api::<StatefulSet>::namespaced(client.clone(), "default").get("chaos").await.expect("chaos there");
    let template = sts.spec.as_ref().expect("a spec").template.clone();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "chaos-0", "namespace": "default"},
        "spec": {"containers": template.spec.as_ref().expect("a pod spec").containers},
    }))
    .expect("a pod");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod).await.expect("the copy is created");
    support::eventually("the copy runs", || async {
        let phase = pods.get("chaos-0").await.ok().and_then(|p| p.status?.phase);
        phase.as_deref() == Some("Running")
    })
    .await;
    println!("started a copy of chaos-0 in {other} (it runs in {home})");
    // Once the sandbox's ledger has it running twice, the administrator deletes the copy: the
    // drill then converges (spanset starts nothing of ordinal 0 beside a copy it cannot end)
    // and its own check of the whole run must still find the overlap.
    support::eventually("the ledger sees ordinal 0 twice", || async {
        let check = f.sandbox.ctl(&["ledger", "--check"]);
        !check.status.success() && String::from_utf8_lossy(&check.stdout).contains("default/chaos ordinal 0")
    })
    .await;
    pods.delete("chaos-0", &Default::default()).await.expect("the copy is deleted");
    let (code, report) = exit_and_report(&mut drill).await;
    assert_eq!(code, Some(1), "a ledger violation exits 1: {report}");
    let twice = report["ledgerViolations"].as_array().expect("a list");
    assert!(
        twice.iter().any(|v| v.as_str().is_some_and(|v| v.starts_with("default/chaos ordinal 0 ran in two places"))),
        "{report}"
    );
    assert!(report["verdict"].as_str().unwrap().contains("ledger violation"), "{report}");

    // The picture shows it too: the copy's run drawn apart in ordinal 0's lane, in the member
    // it was started in, and the verdict failed; the soak's faults and its heal are marked.
    let html = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("no report at {}: {e}", page.display()));
    let lane0 = &html[html.find(r#"data-ordinal="0""#).expect("a lane for ordinal 0")..];
    let lane0 = &lane0[..lane0.find(r#"<g class="lane""#).unwrap_or(lane0.len())];
    assert!(lane0.contains(&format!(r#"<g class="segment overlap" data-cluster="{other}">"#)), "{lane0}");
    assert!(html.contains(r#"<td id="verdict" class="failed">"#), "{html}");
    assert!(html.contains("default/chaos ordinal 0 ran in two places"), "the violation is listed: {html}");
    let faults: u64 = report["faults"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(html.matches(r#"<g class="mark fault minor""#).count() as u64, faults, "a line per fault: {html}");
    for phase in ["soak begins", "heal everything"] {
        assert!(html.contains(&format!(r#"data-label="{phase}""#)), "{phase}: {html}");
    }
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return vec![] };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            // `pid (comm) state ppid ...`: the fields after the command's closing parenthesis.
            stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok()) == Some(pid)
        })
        .collect()
}

fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| !r.trim_start().starts_with('Z')))
}

/// A drill killed with SIGKILL (no chance to stop anything) leaves none of its controllers
/// running: each stops once its parent is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_killed_with_sigkill_leaves_no_controller_behind() {
    let _one = ONE_AT_A_TIME.lock().await;
    let f = Federation::start(&["east", "west"]).await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spanset"));
    cmd.args(chaos_args(&f, "5", "10m", "2"))
        .arg("--kubeconfig")
        .arg(&f.sandbox.kubeconfig)
        .args(["--context", "host"]);
    let mut drill = Background::spawn(cmd);
    let drill_pid = drill.pid();
    let mut controllers = Vec::new();
    support::wait_until("the drill started its two controllers", Duration::from_secs(120), || {
        controllers = children_of(drill_pid);
        controllers.len() == 2
    });
    let killed = Command::new("kill").args(["-KILL", &drill_pid.to_string()]).status().expect("kill runs");
    assert!(killed.success());
    support::wait_until("the drill died", support::DEADLINE, || drill.try_exit().is_some());
    support::wait_until("every controller of the drill stopped", Duration::from_secs(60), || {
        controllers.iter().all(|c| !running(*c))
    });
}

/// A member the controller refuses (here `west`, recreated to reach east's cluster: a
/// `DuplicateCluster`) is named in the report, with the controller's reason, rather than soaked
/// silently as one member fewer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_the_controller_refuses_is_named_in_the_report() {
    use kube::api::{DeleteParams, PostParams};
    use spanset_api::MemberCluster;
    let _one = ONE_AT_A_TIME.lock().await;
    let f = Federation::start(&["east", "west"]).await;
    let mcs: Api<MemberCluster> = Api::all(f.host.clone());
    let east = mcs.get("east").await.expect("east's MemberCluster");
    mcs.delete("west", &DeleteParams::default()).await.expect("west deleted (no controller holds it yet)");
    support::eventually("west gone", || async { mcs.get_opt("west").await.ok().flatten().is_none() }).await;
    // Same spec as east's, created after it (and named after it): west is the one refused.
    let west: MemberCluster =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "west"}, "spec": east.spec})).unwrap();
    mcs.create(&PostParams::default(), &west).await.expect("west recreated");
    let out = run(&f, &chaos_args(&f, "3", "10s", "1")).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("a JSON report ({e}): {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    println!("{}\n{stderr}", serde_json::to_string_pretty(&report).unwrap());
    assert_eq!(report["members"], serde_json::json!(["east", "west"]), "{report}");
    let refused = report["refusedMembers"].as_array().unwrap_or_else(|| panic!("refusedMembers: {report}"));
    assert_eq!(refused.len(), 1, "{report}");
    let line = refused[0].as_str().unwrap();
    assert!(line.starts_with("west (DuplicateCluster: ") && line.contains(r#"MemberCluster "east""#), "{line}");
    assert!(stderr.contains("member west refused by the controller (DuplicateCluster"), "{stderr}");
    assert_eq!(report["converged"], true, "the soak ran on east: {report}");
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["drill", "chaos", "--admin", "http://127.0.0.1:1", "--duration", "0s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--duration"), "{err}");
}

/// The long soak behind the figures in docs/failover.md, not part of the suite:
/// `SPANSET_CHAOS_DURATION=1h SPANSET_CHAOS_SEED=1 cargo test --test suite
/// drill_chaos::long_soak -- --ignored --nocapture` (prints the report).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a long soak (minutes to an hour): run by hand, see its doc comment"]
async fn long_soak() {
    let duration = std::env::var("SPANSET_CHAOS_DURATION").unwrap_or_else(|_| "20m".into());
    let seed = std::env::var("SPANSET_CHAOS_SEED").unwrap_or_else(|_| "1".into());
    let _one = ONE_AT_A_TIME.lock().await;
    let f = Federation::start(&["east", "west", "central"]).await;
    let mut args = chaos_args(&f, &seed, &duration, "2");
    args.retain(|a| a != "json" && a != "-o");
    let out = run(&f, &args).await;
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success(), "exit {:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    f.assert_ledger_clean();
}
