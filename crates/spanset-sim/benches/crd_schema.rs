//! What the sandbox's CRD enforcement costs per FederatedStatefulSet write: creates and updates
//! through the registry of an in-process cluster, once with the CRD as shipped (pruning,
//! defaulting, structural validation, CEL rules) and once with the same CRD whose schema only
//! preserves unknown fields (nothing to check), and once without its CEL rules. Run with
//! `cargo bench -p spanset-sim --bench crd_schema`; it prints the microseconds per write of each.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use spanset_sim::{
    cluster::{Cluster, ClusterConfig},
    store::registry::{Subresource, WriteOptions},
};

const WRITES: usize = 2_000;

/// The FederatedStatefulSet CRD as committed (the simulator reads spanset's CRDs only as data).
const SHIPPED: &str = include_str!("../../../deploy/crds/federatedstatefulsets.spanset.dev.yaml");

fn federation(i: usize) -> Value {
    json!({
        "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
        "metadata": {"name": format!("web-{i}"), "namespace": "default"},
        "spec": {
            "replicas": 6,
            "placement": {"clusters": [{"name": "east", "weight": 2}, {"name": "west", "minReplicas": 1}]},
            "disruption": {"maxUnavailable": 1},
            "template": {
                "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "c", "image": "nginx:1", "ports": [{"containerPort": 80}]}]}},
            },
        },
    })
}

/// Per-write time of `WRITES` creates, then as many updates, against a cluster serving `crd`.
fn per_write(crd: Value) -> (Duration, Duration) {
    let cluster = Cluster::new(ClusterConfig { nodes: 0, ..ClusterConfig::named("bench") });
    let crds = cluster.resources.by_plural("apiextensions.k8s.io", "customresourcedefinitions").expect("CRDs served");
    cluster.create(&crds, None, crd, &WriteOptions::default()).expect("CRD installed");
    let rt = cluster.resources.by_plural("spanset.dev", "federatedstatefulsets").expect("served");
    let opts = WriteOptions::default();
    let start = Instant::now();
    for i in 0..WRITES {
        cluster.create(&rt, Some("default"), federation(i), &opts).expect("created");
    }
    let creates = start.elapsed() / WRITES as u32;
    let start = Instant::now();
    for i in 0..WRITES {
        cluster
            .update_with(&rt, "default", &format!("web-{i}"), Subresource::Main, &opts, |cur| {
                let mut next = cur.clone();
                next["spec"]["replicas"] = json!(7);
                Ok(next)
            })
            .expect("updated");
    }
    (creates, start.elapsed() / WRITES as u32)
}

fn main() {
    let shipped: Value = serde_yaml::from_str(SHIPPED).expect("YAML");
    let mut open = shipped.clone();
    open["spec"]["versions"][0]["schema"]["openAPIV3Schema"] =
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let mut no_rules = shipped.clone();
    strip_rules(&mut no_rules);
    let (off_create, off_update) = per_write(open);
    let (on_create, on_update) = per_write(shipped);
    let (structural_create, structural_update) = per_write(no_rules);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "FederatedStatefulSet create: {:.0} µs with the schema enforced, {:.0} µs without (+{:.0} µs)",
        us(on_create),
        us(off_create),
        us(on_create) - us(off_create)
    );
    println!(
        "FederatedStatefulSet update: {:.0} µs with the schema enforced, {:.0} µs without (+{:.0} µs)",
        us(on_update),
        us(off_update),
        us(on_update) - us(off_update)
    );
    println!(
        "without the CEL rules (pruning, defaults, structural schema only): create {:.0} µs, update {:.0} µs",
        us(structural_create),
        us(structural_update)
    );
}

/// The CRD without its `x-kubernetes-validations`, to tell the CEL rules' share.
fn strip_rules(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("x-kubernetes-validations");
            m.values_mut().for_each(strip_rules);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_rules),
        _ => {}
    }
}
