//! The EndpointSlice controller of a simulated cluster, as kube-controller-manager runs it: for
//! every Service with a selector it keeps `discovery.k8s.io/v1` EndpointSlices listing the
//! selected pods that have an IP ([`desired`]), laid out over as few slice writes as it can
//! ([`layout`]). Cluster DNS (CoreDNS, and the sandbox's) reads these slices; a headless
//! Service's `<pod>.<service>` names come from their endpoints' hostnames.
//!
//! It only touches slices labelled `endpointslice.kubernetes.io/managed-by:
//! endpointslice-controller.k8s.io` (anyone may publish other slices for the same Service, as
//! spanset does for the pods of other clusters), and writes nothing when nothing changed. As
//! kube-controller-manager's `syncService` does, it leaves the slices of a Service without a
//! selector (or of type ExternalName) alone — they are managed out of band, even when a
//! selector was removed — and a deleted Service's slices go with it through their owner
//! reference (the garbage collector). Runs as one task per cluster
//! in level-triggered sweeps woken by changes to the store (see
//! [`crate::cluster::controller_loop`]).

pub mod desired;
pub mod layout;

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Weak},
};

use serde_json::{Value, json};

use self::{
    desired::{CONTROLLER, MANAGED_BY, SERVICE_NAME},
    layout::Existing,
};
use crate::{
    cluster::Cluster,
    store::{
        actor::Component,
        object,
        registry::{DeleteOptions, Subresource, WriteOptions},
        resources::ResourceType,
        storage::Event,
    },
};

/// Longest `generateName` prefix the apiserver keeps (63 minus the 5 random characters).
const MAX_PREFIX: usize = 58;

/// Whose writes this controller's are, in the resource account.
const BY: Component = Component::EndpointSliceController;

/// Runs the controller until the cluster is dropped.
pub async fn run(cluster: Weak<Cluster>) {
    crate::cluster::controller_loop::run_woken_by(cluster, wakes, |c, _| sweep(c)).await;
}

/// Whether a change is one this controller acts on: anything but Events and the EndpointSlices
/// others manage (spanset publishes the pods of other members there). kube-controller-manager's
/// slice handlers likewise queue a Service only for slices managed by the controller, or
/// whose manager changed.
fn wakes(ev: &Event) -> bool {
    if !crate::cluster::controller_loop::wakes(&ev.resource, crate::cluster::controller_loop::UNREAD_BUT_EVENTS) {
        return false;
    }
    let slice = ev.resource.0 == "discovery.k8s.io" && ev.resource.1 == "endpointslices";
    !slice || ours(&ev.object) || ev.prev.as_deref().is_some_and(ours)
}

fn list(cluster: &Cluster, group: &str, plural: &str) -> Vec<Arc<Value>> {
    cluster.storage.list(&(group.to_string(), plural.to_string()), None).0
}

/// Whether this controller manages a slice.
fn ours(slice: &Value) -> bool {
    object::labels(slice).and_then(|l| l.get(MANAGED_BY)).and_then(Value::as_str) == Some(CONTROLLER)
}

/// Whether the slice's controller is the Service of this uid.
fn owned_by(slice: &Value, uid: &str) -> bool {
    object::owner_refs(slice).iter().any(|r| r["controller"] == true && r["uid"] == uid)
}

