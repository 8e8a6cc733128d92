//! The next safe steps from what is written and observed towards the target, under the
//! at-most-one rule: a cluster's spec gains ordinal k only when no other spec holds k and every
//! other cluster is confirmed not running k (observed absent since its last write, or fenced
//! and not answering; a fenced cluster that answers again counts like any other until its
//! pods are gone, since what it shows running runs whatever the fence said; an unreachable
//! cluster that was observed since its last write can run only what it was last seen to hold
//! or run, so it blocks just those);
//! shrink before grow; at most `maxConcurrentMoves` ordinals moving; for apps/v1 every written
//! slice stays contiguous.
//!
//! Every rule is a set operation on [`Ordinals`] (ranges), so a plan costs the number of
//! clusters times the number of ranges, never the number of ordinals.

use range_set_blaze::SortedDisjoint;

use super::{
    members::Member,
    sets,
    types::{Backend, ClusterObservation, Desired, Ordinal, Ordinals, Slice, Step},
};

/// Ordinals moving between clusters: released by every other cluster's spec, not yet Ready
/// where they go, and either recorded as moving (`recorded`, the durable `status.moves`) or
/// still running (terminating) somewhere else. An ordinal still written in another cluster's
/// spec is misplaced, not moving: it starts moving when that cluster releases it (a record of
/// it is stale: counting it would hold the limit against a move that cannot happen). This is
/// the set `maxConcurrentMoves` bounds; a coordinator plans again only once its own writes are
/// observed, so a release it decided is never missed here.
pub fn in_flight(members: &[Member<'_>], index: &Holders<'_>, recorded: &Ordinals) -> Ordinals {
    let mut out = Ordinals::new();
    for (i, m) in members.iter().enumerate() {
        let Some(want) = &m.target else { continue };
        let settled = || m.written.ranges() & m.obs.ready.ranges();
        // A cluster whose target is written and Ready has nothing in flight.
        if (want.ranges() - settled()).is_empty() {
            continue;
        }
        let (held_elsewhere, lingering) = (index.written_by_other(i), index.running_in_other(i));
        let unsettled = want.ranges() - settled() - held_elsewhere.ranges();
        out |= (unsettled & (recorded.ranges() | lingering.ranges())).into_range_set_blaze();
    }
    out
}

/// Which counted clusters hold which ordinals in their spec or run their pods, built once per
/// plan so that every question about the others of a cluster is a few set operations.
/// Clusters are the indices of the plan's [`Member`] list; a cluster counts when it is observed
/// and either unfenced or answering (see [`counts`]).
pub struct Holders<'a> {
    /// Spec ordinals of each member, when it is observed and counted.
    written: Vec<Option<&'a Ordinals>>,
    /// Ordinals in at least one counted spec, and in at least two.
    written_once: Ordinals,
    written_twice: Ordinals,
    /// Pods of each member, when it is observed and counted.
    running: Vec<Option<&'a Ordinals>>,
    /// Ordinals running in at least one counted cluster, and in at least two.
    running_once: Ordinals,
    running_twice: Ordinals,
    /// Members whose absences are not confirmations: counted and not observed since the last
    /// write, or never observed at all, so that their spec or pods may hold anything.
    unconfirmed: Vec<usize>,
}

impl<'a> Holders<'a> {
    /// Indexes the members.
    pub fn new(members: &'a [Member<'a>]) -> Self {
        let counted = |m: &Member<'_>| m.observed && counts(&m.obs);
        let written: Vec<Option<&Ordinals>> = members.iter().map(|m| counted(m).then_some(&m.written)).collect();
        let running: Vec<Option<&Ordinals>> = members.iter().map(|m| counted(m).then_some(&m.obs.pods)).collect();
        let (written_once, written_twice) = sets::once_and_twice(written.iter().flatten().copied());
        let (running_once, running_twice) = sets::once_and_twice(running.iter().flatten().copied());
        // An unreachable member observed since its last write is not among them: its spec is
        // the one last observed (spanset writes nothing to it while unreachable and reverts any
        // drift), so it can run pods only for what it holds or already runs, which the sets
        // above block; every other ordinal may go ahead among the healthy members.
        // A placement cluster missing from the observation was never seen: it may run anything.
        let unconfirmed = (0..members.len())
            .filter(|&i| {
                let m = &members[i];
                (counted(m) && !m.obs.observed_since_write) || !m.observed
            })
            .collect();
        Self { written, written_once, written_twice, running, running_once, running_twice, unconfirmed }
    }

    /// The ordinals that a counted cluster other than member `i` has in its spec.
    pub fn written_by_other(&self, i: usize) -> Ordinals {
        others(&self.written_once, &self.written_twice, self.written[i])
    }

    /// The ordinals that a counted cluster other than member `i` runs a pod for.
    pub fn running_in_other(&self, i: usize) -> Ordinals {
        others(&self.running_once, &self.running_twice, self.running[i])
    }

    /// The ordinals of `want` that every cluster other than member `i` is confirmed not to run
    /// (the at-most-one rule's condition for it to take them).
    pub fn free_for(&self, want: &Ordinals, i: usize) -> Ordinals {
        if self.unconfirmed.iter().any(|&u| u != i) {
            return Ordinals::new();
        }
        (want.ranges() - self.written_by_other(i).ranges() - self.running_in_other(i).ranges()).into_range_set_blaze()
    }
}

