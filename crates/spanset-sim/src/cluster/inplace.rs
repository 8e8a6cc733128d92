//! OpenKruise's in-place update of an Advanced StatefulSet's pods, as its documentation and
//! `pkg/util/inplaceupdate` describe it: with `updateStrategy.rollingUpdate.podUpdatePolicy`
//! `InPlaceIfPossible` (or `InPlaceOnly`), pods are created with the `InPlaceUpdateReady`
//! readiness gate; a new revision that changes only container images is applied to the
//! existing pod — the gate's condition set False first (so the pod leaves its Services), then
//! the images, the revision label and the `apps.kruise.io/inplace-update-state` annotation —
//! and the kubelet restarts just those containers; once they run the new images and are ready,
//! the condition goes back to True. The pod keeps its name, uid, node and volumes. Any other
//! change recreates the pod (`InPlaceIfPossible`) or waits (`InPlaceOnly`, which Kruise refuses
//! to recreate).

use serde_json::{Value, json};

use crate::{
    cluster::Cluster,
    store::{actor::Component, error::ApiResult, object, registry::Subresource, resources::ResourceType},
};

/// The readiness gate Kruise injects into pods it may update in place.
pub const GATE: &str = "InPlaceUpdateReady";
/// The annotation recording an in-place update in progress or done.
pub const STATE_ANNOTATION: &str = "apps.kruise.io/inplace-update-state";
/// The label naming a pod's revision.
const REVISION_LABEL: &str = "controller-revision-hash";

/// `updateStrategy.rollingUpdate.podUpdatePolicy` of an Advanced StatefulSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Delete and recreate (the default, as with apps/v1).
    ReCreate,
    /// In place when only images change, else recreate.
    InPlaceIfPossible,
    /// In place only; other changes are not applied.
    InPlaceOnly,
}

impl Policy {
    /// The set's policy (`ReCreate` when unset or unknown).
    pub fn of(set: &Value) -> Self {
        match set.pointer("/spec/updateStrategy/rollingUpdate/podUpdatePolicy").and_then(Value::as_str) {
            Some("InPlaceIfPossible") => Policy::InPlaceIfPossible,
            Some("InPlaceOnly") => Policy::InPlaceOnly,
            _ => Policy::ReCreate,
        }
    }

    /// Whether pods get the readiness gate.
    pub fn in_place(self) -> bool {
        self != Policy::ReCreate
    }
}

/// Adds the `InPlaceUpdateReady` readiness gate to a new pod.
pub fn add_gate(pod: &mut Value) {
    let spec = &mut pod["spec"];
    let mut gates: Vec<Value> = spec["readinessGates"].as_array().cloned().unwrap_or_default();
    if !gates.iter().any(|g| g["conditionType"] == GATE) {
        gates.push(json!({"conditionType": GATE}));
    }
    spec["readinessGates"] = json!(gates);
}

/// A template with every container image blanked: two templates equal under this differ only
/// in images.
fn without_images(template: &Value) -> Value {
    let mut t = template.clone();
    for list in ["containers", "initContainers"] {
        if let Some(cs) = t.pointer_mut(&format!("/spec/{list}")).and_then(Value::as_array_mut) {
            for c in cs {
                c["image"] = Value::Null;
            }
        }
    }
    t
}

/// Whether going from `old` to `new` can be done in place: only container images differ.
pub fn possible(old: &Value, new: &Value) -> bool {
    old != new && without_images(old) == without_images(new)
}

fn gate_condition(pod: &Value) -> Option<&str> {
    pod.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == GATE)?["status"].as_str()
}

fn set_gate(
    cluster: &Cluster,
    pods: &ResourceType,
    pod: &Value,
    (status, reason): (&str, &str),
    by: Component,
) -> ApiResult<()> {
    cluster.update_incarnation(pods, pod, Subresource::Status, by, |next| {
        let mut conds: Vec<Value> =
            next.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        conds.retain(|c| c["type"] != GATE);
        let mut c = json!({"type": GATE, "status": status, "lastTransitionTime": object::now_rfc3339()});
        if !reason.is_empty() {
            c["reason"] = json!(reason);
        }
        conds.push(c);
        next["status"]["conditions"] = json!(conds);
    })?;
    Ok(())
}

