//! Validation of ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding objects as
//! the apiserver does it on create and update: required fields, enumerations, and every CEL
//! expression compiled (a policy that cannot compile is refused, naming the field, instead of
//! failing on every request later).

use serde_json::Value;

use super::{cel, reason_code};
use crate::store::validate::{FieldError, FieldErrorKind};

fn err(field: &str, kind: FieldErrorKind, value: Option<Value>, detail: impl Into<String>) -> FieldError {
    FieldError { field: field.to_string(), kind, value, detail: detail.into() }
}

fn required(field: &str, detail: &str) -> FieldError {
    err(field, FieldErrorKind::Required, None, detail)
}

fn not_supported(field: &str, value: &Value, supported: &[&str]) -> FieldError {
    let list = supported.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ");
    err(field, FieldErrorKind::NotSupported, Some(value.clone()), format!("supported values: {list}"))
}

fn items<'a>(spec: &'a Value, key: &str) -> &'a [Value] {
    spec.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

/// An expression field: present and compiling.
fn expression(field: &str, v: Option<&Value>, errs: &mut Vec<FieldError>) {
    match v.and_then(Value::as_str).filter(|s| !s.trim().is_empty()) {
        None => errs.push(required(field, "")),
        Some(src) => {
            if let Err(e) = cel::compile(src) {
                errs.push(err(
                    field,
                    FieldErrorKind::Invalid,
                    Some(Value::String(src.into())),
                    format!("compilation failed: {e}"),
                ));
            }
        }
    }
}

fn rules(field: &str, list: &[Value], errs: &mut Vec<FieldError>) {
    for (i, r) in list.iter().enumerate() {
        for key in ["apiGroups", "apiVersions", "operations", "resources"] {
            if items(r, key).is_empty() {
                errs.push(required(&format!("{field}[{i}].{key}"), ""));
            }
        }
        for key in ["apiGroups", "apiVersions"] {
            let list = items(r, key);
            if list.len() > 1 && list.iter().any(|v| v == "*") {
                let f = format!("{field}[{i}].{key}");
                errs.push(err(
                    &f,
                    FieldErrorKind::Invalid,
                    Some(Value::Array(list.to_vec())),
                    "if '*' is present, must not specify other values",
                ));
            }
        }
        let resources = items(r, "resources");
        if resources.len() > 1 && resources.iter().any(|v| v == "*/*") {
            let f = format!("{field}[{i}].resources");
            errs.push(err(
                &f,
                FieldErrorKind::Invalid,
                Some(Value::Array(resources.to_vec())),
                "if '*/*' is present, must not specify other resources",
            ));
        }
        for (j, op) in items(r, "operations").iter().enumerate() {
            let ok = matches!(op.as_str(), Some("*" | "CREATE" | "UPDATE" | "DELETE" | "CONNECT"));
            if !ok {
                let f = format!("{field}[{i}].operations[{j}]");
                errs.push(not_supported(&f, op, &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]));
            }
        }
    }
}

/// Checks a ValidatingAdmissionPolicy.
pub fn validate_policy(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    match spec.get("failurePolicy") {
        None | Some(Value::Null) => {}
        Some(v) if matches!(v.as_str(), Some("Fail" | "Ignore")) => {}
        Some(v) => errs.push(not_supported("spec.failurePolicy", v, &["Fail", "Ignore"])),
    }
    let constraints = spec.get("matchConstraints");
    if constraints.and_then(|m| m.get("resourceRules")).and_then(Value::as_array).is_none_or(Vec::is_empty) {
        errs.push(required("spec.matchConstraints.resourceRules", ""));
    }
    if let Some(m) = constraints {
        rules("spec.matchConstraints.resourceRules", items(m, "resourceRules"), errs);
        rules("spec.matchConstraints.excludeResourceRules", items(m, "excludeResourceRules"), errs);
    }
    if let Some(kind) = spec.get("paramKind").filter(|k| !k.is_null()) {
        for key in ["apiVersion", "kind"] {
            if kind.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(required(&format!("spec.paramKind.{key}"), ""));
            }
        }
    }
    if items(&spec, "validations").is_empty() && items(&spec, "auditAnnotations").is_empty() {
        errs.push(required("spec.validations", "validations or auditAnnotations must contain at least one item"));
    }
    for (i, v) in items(&spec, "validations").iter().enumerate() {
        expression(&format!("spec.validations[{i}].expression"), v.get("expression"), errs);
        if let Some(m) = v.get("messageExpression").filter(|m| !m.is_null()) {
            expression(&format!("spec.validations[{i}].messageExpression"), Some(m), errs);
        }
        if let Some(r) = v.get("reason").filter(|r| !r.is_null())
            && r.as_str().and_then(reason_code).is_none()
        {
            errs.push(not_supported(
                &format!("spec.validations[{i}].reason"),
                r,
                &["Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"],
            ));
        }
    }
    for (key, what) in [("matchConditions", "matchConditions"), ("variables", "variables")] {
        for (i, c) in items(&spec, key).iter().enumerate() {
            if c.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(required(&format!("spec.{what}[{i}].name"), ""));
            }
            expression(&format!("spec.{what}[{i}].expression"), c.get("expression"), errs);
        }
    }
}

