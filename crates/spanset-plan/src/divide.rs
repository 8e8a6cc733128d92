//! The target: which clusters take part, how many replicas each holds, and which ordinals.

use std::collections::BTreeMap;

use super::{
    keep, sets,
    types::{Backend, ClusterObservation, Desired, Exclusion, Observed, OnScale, Ordinals, Slice},
};

/// Why no target exists for the clusters that can take part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DivideError {
    /// Every cluster is excluded.
    #[error("no cluster can take replicas: every cluster is unreachable, fenced or incompatible")]
    NoEligibleCluster,
    /// The eligible clusters cannot hold all replicas.
    #[error("cannot place {replicas} replicas: the eligible clusters hold at most {capacity}")]
    NotEnoughCapacity {
        /// Replicas asked for.
        replicas: u32,
        /// What the eligible clusters' maxReplicas allow.
        capacity: u64,
    },
}

/// Why a cluster is left out, if it is (fenced before incompatible before unreachable).
pub fn exclusion(obs: Option<&ClusterObservation>) -> Option<Exclusion> {
    match obs {
        None => Some(Exclusion::Unreachable),
        Some(o) if o.fenced => Some(Exclusion::Fenced),
        Some(o) if !o.compatible => Some(Exclusion::Incompatible),
        Some(o) if !o.reachable => Some(Exclusion::Unreachable),
        Some(_) => None,
    }
}

/// Replicas per eligible cluster (indices into `d.clusters`): weights bounded by min/max,
/// shares of the total rounded by largest remainder, ties to the earlier cluster in placement
/// order. The result depends only on the spec and on which clusters are eligible — never on
/// where ordinals are now — so the target stays put while ordinals move towards it. (With
/// `onScale: Keep` a change of replicas alone is placed by [`super::keep`] instead, which uses
/// these counts only as the measure of which cluster lacks most.)
pub fn counts(d: &Desired, eligible: &[usize]) -> Result<BTreeMap<usize, u32>, DivideError> {
    if eligible.is_empty() {
        return if d.replicas == 0 { Ok(BTreeMap::new()) } else { Err(DivideError::NoEligibleCluster) };
    }
    let max = |i: usize| d.clusters[i].max_replicas.unwrap_or(u32::MAX).max(d.clusters[i].min_replicas);
    let capacity: u64 = eligible.iter().map(|&i| u64::from(max(i))).sum();
    if capacity < u64::from(d.replicas) {
        return Err(DivideError::NotEnoughCapacity { replicas: d.replicas, capacity });
    }
    // Water-filling: shares of what is left among the unfixed; fix any share outside its
    // bounds at the bound and share again.
    let mut fixed: BTreeMap<usize, u32> =
        eligible.iter().filter(|&&i| d.clusters[i].weight == 0).map(|&i| (i, d.clusters[i].min_replicas)).collect();
    let shares = loop {
        let free: Vec<usize> = eligible.iter().copied().filter(|i| !fixed.contains_key(i)).collect();
        let left = i64::from(d.replicas) - fixed.values().map(|v| i64::from(*v)).sum::<i64>();
        if free.is_empty() {
            break BTreeMap::new();
        }
        let weights: u64 = free.iter().map(|&i| u64::from(d.clusters[i].weight)).sum();
        let share = |i: usize| left.max(0) as f64 * f64::from(d.clusters[i].weight) / weights as f64;
        let low: Vec<usize> =
            free.iter().copied().filter(|&i| share(i) < f64::from(d.clusters[i].min_replicas)).collect();
        let high: Vec<usize> = free.iter().copied().filter(|&i| share(i) > f64::from(max(i))).collect();
        if low.is_empty() && high.is_empty() {
            break free.iter().map(|&i| (i, share(i))).collect::<BTreeMap<usize, f64>>();
        }
        // Minimums first: raising them shrinks what the others share (which may push more below
        // their minimum, never above their maximum); only then cap the ones above maximum.
        if low.is_empty() {
            for i in high {
                fixed.insert(i, max(i));
            }
        } else {
            for i in low {
                fixed.insert(i, d.clusters[i].min_replicas);
            }
        }
    };
    let mut out = fixed;
    let mut floors: Vec<(usize, u32, f64)> =
        shares.iter().map(|(&i, &s)| (i, s.floor() as u32, s - s.floor())).collect();
    let given: u64 =
        out.values().map(|v| u64::from(*v)).sum::<u64>() + floors.iter().map(|f| u64::from(f.1)).sum::<u64>();
    let mut leftover = u64::from(d.replicas).saturating_sub(given);
    floors.sort_by(|a, b| b.2.partial_cmp(&a.2).unwrap_or(std::cmp::Ordering::Equal).then(a.0.cmp(&b.0)));
    for (i, floor, _) in &floors {
        let extra = u32::from(leftover > 0 && *floor < max(*i));
        leftover -= u64::from(extra);
        out.insert(*i, floor + extra);
    }
    // Rounding can leave a unit when the free clusters sit at their caps; give it to anyone
    // with room, in placement order.
    for &i in eligible {
        while leftover > 0 && out[&i] < max(i) {
            *out.get_mut(&i).expect("every eligible cluster has a count") += 1;
            leftover -= 1;
        }
    }
    Ok(out)
}

