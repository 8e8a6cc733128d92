//! PodDisruptionBudgets (`pkg/apis/policy/validation`), worded as the apiserver words them:
//! at most one of `minAvailable`/`maxUnavailable`, each a non-negative integer or a percentage
//! of at most 100%, a well-formed selector (none is allowed: it selects no pod), a known
//! `unhealthyPodEvictionPolicy`, and non-negative status counters.

use serde_json::{Value, json};

use super::{FieldError, FieldErrorKind, meta, syntax};

/// The supported unhealthy-pod eviction policies, in the (sorted) order the error lists them.
const POLICIES: &[&str] = &["AlwaysAllow", "IfHealthyBudget"];

/// The status counters `ValidatePodDisruptionBudgetStatusUpdate` keeps non-negative (policy/v1).
const COUNTERS: &[&str] = &["disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"];

/// Fake but stable pointers for Go's `%#v` of the spec, which prints the set fields' addresses.
fn go_pointer(ty: &str, set: bool, slot: u32) -> String {
    if set { format!("({ty})(0xc0004a{:04x})", 0x2000 + slot * 0x20) } else { format!("({ty})(nil)") }
}

fn present<'a>(spec: &'a Value, key: &str) -> Option<&'a Value> {
    spec.get(key).filter(|v| !v.is_null())
}

/// `intstr.IntOrString` as `%#v` prints it (an error's value for a string that is no percentage).
fn int_or_string_repr(v: &Value) -> String {
    match v {
        Value::String(s) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}", syntax::go_quote(s)),
        other => format!("intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}", other.as_i64().unwrap_or(0)),
    }
}

/// `ValidatePositiveIntOrPercent` then `IsNotMoreThan100Percent`.
fn int_or_percent(v: &Value, field: &str, errs: &mut Vec<FieldError>) {
    let percent_shape =
        |s: &str| s.len() > 1 && s.ends_with('%') && s[..s.len() - 1].bytes().all(|b| b.is_ascii_digit());
    match v {
        Value::String(s) if !percent_shape(s) => errs.push(FieldError::new(
            field,
            FieldErrorKind::Invalid,
            None,
            format!(
                "{}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                int_or_string_repr(v)
            ),
        )),
        Value::String(s) => {
            if s[..s.len() - 1].parse::<u64>().is_ok_and(|p| p > 100) {
                errs.push(FieldError::new(
                    field,
                    FieldErrorKind::Invalid,
                    None,
                    format!("{}: must not be greater than 100%", int_or_string_repr(v)),
                ));
            }
        }
        other => {
            if other.as_i64().is_some_and(|n| n < 0) {
                errs.push(FieldError::invalid(field, other.clone(), "must be greater than or equal to 0"));
            }
        }
    }
}

/// `ValidateLabelSelector`: match labels as labels, each expression's operator, key and values.
fn label_selector(sel: &Value, path: &str, errs: &mut Vec<FieldError>) {
    meta::validate_labels(sel.get("matchLabels"), &format!("{path}.matchLabels"), errs);
    let exprs = sel.get("matchExpressions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    for (i, e) in exprs.iter().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values: Vec<&str> =
            e.get("values").and_then(Value::as_array).into_iter().flatten().map(|v| v.as_str().unwrap_or("")).collect();
        match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                &format!("{at}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                &format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                errs.push(FieldError::invalid(&format!("{at}.operator"), json!(other), "not a valid selector operator"))
            }
        }
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        for msg in syntax::qualified_name(key) {
            errs.push(FieldError::invalid(&format!("{at}.key"), json!(key), msg));
        }
        for (j, v) in values.iter().enumerate() {
            for msg in syntax::label_value(v) {
                errs.push(FieldError::invalid(&format!("{at}.values[{j}]"), json!(v), msg));
            }
        }
    }
}

