//! The planner's own vocabulary: what is wanted ([`Desired`]), what is seen ([`Observed`]),
//! and what to do ([`Plan`], [`Step`]). Independent of the CRD types, which the coordinator
//! converts into these.
//!
//! Every set of ordinals is an [`Ordinals`]: sorted, disjoint ranges, so that a slice of
//! 100,000 ordinals costs what a slice of one does. It is `range-set-blaze`'s `RangeSetBlaze`:
//! unlike `rangemap`'s `RangeInclusiveSet` (insert, remove and lookups) it has the whole set
//! algebra the planner is made of — union, intersection, difference, subset, equality — in
//! time linear in the number of ranges, both on sets and lazily on their range iterators (no
//! set is built just to be asked whether it is empty); it is maintained, documented, fuzzed
//! and has no dependency beyond `itertools`, `num-*` and `gen_ops`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// An ordinal of the global range.
pub type Ordinal = u32;

/// A set of ordinals, held as sorted disjoint ranges: what slices, pods, readiness, targets,
/// moves and steps are made of. Build it from ranges (`Ordinals::from_iter([0..=5])`) or from
/// single ordinals (`Ordinals::from([1, 3])`, `Ordinals::from_iter(vec)`); ask it for
/// `ranges()` rather than iterating its ordinals, whose number the planner never depends on.
pub type Ordinals = range_set_blaze::RangeSetBlaze<Ordinal>;

/// Serde adapters that keep a set of ordinals a JSON array of numbers (what `spanset plan -o
/// json`, `reservedOrdinals` and CURRENT.yaml have always used), since `range-set-blaze` has no
/// serde support of its own. Deserializing accepts the numbers in any order.
pub mod ordinals_serde {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::{Ordinal, Ordinals};

    /// Lowest first.
    pub fn serialize<S: Serializer>(set: &Ordinals, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(set.iter())
    }

    /// Any order, duplicates allowed.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Ordinals, D::Error> {
        Ok(Vec::<Ordinal>::deserialize(d)?.into_iter().collect())
    }

    /// Highest first: the order in which a StatefulSet removes pods, and the order in which
    /// the planner has always listed the ordinals a shrink releases.
    pub mod highest_first {
        use serde::{Deserializer, Serializer};

        use super::super::Ordinals;

        /// Highest first.
        pub fn serialize<S: Serializer>(set: &Ordinals, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(set.iter().rev())
        }

        /// Any order, duplicates allowed.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Ordinals, D::Error> {
            super::deserialize(d)
        }
    }
}

/// A set of ordinals for people, as runs lowest first: `["1", "3-5"]` (the range notation of
/// Kruise's `reserveOrdinals`), so that a set of many ordinals stays short in logs and output.
pub fn ordinal_runs(set: &Ordinals) -> Vec<String> {
    set.ranges()
        .map(|r| if r.start() == r.end() { r.start().to_string() } else { format!("{}-{}", r.start(), r.end()) })
        .collect()
}

/// The set written as runs (`0-3,7`, the form of [`ordinal_runs`] joined by commas; blanks
/// around parts are ignored, an empty text is the empty set): what the ordinals stored as text
/// in a status or an annotation are read back with. `None` if any part does not parse or runs
/// backwards.
pub fn parse_ordinal_runs(text: &str) -> Option<Ordinals> {
    let mut set = Ordinals::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (Ordinal, Ordinal) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
        if b < a {
            return None;
        }
        set.ranges_insert(a..=b);
    }
    Some(set)
}

/// A set of ordinals on one line, as runs: `0,2-3,7`; `-` for none.
pub fn ordinals_text(set: &Ordinals) -> String {
    if set.is_empty() { "-".into() } else { ordinal_runs(set).join(",") }
}

/// The ordinals a slice as stored in a status (`start`, `replicas`, `reserveOrdinals`) selects,
/// as [`ordinals_text`]; `invalid` for a negative start or count. Costs the reserved ordinals,
/// never the replicas (a slice of two billion prints at once).
pub fn stored_slice_text(start: i64, replicas: i64, reserved: impl IntoIterator<Item = i64>) -> String {
    let (Ok(start), Ok(replicas)) = (Ordinal::try_from(start), Ordinal::try_from(replicas)) else {
        return "invalid".into();
    };
    let reserved = reserved.into_iter().filter_map(|k| Ordinal::try_from(k).ok()).collect();
    ordinals_text(&Slice { start, replicas, reserved }.ordinals())
}

