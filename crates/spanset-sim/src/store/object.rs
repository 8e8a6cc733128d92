//! Small accessors over objects held as JSON values, so every layer reads metadata the same way.

use serde_json::{Map, Value, json};

/// A field of `metadata`, if present. A lookup by key, not a JSON pointer: `Value::pointer`
/// allocates twice per token to unescape it, and the sandbox's sweeps read metadata of every
/// object they visit.
fn meta<'a>(obj: &'a Value, field: &str) -> Option<&'a Value> {
    obj.get("metadata")?.get(field)
}

/// `metadata.name`, or `""`.
pub fn name(obj: &Value) -> &str {
    meta(obj, "name").and_then(Value::as_str).unwrap_or("")
}

/// `metadata.namespace`, or `""` for cluster-scoped objects.
pub fn namespace(obj: &Value) -> &str {
    meta(obj, "namespace").and_then(Value::as_str).unwrap_or("")
}

/// Namespace (`""` for cluster-scoped) and name: where storage keeps an object.
pub type ObjectKey = (String, String);

/// The storage key of an object.
pub fn key_of(obj: &Value) -> ObjectKey {
    (namespace(obj).to_string(), name(obj).to_string())
}

/// `metadata.uid`, or `""`.
pub fn uid(obj: &Value) -> &str {
    meta(obj, "uid").and_then(Value::as_str).unwrap_or("")
}

/// `metadata.resourceVersion` as a number (0 when absent or not numeric).
pub fn resource_version(obj: &Value) -> u64 {
    meta(obj, "resourceVersion").and_then(Value::as_str).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Sets `metadata.resourceVersion`.
pub fn set_resource_version(obj: &mut Value, rv: u64) {
    metadata_mut(obj).insert("resourceVersion".into(), Value::String(rv.to_string()));
}

/// `metadata` as a mutable map, created if missing.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let map = obj.as_object_mut().expect("object ensured above");
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut().expect("object ensured above")
}

/// The `(name, image)` of each of `spec.containers` of a pod or pod template (empty strings for
/// what is missing: shapes are checked on write).
pub fn container_images(pod: &Value) -> Vec<(String, String)> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| (c["name"].as_str().unwrap_or("").to_string(), c["image"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// `metadata.labels`, if any.
pub fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    meta(obj, "labels").and_then(Value::as_object)
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj, "finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    meta(obj, "deletionTimestamp").is_some_and(|v| !v.is_null())
}

/// `metadata.ownerReferences`.
pub fn owner_refs(obj: &Value) -> &[Value] {
    meta(obj, "ownerReferences").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

/// The value at a JSON pointer written without escapes (`/spec/claimRef/name`, `/spec/volumes/0`),
/// found without allocating: `Value::pointer` unescapes each token into a new string, which the
/// sandbox's sweeps pay for every field of every object they read. A pointer with an escape
/// (`~0`, `~1`) goes to `Value::pointer`.
pub fn lookup<'a>(obj: &'a Value, ptr: &str) -> Option<&'a Value> {
    if ptr.is_empty() {
        return Some(obj);
    }
    if ptr.contains('~') {
        return obj.pointer(ptr);
    }
    ptr.strip_prefix('/')?.split('/').try_fold(obj, |v, token| match v {
        // An index as RFC 6901 writes it: digits, no sign, no leading zero.
        Value::Array(_) if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) => None,
        Value::Array(items) => items.get(token.parse::<usize>().ok()?),
        _ => v.get(token),
    })
}

/// The string at an unescaped JSON pointer ([`lookup`]), or `""`.
pub fn str_at<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    lookup(obj, ptr).and_then(Value::as_str).unwrap_or("")
}

/// Reads a simple JSONPath such as `.spec.replicas` (dots only, as CRD scale paths use).
pub fn at_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.').split('.').filter(|s| !s.is_empty()).try_fold(obj, |v, seg| v.get(seg))
}

/// Writes a simple JSONPath, creating objects on the way.
pub fn set_path(obj: &mut Value, path: &str, value: Value) {
    let segs: Vec<&str> = path.trim_start_matches('.').split('.').filter(|s| !s.is_empty()).collect();
    let mut cur = obj;
    for (i, seg) in segs.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let map = cur.as_object_mut().expect("object ensured above");
        if i + 1 == segs.len() {
            map.insert(seg.to_string(), value);
            return;
        }
        cur = map.entry(seg.to_string()).or_insert_with(|| json!({}));
    }
}

/// The current time in the apiserver's RFC 3339 seconds format.
pub fn now_rfc3339() -> String {
    format_time(jiff::Timestamp::now())
}

/// Formats a timestamp as `2006-01-02T15:04:05Z`.
pub fn format_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lookup_finds_what_a_json_pointer_finds() {
        let pv = json!({"metadata": {"name": "pv-1", "annotations": {"a/b": "slash", "t~x": "tilde"}},
                        "spec": {"claimRef": {"name": "data-0"}, "values": ["x", {"y": 1}], "": "empty key"}});
        for ptr in [
            "",
            "/metadata/name",
            "/spec/claimRef/name",
            "/spec/claimRef/uid",
            "/spec/values/0",
            "/spec/values/1/y",
            "/spec/values/2",
            "/spec/values/x",
            "/spec/values/01",
            "/spec/values/+1",
            "/spec/",
            "/metadata/annotations/a~1b",
            "/metadata/annotations/t~0x",
            "/metadata/name/deeper",
            "metadata",
        ] {
            assert_eq!(lookup(&pv, ptr), pv.pointer(ptr), "{ptr:?}");
        }
        assert_eq!(str_at(&pv, "/spec/claimRef/name"), "data-0");
        assert_eq!(str_at(&pv, "/spec/values/1/y"), "", "not a string");
        assert_eq!((name(&pv), namespace(&pv), uid(&pv)), ("pv-1", "", ""));
    }
}
