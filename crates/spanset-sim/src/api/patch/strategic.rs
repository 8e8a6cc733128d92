//! Strategic merge patch for the built-in kinds: lists with a patch merge key merge element by
//! element, `metadata.finalizers` merges as a set, other lists replace; plus the directives
//! kubectl's client-side apply sends. Merge keys follow the `patchMergeKey` / `patchStrategy`
//! tags of k8s.io/api, looked up by field name and the path that leads to it.

use serde_json::{Map, Value, json};

use super::PatchError;

/// A built-in kind that takes strategic merge patches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinKind {
    /// Whether the object is a Service (its `spec.ports` merge by `port`).
    service: bool,
}

/// The built-in kind of a group and kind, if strategic merge applies to it; custom resources
/// get `None` (the server answers 415, as a real apiserver does).
pub fn builtin_kind(group: &str, kind: &str) -> Option<BuiltinKind> {
    let known = matches!(
        (group, kind),
        (
            "",
            "Pod"
                | "Service"
                | "Endpoints"
                | "ConfigMap"
                | "Secret"
                | "ServiceAccount"
                | "PersistentVolumeClaim"
                | "PersistentVolume"
                | "Node"
                | "Namespace"
                | "Event"
        ) | ("apps", "StatefulSet" | "ControllerRevision" | "Deployment")
            | ("rbac.authorization.k8s.io", "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding")
            | ("coordination.k8s.io", "Lease")
            | ("events.k8s.io", "Event")
            | ("discovery.k8s.io", "EndpointSlice")
            | ("storage.k8s.io", "StorageClass")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding")
            | ("autoscaling", "Scale")
    );
    known.then_some(BuiltinKind { service: kind == "Service" })
}

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    Replace,
    MergeKey(&'static str),
    PrimitiveSet,
}

fn strategy(kind: BuiltinKind, path: &[String]) -> ListStrategy {
    let Some(field) = path.last().map(String::as_str) else { return ListStrategy::Replace };
    let parent = path.len().checked_sub(2).map(|i| path[i].as_str());
    let in_container =
        path.iter().any(|p| matches!(p.as_str(), "containers" | "initContainers" | "ephemeralContainers"));
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => ListStrategy::MergeKey("name"),
        "env" if in_container => ListStrategy::MergeKey("name"),
        "volumeMounts" if in_container => ListStrategy::MergeKey("mountPath"),
        "volumeDevices" if in_container => ListStrategy::MergeKey("devicePath"),
        "ports" if in_container => ListStrategy::MergeKey("containerPort"),
        "ports" if kind.service && path.len() == 2 => ListStrategy::MergeKey("port"),
        "hostAliases" => ListStrategy::MergeKey("ip"),
        "topologySpreadConstraints" => ListStrategy::MergeKey("topologyKey"),
        "conditions" if parent == Some("status") => ListStrategy::MergeKey("type"),
        "addresses" if parent == Some("status") => ListStrategy::MergeKey("type"),
        "ownerReferences" if parent == Some("metadata") => ListStrategy::MergeKey("uid"),
        "finalizers" if parent == Some("metadata") => ListStrategy::PrimitiveSet,
        _ => ListStrategy::Replace,
    }
}

/// Applies a strategic merge patch to an object of a built-in kind.
pub fn apply_strategic_merge_patch(target: &Value, patch: &Value, kind: BuiltinKind) -> Result<Value, PatchError> {
    let (Some(t), Some(p)) = (target.as_object(), patch.as_object()) else {
        return Err(PatchError::BadRequest("a strategic merge patch must be a JSON object".into()));
    };
    let mut path = Vec::new();
    Ok(merge_map(t, p, kind, &mut path)?.map(Value::Object).unwrap_or_else(|| json!({})))
}

/// Drops directive keys from a value the patch inserts wholesale.
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), strip(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().filter(|e| e.get("$patch").is_none()).map(strip).collect()),
        other => other.clone(),
    }
}

