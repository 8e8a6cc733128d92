//! Stopping the pod a guard runs in. With `shareProcessNamespace` every container of the pod
//! is in one PID namespace, whose PID 1 is the pod's sandbox (the pause container): the guard
//! sees the pod's processes in `/proc` and signals them, and ending PID 1 ends the sandbox,
//! which the kubelet then recreates — running the init containers, hence a fresh guard, again.

use rustix::process::{Pid, Signal};

/// The inode of the machine's initial PID namespace (the kernel's `PROC_PID_INIT_INO`): a
/// guard that finds itself there is not in a pod, and must not signal the machine's processes.
const INITIAL_PID_NAMESPACE: &str = "pid:[4026531836]";

/// Why the guard cannot stop its pod's processes, if it cannot: outside a pod (the machine's
/// own PID namespace) it signals nothing.
pub fn unsafe_to_signal() -> Option<String> {
    match std::fs::read_link("/proc/self/ns/pid") {
        Ok(ns) if ns.to_string_lossy() == INITIAL_PID_NAMESPACE => {
            Some("this process is in the machine's own PID namespace, not a pod's: it signals nothing".into())
        }
        Ok(_) => None,
        Err(e) => Some(format!("cannot read /proc/self/ns/pid: {e}")),
    }
}

/// Why the guard could not stop its pod, if it could not: it is outside a pod, or PID 1 of its
/// own namespace (the pod does not set `shareProcessNamespace: true`, so its other containers
/// are out of its sight). `wait` then never lets the pod run.
pub fn cannot_stop() -> Option<String> {
    if rustix::process::getpid().as_raw_nonzero().get() == 1 {
        return Some(
            "this process is PID 1 of its namespace: the pod does not share its process namespace \
             (shareProcessNamespace: true), so its guard could not stop it"
                .into(),
        );
    }
    unsafe_to_signal()
}

/// The pod's other processes: every process in `/proc` but PID 1 (the sandbox) and this one.
pub fn others() -> Vec<i32> {
    let own = rustix::process::getpid().as_raw_nonzero().get();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut pids: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != 1 && pid != own)
        .collect();
    pids.sort_unstable();
    pids
}

/// Sends `signal` to each of `pids` (those already gone are skipped); how many it reached.
pub fn signal(pids: &[i32], signal: Signal) -> usize {
    pids.iter()
        .filter_map(|&pid| Pid::from_raw(pid))
        .filter(|&pid| rustix::process::kill_process(pid, signal).is_ok())
        .count()
}

/// SIGTERMs PID 1, the pod's sandbox (the pause container ends on SIGTERM), which ends every
/// process of the namespace, this one too.
pub fn end_sandbox() -> bool {
    signal(&[1], Signal::TERM) == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_other_processes_leave_out_pid_1_and_this_one() {
        let own = std::process::id() as i32;
        let others = others();
        assert!(!others.contains(&1) && !others.contains(&own), "{others:?}");
        assert_eq!(signal(&[], Signal::TERM), 0);
        // A child of this test is among them, and a signal 0 would reach it.
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        assert!(super::others().contains(&(child.id() as i32)));
        assert_eq!(signal(&[child.id() as i32], Signal::KILL), 1);
        child.wait().unwrap();
    }
}
