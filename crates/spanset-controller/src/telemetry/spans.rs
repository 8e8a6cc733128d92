//! The controller's tracing spans, in one place so their names and fields stay consistent:
//! one per reconcile (`reconcile{federation, term}`) and one per member write
//! (`member_write{cluster, federation, ordinals, replicas, dry_run}`); events logged inside carry
//! these fields in both log formats. Fields are names and numbers only, never object bodies,
//! so no Secret data or token reaches the logs.

use kube::api::DynamicObject;
use tracing::{Span, info_span};

use crate::member::workload;

/// The span of one reconcile of `federation` (`namespace/name`) in leader term `term`.
pub fn reconcile(federation: &impl std::fmt::Display, term: u64) -> Span {
    info_span!("reconcile", federation = %federation, term)
}

/// The span of one write of `object`, a federation's StatefulSet, in member `cluster`.
/// `ordinals` is the set written, as ranges (`0,2-3`; `-` for none), reservations included.
pub fn member_write(
    cluster: &str,
    federation: &impl std::fmt::Display,
    object: &DynamicObject,
    kind: spanset_plan::Backend,
    dry_run: bool,
) -> Span {
    let slice = workload::stored_slice(object, kind);
    info_span!(
        "member_write",
        cluster = %cluster,
        federation = %federation,
        ordinals = %spanset_plan::ordinals_text(&slice.ordinals()),
        replicas = slice.replicas,
        dry_run
    )
}

#[cfg(test)]
mod tests {
    use spanset_plan::{Ordinals, ordinals_text};

    #[test]
    fn a_write_names_the_ordinals_it_writes() {
        assert_eq!(ordinals_text(&Ordinals::from([2, 3])), "2-3");
        assert_eq!(ordinals_text(&Ordinals::from([4])), "4");
        assert_eq!(ordinals_text(&Ordinals::from([0, 2, 3, 7])), "0,2-3,7");
        assert_eq!(ordinals_text(&Ordinals::new()), "-");
    }
}
