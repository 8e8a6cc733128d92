//! The first process of every guarded container (`spanset-guard-exec`), as a pure decision: it
//! starts the container's own command only under what the pod's watch posted in the guard's
//! state file, and stops it by the posted deadline whatever became of the watch.
//!
//! Why a second enforcer beside the watch: the watch is one container among the pod's, and a
//! container can crash, be OOM-killed, wait out CrashLoopBackOff, be stopped (SIGSTOP) or start
//! late; a watch that is not running stops nothing. The first process of a container is PID 1
//! of the container's own PID namespace: it sees every process of the container (its command,
//! what that forks, what `kubectl exec` starts there), and when it ends the kernel kills every
//! one of them, whatever their user. So it stops the container's processes by killing them, and
//! when one of them cannot be killed (another user's), by exiting. It reads a file on the node
//! (no API, no network), so the only thing that can keep it from the deadline is its own death,
//! which is the stop.
//!
//! - It starts the command only while the watch posts a valid lease whose SIGTERM instant has
//!   not come (`Valid`), or a released one (`Released`).
//! - It stops the command and every other process of the container at `deadline − K`, checked
//!   at least every [`CHECK`], from the latest deadline it read: a file it cannot read, or one
//!   not written since, leaves the deadline standing.
//! - It stops them at once when the watch posts `Stopped`, `Waiting`, or a new epoch (the watch
//!   stopped the pod since this process started the command: an epoch it did not see is a stop
//!   it missed).
//! - It SIGTERMs the command at the posted SIGTERM instant, once.
//! - Once stopped it waits, as at its start, for a fresh valid lease, and starts the command
//!   again: the container stays, so that no restart back-off delays the pod's return, and what
//!   the container runs meanwhile is only this process.
//! - `Released` is for good: spanset let the federation go, nothing extends the lease again.

use std::time::Duration;

/// K: how long before its deadline a guard ends its pod, for the processes to be gone by it.
pub const KILL_MARGIN: Duration = Duration::from_secs(1);

/// How often the first process reads the state file: far within the guard's kill margin K, so
/// that it exits before the deadline.
pub const CHECK: Duration = Duration::from_millis(100);

/// What the watch says of the pod's lease, in the state file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Phase {
    /// No valid lease yet (a fresh guard waiting for an extension naming the ordinal).
    Waiting,
    /// A valid lease until the posted deadline.
    Valid,
    /// The watch stopped the pod (the lease no longer names the ordinal, or its deadline came).
    Stopped,
    /// The lease was released: the pod runs on with no deadline.
    Released,
}

/// What one read of the state file gave the first process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Posted {
    /// Incremented by the watch each time it stops the pod.
    pub epoch: u64,
    /// What the watch says.
    pub phase: Phase,
    /// With [`Phase::Valid`]: the guard's deadline, on the node's boot clock.
    pub deadline: Option<Duration>,
    /// With [`Phase::Valid`]: when the command is to be asked to stop (the deadline less the
    /// pod's stop budget).
    pub term_at: Option<Duration>,
}

/// What the first process does now.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Step {
    /// Do not start the command yet; why, for the log.
    Wait(String),
    /// Start the command now.
    Start,
    /// The command may run on.
    Run,
    /// Ask the command to stop (SIGTERM), once.
    Term,
    /// Stop every other process of the container now; why. Then [`Exec::stopped`].
    Stop(String),
}

/// The first process of one container.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Exec {
    /// K: how long before the deadline it exits (the guard's kill margin).
    kill: Duration,
    /// Whether it ends the container by the posted deadline (always, but in the model checker's
    /// planted bug, where it obeys only what a running watch posts).
    enforce_deadline: bool,
    /// The latest state read.
    known: Option<Posted>,
    /// The epoch the command was started in.
    started: Option<u64>,
    termed: bool,
    released: bool,
}

impl Exec {
    /// A first process that has read nothing and started nothing, exiting `kill` before a
    /// deadline (unless `enforce_deadline` is off: the planted bug).
    pub fn new(kill: Duration, enforce_deadline: bool) -> Exec {
        Exec { kill, enforce_deadline, known: None, started: None, termed: false, released: false }
    }

    /// Feeds one read of the state file (`None`: it could not be read or understood, which
    /// changes nothing: the latest deadline read stands).
    pub fn read(&mut self, posted: Option<Posted>) {
        if let Some(p) = posted {
            if p.phase == Phase::Released && self.started.is_none_or(|e| e == p.epoch) {
                self.released = true;
            }
            self.known = Some(p);
        }
    }

    /// The command was started (after [`Step::Start`]).
    pub fn started(&mut self) {
        self.started = Some(self.known.map_or(0, |p| p.epoch));
    }

    /// The command was asked to stop (after [`Step::Term`]).
    pub fn termed(&mut self) {
        self.termed = true;
    }

    /// Whether the command was asked to stop by this process (its end is then a stop of the
    /// guard's, not the container's own).
    pub fn was_termed(&self) -> bool {
        self.termed
    }

    /// The container's processes were stopped (after [`Step::Stop`], or the command's end after
    /// a SIGTERM of this process): it waits for a fresh valid lease, as at its start.
    pub fn stopped(&mut self) {
        self.started = None;
        self.termed = false;
    }

