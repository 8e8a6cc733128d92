//! Pruning, as the apiserver prunes a custom resource when it decodes it: every field the
//! schema does not specify is dropped (unless under `x-kubernetes-preserve-unknown-fields`),
//! and the object meta of the root and of embedded resources keeps only ObjectMeta's fields.
//! The dropped paths are what `fieldValidation=Strict` refuses and `Warn` reports.

use serde_json::{Map, Value};

use super::path;

/// The fields of ObjectMeta: everything else under `metadata` is unknown.
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Drops the fields of `v` that schema node `s` does not know, appending their paths.
pub(super) fn prune(s: &Value, v: &mut Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => prune_object(s, map, at, out),
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(item_schema, item, &path::index(at, i), out);
                }
            }
        }
        _ => {}
    }
}

fn prune_object(s: &Value, map: &mut Map<String, Value>, at: &str, out: &mut Vec<String>) {
    let flag = |key: &str| s.get(key).and_then(Value::as_bool) == Some(true);
    let resource = at.is_empty() || flag("x-kubernetes-embedded-resource");
    let preserve = flag("x-kubernetes-preserve-unknown-fields");
    let props = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties");
    let mut unknown = Vec::new();
    for (k, child) in map.iter_mut() {
        if resource && matches!(k.as_str(), "apiVersion" | "kind") {
            continue;
        }
        if resource && k == "metadata" {
            if let Value::Object(meta) = child {
                let meta_at = path::child(at, "metadata");
                meta.retain(|mk, _| {
                    let known = OBJECT_META.contains(&mk.as_str());
                    if !known {
                        out.push(path::child(&meta_at, mk));
                    }
                    known
                });
            }
            continue;
        }
        match (props.and_then(|p| p.get(k)), additional) {
            (Some(cs), _) => prune(cs, child, &path::child(at, k), out),
            (None, Some(cs)) if cs.is_object() => prune(cs, child, &path::child(at, k), out),
            (None, Some(Value::Bool(true))) => {}
            _ if preserve => {}
            _ => unknown.push(k.clone()),
        }
    }
    for k in unknown {
        map.remove(&k);
        out.push(path::child(at, &k));
    }
}