/// Ordinals per eligible cluster for the given counts: contiguous ranges in placement order for
/// apps/v1; for Advanced StatefulSet, each cluster keeps what it has (up to its count) and the
/// rest are dealt out in ordinal order, so as few ordinals as possible move.
pub fn assign(
    d: &Desired,
    counts: &BTreeMap<usize, u32>,
    owned_now: &BTreeMap<usize, Ordinals>,
) -> BTreeMap<usize, Ordinals> {
    match d.backend {
        Backend::StatefulSet => {
            let mut next = d.start;
            counts
                .iter()
                .map(|(&i, &n)| {
                    let set = sets::run(next, n);
                    next += n;
                    (i, set)
                })
                .collect()
        }
        Backend::AdvancedStatefulSet => {
            let range = d.ordinals();
            let mut out: BTreeMap<usize, Ordinals> = BTreeMap::new();
            let mut taken = Ordinals::new();
            for (&i, &n) in counts {
                let keep = owned_now.get(&i).map(|s| sets::lowest(&(s & &range), u64::from(n))).unwrap_or_default();
                taken |= &keep;
                out.insert(i, keep);
            }
            // The rest is dealt out lowest first, in placement order.
            let mut free = &range - &taken;
            for (&i, &n) in counts {
                let set = out.get_mut(&i).expect("inserted above");
                let more = sets::split_lowest(&mut free, u64::from(n) - set.len());
                *set |= more;
            }
            out
        }
    }
}

/// How a target was made, which decides what `status.balancedPlacement` holds next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Division {
    /// Kept from the written slices (`onScale: Keep`, placement unchanged since the layout was
    /// divided by weight).
    Kept,
    /// Divided by weight: `onScale: Rebalance`, or the placement changed, or none was stored.
    Weighted,
    /// Divided by weight because `Keep` found no target without a move (see
    /// [`super::keep::target`]): the stored placement is dropped, so that the division by
    /// weight holds until it is done rather than flip back half-way.
    Unkeepable,
}

/// The target: `(cluster index, slice)` for eligible clusters in placement order, and the
/// clusters left out with the reason.
pub struct Target {
    /// Slices of the eligible clusters.
    pub slices: Vec<(usize, Slice)>,
    /// Excluded clusters and why.
    pub excluded: Vec<(usize, Exclusion)>,
    /// The placement as `Keep` compares it ([`super::keep::placement`]).
    pub placement: String,
    /// How the slices were made.
    pub division: Division,
}

/// Computes the target slices for the eligible clusters: kept from the written slices when
/// `onScale` is `Keep` and `balanced` (the stored `status.balancedPlacement`) is the placement
/// now, otherwise divided by weight.
pub fn target(d: &Desired, obs: &Observed, balanced: Option<&str>) -> Result<Target, DivideError> {
    let mut eligible = Vec::new();
    let mut excluded = Vec::new();
    for (i, c) in d.clusters.iter().enumerate() {
        match exclusion(obs.get(&c.name)) {
            None => eligible.push(i),
            Some(why) => excluded.push((i, why)),
        }
    }
    let keepers = keep::keepers(d, obs);
    let placement = keep::placement(d, &keepers);
    let mut division = Division::Weighted;
    if d.on_scale == OnScale::Keep && balanced == Some(placement.as_str()) {
        match keep::target(d, obs, &keepers) {
            Some(mut sets) => {
                // Only the eligible get a slice: an unreachable keeper's ordinals stay where
                // they are, in no one's target.
                let slices =
                    eligible.iter().map(|i| (*i, Slice::from_ordinals(&sets.remove(i).unwrap_or_default()))).collect();
                return Ok(Target { slices, excluded, placement, division: Division::Kept });
            }
            None => division = Division::Unkeepable,
        }
    }
    // Only Advanced StatefulSets keep what they hold; apps/v1 slices follow placement order.
    let owned_now: BTreeMap<usize, Ordinals> = match d.backend {
        Backend::StatefulSet => BTreeMap::new(),
        Backend::AdvancedStatefulSet => eligible
            .iter()
            .map(|&i| (i, obs.get(&d.clusters[i].name).map(|o| o.written.ordinals()).unwrap_or_default()))
            .collect(),
    };
    let counts = counts(d, &eligible)?;
    let sets = assign(d, &counts, &owned_now);
    let slices = sets.into_iter().map(|(i, set)| (i, Slice::from_ordinals(&set))).collect();
    Ok(Target { slices, excluded, placement, division })
}
