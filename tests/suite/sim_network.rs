//! The sandbox's pod network, through the real kube client and the real kubectl: pod IPs
//! unique across the clusters of a sandbox and inside their nodes' pod CIDRs, Service
//! ClusterIPs allocated as kube-apiserver allocates them, the EndpointSlice controller (what a
//! headless Service's per-pod DNS names come from), and the opt-in MCS API CRDs.

use std::{
    collections::{BTreeMap, HashSet},
    net::Ipv4Addr,
    sync::atomic::Ordering,
    time::Duration,
};

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{ConfigMap, Node, Pod, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use spanset_sim::{cluster::ClusterConfig, sandbox::fleet::Fleet};
use support::{DEADLINE, Kubectl, Sandbox, eventually, wait_until};

use crate::support;

const CONTROLLER: &str = "endpointslice-controller.k8s.io";

async fn fleet(names: &[&str]) -> (Fleet, Vec<Client>) {
    let configs = names.iter().map(|n| ClusterConfig { time_factor: 0.01, ..ClusterConfig::named(n) }).collect();
    crate::support::fleet_with_clients(configs).await
}

/// A StatefulSet `web` whose containers take 100 simulated seconds (1 s real) to stop, so that
/// a deleted pod is seen terminating, with a container port named `http`.
fn web(replicas: i32) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "serviceName": "web", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}, "annotations": {"sim.spanset.dev/shutdown-seconds": "100"}},
                              "spec": {"terminationGracePeriodSeconds": 300,
                                       "containers": [{"name": "c", "image": "nginx:1.25", "ports": [{"name": "http", "containerPort": 8080}]}]}}},
    }))
    .unwrap()
}

