//! A pod's guard, as a state machine fed with its polls of the member's pod Lease, on the pod's
//! node's monotonic clock (CLOCK_BOOTTIME, as a [`Duration`] since boot). The `spanset guard`
//! binary polls (a quorum read) at least every P, feeds each answer here with the poll's *send*
//! instant, and does what [`Guard::action`] says.
//!
//! - An extension seen for the first time (the [`super::EXTENSION`] counter differs from the
//!   previous successful poll's) landed after that previous poll was served, hence after it
//!   was sent: `valid_from` is that previous poll's send instant — on or before the landing,
//!   so on or before spanset's `latest_landing`. A first poll proves nothing (the counter it
//!   sees may be old), so a fresh guard waits ([`Action::Wait`]) for two polls with a change.
//! - The deadline is `valid_from + L·(1−ρ)/(1+ρ)`: on a clock that runs slow by ρ that span is
//!   at most `L/(1+ρ)` of real time. SIGTERM at `deadline − S`, SIGKILL at `deadline − K` (the
//!   processes are gone by the deadline); checked at least every P.
//! - A poll that does not name the pod's ordinal stops it at once: spanset has taken the
//!   ordinal away (to re-home it, or because it moved), and the write that did so is the
//!   extension any later start would need. A stopped guard stays stopped; the pod's sandbox
//!   restarts with a fresh guard, which waits for a fresh extension naming the ordinal.
//! - A failed poll changes nothing: the deadline stands.
//! - A poll that finds the Lease released (spanset let the federation go: an uninstall) and
//!   naming the ordinal frees the pod for good ([`Action::Released`]): nobody will extend the
//!   lease again, and stopping a workload nobody manages any more would be an outage, not a
//!   fence. Sticky: a later poll changes nothing.

use std::time::Duration;

use spanset_plan::{Ordinal, Ordinals};

use super::Timing;
use crate::decisions::safety::Rules;

/// What one poll of the Lease gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll<'a> {
    /// A read: the extension counter and the ordinals named.
    Read {
        /// The [`super::EXTENSION`] annotation.
        extension: u64,
        /// The [`super::ORDINALS`] annotation, parsed.
        ordinals: &'a Ordinals,
        /// The [`super::RELEASED`] annotation: spanset let the federation go.
        released: bool,
    },
    /// No answer, an error, or a Lease that does not parse.
    Failed,
}

/// What the guard does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// No fresh extension naming the ordinal seen yet: the pod's containers do not start (the
    /// init container keeps polling).
    Wait,
    /// The pod may run.
    Run,
    /// The deadline is within the stop budget: SIGTERM the pod's other processes.
    Term,
    /// SIGKILL the pod's other processes and end its sandbox: the deadline is within K, or the
    /// lease no longer names the ordinal.
    Kill,
    /// The pod was stopped: nothing runs until a fresh guard starts.
    Stopped,
    /// The lease was released: the pod runs on with no deadline, for good.
    Released,
}

/// One pod's guard.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Guard {
    ordinal: Ordinal,
    timing: Timing,
    rules: Rules,
    /// The latest successful poll: its send instant and the counter it saw.
    last: Option<(Duration, u64)>,
    valid_from: Option<Duration>,
    /// A poll did not name the ordinal after it was let run.
    revoked: bool,
    stopped: bool,
    /// A poll found the lease released, naming the ordinal.
    released: bool,
}

impl Guard {
    /// A fresh guard of the pod of `ordinal` (the init container's): it waits.
    pub fn new(ordinal: Ordinal, timing: Timing, rules: Rules) -> Guard {
        Guard { ordinal, timing, rules, last: None, valid_from: None, revoked: false, stopped: false, released: false }
    }

    /// A guard continuing another's on the same clock (the sidecar taking over from the init
    /// container, through a file): valid from `valid_from`, its latest poll sent at `last_sent`
    /// having seen `extension`. Sound as long as both read the same clock: a later change of
    /// the counter landed after `last_sent`, exactly as if one guard had polled throughout.
    pub fn resume(
        ordinal: Ordinal,
        timing: Timing,
        rules: Rules,
        valid_from: Duration,
        last_sent: Duration,
        extension: u64,
    ) -> Guard {
        Guard { last: Some((last_sent, extension)), valid_from: Some(valid_from), ..Guard::new(ordinal, timing, rules) }
    }

