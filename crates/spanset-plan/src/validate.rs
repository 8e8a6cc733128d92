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

/// The longest federation name whose member pods still get a valid `controller-revision-hash`
/// label (`<name>-<10 chars>` must fit the 63-character label limit).
pub const MAX_NAME_LEN: usize = 52;

/// Problems with a federation's name, namespace and serviceName that would make its member
/// objects invalid (checked by the controller too, for objects stored without the CRD's rule).
pub fn validate_names(name: &str, namespace: &str, service_name: &str) -> Vec<SpecError> {
    let mut errs = Vec::new();
    if name.len() > MAX_NAME_LEN {
        errs.push(err(
            "metadata.name",
            format!(
                "{} characters; at most {MAX_NAME_LEN}: member pods carry the label controller-revision-hash=<name>-<10 characters>, limited to 63",
                name.len()
            ),
        ));
    }
    if !is_dns_label(namespace) {
        errs.push(err("metadata.namespace", "must be a DNS-1123 label of at most 63 characters"));
    }
    if !is_dns_label(service_name) {
        errs.push(err(
            "spec.template.serviceName",
            format!(
                "{service_name:?} must be a DNS-1123 label (lower case letters, digits, '-'; at most 63 characters)"
            ),
        ));
    }
    errs
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod names_tests {
    use super::*;

    #[test]
    fn a_54_character_name_is_refused_naming_the_label_limit() {
        let name = "a".repeat(54);
        let errs = validate_names(&name, "default", "web");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "metadata.name");
        assert!(errs[0].reason.contains("63"), "{}", errs[0]);
        assert!(validate_names(&"a".repeat(52), "default", "web").is_empty());
    }

    #[test]
    fn a_service_name_that_is_no_dns_label_is_refused() {
        let errs = validate_names("web", "default", "Web_Service");
        assert_eq!(errs[0].field, "spec.template.serviceName");
    }
}
