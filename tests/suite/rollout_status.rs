//! `spanset rollout status`, the real binary against the sandbox with a controller: it follows
//! a template change across three members to kubectl's complete line and exit 0; it ends a
//! stuck rollout with exit 1 and the pod, cluster and container state; `--timeout` gives up
//! with exit 1; `--watch=false` prints once; `OnDelete` has no rollout status, as with kubectl.
//! `kubectl get fsts` shows the rollout's UP-TO-DATE and AVAILABLE.

use std::process::Command;

use kube::api::{Patch, PatchParams};
use spanset_api::FederatedStatefulSet;
use support::{
    Background, Kubectl, eventually,
    federation::{Controller, Federation},
};

use crate::support;

const MEMBERS: [&str; 3] = ["east", "west", "central"];

async fn patch(f: &Federation, body: serde_json::Value) {
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("federation patched");
}

fn image(tag: &str) -> serde_json::Value {
    serde_json::json!({"spec": {"template": {"template": {"spec": {"containers": [
        {"name": "redis", "image": format!("redis:{tag}"), "ports": [{"name": "redis", "containerPort": 6379}]}]}}}}})
}

/// Three members, a controller, and a federation of 3 at weights 1:1:1, settled.
async fn settled(edit: impl FnOnce(&mut FederatedStatefulSet)) -> (Federation, Controller) {
    let f = Federation::start(&MEMBERS).await;
    let c = Controller::start(&f.sandbox, "controller");
    let mut fsts = spanset_api::example(&f.members);
    fsts.spec.replicas = 3;
    edit(&mut fsts);
    f.create(&fsts).await;
    f.wait_settled("redis", &[("east", 0, 1), ("west", 1, 1), ("central", 2, 1)], "settled").await;
    (f, c)
}

/// `spanset rollout status ARGS` against the sandbox's host.
fn rollout_status(f: &Federation, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spanset"));
    cmd.args(["rollout", "status"])
        .args(args)
        .arg("--kubeconfig")
        .arg(&f.sandbox.kubeconfig)
        .args(["--context", "host"]);
    cmd
}