    /// The latest successful poll: its send instant and the counter it saw (what a successor
    /// [`Guard::resume`]s from).
    pub fn last_poll(&self) -> Option<(Duration, u64)> {
        self.last
    }

    /// Feeds one poll, sent at `sent` on the guard's clock.
    pub fn polled(&mut self, sent: Duration, poll: Poll<'_>) {
        let Poll::Read { extension, ordinals, released } = poll else { return };
        if self.released {
            return;
        }
        let named = ordinals.contains(self.ordinal);
        if !named && self.valid_from.is_some() {
            self.revoked = true;
        }
        if released && named && !self.revoked {
            self.released = true;
        }
        if let Some((previous_sent, previous)) = self.last
            && previous != extension
            && named
            && !self.revoked
        {
            self.valid_from = Some(self.valid_from.map_or(previous_sent, |v| v.max(previous_sent)));
        }
        self.last = Some((sent, extension));
    }

    /// Whether a poll found the lease released, naming the ordinal (see [`Action::Released`]).
    pub fn released(&self) -> bool {
        self.released
    }

    /// The caller stopped the pod (its processes killed, its sandbox ending).
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// The instant, on or before the landing of the latest extension seen, from which the
    /// deadline counts; `None` before two polls with a change naming the ordinal.
    pub fn valid_from(&self) -> Option<Duration> {
        self.valid_from
    }

    /// `valid_from + L·(1−ρ)/(1+ρ)`: the pod's processes are gone by then.
    pub fn deadline(&self) -> Option<Duration> {
        Some(self.valid_from? + self.timing.slowed(self.timing.lease))
    }

