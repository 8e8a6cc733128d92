//! Validation of the kinds the simulator serves, worded as the apiserver words it, so kubectl
//! prints `The StatefulSet "web" is invalid: spec.replicas: Invalid value: -1: must be greater
//! than or equal to 0` exactly as against a real cluster.

pub mod syntax;

use serde_json::{Value, json};

/// The kind of a field error (`field.ErrorType` in apimachinery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// A required field is missing.
    Required,
    /// A value is malformed or out of range.
    Invalid,
    /// A change or value is not allowed.
    Forbidden,
    /// A value appears twice.
    Duplicate,
    /// A value is not one of the supported ones.
    NotSupported,
    /// A value is too long.
    TooLong,
    /// Too many items.
    TooMany,
}

/// One field error; `Display` gives the apiserver's text and `cause_reason()` the
/// `Status.details.causes[].reason`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Dotted path of the field.
    pub field: String,
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// The offending value, when the message shows it.
    pub value: Option<Value>,
    /// The explanation.
    pub detail: String,
}

impl FieldError {
    fn new(field: &str, kind: FieldErrorKind, value: Option<Value>, detail: impl Into<String>) -> Self {
        Self { field: field.to_string(), kind, value, detail: detail.into() }
    }

    /// `Status.details.causes[].reason` for this error.
    pub fn cause_reason(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
        }
    }
}

/// Renders a value as Go's `%#v`-ish form the apiserver uses: strings quoted, numbers plain.
fn render(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid => "Invalid value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
        };
        write!(f, "{}: {kind}", self.field)?;
        if let Some(v) = &self.value {
            write!(f, ": {}", render(v))?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// `<Kind>.<group> "<name>" is invalid: <errors>`: one error plain, several as `[e1, e2]`.
pub fn invalid_message(kind: &str, group: &str, name: &str, errs: &[FieldError]) -> String {
    let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
    let body = match errs {
        [one] => one.to_string(),
        many => format!("[{}]", many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    };
    format!("{qualified} \"{name}\" is invalid: {body}")
}

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

fn is_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric())
}

fn is_qualified_name(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    !name.is_empty() && is_label_value(name) && prefix.is_none_or(is_dns_subdomain)
}

/// Resources whose names must be DNS labels rather than subdomains.
fn needs_dns_label(resource: &str) -> bool {
    matches!(resource, "namespaces" | "services")
}

/// Checks an object name for a resource.
pub fn validate_name(resource: &str, name: &str) -> Vec<FieldError> {
    let (ok, msg) = if needs_dns_label(resource) {
        (is_dns_label(name), DNS1123_LABEL_MSG)
    } else {
        (is_dns_subdomain(name), DNS1123_SUBDOMAIN_MSG)
    };
    if ok { vec![] } else { vec![FieldError::new("metadata.name", FieldErrorKind::Invalid, Some(json!(name)), msg)] }
}

fn validate_labels(obj: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(labels) = obj.pointer(path).and_then(Value::as_object) else { return };
    let field = path.trim_start_matches('/').replace('/', ".");
    for (k, v) in labels {
        if !is_qualified_name(k) {
            errs.push(FieldError::new(&field, FieldErrorKind::Invalid, Some(json!(k)), QUALIFIED_NAME_MSG));
        }
        match v.as_str() {
            Some(s) if is_label_value(s) => {}
            _ => errs.push(FieldError::new(&field, FieldErrorKind::Invalid, Some(v.clone()), LABEL_VALUE_MSG)),
        }
    }
}

fn non_negative(obj: &Value, ptr: &str, errs: &mut Vec<FieldError>) {
    if let Some(v) = obj.pointer(ptr) {
        let field = ptr.trim_start_matches('/').replace('/', ".");
        match v.as_i64() {
            Some(n) if n >= 0 => {}
            Some(_) => errs.push(FieldError::new(
                &field,
                FieldErrorKind::Invalid,
                Some(v.clone()),
                "must be greater than or equal to 0",
            )),
            None => errs.push(FieldError::new(&field, FieldErrorKind::Invalid, Some(v.clone()), "must be an integer")),
        }
    }
}

