//! `spec.network` of a FederatedStatefulSet: how a pod's stable name
//! (`redis-3.redis.default.svc.cluster.local`) answers in the members that do not run it.

use serde::{Deserialize, Serialize};

/// How the federation's pod names resolve across members.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    /// `EndpointSlices` (default), `None` or `MultiClusterServices`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<NetworkMode>,
}

/// What spanset writes in each member so that every ordinal's name answers there.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, schemars::JsonSchema)]
pub enum NetworkMode {
    /// In each member, EndpointSlices of the headless Service (`serviceName`) list the pods
    /// that run in the other members (hostname = pod name, the pod's IP), so cluster DNS
    /// answers `<pod>.<serviceName>.<namespace>.svc.<zone>` in every member, wherever the
    /// ordinal runs, and follows it when it moves. Needs pod IPs routable between the clusters
    /// (a flat network: VPC-native pods, Cilium ClusterMesh, Calico BGP…).
    #[default]
    EndpointSlices,
    /// Nothing is published: a pod's name answers only in the member that runs it.
    None,
    /// A `ServiceExport` (multicluster.x-k8s.io/v1alpha1) of the headless Service in each
    /// member, for networks that run the multi-cluster Services API (KEP-1645). Names then
    /// carry the cluster id (`redis-3.west.redis.default.svc.clusterset.local`) and change
    /// when an ordinal moves.
    MultiClusterServices,
}

impl Network {
    /// The mode in effect (`EndpointSlices` when unset).
    pub fn mode(network: Option<&Network>) -> NetworkMode {
        network.and_then(|n| n.mode).unwrap_or_default()
    }
}