    /// What to do at `now` (the node's boot clock).
    pub fn step(&self, now: Duration) -> Step {
        if self.released {
            return if self.started.is_some() { Step::Run } else { Step::Start };
        }
        let Some(p) = self.known else {
            return match self.started {
                None => Step::Wait("no guard state yet".into()),
                // Started, yet nothing was ever read: nothing to go on.
                Some(_) => Step::Stop("the guard's state cannot be read".into()),
            };
        };
        let Some(epoch) = self.started else {
            return match (p.phase, p.term_at) {
                (Phase::Valid, Some(term)) if now < term => Step::Start,
                (Phase::Valid, _) => Step::Wait("the lease is valid too briefly to start on".into()),
                (Phase::Waiting, _) => Step::Wait("no fresh extension of the lease naming the ordinal yet".into()),
                (Phase::Stopped, _) => Step::Wait("the guard stopped the pod; waiting for a fresh extension".into()),
                // Released without a start is handled above.
                (Phase::Released, _) => Step::Start,
            };
        };
        if p.epoch != epoch {
            return Step::Stop("the guard stopped the pod since this container started".into());
        }
        match p.phase {
            Phase::Stopped | Phase::Waiting => {
                return Step::Stop("the guard stopped the pod: its lease no longer lets it run".into());
            }
            Phase::Released | Phase::Valid => {}
        }
        if !self.enforce_deadline {
            return Step::Run;
        }
        let Some(deadline) = p.deadline else {
            return Step::Stop("the guard posted a valid lease without a deadline".into());
        };
        if now + self.kill >= deadline {
            Step::Stop("the lease's deadline came with no extension".into())
        } else if !self.termed && p.term_at.is_some_and(|t| now >= t) {
            Step::Term
        } else {
            Step::Run
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kill() -> Duration {
        Duration::from_secs(1)
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn valid(epoch: u64, deadline: u64) -> Option<Posted> {
        Some(Posted { epoch, phase: Phase::Valid, deadline: Some(s(deadline)), term_at: Some(s(deadline - 2)) })
    }

    fn phase(epoch: u64, phase: Phase) -> Option<Posted> {
        Some(Posted { epoch, phase, deadline: None, term_at: None })
    }

    #[test]
    fn it_starts_only_under_a_valid_lease_and_stops_by_its_deadline_whatever_the_watch_does() {
        let mut e = Exec::new(kill(), true);
        assert!(matches!(e.step(s(0)), Step::Wait(_)), "nothing read");
        e.read(phase(0, Phase::Waiting));
        assert!(matches!(e.step(s(0)), Step::Wait(_)));
        e.read(valid(0, 20));
        assert!(matches!(e.step(s(19)), Step::Wait(_)), "past the SIGTERM instant: too briefly valid");
        assert_eq!(e.step(s(5)), Step::Start);
        e.started();
        assert_eq!(e.step(s(10)), Step::Run);
        // The watch dies: nothing more is written, or the file cannot be read. The deadline stands.
        e.read(None);
        assert_eq!(e.step(s(18)), Step::Term);
        e.termed();
        assert_eq!(e.step(s(18)), Step::Run, "one SIGTERM");
        assert!(matches!(e.step(s(19)), Step::Stop(_)), "K before the deadline");
        // A fresh extension in time moves the deadline on.
        e.read(valid(0, 40));
        assert_eq!(e.step(s(19)), Step::Run);
        // Stopped at the deadline, it waits as at its start: not on the lease it stopped at.
        assert!(matches!(e.step(s(39)), Step::Stop(_)));
        e.stopped();
        assert!(matches!(e.step(s(39)), Step::Wait(_)));
        e.read(valid(1, 60));
        assert_eq!(e.step(s(40)), Step::Start, "a fresh lease: the command starts again");
    }

    #[test]
    fn a_stop_or_a_new_epoch_stops_at_once_and_a_release_is_for_good() {
        let mut e = Exec::new(kill(), true);
        e.read(valid(3, 20));
        e.started();
        e.read(phase(3, Phase::Stopped));
        assert!(matches!(e.step(s(1)), Step::Stop(_)));
        // A stop missed: the watch stopped and was valid again before this process read.
        e.read(valid(4, 40));
        assert!(matches!(e.step(s(1)), Step::Stop(m) if m.contains("since")));

        let mut e = Exec::new(kill(), true);
        e.read(phase(0, Phase::Released));
        assert_eq!(e.step(s(1)), Step::Start);
        e.started();
        e.read(phase(1, Phase::Stopped));
        e.read(None);
        assert_eq!(e.step(s(1_000_000)), Step::Run, "released for good");
    }

    #[test]
    fn a_file_never_read_after_the_start_stops_the_container() {
        let mut e = Exec::new(kill(), true);
        e.started();
        assert!(matches!(e.step(s(1)), Step::Stop(_)));
    }

    #[test]
    fn the_planted_first_process_ignores_the_deadline() {
        let mut e = Exec::new(kill(), false);
        e.read(valid(0, 20));
        e.started();
        assert_eq!(e.step(s(1_000)), Step::Run);
        e.read(phase(0, Phase::Stopped));
        assert!(matches!(e.step(s(1_000)), Step::Stop(_)), "it still obeys the watch");
    }
}
