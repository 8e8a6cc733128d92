//! `FederatedStatefulSet` (spanset.dev/v1alpha1): one StatefulSet spread over member clusters.
//! The schema and its CEL rules refuse everything that can be judged statically; the rest is
//! judged by the planner's validation, with the same field names.

use k8s_openapi::{
    api::{
        apps::v1::StatefulSetPersistentVolumeClaimRetentionPolicy,
        core::v1::{PersistentVolumeClaim, PodTemplateSpec},
    },
    apimachinery::pkg::{
        apis::meta::v1::{Condition, LabelSelector},
        util::intstr::IntOrString,
    },
};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// A FederatedStatefulSet's spec: the whole ordinal range, how it is placed, how ordinals move
/// and how failures are handled.
// Several printer columns share `type_ = "string"`; clippy reads them as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[kube(
    group = "spanset.dev",
    version = "v1alpha1",
    kind = "FederatedStatefulSet",
    namespaced,
    shortname = "fsts",
    status = "FederatedStatefulSetStatus",
    // `/scale`, so that `kubectl scale fsts` and a HorizontalPodAutoscaler can target it.
    scale(spec_replicas_path = ".spec.replicas", status_replicas_path = ".status.replicas", label_selector_path = ".status.labelSelector"),
    // Client-side CEL evaluation (`validate_cel`), so tests can run the schema's rules.
    cel,
    // Longer names break the controller-revision-hash label of member pods: 63 characters
    // minus "-" minus a 10-character hash (kubernetes/kubernetes#64023).
    validation = Rule::new("self.metadata.name.size() <= 52").message("metadata.name: must be no more than 52 characters"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.ready", description = "Ready replicas / desired replicas"),
    printcolumn(name = "Clusters", type_ = "integer", json_path = ".status.clusters", description = "Clusters holding a slice"),
    printcolumn(name = "Moving", type_ = "integer", json_path = ".status.moving", description = "Ordinals moving between clusters"),
    printcolumn(name = "Up-to-date", type_ = "integer", json_path = ".status.updatedReplicas", description = "Pods running the spec's template"),
    printcolumn(name = "Available", type_ = "integer", json_path = ".status.availableReplicas", description = "Pods Ready for minReadySeconds"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.ordinals) || self.ordinals.start + self.replicas <= 2147483647").message("spec.ordinals.start: start + replicas must stay within int32"))]
#[x_kube(validation = Rule::new("self.placement.clusters.map(c, has(c.minReplicas) ? c.minReplicas : 0).sum() <= self.replicas").message("spec.placement.clusters: the sum of minReplicas exceeds spec.replicas"))]
#[x_kube(validation = Rule::new("(has(self.backend) && self.backend == 'AdvancedStatefulSet') || (!has(self.template.scaleStrategy) && !(has(self.template.updateStrategy) && has(self.template.updateStrategy.rollingUpdate) && has(self.template.updateStrategy.rollingUpdate.podUpdatePolicy)))").message("spec.template: podUpdatePolicy and scaleStrategy are only for spec.backend AdvancedStatefulSet"))]
#[x_kube(validation = Rule::new("(has(self.backend) ? self.backend : 'StatefulSet') == (has(oldSelf.backend) ? oldSelf.backend : 'StatefulSet')").message("spec.backend is immutable: the member StatefulSets of one API are not converted into the other; delete the federation and create it again"))]
// A source that shrinks garbage-collects the claim of the ordinal it gives up (whenScaled:
// Delete) before its volume can be handed over, so the moved ordinal would start empty.
#[x_kube(validation = Rule::new("!(has(self.migration) && has(self.migration.storage) && self.migration.storage == 'Move' && has(self.template.persistentVolumeClaimRetentionPolicy) && has(self.template.persistentVolumeClaimRetentionPolicy.whenScaled) && self.template.persistentVolumeClaimRetentionPolicy.whenScaled == 'Delete')").message(WHEN_SCALED_DELETE_WITH_MOVE))]
pub struct FederatedStatefulSetSpec {
    /// Total replicas across all member clusters.
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// The global ordinal range starts here (like `.spec.ordinals` of a StatefulSet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordinals: Option<GlobalOrdinals>,
    /// Which workload API member clusters run.
    #[serde(default)]
    pub backend: Backend,
    /// The StatefulSet written in every member, without replicas and ordinals.
    pub template: StatefulSetTemplate,
    /// Where the replicas go.
    pub placement: Placement,
    /// How ordinals move between clusters.
    #[serde(default)]
    pub migration: Migration,
    /// What happens when a member cluster is lost.
    #[serde(default)]
    pub failover: Failover,
    /// `Enabled` (the default): every pod of the federation is created with the scheduling
    /// gate `spanset.dev/identity` and waits, unscheduled, until spanset has confirmed that no
    /// other cluster runs or may run its ordinal and removes the gate (one write per pod
    /// start; no pod can start while no spanset leader runs). This closes what reverting
    /// after the fact cannot: a member's own StatefulSet controller starting a pod spanset
    /// did not ask for (a hand scale, a member returning with a stale slice). `Disabled`:
    /// pods start as soon as their member creates them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_gate: Option<IdentityGate>,
    /// One disruption budget for the whole federation, wherever its pods run: spanset's own
    /// voluntary disruptions (moves, rolling updates) never take more pods down at once,
    /// counting pods unavailable for any reason in any member, and each member gets a
    /// PodDisruptionBudget holding its share of what is left, so that drains in several
    /// members together cannot exceed it either. Unset: moves are bounded by
    /// `migration.maxConcurrentMoves` and rollouts by `rollingUpdate.maxUnavailable`, both
    /// counting pods unavailable anywhere; no PodDisruptionBudget is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<Disruption>,
    /// How each pod's stable name (`<pod>.<serviceName>.<namespace>.svc.<zone>`) answers in the
    /// members that do not run it. Unset: `mode: EndpointSlices`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<super::Network>,
}

/// `spec.disruption`: the federation's disruption budget, as a PodDisruptionBudget's.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.maxUnavailable) != has(self.minAvailable)").message("spec.disruption: set exactly one of maxUnavailable and minAvailable"))]
pub struct Disruption {
    /// Most pods of the federation unavailable at once: a number, or a percentage of
    /// `spec.replicas` (rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "int_or_percent")]
    pub max_unavailable: Option<IntOrString>,
    /// Fewest pods of the federation available at all times: a number, or a percentage of
    /// `spec.replicas` (rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "int_or_percent")]
    pub min_available: Option<IntOrString>,
}

fn int_or_percent(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^(100|[1-9]?[0-9])%$"}]})
}

impl Disruption {
    /// How many of `replicas` pods may be unavailable at once: `maxUnavailable`, or `replicas`
    /// minus `minAvailable` (percentages of `replicas`, rounded up as Kubernetes rounds a
    /// PodDisruptionBudget's).
    pub fn allowed_unavailable(&self, replicas: u32) -> u32 {
        let count = |v: &IntOrString| -> u32 {
            match v {
                IntOrString::Int(n) => (*n).max(0) as u32,
                IntOrString::String(s) => s
                    .strip_suffix('%')
                    .and_then(|p| p.parse::<u64>().ok())
                    .map(|p| (u64::from(replicas) * p.min(100)).div_ceil(100) as u32)
                    .unwrap_or(0),
            }
        };
        match (&self.max_unavailable, &self.min_available) {
            (Some(m), _) => count(m),
            (None, Some(m)) => replicas.saturating_sub(count(m)),
            (None, None) => replicas,
        }
    }
}

/// Whether member pods wait for spanset's release (`spec.identityGate`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, schemars::JsonSchema)]
pub enum IdentityGate {
    /// Pods carry the scheduling gate `spanset.dev/identity` until spanset releases them.
    #[default]
    Enabled,
    /// Pods start as soon as their member creates them.
    Disabled,
}

/// Why `migration.storage: Move` and `whenScaled: Delete` are refused together (by the CRD's
/// rule and by the controller, for objects stored before the rule).
pub const WHEN_SCALED_DELETE_WITH_MOVE: &str = "spec.migration.storage: Move cannot be combined with \
spec.template.persistentVolumeClaimRetentionPolicy.whenScaled: Delete (the source would delete a moving ordinal's \
claim, and its volume, before the handover); set whenScaled to Retain or storage to Detached";

/// The first ordinal of the global range.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, KubeSchema)]
pub struct GlobalOrdinals {
    /// First ordinal.
    #[schemars(range(min = 0))]
    pub start: i32,
}

/// The member workload API.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default, schemars::JsonSchema)]
pub enum Backend {
    /// apps/v1 StatefulSet: each cluster owns one contiguous slice.
    #[default]
    StatefulSet,
    /// apps.kruise.io/v1beta1 StatefulSet: any set of ordinals per cluster.
    AdvancedStatefulSet,
}

fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    // The pod template is validated by each member's apiserver; repeating its schema here
    // would make the CRD hundreds of kilobytes, so it is kept as an open object.
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn preserve_unknown_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
}

