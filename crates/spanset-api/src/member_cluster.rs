//! `MemberCluster` (spanset.dev/v1alpha1, cluster-scoped): how to reach a member cluster, and
//! an operator's statement that its workloads are dead (`spec.fenced`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// How to reach a member cluster and whether it is fenced. A deleted MemberCluster is kept (the
/// controller's finalizer `spanset.dev/member-in-use`) while a federation still has a slice,
/// pods or moves in the member, unless it is fenced and silent.
// Several printer columns share `type_ = "string"`; clippy reads them as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[kube(
    group = "spanset.dev",
    version = "v1alpha1",
    kind = "MemberCluster",
    shortname = "mc",
    status = "MemberClusterStatus",
    printcolumn(
        name = "Reachable",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Reachable\")].status"
    ),
    printcolumn(name = "Fenced", type_ = "boolean", json_path = ".spec.fenced"),
    printcolumn(name = "Version", type_ = "string", json_path = ".status.serverVersion"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.kubeconfigSecret) != has(self.context)").message("spec: set exactly one of kubeconfigSecret and context"))]
pub struct MemberClusterSpec {
    /// A Secret holding a kubeconfig for the member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_secret: Option<SecretKeyRef>,
    /// A context of the controller's own kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Region, for people and dashboards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// An operator's statement that the cluster's workloads are dead: its ordinals may be
    /// re-homed. Only an operator unfences (`spanset unfence` refuses while a federation's
    /// status still shows ordinals written there, unless `--force`).
    #[serde(default)]
    pub fenced: bool,
}

/// The `Reachable` reasons of a member the controller refuses to use at all (not one it cannot
/// reach now): it reaches the same cluster as another member, its spec is invalid, or its
/// kubeconfig cannot be used.
pub const REFUSAL_REASONS: [&str; 3] = ["DuplicateCluster", "InvalidSpec", "BadKubeconfig"];

impl MemberClusterStatus {
    /// The reason and message of the controller's refusal of this member, if it refused it:
    /// a tool acting on "every member" names these rather than silently acting on fewer.
    pub fn refusal(&self) -> Option<(&str, &str)> {
        self.conditions
            .iter()
            .find(|c| c.type_ == "Reachable" && c.status == "False" && REFUSAL_REASONS.contains(&c.reason.as_str()))
            .map(|c| (c.reason.as_str(), c.message.as_str()))
    }
}

/// A key of a Secret.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, schemars::JsonSchema)]
pub struct SecretKeyRef {
    /// Namespace of the Secret.
    pub namespace: String,
    /// Name of the Secret.
    pub name: String,
    /// Key holding the kubeconfig (default `kubeconfig`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// What spanset last saw of a member.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberClusterStatus {
    /// `Reachable` and others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Last successful API call (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_contact: Option<String>,
    /// The member's `gitVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// Whether the member keeps `.spec.ordinals` (false: it gets no slice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keeps_ordinals: Option<bool>,
    /// Whether the member serves OpenKruise's Advanced StatefulSets
    /// (`statefulsets.apps.kruise.io/v1beta1`; false: no slice of a federation with
    /// `backend: AdvancedStatefulSet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serves_advanced_stateful_sets: Option<bool>,
    /// What spanset can count on in this member, one entry per guard it relies on
    /// (`AdmissionPolicies`, `IdentityGate`, `StartOrdinals`), each saying whether it is in
    /// force and why: a member of an older Kubernetes release lacks some, and a member's own
    /// admission policies count only while spanset reads each one back as `spanset join`
    /// installs it (docs/version-skew.md). Absent while the member's version and discovery are
    /// unread.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<MemberGuard>,
    /// The member's cluster id: the uid of its `kube-system` Namespace, as the multi-cluster
    /// Services API (KEP-2149, ClusterProperty `cluster.clusterset.k8s.io`) identifies a
    /// cluster. Two MemberClusters with the same id reach the same cluster: only one is used.
    /// Absent while unread, or when the member refuses to show that Namespace.
    #[serde(default, rename = "clusterID", skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// What deleted federations left in this member: their deletion finished while the member
    /// was fenced (or silent and known to run nothing of them), so their teardown there waits
    /// for it to answer again. spanset then shrinks each one's StatefulSet to nothing, deletes
    /// its pods, removes its objects and clears its entry. Written by spanset only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leftovers: Vec<Leftover>,
}

/// One guard spanset relies on in a member, and whether the member keeps it (see
/// [`MemberClusterStatus::guards`]).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberGuard {
    /// `AdmissionPolicies` (the member's ValidatingAdmissionPolicies), `IdentityGate` (pod
    /// scheduling gates) or `StartOrdinals` (StatefulSet `.spec.ordinals`).
    pub name: String,
    /// Whether the member keeps it.
    pub in_force: bool,
    /// Why: what the member's version, its discovery or the read-back of its admission policies
    /// showed (naming each policy or binding missing, altered or unreadable), and what is lost
    /// without it.
    pub message: String,
}

/// One deleted federation's objects left in a member (see [`MemberClusterStatus::leftovers`]):
/// enough to find them without the federation, which is gone from the host.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Leftover {
    /// The federation's name (also its StatefulSet's).
    pub federation: String,
    /// Its namespace (its member objects live there too).
    pub namespace: String,
    /// Its uid: a namesake created since is another federation, whose objects stay.
    pub uid: String,
    /// When the federation's deletion recorded this entry (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Its headless Service's name.
    pub service: String,
    /// Whether it ran with `spec.network.mode: MultiClusterServices` (a ServiceExport).
    #[serde(default)]
    pub exported: bool,
    /// What it may hold there, by kind and name, in the order they are removed: its
    /// StatefulSet, Service, PodDisruptionBudget, published EndpointSlices (by label, no name),
    /// ServiceExport and carried Secrets/ConfigMaps. A Service or carried object that another
    /// federation still carries there stays, released by this one only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<LeftoverObject>,
}

/// One object of a [`Leftover`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeftoverObject {
    /// Its kind.
    pub kind: String,
    /// Its name; absent where objects are found by label (spanset's EndpointSlices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(reason: &str, up: &str) -> MemberClusterStatus {
        let condition: Condition = serde_json::from_value(serde_json::json!({
            "type": "Reachable", "status": up, "reason": reason, "message": "why",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }))
        .unwrap();
        MemberClusterStatus { conditions: vec![condition], ..Default::default() }
    }

    #[test]
    fn a_refusal_is_a_refusal_reason_not_a_member_out_of_reach() {
        assert_eq!(status("DuplicateCluster", "False").refusal(), Some(("DuplicateCluster", "why")));
        assert_eq!(status("BadKubeconfig", "False").refusal(), Some(("BadKubeconfig", "why")));
        assert_eq!(status("Unreachable", "False").refusal(), None);
        assert_eq!(status("Reachable", "True").refusal(), None);
        assert_eq!(MemberClusterStatus::default().refusal(), None);
    }
}
