//! spanset's side of a member's pod lease, on its monotonic clock: every extension attempt and
//! what became of it, the latest instant any of them may have landed, and the instant the
//! member's pods may be taken as stopped (the lapse).
//!
//! - An extension *answered* (success or a definite refusal) landed, if at all, by its answer.
//! - One that got no answer — still in flight, timed out, connection cut — may land until
//!   `sent + S + W`: the member's watcher may send it up to the send window S after it was
//!   counted here (never later), and an API server finishes or drops a request within W of
//!   receiving it. Both are real time, so on this clock `sent + (S + W)·(1+ρ)`. Counting it as
//!   never sent (measuring from the last answered extension) lapses the lease while that write
//!   may still land and start the guards' deadlines afresh.
//! - One refused before it was sent (connection refused) never lands.
//! - A clock starts with the unknown past: whatever an earlier leader sent before this process
//!   led was counted before [`LeaseClock::new`], so it lands by then `+ S + W`. That is what makes a
//!   host outage, a crash or a new leader safe: the new leader's lapse is never earlier than
//!   an old extension's.
//! - The lease lapses at `latest_landing + (L + P)·(1+ρ)/(1−ρ)` (see the module
//!   [`super`] for why that is after every guard stopped).
//! - Extend every R while the member answers; and at once when the ordinals to name change, so
//!   that an ordinal taken away is no longer named and one granted starts without waiting R.

use std::{collections::BTreeMap, time::Instant};

use super::Timing;
use crate::decisions::safety::Rules;

/// What became of one extension attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered at this instant (success or definite refusal): landed by then, if at all.
    Answered(Instant),
    /// No answer (timed out, connection cut): may land until `sent + S + W`.
    Lost,
    /// Refused before it was sent (connection refused): never lands.
    NotSent,
}

/// One attempt, as [`LeaseClock::send`] numbered it, to be settled with its [`Outcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Attempt(u64);

/// When to extend next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Now: nothing was sent yet, or the last attempt is R old.
    Now,
    /// At this instant.
    At(Instant),
}

/// One member's pod lease as spanset measures it (one per member, per leading process).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseClock {
    timing: Timing,
    rules: Rules,
    /// The latest instant a settled attempt (or the unknown past) may have landed.
    settled: Instant,
    /// Attempts sent and not settled yet, by number: their send instants.
    pending: BTreeMap<Attempt, Instant>,
    next: u64,
    last_sent: Option<Instant>,
}

impl LeaseClock {
    /// A member's clock as a process starts leading at `now`: an earlier leader's extensions,
    /// all counted before now, may land until `now + S + W`.
    pub fn new(now: Instant, timing: Timing, rules: Rules) -> LeaseClock {
        let settled = if rules.lease_lost_extensions { now + timing.stretched(timing.landing_deadline()) } else { now };
        LeaseClock { timing, rules, settled, pending: BTreeMap::new(), next: 0, last_sent: None }
    }

    /// Measures with `timing` from now on (a new lease length): what was sent and landed stays,
    /// and the lapse follows the new length. The caller keeps the length at least the longest
    /// any guard may hold.
    pub fn retime(&mut self, timing: Timing) {
        self.timing = timing;
    }

    /// Notes an extension sent at `sent`: until settled it counts as one without an answer.
    pub fn send(&mut self, sent: Instant) -> Attempt {
        let attempt = Attempt(self.next);
        self.next += 1;
        self.pending.insert(attempt, sent);
        self.last_sent = Some(self.last_sent.map_or(sent, |s| s.max(sent)));
        attempt
    }

    /// Settles `attempt` (an unknown or already settled one changes nothing).
    pub fn settle(&mut self, attempt: Attempt, outcome: Outcome) {
        let Some(sent) = self.pending.remove(&attempt) else { return };
        let landed_by = match outcome {
            Outcome::Answered(at) => Some(at.max(sent)),
            Outcome::Lost => self.lost_landing(sent),
            Outcome::NotSent => None,
        };
        if let Some(at) = landed_by {
            self.settled = self.settled.max(at);
        }
    }

    fn lost_landing(&self, sent: Instant) -> Option<Instant> {
        self.rules.lease_lost_extensions.then(|| sent + self.timing.stretched(self.timing.landing_deadline()))
    }

    /// The latest instant any extension sent so far (or before this process led) may land.
    pub fn latest_landing(&self) -> Instant {
        self.pending.values().filter_map(|&sent| self.lost_landing(sent)).fold(self.settled, Instant::max)
    }