    /// What to do at `now` (the guard's clock).
    pub fn action(&self, now: Duration) -> Action {
        if self.stopped {
            return Action::Stopped;
        }
        if self.revoked {
            return Action::Kill;
        }
        if self.released {
            return Action::Released;
        }
        let Some(deadline) = self.deadline() else { return Action::Wait };
        if !self.rules.lease_deadline {
            return Action::Run;
        }
        if now + self.timing.kill >= deadline {
            Action::Kill
        } else if now + self.timing.stop_budget >= deadline {
            Action::Term
        } else {
            Action::Run
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing {
            lease: Duration::from_secs(12),
            drift_ppm: 200_000,
            write_deadline: Duration::from_secs(10),
            renew: Duration::from_secs(3),
            poll: Duration::from_secs(1),
            kill: Duration::from_secs(1),
            stop_budget: Duration::from_secs(3),
        }
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn read(extension: u64, ordinals: &Ordinals) -> Poll<'_> {
        Poll::Read { extension, ordinals, released: false }
    }

    #[test]
    fn a_fresh_guard_waits_for_two_polls_with_a_change_naming_its_ordinal() {
        let named = Ordinals::from_iter([0, 2]);
        let mut g = Guard::new(2, timing(), Rules::ALL);
        assert_eq!(g.action(s(0)), Action::Wait);
        g.polled(s(1), read(7, &named));
        assert_eq!(g.action(s(1)), Action::Wait, "one poll proves nothing");
        g.polled(s(2), Poll::Failed);
        g.polled(s(3), read(7, &named));
        assert_eq!(g.action(s(3)), Action::Wait, "no change");
        g.polled(s(4), read(8, &named));
        // Landed after the poll sent at 3 was served: valid from 3; 12·0.8/1.2 = 8 s.
        assert_eq!(g.valid_from(), Some(s(3)));
        assert_eq!(g.deadline(), Some(s(11)));
        assert_eq!(g.action(s(7)), Action::Run);
        assert_eq!(g.action(s(8)), Action::Term);
        assert_eq!(g.action(s(10)), Action::Kill);
        // Failed polls change nothing; a fresh extension moves the deadline on.
        g.polled(s(5), Poll::Failed);
        assert_eq!(g.deadline(), Some(s(11)));
        g.polled(s(6), read(9, &named));
        assert_eq!(g.deadline(), Some(s(12)));
        g.stop();
        assert_eq!(g.action(s(6)), Action::Stopped);
    }

    #[test]
    fn a_change_that_does_not_name_the_ordinal_lets_nothing_start() {
        let other = Ordinals::from_iter([0]);
        let mut g = Guard::new(2, timing(), Rules::ALL);
        g.polled(s(1), read(1, &other));
        g.polled(s(2), read(2, &other));
        assert_eq!(g.action(s(2)), Action::Wait);
        g.polled(s(3), read(3, &Ordinals::from_iter([2])));
        assert_eq!(g.valid_from(), Some(s(2)));
    }

    #[test]
    fn a_poll_that_no_longer_names_the_ordinal_stops_the_pod_at_once() {
        let named = Ordinals::from_iter([2]);
        let mut g = Guard::new(2, timing(), Rules::ALL);
        g.polled(s(1), read(1, &named));
        g.polled(s(2), read(2, &named));
        assert_eq!(g.action(s(2)), Action::Run);
        g.polled(s(3), read(3, &Ordinals::new()));
        assert_eq!(g.action(s(3)), Action::Kill);
        // Named again later: this guard stays stopping (its sandbox restarts with a fresh one).
        g.polled(s(4), read(4, &named));
        assert_eq!(g.action(s(4)), Action::Kill);
    }

    #[test]
    fn a_resumed_guard_keeps_the_deadline_it_was_handed_and_its_rules() {
        let named = Ordinals::from_iter([2]);
        let mut first = Guard::new(2, timing(), Rules::ALL);
        first.polled(s(1), read(1, &named));
        first.polled(s(2), read(2, &named));
        let (sent, extension) = first.last_poll().unwrap();
        let mut g = Guard::resume(2, timing(), Rules::ALL, first.valid_from().unwrap(), sent, extension);
        assert_eq!((g.deadline(), g.action(s(5))), (first.deadline(), Action::Run));
        assert_eq!(g.action(s(8)), Action::Kill, "valid from 1: the deadline is 9");
        // The same counter again proves nothing; a change does, from the handed-over poll on.
        g.polled(s(3), read(2, &named));
        assert_eq!(g.valid_from(), Some(s(1)));
        g.polled(s(4), read(3, &named));
        assert_eq!(g.valid_from(), Some(s(3)));
        g.polled(s(5), read(4, &Ordinals::new()));
        assert_eq!(g.action(s(5)), Action::Kill, "not named: stop at once");
    }

    #[test]
    fn a_released_lease_frees_a_named_pod_for_good_and_no_other() {
        let named = Ordinals::from_iter([2]);
        let released = |extension| Poll::Read { extension, ordinals: &named, released: true };
        // A fresh guard that finds the lease released lets the pod start at once.
        let mut g = Guard::new(2, timing(), Rules::ALL);
        g.polled(s(1), released(5));
        assert_eq!(g.action(s(1)), Action::Released);
        assert_eq!(g.action(s(1_000)), Action::Released, "no deadline any more");
        g.polled(s(2), read(6, &Ordinals::new()));
        assert_eq!(g.action(s(2)), Action::Released, "sticky: nothing after it counts");
        // A release that does not name the ordinal frees nothing; one read after a revocation
        // does not undo it.
        let mut g = Guard::new(3, timing(), Rules::ALL);
        g.polled(s(1), released(5));
        assert_eq!(g.action(s(1)), Action::Wait);
        let mut g = Guard::new(2, timing(), Rules::ALL);
        g.polled(s(1), read(1, &named));
        g.polled(s(2), read(2, &named));
        g.polled(s(3), read(3, &Ordinals::new()));
        g.polled(s(4), released(4));
        assert_eq!(g.action(s(4)), Action::Kill);
    }

    #[test]
    fn the_planted_guard_ignores_its_deadline() {
        let named = Ordinals::from_iter([2]);
        let mut g = Guard::new(2, timing(), Rules { lease_deadline: false, ..Rules::ALL });
        g.polled(s(1), read(1, &named));
        g.polled(s(2), read(2, &named));
        assert_eq!(g.action(s(1000)), Action::Run);
    }
}
