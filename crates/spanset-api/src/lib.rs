//! spanset's API (group `spanset.dev`, version `v1alpha1`), the wire contract between the
//! controller, its command line and the member clusters: the CRD types, their YAML, and the
//! conversion of a FederatedStatefulSet into the planner's [`spanset_plan::Desired`]; the
//! [`labels`] and annotations spanset stamps on member objects (which the member admission
//! policies match on); the StatefulSet [`pod_name`] rule; Kubernetes' [`human`] durations.
#![forbid(unsafe_code)]

pub mod decode;
mod example;
mod federated_statefulset;
pub mod human;
pub mod labels;
mod member_cluster;
mod network;
pub mod pod_name;
pub mod reference;
mod strategy;

pub use example::example;
pub use federated_statefulset::*;
pub use member_cluster::*;
pub use network::*;
pub use strategy::*;

use kube::CustomResourceExt;
use spanset_plan as plan;

/// `(file name, YAML)` of each CRD, as committed under `deploy/crds/`.
pub fn crd_files() -> Vec<(String, String)> {
    [FederatedStatefulSet::crd(), MemberCluster::crd()]
        .into_iter()
        .map(|crd| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            (format!("{name}.yaml"), serde_yaml::to_string(&crd).expect("a CRD always renders as YAML"))
        })
        .collect()
}

/// Both CRDs as one multi-document YAML stream.
pub fn crds_yaml() -> String {
    crd_files().into_iter().map(|(_, y)| format!("---\n{y}")).collect()
}

impl FederatedStatefulSetSpec {
    /// The planner's view of this spec. Negative numbers (which the schema refuses) become
    /// errors naming the field, like every other impossible spec.
    pub fn to_desired(&self) -> Result<plan::Desired, Vec<plan::SpecError>> {
        let mut errs = Vec::new();
        let mut non_negative = |field: &str, v: i32| -> u32 {
            u32::try_from(v).unwrap_or_else(|_| {
                errs.push(plan::SpecError { field: field.to_string(), reason: format!("must be at least 0, not {v}") });
                0
            })
        };
        let replicas = non_negative("spec.replicas", self.replicas);
        let start = non_negative("spec.ordinals.start", self.ordinals.as_ref().map(|o| o.start).unwrap_or(0));
        let clusters = self
            .placement
            .clusters
            .iter()
            .enumerate()
            .map(|(i, c)| plan::ClusterTarget {
                name: c.name.clone(),
                weight: non_negative(&format!("spec.placement.clusters[{i}].weight"), c.weight.unwrap_or(1)),
                min_replicas: non_negative(
                    &format!("spec.placement.clusters[{i}].minReplicas"),
                    c.min_replicas.unwrap_or(0),
                ),
                max_replicas: c
                    .max_replicas
                    .map(|m| non_negative(&format!("spec.placement.clusters[{i}].maxReplicas"), m)),
            })
            .collect();
        let moves = self.migration.max_concurrent_moves.unwrap_or(1);
        let max_concurrent_moves = non_negative("spec.migration.maxConcurrentMoves", moves);
        let desired = plan::Desired {
            replicas,
            start,
            backend: match self.backend {
                Backend::StatefulSet => plan::Backend::StatefulSet,
                Backend::AdvancedStatefulSet => plan::Backend::AdvancedStatefulSet,
            },
            clusters,
            max_concurrent_moves,
            on_scale: match self.placement.on_scale.unwrap_or_default() {
                OnScale::Keep => plan::OnScale::Keep,
                OnScale::Rebalance => plan::OnScale::Rebalance,
            },
        };
        errs.extend(plan::validate(&desired));
        if self.backend == Backend::StatefulSet {
            let only =
                "only with spec.backend AdvancedStatefulSet (OpenKruise); apps/v1 StatefulSets have no such field";
            if self.template.update_strategy.as_ref().and_then(UpdateStrategy::pod_update_policy).is_some() {
                errs.push(plan::SpecError {
                    field: "spec.template.updateStrategy.rollingUpdate.podUpdatePolicy".into(),
                    reason: only.into(),
                });
            }
            if self.template.scale_strategy.is_some() {
                errs.push(plan::SpecError { field: "spec.template.scaleStrategy".into(), reason: only.into() });
            }
        }
        let when_scaled =
            self.template.persistent_volume_claim_retention_policy.as_ref().and_then(|p| p.when_scaled.as_deref());
        if self.migration.storage == Some(StorageMode::Move) && when_scaled == Some("Delete") {
            let (field, reason) = WHEN_SCALED_DELETE_WITH_MOVE.split_once(": ").expect("the message names its field");
            errs.push(plan::SpecError { field: field.into(), reason: reason.into() });
        }
        if errs.is_empty() { Ok(desired) } else { Err(errs) }
    }
}
