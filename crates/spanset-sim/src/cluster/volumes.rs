//! The PersistentVolume controller of one simulated cluster, over the sandbox's shared
//! [`super::disks`]: a default StorageClass, dynamic provisioning, binding, and reclaim (Retain keeps
//! a Released volume, Delete removes it). A PV object copied into another cluster — the
//! migration blog's step 6 — names the same volume there, so the data arrives with it.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Weak},
};

use serde_json::{Value, json};

use crate::{
    cluster::{
        Cluster,
        events::{EventType, Occurrence, Recorder, Style},
    },
    store::{
        actor::Component,
        object::{self, str_at},
        registry::{DeleteOptions, Subresource, WriteOptions},
        resources::ResourceType,
    },
};

/// Whose writes this controller's are, in the resource account.
const BY: Component = Component::PersistentVolumeController;

/// CSI driver name of sandbox volumes.
pub const DRIVER: &str = "volumes.sim.spanset.dev";
/// The default StorageClass every simulated cluster starts with.
pub const DEFAULT_CLASS: &str = "standard";
/// A StorageClass whose volumes live on one node (a pod using one can only run there).
pub const LOCAL_CLASS: &str = "local";

/// The volume identity a PV names, if it is a sandbox volume.
pub fn volume_of(pv: &Value) -> Option<&str> {
    (pv.pointer("/spec/csi/driver").and_then(Value::as_str) == Some(DRIVER))
        .then(|| pv.pointer("/spec/csi/volumeHandle").and_then(Value::as_str))
        .flatten()
}

/// The node a PV is bound to by node affinity, if any.
pub fn pv_node(pv: &Value) -> Option<&str> {
    pv.pointer("/spec/nodeAffinity/required/nodeSelectorTerms/0/matchExpressions/0/values/0").and_then(Value::as_str)
}

/// Runs the PersistentVolume controller of a cluster until it is dropped.
pub async fn run(cluster: Weak<Cluster>) {
    // The CSI external-provisioner's component name: driver, controller pod, instance.
    let mut events = Recorder::new(
        BY,
        Style::Legacy {
            component: "volumes.sim.spanset.dev_csi-controller-0_7d3e1f52-0c1a-4b7e-9a51-2f4e8b6c9d10",
            host: None,
        },
    );
    crate::cluster::controller_loop::run(cluster, crate::cluster::controller_loop::UNREAD_BY_WORKLOADS, move |c, _| {
        sweep(c, &mut events)
    })
    .await;
}

/// The StorageClasses a fresh cluster ships with (as a real one's addon manager installs its
/// default class at bootstrap): installed with the cluster's furniture, before its API opens,
/// so that a fresh cluster's state does not depend on when this controller's task starts.
pub fn install_classes(cluster: &Cluster) {
    let Some(sc) = cluster.resources.by_plural("storage.k8s.io", "storageclasses") else { return };
    let classes = [
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": DEFAULT_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
               "provisioner": DRIVER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": LOCAL_CLASS},
               "provisioner": DRIVER, "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer",
               "parameters": {"locality": "node"}}),
    ];
    for class in classes {
        let _ = cluster.create(&sc, None, class, &WriteOptions::by(Component::Sandbox));
    }
}

struct Kinds {
    pvs: Arc<ResourceType>,
    pvcs: Arc<ResourceType>,
}

