//! The judgement of an audit, pure: from what was seen of each pod, when (an [`Observation`]),
//! the span each incarnation ran for, and every identity whose incarnations in two members ran
//! at once. Kept apart from the watching so that a recorded file is judged exactly as a live
//! run is, and so that the rule itself is tested without a cluster.
//!
//! An incarnation runs from the first observation that shows it running (its phase Running, or
//! any container running) until the first that shows it stopped (deleted, or no container
//! running any more, or Succeeded or Failed). Times are the auditor's, taken as each change
//! reached it, not the pods' own `startedAt` (whole seconds, and written by each member's clock):
//! one clock for every member keeps the order of events in different members comparable.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// What an observation saw of a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// Present, no container running (gated, unscheduled, starting).
    Waiting,
    /// A container runs, not Ready.
    Running,
    /// A container runs and the pod is Ready.
    Ready,
    /// Present but done: every container stopped, or phase Succeeded or Failed.
    Stopped,
    /// Deleted.
    Gone,
}

impl State {
    /// Whether a process of the pod may be running in this state.
    pub fn runs(self) -> bool {
        matches!(self, State::Running | State::Ready)
    }
}

/// One pod as seen once: a line of a recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// When the auditor saw it.
    pub at: Timestamp,
    /// The member cluster it is in.
    pub member: String,
    /// The pod's name: its identity.
    pub name: String,
    /// The pod's uid: its incarnation.
    pub uid: String,
    /// What it was doing.
    pub state: State,
    /// Whether it was being deleted (it had a deletion timestamp): a machine that powers on
    /// again starts none of those.
    #[serde(default, skip_serializing_if = "is_false")]
    pub deleting: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One pod object's life as the auditor saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Incarnation {
    /// Its member.
    pub member: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// First seen at all.
    pub seen: Timestamp,
    /// The spans it ran, each `[from, until)`; `until` is `None` while it still runs.
    pub ran: Vec<(Timestamp, Option<Timestamp>)>,
    /// First seen Ready.
    pub ready: Option<Timestamp>,
    /// First seen being deleted (a deletion timestamp), when it was seen so before it went.
    pub deleting: Option<Timestamp>,
    /// Seen deleted.
    pub gone: Option<Timestamp>,
}

/// Two incarnations of one identity, in two members, that ran at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Overlap {
    /// The identity.
    pub name: String,
    /// One incarnation: member and uid.
    pub first: (String, String),
    /// The other.
    pub second: (String, String),
    /// When both ran.
    pub from: Timestamp,
    /// Until when; `None` if both still run.
    pub until: Option<Timestamp>,
}

/// Every incarnation seen so far, by member and uid.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    incarnations: BTreeMap<(String, String), Incarnation>,
}

impl Timeline {
    /// Adds an observation; observations of one pod must come in the order they were made.
    pub fn observe(&mut self, o: &Observation) {
        let i = self.incarnations.entry((o.member.clone(), o.uid.clone())).or_insert_with(|| Incarnation {
            member: o.member.clone(),
            name: o.name.clone(),
            uid: o.uid.clone(),
            seen: o.at,
            ran: vec![],
            ready: None,
            deleting: None,
            gone: None,
        });
        let running = i.ran.last().is_some_and(|(_, until)| until.is_none());
        match (running, o.state.runs()) {
            (false, true) => i.ran.push((o.at, None)),
            (true, false) => {
                if let Some(last) = i.ran.last_mut() {
                    last.1 = Some(o.at);
                }
            }
            _ => {}
        }
        if o.state == State::Ready && i.ready.is_none() {
            i.ready = Some(o.at);
        }
        if o.deleting && o.state != State::Gone && i.deleting.is_none() {
            i.deleting = Some(o.at);
        }
        if o.state == State::Gone && i.gone.is_none() {
            i.gone = Some(o.at);
        }
    }

    /// Every incarnation, by member and uid.
    pub fn incarnations(&self) -> impl Iterator<Item = &Incarnation> {
        self.incarnations.values()
    }

