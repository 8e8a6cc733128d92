//! The first process of every container of a guarded pod but the guard's own. spanset puts it
//! in front of each container's command (`spanset-guard-exec --state FILE -- COMMAND…`); it is
//! PID 1 of the container's PID namespace, starts the command as its child when the guard's
//! state file lets it, passes on the signals the container gets, reaps what the command leaves
//! behind, and stops every process of the container by the deadline the watch posted
//! ([`crate::decision`] decides): it kills each one, and exits if one survives (another user's,
//! which it may not signal), which makes the kernel end the rest. Then it waits for a fresh
//! lease and starts the command again.
//!
//! It refuses to start a command it could not stop: when it is not PID 1 (the pod shares one
//! PID namespace among its containers, or the node's), its exit would leave the command
//! running.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use rustix::process::{Pid, Signal, WaitOptions};
use tokio::signal::unix::{SignalKind, signal};

use crate::{
    boot,
    decision::{CHECK, Exec, KILL_MARGIN, Step},
    state::GuardState,
};

/// What `spanset-guard-exec` is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecArgs {
    /// The guard's state file.
    pub state: PathBuf,
    /// The container's command and its arguments.
    pub command: Vec<String>,
}

/// The usage lines.
pub const USAGE: &str =
    "usage: spanset-guard-exec --state FILE -- COMMAND [ARG…] | spanset-guard-exec ready --state FILE --within-ms MS";

/// `spanset-guard-exec ready`: the watch's probe (see [`crate::state::ready`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyArgs {
    /// The guard's state file.
    pub state: PathBuf,
    /// How recent the watch's latest read must be.
    pub within: std::time::Duration,
}

/// Reads the arguments of `ready` (after the word); an error says what is wrong.
pub fn parse_ready(args: &[String]) -> Result<ReadyArgs, String> {
    let (mut state, mut within) = (None, None);
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        let (flag, value) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let value = value.or_else(|| rest.next().cloned()).ok_or_else(|| format!("{flag} needs a value; {USAGE}"))?;
        match flag {
            "--state" => state = Some(PathBuf::from(value)),
            "--within-ms" => {
                let ms: u64 = value.parse().map_err(|e| format!("--within-ms {value:?}: {e}"))?;
                within = Some(std::time::Duration::from_millis(ms));
            }
            other => return Err(format!("unknown argument {other:?}; {USAGE}")),
        }
    }
    Ok(ReadyArgs {
        state: state.ok_or_else(|| format!("--state is required; {USAGE}"))?,
        within: within.ok_or_else(|| format!("--within-ms is required; {USAGE}"))?,
    })
}

/// Runs `ready`: prints why, and answers 0 while the watch reads its Lease, 1 otherwise.
fn ready(args: &ReadyArgs) -> i32 {
    let verdict = boot::boot_id()
        .and_then(|id| GuardState::read_any(&args.state, &id))
        .and_then(|s| crate::state::ready(&s, boot::now(), args.within));
    match verdict {
        Ok(fine) => {
            println!("{fine}");
            0
        }
        Err(why) => {
            println!("{why}");
            1
        }
    }
}

/// Where a container's termination message goes by default (`terminationMessagePath`).
const TERMINATION_LOG: &str = "/dev/termination-log";

/// Reads the arguments (after the program's name); an error says what is wrong.
pub fn parse(args: &[String]) -> Result<ExecArgs, String> {
    let mut state = None;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--" => break,
            "--state" => state = rest.next().map(PathBuf::from),
            s if s.starts_with("--state=") => state = Some(PathBuf::from(&s["--state=".len()..])),
            other => return Err(format!("unknown argument {other:?}; {USAGE}")),
        }
    }
    let state = state.ok_or_else(|| format!("--state is required; {USAGE}"))?;
    let command: Vec<String> = rest.cloned().collect();
    if command.is_empty() {
        return Err(format!("no command after --; {USAGE}"));
    }
    Ok(ExecArgs { state, command })
}

/// The program: parses its arguments and runs; the exit code.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("ready") {
        return match parse_ready(&args[1..]) {
            Ok(a) => ready(&a),
            Err(e) => {
                eprintln!("spanset-guard-exec: {e}");
                2
            }
        };
    }
    let parsed = match parse(&args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("spanset-guard-exec: {e}");
            return 2;
        }
    };
    // One thread: the command is forked from it, and the state is read between signals.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => return stop(None, &format!("cannot start: {e}")),
    };
    runtime.block_on(run(parsed))
}

