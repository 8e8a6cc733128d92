//! The CRD finalizer of a simulated cluster (`apiextensions-apiserver`'s
//! `customresourcecleanup` controller): a CRD marked for deletion (see
//! [`crate::store::crd_deletion`]) is said `Terminating` (`InstanceDeletionInProgress`),
//! every object it serves is deleted through the normal two-phase deletion (one with
//! finalizers gets a deletionTimestamp and stays until they are removed), and once none is
//! left the condition turns False (`InstanceDeletionCompleted`) and the finalizer goes — with
//! it the CRD and its served resource, when no other finalizer holds it.
//!
//! The real controller polls for the objects to go (every 5 s for a minute, then again); this
//! one is woken by every change, so it finishes as soon as the last object is gone.

use std::sync::Weak;

use serde_json::Value;

use crate::{
    cluster::{Cluster, controller_loop},
    store::{
        actor::Component,
        crd_deletion::{self, CLEANUP_FINALIZER, TERMINATING},
        error::ApiResult,
        object,
        registry::{DeleteOptions, Subresource, WriteOptions},
        resources,
    },
};

/// Runs the CRD finalizer until the cluster is dropped.
pub async fn run(cluster: Weak<Cluster>) {
    controller_loop::run(cluster, controller_loop::UNREAD_BY_WORKLOADS, |c, _| {
        sweep(c);
    })
    .await;
}

/// One pass over the CRDs marked for deletion; returns how many writes it made.
pub fn sweep(cluster: &Cluster) -> usize {
    let Some(crd_rt) = cluster.resources.by_plural("apiextensions.k8s.io", "customresourcedefinitions") else {
        return 0;
    };
    let (crds, _) = cluster.storage.list(&crd_rt.storage_key(), None);
    let mut writes = 0;
    for crd in crds.iter().filter(|c| object::is_deleting(c)) {
        if !object::finalizers(crd).iter().any(|f| f == CLEANUP_FINALIZER) {
            continue;
        }
        let name = object::name(crd).to_string();
        let write = |sub, f: &dyn Fn(&Value) -> ApiResult<Value>| {
            cluster.update_with(&crd_rt, "", &name, sub, &WriteOptions::by(Component::CrdFinalizer), f).is_ok()
        };
        // Said once; a repeat of the same condition writes nothing.
        let in_progress = condition(true, "InstanceDeletionInProgress", "CustomResource deletion is in progress");
        if !write(Subresource::Status, &in_progress) {
            continue;
        }
        let served = resources::from_crd(crd)
            .and_then(|t| cluster.resources.by_plural(&t.group, &t.plural))
            .filter(|t| t.custom);
        let done = match served {
            // Never served (nothing was established): nothing to delete.
            None => condition(false, "NeverEstablished", "resource was never established"),
            Some(rt) => {
                let (left, _) = cluster.storage.list(&rt.storage_key(), None);
                if !left.is_empty() {
                    for obj in left.iter().filter(|o| !object::is_deleting(o)) {
                        let opts = DeleteOptions::by(Component::CrdFinalizer);
                        if cluster.delete(&rt, object::namespace(obj), object::name(obj), &opts).is_ok() {
                            writes += 1;
                        }
                    }
                    continue;
                }
                condition(false, "InstanceDeletionCompleted", "removed all instances")
            }
        };
        if !write(Subresource::Status, &done) {
            continue;
        }
        // The last finalizer gone, the CRD goes in the same write (and its resource with it).
        let release = |cur: &Value| {
            let mut next = cur.clone();
            let kept: Vec<Value> =
                object::finalizers(cur).into_iter().filter(|f| f != CLEANUP_FINALIZER).map(Value::String).collect();
            object::metadata_mut(&mut next).insert("finalizers".into(), Value::Array(kept));
            Ok(next)
        };
        if write(Subresource::Main, &release) {
            writes += 1;
        }
    }
    writes
}

/// The edit that sets the CRD's `Terminating` condition.
fn condition(status: bool, reason: &'static str, message: &'static str) -> impl Fn(&Value) -> ApiResult<Value> {
    move |cur: &Value| {
        let mut next = cur.clone();
        crd_deletion::set_condition(&mut next, TERMINATING, status, reason, message);
        Ok(next)
    }
}
