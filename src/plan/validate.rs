//! Checks a [`Desired`] before planning: every impossible spec gets an error naming the field
//! and the reason, the same for `spanset plan` and the controller.

use std::collections::BTreeSet;

use super::types::Desired;

/// Why a spec cannot be planned; names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct SpecError {
    /// The field path, e.g. `spec.placement.clusters[1].minReplicas`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

fn err(field: impl Into<String>, reason: impl Into<String>) -> SpecError {
    SpecError { field: field.into(), reason: reason.into() }
}

/// Every problem with a spec (empty when it can be planned).
pub fn validate(d: &Desired) -> Vec<SpecError> {
    let mut errs = Vec::new();
    if u64::from(d.start) + u64::from(d.replicas) > i32::MAX as u64 {
        errs.push(err(
            "spec.ordinals.start",
            format!("start ({}) + replicas ({}) must stay within int32", d.start, d.replicas),
        ));
    }
    if d.clusters.is_empty() {
        errs.push(err("spec.placement.clusters", "at least one cluster is required"));
    }
    let mut names = BTreeSet::new();
    for (i, c) in d.clusters.iter().enumerate() {
        // Only a cluster with a problem pays for its field path.
        let at = || format!("spec.placement.clusters[{i}]");
        if c.name.is_empty() {
            errs.push(err(format!("{}.name", at()), "must not be empty"));
        } else if !names.insert(c.name.as_str()) {
            errs.push(err(format!("{}.name", at()), format!("cluster {:?} is listed twice", c.name)));
        }
        if let Some(max) = c.max_replicas
            && c.min_replicas > max
        {
            errs.push(err(
                format!("{}.minReplicas", at()),
                format!("minReplicas ({}) exceeds maxReplicas ({max})", c.min_replicas),
            ));
        }
    }
    if !d.clusters.is_empty() && d.clusters.iter().all(|c| c.weight == 0) {
        errs.push(err("spec.placement.clusters", "at least one cluster needs a weight above 0"));
    }
    let min_sum: u64 = d.clusters.iter().map(|c| u64::from(c.min_replicas)).sum();
    if min_sum > u64::from(d.replicas) {
        errs.push(err(
            "spec.placement.clusters",
            format!("the sum of minReplicas ({min_sum}) exceeds spec.replicas ({})", d.replicas),
        ));
    }
    if d.clusters.iter().all(|c| c.max_replicas.is_some()) {
        let max_sum: u64 = d.clusters.iter().filter_map(|c| c.max_replicas).map(u64::from).sum();
        if max_sum < u64::from(d.replicas) {
            errs.push(err(
                "spec.placement.clusters",
                format!("the sum of maxReplicas ({max_sum}) is below spec.replicas ({})", d.replicas),
            ));
        }
    }
    if d.max_concurrent_moves == 0 {
        errs.push(err("spec.migration.maxConcurrentMoves", "must be at least 1"));
    }
    errs
}