fn service(name: &str, spec: serde_json::Value) -> Service {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn headless(name: &str) -> Service {
    service(
        name,
        json!({"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}),
    )
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn pod_ip(pod: &Pod) -> Option<String> {
    pod.status.as_ref().and_then(|s| s.pod_ip.clone()).filter(|ip| !ip.is_empty())
}

/// One endpoint as the tests compare it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    uid: String,
    hostname: Option<String>,
    ip: String,
    ready: bool,
    serving: bool,
    terminating: bool,
}

/// The endpoints of the controller's slices for a Service, by pod name (panics if a pod is
/// listed twice).
async fn endpoints(client: &Client, service: &str) -> BTreeMap<String, Seen> {
    let slices: Api<EndpointSlice> = Api::default_namespaced(client.clone());
    let selector = format!("kubernetes.io/service-name={service},endpointslice.kubernetes.io/managed-by={CONTROLLER}");
    let mut out = BTreeMap::new();
    for slice in slices.list(&ListParams::default().labels(&selector)).await.unwrap() {
        for ep in slice.endpoints {
            let target = ep.target_ref.expect("targetRef");
            let c = ep.conditions.expect("conditions");
            let seen = Seen {
                uid: target.uid.unwrap_or_default(),
                hostname: ep.hostname,
                ip: ep.addresses[0].clone(),
                ready: c.ready.expect("ready set"),
                serving: c.serving.expect("serving set"),
                terminating: c.terminating.expect("terminating set"),
            };
            let name = target.name.unwrap_or_default();
            assert!(out.insert(name.clone(), seen).is_none(), "{name} listed twice");
        }
    }
    out
}

#[tokio::test]
async fn pods_of_two_clusters_get_distinct_ips_inside_their_nodes_pod_cidrs() {
    let (_fleet, clients) = fleet(&["east", "west"]).await;
    for c in &clients {
        Api::<StatefulSet>::default_namespaced(c.clone()).create(&PostParams::default(), &web(6)).await.unwrap();
    }
    let mut all = HashSet::new();
    for (i, c) in clients.iter().enumerate() {
        let pods: Api<Pod> = Api::default_namespaced(c.clone());
        eventually("six pods with an IP", || async {
            pods.list(&ListParams::default()).await.unwrap().items.iter().filter(|p| pod_ip(p).is_some()).count() == 6
        })
        .await;
        let nodes: BTreeMap<String, String> = Api::<Node>::all(c.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .into_iter()
            .map(|n| {
                let spec = n.spec.clone().unwrap_or_default();
                assert_eq!(spec.pod_cidrs, spec.pod_cidr.clone().map(|c| vec![c]), "podCIDRs agrees with podCIDR");
                (n.name_any(), spec.pod_cidr.unwrap_or_default())
            })
            .collect();
        for p in pods.list(&ListParams::default()).await.unwrap() {
            let ip: Ipv4Addr = pod_ip(&p).unwrap().parse().unwrap();
            let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap();
            let cidr = &nodes[&node];
            let net: Ipv4Addr = cidr.trim_end_matches("/24").parse().unwrap();
            assert_eq!(ip.octets()[..3], net.octets()[..3], "{} at {ip} outside {node}'s {cidr}", p.name_any());
            assert!(all.insert(ip), "{ip} given twice in the sandbox");
            assert_eq!(ip.octets()[1], 100 + i as u8, "cluster {i}'s pods are in 10.{}.0.0/16", 100 + i);
        }
    }
    assert_eq!(all.len(), 12);
}

#[tokio::test]
async fn cluster_ips_are_allocated_unique_honoured_refused_and_immutable() {
    let (_fleet, clients) = fleet(&["solo"]).await;
    let api: Api<Service> = Api::default_namespaced(clients[0].clone());
    let pp = PostParams::default();
    let plain = api.create(&pp, &service("plain", json!({"ports": [{"port": 80}]}))).await.unwrap();
    let spec = plain.spec.unwrap();
    let ip: Ipv4Addr = spec.cluster_ip.clone().unwrap().parse().unwrap();
    assert_eq!(ip.octets()[0], 10);
    assert!((96..112).contains(&ip.octets()[1]), "{ip} in 10.96.0.0/12");
    assert_ne!(ip, Ipv4Addr::new(10, 96, 0, 1), "the kubernetes Service's");
    assert_eq!(spec.cluster_ips, Some(vec![ip.to_string()]));
    assert_eq!(spec.ip_families, Some(vec!["IPv4".to_string()]));
    assert_eq!(spec.ip_family_policy.as_deref(), Some("SingleStack"));

    let dns =
        api.create(&pp, &service("dns", json!({"clusterIP": "10.96.0.10", "ports": [{"port": 53}]}))).await.unwrap();
    assert_eq!(dns.spec.unwrap().cluster_ip.as_deref(), Some("10.96.0.10"), "a free address asked for is honoured");
    let taken = api.create(&pp, &service("dns2", json!({"clusterIP": "10.96.0.10", "ports": [{"port": 53}]}))).await;
    let kube::Error::Api(status) = taken.unwrap_err() else { panic!("an API error") };
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        r#"Service "dns2" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.10"}: failed to allocate IP 10.96.0.10: provided IP is already allocated"#
    );
    let none = api.create(&pp, &headless("web")).await.unwrap();
    assert_eq!(none.spec.unwrap().cluster_ips, Some(vec!["None".to_string()]), "headless stays headless");

    let moved = api
        .patch(
            "plain",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20"]}})),
        )
        .await;
    let kube::Error::Api(status) = moved.unwrap_err() else { panic!("an API error") };
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        r#"Service "plain" is invalid: spec.clusterIPs[0]: Invalid value: []string{"10.96.0.20"}: may not change once set"#
    );
    // A replace that leaves the addresses out keeps them.
    let mut replaced = api.get("plain").await.unwrap();
    let s = replaced.spec.as_mut().unwrap();
    (s.cluster_ip, s.cluster_ips) = (None, None);
    let kept = api.replace("plain", &pp, &replaced).await.unwrap();
    assert_eq!(kept.spec.unwrap().cluster_ip, Some(ip.to_string()));

    // Concurrent creates never share an address.
    let creates =
        (0..40).map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &service(&format!("s{i}"), json!({"ports": [{"port": 80}]}))).await
            }
        });
    let made = futures::future::join_all(creates).await;
    let mut ips: HashSet<String> = made.into_iter().map(|s| s.unwrap().spec.unwrap().cluster_ip.unwrap()).collect();
    ips.extend([ip.to_string(), "10.96.0.10".into(), "10.96.0.1".into()]);
    assert_eq!(ips.len(), 43, "every Service has its own address");
}

