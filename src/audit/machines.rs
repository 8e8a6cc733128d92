//! What a pod's status cannot say: that the machines under it are off. A member whose machines
//! lose power keeps, in its API, the last status its kubelets wrote — Running, Ready — and no
//! kubelet is left to correct it; a member whose API is lost with them says nothing at all, and
//! returns with that same stale status. Read alone, those pods would be taken to run on through
//! the outage, and every identity re-homed meanwhile to run twice. Whoever powers the machines
//! off and on (a test harness, an operator who saw the power go) says so, and this turns it into
//! observations: nothing of that member runs from the power-off; at the power-on, every pod
//! still there that is not being deleted runs again, as a returning kubelet restarts it, whatever
//! its status says (a pod being deleted is only stopped by the returning kubelet). The
//! observations it makes are recorded like any other, so a recording replays the same verdict.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use super::timeline::{Observation, State};

/// The members whose machines are off, and the last thing seen of each pod.
#[derive(Debug, Default)]
pub struct Machines {
    off: BTreeSet<String>,
    /// By member and uid, as the member's API reported it (not as adjusted).
    last: BTreeMap<(String, String), Observation>,
    /// Pods that were being deleted when their machines powered on: no kubelet starts them
    /// again, whatever their status says until they go (kwok, say, writes it once more).
    never_again: BTreeSet<(String, String)>,
}

impl Machines {
    /// `o` as it counts: a pod of a member whose machines are off runs nothing, whatever its
    /// status says.
    pub fn seen(&mut self, o: Observation) -> Observation {
        let key = (o.member.clone(), o.uid.clone());
        let stopped = self.off.contains(&o.member) || self.never_again.contains(&key);
        if o.state == State::Gone {
            self.last.remove(&key);
            self.never_again.remove(&key);
        } else {
            self.last.insert(key, o.clone());
        }
        match stopped && o.state.runs() {
            true => Observation { state: State::Stopped, ..o },
            false => o,
        }
    }

    /// `member`'s machines went off at `at`: each of its pods seen running stops then.
    pub fn power_off(&mut self, member: &str, at: Timestamp) -> Vec<Observation> {
        if !self.off.insert(member.to_string()) {
            return vec![];
        }
        self.of(member)
            .filter(|o| o.state.runs())
            .map(|o| Observation { at, state: State::Stopped, ..o.clone() })
            .collect()
    }

    /// `member`'s machines came back at `at`: each of its pods last reported running and not
    /// being deleted runs again, from then; those being deleted never run again.
    pub fn power_on(&mut self, member: &str, at: Timestamp) -> Vec<Observation> {
        if !self.off.remove(member) {
            return vec![];
        }
        let deleting: Vec<(String, String)> =
            self.of(member).filter(|o| o.deleting).map(|o| (o.member.clone(), o.uid.clone())).collect();
        self.never_again.extend(deleting);
        self.of(member).filter(|o| o.state.runs() && !o.deleting).map(|o| Observation { at, ..o.clone() }).collect()
    }

    fn of<'a>(&'a self, member: &'a str) -> impl Iterator<Item = &'a Observation> + 'a {
        self.last.values().filter(move |o| o.member == member)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::timeline::Timeline;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn obs(s: i64, member: &str, uid: &str, state: State, deleting: bool) -> Observation {
        Observation { at: at(s), member: member.into(), name: "redis-4".into(), uid: uid.into(), state, deleting }
    }

    /// Central runs redis-4, powers off; redis-4 is re-homed to west while central's API, back
    /// with its machines still off, shows the old pod Ready (being deleted or not); then its
    /// machines power on.
    fn outage(deleting: bool) -> (Timeline, Timeline) {
        let mut m = Machines::default();
        let mut t = Timeline::default();
        let feed = |list: Vec<Observation>, t: &mut Timeline| list.iter().for_each(|o| t.observe(o));
        feed(vec![m.seen(obs(0, "central", "a", State::Ready, false))], &mut t);
        feed(m.power_off("central", at(10)), &mut t);
        feed(vec![m.seen(obs(20, "west", "b", State::Ready, false))], &mut t);
        feed(vec![m.seen(obs(30, "central", "a", State::Ready, deleting))], &mut t);
        let before = t.clone();
        for o in m.power_on("central", at(40)) {
            t.observe(&o);
        }
        // The returning node writes the old pod's status once more before it goes.
        t.observe(&m.seen(obs(41, "central", "a", State::Ready, deleting)));
        (before, t)
    }

    #[test]
    fn a_powered_off_members_stale_status_runs_nothing_and_only_its_undeleted_pods_run_again() {
        for deleting in [false, true] {
            let (off, on) = outage(deleting);
            assert_eq!(off.overlaps(), vec![], "nothing of central ran while its machines were off");
            let a = off.incarnations().find(|i| i.uid == "a").unwrap();
            assert_eq!(a.ran, vec![(at(0), Some(at(10)))]);
            let o = on.overlaps();
            match deleting {
                // Its kubelet starts it again at the power-on.
                false => assert_eq!((o.len(), o.first().map(|o| o.from)), (1, Some(at(40))), "{o:?}"),
                // A pod being deleted is only stopped by the returning kubelet, whatever its
                // status says until it goes.
                true => assert_eq!(o, vec![]),
            }
        }
    }

    #[test]
    fn power_said_twice_changes_nothing_and_a_gone_pod_is_forgotten() {
        let mut m = Machines::default();
        let _ = m.seen(obs(0, "central", "a", State::Ready, false));
        assert_eq!(m.power_off("central", at(1)).len(), 1);
        assert_eq!(m.power_off("central", at(2)), vec![], "already off");
        let _ = m.seen(obs(3, "central", "a", State::Gone, true));
        assert_eq!(m.power_on("central", at(4)), vec![], "a gone pod does not come back");
        assert_eq!(m.power_on("central", at(5)), vec![], "already on");
    }
}