/// Whether a cluster's spec and pods hold their ordinals against the other clusters: always,
/// unless it is fenced and silent since its fence. A fence stands in for confirmations only
/// while none can be had: a fenced member that answers again shows what really runs there —
/// pods of its stale slice, or ones its own StatefulSet controller recreated before spanset's
/// shrink lands — and grows elsewhere wait for them like for any member's, also once it falls
/// silent again (found by the model checker).
pub fn counts(o: &ClusterObservation) -> bool {
    !o.fenced || o.reachable || o.answered_since_fence
}

/// What the others of a cluster hold, from what one or two hold and what the cluster itself
/// holds (`own`): the ordinals held by anyone but not by it, and those it shares.
fn others(once: &Ordinals, twice: &Ordinals, own: Option<&Ordinals>) -> Ordinals {
    match own {
        None => once.clone(),
        Some(own) => ((once.ranges() - own.ranges()) | (twice.ranges() & own.ranges())).into_range_set_blaze(),
    }
}

/// Whether `set` is one contiguous run.
pub fn contiguous(set: &Ordinals) -> bool {
    set.ranges_len() <= 1
}

/// The ordinals that the cluster they go to can take next: for apps/v1 only an end of its
/// slice (or anything, into an empty one); ordinals no target holds go nowhere and anything
/// goes for Advanced StatefulSets.
fn taken_next(d: &Desired, members: &[Member<'_>]) -> Ordinals {
    if d.backend != Backend::StatefulSet {
        return Ordinals::universe();
    }
    let mut runs: Vec<std::ops::RangeInclusive<Ordinal>> = Vec::new();
    for m in members {
        let Some(want) = &m.target else { continue };
        let w = &m.obs.written;
        if w.replicas == 0 {
            runs.extend(want.ranges());
        } else if w.is_contiguous() {
            let (lo, hi) = (u64::from(w.start), u64::from(w.start) + u64::from(w.replicas) - 1);
            for k in [lo.checked_sub(1), Some(hi + 1)].into_iter().flatten() {
                if let Ok(k) = Ordinal::try_from(k)
                    && want.contains(k)
                {
                    runs.push(k..=k);
                }
            }
        }
    }
    let placed: Ordinals = members.iter().filter_map(|m| m.target.as_ref()).flat_map(|t| t.ranges()).collect();
    runs.into_iter().collect::<Ordinals>() | !placed
}

/// Ordinals a shrink of `written` releases for apps/v1, with `budget` moves left: one end at a
/// time so the slice stays contiguous, preferring the top (as a StatefulSet removes pods); the
/// free ones (`free`) first, then, while the budget lasts, the ones their target cluster can
/// take next (`next`), or they would hold the budget while another move has to happen first.
///
/// Ordinal by ordinal this is a loop that takes the top if free, else the bottom if free, else
/// the top if it can go next, else the bottom if it can go next. Free picks do not move the
/// other end, so the loop falls into four runs: the free top, the free bottom, then from the top
/// the free or go-next ordinals while the budget lasts, then the same from the bottom.
fn release_ends(written: &Ordinals, keep: &Ordinals, free: &Ordinals, next: &Ordinals, budget: &mut u64) -> Ordinals {
    let leaving = written - keep;
    // The common case, a cluster at its target, costs one set difference.
    if leaving.is_empty() {
        return leaving;
    }
    let gratis = &leaving & free;
    let paid = &(&leaving - free) & next;
    let either = &gratis | &paid;
    let mut left = written.clone();
    let mut out = Ordinals::new();
    for (within, from_top) in [(&gratis, true), (&gratis, false), (&either, true), (&either, false)] {
        let run = if from_top { sets::top_run(&left, within) } else { sets::bottom_run(&left, within) };
        // The run as far as the budget pays for the go-next ordinals in it, counted from its end.
        let costs = &run & &paid;
        let run = if costs.len() <= *budget {
            *budget -= costs.len();
            run
        } else if from_top {
            let last_paid = sets::highest(&costs, *budget + 1).first().expect("more costs than budget");
            *budget = 0;
            sets::above(&run, last_paid)
        } else {
            let last_paid = sets::lowest(&costs, *budget + 1).last().expect("more costs than budget");
            *budget = 0;
            sets::below(&run, last_paid)
        };
        left = &left - &run;
        out |= run;
    }
    out
}

/// Computes the shrinks and grows that are safe now, and whether the plan is stalled by the
/// limit (see [`super::Plan::stalled`]). `members` is the plan's [`Member`] list: the
/// placement's clusters first, in placement order. `parked` are ordinals landing in a
/// neighbour (see below): they count against the limit but are no move to release.
///
/// Liveness: apps/v1 slices can cross each other (after partitions and spec edits), so that no
/// ordinal any cluster must give up can be taken next by its destination. Then, with nothing
/// in flight that its destination could take by waiting, one such ordinal is released anyway,
/// within `maxConcurrentMoves` (the limit holds at every instant: it is what operators bound
/// disruption with); its destination takes it once the slices in its way have moved. When the
/// moves in flight fill the limit and none can land (a spec edit retargeted them), one of them
/// lands in a neighbour that can take it next instead — it is *parked* there, its pod running
/// again — so that the limit frees up for the moves in its way; it moves on later like any
/// misplaced ordinal. The move parks in the neighbour closest to its target even beyond that
/// one's `maxReplicas` (see [`Room`]): a promise must give way for the plan to go on, and a
/// cluster over its maximum for a while costs no availability, whereas a release beyond the
/// limit takes one more pod down. A release made anyway that would land back where it left
/// is not made ([`futile`]): a landing, a [`bridge`] over unused ordinals or a detour through a
/// neighbour beyond its maximum goes first. Only when none of these exists is the plan
/// stalled.
pub fn next_steps(
    d: &Desired,
    members: &[Member<'_>],
    holders: &Holders<'_>,
    moving: &Ordinals,
    parked: &Ordinals,
) -> (Vec<Step>, bool) {
    // A parked ordinal that no cluster holds yet (its landing was not written, or failed)
    // lands first.
    if let Some(step) = land(d, members, holders, parked) {
        return (vec![step], false);
    }
    let (steps, waiting_helps) = next_steps_with(d, members, holders, moving, parked, false);
    if !steps.is_empty() || waiting_helps {
        return (steps, false);
    }
    let in_flight = moving.len() + parked.len();
    let room = in_flight < u64::from(d.max_concurrent_moves);
    if room && let Some(step) = detour(d, members, Room::UnderMax) {
        return (vec![step], false);
    }
    let steps = next_steps_with(d, members, holders, moving, parked, true).0;
    let unused = moving | parked;
    if !steps.is_empty() {
        // A release anyway whose ordinals could only land back where they came from would
        // be undone next round, for ever: land a move in flight instead, bridge the gap in
        // the way, or as the last resort detour through a neighbour beyond its maximum.
        if futile(d, members, &steps)
            && let Some(step) = land(d, members, holders, moving)
                .or_else(|| bridge(d, members, holders, &unused))
                .or_else(|| room.then(|| detour(d, members, Room::Beyond)).flatten())
        {
            return (vec![step], false);
        }
        return (steps, false);
    }
    if moving.is_empty() {
        return (steps, false);
    }
    if let Some(step) = land(d, members, holders, moving).or_else(|| bridge(d, members, holders, &unused)) {
        return (vec![step], false);
    }
    (steps, !room)
}

/// Whether stuck `steps` are releases only, each of ordinals that would land back in the
/// slice they left: their target cluster holds a slice already (an empty one could start from
/// anywhere), and of the slices that would border them the one [`land`] picks (closest to
/// the target, first of equals) is the releaser's.
fn futile(d: &Desired, members: &[Member<'_>], steps: &[Step]) -> bool {
    steps.iter().all(|s| match s {
        Step::Grow { .. } => false,
        Step::Shrink { cluster, releases, .. } => {
            let Some(h) = members.iter().position(|m| m.name == cluster) else { return false };
            releases.iter().all(|k| {
                let Some(t) = target_index(members, k).filter(|&t| !members[t].written.is_empty()) else {
                    return false;
                };
                neighbours(d, members, k, Room::Beyond).chain([h]).min_by_key(|&i| (i.abs_diff(t), i)) == Some(h)
            })
        }
    })
}

/// Whether a landing may take a neighbour to more than its `maxReplicas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    /// Only neighbours below their maximum: detours and bridges that can be so.
    UnderMax,
    /// Any neighbour: every landing (closest to the target first, one under its maximum first
    /// among equals), and detours and bridges as the last resort. The moves that would make
    /// room are held by `maxConcurrentMoves` (the state the liveness regression tests in
    /// `crates/spanset-plan/tests/properties/plan_props.rs` start from); the ordinal runs there, beyond that cluster's
    /// maximum, until it moves on like any misplaced ordinal: the target is within every
    /// maximum.
    Beyond,
}

/// The placement index of the cluster whose target holds `k`, if any.
fn target_index(members: &[Member<'_>], k: Ordinal) -> Option<usize> {
    members.iter().position(|m| m.target.as_ref().is_some_and(|t| t.contains(k)))
}

/// Placement members that could take `k` next as a neighbour: observed, reachable, unfenced,
/// compatible, with an apps/v1 slice that `k` extends at one end and, unless `room` is
/// [`Room::Beyond`], room under `maxReplicas`.
fn neighbours<'m>(
    d: &'m Desired,
    members: &'m [Member<'m>],
    k: Ordinal,
    room: Room,
) -> impl Iterator<Item = usize> + 'm {
    (0..members.len().min(d.clusters.len())).filter(move |&i| {
        let w = &members[i].written;
        let adjacent = match (w.first(), w.last()) {
            (Some(lo), Some(hi)) => lo.checked_sub(1) == Some(k) || hi.checked_add(1) == Some(k),
            _ => false,
        };
        usable(&members[i]) && adjacent && (room == Room::Beyond || w.len() < max_replicas(d, i))
    })
}