/// Merges a patch map into a map; `None` means the map is deleted (`$patch: delete`).
fn merge_map(
    orig: &Map<String, Value>,
    patch: &Map<String, Value>,
    kind: BuiltinKind,
    path: &mut Vec<String>,
) -> Result<Option<Map<String, Value>>, PatchError> {
    match patch.get("$patch").map(|d| d.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("replace")) => {
            return Ok(strip(&Value::Object(patch.clone())).as_object().cloned());
        }
        Some(Some("delete")) => return Ok(None),
        Some(other) => return Err(PatchError::BadRequest(format!("unknown patch type: {other:?} in map"))),
    }
    let mut out = orig.clone();
    let mut orders: Vec<(String, &Vec<Value>)> = Vec::new();
    let mut deletions: Vec<(String, &Vec<Value>)> = Vec::new();
    let mut retain: Option<&Vec<Value>> = None;
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$setElementOrder/") {
            let list = v.as_array().ok_or_else(|| PatchError::BadRequest(format!("{k} must be a list")))?;
            orders.push((field.to_string(), list));
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let list = v.as_array().ok_or_else(|| PatchError::BadRequest(format!("{k} must be a list")))?;
            deletions.push((field.to_string(), list));
            continue;
        }
        match k.as_str() {
            "$patch" => continue,
            "$retainKeys" => {
                retain = Some(v.as_array().ok_or_else(|| PatchError::BadRequest("$retainKeys must be a list".into()))?);
                continue;
            }
            d if d.starts_with('$') => return Err(PatchError::BadRequest(format!("unknown patch directive {d:?}"))),
            _ => {}
        }
        if v.is_null() {
            out.remove(k);
            continue;
        }
        path.push(k.clone());
        let merged = match (out.get(k), v) {
            (Some(Value::Object(o)), Value::Object(p)) => merge_map(o, p, kind, path)?.map(Value::Object),
            (_, Value::Object(p)) => merge_map(&Map::new(), p, kind, path)?.map(Value::Object),
            (Some(Value::Array(o)), Value::Array(p)) => Some(Value::Array(merge_list(o, p, kind, path)?)),
            (_, Value::Array(p)) => Some(Value::Array(merge_list(&[], p, kind, path)?)),
            (_, scalar) => Some(scalar.clone()),
        };
        path.pop();
        match merged {
            Some(m) => out.insert(k.clone(), m),
            None => out.remove(k),
        };
    }
    for (field, values) in deletions {
        if let Some(Value::Array(list)) = out.get_mut(&field) {
            list.retain(|x| !values.contains(x));
        }
    }
    for (field, order) in orders {
        path.push(field.clone());
        let key = match strategy(kind, path) {
            ListStrategy::MergeKey(k) => Some(k),
            _ => None,
        };
        path.pop();
        if let Some(Value::Array(list)) = out.get_mut(&field) {
            let rank = |e: &Value| {
                order.iter().position(|o| match key {
                    Some(k) => o.get(k).is_some() && o.get(k) == e.get(k),
                    None => o == e,
                })
            };
            // Listed elements take the given order; the others keep theirs, after them.
            let mut ranked: Vec<(usize, usize, Value)> =
                list.drain(..).enumerate().map(|(i, e)| (rank(&e).unwrap_or(usize::MAX), i, e)).collect();
            ranked.sort_by_key(|(r, i, _)| (*r, *i));
            list.extend(ranked.into_iter().map(|(_, _, e)| e));
        }
    }
    if let Some(keep) = retain {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        out.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(Some(out))
}