fn retention_policy(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    // Spelled out (not an open object) so that the spec's CEL rules can read `whenScaled`.
    let policy = serde_json::json!({"type": "string", "enum": ["Retain", "Delete"]});
    schemars::json_schema!({"type": "object", "properties": {"whenDeleted": policy, "whenScaled": policy}})
}

/// A StatefulSet spec without `replicas` and `ordinals`, which spanset sets per cluster. The
/// immutable fields are checked here rather than on the fields themselves: a field-level
/// transition rule is not evaluated when the field is removed, which would let a removal through.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, KubeSchema)]
#[x_kube(validation = Rule::new("self.selector == oldSelf.selector").message("spec.template.selector is immutable"))]
#[x_kube(validation = Rule::new("self.serviceName == oldSelf.serviceName").message("spec.template.serviceName is immutable"))]
#[x_kube(validation = Rule::new("(has(self.volumeClaimTemplates) ? self.volumeClaimTemplates : []) == (has(oldSelf.volumeClaimTemplates) ? oldSelf.volumeClaimTemplates : [])").message("spec.template.volumeClaimTemplates is immutable"))]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetTemplate {
    /// Pod selector (immutable, as in a StatefulSet).
    pub selector: LabelSelector,
    /// Governing Service name (immutable).
    pub service_name: String,
    /// The pod template.
    #[schemars(schema_with = "preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// Claim templates (immutable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "preserve_unknown_list")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,
    /// `OrderedReady` or `Parallel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_management_policy: Option<String>,
    /// RollingUpdate or OnDelete; with `backend: AdvancedStatefulSet`, Kruise's
    /// `rollingUpdate.podUpdatePolicy` too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<super::UpdateStrategy>,
    /// `backend: AdvancedStatefulSet` only: Kruise's `scaleStrategy` of every slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<super::ScaleStrategy>,
    /// PVC retention on scale-down and deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "retention_policy")]
    pub persistent_volume_claim_retention_policy: Option<StatefulSetPersistentVolumeClaimRetentionPolicy>,
    /// Seconds a pod must be Ready before it counts as available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,
}

