//! The next safe steps from what is written and observed towards the target, under the
//! at-most-one rule: a cluster's spec gains ordinal k only when no other spec holds k and every
//! other cluster is confirmed not running k (observed absent since its last write, or fenced);
//! shrink before grow; at most `maxConcurrentMoves` ordinals moving; for apps/v1 every written
//! slice stays contiguous.

use std::collections::{BTreeMap, BTreeSet};

use super::types::{Backend, ClusterObservation, Desired, Observed, Ordinal, Slice, Step};

/// A cluster's observation, or the one of a cluster never seen (unreachable, nothing written).
pub fn observation<'a>(obs: &'a Observed, name: &str) -> std::borrow::Cow<'a, ClusterObservation> {
    match obs.get(name) {
        Some(o) => std::borrow::Cow::Borrowed(o),
        None => std::borrow::Cow::Owned(ClusterObservation::default()),
    }
}

/// Ordinals moving between clusters: released by every other cluster's spec, not yet Ready
/// where they go, and either recorded as moving (`recorded`, the durable `status.moves`) or
/// still running (terminating) somewhere else. An ordinal still written in another cluster's
/// spec is misplaced, not moving: it starts moving when that cluster releases it.
pub fn in_flight(
    targets: &BTreeMap<String, BTreeSet<Ordinal>>,
    obs: &Observed,
    recorded: &BTreeSet<Ordinal>,
) -> BTreeSet<Ordinal> {
    let index = Holders::new(obs);
    let mut out = BTreeSet::new();
    for (c, want) in targets {
        let here = observation(obs, c);
        for &k in want {
            let settled = here.written.contains(k) && here.ready.contains(&k);
            let held_elsewhere = index.written_by_other(k, c);
            let lingering = index.running_in_other(k, c);
            if !settled && !held_elsewhere && (recorded.contains(&k) || lingering) {
                out.insert(k);
            }
        }
    }
    out
}

/// Which unfenced clusters hold each ordinal in their spec or run its pod, built once per plan
/// so that every question about an ordinal is a lookup.
pub struct Holders<'a> {
    written: BTreeMap<Ordinal, Vec<&'a str>>,
    running: BTreeMap<Ordinal, Vec<&'a str>>,
    /// Unfenced clusters whose absences are not confirmations (unreachable, or not observed
    /// since the last write).
    unconfirmed: Vec<&'a str>,
}

impl<'a> Holders<'a> {
    /// Indexes the observation.
    pub fn new(obs: &'a Observed) -> Self {
        let mut written: BTreeMap<Ordinal, Vec<&str>> = BTreeMap::new();
        let mut running: BTreeMap<Ordinal, Vec<&str>> = BTreeMap::new();
        let mut unconfirmed = Vec::new();
        // A fenced cluster counts again once it answers: what it really runs holds ordinals.
        for (name, o) in obs.iter().filter(|(_, o)| !o.fenced || o.reachable) {
            for k in o.written.ordinals() {
                written.entry(k).or_default().push(name);
            }
            for &k in &o.pods {
                running.entry(k).or_default().push(name);
            }
            // Kept in step with the range planner: an unreachable member observed since its
            // last write blocks only what it holds or runs (its spec is the one last observed).
            if !o.observed_since_write {
                unconfirmed.push(name.as_str());
            }
        }
        Self { written, running, unconfirmed }
    }

    /// Counts placement clusters missing from the observation as unconfirmed: never seen,
    /// they may run anything.
    pub fn with_unobserved(mut self, placement: impl Iterator<Item = &'a str>, obs: &Observed) -> Self {
        self.unconfirmed.extend(placement.filter(|c| !obs.contains_key(*c)));
        self
    }

    /// Whether an unfenced cluster other than `c` has `k` in its spec.
    pub fn written_by_other(&self, k: Ordinal, c: &str) -> bool {
        self.written.get(&k).is_some_and(|hs| hs.iter().any(|h| *h != c))
    }

    /// Whether an unfenced cluster other than `c` runs a pod for `k`.
    pub fn running_in_other(&self, k: Ordinal, c: &str) -> bool {
        self.running.get(&k).is_some_and(|hs| hs.iter().any(|h| *h != c))
    }

    /// Whether every cluster other than `c` is confirmed not to run `k` (the at-most-one rule's
    /// condition for `c` to take `k`).
    pub fn free_for(&self, k: Ordinal, c: &str) -> bool {
        !self.written_by_other(k, c) && !self.running_in_other(k, c) && self.unconfirmed.iter().all(|u| *u == c)
    }
}