/// Which workload API the member clusters run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Backend {
    /// apps/v1 StatefulSet: each cluster owns one contiguous slice (`ordinals.start`, `replicas`).
    #[default]
    StatefulSet,
    /// OpenKruise Advanced StatefulSet: any set, written as start + replicas + `reserveOrdinals`.
    AdvancedStatefulSet,
}

/// What a change of `spec.replicas` alone does to the ordinals that survive it
/// (`spec.placement.onScale`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum OnScale {
    /// No surviving ordinal moves: a scale-down removes the highest ordinals where they run, a
    /// scale-up adds the next ones where the weights most lack replicas; the weights are
    /// applied again (with moves) only when the placement itself changes.
    #[default]
    Keep,
    /// After every scale the division follows the weights again, through ordinary moves.
    Rebalance,
}

/// One cluster of the placement, in placement order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterTarget {
    /// Cluster name.
    pub name: String,
    /// Relative share of the replicas.
    pub weight: u32,
    /// Fewest replicas it must hold.
    pub min_replicas: u32,
    /// Most replicas it may hold.
    pub max_replicas: Option<u32>,
}

/// What the user asked for, in planner terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Desired {
    /// Total replicas across all clusters.
    pub replicas: u32,
    /// First ordinal of the global range.
    pub start: Ordinal,
    /// Workload API of the members.
    pub backend: Backend,
    /// Clusters in placement order (the order of slices in ordinal space for apps/v1).
    pub clusters: Vec<ClusterTarget>,
    /// Most ordinals moving at once.
    pub max_concurrent_moves: u32,
    /// What a change of replicas alone does to the surviving ordinals.
    #[serde(default)]
    pub on_scale: OnScale,
}

/// The ordinals one cluster's workload selects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Slice {
    /// `.spec.ordinals.start`.
    pub start: Ordinal,
    /// `.spec.replicas`.
    pub replicas: u32,
    /// `reserveOrdinals` (Advanced StatefulSet only): ordinals skipped in `[start, …)`.
    #[serde(default, skip_serializing_if = "Ordinals::is_empty", rename = "reservedOrdinals", with = "ordinals_serde")]
    pub reserved: Ordinals,
}

impl Desired {
    /// The federation's ordinals, `start..start + replicas`.
    pub fn ordinals(&self) -> Ordinals {
        super::sets::run(self.start, self.replicas)
    }
}

impl Slice {
    /// An empty slice.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The ordinals this slice selects: the first `replicas` ordinals from `start` that are not
    /// reserved. Costs the number of reserved ranges, not of ordinals.
    pub fn ordinals(&self) -> Ordinals {
        Ordinals::from_sorted_disjoint(range_set_blaze::CheckSortedDisjoint::new(self.runs()))
    }

    /// The runs of [`Slice::ordinals`], lowest first, without building a set: the gaps of
    /// `reserved` from `start` on, until `replicas` ordinals are counted.
    fn runs(&self) -> impl std::iter::FusedIterator<Item = std::ops::RangeInclusive<Ordinal>> + '_ {
        let end = u64::from(Ordinal::MAX) + 1;
        let mut reserved = self.reserved.ranges().filter(|r| *r.end() >= self.start).peekable();
        let mut next = u64::from(self.start);
        let mut left = u64::from(self.replicas);
        std::iter::from_fn(move || {
            while left > 0 && next < end {
                let gap_end = match reserved.peek() {
                    Some(r) if u64::from(*r.start()) <= next => {
                        next = u64::from(*r.end()) + 1;
                        reserved.next();
                        continue;
                    }
                    Some(r) => u64::from(*r.start()),
                    None => end,
                };
                let take = left.min(gap_end - next);
                let run = next as Ordinal..=(next + take - 1) as Ordinal;
                left -= take;
                next += take;
                return Some(run);
            }
            None
        })
        .fuse()
    }

    /// Whether the slice selects `k`, without listing its ordinals.
    pub fn contains(&self, k: Ordinal) -> bool {
        self.runs().take_while(|r| *r.start() <= k).any(|r| r.contains(&k))
    }

    /// The slice that selects exactly `set`: contiguous sets need no reservations.
    pub fn from_ordinals(set: &Ordinals) -> Self {
        match (set.first(), set.last()) {
            (Some(lo), Some(hi)) => Slice {
                start: lo,
                replicas: Ordinal::try_from(set.len()).expect("a set of u32 ordinals below u32::MAX"),
                reserved: if set.ranges_len() == 1 { Ordinals::new() } else { &Ordinals::from(lo..=hi) - set },
            },
            _ => Slice::empty(),
        }
    }

    /// Whether the slice is one contiguous range (what apps/v1 can express).
    pub fn is_contiguous(&self) -> bool {
        self.reserved.is_empty()
    }
}

