//! `onScale: Keep` per ordinal, written for this reference after the fact (the frozen planner
//! had no such rule): the kept target of a change of replicas, counted one unit and one
//! ordinal at a time, against which `src/plan/keep.rs` (by levels and ranges) is compared.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    divide::{counts, exclusion},
    types::{Backend, Desired, Exclusion, Observed, Ordinal},
};

/// The placement clusters that keep what they hold: all but the fenced and incompatible.
pub fn keepers(d: &Desired, obs: &Observed) -> Vec<usize> {
    (0..d.clusters.len())
        .filter(|&i| matches!(exclusion(obs.get(&d.clusters[i].name)), None | Some(Exclusion::Unreachable)))
        .collect()
}

/// Units handed out one at a time to the taker (position in `takers`) with the largest
/// deficit left and room, the earlier on ties; the reachable first. `None` if some are left.
fn one_by_one(units: usize, takers: &[usize], reachable: &[bool], deficit: &[i64], room: &[u64]) -> Option<Vec<u64>> {
    let mut given = vec![0u64; takers.len()];
    for _ in 0..units {
        let mut best: Option<usize> = None;
        for pass in [true, false] {
            for (t, &at) in takers.iter().enumerate() {
                if reachable[at] != pass || given[t] >= room[at] {
                    continue;
                }
                let left = |t: usize| deficit[takers[t]] - given[t] as i64;
                if best.is_none_or(|b| left(t) > left(b)) {
                    best = Some(t);
                }
            }
            if best.is_some() {
                break;
            }
        }
        given[best?] += 1;
    }
    Some(given)
}

/// The kept target per keeper, or `None` when it needs a move.
pub fn target(d: &Desired, obs: &Observed, keepers: &[usize]) -> Option<BTreeMap<usize, BTreeSet<Ordinal>>> {
    let range: BTreeSet<Ordinal> = (d.start..d.start + d.replicas).collect();
    let ideal = counts(d, keepers).ok()?;
    let max = |i: usize| u64::from(d.clusters[i].max_replicas.unwrap_or(u32::MAX).max(d.clusters[i].min_replicas));
    let mut sets: Vec<BTreeSet<Ordinal>> = keepers
        .iter()
        .map(|&i| {
            let written = obs.get(&d.clusters[i].name).map(|o| o.written.ordinals()).unwrap_or_default();
            written.intersection(&range).copied().collect()
        })
        .collect();
    for k in &range {
        if sets.iter().filter(|s| s.contains(k)).count() > 1 {
            return None;
        }
    }
    if keepers.iter().zip(&sets).any(|(&i, s)| s.len() as u64 > max(i)) {
        return None;
    }
    let reachable: Vec<bool> = keepers.iter().map(|&i| exclusion(obs.get(&d.clusters[i].name)).is_none()).collect();
    let mut deficit: Vec<i64> = keepers.iter().zip(&sets).map(|(i, s)| i64::from(ideal[i]) - s.len() as i64).collect();
    let new: Vec<Ordinal> = range.iter().copied().filter(|k| sets.iter().all(|s| !s.contains(k))).collect();
    let room = |sets: &[BTreeSet<Ordinal>]| -> Vec<u64> {
        (0..sets.len()).map(|at| max(keepers[at]) - sets[at].len() as u64).collect()
    };
    match d.backend {
        Backend::AdvancedStatefulSet => {
            let takers: Vec<usize> = (0..sets.len()).collect();
            let given = one_by_one(new.len(), &takers, &reachable, &deficit, &room(&sets))?;
            let mut next = new.into_iter();
            for (at, n) in takers.into_iter().zip(given) {
                sets[at].extend(next.by_ref().take(n as usize));
            }
        }
        Backend::StatefulSet => {
            // Each slice one run, and the runs in placement order.
            let mut last: Option<Ordinal> = None;
            for s in sets.iter().filter(|s| !s.is_empty()) {
                let (lo, hi) = (*s.first().unwrap(), *s.last().unwrap());
                if (hi - lo + 1) as usize != s.len() || last.is_some_and(|l| l >= lo) {
                    return None;
                }
                last = Some(hi);
            }
            // Maximal runs of new ordinals, lowest first.
            let mut gaps: Vec<Vec<Ordinal>> = Vec::new();
            for k in new {
                match gaps.last_mut() {
                    Some(g) if *g.last().unwrap() + 1 == k => g.push(k),
                    _ => gaps.push(vec![k]),
                }
            }
            for gap in gaps {
                let holder = |k: Option<Ordinal>| k.and_then(|k| (0..sets.len()).find(|&at| sets[at].contains(&k)));
                let below = holder(gap[0].checked_sub(1));
                let above = holder(gap[gap.len() - 1].checked_add(1));
                let takers: Vec<usize> = (0..sets.len())
                    .filter(|&at| {
                        Some(at) == below
                            || Some(at) == above
                            || (sets[at].is_empty() && below.is_none_or(|b| at > b) && above.is_none_or(|a| at < a))
                    })
                    .collect();
                let given = one_by_one(gap.len(), &takers, &reachable, &deficit, &room(&sets))?;
                let mut next = gap.into_iter();
                for (at, n) in takers.into_iter().zip(given) {
                    sets[at].extend(next.by_ref().take(n as usize));
                    deficit[at] -= n as i64;
                }
            }
        }
    }
    if keepers.iter().zip(&sets).any(|(&i, s)| (s.len() as u64) < u64::from(d.clusters[i].min_replicas)) {
        return None;
    }
    Some(keepers.iter().copied().zip(sets).collect())
}