/// Why this process may not start a command, if it may not: it is not PID 1 of its namespace.
fn cannot_end_the_container() -> Option<String> {
    let pid = rustix::process::getpid().as_raw_nonzero().get();
    (pid != 1).then(|| {
        format!(
            "this process is PID {pid}, not 1: the container shares a PID namespace (shareProcessNamespace or \
             hostPID), so ending it would not end its command; the command does not start"
        )
    })
}

/// Logs a line.
fn log(line: &str) {
    eprintln!("spanset-guard-exec: {line}");
}

/// Ends the container: the command SIGKILLed (if started), the reason logged and written as the
/// termination message; answers the exit code (the kernel ends the rest of the namespace).
fn stop(child: Option<Pid>, why: &str) -> i32 {
    if let Some(pid) = child {
        let _ = rustix::process::kill_process(pid, Signal::KILL);
    }
    log(&format!("{why}: the container stops"));
    let _ = std::fs::write(TERMINATION_LOG, format!("spanset guard: {why}"));
    1
}

/// Every process this one sees but itself (its PID namespace's, through the container's /proc).
fn others() -> Vec<Pid> {
    let own = rustix::process::getpid();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(Pid::from_raw)
        .filter(|&p| p != own)
        .collect()
}

/// How long the processes SIGKILLed get to be gone (and reaped) before this process exits.
const GONE_WITHIN: Duration = Duration::from_secs(2);