fn merge_list(
    orig: &[Value],
    patch: &[Value],
    kind: BuiltinKind,
    path: &mut Vec<String>,
) -> Result<Vec<Value>, PatchError> {
    if patch.iter().any(|e| e.get("$patch").and_then(Value::as_str) == Some("replace")) {
        return Ok(patch.iter().filter(|e| e.get("$patch").is_none()).map(strip).collect());
    }
    match strategy(kind, path) {
        ListStrategy::Replace => Ok(patch.iter().map(strip).collect()),
        ListStrategy::PrimitiveSet => {
            let mut out = orig.to_vec();
            for v in patch {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Ok(out)
        }
        ListStrategy::MergeKey(key) => {
            let mut out = orig.to_vec();
            for el in patch {
                let Some(obj) = el.as_object() else {
                    return Err(PatchError::BadRequest(format!(
                        "{}: elements must be objects with the merge key {key:?}",
                        path.join(".")
                    )));
                };
                let Some(kv) = obj.get(key) else {
                    return Err(PatchError::BadRequest(format!(
                        "map: {el} does not contain declared merge key: {key}"
                    )));
                };
                let found = out.iter().position(|o| o.get(key) == Some(kv));
                if obj.get("$patch").and_then(Value::as_str) == Some("delete") {
                    if let Some(i) = found {
                        out.remove(i);
                    }
                    continue;
                }
                match found {
                    Some(i) => {
                        let merged = merge_map(out[i].as_object().unwrap_or(&Map::new()), obj, kind, path)?;
                        match merged {
                            Some(m) => out[i] = Value::Object(m),
                            None => {
                                out.remove(i);
                            }
                        }
                    }
                    None => {
                        if let Some(m) = merge_map(&Map::new(), obj, kind, path)? {
                            out.push(Value::Object(m));
                        }
                    }
                }
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sts() -> BuiltinKind {
        builtin_kind("apps", "StatefulSet").unwrap()
    }

    fn sample() -> Value {
        json!({
            "metadata": {"name": "web", "finalizers": ["a"], "labels": {"app": "web"}},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "ports": [{"containerPort": 80}]},
                {"name": "sidecar", "image": "side:1"},
            ], "tolerations": [{"key": "x"}]}}},
        })
    }

    #[test]
    fn the_blogs_patch_merges_maps() {
        let out =
            apply_strategic_merge_patch(&sample(), &json!({"spec": {"ordinals": {"start": 5}, "replicas": 1}}), sts())
                .unwrap();
        assert_eq!(out["spec"]["ordinals"]["start"], 5);
        assert_eq!(out["spec"]["replicas"], 1);
        assert_eq!(out["spec"]["template"], sample()["spec"]["template"]);
    }

    #[test]
    fn containers_merge_by_name_and_keep_the_ones_not_patched() {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}});
        let out = apply_strategic_merge_patch(&sample(), &patch, sts()).unwrap();
        let cs = out["spec"]["template"]["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 2);
        assert_eq!((cs[0]["image"].as_str(), cs[1]["name"].as_str()), (Some("app:2"), Some("sidecar")));
        assert_eq!(cs[0]["env"].as_array().unwrap().len(), 2, "untouched fields of a merged element stay");
    }

    #[test]
    fn kubectl_apply_three_way_directives() {
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
            "containers": [{"name": "app", "image": "app:3",
                            "$setElementOrder/env": [{"name": "A"}],
                            "env": [{"$patch": "delete", "name": "B"}]}],
        }}}});
        let out = apply_strategic_merge_patch(&sample(), &patch, sts()).unwrap();
        let cs = out["spec"]["template"]["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs[0]["name"], "sidecar", "setElementOrder reorders");
        assert_eq!(cs[1]["image"], "app:3");
        assert_eq!(cs[1]["env"], json!([{"name": "A", "value": "1"}]), "$patch: delete removes by key");
        assert!(!out.to_string().contains('$'), "directives never reach the object");
    }

    #[test]
    fn finalizers_union_lists_without_keys_replace_and_primitive_deletion() {
        let patch = json!({"metadata": {"finalizers": ["b", "a"]}, "spec": {"template": {"spec": {"tolerations": [{"key": "y"}]}}}});
        let out = apply_strategic_merge_patch(&sample(), &patch, sts()).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(out["spec"]["template"]["spec"]["tolerations"], json!([{"key": "y"}]));
        let out = apply_strategic_merge_patch(
            &out,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
            sts(),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn replace_and_retain_keys_and_null() {
        let out = apply_strategic_merge_patch(
            &sample(),
            &json!({"metadata": {"labels": {"$patch": "replace", "tier": "x"}}}),
            sts(),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"tier": "x"}));
        let out = apply_strategic_merge_patch(
            &sample(),
            &json!({"spec": {"$retainKeys": ["replicas"], "replicas": 4}}),
            sts(),
        )
        .unwrap();
        assert_eq!(out["spec"], json!({"replicas": 4}));
        let out = apply_strategic_merge_patch(&sample(), &json!({"metadata": {"labels": null}}), sts()).unwrap();
        assert!(out["metadata"].get("labels").is_none());
    }

    #[test]
    fn service_ports_merge_by_port_and_container_ports_by_container_port() {
        let svc = json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}});
        let out = apply_strategic_merge_patch(
            &svc,
            &json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}}),
            builtin_kind("", "Service").unwrap(),
        )
        .unwrap();
        assert_eq!(out["spec"]["ports"].as_array().unwrap().len(), 2);
        assert_eq!(out["spec"]["ports"][0]["targetPort"], 8080);
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "ports": [{"containerPort": 81}]}]}}}});
        let out = apply_strategic_merge_patch(&sample(), &patch, sts()).unwrap();
        assert_eq!(out["spec"]["template"]["spec"]["containers"][0]["ports"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn bad_patches_are_refused() {
        assert!(matches!(
            apply_strategic_merge_patch(&sample(), &json!({"$frob": 1}), sts()),
            Err(PatchError::BadRequest(_))
        ));
        let no_key = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        assert!(
            matches!(apply_strategic_merge_patch(&sample(), &no_key, sts()), Err(PatchError::BadRequest(m)) if m.contains("merge key"))
        );
        assert!(builtin_kind("example.com", "Widget").is_none());
    }
}
