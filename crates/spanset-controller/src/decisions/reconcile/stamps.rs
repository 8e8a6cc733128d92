//! Stage 4: stamps and creates. Every member StatefulSet not written in this term (or with
//! another template, someone's edit, an old partition) is written again with the slice it
//! holds, so that a stale leader's later writes fail with 409; a placement member without one
//! gets an empty one, unless a member is still starting. A fenced member that answers again
//! is shrunk to nothing first, then its pods are deleted. No slice changes in a round that
//! stamps.

use spanset_plan::{ClusterObservation, Observed, Ordinal, Slice};

use super::{Inputs, PodDelete, StsWrite, scope::Scope};

/// The stamps of this round.
pub(super) struct Stamps {
    /// Placement members whose watcher has not reported a first listing yet (see
    /// [`super::Decision::starting`]).
    pub starting: Vec<String>,
    /// The stamps, creates and shrinks of fenced members.
    pub writes: Vec<StsWrite>,
    /// Members whose supporting objects are ensured (those created now).
    pub supporting: Vec<String>,
    /// Pods to delete in fenced members that answer again.
    pub pod_deletes: Vec<PodDelete>,
}

impl Stamps {
    /// Whether this round stamps (and so changes no slice).
    pub fn stamping(&self) -> bool {
        !self.writes.is_empty()
    }
}

/// The stamps, creates and fenced members' shrinks and pod deletes of this round.
pub(super) fn stamps(cx: &Scope<'_>, obs: &Observed, cursor: Ordinal) -> Stamps {
    let starting = starting_members(cx.inp, &cx.placement);
    let mut writes = Vec::new();
    let mut supporting = Vec::new();
    for (name, o) in obs.iter().filter(|(_, o)| o.reachable) {
        let write = stamp(cx, name, o, cursor, starting.is_empty());
        if write.as_ref().is_some_and(|w| w.expected_rv.is_none()) {
            supporting.push(name.clone());
        }
        writes.extend(write);
    }
    Stamps { starting, writes, supporting, pod_deletes: fenced_pod_deletes(cx, obs) }
}

/// The write that stamps reachable member `name`, if one is due (`may_create`: no member is
/// starting, so a missing StatefulSet may be created).
fn stamp(cx: &Scope<'_>, name: &str, o: &ClusterObservation, cursor: Ordinal, may_create: bool) -> Option<StsWrite> {
    let view = cx.view_of(name).expect("observed members have views");
    let stored = view.federation.sts.as_deref();
    let write = |slice: &Slice, expected_rv: Option<u64>, new_template: bool| {
        let (object, recreate) = cx.statefulset(slice, cursor, stored);
        StsWrite { cluster: name.to_string(), object, expected_rv, new_template, recreate }
    };
    match &view.federation.sts {
        Some(s) if s.deleting => None,
        // A fenced member that answers again: the first write there gives up every
        // ordinal, which were re-homed while it was declared dead.
        Some(s) if o.fenced && s.slice.replicas > 0 && cx.inp.rules.shrink_first => {
            Some(write(&Slice::empty(), Some(s.rv), false))
        }
        // A write that got no answer may still land while the object is at its precondition:
        // a stamp conditional on the version read voids it (whichever lands first, the other
        // fails), and until then nothing there confirms anything.
        Some(s) if view.federation.uncertain_write.is_some() && cx.inp.rules.uncertain_writes => {
            Some(write(&s.slice, Some(s.rv), false))
        }
        // Stamped in another term, another template, someone's edit, or the rollout's
        // cursor moved (the member's partition is its share of it).
        Some(s)
            if (s.term != Some(cx.inp.term) && cx.inp.rules.term_check)
                || s.template_hash.as_deref() != Some(cx.hash.as_str())
                || !view.federation.spec_is_ours()
                || cx.partition(s, &s.slice, cursor).is_some_and(|p| p != s.partition) =>
        {
            Some(write(&s.slice, Some(s.rv), s.template_hash.as_deref() != Some(cx.hash.as_str())))
        }
        Some(_) => None,
        // Nothing new is created anywhere while a member is still starting: whether it
        // refuses what the federation writes (its dry run) is not known yet.
        None if cx.placement.contains(name) && o.compatible && !o.fenced && may_create => {
            Some(write(&Slice::empty(), None, true))
        }
        None => None,
    }
}

/// A fenced member that answers again and whose shrink is stored: every pod of the
/// federation still there goes now, whatever its StatefulSet controller's order.
fn fenced_pod_deletes(cx: &Scope<'_>, obs: &Observed) -> Vec<PodDelete> {
    let mut pod_deletes = Vec::new();
    for name in obs.iter().filter(|(_, o)| o.fenced && o.reachable).map(|(n, _)| n) {
        let view = cx.view_of(name).expect("observed members have views");
        let f = &view.federation;
        if f.sts.as_ref().is_some_and(|s| !s.deleting && s.slice.replicas == 0) {
            let pod_name = |k: &Ordinal| format!("{}-{k}", cx.name());
            pod_deletes.extend(f.pods.iter().filter(|(_, p)| !p.deleting).map(|(k, p)| PodDelete {
                cluster: name.clone(),
                name: pod_name(k),
                uid: p.uid.clone(),
            }));
        }
    }
    pod_deletes
}

/// See [`super::Decision::starting`].
fn starting_members(inp: &Inputs<'_>, placement: &std::collections::BTreeSet<&str>) -> Vec<String> {
    placement
        .iter()
        .filter(|n| {
            inp.members.get(**n).is_some_and(|m| {
                m.exists
                    && m.unusable.is_none()
                    && m.duplicate.is_none()
                    && !m.fenced
                    && m.view.as_ref().is_none_or(|v| !v.synced && v.failure.is_none())
            })
        })
        .map(|n| n.to_string())
        .collect()
}