/// `ValidatePodDisruptionBudgetSpec`, in its order.
pub(super) fn validate_spec(obj: &Value, errs: &mut Vec<FieldError>) {
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    let (min, max) = (present(spec, "minAvailable"), present(spec, "maxUnavailable"));
    if min.is_some() && max.is_some() {
        // Go prints the spec struct with %#v; the text is carried in the detail.
        let selector = present(spec, "selector").is_some();
        let policy = present(spec, "unhealthyPodEvictionPolicy").is_some();
        errs.push(FieldError::new(
            "spec",
            FieldErrorKind::Invalid,
            None,
            format!(
                "policy.PodDisruptionBudgetSpec{{MinAvailable:{}, Selector:{}, MaxUnavailable:{}, UnhealthyPodEvictionPolicy:{}}}: minAvailable and maxUnavailable cannot be both set",
                go_pointer("*intstr.IntOrString", true, 0),
                go_pointer("*v1.LabelSelector", selector, 1),
                go_pointer("*intstr.IntOrString", true, 2),
                go_pointer("*policy.UnhealthyPodEvictionPolicyType", policy, 3),
            ),
        ));
    }
    if let Some(v) = min {
        int_or_percent(v, "spec.minAvailable", errs);
    }
    if let Some(v) = max {
        int_or_percent(v, "spec.maxUnavailable", errs);
    }
    if let Some(sel) = present(spec, "selector") {
        label_selector(sel, "spec.selector", errs);
    }
    if let Some(p) = present(spec, "unhealthyPodEvictionPolicy") {
        let name = p.as_str().unwrap_or("");
        if !POLICIES.contains(&name) {
            errs.push(FieldError::not_supported("spec.unhealthyPodEvictionPolicy", p.clone(), POLICIES));
        }
    }
}

/// `ValidatePodDisruptionBudgetStatusUpdate` (policy/v1): the counters stay non-negative.
pub(super) fn validate_status(obj: &Value, errs: &mut Vec<FieldError>) {
    for c in COUNTERS {
        if let Some(n) = obj.pointer(&format!("/status/{c}")).and_then(Value::as_i64).filter(|n| *n < 0) {
            errs.push(FieldError::invalid(&format!("status.{c}"), json!(n), "must be greater than or equal to 0"));
        }
    }
}