#[tokio::test]
async fn a_headless_service_lists_its_pods_by_hostname_and_readiness_and_follows_a_deletion() {
    let (fleet, clients) = fleet(&["solo"]).await;
    let client = clients[0].clone();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    Api::<Service>::default_namespaced(client.clone()).create(&PostParams::default(), &headless("web")).await.unwrap();

    // The timeline: slices, then pods, as fast as the loop goes.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let (client, pods, stop) = (client.clone(), pods.clone(), stop.clone());
        tokio::spawn(async move {
            let mut timeline = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let seen = endpoints(&client, "web").await;
                let after = pods.list(&ListParams::default()).await.unwrap().items;
                timeline.push((seen, after));
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            timeline
        })
    };
    Api::<StatefulSet>::default_namespaced(client.clone()).create(&PostParams::default(), &web(3)).await.unwrap();
    eventually("web-0..2 listed ready", || async {
        let eps = endpoints(&client, "web").await;
        eps.len() == 3 && eps.values().all(|e| e.ready)
    })
    .await;
    let eps = endpoints(&client, "web").await;
    for p in pods.list(&ListParams::default()).await.unwrap() {
        let e = &eps[&p.name_any()];
        assert_eq!(e.hostname.as_deref(), Some(p.name_any().as_str()), "hostname = pod name");
        assert_eq!(Some(e.ip.clone()), pod_ip(&p), "address = the pod's IP");
        assert_eq!(e.uid, p.uid().unwrap());
        assert!(e.serving && !e.terminating);
    }
    let slice = Api::<EndpointSlice>::default_namespaced(client.clone())
        .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
        .await
        .unwrap()
        .items
        .remove(0);
    assert_eq!(slice.address_type, "IPv4");
    assert!(slice.metadata.generate_name.as_deref() == Some("web-") && slice.name_any().starts_with("web-"));
    let owner = &slice.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller), ("Service", "web", Some(true)));
    let port = &slice.ports.as_ref().unwrap()[0];
    assert_eq!((port.name.as_deref(), port.port, port.protocol.as_deref()), (Some("http"), Some(8080), Some("TCP")));

    // A deleted pod shows terminating and not ready, then goes; its successor comes.
    let old = pods.get("web-1").await.unwrap().uid().unwrap();
    pods.delete("web-1", &DeleteParams::default()).await.unwrap();
    eventually("web-1 listed terminating", || async {
        endpoints(&client, "web")
            .await
            .get("web-1")
            .is_some_and(|e| e.uid == old && e.terminating && !e.ready && e.serving)
    })
    .await;
    eventually("a new web-1 listed ready", || async {
        endpoints(&client, "web").await.get("web-1").is_some_and(|e| e.uid != old && e.ready)
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    let timeline = poller.await.unwrap();
    assert!(timeline.len() > 20, "the poller ran ({} rounds)", timeline.len());

    // The slice controller runs after the pod write, as kube-controller-manager's does, so a
    // pod may be listed deleting a moment before its endpoint says so; what must never happen
    // is an endpoint listed ready again once it was listed terminating.
    let mut deleted: HashSet<String> = HashSet::new();
    let mut was_ready: HashSet<String> = HashSet::new();
    let mut saw_terminating = false;
    for (round, (seen, after)) in timeline.iter().enumerate() {
        for (name, e) in seen {
            let later = after.iter().find(|p| p.uid().as_deref() == Some(e.uid.as_str()));
            if e.ready {
                assert!(
                    later.is_none_or(|p| is_ready(p) || p.metadata.deletion_timestamp.is_some()),
                    "round {round}: {name} listed ready before its pod was Ready"
                );
                assert!(
                    !deleted.contains(&e.uid),
                    "round {round}: {name} listed ready after it was listed terminating"
                );
                was_ready.insert(e.uid.clone());
            } else {
                assert!(
                    !was_ready.contains(&e.uid) || e.terminating,
                    "round {round}: {name} listed not ready again after it was ready, without terminating"
                );
            }
            saw_terminating |= e.terminating;
            if e.terminating {
                deleted.insert(e.uid.clone());
            }
        }
    }
    assert!(saw_terminating, "the poller saw the terminating endpoint");
    drop(fleet);
}

#[tokio::test]
async fn publish_not_ready_addresses_lists_unready_pods_as_ready() {
    let (fleet, clients) = fleet(&["solo"]).await;
    let client = clients[0].clone();
    let cluster = fleet.servers[0].cluster.clone();
    for i in 0..2 {
        cluster.faults.set_pod_ready("default", &format!("web-{i}"), Some(false));
    }
    let services: Api<Service> = Api::default_namespaced(client.clone());
    services.create(&PostParams::default(), &headless("web")).await.unwrap();
    let mut publish = headless("web-all");
    publish.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
    services.create(&PostParams::default(), &publish).await.unwrap();
    Api::<StatefulSet>::default_namespaced(client.clone()).create(&PostParams::default(), &web(2)).await.unwrap();

    eventually("both unready pods listed by both Services", || async {
        endpoints(&client, "web").await.len() == 2 && endpoints(&client, "web-all").await.len() == 2
    })
    .await;
    for (name, e) in endpoints(&client, "web").await {
        assert!(!e.ready && !e.serving, "unready: {e:?}");
        assert_eq!(e.hostname, Some(name), "the pods' subdomain is this Service");
    }
    for e in endpoints(&client, "web-all").await.values() {
        assert!(e.ready && e.serving, "published although unready: {e:?}");
        assert_eq!(e.hostname, None, "the pods' subdomain is not this Service");
    }
}

#[tokio::test]
async fn another_managers_slice_is_left_alone_and_an_idle_controller_writes_nothing() {
    let (fleet, clients) = fleet(&["solo"]).await;
    let client = clients[0].clone();
    let cluster = fleet.servers[0].cluster.clone();
    let services: Api<Service> = Api::default_namespaced(client.clone());
    services.create(&PostParams::default(), &headless("web")).await.unwrap();
    Api::<StatefulSet>::default_namespaced(client.clone()).create(&PostParams::default(), &web(2)).await.unwrap();
    let slices: Api<EndpointSlice> = Api::default_namespaced(client.clone());
    let foreign: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "web-west", "labels": {"kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": "spanset.dev"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.101.1.2"], "hostname": "web-2", "conditions": {"ready": true}}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }))
    .unwrap();
    let foreign = slices.create(&PostParams::default(), &foreign).await.unwrap();
    eventually("web-0 and web-1 listed ready", || async {
        let eps = endpoints(&client, "web").await;
        eps.len() == 2 && eps.values().all(|e| e.ready)
    })
    .await;

    // Idle: other writes wake the controller, and it writes nothing.
    let versions = |list: Vec<EndpointSlice>| -> BTreeMap<String, String> {
        list.into_iter().map(|s| (s.name_any(), s.resource_version().unwrap())).collect()
    };
    let before = versions(slices.list(&ListParams::default()).await.unwrap().items);
    let sweeps = cluster.counters.endpointslice_sweeps.load(Ordering::SeqCst);
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for i in 0..5 {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("wake-{i}")}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    eventually("three more sweeps", || async {
        // Idle components sleep: resyncs wake them for the sweeps counted.
        cluster.faults.resync();
        cluster.counters.endpointslice_sweeps.load(Ordering::SeqCst) >= sweeps + 3
    })
    .await;
    let after = versions(slices.list(&ListParams::default()).await.unwrap().items);
    assert_eq!(before, after, "no slice written while nothing changed");
    assert_eq!(after.get("web-west"), foreign.resource_version().as_ref(), "the foreign slice untouched");

    // Without its selector the Service's slices are managed out of band: left as they are,
    // as kube-controller-manager leaves them. Deleted, the Service takes its own slices with
    // it (owner reference); the foreign one, owned by nobody, stays.
    let ours_before = versions(slices.list(&ListParams::default()).await.unwrap().items);
    services.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"selector": null}}))).await.unwrap();
    Api::<StatefulSet>::default_namespaced(client.clone()).delete("web", &DeleteParams::default()).await.unwrap();
    eventually("the pods gone", || async {
        Api::<Pod>::default_namespaced(client.clone()).list(&ListParams::default()).await.unwrap().items.is_empty()
    })
    .await;
    let sweeps = cluster.counters.endpointslice_sweeps.load(Ordering::SeqCst);
    cms.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "wake"}})).unwrap())
        .await
        .unwrap();
    eventually("two more sweeps", || async {
        // Idle components sleep: resyncs wake them for the sweeps counted.
        cluster.faults.resync();
        cluster.counters.endpointslice_sweeps.load(Ordering::SeqCst) >= sweeps + 2
    })
    .await;
    assert_eq!(
        versions(slices.list(&ListParams::default()).await.unwrap().items),
        ours_before,
        "a Service without a selector keeps its slices as they were"
    );
    services.delete("web", &DeleteParams::default()).await.unwrap();
    eventually("the controller's slices collected", || async { endpoints(&client, "web").await.is_empty() }).await;
    let names: Vec<String> = slices
        .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
        .await
        .unwrap()
        .iter()
        .map(|s| s.name_any())
        .collect();
    assert_eq!(names, ["web-west"]);
    let fresh = slices.get("web-west").await.unwrap();
    assert_eq!(fresh.resource_version(), foreign.resource_version());
}

