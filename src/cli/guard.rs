//! `spanset guard wait|watch`: the guard of a pod of a federation with pod leases (see
//! [`crate::guard`]), run by the pod itself — `wait` as its first init container, `watch` as a
//! native sidecar, both with an `emptyDir` for the hand-over file and the pod sharing its
//! process namespace.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Subcommand};

use crate::{
    controller::pod_lease::Timing,
    guard::{
        lease::LeaseRef,
        run::{self, Settings},
    },
    plan::Ordinal,
    pod_name::statefulset_pod,
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
    /// Wait until the member's pod Lease, freshly extended, names this pod's ordinal; then hand
    /// the guard to `watch` through the state file and exit 0 (the pod's first init container).
    Wait(GuardFlags),
    /// Take the guard over from `wait` and stop the pod's other processes (SIGTERM, then SIGKILL
    /// and the end of its sandbox) before the lease can lapse, or at once when the lease stops
    /// naming the ordinal (a native sidecar of a pod with shareProcessNamespace).
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
    /// The hand-over file from `wait` to `watch`, in an emptyDir both mount.
    #[arg(long, env = "SPANSET_GUARD_STATE", value_name = "FILE")]
    pub state: PathBuf,
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
    Ok(Settings { lease, ordinal, timing, state: flags.state.clone() })
}

/// Runs `spanset guard`; its exit code (2 for bad flags).
pub fn run(args: GuardArgs) -> i32 {
    let (flags, watch) = match &args.command {
        GuardCommand::Wait(f) => (f, false),
        GuardCommand::Watch(f) => (f, true),
    };
    let settings = match settings(flags) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("spanset: guard: {e}");
            return 2;
        }
    };
    // One thread: a guard polls once per P and signals a few processes.
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
