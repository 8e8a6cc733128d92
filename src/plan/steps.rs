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

/// Whether `o` is confirmed not to run ordinal `k`.
pub fn confirmed_absent(o: &ClusterObservation, k: Ordinal) -> bool {
    o.fenced || (o.reachable && o.observed_since_write && !o.pods.contains(&k) && !o.written.ordinals().contains(&k))
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
    let mut out = BTreeSet::new();
    for (c, want) in targets {
        let here = observation(obs, c);
        for &k in want {
            let settled = here.written.ordinals().contains(&k) && here.ready.contains(&k);
            let others = || obs.iter().filter(|(d, _)| *d != c);
            let held_elsewhere = others().any(|(_, o)| !o.fenced && o.written.ordinals().contains(&k));
            let lingering = others().any(|(_, o)| o.pods.contains(&k) && !o.fenced);
            if !settled && !held_elsewhere && (recorded.contains(&k) || lingering) {
                out.insert(k);
            }
        }
    }
    out
}

/// Whether `set` is one contiguous run.
pub fn contiguous(set: &BTreeSet<Ordinal>) -> bool {
    match (set.first(), set.last()) {
        (Some(lo), Some(hi)) => (hi - lo) as usize + 1 == set.len(),
        _ => true,
    }
}

/// Computes the shrinks and grows that are safe now.
pub fn next_steps(
    d: &Desired,
    obs: &Observed,
    targets: &BTreeMap<String, BTreeSet<Ordinal>>,
    moving: &BTreeSet<Ordinal>,
) -> Vec<Step> {
    let contiguous_backend = d.backend == Backend::StatefulSet;
    let range: BTreeSet<Ordinal> = (d.start..d.start + d.replicas).collect();
    let owner_of: BTreeMap<Ordinal, &String> =
        targets.iter().flat_map(|(c, set)| set.iter().map(move |k| (*k, c))).collect();
    // Whether the cluster an ordinal goes to can take it next: for apps/v1 only at an end of
    // its slice (or into an empty one).
    let takes_next = |k: &Ordinal| match owner_of.get(k) {
        None => true,
        Some(t) => {
            let theirs = observation(obs, t).written.ordinals();
            !contiguous_backend
                || theirs.is_empty()
                || theirs.first().is_some_and(|lo| *k + 1 == *lo)
                || theirs.last().is_some_and(|hi| *k == hi + 1)
        }
    };
    let mut budget = (d.max_concurrent_moves as usize).saturating_sub(moving.len());
    // Liveness: when the target changed under moves in flight (a spec edit, a partition that
    // healed) every one of them may wait on another ordinal that the spent budget would never
    // release. Then one more move may start, so they can finish.
    if budget == 0 && !moving.is_empty() && !moving.iter().any(takes_next) {
        budget = 1;
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
        let mut left = written.clone();
        let mut releases = Vec::new();
        // One ordinal at a time, always from an end of what is left so the slice stays
        // contiguous (apps/v1), preferring the top, as a StatefulSet removes pods.
        loop {
            let candidates: Vec<Ordinal> = if contiguous_backend {
                [left.last().copied(), left.first().copied()]
                    .into_iter()
                    .flatten()
                    .filter(|k| !keep.contains(k))
                    .collect()
            } else {
                left.iter().rev().filter(|k| !keep.contains(k)).copied().collect()
            };
            // Leaving the global range is no move. A fenced cluster that answers again gives
            // everything up at once: its ordinals were re-homed while it was declared dead.
            let free_release = |k: &Ordinal| !range.contains(k) || moving.contains(k) || o.fenced;
            // A move is worth starting only if its target cluster can take it next; otherwise
            // it would hold the budget while another move has to happen first.
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
        if !o.reachable || o.fenced || !o.compatible {
            continue;
        }
        let written = o.written.ordinals();
        let free = |k: Ordinal| obs.iter().filter(|(n, _)| **n != c.name).all(|(_, other)| confirmed_absent(other, k));
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
    steps
}
