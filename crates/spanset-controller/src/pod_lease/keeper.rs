//! One federation's pod leases as its coordinator keeps them: per member, a [`LeaseClock`],
//! what the member's Lease holds as far as this process knows, the attempt in flight, and
//! whether the member counts as fenced because its lease lapsed. No I/O: the coordinator asks
//! [`Keeper::due`] for the extensions to send, sends them through the member's watcher, and
//! settles each with [`Keeper::settled`].
//!
//! - An extension names what the member may run: nothing while it is fenced (by an operator or
//!   by its lapse), otherwise its StatefulSet's slice as last seen. A changed naming is sent at
//!   once, an unchanged one every R.
//! - One attempt at a time per member, and none after an attempt that got no answer until the
//!   member is heard from again: every lost attempt may land until its send + W, which pushes
//!   the lapse later, so an unreachable member is not sent one every R.
//! - A lapse is sticky: the member counts as fenced for this federation until it answered
//!   again and was seen shrunk with no pod of the federation left ([`Keeper::end_lapse`]), even
//!   though the first extension after its return (naming nothing) makes its clock fresh.

use std::{collections::BTreeMap, time::Instant};

use spanset_plan::Ordinals;

use super::{
    Timing,
    clock::{Attempt, LeaseClock, Next, Outcome},
};
use crate::decisions::safety::Rules;

/// What this process knows the member's Lease holds (after its own last write or read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    /// Its resourceVersion: the next write's precondition.
    pub rv: u64,
    /// Its [`super::EXTENSION`] counter: the next write sets the one after it.
    pub extension: u64,
}

/// One extension to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    /// The member.
    pub member: String,
    /// The ordinals to name.
    pub ordinals: Ordinals,
    /// The Lease as this process knows it (`None`: read it first, then create or replace).
    pub known: Option<Stored>,
    /// The attempt to settle with what became of it.
    pub attempt: Attempt,
}

/// What became of an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Stored: the Lease as it is now.
    Stored(Stored),
    /// Definitely refused (a 409 or another answer): nothing landed; read again before the next.
    Refused,
    /// No answer: it may still land.
    Lost,
    /// Never reached the member (the connection was refused).
    NotSent,
}

#[derive(Debug, Clone)]
struct MemberLease {
    clock: LeaseClock,
    known: Option<Stored>,
    named: Option<Ordinals>,
    in_flight: Option<Attempt>,
    /// The send instant of an attempt that got no answer: no other is sent until the member
    /// is heard from after it.
    lost_at: Option<Instant>,
    /// When this process saw the lease lapse, while the lapse stands.
    lapsed_at: Option<Instant>,
}

/// A federation's pod leases in every member, as this (leading) process keeps them.
#[derive(Debug, Clone)]
pub struct Keeper {
    timing: Timing,
    rules: Rules,
    /// When this keeper began: a member first seen later starts its clock then (whatever an
    /// earlier leader sent was sent before this keeper began).
    began: Instant,
    members: BTreeMap<String, MemberLease>,
}

impl Keeper {
    /// A keeper for a process that began leading at `now`.
    pub fn new(now: Instant, timing: Timing, rules: Rules) -> Keeper {
        Keeper { timing, rules, began: now, members: BTreeMap::new() }
    }

    /// Measures every member's lease with `timing` from now on (a new lease length), keeping
    /// what was sent and what landed: a keeper made afresh instead would forget its attempts
    /// and take every member's lease as lapsed that long after it began leading.
    pub fn retime(&mut self, timing: Timing) {
        self.timing = timing;
        for m in self.members.values_mut() {
            m.clock.retime(timing);
        }
    }

    fn member(&mut self, name: &str) -> &mut MemberLease {
        let (began, timing, rules) = (self.began, self.timing, self.rules);
        self.members.entry(name.to_string()).or_insert_with(|| MemberLease {
            clock: LeaseClock::new(began, timing, rules),
            known: None,
            named: None,
            in_flight: None,
            lost_at: None,
            lapsed_at: None,
        })
    }

