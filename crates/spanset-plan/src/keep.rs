//! `onScale: Keep`: the target of a change of replicas alone, derived from the slices written
//! now rather than from the weights, so that no surviving ordinal moves. A scale-down keeps
//! what each cluster holds below the new end (the highest ordinals go where they run); a
//! scale-up gives the new ordinals to the clusters the weights say lack most, among those that
//! can take them without a move: any cluster for Advanced StatefulSets; for apps/v1 only a
//! cluster whose slice borders them, or an empty one between its neighbours in placement
//! order, so that every slice stays one run and the slices stay in placement order (which
//! keeps a later re-division by weight to few moves).
//!
//! A kept target holds every written ordinal of the range where it is written, so deriving it
//! again at any point of its progress moves nothing. It is also a fixed point of its progress
//! when steps are written whole or one ordinal at a time from the lowest (OrderedReady): a scale
//! in several steps ends where one step would (crates/spanset-plan/tests/properties/plan_props.rs checks both). Grows written
//! in another order may shift where a not-yet-created ordinal goes, never a running one.

use std::collections::BTreeMap;

use super::{
    divide::{counts, exclusion},
    sets,
    types::{Backend, Desired, Exclusion, Observed, Ordinals},
};

/// The placement clusters a kept layout is kept among, in placement order: all but the fenced
/// and the incompatible. An unreachable one keeps what it holds — its ordinals cannot move
/// before it answers or is fenced anyway, and a controller that starts hears from its members
/// one by one — but takes new ordinals only when no reachable one can.
pub fn keepers(d: &Desired, obs: &Observed) -> Vec<usize> {
    (0..d.clusters.len())
        .filter(|&i| matches!(exclusion(obs.get(&d.clusters[i].name)), None | Some(Exclusion::Unreachable)))
        .collect()
}

/// The placement as far as a division by weight depends on it, in one line: each keeper in
/// placement order as `name:weight`, with `:min-max` when it has bounds (`*`: no maximum), e.g.
/// `east:1,west:2:1-*`. Stored as `status.balancedPlacement` once a layout is divided for it.
pub fn placement(d: &Desired, keepers: &[usize]) -> String {
    let one = |i: usize| {
        let c = &d.clusters[i];
        let mut s = format!("{}:{}", c.name, c.weight);
        if c.min_replicas > 0 || c.max_replicas.is_some() {
            let max = c.max_replicas.map_or("*".to_string(), |m| m.to_string());
            s.push_str(&format!(":{}-{max}", c.min_replicas));
        }
        s
    };
    keepers.iter().map(|&i| one(i)).collect::<Vec<_>>().join(",")
}

/// One cluster that may take new ordinals (its deficit and room are looked up by `at`).
struct Taker {
    /// Index into the keepers.
    at: usize,
    /// Whether it answers: the unreachable take only what no reachable one can.
    reachable: bool,
}

/// The kept target of every keeper (indices into `d.clusters`), or `None` when none exists
/// without a move: the written slices of two keepers overlap, an apps/v1 slice is not one run
/// or the slices are out of placement order, the new ordinals find no room, or a cluster would
/// end below its `minReplicas` (a scale-down that takes its last ordinals).
pub fn target(d: &Desired, obs: &Observed, keepers: &[usize]) -> Option<BTreeMap<usize, Ordinals>> {
    let range = d.ordinals();
    let ideal = counts(d, keepers).ok()?;
    let max = |i: usize| u64::from(d.clusters[i].max_replicas.unwrap_or(u32::MAX).max(d.clusters[i].min_replicas));
    let mut sets: Vec<Ordinals> = keepers
        .iter()
        .map(|&i| obs.get(&d.clusters[i].name).map(|o| &o.written.ordinals() & &range).unwrap_or_default())
        .collect();
    let (held, twice) = sets::once_and_twice(sets.iter());
    if !twice.is_empty() || keepers.iter().zip(&sets).any(|(&i, s)| s.len() > max(i)) {
        return None;
    }
    let reachable: Vec<bool> = keepers.iter().map(|&i| exclusion(obs.get(&d.clusters[i].name)).is_none()).collect();
    let mut deficit: Vec<i64> = keepers.iter().zip(&sets).map(|(i, s)| i64::from(ideal[i]) - s.len() as i64).collect();
    let room = |sets: &[Ordinals], at: usize| max(keepers[at]) - sets[at].len();
    let new = &range - &held;
    match d.backend {
        Backend::AdvancedStatefulSet => {
            let takers: Vec<Taker> = (0..keepers.len()).map(|at| Taker { at, reachable: reachable[at] }).collect();
            let rooms: Vec<u64> = (0..keepers.len()).map(|at| room(&sets, at)).collect();
            let given = fill(new.len(), &takers, &deficit, &rooms)?;
            // Dealt out lowest first in placement order, as the division by weight does.
            let mut free = new;
            for (t, n) in takers.iter().zip(given) {
                sets[t.at] |= sets::split_lowest(&mut free, n);
            }
        }
        Backend::StatefulSet => {
            let nonempty: Vec<usize> = (0..sets.len()).filter(|&at| !sets[at].is_empty()).collect();
            let runs = nonempty.iter().all(|&at| sets[at].ranges_len() == 1);
            let ordered = nonempty.windows(2).all(|w| sets[w[0]].last() < sets[w[1]].first());
            if !runs || !ordered {
                return None;
            }
            for gap in new.ranges() {
                let (lo, hi) = (*gap.start(), *gap.end());
                let holder = |k: Option<u32>| k.and_then(|k| nonempty.iter().copied().find(|&at| sets[at].contains(k)));
                let below = holder(lo.checked_sub(1));
                let above = holder(hi.checked_add(1));
                let between = |at: usize| below.is_none_or(|b| at > b) && above.is_none_or(|a| at < a);
                let takers: Vec<Taker> = (0..sets.len())
                    .filter(|&at| Some(at) == below || Some(at) == above || (sets[at].is_empty() && between(at)))
                    .map(|at| Taker { at, reachable: reachable[at] })
                    .collect();
                let rooms: Vec<u64> = (0..sets.len()).map(|at| room(&sets, at)).collect();
                let given = fill(u64::from(hi - lo) + 1, &takers, &deficit, &rooms)?;
                // In placement order from the bottom of the gap: the neighbour below extends
                // up, the empty ones take a run each, the neighbour above extends down.
                let mut free = Ordinals::from(lo..=hi);
                for (t, n) in takers.iter().zip(given) {
                    sets[t.at] |= sets::split_lowest(&mut free, n);
                    deficit[t.at] -= n as i64;
                }
            }
        }
    }
    let low = keepers.iter().zip(&sets).any(|(&i, s)| s.len() < u64::from(d.clusters[i].min_replicas));
    (!low).then(|| keepers.iter().copied().zip(sets).collect())
}

