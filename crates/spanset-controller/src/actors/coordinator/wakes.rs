//! The wake-ups a coordinator asked for, when nothing reported may come in time: a pod that
//! becomes available after `minReadySeconds`, the end of a wait for a watcher's report, the
//! recheck of a member's refusal. Each is kept until it is due, with one timer armed at a time
//! for the earliest: a later wake-up asked while an earlier one is armed is armed in its turn
//! when the earlier one fires, not dropped. (The coordinator kept only the armed instant, and a
//! refusal's recheck asked behind a shorter wait was lost once that wait ended: the federation
//! stayed refused until the safety resync.)
//!
//! Owned and mutated only by the Coordinator actor; it arms the timers this answers.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

/// Wake-ups this close together are one, at the later instant.
const MERGE: Duration = Duration::from_millis(50);

/// The wake-ups asked for and not yet due, and the timer armed.
#[derive(Debug, Default)]
pub struct Wakes {
    asked: BTreeSet<Instant>,
    armed: Option<Instant>,
}

impl Wakes {
    /// Asks for a reconcile at `at`. Answers the instant to arm a timer for, if one must be
    /// armed (none is, or the armed one is later).
    pub fn ask(&mut self, at: Instant) -> Option<Instant> {
        // Each reconcile asks again for the moment it waits for (a few milliseconds apart, as
        // `now` moves): those are one wake-up, at the latest of them.
        if self.asked.range(at..=at + MERGE).next().is_none() {
            let near: Vec<Instant> = self.asked.range(at.checked_sub(MERGE).unwrap_or(at)..at).copied().collect();
            for t in near {
                self.asked.remove(&t);
            }
            self.asked.insert(at);
        }
        self.arm()
    }

    /// The timer armed for `at` fired at `now`. Answers whether a wake-up was due (plan now)
    /// and the next instant to arm a timer for, if one must be armed.
    pub fn fired(&mut self, at: Instant, now: Instant) -> (bool, Option<Instant>) {
        if self.armed == Some(at) {
            self.armed = None;
        }
        let due = self.asked.first().is_some_and(|t| *t <= now);
        self.asked.retain(|t| *t > now);
        (due, self.arm())
    }

    fn arm(&mut self) -> Option<Instant> {
        let next = *self.asked.first()?;
        if self.armed.is_none_or(|armed| next < armed) {
            self.armed = Some(next);
            return Some(next);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_wake_up_asked_behind_an_earlier_one_is_armed_when_the_earlier_one_fires() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut w = Wakes::default();
        // A wait for a report (5 s) is armed; then a refusal's recheck (30 s) is asked.
        assert_eq!(w.ask(s(5)), Some(s(5)));
        assert_eq!(w.ask(s(30)), None, "one timer at a time: the earlier one is armed");
        // The wait ends: plan, and the recheck is armed now.
        assert_eq!(w.fired(s(5), s(5)), (true, Some(s(30))));
        assert_eq!(w.fired(s(30), s(30)), (true, None), "the recheck plans too");
    }

    #[test]
    fn an_earlier_wake_up_is_armed_at_once_and_the_superseded_timer_plans_only_when_due() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut w = Wakes::default();
        assert_eq!(w.ask(s(30)), Some(s(30)));
        assert_eq!(w.ask(s(2)), Some(s(2)), "earlier than the armed one");
        assert_eq!(w.ask(s(2)), None, "asked twice, armed once");
        // The 2-s timer fires: plan; the 30-s wake-up still needs a timer (the first one's
        // instant is no longer the armed one, so it is armed again).
        assert_eq!(w.fired(s(2), s(2)), (true, Some(s(30))));
        // Both 30-s timers fire: one plans, the other finds nothing due.
        assert_eq!(w.fired(s(30), s(30)), (true, None));
        assert_eq!(w.fired(s(30), s(30)), (false, None));
    }

    #[test]
    fn wake_ups_asked_again_for_about_the_same_moment_are_one_at_the_latest() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut w = Wakes::default();
        assert_eq!(w.ask(ms(1000)), Some(ms(1000)));
        assert_eq!(w.ask(ms(1010)), None);
        assert_eq!(w.ask(ms(1005)), None, "one at 1010 is asked already");
        // The superseded timer finds nothing due and arms the one left.
        assert_eq!(w.fired(ms(1000), ms(1000)), (false, Some(ms(1010))));
        assert_eq!(w.fired(ms(1010), ms(1010)), (true, None));
    }

    #[test]
    fn a_timer_that_fires_late_plans_every_wake_up_due_by_then_once() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut w = Wakes::default();
        w.ask(s(1));
        w.ask(s(3));
        w.ask(s(9));
        assert_eq!(w.fired(s(1), s(4)), (true, Some(s(9))), "1 and 3 are due by 4");
        assert_eq!(w.fired(s(9), s(8)), (false, Some(s(9))), "a timer early by a tick is armed again");
        assert_eq!(w.fired(s(9), s(9)), (true, None));
    }
}