/// The decoder's check of the int-or-string fields: anything but an integer or a string is
/// refused with 400 before validation, worded as Go's JSON decoder words it.
pub(super) fn check_decodable(obj: &Value) -> Result<(), String> {
    for key in ["minAvailable", "maxUnavailable"] {
        let Some(v) = obj.pointer(&format!("/spec/{key}")) else { continue };
        let what = match v {
            Value::Null | Value::String(_) => continue,
            Value::Number(n) if n.is_i64() && n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => continue,
            Value::Number(n) => format!("number {n}"),
            Value::Bool(_) => "bool".into(),
            Value::Array(_) => "array".into(),
            Value::Object(_) => "object".into(),
        };
        return Err(format!(
            "PodDisruptionBudget in version \"v1\" cannot be handled as a PodDisruptionBudget: json: cannot unmarshal {what} into Go struct field PodDisruptionBudgetSpec.spec.{key} of type int32"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::validate::{invalid_message, validate_create, validate_update};

    fn pdb(spec: Value) -> Value {
        json!({"metadata": {"name": "web"}, "spec": spec})
    }

    fn message(spec: Value) -> String {
        let errs = validate_create("policy", "poddisruptionbudgets", &pdb(spec));
        if errs.is_empty() { String::new() } else { invalid_message("PodDisruptionBudget", "policy", "web", &errs) }
    }

    /// Table of specs and the apiserver's answer ("" for accepted).
    #[test]
    fn specs_are_accepted_or_refused_with_the_apiservers_words() {
        let prefix = r#"PodDisruptionBudget.policy "web" is invalid: "#;
        let cases: &[(Value, &str)] = &[
            (json!({"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}), ""),
            (json!({"maxUnavailable": "50%", "selector": {}}), ""),
            (json!({"minAvailable": "100%"}), ""),
            (json!({"minAvailable": 0, "unhealthyPodEvictionPolicy": "AlwaysAllow"}), ""),
            // Neither field, and no selector: accepted (the budget guards no pod).
            (json!({}), ""),
            (
                json!({"minAvailable": 1, "maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}),
                "spec: Invalid value: policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr.IntOrString)(0xc0004a2000), Selector:(*v1.LabelSelector)(0xc0004a2020), MaxUnavailable:(*intstr.IntOrString)(0xc0004a2040), UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType)(nil)}: minAvailable and maxUnavailable cannot be both set",
            ),
            (json!({"minAvailable": -1}), "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"),
            (
                json!({"maxUnavailable": "50"}),
                r#"spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"50"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"#,
            ),
            (
                json!({"minAvailable": "150%"}),
                r#"spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"150%"}: must not be greater than 100%"#,
            ),
            (
                json!({"minAvailable": 1, "unhealthyPodEvictionPolicy": "Sometimes"}),
                r#"spec.unhealthyPodEvictionPolicy: Unsupported value: "Sometimes": supported values: "AlwaysAllow", "IfHealthyBudget""#,
            ),
            (
                json!({"minAvailable": 1, "selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}),
                "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            ),
            (
                json!({"minAvailable": 1, "selector": {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["a"]}]}}),
                "spec.selector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ),
            (
                json!({"minAvailable": 1, "selector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["a"]}]}}),
                r#"spec.selector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator"#,
            ),
        ];
        for (spec, want) in cases {
            let got = message(spec.clone());
            let want = if want.is_empty() { String::new() } else { format!("{prefix}{want}") };
            assert_eq!(got, want, "spec {spec}");
        }
        let bad_label = message(json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "a b"}}}));
        assert!(
            bad_label.starts_with(&format!(r#"{prefix}spec.selector.matchLabels: Invalid value: "a b": "#)),
            "{bad_label}"
        );
    }

    #[test]
    fn several_errors_are_listed_in_the_apiservers_order() {
        let spec = json!({"minAvailable": "x", "maxUnavailable": -2, "unhealthyPodEvictionPolicy": "No"});
        let errs = validate_create("policy", "poddisruptionbudgets", &pdb(spec.clone()));
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec", "spec.minAvailable", "spec.maxUnavailable", "spec.unhealthyPodEvictionPolicy"]);
        assert!(message(spec).contains("is invalid: [spec: Invalid value: policy.PodDisruptionBudgetSpec{"));
    }

    #[test]
    fn status_counters_may_not_go_negative_and_the_spec_may_change() {
        let old = pdb(json!({"minAvailable": 1}));
        let mut new = pdb(json!({"minAvailable": 2}));
        assert!(
            validate_update("policy", "poddisruptionbudgets", &old, &new).is_empty(),
            "policy/v1 specs are mutable"
        );
        new["status"] = json!({"disruptionsAllowed": -1, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0});
        let errs = validate_update("policy", "poddisruptionbudgets", &old, &new);
        assert_eq!(
            errs[0].to_string(),
            "status.disruptionsAllowed: Invalid value: -1: must be greater than or equal to 0"
        );
    }

    #[test]
    fn int_or_string_fields_must_decode() {
        assert!(check_decodable(&pdb(json!({"minAvailable": 1, "maxUnavailable": "10%"}))).is_ok());
        assert_eq!(
            check_decodable(&pdb(json!({"minAvailable": true}))).unwrap_err(),
            "PodDisruptionBudget in version \"v1\" cannot be handled as a PodDisruptionBudget: json: cannot unmarshal bool into Go struct field PodDisruptionBudgetSpec.spec.minAvailable of type int32"
        );
        assert!(
            check_decodable(&pdb(json!({"maxUnavailable": 1.5}))).unwrap_err().contains("cannot unmarshal number 1.5")
        );
    }
}