    /// Every pair of incarnations of one identity in two members whose spans of running
    /// intersect. Two incarnations in one member are the member's StatefulSet controller's
    /// business (it never runs two pods of one name), not a federation's.
    pub fn overlaps(&self) -> Vec<Overlap> {
        let mut by_name: BTreeMap<&str, Vec<&Incarnation>> = BTreeMap::new();
        for i in self.incarnations.values() {
            by_name.entry(&i.name).or_default().push(i);
        }
        let mut out = vec![];
        for (name, all) in by_name {
            for (k, a) in all.iter().enumerate() {
                for b in &all[k + 1..] {
                    if a.member == b.member {
                        continue;
                    }
                    for span_a in &a.ran {
                        for span_b in &b.ran {
                            if let Some((from, until)) = intersection(*span_a, *span_b) {
                                out.push(Overlap {
                                    name: name.to_string(),
                                    first: (a.member.clone(), a.uid.clone()),
                                    second: (b.member.clone(), b.uid.clone()),
                                    from,
                                    until,
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

type Span = (Timestamp, Option<Timestamp>);

/// Where two half-open spans meet, if they do; `None` as an end is "still running".
fn intersection(a: Span, b: Span) -> Option<(Timestamp, Option<Timestamp>)> {
    let from = a.0.max(b.0);
    let until = match (a.1, b.1) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (Some(x), None) | (None, Some(x)) => Some(x),
        (None, None) => None,
    };
    match until {
        Some(u) if u <= from => None,
        _ => Some((from, until)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn obs(s: i64, member: &str, uid: &str, state: State) -> Observation {
        Observation {
            at: at(s),
            member: member.into(),
            name: "redis-2".into(),
            uid: uid.into(),
            state,
            deleting: false,
        }
    }

    fn timeline(observations: &[Observation]) -> Timeline {
        let mut t = Timeline::default();
        for o in observations {
            t.observe(o);
        }
        t
    }

    #[test]
    fn a_move_that_stops_the_old_pod_before_the_new_one_runs_is_no_overlap() {
        let t = timeline(&[
            obs(0, "west", "a", State::Ready),
            obs(5, "east", "b", State::Waiting),
            obs(6, "west", "a", State::Gone),
            obs(6, "east", "b", State::Running),
            obs(7, "east", "b", State::Ready),
        ]);
        assert_eq!(t.overlaps(), vec![], "the end of one span meeting the start of the next is no overlap");
        let b = t.incarnations().find(|i| i.uid == "b").unwrap();
        assert_eq!(b.ran, vec![(at(6), None)]);
        assert_eq!(b.ready, Some(at(7)));
    }

    #[test]
    fn a_new_pod_that_runs_before_the_old_one_stops_is_an_overlap_for_exactly_that_span() {
        let t = timeline(&[
            obs(0, "west", "a", State::Ready),
            obs(5, "east", "b", State::Running),
            obs(8, "west", "a", State::Stopped),
            obs(9, "west", "a", State::Gone),
        ]);
        let o = t.overlaps();
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!((o[0].from, o[0].until), (at(5), Some(at(8))));
        assert_eq!(
            [&o[0].first, &o[0].second],
            [&("east".to_string(), "b".to_string()), &("west".to_string(), "a".to_string())],
            "by member, then uid"
        );
    }

    #[test]
    fn two_still_running_incarnations_overlap_without_end_and_one_member_never_counts() {
        let t = timeline(&[
            obs(0, "west", "a", State::Running),
            obs(1, "west", "c", State::Running),
            obs(2, "east", "b", State::Ready),
        ]);
        let o = t.overlaps();
        assert_eq!(o.len(), 2, "a and c each with b, never a with c: {o:?}");
        assert!(o.iter().all(|o| o.until.is_none() && o.first.0 == "east" && o.second.0 == "west"), "{o:?}");
    }

    #[test]
    fn a_pod_that_stops_and_runs_again_has_two_spans_and_only_the_second_meets_the_other() {
        let t = timeline(&[
            obs(0, "west", "a", State::Running),
            obs(2, "west", "a", State::Stopped),
            obs(3, "east", "b", State::Running),
            obs(4, "east", "b", State::Gone),
            obs(10, "west", "a", State::Running),
        ]);
        assert_eq!(t.overlaps(), vec![]);
        let a = t.incarnations().find(|i| i.uid == "a").unwrap();
        assert_eq!(a.ran, vec![(at(0), Some(at(2))), (at(10), None)]);
    }
}
