//! Object metadata rules shared by every kind (`ValidateObjectMeta`, `ValidateObjectMetaUpdate`):
//! name or generateName, label syntax, and the fields that never change after creation.

use serde_json::{Value, json};

use super::{FieldError, syntax};

/// The syntax messages for a name of `resource`; `prefix` relaxes a trailing dash, as for
/// `generateName`.
pub(super) fn name_messages(resource: &str, name: &str, prefix: bool) -> Vec<String> {
    let name = if prefix { name.strip_suffix('-').unwrap_or(name) } else { name };
    match resource {
        // StatefulSet names stay DNS-1123 subdomains: a move to labels in newer apiservers
        // could not be confirmed for 1.27–1.33.
        "namespaces" => syntax::dns1123_label(name),
        "services" => syntax::dns1035_label(name),
        // RBAC names are path segments (`system:discovery`), `ValidatePathSegmentName`.
        "roles" | "clusterroles" | "rolebindings" | "clusterrolebindings" => path_segment(name, prefix),
        _ => syntax::dns1123_subdomain(name),
    }
}

/// `ValidatePathSegmentName`: anything but `.`, `..`, `/` and `%`.
fn path_segment(name: &str, prefix: bool) -> Vec<String> {
    let mut out = Vec::new();
    if !prefix && (name == "." || name == "..") {
        out.push(format!("may not be '{name}'"));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            out.push(format!("may not contain '{bad}'"));
        }
    }
    out
}

/// `ValidateLabels`: one error per message, keys then values, in key order.
pub(super) fn validate_labels(labels: Option<&Value>, field: &str, errs: &mut Vec<FieldError>) {
    let Some(labels) = labels.and_then(Value::as_object) else { return };
    let mut keys: Vec<_> = labels.keys().collect();
    keys.sort();
    for k in keys {
        for msg in syntax::qualified_name(k) {
            errs.push(FieldError::invalid(field, json!(k), msg));
        }
        let v = labels[k].as_str().unwrap_or("");
        for msg in syntax::label_value(v) {
            errs.push(FieldError::invalid(field, json!(v), msg));
        }
    }
}

/// `ValidateObjectMeta` for a new object: a name (or generateName) of the right syntax and
/// valid labels.
pub(super) fn validate_object_meta(resource: &str, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let generate = obj.pointer("/metadata/generateName").and_then(Value::as_str).unwrap_or("");
    if !generate.is_empty() {
        for msg in name_messages(resource, generate, true) {
            errs.push(FieldError::invalid("metadata.generateName", json!(generate), msg));
        }
    }
    if name.is_empty() {
        if generate.is_empty() {
            errs.push(FieldError::required("metadata.name", "name or generateName is required"));
        }
    } else {
        errs.extend(super::validate_name(resource, name));
    }
    validate_labels(obj.pointer("/metadata/labels"), "metadata.labels", &mut errs);
    errs
}

/// `ValidateObjectMetaUpdate`: name, namespace, uid and creationTimestamp are immutable; the new
/// labels must be valid.
pub(super) fn validate_object_meta_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for field in ["name", "namespace", "uid", "creationTimestamp"] {
        let ptr = format!("/metadata/{field}");
        let (was, now) = (old.pointer(&ptr), new.pointer(&ptr));
        if was != now {
            errs.push(FieldError::invalid(
                &format!("metadata.{field}"),
                now.cloned().unwrap_or(json!("")),
                "field is immutable",
            ));
        }
    }
    validate_labels(new.pointer("/metadata/labels"), "metadata.labels", &mut errs);
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_or_generate_name_is_required() {
        let errs = validate_object_meta("pods", &json!({"metadata": {}}));
        assert_eq!(errs[0].to_string(), "metadata.name: Required value: name or generateName is required");
        assert!(validate_object_meta("pods", &json!({"metadata": {"generateName": "web-"}})).is_empty());
        let bad = validate_object_meta("pods", &json!({"metadata": {"generateName": "Web-"}}));
        assert_eq!(bad[0].field, "metadata.generateName");
    }

    #[test]
    fn label_keys_and_values_are_checked_one_message_each() {
        let obj = json!({"metadata": {"name": "c", "labels": {"ok": "fine", "bad key": "x", "k": "bad value!"}}});
        let errs = validate_object_meta("configmaps", &obj);
        assert_eq!(errs.len(), 2);
        assert!(errs.iter().all(|e| e.field == "metadata.labels"));
        assert!(
            errs[0].to_string().starts_with(r#"metadata.labels: Invalid value: "bad key": name part must consist"#)
        );
        assert!(
            errs[1].to_string().starts_with(r#"metadata.labels: Invalid value: "bad value!": a valid label must be"#)
        );
    }

    #[test]
    fn identity_fields_are_immutable() {
        let old = json!({"metadata": {"name": "a", "namespace": "ns", "uid": "1"}});
        let new = json!({"metadata": {"name": "a", "namespace": "ns", "uid": "2"}});
        let errs = validate_object_meta_update(&old, &new);
        assert_eq!(errs[0].to_string(), r#"metadata.uid: Invalid value: "2": field is immutable"#);
        assert!(validate_object_meta_update(&old, &old).is_empty());
    }
}
