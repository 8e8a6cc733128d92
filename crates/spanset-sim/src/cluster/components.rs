//! Starts the simulated components of one cluster, the way a real control plane and its nodes
//! come up beside the API server — on threads of their own, as they would run in processes of
//! their own.

use std::sync::{Arc, OnceLock};

use tokio::{runtime::Runtime, task::JoinHandle};

use super::{Cluster, crd_finalizer, disruption, endpointslices, gc, kubelet, statefulset, volumes};

/// Spawns the garbage collector, the CRD finalizer, the kubelets, the StatefulSet controller, the EndpointSlice
/// controller, the PersistentVolume controller and the disruption controller on
/// [`components_runtime`]; each stops by itself once the cluster is dropped, or when its handle
/// is aborted.
pub fn spawn(cluster: &Arc<Cluster>) -> Vec<JoinHandle<()>> {
    let rt = components_runtime();
    vec![
        rt.spawn(gc::run(Arc::downgrade(cluster))),
        rt.spawn(crd_finalizer::run(Arc::downgrade(cluster))),
        rt.spawn(kubelet::run(Arc::downgrade(cluster))),
        rt.spawn(statefulset::run(Arc::downgrade(cluster))),
        rt.spawn(endpointslices::run(Arc::downgrade(cluster))),
        rt.spawn(volumes::run(Arc::downgrade(cluster))),
        rt.spawn(disruption::run(Arc::downgrade(cluster))),
    ]
}

/// The runtime every cluster's components run on in this process, apart from the API servers':
/// a sweep is synchronous work, and on the servers' worker threads a few long sweeps (a hundred
/// clusters converging) held every request waiting behind them, where a real API server answers
/// beside a busy controller manager. Built with the first cluster, kept for the process.
pub fn components_runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("sim-components")
            .enable_all()
            .build()
            .expect("the components' runtime starts")
    })
}
