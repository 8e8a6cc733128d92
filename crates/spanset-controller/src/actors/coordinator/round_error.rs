//! Why a reconcile did not finish, by the part of the round that failed. The part is a bounded
//! [`RoundError::category`]: the label of `spanset_reconcile_errors_total`, and (with the members
//! it names) what the log's de-duplication compares, so that a message carrying a member's ever
//! different words (a resourceVersion, a timeout's figure) is still one failure that lasts. The
//! message keeps every word the member or the host answered, for the operator.

use std::fmt;

/// One member's share of a failed part: which member, and what went wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberFailure {
    /// The member cluster.
    pub cluster: String,
    /// What it answered, or why it did not.
    pub message: String,
}

impl MemberFailure {
    /// `cluster` failed with `message`.
    pub fn new(cluster: impl Into<String>, message: impl fmt::Display) -> Self {
        MemberFailure { cluster: cluster.into(), message: message.to_string() }
    }
}

impl fmt::Display for MemberFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.cluster, self.message)
    }
}

/// The writes in members a round makes, each a part that can fail on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberPart {
    /// The namespace, headless Service and carried objects, or their dry run.
    Supporting,
    /// The member StatefulSets and the pod releases of a move.
    Writes,
    /// A move's storage step (volumes handed over, claims retired).
    Storage,
    /// The pods left in a fenced member that answers again.
    PodDeletes,
    /// The PodDisruptionBudgets of `spec.disruption`.
    Budgets,
    /// The EndpointSlices published for cross-cluster DNS.
    Slices,
}

/// Why a reconcile did not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoundError {
    /// The host did not store the federation's finalizer.
    #[error("finalizer: {0}")]
    Finalizer(String),
    /// The host did not store the federation's status.
    #[error("status: {0}")]
    Status(String),
    /// Fencing an unreachable member (its MemberCluster, in the host) failed.
    #[error("{member}: {message}")]
    Fence {
        /// The member being fenced.
        member: String,
        /// What the host answered.
        message: String,
    },
    /// The carried Secrets and ConfigMaps could not be read from the host.
    #[error("{0}")]
    Carried(String),
    /// A member's watcher holds no lease of this term: this process stopped leading mid-round.
    #[error("{0}")]
    NotLeader(MemberFailure),
    /// Members refused or did not answer one part of the round's writes.
    #[error("{}", joined(.failures))]
    Members {
        /// Which writes.
        part: MemberPart,
        /// Each member's failure, in the order met.
        failures: Vec<MemberFailure>,
    },
    /// The federation is being deleted and its teardown did not finish.
    #[error("{0}")]
    Deletion(String),
}

fn joined(failures: &[MemberFailure]) -> String {
    failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

impl RoundError {
    /// Every category there is: the label values of `spanset_reconcile_errors_total`, which
    /// the metrics own so that they can forget a federation's series without knowing the actor.
    pub const CATEGORIES: [&'static str; 12] = crate::telemetry::metrics::RECONCILE_ERROR_CATEGORIES;

    /// The part of the round that failed, from [`Self::CATEGORIES`].
    pub fn category(&self) -> &'static str {
        match self {
            RoundError::Finalizer(_) => "finalizer",
            RoundError::Status(_) => "status",
            RoundError::Fence { .. } => "fence",
            RoundError::Carried(_) => "carried_objects",
            RoundError::NotLeader(_) => "not_leader",
            RoundError::Members { part, .. } => match part {
                MemberPart::Supporting => "supporting_objects",
                MemberPart::Writes => "member_writes",
                MemberPart::Storage => "storage_step",
                MemberPart::PodDeletes => "pod_deletes",
                MemberPart::Budgets => "disruption_budgets",
                MemberPart::Slices => "endpoint_slices",
            },
            RoundError::Deletion(_) => "deletion",
        }
    }

    /// The members the failure names, in order, each once: with the category, what makes two
    /// failures the same one.
    pub fn members(&self) -> Vec<&str> {
        let mut names: Vec<&str> = match self {
            RoundError::Fence { member, .. } => vec![member],
            RoundError::NotLeader(f) => vec![&f.cluster],
            RoundError::Members { failures, .. } => failures.iter().map(|f| f.cluster.as_str()).collect(),
            _ => Vec::new(),
        };
        names.sort_unstable();
        names.dedup();
        names
    }

    /// `part` failed in the members of `failures`, if any did.
    pub fn of_members(part: MemberPart, failures: Vec<MemberFailure>) -> Result<(), RoundError> {
        if failures.is_empty() { Ok(()) } else { Err(RoundError::Members { part, failures }) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<RoundError> {
        let f = || vec![MemberFailure::new("east", "no answer")];
        let mut all = vec![
            RoundError::Finalizer("conflict".into()),
            RoundError::Status("conflict".into()),
            RoundError::Fence { member: "east".into(), message: "forbidden".into() },
            RoundError::Carried("secret db: forbidden".into()),
            RoundError::NotLeader(MemberFailure::new("east", "not the leader")),
            RoundError::Deletion("deleting: east has pods".into()),
        ];
        for part in [
            MemberPart::Supporting,
            MemberPart::Writes,
            MemberPart::Storage,
            MemberPart::PodDeletes,
            MemberPart::Budgets,
            MemberPart::Slices,
        ] {
            all.push(RoundError::Members { part, failures: f() });
        }
        all
    }

    #[test]
    fn every_category_is_listed_and_every_listed_one_is_met() {
        let met: std::collections::BTreeSet<&str> = every_kind().iter().map(RoundError::category).collect();
        let listed: std::collections::BTreeSet<&str> = RoundError::CATEGORIES.into_iter().collect();
        assert_eq!(met, listed);
    }

    #[test]
    fn the_message_names_each_member_and_keeps_its_words() {
        let e = RoundError::Members {
            part: MemberPart::Writes,
            failures: vec![
                MemberFailure::new("east", "409 Conflict: the object has been modified"),
                MemberFailure::new("west", "watcher gone"),
            ],
        };
        assert_eq!(e.to_string(), "east: 409 Conflict: the object has been modified; west: watcher gone");
        assert_eq!(e.members(), ["east", "west"]);
        assert_eq!(RoundError::Status("Conflict".into()).to_string(), "status: Conflict");
    }

    #[test]
    fn no_failure_is_no_error() {
        assert_eq!(RoundError::of_members(MemberPart::Budgets, Vec::new()), Ok(()));
        let failed = RoundError::of_members(MemberPart::Budgets, vec![MemberFailure::new("east", "x")]);
        assert_eq!(failed.unwrap_err().category(), "disruption_budgets");
    }

    #[test]
    fn the_metrics_page_lists_every_category() {
        let page = include_str!("../../../../../docs/observability.md");
        let row = page.lines().find(|l| l.starts_with("| `spanset_reconcile_errors_total`")).expect("documented");
        for category in RoundError::CATEGORIES {
            assert!(row.contains(&format!("`{category}`")), "docs/observability.md does not list {category}");
        }
    }
}
