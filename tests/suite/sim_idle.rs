//! An idle simulated cluster costs nothing. Its components sleep until something changes or
//! until a deadline of their own (here `minReadySeconds`, which nothing else announces),
//! instead of sweeping on a short tick — so a sandbox of 100 members can sit idle beside the
//! controller.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::{
    Api, Client,
    api::{PostParams, ResourceExt},
};
use serde_json::json;
use spanset_sim::{
    cluster::{Cluster, ClusterConfig},
    sandbox::fleet::Fleet,
};
use support::eventually;

use crate::support;

/// A stretch long enough to hold many of the old ticks (20–25 ms for the kubelets, the
/// StatefulSet and volume controllers, 250 ms for disruption, 1 s for EndpointSlices, 2 s for
/// the garbage collector).
const QUIET: Duration = Duration::from_secs(3);

/// Every component's sweep count, and the store's resourceVersion.
fn activity(c: &Cluster) -> [u64; 7] {
    let n = &c.counters;
    [
        n.statefulset_sweeps.load(Ordering::SeqCst),
        n.kubelet_sweeps.load(Ordering::SeqCst),
        n.endpointslice_sweeps.load(Ordering::SeqCst),
        n.volume_sweeps.load(Ordering::SeqCst),
        n.disruption_sweeps.load(Ordering::SeqCst),
        n.gc_sweeps.load(Ordering::SeqCst),
        c.storage.current_rv(),
    ]
}

/// Waits until a whole [`QUIET`] stretch passes without one sweep or write. A component that
/// keeps sweeping on a tick shorter than the stretch never lets it pass; the long safety tick
/// can spoil one stretch at most, and the next one passes.
async fn goes_quiet(c: &Cluster) {
    let start = std::time::Instant::now();
    loop {
        let before = activity(c);
        // The stretch is the condition itself (no sweep during it), not a guess at timing.
        tokio::time::sleep(QUIET).await;
        let after = activity(c);
        if before == after {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "still sweeping: {before:?} → {after:?}");
    }
}

async fn one_cluster() -> (Fleet, Arc<Cluster>, Client) {
    let config = ClusterConfig { time_factor: 0.01, ..ClusterConfig::named("idle") };
    let fleet = Fleet::start(vec![config], None).await.expect("sandbox starts");
    let client = Client::try_from(kube::Config::new(fleet.servers[0].url().parse().unwrap())).unwrap();
    let cluster = fleet.servers[0].cluster.clone();
    (fleet, cluster, client)
}

#[tokio::test]
async fn an_idle_cluster_with_nothing_created_stops_sweeping() {
    let (_fleet, cluster, _client) = one_cluster().await;
    goes_quiet(&cluster).await;
}

#[tokio::test]
async fn a_converged_statefulset_leaves_its_cluster_idle_and_min_ready_seconds_still_counts() {
    let (_fleet, cluster, client) = one_cluster().await;
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    // minReadySeconds: 50 s simulated (0.5 s real); nothing changes when it passes, so only
    // the controller's own deadline can make the pods available.
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2, "serviceName": "web", "minReadySeconds": 50,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
        }
    }))
    .unwrap();
    sets.create(&PostParams::default(), &set).await.unwrap();
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::default_namespaced(client.clone());
    let service = json!({"metadata": {"name": "web"}, "spec": {"clusterIP": "None", "selector": {"app": "web"}}});
    services.create(&PostParams::default(), &serde_json::from_value(service).unwrap()).await.unwrap();
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> = Api::default_namespaced(client.clone());
    let pdb = json!({"metadata": {"name": "web"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
    pdbs.create(&PostParams::default(), &serde_json::from_value(pdb).unwrap()).await.unwrap();
    eventually("both pods available", || async {
        let s = sets.get("web").await.unwrap();
        s.status.as_ref().and_then(|s| s.available_replicas) == Some(2)
    })
    .await;
    goes_quiet(&cluster).await;
    // Still awake to changes: a scale-up is acted on at once.
    let mut s = sets.get("web").await.unwrap();
    s.spec.as_mut().unwrap().replicas = Some(3);
    s.metadata.managed_fields = None;
    sets.replace(&s.name_any(), &PostParams::default(), &s).await.unwrap();
    eventually("three pods available", || async {
        sets.get("web").await.unwrap().status.as_ref().and_then(|s| s.available_replicas) == Some(3)
    })
    .await;
    goes_quiet(&cluster).await;
}

/// The sweeps of the components that never read EndpointSlices or Events.
fn workload_sweeps(c: &Cluster) -> [u64; 4] {
    let n = &c.counters;
    [
        n.statefulset_sweeps.load(Ordering::SeqCst),
        n.kubelet_sweeps.load(Ordering::SeqCst),
        n.volume_sweeps.load(Ordering::SeqCst),
        n.disruption_sweeps.load(Ordering::SeqCst),
    ]
}

/// spanset publishes the pods of the other members as EndpointSlices in every member, hundreds
/// of writes a second while 100 members converge: they wake no component. The StatefulSet
/// controller, the kubelet and the volume and disruption controllers never read slices; the
/// EndpointSlice controller reads only those it manages, as kube-controller-manager's does. So
/// do Events, which every component writes and none acts on.
#[tokio::test]
async fn published_endpoint_slices_and_events_wake_no_component() {
    let (_fleet, cluster, client) = one_cluster().await;
    goes_quiet(&cluster).await;
    let before = workload_sweeps(&cluster);
    let eps_before = cluster.counters.endpointslice_sweeps.load(Ordering::SeqCst);
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> = Api::default_namespaced(client.clone());
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(client.clone());
    let slice = |name: &str, manager: &str| {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {
                "kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": manager}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.9.0.1"], "hostname": name}],
        }))
        .unwrap()
    };
    for i in 0..10 {
        slices.create(&PostParams::default(), &slice(&format!("published-{i}"), "spanset.dev")).await.unwrap();
        let event = json!({
            "metadata": {"name": format!("web.{i}")},
            "involvedObject": {"kind": "Pod", "name": format!("web-{i}"), "namespace": "default"},
            "reason": "Published", "message": "an event nobody acts on", "type": "Normal",
        });
        events.create(&PostParams::default(), &serde_json::from_value(event).unwrap()).await.unwrap();
    }
    goes_quiet(&cluster).await;
    assert_eq!(
        (workload_sweeps(&cluster), cluster.counters.endpointslice_sweeps.load(Ordering::SeqCst)),
        (before, eps_before),
        "([statefulset, kubelet, volume, disruption], endpointslice) sweeps: none acts on another's slices or on Events"
    );
    // Still awake to what they read: a slice the EndpointSlice controller manages wakes it, a
    // StatefulSet wakes its controller.
    slices.create(&PostParams::default(), &slice("managed", "endpointslice-controller.k8s.io")).await.unwrap();
    eventually("the EndpointSlice controller sweeps for one of its slices", || async {
        cluster.counters.endpointslice_sweeps.load(Ordering::SeqCst) > eps_before
    })
    .await;
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let set = json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}},
    });
    sets.create(&PostParams::default(), &serde_json::from_value(set).unwrap()).await.unwrap();
    eventually("the StatefulSet controller sweeps for a StatefulSet", || async {
        cluster.counters.statefulset_sweeps.load(Ordering::SeqCst) > before[0]
    })
    .await;
}