/// Member clusters, in placement order (the order of slices in ordinal space for apps/v1).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.clusters.all(c, self.clusters.exists_one(d, d.name == c.name))").message("spec.placement.clusters: cluster names must be unique"))]
#[x_kube(validation = Rule::new("self.clusters.exists(c, !has(c.weight) || c.weight > 0)").message("spec.placement.clusters: at least one cluster needs a weight above 0"))]
pub struct Placement {
    /// The clusters.
    #[schemars(length(min = 1, max = 100))]
    pub clusters: Vec<PlacementCluster>,
    /// What a change of `spec.replicas` alone does to the pods that survive it (see
    /// [`OnScale`], whose text the CRD shows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_scale: Option<OnScale>,
}

/// What a change of `spec.replicas` alone does to the pods that survive it
/// (`spec.placement.onScale`). `Keep` (default): nothing moves — a scale-down removes the highest
/// ordinals where they run, a scale-up adds the next ordinals to the clusters the weights say
/// lack most among those that can take them without a move (apps/v1: the slice that borders
/// them or an empty one after it in placement order; Advanced StatefulSet: any). The weights
/// are applied again, with moves, only when the placement itself changes (a cluster's weight,
/// minReplicas or maxReplicas; a cluster added, removed, fenced or unfenced — not one merely
/// unreachable, whose ordinals cannot move before it is fenced) or when a scale-down would leave
/// a cluster below its minReplicas. `Rebalance`: after every scale the
/// division follows the weights again through ordinary moves (in status.moves, within
/// maxConcurrentMoves). Keep is the default because a move restarts a pod elsewhere, often on a
/// fresh volume, which a scale never asked for.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, schemars::JsonSchema)]
pub enum OnScale {
    /// A scale moves no surviving ordinal; the weights apply again when the placement changes.
    #[default]
    Keep,
    /// After a scale the division follows the weights again, through moves.
    Rebalance,
}

