//! The PodDisruptionBudget spanset writes in a member for a federation (`spec.disruption`), and
//! what its watcher keeps of the one stored there and of the member's cordoned nodes: enough
//! for the coordinator to divide the federation's budget (see
//! [`crate::decisions::disruption`]) and to write a member's share only when it changed.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{core::v1::Node, policy::v1::PodDisruptionBudget},
    apimachinery::pkg::{
        apis::meta::v1::{LabelSelector, ObjectMeta},
        util::intstr::IntOrString,
    },
};
use kube::ResourceExt;
use spanset_api::{FederatedStatefulSet, labels::FEDERATION};

use super::{
    cache::rv_of,
    objects::{FederationKey, ownership_labels},
};

/// What spanset keeps of its PodDisruptionBudget in a member: its spec as far as spanset writes
/// it, never its status (which the member's disruption controller keeps, and which alone
/// changes with every eviction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetRecord {
    /// The object's uid (the precondition of its deletion).
    pub uid: String,
    /// Its resourceVersion.
    pub rv: u64,
    /// `spec.minAvailable` when it is a number (`None`: absent, or a percentage).
    pub min_available: Option<i32>,
    /// Whether `spec.maxUnavailable` is set (spanset never sets it).
    pub max_unavailable: bool,
    /// `spec.selector`, as JSON (compared with what spanset would write).
    pub selector: String,
    /// Being deleted.
    pub deleting: bool,
}

impl BudgetRecord {
    /// The record of a budget, with its federation, if it carries spanset's federation label.
    pub fn of(pdb: &PodDisruptionBudget) -> Option<(FederationKey, BudgetRecord)> {
        let name = pdb.labels().get(FEDERATION)?.clone();
        let spec = pdb.spec.as_ref();
        let record = BudgetRecord {
            uid: pdb.uid().unwrap_or_default(),
            rv: rv_of(pdb.metadata.resource_version.as_deref()),
            min_available: match spec.and_then(|s| s.min_available.as_ref()) {
                Some(IntOrString::Int(n)) => Some(*n),
                _ => None,
            },
            max_unavailable: spec.is_some_and(|s| s.max_unavailable.is_some()),
            selector: serde_json::to_string(&spec.and_then(|s| s.selector.as_ref())).unwrap_or_default(),
            deleting: pdb.metadata.deletion_timestamp.is_some(),
        };
        Some((FederationKey { namespace: pdb.namespace().unwrap_or_default(), name }, record))
    }
}

/// Whether a node is cordoned (`spec.unschedulable`, what `kubectl drain` and `kubectl cordon`
/// set): a drain waits on each of the federation's pods there.
pub fn cordoned(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
}

/// The selector of a federation's budget in every member: the template's, plus the federation
/// label, so that it selects exactly the federation's pods there (a user's other pods with the
/// same labels stay out of spanset's budget).
pub fn selector(fsts: &FederatedStatefulSet) -> LabelSelector {
    let mut selector = fsts.spec.template.selector.clone();
    selector.match_labels.get_or_insert_with(BTreeMap::new).insert(FEDERATION.to_string(), fsts.name_any());
    selector
}

/// The PodDisruptionBudget of a federation in one member: named like the federation, with
/// spanset's ownership labels and the writer's term, and an absolute `minAvailable` (the
/// member's Ready pods minus its share of what the federation's budget has left), so that a
/// pod failing there reduces that member's allowance at once, before spanset divides again.
pub fn disruption_budget(fsts: &FederatedStatefulSet, min_available: u32, term: u64) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(fsts.name_any()),
            namespace: fsts.namespace(),
            labels: Some(ownership_labels(fsts)),
            annotations: Some(crate::leadership::written_by::stamps(term)),
            ..Default::default()
        },
        spec: Some(k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(i32::try_from(min_available).unwrap_or(i32::MAX))),
            selector: Some(selector(fsts)),
            ..Default::default()
        }),
        status: None,
    }
}

/// Whether the stored budget is the one spanset would write with `min_available` (the term
/// aside: a budget is not written again only to carry a newer term).
pub fn is_current(record: &BudgetRecord, fsts: &FederatedStatefulSet, min_available: u32) -> bool {
    !record.deleting
        && !record.max_unavailable
        && record.min_available == i32::try_from(min_available).ok()
        && record.selector == serde_json::to_string(&Some(selector(fsts))).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_selects_exactly_the_federation_s_pods_with_an_absolute_minimum() {
        let mut fsts = spanset_api::example(&["east".into()]);
        fsts.metadata.uid = Some("u-1".into());
        let pdb = disruption_budget(&fsts, 1, 7);
        let v = serde_json::to_value(&pdb).unwrap();
        assert_eq!(v["metadata"]["name"], "redis");
        assert_eq!(v["metadata"]["namespace"], "default");
        assert_eq!(v["metadata"]["labels"]["app.kubernetes.io/managed-by"], "spanset");
        assert_eq!(v["metadata"]["labels"]["spanset.dev/federation-uid"], "u-1");
        assert_eq!(v["metadata"]["annotations"]["spanset.dev/term"], "7");
        assert_eq!(v["metadata"]["annotations"]["spanset.dev/written-by"], crate::leadership::written_by::version());
        assert_eq!(
            v["spec"],
            serde_json::json!({"minAvailable": 1,
                "selector": {"matchLabels": {"app": "redis", "spanset.dev/federation": "redis"}}})
        );
        let (key, record) = BudgetRecord::of(&pdb).expect("spanset's own");
        assert_eq!(key, FederationKey::of(&fsts));
        assert!(is_current(&record, &fsts, 1));
        assert!(!is_current(&record, &fsts, 2), "another minimum is written again");
        let mut theirs = pdb.clone();
        theirs.metadata.labels = None;
        assert!(BudgetRecord::of(&theirs).is_none(), "a budget without the federation label is not spanset's");
    }
}