/// How many of `units` each taker gets (in the takers' order): one at a time to the one whose
/// deficit is then largest among those with room, ties to the earlier — the reachable first,
/// the unreachable only for what the reachable have no room for. `None` when all are full.
/// Computed by levels, in time linear in the number of takers times the bits of the count.
fn fill(units: u64, takers: &[Taker], deficit: &[i64], rooms: &[u64]) -> Option<Vec<u64>> {
    let mut out = vec![0; takers.len()];
    let mut left = units;
    for reachable in [true, false] {
        let part: Vec<usize> = (0..takers.len()).filter(|&t| takers[t].reachable == reachable).collect();
        let d: Vec<i64> = part.iter().map(|&t| deficit[takers[t].at]).collect();
        let r: Vec<u64> = part.iter().map(|&t| rooms[takers[t].at]).collect();
        for (t, n) in part.iter().zip(level(left, &d, &r)) {
            out[*t] = n;
            left -= n;
        }
    }
    (left == 0).then_some(out)
}

/// Water-filling: as many of `units` as the rooms `r` allow, each next unit to the largest
/// deficit `d` left (ties to the earlier). Everyone above the level `l` is brought down to it
/// (as far as its room goes); what remains goes one each, in order, to those at `l`.
fn level(units: u64, d: &[i64], r: &[u64]) -> Vec<u64> {
    let total: u64 = r.iter().sum();
    if total <= units {
        return r.to_vec();
    }
    let at =
        |l: i64| -> Vec<u64> { d.iter().zip(r).map(|(&d, &r)| (d.saturating_sub(l).max(0) as u64).min(r)).collect() };
    let sum = |l: i64| at(l).iter().sum::<u64>();
    // sum(hi) = 0 <= units < sum(lo): the lowest level whose sum fits lies in (lo, hi].
    let (mut lo, mut hi) =
        (d.iter().min().copied().unwrap_or(0) - units as i64 - 1, d.iter().max().copied().unwrap_or(0));
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if sum(mid) <= units { hi = mid } else { lo = mid }
    }
    let mut out = at(hi);
    let mut left = units - out.iter().sum::<u64>();
    for (i, n) in out.iter_mut().enumerate() {
        if left > 0 && d[i] >= hi && *n < r[i] {
            *n += 1;
            left -= 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The definition `level` computes by levels: one unit at a time.
    fn one_by_one(units: u64, d: &[i64], r: &[u64]) -> Vec<u64> {
        let mut out = vec![0u64; d.len()];
        for _ in 0..units {
            let best =
                (0..d.len()).filter(|&i| out[i] < r[i]).max_by_key(|&i| (d[i] - out[i] as i64, std::cmp::Reverse(i)));
            match best {
                Some(i) => out[i] += 1,
                None => break,
            }
        }
        out
    }

    proptest! {
        #[test]
        fn filling_by_levels_gives_what_filling_one_by_one_does(
            units in 0u64..40,
            cs in prop::collection::vec((-6i64..8, 0u64..12), 1..6),
        ) {
            let (d, r): (Vec<i64>, Vec<u64>) = cs.into_iter().unzip();
            prop_assert_eq!(level(units, &d, &r), one_by_one(units, &d, &r));
        }
    }
}