/// One pass: provision, bind, release and reclaim.
pub fn sweep(cluster: &Cluster, events: &mut Recorder) {
    cluster.counters.volume_sweeps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let k = Kinds {
        pvs: cluster.resources.by_plural("", "persistentvolumes").expect("built in"),
        pvcs: cluster.resources.by_plural("", "persistentvolumeclaims").expect("built in"),
    };
    let (pvs, _) = cluster.storage.list(&(String::new(), "persistentvolumes".into()), None);
    let (pvcs, _) = cluster.storage.list(&(String::new(), "persistentvolumeclaims".into()), None);
    let (classes, _) = cluster.storage.list(&("storage.k8s.io".into(), "storageclasses".into()), None);
    let (pods, _) = cluster.storage.list(&(String::new(), "pods".into()), None);

    // Indexes, so that a sweep costs O(volumes + claims), not O(volumes × claims): the PVs that
    // reserve a claim by name (in storage order), PVs by name, and the claims that exist.
    let mut reserving: HashMap<(&str, &str), Vec<&Arc<Value>>> = HashMap::new();
    for pv in &pvs {
        let claim = (str_at(pv, "/spec/claimRef/namespace"), str_at(pv, "/spec/claimRef/name"));
        if !claim.1.is_empty() {
            reserving.entry(claim).or_default().push(pv);
        }
    }
    let pv_named: HashMap<&str, &Arc<Value>> = pvs.iter().map(|pv| (object::name(pv), pv)).collect();
    let claims: HashSet<(&str, &str, &str)> =
        pvcs.iter().map(|c| (object::namespace(c), object::name(c), object::uid(c))).collect();

    // Claims first: bind to a PV that names them, else provision.
    for pvc in pvcs.iter().filter(|c| str_at(c, "/status/phase") != "Bound" && !object::is_deleting(c)) {
        let ns = object::namespace(pvc);
        let name = object::name(pvc);
        // A PV reserved for this claim by name (a copied PV has its claimRef uid removed).
        let waiting_pv = reserving.get(&(ns, name)).and_then(|pvs| {
            pvs.iter().copied().find(|pv| {
                let uid = str_at(pv, "/spec/claimRef/uid");
                uid.is_empty() || uid == object::uid(pvc)
            })
        });
        let named_pv = str_at(pvc, "/spec/volumeName");
        let pv = waiting_pv.or_else(|| pv_named.get(named_pv).copied().filter(|_| !named_pv.is_empty()));
        match pv {
            Some(pv) => bind(cluster, &k, pv, pvc),
            None => {
                let class_name = match str_at(pvc, "/spec/storageClassName") {
                    "" => DEFAULT_CLASS,
                    c => c,
                };
                let Some(class) = classes.iter().find(|c| object::name(c) == class_name) else { continue };
                if str_at(class, "/provisioner") != DRIVER || !named_pv.is_empty() {
                    continue;
                }
                let local = str_at(class, "/parameters/locality") == "node";
                // WaitForFirstConsumer: provision where the first pod using the claim was placed.
                let node = if local {
                    let user = pods.iter().find(|p| {
                        object::namespace(p) == ns
                            && p.pointer("/spec/volumes").and_then(Value::as_array).is_some_and(|vs| {
                                vs.iter().any(|v| {
                                    v.pointer("/persistentVolumeClaim/claimName").and_then(Value::as_str) == Some(name)
                                })
                            })
                    });
                    match user.map(|p| str_at(p, "/spec/nodeName")).filter(|n| !n.is_empty()) {
                        Some(n) => Some(n.to_string()),
                        None => continue,
                    }
                } else {
                    None
                };
                provision(cluster, &k, pvc, (class, class_name), node, events);
            }
        }
    }

    // Volumes whose claim is gone: Released, then reclaimed by policy.
    for pv in pvs.iter().filter(|pv| !object::is_deleting(pv)) {
        let claim_ns = str_at(pv, "/spec/claimRef/namespace");
        let claim_name = str_at(pv, "/spec/claimRef/name");
        let claim_uid = str_at(pv, "/spec/claimRef/uid");
        if claim_name.is_empty() || claim_uid.is_empty() {
            continue;
        }
        if claims.contains(&(claim_ns, claim_name, claim_uid)) {
            continue;
        }
        if str_at(pv, "/spec/persistentVolumeReclaimPolicy") == "Delete" {
            if let Some(id) = volume_of(pv) {
                cluster.volumes.destroy(id);
            }
            let _ = cluster.delete(&k.pvs, "", object::name(pv), &DeleteOptions::by(BY));
        } else if str_at(pv, "/status/phase") != "Released"
            && set_phase(cluster, &k.pvs, "", object::name(pv), "Released")
        {
            cluster.account.released();
        }
    }
}

/// Sets a volume's phase; whether it changed it.
fn set_phase(cluster: &Cluster, rt: &ResourceType, ns: &str, name: &str, phase: &str) -> bool {
    let before = std::cell::Cell::new(String::new());
    let written = cluster.update_with(rt, ns, name, Subresource::Status, &WriteOptions::by(BY), |cur| {
        before.set(str_at(cur, "/status/phase").to_string());
        let mut next = cur.clone();
        next["status"]["phase"] = json!(phase);
        Ok(next)
    });
    written.is_ok() && before.take() != phase
}

