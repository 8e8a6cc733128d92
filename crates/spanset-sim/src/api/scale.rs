//! The `/scale` subresource: an `autoscaling/v1 Scale` view of a StatefulSet (or a custom
//! resource with scale paths) whose writes change only the parent's replicas.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::store::validate::FieldError;
use crate::{
    cluster::Cluster,
    store::{
        admission::{Operation, Request},
        error::{ApiError, ApiResult},
        object,
        registry::{Subresource, WriteOptions},
        resources::{ResourceType, ScalePaths},
        selector::LabelSelector,
    },
};

fn paths(rt: &ResourceType) -> ApiResult<&ScalePaths> {
    rt.scale.as_ref().ok_or_else(ApiError::no_route)
}

/// The Scale document of an object.
pub fn scale_of(rt: &ResourceType, obj: &Value) -> ApiResult<Value> {
    let p = paths(rt)?;
    let selector = match &p.label_selector {
        Some(path) => object::at_path(obj, path).and_then(Value::as_str).unwrap_or("").to_string(),
        None => obj
            .pointer("/spec/selector")
            .and_then(|s| LabelSelector::from_api(s).ok())
            .map(|s| s.to_query_string())
            .unwrap_or_default(),
    };
    let meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    let mut scale_meta = json!({});
    for k in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = meta.get(k) {
            scale_meta[k] = v.clone();
        }
    }
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": object::at_path(obj, &p.spec_replicas).and_then(Value::as_i64).unwrap_or(0)},
        "status": {
            "replicas": object::at_path(obj, &p.status_replicas).and_then(Value::as_i64).unwrap_or(0),
            "selector": selector,
        },
    }))
}

/// GET `.../scale`.
pub fn get(cluster: &Cluster, rt: &ResourceType, ns: &str, name: &str) -> ApiResult<Value> {
    scale_of(rt, &*cluster.get(rt, ns, name)?)
}

/// Writes the replicas of a desired Scale into the parent object. Admission sees the write as
/// the apiserver shows it: an UPDATE of the `scale` subresource whose objects are the Scale
/// before and after (not the parent).
pub fn patch(
    cluster: &Cluster,
    rt: &ResourceType,
    ns: &str,
    name: &str,
    opts: &WriteOptions,
    f: impl FnOnce(&Value) -> ApiResult<Value>,
) -> ApiResult<Value> {
    let p = paths(rt)?.clone();
    let parent_opts = WriteOptions { user: None, ..opts.clone() };
    // Read before the update: admission cannot read storage while it is being updated.
    let admission = opts.user.as_ref().map(|user| (user, cluster.admission(rt, ns)));
    let updated: Arc<Value> = cluster.update_with(rt, ns, name, Subresource::Main, &parent_opts, |cur| {
        let current_scale = scale_of(rt, cur)?;
        let desired = f(&current_scale)?;
        let wanted_rv = desired.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("");
        if !wanted_rv.is_empty() && wanted_rv != object::resource_version(cur).to_string() {
            return Err(ApiError::conflict(rt, name));
        }
        let replicas = desired.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
        if !replicas.is_i64() {
            return Err(ApiError::bad_request("Scale.spec.replicas must be an integer"));
        }
        if replicas.as_i64().unwrap_or(0) < 0 {
            let err = FieldError::invalid("spec.replicas", replicas, "must be greater than or equal to 0");
            return Err(ApiError::invalid_field("Scale", "autoscaling", name, &err));
        }
        let mut next = cur.clone();
        object::set_path(&mut next, &p.spec_replicas, replicas);
        if let Some((user, snapshot)) = &admission {
            let after = scale_of(rt, &next)?;
            snapshot.admit(
                cluster,
                &Request {
                    operation: Operation::Update,
                    resource: rt,
                    version: rt.version(),
                    subresource: "scale",
                    namespace: ns,
                    name,
                    object: Some(&after),
                    old_object: Some(&current_scale),
                    kind: Some(("autoscaling", "v1", "Scale")),
                    user,
                    dry_run: opts.dry_run,
                },
            )?;
        }
        Ok(next)
    })?;
    scale_of(rt, &updated)
}

/// PUT `.../scale`.
pub fn replace(
    cluster: &Cluster,
    rt: &ResourceType,
    ns: &str,
    name: &str,
    body: Value,
    opts: &WriteOptions,
) -> ApiResult<Value> {
    patch(cluster, rt, ns, name, opts, |_| Ok(body))
}
