//! The conditions a FederatedStatefulSet reports, with their reasons, built so that a
//! condition's `lastTransitionTime` only moves when its status does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition types.
pub mod types {
    /// Every ordinal is where the target puts it and Ready.
    pub const READY: &str = "Ready";
    /// Ordinals are moving, or slices are being written.
    pub const PROGRESSING: &str = "Progressing";
    /// Some member is left out of the target (unreachable, fenced, dropping ordinals).
    pub const DEGRADED: &str = "Degraded";
    /// A placement member has not answered within `unreachableAfterSeconds`.
    pub const CLUSTER_UNREACHABLE: &str = "ClusterUnreachable";
    /// Nothing can be written: the reason names the field or the member.
    pub const BLOCKED: &str = "Blocked";
    /// Pods run an older template than the spec's and a rolling update replaces them; the
    /// message names the pod it waits on (reason `RolloutStuck` when that pod cannot become
    /// Ready by itself).
    pub const UPDATING: &str = "Updating";
    /// An ordinal is seen running in two members at once (must never be True): the message
    /// names each such ordinal and the members.
    pub const IDENTITY_CONFLICT: &str = "IdentityConflict";
    /// A placement member lacks a guard spanset relies on (an older Kubernetes release): the
    /// message names each such member, its version and what the federation loses there.
    pub const GUARDS_MISSING: &str = "GuardsMissing";
    /// Some pod of a federation with a pod lease is not seen guarded (the message names each,
    /// and its member is then not fenced by a lapse), or its guard fails closed.
    pub const PODS_UNGUARDED: &str = "PodsUnguarded";
    /// A change of `spec.replicas` beyond the controller's bounds is held: the message says
    /// at which replicas and how to lift it.
    pub const REPLICAS_HELD: &str = "ReplicasHeld";
}

/// One condition as decided in a reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The condition type.
    pub type_: &'static str,
    /// True or False.
    pub status: bool,
    /// CamelCase reason.
    pub reason: String,
    /// For people.
    pub message: String,
}

impl Verdict {
    /// A condition that holds.
    pub fn yes(type_: &'static str, reason: &str, message: impl Into<String>) -> Self {
        Self { type_, status: true, reason: reason.into(), message: message.into() }
    }

    /// A condition that does not hold.
    pub fn no(type_: &'static str, reason: &str, message: impl Into<String>) -> Self {
        Self { type_, status: false, reason: reason.into(), message: message.into() }
    }
}

/// The conditions to store: `verdicts` in order, keeping each one's transition time from
/// `previous` while its status is unchanged.
pub fn conditions(previous: &[Condition], verdicts: &[Verdict], generation: Option<i64>, now: &Time) -> Vec<Condition> {
    verdicts
        .iter()
        .map(|v| {
            let status = if v.status { "True" } else { "False" }.to_string();
            let since = previous
                .iter()
                .find(|c| c.type_ == v.type_ && c.status == status)
                .map(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            Condition {
                type_: v.type_.to_string(),
                status,
                reason: v.reason.clone(),
                message: v.message.clone(),
                observed_generation: generation,
                last_transition_time: since,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_keeps_its_transition_time_until_its_status_changes() {
        let t0 = Time(jiff::Timestamp::from_second(1_000).unwrap());
        let t1 = Time(jiff::Timestamp::from_second(2_000).unwrap());
        let first = conditions(&[], &[Verdict::no(types::READY, "Progressing", "moving")], Some(1), &t0);
        let same = conditions(&first, &[Verdict::no(types::READY, "Blocked", "other")], Some(2), &t1);
        assert_eq!(same[0].last_transition_time, t0);
        assert_eq!(same[0].reason, "Blocked");
        let flipped = conditions(&same, &[Verdict::yes(types::READY, "AllReady", "")], Some(2), &t1);
        assert_eq!(flipped[0].last_transition_time, t1);
    }
}