/// Whether `set` is one contiguous run.
pub fn contiguous(set: &BTreeSet<Ordinal>) -> bool {
    match (set.first(), set.last()) {
        (Some(lo), Some(hi)) => (hi - lo) as usize + 1 == set.len(),
        _ => true,
    }
}

/// Computes the shrinks and grows that are safe now; when none is and nothing moves, one
/// release whose destination cannot take it next (slices that cross each other).
pub fn next_steps(
    d: &Desired,
    obs: &Observed,
    targets: &BTreeMap<String, BTreeSet<Ordinal>>,
    moving: &BTreeSet<Ordinal>,
    parked: &BTreeSet<Ordinal>,
) -> (Vec<Step>, bool) {
    if let Some(step) = land(d, obs, targets, parked) {
        return (vec![step], false);
    }
    let (steps, waiting_helps) = next_steps_with(d, obs, targets, moving, parked, false);
    if !steps.is_empty() || waiting_helps {
        return (steps, false);
    }
    let room = moving.len() + parked.len() < d.max_concurrent_moves as usize;
    if room && let Some(step) = detour(d, obs, targets, false) {
        return (vec![step], false);
    }
    let steps = next_steps_with(d, obs, targets, moving, parked, true).0;
    let unused: BTreeSet<Ordinal> = moving.union(parked).copied().collect();
    if !steps.is_empty() {
        if futile(d, obs, targets, &steps)
            && let Some(step) = land(d, obs, targets, moving)
                .or_else(|| bridge(d, obs, targets, &unused))
                .or_else(|| room.then(|| detour(d, obs, targets, true)).flatten())
        {
            return (vec![step], false);
        }
        return (steps, false);
    }
    if moving.is_empty() {
        return (steps, false);
    }
    match land(d, obs, targets, moving).or_else(|| bridge(d, obs, targets, &unused)) {
        Some(step) => (vec![step], false),
        None => (steps, !room),
    }
}

/// Kept in step with the range planner: stuck releases only, each of ordinals whose target
/// cluster holds a slice and that the landing rule would put back in the releaser.
fn futile(d: &Desired, obs: &Observed, targets: &BTreeMap<String, BTreeSet<Ordinal>>, steps: &[Step]) -> bool {
    let names = member_names(d, obs);
    steps.iter().all(|s| match s {
        Step::Grow { .. } => false,
        Step::Shrink { cluster, releases, .. } => {
            let Some(h) = names.iter().position(|n| n == cluster) else { return false };
            releases.iter().all(|&k| {
                let Some(t) = target_index(&names, targets, k) else { return false };
                if observation(obs, &names[t]).written.replicas == 0 {
                    return false;
                }
                let mut candidates = neighbours(d, obs, k, true);
                candidates.push(h);
                candidates.into_iter().min_by_key(|&i| (i.abs_diff(t), i)) == Some(h)
            })
        }
    })
}

/// Kept in step with the range planner: a grow over the unused ordinals between a slice and
/// the misplaced end of another (by a cluster strictly closer to that end's target), or an
/// ordinal in flight no slice borders; the closest such cluster to the target, first of equals.
fn bridge(
    d: &Desired,
    obs: &Observed,
    targets: &BTreeMap<String, BTreeSet<Ordinal>>,
    unused: &BTreeSet<Ordinal>,
) -> Option<Step> {
    bridging(d, obs, targets, unused, false).or_else(|| bridging(d, obs, targets, unused, true))
}

