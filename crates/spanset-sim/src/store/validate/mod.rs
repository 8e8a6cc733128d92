//! Validation of the kinds the simulator serves, worded as the apiserver words it, so kubectl
//! prints `The StatefulSet "web" is invalid: spec.replicas: Invalid value: -1: must be greater
//! than or equal to 0` exactly as against a real cluster. Checks run in the apiserver's order
//! (object meta, then spec), because several errors are printed as one bracketed list.

mod meta;
mod policy;
mod services;
mod shape;
mod storage;
pub mod syntax;
mod workloads;

use serde_json::Value;
pub use shape::check_shape;

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
    /// A value of the wrong type (printed as `Invalid value`, reason `FieldValueTypeInvalid`).
    TypeInvalid,
}

/// One field error; `Display` gives the apiserver's text, e.g. `spec.replicas: Invalid value:
/// -1: must be greater than or equal to 0`, and `cause_reason()` the
/// `Status.details.causes[].reason`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Dotted path of the field.
    pub field: String,
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// The offending value; shown only for the kinds whose message carries it.
    pub value: Option<Value>,
    /// The explanation.
    pub detail: String,
}

impl FieldError {
    /// An error of any kind, for the few the other constructors do not cover.
    pub fn new(field: &str, kind: FieldErrorKind, value: Option<Value>, detail: impl Into<String>) -> Self {
        Self { field: field.to_string(), kind, value, detail: detail.into() }
    }

    /// An `Invalid value` error.
    pub fn invalid(field: &str, value: Value, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Invalid, Some(value), detail)
    }

    /// A `Required value` error.
    pub fn required(field: &str, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Required, None, detail)
    }

    /// A `Forbidden` error.
    pub fn forbidden(field: &str, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Forbidden, None, detail)
    }

    /// An `Unsupported value` error listing the supported values in the given order.
    pub fn not_supported(field: &str, value: Value, supported: &[&str]) -> Self {
        let list = supported.iter().map(|s| syntax::go_quote(s)).collect::<Vec<_>>().join(", ");
        Self::new(field, FieldErrorKind::NotSupported, Some(value), format!("supported values: {list}"))
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
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
        }
    }
}

