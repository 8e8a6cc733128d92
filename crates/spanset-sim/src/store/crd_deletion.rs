//! How a CustomResourceDefinition is deleted, as `apiextensions-apiserver` deletes one: the
//! first DELETE only marks it (deletionTimestamp, the finalizer [`CLEANUP_FINALIZER`], and the
//! condition `Terminating` True), its objects are then deleted one by one through the normal
//! two-phase deletion by the cluster's CRD finalizer
//! ([`crate::cluster::crd_finalizer`]), new ones cannot be created meanwhile, and the CRD
//! (with its served resource) goes only once none is left.
//!
//! Deleting the CRD at once and its objects with it, as the simulator did before, hid exactly
//! what a controller sees on a real cluster when its CRD is uninstalled: its objects get a
//! deletionTimestamp and wait for its finalizers.

use serde_json::{Value, json};

use crate::{
    cluster::Cluster,
    store::{error::ApiError, object, resources::ResourceType},
};

/// The finalizer a CRD gets on its first DELETE (`apiextensions.CustomResourceCleanupFinalizer`);
/// removed by the CRD finalizer once no object of the CRD is left.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The condition a deleted CRD carries, True while its objects are being deleted.
pub const TERMINATING: &str = "Terminating";

/// Whether `rt` is the CustomResourceDefinition resource itself.
pub fn is_crd_resource(rt: &ResourceType) -> bool {
    (rt.group.as_str(), rt.plural.as_str()) == ("apiextensions.k8s.io", "customresourcedefinitions")
}

/// What the first DELETE of a CRD writes (the CRD registry's `Delete`): a deletionTimestamp,
/// the cleanup finalizer, and `Terminating` True (`InstanceDeletionPending`). Nothing is
/// removed yet.
pub fn mark_for_deletion(crd: &mut Value) {
    let meta = object::metadata_mut(crd);
    if !meta.contains_key("deletionTimestamp") {
        meta.insert("deletionTimestamp".into(), json!(object::now_rfc3339()));
    }
    let fins = meta.entry("finalizers").or_insert_with(|| json!([]));
    if let Some(arr) = fins.as_array_mut()
        && !arr.iter().any(|f| f == CLEANUP_FINALIZER)
    {
        arr.push(json!(CLEANUP_FINALIZER));
    }
    set_condition(
        crd,
        TERMINATING,
        true,
        "InstanceDeletionPending",
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
    );
}

/// Sets one condition of a CRD's status, as `SetCRDCondition` does: reason and message always,
/// `lastTransitionTime` only when the status changes (or the condition is new).
pub fn set_condition(crd: &mut Value, type_: &str, status: bool, reason: &str, message: &str) {
    let status = if status { "True" } else { "False" };
    if !crd.get("status").is_some_and(Value::is_object) {
        crd["status"] = json!({});
    }
    let conditions = crd["status"].as_object_mut().expect("an object").entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let list = conditions.as_array_mut().expect("an array");
    let fresh = json!({"type": type_, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": object::now_rfc3339()});
    match list.iter_mut().find(|c| c["type"] == type_) {
        Some(c) => {
            let since = if c["status"] == status { c.get("lastTransitionTime").cloned() } else { None };
            *c = fresh;
            if let Some(t) = since {
                c["lastTransitionTime"] = t;
            }
        }
        None => list.push(fresh),
    }
}

/// Whether a CRD's condition `type_` is True.
pub fn condition_true(crd: &Value, type_: &str) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == type_ && c["status"] == "True"))
}

/// The answer to a create of a custom object while its CRD terminates: kube-apiserver 1.33's
/// custom resource handler refuses the POST with `405 MethodNotAllowed` and this message
/// (1.34 turned it into a 403 from admission, which also stops a server-side apply that would
/// create; 1.33 lets that one through, and so does the simulator, which reports 1.33).
pub fn create_refused(rt: &ResourceType) -> ApiError {
    ApiError::custom(405, "MethodNotAllowed", "create not allowed while custom resource definition is terminating")
        .with_details(json!({"group": rt.group, "kind": rt.plural}))
}

impl Cluster {
    /// Whether the CRD that serves the custom resource `rt` is terminating (its condition
    /// `Terminating` is True): creates of its objects are refused.
    pub fn crd_terminating(&self, rt: &ResourceType) -> bool {
        if !rt.custom {
            return false;
        }
        let Some(crds) = self.resources.by_plural("apiextensions.k8s.io", "customresourcedefinitions") else {
            return false;
        };
        let name = format!("{}.{}", rt.plural, rt.group);
        self.storage.get(&crds.storage_key(), "", &name).is_some_and(|crd| condition_true(&crd, TERMINATING))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marking_adds_the_finalizer_once_and_says_terminating() {
        let mut crd = json!({"metadata": {"name": "things.example.com", "finalizers": ["other"]},
            "status": {"conditions": [{"type": "Established", "status": "True"}]}});
        mark_for_deletion(&mut crd);
        let first = crd["metadata"]["deletionTimestamp"].clone();
        mark_for_deletion(&mut crd);
        assert_eq!(crd["metadata"]["finalizers"], json!(["other", CLEANUP_FINALIZER]));
        assert_eq!(crd["metadata"]["deletionTimestamp"], first, "the first deletion's time stays");
        assert!(condition_true(&crd, TERMINATING) && condition_true(&crd, "Established"));
        let t = crd["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == TERMINATING).unwrap();
        assert_eq!(t["reason"], "InstanceDeletionPending");
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_stays() {
        let mut crd = json!({});
        set_condition(&mut crd, TERMINATING, true, "A", "a");
        crd["status"]["conditions"][0]["lastTransitionTime"] = json!("2020-01-01T00:00:00Z");
        set_condition(&mut crd, TERMINATING, true, "B", "b");
        assert_eq!(crd["status"]["conditions"][0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(crd["status"]["conditions"][0]["reason"], "B");
        set_condition(&mut crd, TERMINATING, false, "C", "c");
        assert_ne!(crd["status"]["conditions"][0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert!(!condition_true(&crd, TERMINATING));
    }
}