    /// When the member's pods may be taken as stopped, if no extension lands after those sent so
    /// far: `latest_landing + (L + P)·(1+ρ)/(1−ρ)`.
    pub fn lapsed_at(&self) -> Instant {
        let t = &self.timing;
        let span = if self.rules.lease_drift_margin { t.hastened(t.lease + t.poll) } else { t.lease };
        self.latest_landing() + span
    }

    /// Whether the lease has lapsed at `now`: the member's pods are stopped, so its ordinals may
    /// be re-homed (it counts as fenced until it answers again and is shrunk).
    pub fn lapsed(&self, now: Instant) -> bool {
        now >= self.lapsed_at()
    }

    /// When to extend next, the ordinals named being unchanged (a change is extended at once).
    pub fn next_extension(&self, now: Instant) -> Next {
        match self.last_sent {
            Some(sent) if now < sent + self.timing.renew => Next::At(sent + self.timing.renew),
            _ => Next::Now,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn timing() -> Timing {
        Timing {
            lease: Duration::from_secs(20),
            drift_ppm: 100_000,
            write_deadline: Duration::from_secs(10),
            renew: Duration::from_secs(5),
            poll: Duration::from_secs(2),
            kill: Duration::from_secs(1),
            stop_budget: Duration::from_secs(5),
        }
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn the_lapse_follows_the_latest_landing_with_drift_and_poll() {
        let t0 = Instant::now();
        let mut c = LeaseClock::new(t0, timing(), Rules::ALL);
        // The unknown past: (S + W)·1.1 = 12.5 s·1.1 after the start.
        assert_eq!(c.latest_landing(), t0 + Duration::from_millis(13_750));
        let a = c.send(t0 + s(20));
        assert_eq!(c.latest_landing(), t0 + s(20) + Duration::from_millis(13_750), "pending counts as lost");
        c.settle(a, Outcome::Answered(t0 + s(21)));
        assert_eq!(c.latest_landing(), t0 + s(21));
        // (20 + 2)·1.1/0.9 = 26.888… s.
        assert_eq!(c.lapsed_at(), t0 + s(21) + Duration::from_nanos(26_888_888_889));
        assert!(!c.lapsed(t0 + s(47)));
        assert!(c.lapsed(t0 + s(48)));
    }

    #[test]
    fn a_lost_extension_counts_until_its_write_deadline_and_one_never_sent_not_at_all() {
        let t0 = Instant::now();
        let mut c = LeaseClock::new(t0, timing(), Rules::ALL);
        let a = c.send(t0 + s(30));
        c.settle(a, Outcome::Answered(t0 + s(31)));
        let lost = c.send(t0 + s(35));
        c.settle(lost, Outcome::Lost);
        let refused = c.send(t0 + s(40));
        c.settle(refused, Outcome::NotSent);
        // Sent at 35 s: the watcher may send it until 37.5 s, where it may land until 47.5 s
        // (13.75 s on this clock with its drift).
        let lost_until = t0 + s(35) + Duration::from_millis(13_750);
        assert_eq!(c.latest_landing(), lost_until);
        // Settling twice, or an answer arriving for a settled attempt, changes nothing.
        c.settle(lost, Outcome::Answered(t0 + s(36)));
        assert_eq!(c.latest_landing(), lost_until);
        // The planted bug: measured from the last answered one.
        let mut bug = LeaseClock::new(t0, timing(), Rules { lease_lost_extensions: false, ..Rules::ALL });
        let a = bug.send(t0 + s(30));
        bug.settle(a, Outcome::Answered(t0 + s(31)));
        let lost = bug.send(t0 + s(35));
        bug.settle(lost, Outcome::Lost);
        assert_eq!(bug.latest_landing(), t0 + s(31));
    }

    #[test]
    fn without_the_drift_margin_the_lapse_is_latest_landing_plus_the_lease() {
        let t0 = Instant::now();
        let c = LeaseClock::new(t0, timing(), Rules { lease_drift_margin: false, ..Rules::ALL });
        assert_eq!(c.lapsed_at(), t0 + Duration::from_millis(13_750) + s(20));
    }

    #[test]
    fn extensions_are_due_every_renewal_interval() {
        let t0 = Instant::now();
        let mut c = LeaseClock::new(t0, timing(), Rules::ALL);
        assert_eq!(c.next_extension(t0), Next::Now);
        c.send(t0 + s(1));
        assert_eq!(c.next_extension(t0 + s(2)), Next::At(t0 + s(6)));
        assert_eq!(c.next_extension(t0 + s(6)), Next::Now);
    }
}