/// One member cluster's share.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.maxReplicas) || !has(self.minReplicas) || self.minReplicas <= self.maxReplicas").message("minReplicas must not exceed maxReplicas"))]
pub struct PlacementCluster {
    /// A MemberCluster name.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Relative share of the replicas (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub weight: Option<i32>,
    /// Fewest replicas this cluster holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_replicas: Option<i32>,
    /// Most replicas this cluster holds (a move that can land nowhere else may park here beyond
    /// it until the moves in its way have run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_replicas: Option<i32>,
}

/// How ordinals move.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    /// Most ordinals moving at once (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_concurrent_moves: Option<i32>,
    /// `Detached` (a fresh claim in the destination) or `Move` (hand the PV over, as the blog).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageMode>,
    /// With `storage: Detached`, what becomes of the claims an ordinal leaves in its source: they
    /// hold data older than the ordinal's next run elsewhere, so they must never bind again if
    /// it comes back. `Release` (default) or `Delete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_claims: Option<StaleClaims>,
    /// Objects copied into every member cluster. A Secret is copied only if labelled
    /// `spanset.dev/carry=true` (its owner's consent); the controller may read them only in
    /// namespaces where ClusterRole `spanset-carry` is bound to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carry: Vec<CarriedObject>,
}

/// What becomes of the claims a departing ordinal leaves in its source (`storage: Detached`).
/// Either way the claim is deleted once the ordinal is Ready elsewhere (until then a move can
/// be rolled back onto it), so a later return gets a fresh claim instead of silently starting
/// on older data; an Event names each claim.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default, schemars::JsonSchema)]
pub enum StaleClaims {
    /// The claim is deleted and its volume kept: reclaim policy `Retain`, left `Released`
    /// for an operator to inspect or delete (the Event names it).
    #[default]
    Release,
    /// The claim is deleted and its volume goes by its reclaim policy (usually deleted).
    Delete,
}

/// What happens to storage when an ordinal moves.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, schemars::JsonSchema)]
pub enum StorageMode {
    /// The destination gets a fresh claim; the application re-replicates.
    Detached,
    /// The PV is kept (reclaim Retain) and handed to the destination with its claim.
    Move,
}

/// An object carried into every member cluster.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, schemars::JsonSchema)]
pub struct CarriedObject {
    /// Kind (`Secret`, `ConfigMap`).
    pub kind: String,
    /// Name in the FederatedStatefulSet's namespace.
    pub name: String,
}