/// Whether an in-place update of the pod is under way (its `InPlaceUpdateReady` condition
/// False): the pod is unavailable from that write on, before the kubelet has turned its Ready
/// condition False, as Kruise counts it.
pub fn in_progress(pod: &Value) -> bool {
    gate_condition(pod) == Some("False")
}

/// Whether each container runs the image its spec names and the containers are ready.
fn caught_up(pod: &Value) -> bool {
    let statuses = pod.pointer("/status/containerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
    let specs = pod.pointer("/spec/containers").and_then(Value::as_array).cloned().unwrap_or_default();
    !statuses.is_empty()
        && specs
            .iter()
            .all(|c| statuses.iter().any(|s| s["name"] == c["name"] && s["image"] == c["image"] && s["ready"] == true))
}

/// Keeps a gated pod's condition: True once created (nothing pending), and True again once an
/// in-place update has been carried out by the kubelet.
pub fn refresh(cluster: &Cluster, pods: &ResourceType, pod: &Value, by: Component) -> ApiResult<()> {
    let gated = pod
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .is_some_and(|g| g.iter().any(|g| g["conditionType"] == GATE));
    if !gated || object::is_deleting(pod) {
        return Ok(());
    }
    match gate_condition(pod) {
        None => set_gate(cluster, pods, pod, ("True", ""), by),
        Some("False") if caught_up(pod) => set_gate(cluster, pods, pod, ("True", ""), by),
        _ => Ok(()),
    }
}

/// Updates a pod in place to `template` at `revision`: the gate's condition False first, then
/// the images, the revision label and the state annotation.
pub fn update(
    cluster: &Cluster,
    pods: &ResourceType,
    pod: &Value,
    (template, revision): (&Value, &str),
    by: Component,
) -> ApiResult<()> {
    set_gate(cluster, pods, pod, ("False", "StartInPlaceUpdate"), by)?;
    let old_revision = pod.pointer(&format!("/metadata/labels/{REVISION_LABEL}")).cloned().unwrap_or(Value::Null);
    let images = object::container_images(template);
    cluster.update_incarnation(pods, pod, Subresource::Main, by, |next| {
        let mut last = serde_json::Map::new();
        if let Some(cs) = next.pointer_mut("/spec/containers").and_then(Value::as_array_mut) {
            for c in cs {
                let name = c["name"].as_str().unwrap_or("").to_string();
                if let Some((_, image)) = images.iter().find(|(n, _)| *n == name) {
                    if c["image"] != image.as_str() {
                        last.insert(name, json!({"imageID": c["image"].clone()}));
                    }
                    c["image"] = json!(image);
                }
            }
        }
        let state = json!({"revision": revision, "updateTimestamp": object::now_rfc3339(),
            "lastContainerStatuses": last, "previousRevision": old_revision});
        let meta = object::metadata_mut(next);
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        labels[REVISION_LABEL] = json!(revision);
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        annotations[STATE_ANNOTATION] = json!(state.to_string());
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_image_change_is_possible_in_place() {
        let t = |image: &str, env: &str| json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": image, "env": [{"name": "E", "value": env}]}]}});
        assert!(possible(&t("nginx:1", "x"), &t("nginx:2", "x")));
        assert!(!possible(&t("nginx:1", "x"), &t("nginx:2", "y")), "an env change recreates");
        assert!(!possible(&t("nginx:1", "x"), &t("nginx:1", "x")), "nothing to update");
        let policy =
            |p: &str| Policy::of(&json!({"spec": {"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": p}}}}));
        assert_eq!(policy("InPlaceIfPossible"), Policy::InPlaceIfPossible);
        assert_eq!(policy("InPlaceOnly"), Policy::InPlaceOnly);
        assert_eq!(policy("other"), Policy::ReCreate);
        let mut pod = json!({"spec": {"readinessGates": [{"conditionType": "x"}]}});
        add_gate(&mut pod);
        add_gate(&mut pod);
        assert_eq!(pod["spec"]["readinessGates"], json!([{"conditionType": "x"}, {"conditionType": GATE}]));
    }
}
