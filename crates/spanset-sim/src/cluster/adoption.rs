//! A StatefulSet adopts the orphans it selects, as kube-controller-manager's does before each
//! sync (`ClaimPods` and `ClaimControllerRevisions` through the controller ref manager): a pod
//! with no controller, whose labels match the set's selector and whose name is the set's name
//! and an ordinal (`isMemberOf`), and a ControllerRevision with no controller whose labels match,
//! get the set as their controller, unless the set or the orphan is being deleted. That is what
//! makes a StatefulSet deleted with `propagationPolicy: Orphan` and created again take its
//! running pods back without restarting them — the way to change a field the apiserver refuses
//! to update (`volumeClaimTemplates`, `selector`, `serviceName`, `podManagementPolicy`).
//!
//! Owned objects whose labels no longer match are not released here (the real manager does;
//! nothing in spanset relabels a pod).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::{
    cluster::{Cluster, statefulset::ordinal_of},
    store::{
        actor::Component,
        error::ApiError,
        object,
        registry::{Subresource, WriteOptions},
        resources::ResourceType,
        selector::LabelSelector,
    },
};

/// Whether `obj` has an owner reference with `controller: true`.
fn has_controller(obj: &Value) -> bool {
    object::owner_refs(obj).iter().any(|r| r["controller"] == true)
}

/// Whether `set` (not being deleted) would adopt `orphan`: same namespace, no controller, not
/// being deleted, labels matched by the set's selector, and for a pod, a name of the set's.
pub fn would_adopt(set: &Value, orphan: &Value, is_pod: bool) -> bool {
    if object::is_deleting(set) || object::is_deleting(orphan) || has_controller(orphan) {
        return false;
    }
    if object::namespace(set) != object::namespace(orphan) {
        return false;
    }
    if is_pod && ordinal_of(object::name(set), object::name(orphan)).is_none() {
        return false;
    }
    let selector = set.pointer("/spec/selector").cloned().unwrap_or(Value::Null);
    let Ok(selector) = LabelSelector::from_api(&selector) else { return false };
    selector.matches(object::labels(orphan))
}

/// The owner reference a set's pods and revisions carry.
pub fn controller_ref(set: &Value) -> Value {
    let api_version = set["apiVersion"].as_str().filter(|v| !v.is_empty()).unwrap_or("apps/v1");
    json!({"apiVersion": api_version, "kind": "StatefulSet", "name": object::name(set), "uid": object::uid(set), "controller": true, "blockOwnerDeletion": true})
}

/// Adopts every orphan in `orphans` (pods or ControllerRevisions, as `rt` says) that one of
/// `sets` selects; returns how many were adopted. The write is conditional on the object being
/// still an orphan, as the real manager's patch is on its uid: an object claimed meanwhile is
/// left alone.
pub fn adopt(
    cluster: &Cluster,
    rt: &ResourceType,
    sets: &[Arc<Value>],
    orphans: &[Arc<Value>],
    by: Component,
) -> usize {
    let is_pod = rt.plural == "pods";
    let mut adopted = 0;
    for orphan in orphans {
        let Some(set) = sets.iter().find(|s| would_adopt(s, orphan, is_pod)) else { continue };
        let reference = controller_ref(set);
        let uid = object::uid(orphan).to_string();
        let res = cluster.update_with(
            rt,
            object::namespace(orphan),
            object::name(orphan),
            Subresource::Main,
            &WriteOptions::by(by),
            |cur| {
                if object::uid(cur) != uid || has_controller(cur) {
                    return Err(ApiError::conflict_because(rt, object::name(cur), "claimed meanwhile"));
                }
                let mut next = cur.clone();
                let mut refs = object::owner_refs(cur).to_vec();
                refs.push(reference.clone());
                object::metadata_mut(&mut next).insert("ownerReferences".into(), json!(refs));
                Ok(next)
            },
        );
        if res.is_ok() {
            adopted += 1;
        }
    }
    adopted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": "web", "namespace": "db", "uid": "s-1"},
               "spec": {"selector": {"matchLabels": {"app": "web"}}}})
    }

    fn pod(name: &str, labels: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "db", "uid": format!("u-{name}"), "labels": labels}})
    }

    #[test]
    fn a_set_adopts_only_its_own_orphans() {
        let s = set();
        assert!(would_adopt(&s, &pod("web-3", json!({"app": "web"})), true));
        assert!(!would_adopt(&s, &pod("web-3", json!({"app": "other"})), true), "the selector decides");
        assert!(!would_adopt(&s, &pod("webx-3", json!({"app": "web"})), true), "the name must be the set's");
        assert!(!would_adopt(&s, &pod("web-x", json!({"app": "web"})), true), "and end in an ordinal");
        let mut owned = pod("web-3", json!({"app": "web"}));
        owned["metadata"]["ownerReferences"] = json!([{"uid": "other", "controller": true}]);
        assert!(!would_adopt(&s, &owned, true), "another controller's pod stays its");
        let mut deleting = s.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(!would_adopt(&deleting, &pod("web-3", json!({"app": "web"})), true));
        let mut elsewhere = pod("web-3", json!({"app": "web"}));
        elsewhere["metadata"]["namespace"] = json!("other");
        assert!(!would_adopt(&s, &elsewhere, true));
        assert!(would_adopt(&s, &pod("web-abcdef", json!({"app": "web"})), false), "a revision needs no ordinal");
    }
}
