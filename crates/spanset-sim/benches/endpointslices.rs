//! The sandbox's EndpointSlice controller: what one sweep costs over 1,000 pods behind 100
//! Services (the first, which creates every slice; an idle one, which writes nothing; one after
//! a pod's readiness changed, which rewrites one slice), and the writes each made.
//! Run with `cargo bench -p spanset-sim --bench endpointslices`; it prints one line per figure.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use spanset_sim::{
    cluster::{Cluster, ClusterConfig, endpointslices},
    store::registry::{Subresource, WriteOptions},
};

const SERVICES: usize = 100;
const PODS_PER_SERVICE: usize = 10;

fn ready_status(ip: &str, ready: bool) -> Value {
    let word = if ready { "True" } else { "False" };
    json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
           "conditions": [{"type": "Ready", "status": word}, {"type": "ContainersReady", "status": word}]})
}

fn populate(cluster: &Cluster) {
    let services = cluster.resources.by_plural("", "services").expect("services");
    let pods = cluster.resources.by_plural("", "pods").expect("pods");
    let w = WriteOptions::default();
    for s in 0..SERVICES {
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("svc-{s}")},
            "spec": {"clusterIP": "None", "selector": {"app": format!("svc-{s}")}, "ports": [{"name": "http", "port": 80}]}});
        cluster.create(&services, Some("default"), svc, &w).expect("service");
        for p in 0..PODS_PER_SERVICE {
            let name = format!("svc-{s}-{p}");
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {"app": format!("svc-{s}")}},
                "spec": {"hostname": name, "subdomain": format!("svc-{s}"), "nodeName": "node-1",
                         "containers": [{"name": "c", "image": "i:1"}]}});
            cluster.create(&pods, Some("default"), pod, &w).expect("pod");
            let ip = format!("10.244.{}.{}", s / 25 + 1, (s % 25) * 10 + p + 2);
            cluster
                .update_with(&pods, "default", &name, Subresource::Status, &w, |cur| {
                    let mut next = cur.clone();
                    next["status"] = ready_status(&ip, true);
                    Ok(next)
                })
                .expect("status");
        }
    }
}

/// Runs one sweep; its time and the writes it made (resourceVersions it took).
fn timed_sweep(cluster: &Cluster) -> (Duration, u64) {
    let rv = cluster.storage.current_rv();
    let start = Instant::now();
    endpointslices::sweep(cluster);
    (start.elapsed(), cluster.storage.current_rv() - rv)
}

fn main() {
    let cluster = Cluster::new(ClusterConfig { nodes: 0, ..ClusterConfig::named("bench") });
    populate(&cluster);
    let (first, first_writes) = timed_sweep(&cluster);
    let runs = 50;
    let mut idle = Duration::ZERO;
    let mut idle_writes = 0;
    for _ in 0..runs {
        let (t, w) = timed_sweep(&cluster);
        idle += t;
        idle_writes += w;
    }
    let pods = cluster.resources.by_plural("", "pods").expect("pods");
    let mut changed = Duration::ZERO;
    let mut changed_writes = 0;
    for i in 0..runs {
        let name = format!("svc-{}-0", i % SERVICES);
        cluster
            .update_with(&pods, "default", &name, Subresource::Status, &WriteOptions::default(), |cur| {
                let mut next = cur.clone();
                let ip = cur["status"]["podIP"].clone();
                next["status"] = ready_status(ip.as_str().unwrap_or(""), false);
                Ok(next)
            })
            .expect("status");
        let (t, w) = timed_sweep(&cluster);
        changed += t;
        changed_writes += w;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "endpointslice first sweep ({SERVICES} Services, {} pods): {:.1} ms, {first_writes} writes",
        SERVICES * PODS_PER_SERVICE,
        ms(first)
    );
    println!(
        "endpointslice idle sweep: {:.2} ms, {:.1} writes",
        ms(idle) / runs as f64,
        idle_writes as f64 / runs as f64
    );
    println!(
        "endpointslice sweep after one pod went unready: {:.2} ms, {:.1} writes",
        ms(changed) / runs as f64,
        changed_writes as f64 / runs as f64
    );
}