/// One pass of [`bridge`]: growers within their maximum, or any (`beyond_max`).
fn bridging(
    d: &Desired,
    obs: &Observed,
    targets: &BTreeMap<String, BTreeSet<Ordinal>>,
    unused: &BTreeSet<Ordinal>,
    beyond_max: bool,
) -> Option<Step> {
    if d.backend != Backend::StatefulSet {
        return None;
    }
    let names = member_names(d, obs);
    let holders = Holders::new(obs).with_unobserved(d.clusters.iter().map(|c| c.name.as_str()), obs);
    let usable = |o: &ClusterObservation| o.reachable && !o.fenced && o.compatible;
    let in_range = |k: Ordinal| k >= d.start && u64::from(k) < u64::from(d.start) + u64::from(d.replicas);
    let mut best: Option<(usize, usize, BTreeSet<Ordinal>)> = None;
    for (i, c) in d.clusters.iter().enumerate() {
        let Some(o) = obs.get(&c.name) else { continue };
        let w = o.written.ordinals();
        let (Some(&lo), Some(&hi)) = (w.first(), w.last()) else { continue };
        if !usable(o) {
            continue;
        }
        let open = |k: Ordinal| in_range(k) && !unused.contains(&k) && holders.free_for(k, &c.name);
        let mut up = BTreeSet::new();
        let mut k = u64::from(hi) + 1;
        while let Ok(o32) = Ordinal::try_from(k)
            && open(o32)
        {
            up.insert(o32);
            k += 1;
        }
        let up_beyond = Ordinal::try_from(k).ok();
        let mut down = BTreeSet::new();
        let mut k = i64::from(lo) - 1;
        while k >= 0 && open(k as Ordinal) {
            down.insert(k as Ordinal);
            k -= 1;
        }
        let down_beyond = (k >= 0).then_some(k as Ordinal);
        for (gap, beyond) in [(up, up_beyond), (down, down_beyond)] {
            let Some(k) = beyond else { continue };
            if gap.is_empty() {
                continue;
            }
            let Some(t) = target_index(&names, targets, k) else { continue };
            let holder = names.iter().position(|n| obs.get(n).is_some_and(|o| o.written.ordinals().contains(&k)));
            let worth = match holder {
                Some(h) => {
                    let misplaced = !targets.get(&names[h]).is_some_and(|t| t.contains(&k));
                    misplaced && usable(&obs[&names[h]]) && i.abs_diff(t) < h.abs_diff(t)
                }
                None => {
                    unused.contains(&k) && !holders.written_by_other(k, "") && neighbours(d, obs, k, true).is_empty()
                }
            };
            let fits = beyond_max || (w.len() + gap.len()) as u64 <= u64::from(c.max_replicas.unwrap_or(u32::MAX));
            if worth && fits && best.as_ref().is_none_or(|(dist, _, _)| i.abs_diff(t) < *dist) {
                best = Some((i.abs_diff(t), i, gap));
            }
        }
    }
    let (_, i, gap) = best?;
    let c = &d.clusters[i];
    let to: BTreeSet<Ordinal> = obs[&c.name].written.ordinals().union(&gap).copied().collect();
    Some(Step::Grow { cluster: c.name.clone(), to: Slice::from_ordinals(&to), acquires: gap.into_iter().collect() })
}

/// Kept in step with the range planner: a landing in the neighbour closest to the target,
/// one under its maximum first among equals.
fn land(
    d: &Desired,
    obs: &Observed,
    targets: &BTreeMap<String, BTreeSet<Ordinal>>,
    moving: &BTreeSet<Ordinal>,
) -> Option<Step> {
    landing(d, obs, targets, moving, true)
}

/// The placement clusters in order, then the observed ones the placement no longer lists.
fn member_names(d: &Desired, obs: &Observed) -> Vec<String> {
    let mut names: Vec<String> = d.clusters.iter().map(|c| c.name.clone()).collect();
    names.extend(obs.keys().filter(|n| !d.clusters.iter().any(|c| &c.name == *n)).cloned());
    names
}

fn target_index(names: &[String], targets: &BTreeMap<String, BTreeSet<Ordinal>>, k: Ordinal) -> Option<usize> {
    names.iter().position(|n| targets.get(n).is_some_and(|t| t.contains(&k)))
}

/// Placement members whose slice `k` extends at one end, usable and with room (any room when
/// `beyond_max`).
fn neighbours(d: &Desired, obs: &Observed, k: Ordinal, beyond_max: bool) -> Vec<usize> {
    (0..d.clusters.len())
        .filter(|&i| {
            let c = &d.clusters[i];
            let Some(o) = obs.get(&c.name) else { return false };
            let w = o.written.ordinals();
            let adjacent = match (w.first(), w.last()) {
                (Some(&lo), Some(&hi)) => lo.checked_sub(1) == Some(k) || hi.checked_add(1) == Some(k),
                _ => false,
            };
            o.reachable
                && !o.fenced
                && o.compatible
                && adjacent
                && (beyond_max || (w.len() as u64) < u64::from(c.max_replicas.unwrap_or(u32::MAX)))
        })
        .collect()
}

