//! The controller's tracing spans, in one place so their names and fields stay consistent:
//! one per reconcile (`reconcile{federation, term}`) and one per member write
//! (`member_write{cluster, federation, ordinals, replicas, dry_run}`); events logged inside carry
//! these fields in both log formats. Fields are names and numbers only, never object bodies,
//! so no Secret data or token reaches the logs.

use k8s_openapi::api::apps::v1::StatefulSet;
use tracing::{Span, info_span};

/// The span of one reconcile of `federation` (`namespace/name`) in leader term `term`.
pub fn reconcile(federation: &impl std::fmt::Display, term: u64) -> Span {
    info_span!("reconcile", federation = %federation, term)
}

/// The span of one write of `object`, a federation's StatefulSet, in member `cluster`.
pub fn member_write(cluster: &str, federation: &impl std::fmt::Display, object: &StatefulSet, dry_run: bool) -> Span {
    let spec = object.spec.as_ref();
    let replicas = spec.and_then(|s| s.replicas).unwrap_or(0);
    let start = spec.and_then(|s| s.ordinals.as_ref()).and_then(|o| o.start).unwrap_or(0);
    info_span!(
        "member_write",
        cluster = %cluster,
        federation = %federation,
        ordinals = %ordinals(start, replicas),
        replicas,
        dry_run
    )
}

/// `start-end` (inclusive), `start` for one ordinal, `-` for none.
fn ordinals(start: i32, replicas: i32) -> String {
    match replicas {
        r if r <= 0 => "-".into(),
        1 => start.to_string(),
        r => format!("{start}-{}", start.saturating_add(r - 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::ordinals;

    #[test]
    fn a_write_names_the_ordinals_it_writes() {
        assert_eq!(ordinals(2, 2), "2-3");
        assert_eq!(ordinals(4, 1), "4");
        assert_eq!(ordinals(0, 0), "-");
    }
}
