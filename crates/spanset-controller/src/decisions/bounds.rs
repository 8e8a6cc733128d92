//! Bounds that protect clusters from a mistyped `spec.replicas`: a federation-wide ceiling the
//! platform owns (`spanset run --max-federation-replicas`) and a largest change at once
//! (`--max-replica-step`). A change beyond either is held at the replicas last accepted, with
//! the condition `ReplicasHeld` saying how to lift it, while everything else (moves, failover,
//! rollouts) goes on; a new federation above the ceiling has nothing to hold at and is
//! `Blocked`.
//!
//! Pure: from the spec's replicas, what was accepted before, and the bounds.

use spanset_api::FederatedStatefulSet;

/// The annotation that approves one large change: its value is the `spec.replicas` approved
/// (another value is held again), so an approval never outlives the change it was given for.
pub const APPROVE_REPLICAS: &str = "spanset.dev/approve-replicas";

/// The controller's bounds on replicas; 0 turns a bound off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaBounds {
    /// Most replicas one federation may have.
    pub ceiling: u32,
    /// Largest change of `spec.replicas` at once, up or down.
    pub step: u32,
}

impl Default for ReplicaBounds {
    /// 1,000 replicas per federation: past the largest StatefulSets run in practice (hundreds),
    /// well short of the 100,000 a stray `000` makes. A step of 100: every pod is a set of
    /// API writes, a volume to provision and a scheduling decision in some member, and 100 at
    /// once is what a member's own StatefulSet controller creates in a burst of parallel pods
    /// without strain; deliberate larger jumps are approved or taken in steps.
    fn default() -> Self {
        Self { ceiling: 1000, step: 100 }
    }
}

/// What the bounds make of `spec.replicas`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Plan for it.
    Accept,
    /// Plan for `at` instead (the replicas accepted before), and say why.
    Hold {
        /// The replicas planned for meanwhile.
        at: u32,
        /// `AboveCeiling` or `StepTooLarge`.
        reason: &'static str,
        /// What is held and how to lift it.
        message: String,
    },
    /// Nothing to hold at (a federation never accepted): `Blocked`.
    Refuse {
        /// Why, and how to lift it.
        message: String,
    },
}

/// Judges `wanted` (`spec.replicas`) against the bounds, given the replicas `accepted` last
/// (`status.acceptedReplicas`; `None` for a federation never planned) and the value its
/// approval annotation names.
pub fn judge(wanted: u32, accepted: Option<u32>, approved: Option<u32>, bounds: &ReplicaBounds) -> Judgement {
    if bounds.ceiling > 0 && wanted > bounds.ceiling {
        let lift = format!(
            "lower spec.replicas, or raise the controller's ceiling (spanset run --max-federation-replicas, now {})",
            bounds.ceiling
        );
        return match accepted.filter(|a| *a <= bounds.ceiling) {
            Some(at) => Judgement::Hold {
                at,
                reason: "AboveCeiling",
                message: format!(
                    "spec.replicas {wanted} is above the ceiling of {} replicas per federation; held at {at}: {lift}",
                    bounds.ceiling
                ),
            },
            None => Judgement::Refuse {
                message: format!(
                    "spec.replicas {wanted} is above the ceiling of {} replicas per federation: {lift}",
                    bounds.ceiling
                ),
            },
        };
    }
    match accepted {
        Some(at) if bounds.step > 0 && wanted.abs_diff(at) > bounds.step && approved != Some(wanted) => {
            Judgement::Hold {
                at,
                reason: "StepTooLarge",
                message: format!(
                    "spec.replicas changed from {at} to {wanted}, more than the step of {} at once (spanset run \
                     --max-replica-step); held at {at}: change it in steps of at most {}, or approve this change with \
                     the annotation {APPROVE_REPLICAS}={wanted}",
                    bounds.step, bounds.step
                ),
            }
        }
        _ => Judgement::Accept,
    }
}

/// The value of the federation's approval annotation, if it is a number.
pub fn approved(fsts: &FederatedStatefulSet) -> Option<u32> {
    fsts.metadata.annotations.as_ref()?.get(APPROVE_REPLICAS)?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: ReplicaBounds = ReplicaBounds { ceiling: 1000, step: 100 };

    #[test]
    fn within_the_bounds_is_accepted() {
        assert_eq!(judge(6, None, None, &B), Judgement::Accept);
        assert_eq!(judge(106, Some(6), None, &B), Judgement::Accept);
        assert_eq!(judge(0, Some(100), None, &B), Judgement::Accept);
        assert_eq!(judge(1000, Some(950), None, &B), Judgement::Accept);
    }

    #[test]
    fn a_new_federation_above_the_ceiling_is_refused_naming_the_flag() {
        let Judgement::Refuse { message } = judge(100_000, None, None, &B) else { panic!() };
        assert!(message.contains("spec.replicas 100000 is above the ceiling of 1000"), "{message}");
        assert!(message.contains("--max-federation-replicas"), "{message}");
    }

    #[test]
    fn a_change_above_the_ceiling_is_held_where_it_was_even_when_approved() {
        let j = judge(100_000, Some(6), Some(100_000), &B);
        let Judgement::Hold { at, reason, .. } = j else { panic!("{j:?}") };
        assert_eq!((at, reason), (6, "AboveCeiling"));
    }

    #[test]
    fn a_large_step_either_way_is_held_until_approved_for_exactly_that_value() {
        let up = judge(600, Some(6), None, &B);
        let Judgement::Hold { at, reason, message } = up else { panic!("{up:?}") };
        assert_eq!((at, reason), (6, "StepTooLarge"));
        assert!(message.contains("spanset.dev/approve-replicas=600"), "{message}");
        assert!(matches!(judge(6, Some(600), None, &B), Judgement::Hold { at: 600, .. }));
        assert_eq!(judge(600, Some(6), Some(600), &B), Judgement::Accept);
        assert!(matches!(judge(700, Some(6), Some(600), &B), Judgement::Hold { at: 6, .. }));
    }

    #[test]
    fn zero_turns_a_bound_off() {
        let off = ReplicaBounds { ceiling: 0, step: 0 };
        assert_eq!(judge(100_000, Some(1), None, &off), Judgement::Accept);
    }
}