fn validate_containers(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match spec.get("containers").and_then(Value::as_array) {
        None => errs.push(FieldError::new(&format!("{path}.containers"), FieldErrorKind::Required, None, "")),
        Some(cs) if cs.is_empty() => {
            errs.push(FieldError::new(&format!("{path}.containers"), FieldErrorKind::Required, None, ""))
        }
        Some(cs) => {
            let mut seen = std::collections::HashSet::new();
            for (i, c) in cs.iter().enumerate() {
                let at = format!("{path}.containers[{i}]");
                match c.get("name").and_then(Value::as_str) {
                    None | Some("") => {
                        errs.push(FieldError::new(&format!("{at}.name"), FieldErrorKind::Required, None, ""))
                    }
                    Some(n) if !is_dns_label(n) => errs.push(FieldError::new(
                        &format!("{at}.name"),
                        FieldErrorKind::Invalid,
                        Some(json!(n)),
                        DNS1123_LABEL_MSG,
                    )),
                    Some(n) if !seen.insert(n.to_string()) => {
                        errs.push(FieldError::new(&format!("{at}.name"), FieldErrorKind::Duplicate, Some(json!(n)), ""))
                    }
                    Some(_) => {}
                }
                if c.get("image").and_then(Value::as_str).is_none_or(str::is_empty) {
                    errs.push(FieldError::new(&format!("{at}.image"), FieldErrorKind::Required, None, ""));
                }
            }
        }
    }
}