/// Checks a ValidatingAdmissionPolicyBinding.
pub fn validate_binding(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    if spec.get("policyName").and_then(Value::as_str).is_none_or(str::is_empty) {
        errs.push(required("spec.policyName", ""));
    }
    let actions = items(&spec, "validationActions");
    if actions.is_empty() {
        errs.push(required("spec.validationActions", "at least one validation action is required"));
    }
    for (i, a) in actions.iter().enumerate() {
        if !matches!(a.as_str(), Some("Deny" | "Warn" | "Audit")) {
            errs.push(not_supported(&format!("spec.validationActions[{i}]"), a, &["Audit", "Deny", "Warn"]));
        }
    }
    if let Some(p) = spec.get("paramRef").filter(|p| !p.is_null()) {
        let named = p.get("name").and_then(Value::as_str).is_some_and(|s| !s.is_empty());
        let selected = p.get("selector").is_some_and(|s| !s.is_null());
        if named == selected {
            errs.push(err(
                "spec.paramRef",
                FieldErrorKind::Forbidden,
                None,
                "one of name or selector must be specified",
            ));
        }
        match p.get("parameterNotFoundAction") {
            None | Some(Value::Null) => errs.push(required("spec.paramRef.parameterNotFoundAction", "")),
            Some(v) if matches!(v.as_str(), Some("Allow" | "Deny")) => {}
            Some(v) => errs.push(not_supported("spec.paramRef.parameterNotFoundAction", v, &["Allow", "Deny"])),
        }
    }
    if let Some(m) = spec.get("matchResources").filter(|m| !m.is_null()) {
        rules("spec.matchResources.resourceRules", items(m, "resourceRules"), errs);
        rules("spec.matchResources.excludeResourceRules", items(m, "excludeResourceRules"), errs);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn policy_errors(spec: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_policy(&json!({"spec": spec}), &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_policy_names_each_bad_field() {
        let errs = policy_errors(json!({
            "failurePolicy": "Sometimes",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["PATCH"], "resources": ["statefulsets", "*/*"]}]},
            "validations": [{"expression": "object.spec.replicas <=", "reason": "Teapot"}],
        }));
        assert!(errs.iter().any(|e| e.starts_with("spec.failurePolicy: Unsupported value: \"Sometimes\"")), "{errs:?}");
        assert!(
            errs.iter()
                .any(|e| e
                    .starts_with("spec.matchConstraints.resourceRules[0].operations[0]: Unsupported value: \"PATCH\"")),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.starts_with(
                "spec.validations[0].expression: Invalid value: \"object.spec.replicas <=\": compilation failed"
            )),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.starts_with("spec.validations[0].reason: Unsupported value: \"Teapot\"")),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.starts_with("spec.matchConstraints.resourceRules[0].resources: Invalid value")
                && e.ends_with("if '*/*' is present, must not specify other resources")),
            "{errs:?}"
        );
        assert!(
            policy_errors(json!({}))
                .iter()
                .any(|e| e.starts_with("spec.matchConstraints.resourceRules: Required value"))
        );
    }

    #[test]
    fn a_binding_needs_a_policy_actions_and_one_param_source() {
        let mut errs = Vec::new();
        validate_binding(
            &json!({"spec": {"validationActions": ["Deny", "Shout"], "paramRef": {"name": "p", "selector": {}}}}),
            &mut errs,
        );
        let errs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert!(errs.iter().any(|e| e.starts_with("spec.policyName: Required value")), "{errs:?}");
        assert!(
            errs.iter().any(|e| e.starts_with("spec.validationActions[1]: Unsupported value: \"Shout\"")),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.starts_with("spec.paramRef: Forbidden")), "{errs:?}");
        assert!(
            errs.iter().any(|e| e.starts_with("spec.paramRef.parameterNotFoundAction: Required value")),
            "{errs:?}"
        );
    }
}