/// Runs `spanset rollout status ARGS` to its end, off the async threads.
async fn rollout_status_once(f: &Federation, args: &[&str]) -> std::process::Output {
    let mut cmd = rollout_status(f, args);
    tokio::task::spawn_blocking(move || cmd.output().expect("spanset runs")).await.expect("spanset's thread")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_status_follows_a_template_change_to_the_complete_line_and_exits_zero() {
    // minReadySeconds makes each of the three steps last a few polls, so the waiting lines show.
    let (f, _c) = settled(|fsts| fsts.spec.template.min_ready_seconds = Some(2)).await;
    patch(&f, image("8")).await;
    // Its lines as they come (the process is killed if the test fails before it exits).
    let mut watch = Background::spawn(rollout_status(&f, &["default/redis"]));
    let status = tokio::task::spawn_blocking(move || {
        let s = watch.wait_exit();
        (s, watch.lines())
    })
    .await
    .unwrap();
    let (exit, lines) = status;
    let s = f.status("redis").await;
    let revision = s.update_revision.clone().expect("an update revision");
    assert!(exit.success(), "exit {exit:?}; output: {lines:#?}");
    assert_eq!(
        lines.last().map(String::as_str),
        Some(format!("federation rolling update complete 3 pods at revision {revision}...").as_str()),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("Waiting for ") || l.starts_with("waiting for federation rolling update")),
        "kubectl's waiting lines before the complete one: {lines:#?}"
    );
    // spanset's extra: the pod waited on, with its cluster, under a waiting line.
    assert!(
        lines.iter().any(|l| l.starts_with("  ") && l.contains("updating: redis-") && l.contains(" in ")),
        "the Updating condition's message names the pod waited on: {lines:#?}"
    );
    assert_eq!(s.current_revision, s.update_revision);
    // Once complete, `NAME -n NS --watch=false` says so at once.
    let out = rollout_status_once(&f, &["redis", "-n", "default", "--watch=false"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        format!("federation rolling update complete 3 pods at revision {revision}...")
    );
    // `kubectl get fsts` prints the rollout's columns from the controller's status.
    if let Some(k) = Kubectl::new(33, &f.sandbox) {
        let mut k = k;
        k.context = Some("host".into());
        let table = k.ok(&["get", "fsts"]);
        let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(header, ["NAME", "READY", "CLUSTERS", "MOVING", "UP-TO-DATE", "AVAILABLE", "AGE"], "{table}");
        let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(&row[..6], ["redis", "3/3", "3", "0", "3", "3"], "{table}");
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_rollout_exits_one_naming_the_pod_its_cluster_and_its_container_state() {
    // Parallel, as in tests/suite/rollout.rs: a fixed template replaces the broken pod by itself.
    let (f, _c) = settled(|fsts| fsts.spec.template.pod_management_policy = Some("Parallel".into())).await;
    patch(&f, image("8-doesnotexist")).await;
    let out = rollout_status_once(&f, &["default/redis", "--timeout", "90s"]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stderr.contains("rollout of federatedstatefulset default/redis is stuck"), "{stderr}");
    assert!(stderr.contains("redis-2 in central is not Ready"), "the pod and its cluster: {stderr}");
    assert!(stderr.contains("ErrImagePull") || stderr.contains("ImagePullBackOff"), "the container's state: {stderr}");
    // Fixed, it rolls on, and the same command follows it to the end.
    patch(&f, image("8")).await;
    let out = rollout_status_once(&f, &["default/redis", "--timeout", "90s"]).await;
    assert!(out.status.success(), "stdout: {}\nstderr: {}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("federation rolling update complete 3 pods"), "{}", text(&out.stdout));
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_that_cannot_finish_times_out_with_exit_one() {
    let (f, _c) = settled(|_| {}).await;
    // redis-0 (old template) is unready for its own reasons: with maxUnavailable 1 no pod may be
    // replaced, so the rollout waits (not stuck: nothing of it is broken) and cannot finish.
    f.sandbox.ctl_ok(&["pod-ready", "east", "redis-0", "false"]);
    eventually("redis-0 counted unready", || async { f.status("redis").await.ready_replicas == Some(2) }).await;
    patch(&f, image("8")).await;
    eventually("the new template observed, the rollout waiting on redis-0", || async {
        let fsts = f.api().get("redis").await.expect("federation read");
        let s = fsts.status.unwrap_or_default();
        s.observed_generation == fsts.metadata.generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Updating" && c.status == "True" && c.message.contains("redis-0 in east"))
    })
    .await;
    let out = rollout_status_once(&f, &["default/redis", "--timeout", "1s"]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "stdout: {stdout}\nstderr: {stderr}");
    assert!(
        stderr.contains("timed out after 1s waiting for the rollout of federatedstatefulset default/redis"),
        "{stderr}"
    );
    assert!(stdout.starts_with("Waiting for 1 pods to be ready..."), "{stdout}");
    assert!(stdout.contains("redis-0 in east"), "what it waits on: {stdout}");
    // --watch=false prints the state once and exits 0, as kubectl does.
    let out = rollout_status_once(&f, &["redis", "-n", "default", "--watch=false"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("Waiting for 1 pods to be ready..."), "{}", text(&out.stdout));
    // OnDelete has no rollout status, as with kubectl.
    patch(&f, serde_json::json!({"spec": {"template": {"updateStrategy": {"type": "OnDelete"}}}})).await;
    let out = rollout_status_once(&f, &["default/redis"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("rollout status is only available for RollingUpdate strategy type"),
        "{}",
        text(&out.stderr)
    );
    // Bad input: one line, exit 2; nothing read or written.
    let out = rollout_status_once(&f, &["default/redis", "--timeout", "soon"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--timeout"), "{}", text(&out.stderr));
    let out = rollout_status_once(&f, &["default/nope"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("federatedstatefulset default/nope not found"), "{}", text(&out.stderr));
    f.sandbox.ctl_ok(&["pod-ready", "east", "redis-0", "auto"]);
    f.assert_ledger_clean();
}

/// A healthy rollout never says it is stuck: no `RolloutStuck` Event, so no moment at which
/// `Updating` said so. Each new pod waits a moment for spanset's own identity gate with
/// `PodScheduled=False` (`SchedulingGated`); before 6646cad that read as "not scheduled", a
/// stuck state, and every step of every rollout emitted a false RolloutStuck Warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_rollout_never_reports_itself_stuck() {
    let (f, _c) = settled(|_| {}).await;
    patch(&f, image("8")).await;
    let out = rollout_status_once(&f, &["default/redis", "--timeout", "90s"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stuck: Vec<String> =
        f.events("redis").await.into_iter().filter(|(_, r, _)| r == "RolloutStuck").map(|(_, _, m)| m).collect();
    assert!(stuck.is_empty(), "a healthy rollout reported itself stuck: {stuck:#?}");
    f.assert_ledger_clean();
}
