//! The planner's own vocabulary: what is wanted ([`Desired`]), what is seen ([`Observed`]),
//! and what to do ([`Plan`], [`Step`]). Independent of the CRD types, which the coordinator
//! converts into these.

use std::collections::{BTreeMap, BTreeSet};

pub use spanset_plan::{Backend, Desired, Exclusion};

/// An ordinal of the global range.
pub type Ordinal = u32;

/// The ordinals one cluster's workload selects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Slice {
    /// `.spec.ordinals.start`.
    pub start: Ordinal,
    /// `.spec.replicas`.
    pub replicas: u32,
    /// `reserveOrdinals` (Advanced StatefulSet only): ordinals skipped in `[start, …)`.
    pub reserved: BTreeSet<Ordinal>,
}

impl Slice {
    /// An empty slice.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The ordinals this slice selects: the first `replicas` ordinals from `start` that are not
    /// reserved.
    pub fn ordinals(&self) -> BTreeSet<Ordinal> {
        (self.start..).filter(|o| !self.reserved.contains(o)).take(self.replicas as usize).collect()
    }

    /// Whether the slice selects `k`, without listing its ordinals.
    pub fn contains(&self, k: Ordinal) -> bool {
        if k < self.start || self.reserved.contains(&k) {
            return false;
        }
        // `k` is selected when fewer than `replicas` unreserved ordinals precede it.
        let before = u64::from(k - self.start) - self.reserved.range(self.start..k).count() as u64;
        before < u64::from(self.replicas)
    }

    /// The slice that selects exactly `set`: contiguous sets need no reservations.
    pub fn from_ordinals(set: &BTreeSet<Ordinal>) -> Self {
        match (set.first(), set.last()) {
            (Some(&lo), Some(&hi)) => Slice {
                start: lo,
                replicas: set.len() as u32,
                reserved: (lo..=hi).filter(|o| !set.contains(o)).collect(),
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
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterObservation {
    /// The slice as written in the member's spec (read back), if a workload exists.
    pub written: Slice,
    /// Ordinals whose pod objects exist in the member (running or terminating).
    pub pods: BTreeSet<Ordinal>,
    /// Whether the pod list is newer than the last write to the slice (so absences are
    /// confirmations).
    pub observed_since_write: bool,
    /// Ordinals whose pods are Running and Ready.
    pub ready: BTreeSet<Ordinal>,
    /// The member answers.
    pub reachable: bool,
    /// An operator (or automatic failover) declared its workloads dead.
    pub fenced: bool,
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
            compatible: true,
        }
    }
}

/// What spanset sees of all members, by cluster name.
pub type Observed = BTreeMap<String, ClusterObservation>;

/// One action on one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Write a smaller slice: its pods for `releases` are deleted by the member.
    Shrink {
        /// Member cluster.
        cluster: String,
        /// The slice to write.
        to: Slice,
        /// Ordinals leaving this cluster.
        releases: Vec<Ordinal>,
    },
    /// Write a larger slice, taking ordinals confirmed absent everywhere else.
    Grow {
        /// Member cluster.
        cluster: String,
        /// The slice to write.
        to: Slice,
        /// Ordinals arriving in this cluster.
        acquires: Vec<Ordinal>,
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The slice each eligible cluster should end with, in placement order.
    pub target: Vec<(String, Slice)>,
    /// Clusters left out of the target, and why.
    pub excluded: Vec<(String, Exclusion)>,
    /// What can safely be done now (possibly nothing while waiting for confirmations).
    pub steps: Vec<Step>,
    /// Ordinals between leaving one cluster and being Ready in their target cluster.
    pub in_flight: BTreeSet<Ordinal>,
    /// Whether every cluster's written slice equals its target and every ordinal is Ready.
    pub done: bool,
    /// Nothing can go on within `maxConcurrentMoves` (moves in flight wait on moves the limit
    /// leaves no room for).
    pub stalled: bool,
    /// What `status.balancedPlacement` holds after this plan.
    pub balanced_placement: Option<String>,
}