/// A headless Service `web` and a 2-replica StatefulSet behind it, for kubectl.
const WEB_YAML: &str = r#"apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 2
  serviceName: web
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: c
        image: nginx:1.25
        ports: [{name: http, containerPort: 8080}]
"#;

#[test]
fn kubectl_lists_endpointslices_and_mcs_serves_service_exports_where_asked() {
    let sandbox = Sandbox::start_with("east,west", &["--mcs", "west"]);
    let Some(mut k) = Kubectl::installed(&sandbox) else { return };
    k.context = Some("east".into());
    k.ok_with_stdin(&["apply", "-f", "-"], WEB_YAML);
    wait_until("kubectl lists a slice with both pods", DEADLINE, || {
        let out = k.ok(&["get", "endpointslices", "-l", "kubernetes.io/service-name=web"]);
        out.lines().nth(1).is_some_and(|row| {
            row.split_whitespace().nth(1) == Some("IPv4")
                && row.split_whitespace().nth(3).is_some_and(|e| e.split(',').count() == 2)
        })
    });
    let hostnames = k.ok(&[
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
        "-o",
        "jsonpath={.items[*].endpoints[*].hostname}",
    ]);
    let mut names: Vec<&str> = hostnames.split_whitespace().collect();
    names.sort();
    assert_eq!(names, ["web-0", "web-1"]);
    let err = k.fails(&["get", "serviceexports"]);
    assert!(err.contains("the server doesn't have a resource type \"serviceexports\""), "east has no MCS API: {err}");

    k.context = Some("west".into());
    let export = r#"{"apiVersion":"multicluster.x-k8s.io/v1alpha1","kind":"ServiceExport","metadata":{"name":"web"}}"#;
    k.ok_with_stdin(&["apply", "-f", "-"], export);
    let out = k.ok(&["get", "serviceexports"]);
    let row: Vec<&str> = out.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!(
        (out.lines().next().map(|h| h.split_whitespace().collect::<Vec<_>>()), row.first()),
        (Some(vec!["NAME", "AGE"]), Some(&"web")),
        "{out}"
    );
    assert!(k.ok(&["get", "svcim"]).is_empty(), "ServiceImports are served too (none yet)");
}