fn provision(
    cluster: &Cluster,
    k: &Kinds,
    pvc: &Value,
    (class, class_name): (&Value, &str),
    node: Option<String>,
    events: &mut Recorder,
) {
    let claim = format!("{}/{}", object::namespace(pvc), object::name(pvc));
    let mut note = |event_type, reason, message: String| {
        events.record(cluster, Occurrence { about: pvc, field_path: None, event_type, reason, action: "", message })
    };
    note(
        EventType::Normal,
        "Provisioning",
        format!("External provisioner is provisioning volume for claim \"{claim}\""),
    );
    let id = cluster.volumes.provision(node.clone().map(|n| (cluster.config.name.clone(), n)));
    let storage = pvc.pointer("/spec/resources/requests/storage").cloned().unwrap_or(json!("1Gi"));
    let mut pv = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": format!("pvc-{}", object::uid(pvc)), "annotations": {"pv.kubernetes.io/provisioned-by": DRIVER}},
        "spec": {
            "capacity": {"storage": storage},
            "accessModes": pvc.pointer("/spec/accessModes").cloned().unwrap_or(json!(["ReadWriteOnce"])),
            "persistentVolumeReclaimPolicy": str_at(class, "/reclaimPolicy"),
            "storageClassName": class_name,
            "volumeMode": "Filesystem",
            "csi": {"driver": DRIVER, "volumeHandle": id},
            "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": object::namespace(pvc), "name": object::name(pvc), "uid": object::uid(pvc)},
        },
    });
    if let Some(n) = node {
        pv["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [n]}]}]}});
    }
    match cluster.create(&k.pvs, None, pv, &WriteOptions::by(BY)) {
        Ok(created) => {
            cluster.account.provisioned();
            note(
                EventType::Normal,
                "ProvisioningSucceeded",
                format!("Successfully provisioned volume {}", object::name(&created)),
            );
            bind(cluster, k, &created, pvc)
        }
        Err(e) => {
            cluster.volumes.destroy(&id);
            note(
                EventType::Warning,
                "ProvisioningFailed",
                format!("failed to provision volume with StorageClass \"{class_name}\": {}", e.message),
            );
        }
    }
}

fn bind(cluster: &Cluster, k: &Kinds, pv: &Value, pvc: &Value) {
    let pv_name = object::name(pv).to_string();
    let claim = json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": object::namespace(pvc), "name": object::name(pvc), "uid": object::uid(pvc)});
    let pv_ok = cluster
        .update_with(&k.pvs, "", &pv_name, Subresource::Main, &WriteOptions::by(BY), |cur| {
            let mut next = cur.clone();
            next["spec"]["claimRef"] = claim.clone();
            Ok(next)
        })
        .is_ok();
    if !pv_ok {
        return;
    }
    set_phase(cluster, &k.pvs, "", &pv_name, "Bound");
    let capacity = pv.pointer("/spec/capacity").cloned().unwrap_or(json!({}));
    let modes = pv.pointer("/spec/accessModes").cloned().unwrap_or(json!([]));
    let class = pv.pointer("/spec/storageClassName").cloned();
    let _ = cluster.update_with(
        &k.pvcs,
        object::namespace(pvc),
        object::name(pvc),
        Subresource::Main,
        &WriteOptions::by(BY),
        |cur| {
            let mut next = cur.clone();
            next["spec"]["volumeName"] = json!(pv_name);
            if let Some(c) = &class
                && next.pointer("/spec/storageClassName").is_none()
            {
                next["spec"]["storageClassName"] = c.clone();
            }
            let meta = object::metadata_mut(&mut next);
            let ann = meta.entry("annotations").or_insert(json!({}));
            ann["pv.kubernetes.io/bind-completed"] = json!("yes");
            Ok(next)
        },
    );
    let _ = cluster.update_with(
        &k.pvcs,
        object::namespace(pvc),
        object::name(pvc),
        Subresource::Status,
        &WriteOptions::by(BY),
        |cur| {
            let mut next = cur.clone();
            next["status"] = json!({"phase": "Bound", "capacity": capacity, "accessModes": modes});
            Ok(next)
        },
    );
}