/// Failover policy.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct Failover {
    /// `Manual` waits for an operator's fence; `Automatic` fences after `fenceAfterSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<FailoverPolicy>,
    /// Seconds without a successful API call before a cluster is Unreachable (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub unreachable_after_seconds: Option<i32>,
    /// Seconds Unreachable before automatic fencing (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub fence_after_seconds: Option<i32>,
    /// Opt-in self-fencing pods: spanset keeps a lease in each member naming the ordinals
    /// allowed there, and a guard in every pod stops it before that lease can have lapsed, so an
    /// unreachable member's ordinals may be re-homed once its lease has lapsed, without a fence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_lease: Option<PodLease>,
}

/// The longest pod lease spanset accepts (a day): also what a guard whose length cannot be read
/// is taken to hold.
pub const MAX_POD_LEASE_SECONDS: i32 = 86400;

/// A federation's pod lease: how long a member's pods keep running once spanset can no longer
/// extend their lease (spanset unreachable from the member, or not running at all).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodLease {
    /// The lease in seconds (10 to 86400): after this long without an extension a member's pods
    /// stop themselves, and spanset re-homes them no sooner (plus its drift margin).
    #[schemars(range(min = 10, max = 86400))]
    pub seconds: i32,
}

/// Who fences a lost cluster.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, schemars::JsonSchema)]
pub enum FailoverPolicy {
    /// An operator (`spanset fence`).
    Manual,
    /// spanset itself, after the grace period, loudly.
    Automatic,
}

/// Observed state of a FederatedStatefulSet.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FederatedStatefulSetStatus {
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, Progressing, Degraded, ClusterUnreachable, Blocked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Slice per cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<SliceStatus>,
    /// Moves in flight: durable intent, so a restarted controller resumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<MoveStatus>,
    /// Ready replicas in all clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// `ready/desired`, for the READY column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// Clusters holding a slice, for the CLUSTERS column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<i32>,
    /// Ordinals moving, for the MOVING column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moving: Option<i32>,
    /// Pods of the federation that exist in reachable, unfenced members (a StatefulSet's
    /// `status.replicas`; the `/scale` subresource's `statusReplicasPath`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The pod selector as a string (`app=redis`), for `/scale` and autoscalers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
    /// The template revision every pod ran before the rollout in progress (equal to
    /// `updateRevision` once it is complete), as a StatefulSet's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
    /// The revision of the spec's template (`<name>-<hash>`; the same template gives the same
    /// revision, so a rollback is applying the previous template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_revision: Option<String>,
    /// Pods running `currentRevision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_replicas: Option<i32>,
    /// Pods running `updateRevision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    /// Pods Ready for at least `minReadySeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// The rollout's cursor: pods of ordinals at or above it may run `updateRevision`. spanset
    /// lowers it one pod at a time across all members (at most
    /// `updateStrategy.rollingUpdate.maxUnavailable` pods of the whole federation unavailable)
    /// and never below `rollingUpdate.partition`; each member is written its share of it as
    /// its own partition. Durable, so that a restarted controller resumes where it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_partition: Option<i32>,
    /// The placement the slices were last divided for by weight, as `name:weight[:min-max]`
    /// of each cluster that is neither fenced nor incompatible, in placement order. While it
    /// equals the placement now, `spec.placement.onScale: Keep` places a change of replicas
    /// from the written slices (no surviving pod moves); when it differs the weights are
    /// applied again, and it is updated once every slice is written as divided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balanced_placement: Option<String>,
    /// The replicas spanset plans for: `spec.replicas`, unless a change beyond the
    /// controller's bounds is held (condition `ReplicasHeld` says why and how to lift it).
    /// Stored before any member is written for it, so that the bound on a change is measured
    /// from what was accepted, across restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_replicas: Option<i32>,
    /// Where each ordinal was last seen Ready (so where it has run, and served), the member
    /// whose claims hold its newest data. A claim elsewhere is older (or never used: a move
    /// that never got its ordinal Ready, a re-homing that never ran), so a move keeps or hands
    /// over the claims of this member, never the other way round, and with `storage: Detached`
    /// the claims an ordinal left elsewhere are retired only once it is Ready here. Recorded
    /// from what the members report: a pod Ready, ungated, in exactly one member.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub homes: Vec<HomeStatus>,
    /// The longest pod lease any pod of the federation may still hold, in seconds (its guard's
    /// length, from the template it was made from): spanset takes a member's pods as stopped
    /// only after this long, and keeps extending while it is set. Raised before a longer
    /// `spec.failover.podLease` reaches any member; lowered (or cleared, once `podLease` is
    /// removed) only when every member answers and every pod and StatefulSet there carries the
    /// spec's. Stored so that a new leader knows it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_lease_seconds: Option<i32>,
}