/// Kept in step with the range planner: stuck, a release from a slice's end that a neighbour
/// strictly closer to the ordinal's target can take next.
fn detour(
    d: &Desired,
    obs: &Observed,
    targets: &BTreeMap<String, BTreeSet<Ordinal>>,
    beyond_max: bool,
) -> Option<Step> {
    if d.backend != Backend::StatefulSet {
        return None;
    }
    let names = member_names(d, obs);
    let in_range = |k: Ordinal| k >= d.start && u64::from(k) < u64::from(d.start) + u64::from(d.replicas);
    for (h, name) in names.iter().enumerate() {
        let Some(o) = obs.get(name) else { continue };
        if !o.reachable || o.fenced {
            continue;
        }
        let w = o.written.ordinals();
        for k in [w.last().copied(), w.first().copied()].into_iter().flatten() {
            if targets.get(name).is_some_and(|t| t.contains(&k)) || !in_range(k) {
                continue;
            }
            let Some(t) = target_index(&names, targets, k) else { continue };
            if neighbours(d, obs, k, beyond_max).into_iter().any(|x| x != h && x.abs_diff(t) < h.abs_diff(t)) {
                let mut to = w.clone();
                to.remove(&k);
                return Some(Step::Shrink { cluster: name.clone(), to: Slice::from_ordinals(&to), releases: vec![k] });
            }
        }
    }
    None
}

/// Kept in step with the range planner: an ordinal in flight that no cluster holds lands in the
/// placement member closest to its target whose slice it extends at one end (under its maximum
/// first among equals; only under it unless `beyond_max`), and for which it is free.
fn landing(
    d: &Desired,
    obs: &Observed,
    targets: &BTreeMap<String, BTreeSet<Ordinal>>,
    moving: &BTreeSet<Ordinal>,
    beyond_max: bool,
) -> Option<Step> {
    if d.backend != Backend::StatefulSet {
        return None;
    }
    let names = member_names(d, obs);
    let holders = Holders::new(obs).with_unobserved(d.clusters.iter().map(|c| c.name.as_str()), obs);
    for &k in moving {
        if holders.written_by_other(k, "") {
            continue;
        }
        let Some(t) = target_index(&names, targets, k) else { continue };
        let best = neighbours(d, obs, k, beyond_max)
            .into_iter()
            .filter(|&i| holders.free_for(k, &d.clusters[i].name))
            .min_by_key(|&i| {
                let c = &d.clusters[i];
                let over =
                    obs[&c.name].written.ordinals().len() as u64 >= u64::from(c.max_replicas.unwrap_or(u32::MAX));
                (i.abs_diff(t), over, i)
            });
        if let Some(i) = best {
            let c = &d.clusters[i];
            let mut to = obs[&c.name].written.ordinals();
            to.insert(k);
            return Some(Step::Grow { cluster: c.name.clone(), to: Slice::from_ordinals(&to), acquires: vec![k] });
        }
    }
    None
}