fn validate_statefulset_spec(obj: &Value, errs: &mut Vec<FieldError>) {
    non_negative(obj, "/spec/replicas", errs);
    non_negative(obj, "/spec/ordinals/start", errs);
    non_negative(obj, "/spec/minReadySeconds", errs);
    non_negative(obj, "/spec/revisionHistoryLimit", errs);
    match obj.pointer("/spec/podManagementPolicy").and_then(Value::as_str) {
        None | Some("OrderedReady" | "Parallel") => {}
        Some(other) => errs.push(FieldError::new(
            "spec.podManagementPolicy",
            FieldErrorKind::NotSupported,
            Some(json!(other)),
            "supported values: \"OrderedReady\", \"Parallel\"",
        )),
    }
    match obj.pointer("/spec/updateStrategy/type").and_then(Value::as_str) {
        None | Some("RollingUpdate" | "OnDelete") => {}
        Some(other) => errs.push(FieldError::new(
            "spec.updateStrategy.type",
            FieldErrorKind::NotSupported,
            Some(json!(other)),
            "supported values: \"OnDelete\", \"RollingUpdate\"",
        )),
    }
    non_negative(obj, "/spec/updateStrategy/rollingUpdate/partition", errs);
    for policy in ["whenDeleted", "whenScaled"] {
        match obj.pointer(&format!("/spec/persistentVolumeClaimRetentionPolicy/{policy}")).and_then(Value::as_str) {
            None | Some("Retain" | "Delete") => {}
            Some(other) => errs.push(FieldError::new(
                &format!("spec.persistentVolumeClaimRetentionPolicy.{policy}"),
                FieldErrorKind::NotSupported,
                Some(json!(other)),
                "supported values: \"Retain\", \"Delete\"",
            )),
        }
    }
    let selector = obj.pointer("/spec/selector");
    let empty_selector = selector.is_none_or(|s| {
        s.get("matchLabels").and_then(Value::as_object).is_none_or(|m| m.is_empty())
            && s.get("matchExpressions").and_then(Value::as_array).is_none_or(|e| e.is_empty())
    });
    match selector {
        None => errs.push(FieldError::new("spec.selector", FieldErrorKind::Required, None, "")),
        Some(sel) if empty_selector => errs.push(FieldError::new(
            "spec.selector",
            FieldErrorKind::Invalid,
            Some(sel.clone()),
            "empty selector is invalid for statefulset",
        )),
        Some(sel) => {
            if let Ok(sel) = super::selector::LabelSelector::from_api(sel) {
                let labels = obj.pointer("/spec/template/metadata/labels").and_then(Value::as_object);
                if !sel.matches(labels) {
                    errs.push(FieldError::new(
                        "spec.template.metadata.labels",
                        FieldErrorKind::Invalid,
                        Some(labels.map(|l| Value::Object(l.clone())).unwrap_or(json!({}))),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        }
    }
    validate_labels(obj, "/spec/template/metadata/labels", errs);
    match obj.pointer("/spec/template/spec") {
        Some(spec) => validate_containers(spec, "spec.template.spec", errs),
        None => errs.push(FieldError::new("spec.template.spec.containers", FieldErrorKind::Required, None, "")),
    }
}

fn validate_pvc_spec(obj: &Value, errs: &mut Vec<FieldError>) {
    if obj.pointer("/spec/accessModes").and_then(Value::as_array).is_none_or(|a| a.is_empty()) {
        errs.push(FieldError::new(
            "spec.accessModes",
            FieldErrorKind::Required,
            None,
            "at least 1 access mode is required",
        ));
    }
    if obj.pointer("/spec/resources/requests/storage").is_none() {
        errs.push(FieldError::new("spec.resources[storage]", FieldErrorKind::Required, None, ""));
    }
}

/// Fields of built-in kinds that must be JSON objects (or arrays) when present, as the
/// apiserver's decoder requires; the simulated controllers rely on these shapes.
const SHAPES: &[(&str, &str, &str, bool)] = &[
    ("", "", "/metadata", true),
    ("", "", "/spec", true),
    ("", "", "/status", true),
    ("", "pods", "/spec/containers", false),
    ("", "pods", "/spec/volumes", false),
    ("", "pods", "/status/conditions", false),
    ("", "pods", "/status/containerStatuses", false),
    ("apps", "statefulsets", "/spec/selector", true),
    ("apps", "statefulsets", "/spec/ordinals", true),
    ("apps", "statefulsets", "/spec/template", true),
    ("apps", "statefulsets", "/spec/template/metadata", true),
    ("apps", "statefulsets", "/spec/template/spec", true),
    ("apps", "statefulsets", "/spec/volumeClaimTemplates", false),
    ("", "persistentvolumes", "/spec/claimRef", true),
];

/// Checks that the structural fields of a built-in kind have the right JSON type; the error is
/// the decoder's kind of message (HTTP 400), naming the field.
pub fn check_shape(group: &str, resource: &str, kind: &str, obj: &Value) -> Result<(), String> {
    for (g, r, ptr, object) in SHAPES {
        if !(r.is_empty() || (*g == group && *r == resource)) {
            continue;
        }
        let Some(v) = obj.pointer(ptr) else { continue };
        let ok = v.is_null() || if *object { v.is_object() } else { v.is_array() };
        if !ok {
            let field = ptr.trim_start_matches('/').replace('/', ".");
            let want = if *object { "an object" } else { "a list" };
            return Err(format!(
                "{kind} in version \"v1\" cannot be handled as a {kind}: {field} must be {want}, not {v}"
            ));
        }
    }
    Ok(())
}

/// Validates a new object of a resource.
pub fn validate_create(group: &str, resource: &str, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    errs.extend(validate_name(resource, name));
    validate_labels(obj, "/metadata/labels", &mut errs);
    match (group, resource) {
        ("apps", "statefulsets") => validate_statefulset_spec(obj, &mut errs),
        ("", "pods") => match obj.get("spec") {
            Some(spec) => validate_containers(spec, "spec", &mut errs),
            None => errs.push(FieldError::new("spec.containers", FieldErrorKind::Required, None, "")),
        },
        ("", "persistentvolumeclaims") => validate_pvc_spec(obj, &mut errs),
        _ => {}
    }
    errs
}

/// The StatefulSet spec fields that may change after creation.
const STATEFULSET_MUTABLE: &[&str] = &[
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

fn spec_without(obj: &Value, keep_out: &[&str]) -> Value {
    let mut spec = obj.get("spec").cloned().unwrap_or(json!({}));
    if let Some(m) = spec.as_object_mut() {
        for k in keep_out {
            m.remove(*k);
        }
    }
    spec
}

/// Validates an update of a resource from `old` to `new`.
pub fn validate_update(group: &str, resource: &str, old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_labels(new, "/metadata/labels", &mut errs);
    match (group, resource) {
        ("apps", "statefulsets") => {
            if spec_without(old, STATEFULSET_MUTABLE) != spec_without(new, STATEFULSET_MUTABLE) {
                errs.push(FieldError::new(
                    "spec",
                    FieldErrorKind::Forbidden,
                    None,
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                ));
            }
            validate_statefulset_spec(new, &mut errs);
        }
        ("", "persistentvolumeclaims") => {
            // Binding may fill volumeName and storageClassName once; requests may change.
            let mut keep_out = vec!["resources"];
            if old.pointer("/spec/volumeName").and_then(Value::as_str).unwrap_or("").is_empty() {
                keep_out.push("volumeName");
            }
            if old.pointer("/spec/storageClassName").is_none() {
                keep_out.push("storageClassName");
            }
            if spec_without(old, &keep_out) != spec_without(new, &keep_out) {
                errs.push(FieldError::new(
                    "spec",
                    FieldErrorKind::Forbidden,
                    None,
                    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
                ));
            }
        }
        _ => {}
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sts(replicas: i64) -> Value {
        json!({"metadata": {"name": "web"}, "spec": {"replicas": replicas, "serviceName": "web",
               "selector": {"matchLabels": {"app": "web"}},
               "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    }

    #[test]
    fn negative_replicas_read_as_the_apiserver_words_them() {
        let errs = validate_create("apps", "statefulsets", &sts(-1));
        assert_eq!(
            invalid_message("StatefulSet", "apps", "web", &errs),
            r#"StatefulSet.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#
        );
        assert_eq!(errs[0].cause_reason(), "FieldValueInvalid");
        assert!(validate_create("apps", "statefulsets", &sts(3)).is_empty());
    }

    #[test]
    fn names_must_be_dns_subdomains_or_labels() {
        let e = validate_name("pods", "Bad_Name");
        assert_eq!(e[0].to_string(), format!("metadata.name: Invalid value: \"Bad_Name\": {DNS1123_SUBDOMAIN_MSG}"));
        assert!(validate_name("pods", "web-0.x").is_empty());
        assert!(!validate_name("namespaces", "a.b").is_empty(), "namespaces are DNS labels");
        assert!(!validate_name("pods", &"a".repeat(254)).is_empty());
    }

    #[test]
    fn statefulset_updates_may_change_only_the_allowed_fields() {
        let mut changed = sts(3);
        changed["spec"]["serviceName"] = json!("other");
        let errs = validate_update("apps", "statefulsets", &sts(3), &changed);
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].to_string().starts_with(
                "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals'"
            )
        );
        let mut moved = sts(1);
        moved["spec"]["ordinals"] = json!({"start": 5});
        assert!(validate_update("apps", "statefulsets", &sts(3), &moved).is_empty());
    }

    #[test]
    fn selector_must_match_template_labels_and_several_errors_are_bracketed() {
        let mut bad = sts(-2);
        bad["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
        let errs = validate_create("apps", "statefulsets", &bad);
        let msg = invalid_message("StatefulSet", "apps", "web", &errs);
        assert!(msg.contains(": [spec.replicas: Invalid value: -2"), "{msg}");
        assert!(msg.contains("`selector` does not match template `labels`"), "{msg}");
        assert!(msg.ends_with(']'));
    }

    #[test]
    fn pods_need_containers_with_images_and_pvcs_need_modes_and_size() {
        let errs =
            validate_create("", "pods", &json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}));
        assert_eq!(
            invalid_message("Pod", "", "p", &errs),
            r#"Pod "p" is invalid: spec.containers[0].image: Required value"#
        );
        let errs = validate_create("", "persistentvolumeclaims", &json!({"metadata": {"name": "d"}, "spec": {}}));
        assert_eq!(errs.len(), 2);
        let mut bound = json!({"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        let before = bound.clone();
        bound["spec"]["volumeName"] = json!("pv-1");
        assert!(validate_update("", "persistentvolumeclaims", &before, &bound).is_empty(), "binding fills volumeName");
        let mut changed = bound.clone();
        changed["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        assert!(!validate_update("", "persistentvolumeclaims", &bound, &changed).is_empty());
    }

    #[test]
    fn structural_fields_must_have_their_json_type() {
        assert!(
            check_shape("", "pods", "Pod", &json!({"status": "x"})).unwrap_err().contains("status must be an object")
        );
        assert!(
            check_shape("apps", "statefulsets", "StatefulSet", &json!({"spec": {"template": {"metadata": "x"}}}))
                .is_err()
        );
        assert!(
            check_shape("", "pods", "Pod", &json!({"spec": {"containers": {}}}))
                .unwrap_err()
                .contains("must be a list")
        );
        assert!(check_shape("", "configmaps", "ConfigMap", &json!({"data": {"a": "b"}})).is_ok());
        assert!(check_shape("", "pods", "Pod", &json!({"spec": {"containers": []}, "status": null})).is_ok());
    }

    #[test]
    fn label_syntax_is_checked() {
        let errs = validate_create(
            "",
            "configmaps",
            &json!({"metadata": {"name": "c", "labels": {"ok": "fine", "bad key": "x", "k": "bad value!"}}}),
        );
        assert_eq!(errs.len(), 2);
        assert!(errs.iter().all(|e| e.field == "metadata.labels"));
    }
}