/// The ordinals last let run in one member (see `status.homes`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HomeStatus {
    /// Member cluster.
    pub cluster: String,
    /// The ordinals, as ranges (`0-3,7`).
    pub ordinals: String,
}

/// A label selector in the string form of `kubectl get -l` and of the `/scale` subresource's
/// `status.selector` (`app=redis,tier in (db,cache),!canary`): what autoscalers read.
pub fn selector_text(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for e in selector.match_expressions.iter().flatten() {
        let values = || e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({})", e.key, values()),
            "NotIn" => format!("{} notin ({})", e.key, values()),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => format!("{} {other} ({})", e.key, values()),
        });
    }
    parts.join(",")
}

/// One cluster's slice as written and observed.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SliceStatus {
    /// Member cluster.
    pub cluster: String,
    /// `.spec.ordinals.start` written there.
    pub start: i32,
    /// `.spec.replicas` written there.
    pub replicas: i32,
    /// `reserveOrdinals` (Advanced StatefulSet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_ordinals: Vec<i32>,
    /// Ready pods there.
    #[serde(default)]
    pub ready_replicas: i32,
}

/// One ordinal on its way between clusters.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, schemars::JsonSchema)]
pub struct MoveStatus {
    /// The ordinal.
    pub ordinal: i32,
    /// Source cluster.
    pub from: String,
    /// Destination cluster.
    pub to: String,
    /// `Draining`, `Released`, `Handover` or `Starting`.
    pub phase: String,
    /// When the phase began (RFC 3339).
    pub since: String,
    /// The uids of the destination's claims of this ordinal when the move was recorded (or
    /// took this destination): left by an earlier run there, so older than the data the
    /// ordinal brings. With `storage: Detached` exactly these are retired before the grow;
    /// a claim made afterwards (the destination's StatefulSet controller's, for this very
    /// arrival) is never taken for an older one. Absent until the destination was observed.
    #[serde(rename = "staleClaims", default, skip_serializing_if = "Option::is_none")]
    pub stale_claims: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    #[test]
    fn selectors_print_as_kubectl_and_scale_read_them() {
        let sel = LabelSelector {
            match_labels: Some([("app".to_string(), "redis".to_string())].into()),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["db".into(), "cache".into()]),
                },
                LabelSelectorRequirement { key: "canary".into(), operator: "DoesNotExist".into(), values: None },
                LabelSelectorRequirement { key: "zone".into(), operator: "Exists".into(), values: None },
            ]),
        };
        assert_eq!(selector_text(&sel), "app=redis,tier in (db,cache),!canary,zone");
    }

    #[test]
    fn a_disruption_budget_resolves_like_a_pod_disruption_budget() {
        let d = |v: serde_json::Value| serde_json::from_value::<Disruption>(v).unwrap();
        assert_eq!(d(serde_json::json!({"maxUnavailable": 2})).allowed_unavailable(6), 2);
        assert_eq!(d(serde_json::json!({"maxUnavailable": "25%"})).allowed_unavailable(6), 2, "1.5 rounds up");
        assert_eq!(d(serde_json::json!({"minAvailable": 5})).allowed_unavailable(6), 1);
        assert_eq!(d(serde_json::json!({"minAvailable": "50%"})).allowed_unavailable(5), 2, "3 must stay");
        assert_eq!(d(serde_json::json!({"minAvailable": 9})).allowed_unavailable(6), 0);
    }
}
