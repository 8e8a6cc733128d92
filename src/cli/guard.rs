//! `spanset guard wait|watch`: the guard of a pod of a federation with pod leases (see
//! [`crate::guard`]), run by the pod itself — `wait` as its first init container, `watch` as a
//! native sidecar, both with an `emptyDir` for the state file that every container of the pod
//! mounts.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Subcommand};
use spanset_api::pod_name::statefulset_pod;
use spanset_controller::pod_lease::Timing;
use spanset_plan::Ordinal;

use crate::guard::{
    lease::LeaseRef,
    run::{self, Settings},
};

/// `spanset guard`.
#[derive(Debug, Args)]
pub struct GuardArgs {
    /// Which half of the guard.
    #[command(subcommand)]
    pub command: GuardCommand,
}

/// The guard's two halves.
#[derive(Debug, Subcommand)]
pub enum GuardCommand {
    /// Put the containers' first process (`spanset-guard-exec`) in place, wait until the
    /// member's pod Lease, freshly extended, names this pod's ordinal, post that in the state
    /// file and exit 0 (the pod's first init container). Exits 1, the reason in its termination
    /// message, when it cannot, or when the Lease stays unreadable for a whole lease.
    Wait(GuardFlags),
    /// Take the guard over from the state file, keep polling the Lease, and post after every
    /// poll what the guard concludes (the deadline; a stop, at once when the lease stops naming
    /// the ordinal; a release), which every container's first process acts on (a native
    /// sidecar).
    Watch(GuardFlags),
}

/// What both halves are told.
#[derive(Debug, Args)]
pub struct GuardFlags {
    /// The member's pod Lease, NAMESPACE/NAME (`<federation>-pods` in the federation's namespace).
    #[arg(long, env = "SPANSET_GUARD_LEASE", value_name = "NAMESPACE/NAME")]
    pub lease: String,
    /// The pod's ordinal; by default the trailing `-N` of the pod's name (POD_NAME, from the
    /// downward API, else the hostname).
    #[arg(long, env = "SPANSET_GUARD_ORDINAL")]
    pub ordinal: Option<Ordinal>,
    /// The lease's length L in seconds (the federation's spec.failover.podLease.seconds).
    #[arg(long, env = "SPANSET_GUARD_LEASE_SECONDS", value_name = "L")]
    pub lease_seconds: u64,
    /// The bound on the node clock's rate error, as a fraction (spanset's --pod-lease-drift).
    #[arg(long, env = "SPANSET_GUARD_DRIFT", default_value_t = 0.01)]
    pub drift: f64,
    /// The pod's stop budget in seconds (its terminationGracePeriodSeconds): SIGTERM comes that
    /// long (at most L/3) before the deadline.
    #[arg(long, env = "SPANSET_GUARD_GRACE", default_value_t = 30, value_name = "SECONDS")]
    pub grace: u64,
    /// The guard's state file, in an emptyDir every container of the pod mounts.
    #[arg(long, env = "SPANSET_GUARD_STATE", value_name = "FILE")]
    pub state: PathBuf,
    /// The uid of the federation the Lease must be written for: a Lease written for another
    /// one (the federation deleted and made again) names nothing for this pod.
    #[arg(long, env = "SPANSET_GUARD_FEDERATION_UID", value_name = "UID")]
    pub federation_uid: Option<String>,
    /// Where `wait` copies `spanset-guard-exec` (from beside this binary) for the pod's other
    /// containers to run (an emptyDir they mount).
    #[arg(long, env = "SPANSET_GUARD_EXEC_DIR", value_name = "DIR")]
    pub exec_dir: Option<PathBuf>,
    /// Where `wait` writes why it failed (the container's terminationMessagePath).
    #[arg(long, default_value = "/dev/termination-log", value_name = "FILE")]
    pub termination_log: PathBuf,
}

/// The ordinal a pod's name or hostname gives, if either is a StatefulSet pod's.
fn own_ordinal() -> Result<Ordinal, String> {
    let name = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_string()))
        .unwrap_or_default();
    statefulset_pod(&name)
        .map(|(_, ordinal)| ordinal)
        .ok_or_else(|| format!("--ordinal not given and the pod's name {name:?} does not end in -N"))
}

/// The guard's settings from its flags, or what is wrong with them.
pub fn settings(flags: &GuardFlags) -> Result<Settings, String> {
    let lease: LeaseRef = flags.lease.parse()?;
    let ordinal = match flags.ordinal {
        Some(o) => o,
        None => own_ordinal()?,
    };
    // W (how late a write spanset gave up on may land) only bounds spanset's own measure of
    // the lease; a guard counts from its polls, so any value does.
    let write_deadline = Duration::ZERO;
    let timing = Timing::new(
        Duration::from_secs(flags.lease_seconds),
        flags.drift,
        write_deadline,
        Duration::from_secs(flags.grace),
    )
    .map_err(|e| {
        e.replace("spec.failover.podLease.seconds", "--lease-seconds").replace("--pod-lease-drift", "--drift")
    })?;
    Ok(Settings {
        lease,
        federation_uid: flags.federation_uid.clone().filter(|u| !u.is_empty()),
        ordinal,
        timing,
        state: flags.state.clone(),
        exec_dir: flags.exec_dir.clone(),
        termination_log: flags.termination_log.clone(),
    })
}

/// Runs `spanset guard`; its exit code (2 for bad flags).
pub fn run(args: GuardArgs) -> i32 {
    let flags = match &args.command {
        GuardCommand::Wait(f) | GuardCommand::Watch(f) => f,
    };
    let settings = match settings(flags) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("spanset: guard: {e}");
            return 2;
        }
    };
    let watch = matches!(args.command, GuardCommand::Watch(_));
    // One thread: a guard polls once per P and writes a small file.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(async move { if watch { run::watch(settings).await } else { run::wait(settings).await } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(lease: &str, seconds: u64, drift: f64) -> GuardFlags {
        GuardFlags {
            lease: lease.into(),
            ordinal: Some(3),
            lease_seconds: seconds,
            drift,
            grace: 30,
            state: "/w/guard".into(),
            federation_uid: Some("u1".into()),
            exec_dir: None,
            termination_log: "/dev/termination-log".into(),
        }
    }

    #[test]
    fn flags_make_the_timing_and_errors_name_the_flag() {
        let s = settings(&flags("ns/fed-pods", 20, 0.01)).unwrap();
        assert_eq!((s.ordinal, s.lease.name.as_str()), (3, "fed-pods"));
        assert_eq!(s.timing.poll, Duration::from_secs(2));
        assert!(settings(&flags("fed-pods", 20, 0.01)).unwrap_err().contains("--lease"));
        assert!(settings(&flags("ns/fed-pods", 5, 0.01)).unwrap_err().contains("--lease-seconds"));
        assert!(settings(&flags("ns/fed-pods", 20, 0.9)).unwrap_err().contains("--drift"));
    }
}