/// Stops every other process of the container: SIGKILLs each, reaps them, and answers whether
/// none is left. One it may not signal, or that outlives [`GONE_WITHIN`], is not stopped.
fn stop_all() -> bool {
    let until = Instant::now() + GONE_WITHIN;
    loop {
        let left = others();
        if left.is_empty() {
            return true;
        }
        for pid in &left {
            let _ = rustix::process::kill_process(*pid, Signal::KILL);
        }
        while let Ok(Some(_)) = rustix::process::wait(WaitOptions::NOHANG) {}
        if Instant::now() >= until {
            return others().is_empty();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The exit code a container shows for a command that ended with `status`.
fn code_of(status: rustix::process::WaitStatus) -> i32 {
    status.exit_status().or_else(|| status.terminating_signal().map(|s| 128 + s)).unwrap_or(1)
}

async fn run(args: ExecArgs) -> i32 {
    if let Some(why) = cannot_end_the_container() {
        return stop(None, &why);
    }
    let boot_id = match boot::boot_id() {
        Ok(id) => id,
        Err(e) => return stop(None, &e),
    };
    let kinds = [
        SignalKind::terminate(),
        SignalKind::interrupt(),
        SignalKind::hangup(),
        SignalKind::quit(),
        SignalKind::user_defined1(),
        SignalKind::user_defined2(),
        SignalKind::window_change(),
    ];
    let mut forwarded = Vec::new();
    for k in kinds {
        match signal(k) {
            Ok(s) => forwarded.push((k, s)),
            Err(e) => return stop(None, &format!("cannot handle signal {}: {e}", k.as_raw_value())),
        }
    }
    let [(k0, s0), (k1, s1), (k2, s2), (k3, s3), (k4, s4), (k5, s5), (k6, s6)] = &mut forwarded[..] else {
        unreachable!("seven signals");
    };
    let mut children = match signal(SignalKind::child()) {
        Ok(s) => s,
        Err(e) => return stop(None, &format!("cannot handle SIGCHLD: {e}")),
    };
    let mut exec = Exec::new(KILL_MARGIN, true);
    let mut child: Option<Pid> = None;
    let mut said = String::new();
    let mut unreadable = String::new();
    loop {
        // What the watch posted: a state that cannot be read changes nothing.
        match GuardState::read_any(&args.state, &boot_id) {
            Ok(s) => {
                unreadable.clear();
                exec.read(Some(s.posted()));
            }
            Err(e) => {
                if unreadable != e {
                    log(&format!("{e} (the latest deadline read stands)"));
                    unreadable = e;
                }
                exec.read(None);
            }
        }
        match exec.step(boot::now()) {
            Step::Wait(why) => {
                if said != why {
                    log(&format!("waiting: {why}"));
                    said = why;
                }
            }
            Step::Start => {
                let (program, rest) = args.command.split_first().expect("parse keeps a command");
                match std::process::Command::new(program).args(rest).spawn() {
                    Ok(c) => {
                        let pid = Pid::from_raw(c.id() as i32);
                        // Reaped below with every other child: the handle is not waited on.
                        drop(c);
                        exec.started();
                        child = pid;
                        log(&format!("the lease lets the pod run: started {program}"));
                    }
                    Err(e) => return stop(None, &format!("cannot start {program}: {e}")),
                }
            }
            Step::Run => {}
            Step::Term => {
                if let Some(pid) = child {
                    log("the lease's deadline is near with no extension: SIGTERM");
                    if let Err(e) = rustix::process::kill_process(pid, Signal::TERM) {
                        // Refused (another user): it cannot be asked, so it stops now.
                        log(&format!("SIGTERM refused ({e})"));
                        if !stop_all() {
                            return stop(child, "a process of the container outlived SIGKILL");
                        }
                        exec.stopped();
                        child = None;
                        continue;
                    }
                }
                exec.termed();
            }
            Step::Stop(why) => {
                if !stop_all() {
                    return stop(child, &format!("{why}, and a process of the container outlived SIGKILL"));
                }
                log(&format!("{why}: the container's processes were stopped; waiting for a fresh extension"));
                let _ = std::fs::write(TERMINATION_LOG, format!("spanset guard: {why}"));
                exec.stopped();
                child = None;
                said.clear();
            }
        }
        // Waits for a signal or the next check.
        let got: Option<SignalKind> = tokio::select! {
            _ = s0.recv() => Some(*k0),
            _ = s1.recv() => Some(*k1),
            _ = s2.recv() => Some(*k2),
            _ = s3.recv() => Some(*k3),
            _ = s4.recv() => Some(*k4),
            _ = s5.recv() => Some(*k5),
            _ = s6.recv() => Some(*k6),
            _ = children.recv() => None,
            _ = tokio::time::sleep(CHECK) => None,
        };
        if let Some(k) = got {
            match child {
                Some(pid) => {
                    if let Some(sig) = Signal::from_named_raw(k.as_raw_value()) {
                        let _ = rustix::process::kill_process(pid, sig);
                    }
                }
                // Asked to stop before the command started: nothing to pass it to.
                None if k == SignalKind::terminate() || k == SignalKind::interrupt() => {
                    return 128 + k.as_raw_value();
                }
                None => {}
            }
        }
        // Reaps every child that ended (as PID 1 it inherits the command's orphans). The
        // command's own end is the container's; its end after this process's SIGTERM is a stop.
        while let Ok(Some((pid, status))) = rustix::process::wait(WaitOptions::NOHANG) {
            if Some(pid) != child {
                continue;
            }
            let code = code_of(status);
            if !exec.was_termed() {
                log(&format!("the command ended ({code})"));
                return code;
            }
            log(&format!("the command ended ({code}) after the guard's SIGTERM"));
            if !stop_all() {
                return stop(None, "a process of the container outlived SIGKILL");
            }
            exec.stopped();
            child = None;
            said.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_arguments_are_the_state_then_the_command() {
        let a = parse(&args(&["--state", "/g/state", "--", "redis-server", "--port", "6379"])).unwrap();
        assert_eq!(a.state, PathBuf::from("/g/state"));
        assert_eq!(a.command, ["redis-server", "--port", "6379"]);
        let a = parse(&args(&["--state=/g/s", "--", "sh", "-c", "x"])).unwrap();
        assert_eq!(a.state, PathBuf::from("/g/s"));
        assert!(parse(&args(&["--", "sh"])).unwrap_err().contains("--state"));
        assert!(parse(&args(&["--state", "/g"])).unwrap_err().contains("no command"));
        assert!(parse(&args(&["--verbose", "--", "sh"])).unwrap_err().contains("--verbose"));
    }

    #[test]
    fn the_probe_takes_the_state_and_how_fresh() {
        let r = parse_ready(&args(&["--state", "/g/state", "--within-ms=3000"])).unwrap();
        assert_eq!((r.state, r.within), (PathBuf::from("/g/state"), std::time::Duration::from_secs(3)));
        assert!(parse_ready(&args(&["--state", "/g"])).unwrap_err().contains("--within-ms"));
        assert!(parse_ready(&args(&["--within-ms", "x", "--state", "/g"])).unwrap_err().contains("--within-ms"));
    }

    #[test]
    fn outside_a_pid_namespace_of_its_own_it_refuses() {
        // This test process is not PID 1.
        assert!(cannot_end_the_container().unwrap().contains("not 1"));
    }

    #[test]
    fn the_others_are_every_process_but_this_one() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = Pid::from_raw(child.id() as i32).unwrap();
        let seen = others();
        assert!(seen.contains(&pid) && !seen.contains(&rustix::process::getpid()));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