    /// Notes the members' lapses at `now` (every member in `members` is kept from here on):
    /// a member whose lease lapsed counts as fenced from now until [`Keeper::end_lapse`].
    /// Answers the members whose lapse is new.
    pub fn note_lapses<'a>(&mut self, members: impl IntoIterator<Item = &'a str>, now: Instant) -> Vec<String> {
        let mut new = Vec::new();
        for name in members {
            let m = self.member(name);
            if m.lapsed_at.is_none() && m.clock.lapsed(now) {
                m.lapsed_at = Some(now);
                new.push(name.to_string());
            }
        }
        new
    }

    /// When the member's lapse was seen, if it stands: the member counts as fenced.
    pub fn lapse(&self, member: &str) -> Option<Instant> {
        self.members.get(member).and_then(|m| m.lapsed_at)
    }

    /// The member answered again after its lapse and holds nothing of the federation any more
    /// (shrunk, its pods gone): it is a member like the others again.
    pub fn end_lapse(&mut self, member: &str) {
        if let Some(m) = self.members.get_mut(member) {
            m.lapsed_at = None;
        }
    }

    /// When the member's lease lapses if nothing more lands.
    pub fn lapses_at(&mut self, member: &str) -> Instant {
        self.member(member).clock.lapsed_at()
    }

    /// The extensions to send at `now`: `wanted` gives, for each member that may be written
    /// (it answers), the ordinals to name and when it was last heard from. A member in a lapse
    /// is named nothing, whatever `wanted` says.
    pub fn due(&mut self, now: Instant, wanted: &BTreeMap<String, (Ordinals, Option<Instant>)>) -> Vec<Extension> {
        let mut out = Vec::new();
        for (name, (ordinals, heard)) in wanted {
            let m = self.member(name);
            if m.in_flight.is_some() {
                continue;
            }
            if let Some(lost) = m.lost_at {
                if heard.is_none_or(|h| h <= lost) {
                    continue;
                }
                m.lost_at = None;
            }
            let ordinals = if m.lapsed_at.is_some() { Ordinals::new() } else { ordinals.clone() };
            let changed = m.named.as_ref() != Some(&ordinals);
            if !changed && m.clock.next_extension(now) != Next::Now {
                continue;
            }
            let attempt = m.clock.send(now);
            m.in_flight = Some(attempt);
            out.push(Extension { member: name.clone(), ordinals, known: m.known, attempt });
        }
        out
    }

    /// Settles `extension`, answered (or given up on) at `now`.
    pub fn settled(&mut self, extension: &Extension, sent: Sent, now: Instant) {
        let m = self.member(&extension.member);
        if m.in_flight == Some(extension.attempt) {
            m.in_flight = None;
        }
        let outcome = match sent {
            Sent::Stored(stored) => {
                m.known = Some(stored);
                m.named = Some(extension.ordinals.clone());
                Outcome::Answered(now)
            }
            Sent::Refused => {
                m.known = None;
                Outcome::Answered(now)
            }
            Sent::Lost => {
                // What the Lease holds now is unknown: read it before the next write.
                m.known = None;
                m.named = None;
                m.lost_at = Some(now);
                Outcome::Lost
            }
            Sent::NotSent => Outcome::NotSent,
        };
        m.clock.settle(extension.attempt, outcome);
    }

    /// When the next extension of an unchanged naming is due, over every member kept (for the
    /// coordinator's timer), and the next lapse of a member not lapsed yet.
    pub fn next_wake(&self, now: Instant) -> Option<Instant> {
        self.members
            .values()
            .flat_map(|m| {
                let extend = match m.clock.next_extension(now) {
                    Next::Now if m.in_flight.is_none() && m.lost_at.is_none() => Some(now),
                    Next::Now => None,
                    Next::At(at) => Some(at),
                };
                let lapse = m.lapsed_at.is_none().then(|| m.clock.lapsed_at());
                extend.into_iter().chain(lapse)
            })
            .filter(|at| *at >= now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn timing() -> Timing {
        Timing::new(Duration::from_secs(20), 0.01, Duration::from_secs(10), Duration::from_secs(5)).unwrap()
    }

    fn wanted(ordinals: &[u32], heard: Option<Instant>) -> BTreeMap<String, (Ordinals, Option<Instant>)> {
        BTreeMap::from([("east".to_string(), (ordinals.iter().copied().collect(), heard))])
    }

    #[test]
    fn a_changed_naming_is_sent_at_once_and_an_unchanged_one_every_r() {
        let t0 = Instant::now();
        let mut k = Keeper::new(t0, timing(), Rules::ALL);
        let first = k.due(t0, &wanted(&[0, 1], Some(t0)));
        assert_eq!(first.len(), 1);
        assert!(k.due(t0, &wanted(&[0, 1], Some(t0))).is_empty(), "one attempt at a time");
        k.settled(&first[0], Sent::Stored(Stored { rv: 5, extension: 1 }), t0);
        assert!(k.due(t0 + Duration::from_secs(1), &wanted(&[0, 1], Some(t0))).is_empty(), "not due before R");
        let changed = k.due(t0 + Duration::from_secs(1), &wanted(&[0], Some(t0)));
        assert_eq!(changed.len(), 1, "a changed naming goes at once");
        assert_eq!(changed[0].known, Some(Stored { rv: 5, extension: 1 }));
        k.settled(&changed[0], Sent::Stored(Stored { rv: 6, extension: 2 }), t0 + Duration::from_secs(1));
        let r = timing().renew;
        assert_eq!(k.due(t0 + Duration::from_secs(1) + r, &wanted(&[0], Some(t0))).len(), 1, "due every R");
    }

    #[test]
    fn after_a_lost_attempt_nothing_is_sent_until_the_member_is_heard_from() {
        let t0 = Instant::now();
        let mut k = Keeper::new(t0, timing(), Rules::ALL);
        let first = k.due(t0, &wanted(&[0], Some(t0)));
        let lost_at = t0 + Duration::from_secs(3);
        k.settled(&first[0], Sent::Lost, lost_at);
        let later = lost_at + timing().renew * 3;
        assert!(k.due(later, &wanted(&[0], Some(t0))).is_empty(), "silent since the loss");
        let again = k.due(later, &wanted(&[0], Some(later)));
        assert_eq!(again.len(), 1, "heard from again");
        assert_eq!(again[0].known, None, "the Lease is read again first");
    }

    #[test]
    fn a_lapse_is_sticky_names_nothing_and_ends_only_when_said() {
        let t0 = Instant::now();
        let mut k = Keeper::new(t0, timing(), Rules::ALL);
        let first = k.due(t0, &wanted(&[0, 1], Some(t0)));
        k.settled(&first[0], Sent::Stored(Stored { rv: 5, extension: 1 }), t0);
        let lapse = k.lapses_at("east");
        assert!(k.note_lapses(["east"], lapse - Duration::from_millis(1)).is_empty());
        assert_eq!(k.note_lapses(["east"], lapse), vec!["east".to_string()]);
        let back = lapse + Duration::from_secs(1);
        let ext = k.due(back, &wanted(&[0, 1], Some(back)));
        assert_eq!(ext[0].ordinals, Ordinals::new(), "a lapsed member is named nothing");
        k.settled(&ext[0], Sent::Stored(Stored { rv: 9, extension: 2 }), back);
        assert!(k.note_lapses(["east"], back).is_empty());
        assert_eq!(k.lapse("east"), Some(lapse), "still fenced though its clock is fresh");
        k.end_lapse("east");
        assert_eq!(k.lapse("east"), None);
        let after = k.due(back + Duration::from_millis(1), &wanted(&[0, 1], Some(back)));
        assert_eq!(after[0].ordinals, [0, 1].into_iter().collect::<Ordinals>());
    }

    #[test]
    fn a_lost_attempt_pushes_the_lapse_by_the_write_deadline() {
        let t0 = Instant::now();
        let mut k = Keeper::new(t0, timing(), Rules::ALL);
        let first = k.due(t0, &wanted(&[0], Some(t0)));
        k.settled(&first[0], Sent::Stored(Stored { rv: 5, extension: 1 }), t0);
        let answered = k.lapses_at("east");
        let r = timing().renew;
        let second = k.due(t0 + r, &wanted(&[0], Some(t0)));
        k.settled(&second[0], Sent::Lost, t0 + r + Duration::from_secs(5));
        let t = timing();
        assert!(
            k.lapses_at("east") >= t0 + r + t.send_window() + t.write_deadline + t.lease,
            "counted from its send + the send window + W"
        );
        assert!(k.lapses_at("east") > answered, "later than the answered one's");
    }
}