/// Whether a member can be written a grow: observed, reachable, unfenced and compatible.
fn usable(m: &Member<'_>) -> bool {
    m.observed && m.obs.reachable && !m.obs.fenced && m.obs.compatible
}

/// Placement cluster `i`'s `maxReplicas` (no bound: the largest).
fn max_replicas(d: &Desired, i: usize) -> u64 {
    u64::from(d.clusters[i].max_replicas.unwrap_or(u32::MAX))
}

/// The ordinals in a counted cluster's spec (see [`counts`]).
fn held(members: &[Member<'_>]) -> Ordinals {
    members.iter().filter(|m| counts(&m.obs)).flat_map(|m| m.written.ranges()).collect()
}

/// Stuck (no ordinal can go straight to its target): a release from the end of a slice that a
/// neighbour strictly closer to the ordinal's target (in placement order) can take next. The
/// sum over ordinals of the distance from holder to target falls with every such detour, so
/// detours end; [`land`] then puts the ordinal in the closest such neighbour.
fn detour(d: &Desired, members: &[Member<'_>], room: Room) -> Option<Step> {
    if d.backend != Backend::StatefulSet {
        return None;
    }
    let range = d.ordinals();
    for (h, m) in members.iter().enumerate() {
        let (o, w) = (&m.obs, &m.written);
        if !m.observed || !o.reachable || o.fenced {
            continue;
        }
        for k in [w.last(), w.first()].into_iter().flatten() {
            if m.target.as_ref().is_some_and(|t| t.contains(k)) || !range.contains(k) {
                continue;
            }
            let Some(t) = target_index(members, k) else { continue };
            let closer = |x: usize| x != h && x.abs_diff(t) < h.abs_diff(t);
            // The neighbour must extend its slice over k once h has let k go.
            if neighbours(d, members, k, room).any(closer) {
                let releases: Ordinals = std::iter::once(k).collect();
                let to = Slice::from_ordinals(&(w - &releases));
                return Some(Step::Shrink { cluster: m.name.to_string(), to, releases });
            }
        }
    }
    None
}

/// Stuck, and no detour either because what must move is not adjacent to where it could go:
/// a grow over the gap of unused ordinals between a slice and either the facing end of a slice
/// that holds it misplaced, or an ordinal in flight that no usable slice borders (it could land
/// nowhere). The grower is the cluster closest to that ordinal's target in placement order
/// (for a misplaced end, strictly closer than its holder), so that the next plan finds a
/// [`detour`] or a landing for it. The gap's ordinals are free for the grower by the
/// at-most-one rule, within the range and no move (nobody holds, runs or is landing them), so
/// the grow costs no disruption: new pods start, and the ones the grower's target does not
/// hold move on later like any misplaced ordinal. Without it a move released anyway had
/// nowhere to land but back where it came from, again and again, and a move in flight beside
/// no slice held `maxConcurrentMoves` for good (both found by `plan_props`).
fn bridge(d: &Desired, members: &[Member<'_>], holders: &Holders<'_>, moving: &Ordinals) -> Option<Step> {
    bridging(d, members, holders, moving, Room::UnderMax)
        .or_else(|| bridging(d, members, holders, moving, Room::Beyond))
}

/// [`bridge`], by a grower that stays within its `maxReplicas` unless `room` is
/// [`Room::Beyond`] (the last resort, as for a landing: the target is within every maximum, so
/// the ordinals beyond it move on later).
fn bridging(d: &Desired, members: &[Member<'_>], holders: &Holders<'_>, moving: &Ordinals, room: Room) -> Option<Step> {
    if d.backend != Backend::StatefulSet {
        return None;
    }
    let unused = &d.ordinals() - moving;
    let held = held(members);
    let mut best: Option<(usize, usize, Ordinals)> = None;
    for (i, m) in members.iter().enumerate().take(d.clusters.len()) {
        let (Some(lo), Some(hi)) = (m.written.first(), m.written.last()) else { continue };
        if !usable(m) {
            continue;
        }
        let free = holders.free_for(&unused, i);
        let up = hi.checked_add(1).and_then(|k| free.range_at(k).map(|r| (k..=*r.end(), r.end().checked_add(1))));
        let down = lo.checked_sub(1).and_then(|k| free.range_at(k).map(|r| (*r.start()..=k, r.start().checked_sub(1))));
        for (gap, beyond) in [up, down].into_iter().flatten() {
            let Some(k) = beyond else { continue };
            let Some(t) = target_index(members, k) else { continue };
            let worth = match members.iter().position(|o| o.written.contains(k)) {
                Some(h) => {
                    let misplaced = !members[h].target.as_ref().is_some_and(|w| w.contains(k));
                    misplaced && usable(&members[h]) && i.abs_diff(t) < h.abs_diff(t)
                }
                None => {
                    moving.contains(k) && !held.contains(k) && neighbours(d, members, k, Room::Beyond).next().is_none()
                }
            };
            let gap: Ordinals = std::iter::once(gap).collect();
            let fits = room == Room::Beyond || m.written.len() + gap.len() <= max_replicas(d, i);
            if worth && fits && best.as_ref().is_none_or(|(dist, _, _)| i.abs_diff(t) < *dist) {
                best = Some((i.abs_diff(t), i, gap));
            }
        }
    }
    let (_, i, gap) = best?;
    let to = Slice::from_ordinals(&(&members[i].written | &gap));
    Some(Step::Grow { cluster: members[i].name.to_string(), to, acquires: gap })
}

/// Where an ordinal in flight that no cluster holds can land now, if anywhere: the neighbour
/// ([`neighbours`]) closest to its target in placement order, one under its maximum first
/// among equals, else beyond it ([`Room::Beyond`]), then the first of equals; if the ordinal is
/// free for it (the at-most-one rule's condition).
fn land(d: &Desired, members: &[Member<'_>], holders: &Holders<'_>, moving: &Ordinals) -> Option<Step> {
    if d.backend != Backend::StatefulSet {
        return None;
    }
    for k in (moving - &held(members)).iter() {
        let Some(t) = target_index(members, k) else { continue };
        let one: Ordinals = std::iter::once(k).collect();
        // Closest to the target first: a neighbour under its maximum but farther away would
        // be where a detour beyond a maximum came from, and the ordinal would go back there.
        let over = |i: usize| members[i].written.len() >= max_replicas(d, i);
        let best = neighbours(d, members, k, Room::Beyond)
            .filter(|&i| holders.free_for(&one, i).contains(k))
            .min_by_key(|&i| (i.abs_diff(t), over(i), i));
        if let Some(i) = best {
            let to = Slice::from_ordinals(&(&members[i].written | &one));
            return Some(Step::Grow { cluster: members[i].name.to_string(), to, acquires: one });
        }
    }
    None
}

fn next_steps_with(
    d: &Desired,
    members: &[Member<'_>],
    holders: &Holders<'_>,
    moving: &Ordinals,
    parked: &Ordinals,
    stuck: bool,
) -> (Vec<Step>, bool) {
    let contiguous_backend = d.backend == Backend::StatefulSet;
    let range = d.ordinals();
    let next = if stuck { Ordinals::universe() } else { taken_next(d, members) };
    // Some move in flight can land where it goes once confirmations and readiness arrive, or
    // is written there already and lands once Ready (a stall message would ask for a higher
    // limit that nothing needs).
    let landing = members
        .iter()
        .any(|m| m.target.as_ref().is_some_and(|t| !(t.ranges() & m.written.ranges() & moving.ranges()).is_empty()));
    let waiting_helps = landing || !(moving.ranges() & next.ranges()).is_empty();
    let mut budget = u64::from(d.max_concurrent_moves).saturating_sub(moving.len() + parked.len());
    if stuck {
        budget = budget.min(1);
    }
    let mut steps = Vec::new();
    // Shrinks: every cluster we can write to gives up what its target does not hold. Clusters
    // not in the placement at all (removed from the spec) hold nothing in the target.
    // Leaving the global range is no move. A fenced cluster that answers again gives
    // everything up at once: its ordinals were re-homed while it was declared dead.
    let free_unless_fenced = (!&range) | moving;
    let everything = Ordinals::universe();
    for m in members {
        let (name, o, written, target) = (m.name, &m.obs, &m.written, m.target.as_ref());
        if !o.reachable {
            continue;
        }
        // The common case, a cluster whose spec holds nothing outside its target, costs one
        // lazy difference and no allocation.
        if target.map_or(written.is_empty(), |t| (written.ranges() - t.ranges()).is_empty()) {
            continue;
        }
        let keep = target.map(|t| t & written).unwrap_or_default();
        let free = if o.fenced { &everything } else { &free_unless_fenced };
        let releases = if contiguous_backend {
            release_ends(written, &keep, free, &next, &mut budget)
        } else {
            // Any ordinal may go: the free ones, then moves from the top while the budget lasts.
            let leaving = written - &keep;
            let paid = sets::highest(&(&leaving - free), budget);
            budget -= paid.len();
            (&leaving & free) | paid
        };
        if !releases.is_empty() {
            let to = Slice::from_ordinals(&(written - &releases));
            steps.push(Step::Shrink { cluster: name.to_string(), to, releases });
        }
    }
    // Grows: a cluster takes the ordinals of its target that every other cluster is confirmed
    // not to run, keeping its slice contiguous for apps/v1.
    for (i, m) in members.iter().enumerate().take(d.clusters.len()) {
        let (o, written) = (&m.obs, &m.written);
        let Some(want) = &m.target else { continue };
        if !o.reachable || o.fenced || !o.compatible {
            continue;
        }
        // Nothing to take when the spec holds the whole target already; and one step per
        // cluster per plan: a cluster that shrinks now grows next round (both writes would be
        // conditional on the same resourceVersion, so the second would always fail).
        if (want.ranges() - written.ranges()).is_empty() || steps.iter().any(|s: &Step| s.cluster() == m.name) {
            continue;
        }
        let free = holders.free_for(want, i);
        let acquires = if contiguous_backend {
            // Into an empty slice the first free ordinal, then outwards from both ends while
            // the ordinals are wanted and free.
            let mut acquires = Ordinals::new();
            let ends = match (written.first(), written.last()) {
                (Some(lo), Some(hi)) => Some((lo, hi)),
                _ => free.first().map(|k| {
                    acquires.insert(k);
                    (k, k)
                }),
            };
            if let Some((lo, hi)) = ends {
                if let Some(up) = hi.checked_add(1)
                    && let Some(r) = free.range_at(up)
                {
                    acquires.ranges_insert(up..=*r.end());
                }
                if let Some(down) = lo.checked_sub(1)
                    && let Some(r) = free.range_at(down)
                {
                    acquires.ranges_insert(*r.start()..=down);
                }
            }
            acquires
        } else {
            &free - written
        };
        if !acquires.is_empty() {
            let to = Slice::from_ordinals(&(written | &acquires));
            steps.push(Step::Grow { cluster: m.name.to_string(), to, acquires });
        }
    }
    (steps, waiting_helps)
}
