//! Starts the simulated components of one cluster, the way a real control plane and its nodes
//! come up beside the API server.

use std::sync::Arc;

use tokio::task::JoinHandle;

use super::{Cluster, disruption, endpointslices, gc, kubelet, statefulset, volumes};

/// Spawns the garbage collector, the kubelets, the StatefulSet controller, the EndpointSlice
/// controller, the PersistentVolume controller and the disruption controller; each stops by itself once the
/// cluster is dropped, or when its handle is aborted.
pub fn spawn(cluster: &Arc<Cluster>) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(gc::run(Arc::downgrade(cluster))),
        tokio::spawn(kubelet::run(Arc::downgrade(cluster))),
        tokio::spawn(statefulset::run(Arc::downgrade(cluster))),
        tokio::spawn(endpointslices::run(Arc::downgrade(cluster))),
        tokio::spawn(volumes::run(Arc::downgrade(cluster))),
        tokio::spawn(disruption::run(Arc::downgrade(cluster))),
    ]
}