/// Renders a bad value as the apiserver does (`ErrorBody`): strings `%q`, scalars plain, string
/// maps as Go's `%#v` (`map[string]string{"app":"web"}`), anything else as compact JSON.
fn render(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::String(s) => syntax::go_quote(s),
        // A `[]string`, as `%#v` prints it (a Service's `clusterIPs`).
        Value::Array(items) if items.iter().all(Value::is_string) => {
            let quoted: Vec<String> = items.iter().map(render).collect();
            format!("[]string{{{}}}", quoted.join(", "))
        }
        Value::Object(m) if m.values().all(Value::is_string) => {
            let mut pairs: Vec<_> = m.iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(b.0));
            let body = pairs.iter().map(|(k, v)| format!("{}:{}", syntax::go_quote(k), render(v))).collect::<Vec<_>>();
            format!("map[string]string{{{}}}", body.join(", "))
        }
        other => other.to_string(),
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => "Invalid value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
        };
        write!(f, "{}: {kind}", self.field)?;
        // Required, Forbidden and TooLong never print the value, whatever was recorded.
        let shows_value =
            !matches!(self.kind, FieldErrorKind::Required | FieldErrorKind::Forbidden | FieldErrorKind::TooLong);
        if let (true, Some(v)) = (shows_value, &self.value) {
            write!(f, ": {}", render(v))?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// `<Kind>.<group> "<name>" is invalid: <errors>` — one error plain, several as `[e1, e2]`,
/// core group without the dot.
pub fn invalid_message(kind: &str, group: &str, name: &str, errs: &[FieldError]) -> String {
    let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
    let body = match errs {
        [one] => one.to_string(),
        many => format!("[{}]", many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    };
    format!("{qualified} \"{name}\" is invalid: {body}")
}

/// Checks an object name for a resource: DNS-1123 subdomain for most kinds, DNS-1123 label for
/// namespaces and (since 1.30) StatefulSets, DNS-1035 label for services.
pub fn validate_name(resource: &str, name: &str) -> Vec<FieldError> {
    meta::name_messages(resource, name, false)
        .into_iter()
        .map(|msg| FieldError::invalid("metadata.name", Value::String(name.to_string()), msg))
        .collect()
}

/// Validates a new object of a resource (after defaulting, as the apiserver does).
pub fn validate_create(group: &str, resource: &str, obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(resource, obj);
    match (group, resource) {
        ("apps", "statefulsets") => workloads::validate_statefulset_spec(obj, &mut errs),
        ("", "pods") => {
            workloads::validate_pod_spec(obj.get("spec"), "spec", &mut errs);
            workloads::validate_pod_create(obj, &mut errs);
        }
        ("", "persistentvolumeclaims") => storage::validate_pvc_spec(obj, &mut errs),
        ("policy", "poddisruptionbudgets") => policy::validate_spec(obj, &mut errs),
        _ => admission_kinds(group, resource, obj, &mut errs),
    }
    errs
}

/// The admission policy kinds, checked by [`crate::store::admission::check`].
fn admission_kinds(group: &str, resource: &str, obj: &Value, errs: &mut Vec<FieldError>) {
    use crate::store::admission::{BINDINGS, GROUP, POLICIES, check};
    match (group, resource) {
        (GROUP, POLICIES) => check::validate_policy(obj, errs),
        (GROUP, BINDINGS) => check::validate_binding(obj, errs),
        _ => {}
    }
}

/// Validates an update of a resource from `old` to `new`: immutable metadata, the new object's
/// own validity, then the kind's immutable-field rules.
pub fn validate_update(group: &str, resource: &str, old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta_update(old, new);
    match (group, resource) {
        ("apps", "statefulsets") => {
            workloads::validate_statefulset_spec(new, &mut errs);
            workloads::validate_statefulset_update(old, new, &mut errs);
        }
        ("", "pods") => workloads::validate_pod_update(old, new, &mut errs),
        ("", "persistentvolumeclaims") => storage::validate_pvc_update(old, new, &mut errs),
        ("", "services") => services::validate_service_update(old, new, &mut errs),
        ("policy", "poddisruptionbudgets") => {
            policy::validate_spec(new, &mut errs);
            policy::validate_status(new, &mut errs);
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            // A binding's role is fixed: what it grants is judged (escalation prevention) once,
            // when it is created; to bind another role, a new binding is made.
            if old.get("roleRef") != new.get("roleRef") {
                let value = new.get("roleRef").cloned().unwrap_or(Value::Null);
                errs.push(FieldError::invalid("roleRef", value, "cannot change roleRef"));
            }
        }
        _ => admission_kinds(group, resource, new, &mut errs),
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn messages_are_joined_as_the_apiserver_joins_them() {
        let one = [FieldError::invalid("spec.replicas", json!(-1), "must be greater than or equal to 0")];
        assert_eq!(
            invalid_message("StatefulSet", "apps", "web", &one),
            r#"StatefulSet.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#
        );
        let two = [FieldError::required("spec.containers", ""), FieldError::forbidden("spec", "no")];
        assert_eq!(
            invalid_message("Pod", "", "p", &two),
            r#"Pod "p" is invalid: [spec.containers: Required value, spec: Forbidden: no]"#
        );
        assert_eq!(two[1].cause_reason(), "FieldValueForbidden");
        assert_eq!(one[0].cause_reason(), "FieldValueInvalid");
    }

    #[test]
    fn values_render_like_go_and_are_hidden_where_go_hides_them() {
        let map = FieldError::invalid("l", json!({"b": "2", "a": "1"}), "x");
        assert_eq!(map.to_string(), r#"l: Invalid value: map[string]string{"a":"1", "b":"2"}: x"#);
        let hidden = FieldError::new("spec", FieldErrorKind::Forbidden, Some(json!("v")), "nope");
        assert_eq!(hidden.to_string(), "spec: Forbidden: nope");
        let ns = FieldError::not_supported("p", json!("X"), &["Retain", "Delete"]);
        assert_eq!(ns.to_string(), r#"p: Unsupported value: "X": supported values: "Retain", "Delete""#);
        assert_eq!(ns.cause_reason(), "FieldValueNotSupported");
        assert_eq!(
            FieldError::new("a", FieldErrorKind::TooLong, None, "may not be more than 5 bytes").to_string(),
            "a: Too long: may not be more than 5 bytes"
        );
    }

    #[test]
    fn names_must_be_dns_subdomains_or_labels_per_resource() {
        let e = validate_name("pods", "Bad_Name");
        assert_eq!(
            e[0].to_string(),
            r#"metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#
        );
        assert!(validate_name("pods", "web-0.x").is_empty());
        assert!(validate_name("namespaces", "a.b")[0].detail.starts_with("a lowercase RFC 1123 label"));
        assert!(validate_name("statefulsets", "a.b").is_empty(), "StatefulSet names are subdomains");
        assert!(validate_name("statefulsets", "A")[0].detail.starts_with("a lowercase RFC 1123 subdomain"));
        assert!(validate_name("services", "1web")[0].detail.starts_with("a DNS-1035 label"));
        assert_eq!(validate_name("pods", &"a".repeat(254))[0].detail, "must be no more than 253 characters");
    }
}
