//! `spanset-guard-exec`, the first process of every guarded container, on real processes: run as
//! PID 1 of a PID namespace of its own (`unshare --pid`), as a container's is, reading a state
//! file this test writes as the pod's watch would. Judged at every look by the processes alive:
//! the command (and what it forks) runs only while the posted lease lets it, whatever the watch
//! does, and is gone by the posted deadline.

use std::{
    io::Read,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use spanset::guard::{
    boot,
    state::{GuardState, nanos},
};
use spanset_controller::pod_lease::exec::Phase;

use crate::{
    processes::live_processes_with,
    support::{DEADLINE, program},
};

/// The state the watch posts: `phase`, with a deadline `left` from now (SIGTERM 2 s before it).
fn post(path: &Path, epoch: u64, phase: Phase, left: Duration) {
    let now = boot::now();
    let valid = phase == Phase::Valid;
    let deadline = now + left;
    GuardState {
        boot_id: boot::boot_id().expect("a boot id"),
        lease: "default/cache-pods".into(),
        ordinal: 2,
        epoch,
        phase,
        valid_from_nanos: valid.then(|| nanos(now)),
        last_sent_nanos: valid.then(|| nanos(now)),
        extension: valid.then_some(epoch + 1),
        deadline_nanos: valid.then(|| nanos(deadline)),
        term_nanos: valid.then(|| nanos(deadline.saturating_sub(Duration::from_secs(2)))),
        last_error: None,
    }
    .write(path)
    .expect("the state is written");
}

/// `spanset-guard-exec` as PID 1 of a new PID namespace (with its own /proc, as a container
/// has), running a shell that forks a second one: both carry `marker`.
fn first_process(state: &Path, marker: &str) -> Child {
    let script = "(while :; do sleep 0.2; done) & while :; do sleep 0.2; done";
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child"]);
    if !rustix::process::geteuid().is_root() {
        cmd.args(["--user", "--map-root-user"]);
    }
    cmd.arg(env!("CARGO_BIN_EXE_spanset-guard-exec"))
        .arg("--state")
        .arg(state)
        .args(["--", "sh", "-c", script, marker])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd.spawn().expect("unshare starts")
}

/// Whether a process of the command runs (the shells, not the first process itself).
fn command_runs(marker: &str) -> bool {
    live_processes_with(marker).into_iter().any(|pid| {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        !exe.to_string_lossy().ends_with("spanset-guard-exec") && !exe.to_string_lossy().ends_with("unshare")
    })
}

/// Waits until `cond`, asserting `judge` at every look.
fn until(what: &str, mut judge: impl FnMut(), mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        judge();
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_first_process_runs_its_command_only_under_a_posted_lease_and_stops_it_by_the_deadline() {
    if program("unshare", "util-linux").is_none() || program("sh", "dash").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let marker = format!("guard-exec-test-{}", std::process::id());
    let mut first = first_process(&state, &marker);

    // Nothing posted yet, then a watch still waiting: the command does not start.
    let quiet = Instant::now();
    until(
        "a while with nothing posted",
        || assert!(!command_runs(&marker)),
        || quiet.elapsed() > Duration::from_secs(1),
    );
    post(&state, 0, Phase::Waiting, Duration::ZERO);
    let quiet = Instant::now();
    until("a while waiting", || assert!(!command_runs(&marker)), || quiet.elapsed() > Duration::from_secs(1));

    // A valid lease for 6 s: the command runs. Nothing is posted after that (the watch has
    // stopped): the command and what it forked are gone by the deadline, the first process
    // stays, waiting.
    post(&state, 0, Phase::Valid, Duration::from_secs(6));
    let deadline = Instant::now() + Duration::from_secs(6);
    until("the command runs", || {}, || command_runs(&marker));
    until(
        "the command is stopped",
        || assert!(Instant::now() < deadline, "the command ran past the deadline"),
        || !command_runs(&marker),
    );
    println!("stopped {:?} before the deadline", deadline.saturating_duration_since(Instant::now()));
    assert!(first.try_wait().unwrap().is_none(), "the first process stays, waiting for a fresh lease");

    // A fresh lease: the command runs again; a stop the first process did not see (a new
    // epoch, valid again) stops it at once.
    post(&state, 0, Phase::Valid, Duration::from_secs(60));
    until("the command runs again", || {}, || command_runs(&marker));
    let missed = Instant::now();
    post(&state, 1, Phase::Valid, Duration::from_secs(60));
    until("the command is stopped for the missed stop", || {}, || !command_runs(&marker));
    assert!(missed.elapsed() < Duration::from_secs(5), "at once, not at the deadline: {:?}", missed.elapsed());
    until("the command runs in the new epoch", || {}, || command_runs(&marker));

    // Released: past any deadline, the command runs on.
    post(&state, 1, Phase::Released, Duration::ZERO);
    let released = Instant::now();
    until(
        "well past the last deadline",
        || assert!(command_runs(&marker), "a released command stopped"),
        || released.elapsed() > Duration::from_secs(3),
    );
    first.kill().unwrap();
    first.wait().unwrap();
    until("the namespace is gone with its first process", || {}, || live_processes_with(&marker).is_empty());
}

#[test]
fn the_first_process_refuses_a_command_it_could_not_stop() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    post(&state, 0, Phase::Valid, Duration::from_secs(60));
    let marker = format!("guard-exec-shared-{}", std::process::id());
    // Not PID 1 (no namespace of its own: as in a pod that shares its process namespace).
    let mut child = Command::new(env!("CARGO_BIN_EXE_spanset-guard-exec"))
        .arg("--state")
        .arg(&state)
        .args(["--", "sh", "-c", "sleep 1000", &marker])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("not 1") && err.contains("does not start"), "{err}");
    assert!(live_processes_with(&marker).is_empty(), "the command never started");
}

/// The sandbox names the guard's first process itself (it depends on no crate of spanset's), so
/// that its image of spanset's has `/spanset-guard-exec` where the `Dockerfile` puts it: the name
/// is the guard's own.
#[test]
fn the_sandbox_names_the_guard_s_first_process_as_the_guard_does() {
    assert_eq!(spanset_sim::cluster::processes::spec::GUARD_EXEC, spanset_guard_exec::PROGRAM);
}
