//! The order in which a coordinator carries out one decision: a pure function from the
//! decision to its stages, which the coordinator's actor performs one after the other and the
//! model checker (`crates/spanset-controller/tests/model_check/model_check.rs`) performs the same way. The order is a safety rule
//! ([`Rules::status_before_write`]): a move is stored before the writes that act on it.

use crate::decisions::{reconcile::Decision, safety::Rules};

/// One stage of carrying out a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Fence the members the automatic failover policy gave up on; nothing else this round
    /// (the next reconcile plans on the fences).
    Fence,
    /// Add spanset's finalizer to the federation, if missing.
    Finalizer,
    /// Dry-run what this round writes in every member (nothing is written anywhere while one
    /// refuses), then ensure the namespace, Service and carried objects where due.
    Supporting,
    /// Store the decision's status (conditional on the federation's resourceVersion).
    StoreStatus,
    /// Storage handovers of moving ordinals.
    Handovers,
    /// Member StatefulSet writes and pod releases, sent together.
    MemberWrites,
    /// Delete the pods left in fenced members that answer again.
    PodDeletes,
    /// The members' PodDisruptionBudgets.
    Budgets,
    /// spanset's EndpointSlices in the members.
    Slices,
}

/// The stages of `decision`, in order. The status goes first when the decision recorded a
/// move the writes act on (`persist_first`), else last and only when nothing was written (a
/// write's effect is reported by the watchers, and the next reconcile stores it).
pub fn stages(decision: &Decision, rules: &Rules) -> Vec<Stage> {
    use Stage::*;
    if !decision.fence.is_empty() {
        return vec![Fence];
    }
    if decision.blocked {
        return vec![StoreStatus];
    }
    let first = decision.persist_first && rules.status_before_write;
    let mut out = vec![Finalizer, Supporting];
    if first {
        out.push(StoreStatus);
    }
    out.extend([Handovers, MemberWrites, PodDeletes, Budgets, Slices]);
    // Planted bug (status_before_write off): the status that records the moves goes after the
    // writes that act on them.
    if !first && (decision.writes.is_empty() || decision.persist_first) {
        out.push(StoreStatus);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Stage::*, *};
    use crate::decisions::reconcile::StsWrite;

    fn write() -> StsWrite {
        let object = serde_json::from_value(serde_json::json!({"apiVersion": "apps/v1", "kind": "StatefulSet"}))
            .expect("an object");
        StsWrite { cluster: "a".into(), object, expected_rv: Some(1), new_template: false, recreate: false }
    }

    #[test]
    fn a_recorded_move_is_stored_before_the_writes_that_act_on_it() {
        let d = Decision { persist_first: true, writes: vec![write()], ..Default::default() };
        assert_eq!(
            stages(&d, &Rules::ALL),
            [Finalizer, Supporting, StoreStatus, Handovers, MemberWrites, PodDeletes, Budgets, Slices]
        );
        let planted = Rules { status_before_write: false, ..Rules::ALL };
        assert_eq!(
            stages(&d, &planted),
            [Finalizer, Supporting, Handovers, MemberWrites, PodDeletes, Budgets, Slices, StoreStatus]
        );
    }

    #[test]
    fn the_status_is_stored_last_only_when_nothing_is_written() {
        let idle = Decision::default();
        assert_eq!(stages(&idle, &Rules::ALL).last(), Some(&StoreStatus));
        let writing = Decision { writes: vec![write()], ..Default::default() };
        assert!(!stages(&writing, &Rules::ALL).contains(&StoreStatus), "the watchers report what the writes did");
    }

    #[test]
    fn a_fence_or_a_block_is_all_a_round_does() {
        let fence =
            Decision { fence: vec![("a".into(), "silent".into())], writes: vec![write()], ..Default::default() };
        assert_eq!(stages(&fence, &Rules::ALL), [Fence]);
        let blocked = Decision { blocked: true, ..Default::default() };
        assert_eq!(stages(&blocked, &Rules::ALL), [StoreStatus]);
    }
}