fn next_steps_with(
    d: &Desired,
    obs: &Observed,
    targets: &BTreeMap<String, BTreeSet<Ordinal>>,
    moving: &BTreeSet<Ordinal>,
    parked: &BTreeSet<Ordinal>,
    stuck: bool,
) -> (Vec<Step>, bool) {
    let contiguous_backend = d.backend == Backend::StatefulSet;
    let range: BTreeSet<Ordinal> = (d.start..d.start + d.replicas).collect();
    let owner_of: BTreeMap<Ordinal, &String> =
        targets.iter().flat_map(|(c, set)| set.iter().map(move |k| (*k, c))).collect();
    // Whether the cluster an ordinal goes to can take it next: for apps/v1 only at an end of
    // its slice (or into an empty one).
    let ends: BTreeMap<&str, Option<(Ordinal, Ordinal)>> = obs
        .iter()
        .map(|(n, o)| {
            (
                n.as_str(),
                (o.written.replicas > 0 && o.written.is_contiguous())
                    .then(|| (o.written.start, o.written.start + o.written.replicas - 1)),
            )
        })
        .collect();
    let takes_next = |k: &Ordinal| match owner_of.get(k) {
        _ if stuck => true,
        None => true,
        Some(t) => match ends.get(t.as_str()).copied().flatten() {
            _ if !contiguous_backend => true,
            None => observation(obs, t).written.replicas == 0,
            Some((lo, hi)) => *k + 1 == lo || *k == hi + 1,
        },
    };
    let holders = Holders::new(obs).with_unobserved(d.clusters.iter().map(|c| c.name.as_str()), obs);
    // Some move in flight can land where it goes once confirmations and readiness arrive, or
    // is written there already and lands once Ready.
    let written_in_target =
        |k: &Ordinal| owner_of.get(k).is_some_and(|t| observation(obs, t).written.ordinals().contains(k));
    let waiting_helps = moving.iter().any(|k| takes_next(k) || written_in_target(k));
    let mut budget = (d.max_concurrent_moves as usize).saturating_sub(moving.len() + parked.len());
    // Liveness within the limit: stuck, one move may start if the limit leaves room.
    if stuck {
        budget = budget.min(1);
    }
    let mut steps = Vec::new();
    // Shrinks: every cluster we can write to gives up what its target does not hold. Clusters
    // not in the placement at all (removed from the spec) hold nothing in the target.
    let names: Vec<String> = d
        .clusters
        .iter()
        .map(|c| c.name.clone())
        .chain(obs.keys().filter(|n| !d.clusters.iter().any(|c| &c.name == *n)).cloned())
        .collect();
    for name in &names {
        let o = observation(obs, name);
        if !o.reachable {
            continue;
        }
        let written = o.written.ordinals();
        let keep: BTreeSet<Ordinal> =
            targets.get(name).map(|t| t.intersection(&written).copied().collect()).unwrap_or_default();
        // Leaving the global range is no move. A fenced cluster that answers again gives
        // everything up at once: its ordinals were re-homed while it was declared dead.
        let free_release = |k: &Ordinal| !range.contains(k) || moving.contains(k) || o.fenced;
        let mut releases = Vec::new();
        if contiguous_backend {
            // One ordinal at a time, always from an end of what is left so the slice stays
            // contiguous, preferring the top (as a StatefulSet removes pods); a move is started
            // only if its target cluster can take it next, or it would hold the budget while
            // another move has to happen first.
            let mut left = written.clone();
            loop {
                let candidates: Vec<Ordinal> = [left.last().copied(), left.first().copied()]
                    .into_iter()
                    .flatten()
                    .filter(|k| !keep.contains(k))
                    .collect();
                let pick = candidates
                    .iter()
                    .copied()
                    .find(free_release)
                    .or_else(|| (budget > 0).then(|| candidates.iter().copied().find(takes_next)).flatten());
                let Some(k) = pick else { break };
                if !free_release(&k) {
                    budget -= 1;
                }
                left.remove(&k);
                releases.push(k);
            }
        } else {
            // Any ordinal may go: the free ones, then moves from the top while the budget lasts.
            for k in written.iter().rev().copied().filter(|k| !keep.contains(k)) {
                if free_release(&k) {
                    releases.push(k);
                } else if budget > 0 {
                    budget -= 1;
                    releases.push(k);
                }
            }
        }
        if !releases.is_empty() {
            let left: BTreeSet<Ordinal> = written.iter().copied().filter(|k| !releases.contains(k)).collect();
            steps.push(Step::Shrink { cluster: name.clone(), to: Slice::from_ordinals(&left), releases });
        }
    }
    // Grows: a cluster takes the ordinals of its target that every other cluster is confirmed
    // not to run, keeping its slice contiguous for apps/v1.
    for c in &d.clusters {
        let o = observation(obs, &c.name);
        let Some(want) = targets.get(&c.name) else { continue };
        // One step per cluster per plan: a cluster that shrinks now grows next round.
        if !o.reachable || o.fenced || !o.compatible || steps.iter().any(|s: &Step| s.cluster() == c.name) {
            continue;
        }
        let written = o.written.ordinals();
        let free = |k: Ordinal| holders.free_for(k, &c.name);
        let mut acquires: BTreeSet<Ordinal> = BTreeSet::new();
        if contiguous_backend {
            let mut have = written.clone();
            if have.is_empty()
                && let Some(&first) = want.iter().find(|&&k| free(k))
            {
                have.insert(first);
                acquires.insert(first);
            }
            if let (Some(&lo), Some(&hi)) = (have.first(), have.last()) {
                let mut k = hi + 1;
                while want.contains(&k) && free(k) {
                    acquires.insert(k);
                    k += 1;
                }
                let mut k = lo;
                while k > 0 && want.contains(&(k - 1)) && free(k - 1) {
                    acquires.insert(k - 1);
                    k -= 1;
                }
            }
        } else {
            acquires = want.difference(&written).copied().filter(|&k| free(k)).collect();
        }
        if !acquires.is_empty() {
            let to: BTreeSet<Ordinal> = written.union(&acquires).copied().collect();
            steps.push(Step::Grow {
                cluster: c.name.clone(),
                to: Slice::from_ordinals(&to),
                acquires: acquires.into_iter().collect(),
            });
        }
    }
    (steps, waiting_helps)
}