/// One pass over every Service, its pods and its slices.
pub fn sweep(cluster: &Cluster) {
    cluster.counters.endpointslice_sweeps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let Some(slices_rt) = cluster.resources.by_plural("discovery.k8s.io", "endpointslices") else { return };
    let zones: HashMap<String, String> = list(cluster, "", "nodes")
        .iter()
        .filter_map(|n| {
            let zone = object::labels(n)?.get("topology.kubernetes.io/zone")?.as_str()?;
            Some((object::name(n).to_string(), zone.to_string()))
        })
        .collect();
    let pods = list(cluster, "", "pods");
    // (namespace, label key, label value) → the pods carrying that label, so that each Service
    // looks only at the pods its selector may select.
    let mut by_label: HashMap<(&str, &str, &str), Vec<&Arc<Value>>> = HashMap::new();
    for pod in &pods {
        for (k, v) in object::labels(pod).into_iter().flatten() {
            by_label.entry((object::namespace(pod), k.as_str(), v.as_str().unwrap_or(""))).or_default().push(pod);
        }
    }
    // (namespace, Service name) → this controller's slices.
    let mut slices: BTreeMap<(String, String), Vec<Arc<Value>>> = BTreeMap::new();
    for slice in list(cluster, "discovery.k8s.io", "endpointslices").into_iter().filter(|s| ours(s)) {
        let service = object::labels(&slice).and_then(|l| l.get(SERVICE_NAME)).and_then(Value::as_str);
        let key = (object::namespace(&slice).to_string(), service.unwrap_or("").to_string());
        slices.entry(key).or_default().push(slice);
    }
    for service in list(cluster, "", "services") {
        // A Service without a selector (or ExternalName) gets its slices out of band: whatever
        // is there, even labelled as this controller's, is left alone (`syncService`).
        let Some(selector) = desired::selector(&service) else { continue };
        let key = (object::namespace(&service).to_string(), object::name(&service).to_string());
        // Slices of an earlier Service of that name (another uid) are not this one's.
        let (existing, stale): (Vec<_>, Vec<_>) =
            slices.remove(&key).unwrap_or_default().into_iter().partition(|s| owned_by(s, object::uid(&service)));
        for slice in stale {
            delete(cluster, &slices_rt, &slice);
        }
        // Candidates: the namespace's pods carrying the selector's first label.
        let first = selector.iter().next().map(|(k, v)| (key.0.as_str(), k.as_str(), v.as_str().unwrap_or("")));
        let candidates = first.and_then(|f| by_label.get(&f)).map(Vec::as_slice).unwrap_or_default();
        let wanted: Vec<(Value, Value)> = candidates
            .iter()
            .filter(|p| desired::selects(selector, p))
            .filter_map(|p| {
                let zone = p.pointer("/spec/nodeName").and_then(Value::as_str).and_then(|n| zones.get(n));
                let ep = desired::endpoint(&service, p, zone.map(String::as_str))?;
                Some((Value::Array(desired::ports(&service, p)), ep))
            })
            .collect();
        reconcile(cluster, &slices_rt, &service, &existing, wanted);
    }
    // What is left belongs to Services without a selector (left alone, as above) or gone
    // (the garbage collector deletes the slices they own).
}

/// Brings one Service's slices to what its pods want: new slices first, then changed ones,
/// then deletions, so that an endpoint moving between slices is never missing meanwhile.
fn reconcile(
    cluster: &Cluster,
    rt: &ResourceType,
    service: &Value,
    existing: &[Arc<Value>],
    wanted: Vec<(Value, Value)>,
) {
    let by_name: HashMap<&str, &Arc<Value>> = existing.iter().map(|s| (object::name(s), s)).collect();
    let current = existing
        .iter()
        .map(|s| Existing {
            name: object::name(s).to_string(),
            ports: s.get("ports").cloned().unwrap_or(json!([])),
            endpoints: s.get("endpoints").and_then(Value::as_array).cloned().unwrap_or_default(),
        })
        .collect();
    let plan = layout::layout(current, wanted);
    let labels = desired::labels(service);
    for (ports, endpoints) in plan.create {
        create(cluster, rt, service, &labels, ports, endpoints);
    }
    for slice in plan.keep {
        let Some(stored) = by_name.get(slice.name.as_str()) else { continue };
        let now = json!({"ports": slice.ports, "endpoints": slice.endpoints, "labels": labels.clone()});
        let was = json!({
            "ports": stored.get("ports").cloned().unwrap_or(json!([])),
            "endpoints": stored.get("endpoints").cloned().unwrap_or(json!([])),
            "labels": stored.pointer("/metadata/labels").cloned().unwrap_or(json!({})),
        });
        if now == was {
            continue;
        }
        let written = cluster.update_incarnation(rt, stored, Subresource::Main, BY, |next| {
            next["ports"] = now["ports"].clone();
            next["endpoints"] = now["endpoints"].clone();
            next["metadata"]["labels"] = now["labels"].clone();
        });
        if let Err(e) = written {
            tracing::debug!(cluster = %cluster.config.name, slice = %slice.name, error = %e, "endpointslice update");
        }
    }
    for name in plan.delete {
        if let Some(stored) = by_name.get(name.as_str()) {
            delete(cluster, rt, stored);
        }
    }
}

fn create(cluster: &Cluster, rt: &ResourceType, service: &Value, labels: &Value, ports: Value, endpoints: Vec<Value>) {
    let name = object::name(service);
    let prefix: String = format!("{name}-").chars().take(MAX_PREFIX).collect();
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "generateName": prefix, "namespace": object::namespace(service), "labels": labels,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name, "uid": object::uid(service),
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    });
    if let Err(e) = cluster.create(rt, Some(object::namespace(service)), slice, &WriteOptions::by(BY)) {
        tracing::debug!(cluster = %cluster.config.name, service = name, error = %e, "endpointslice create");
    }
}

fn delete(cluster: &Cluster, rt: &ResourceType, slice: &Value) {
    let opts = DeleteOptions { precondition_uid: Some(object::uid(slice).to_string()), ..DeleteOptions::by(BY) };
    if let Err(e) = cluster.delete(rt, object::namespace(slice), object::name(slice), &opts) {
        tracing::debug!(cluster = %cluster.config.name, slice = object::name(slice), error = %e, "endpointslice delete");
    }
}