/// What spanset sees of one member cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ClusterObservation {
    /// The slice as written in the member's spec (read back), if a workload exists.
    pub written: Slice,
    /// Ordinals whose pod objects exist in the member (running or terminating).
    #[serde(with = "ordinals_serde")]
    pub pods: Ordinals,
    /// Whether the pod list is newer than the last write to the slice (so absences are
    /// confirmations).
    pub observed_since_write: bool,
    /// Ordinals whose pods are Running and Ready.
    #[serde(with = "ordinals_serde")]
    pub ready: Ordinals,
    /// The member answers.
    pub reachable: bool,
    /// An operator (or automatic failover) declared its workloads dead.
    pub fenced: bool,
    /// Fenced, but heard from since the fence: the fence no longer stands in for it, silent or
    /// not (its last observation counts, as an unfenced member's does).
    #[serde(default)]
    pub answered_since_fence: bool,
    /// The member keeps `.spec.ordinals` (false: it silently dropped them).
    pub compatible: bool,
}

impl ClusterObservation {
    /// A reachable, compatible member that has caught up with `written`: its pods are exactly
    /// the slice's ordinals, all Ready, observed since the write.
    pub fn settled(written: Slice) -> Self {
        let pods = written.ordinals();
        Self {
            written,
            ready: pods.clone(),
            pods,
            observed_since_write: true,
            reachable: true,
            fenced: false,
            answered_since_fence: false,
            compatible: true,
        }
    }
}

/// What spanset sees of all members, by cluster name.
pub type Observed = BTreeMap<String, ClusterObservation>;

/// Why a cluster gets no slice in the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Exclusion {
    /// No successful API call within the grace period.
    Unreachable,
    /// Declared dead by an operator or by automatic failover.
    Fenced,
    /// Its API server does not keep `.spec.ordinals`.
    Incompatible,
}

/// One action on one member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum Step {
    /// Write a smaller slice: its pods for `releases` are deleted by the member.
    Shrink {
        /// Member cluster.
        cluster: String,
        /// The slice to write.
        to: Slice,
        /// Ordinals leaving this cluster (a set of ranges, however many move; JSON lists
        /// them highest first, as the member removes their pods).
        #[serde(with = "ordinals_serde::highest_first")]
        releases: Ordinals,
    },
    /// Write a larger slice, taking ordinals confirmed absent everywhere else.
    Grow {
        /// Member cluster.
        cluster: String,
        /// The slice to write.
        to: Slice,
        /// Ordinals arriving in this cluster (a set of ranges; JSON lists them lowest first).
        #[serde(with = "ordinals_serde")]
        acquires: Ordinals,
    },
}

impl Step {
    /// The cluster the step writes to.
    pub fn cluster(&self) -> &str {
        match self {
            Step::Shrink { cluster, .. } | Step::Grow { cluster, .. } => cluster,
        }
    }

    /// The slice the step writes.
    pub fn slice(&self) -> &Slice {
        match self {
            Step::Shrink { to, .. } | Step::Grow { to, .. } => to,
        }
    }
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The slice each eligible cluster should end with, in placement order.
    pub target: Vec<(String, Slice)>,
    /// Clusters left out of the target, and why.
    pub excluded: Vec<(String, Exclusion)>,
    /// What can safely be done now (possibly nothing while waiting for confirmations).
    pub steps: Vec<Step>,
    /// Ordinals between leaving one cluster and being Ready in their target cluster.
    #[serde(with = "ordinals_serde")]
    pub in_flight: Ordinals,
    /// Whether every cluster's written slice equals its target and every ordinal is Ready.
    pub done: bool,
    /// Nothing can go on within `maxConcurrentMoves`: the moves in flight can land only after
    /// other moves (apps/v1 slices that cross after an edit or a partition), and the limit
    /// leaves no room for them. The limit is kept; raising it lets the federation go on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stalled: bool,
    /// What `status.balancedPlacement` holds after this plan: the placement (see
    /// [`crate::keep::placement`]) the layout was last divided for by weight, which lets
    /// `onScale: Keep` derive later targets from the written slices instead (`None`: no layout
    /// balanced for any placement yet, or a scale that `Keep` could not place).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balanced_placement: Option<String>,
}
