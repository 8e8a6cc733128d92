//! Workload specs: pod containers (`ValidatePodSpec`, the parts the simulator relies on) and
//! StatefulSets (`pkg/apis/apps/validation`), in the apiserver's check order.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::{FieldError, FieldErrorKind, meta, syntax};
use crate::store::{object::str_at, selector::LabelSelector};

/// `ValidateNonnegativeField` for an optional integer at `ptr`, reported at `field`.
fn non_negative(obj: &Value, ptr: &str, field: &str, errs: &mut Vec<FieldError>) {
    if let Some(v) = obj.pointer(ptr).filter(|v| !v.is_null()) {
        match v.as_i64() {
            Some(n) if n >= 0 => {}
            Some(_) => errs.push(FieldError::invalid(field, v.clone(), "must be greater than or equal to 0")),
            None => errs.push(FieldError::invalid(field, v.clone(), "must be an integer")),
        }
    }
}

/// Containers: at least one, each with a unique DNS-label name and an image; scheduling gates
/// with unique qualified names.
pub(super) fn validate_pod_spec(spec: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    validate_containers(spec, path, errs);
    validate_scheduling_gates(spec, path, errs);
}

/// The names of a pod spec's `schedulingGates`, in order.
fn gate_names(spec: Option<&Value>) -> Vec<&str> {
    spec.and_then(|s| s.get("schedulingGates"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|g| g.get("name").and_then(Value::as_str).unwrap_or(""))
        .collect()
}

/// `validateSchedulingGates`: each name a qualified name, none twice.
fn validate_scheduling_gates(spec: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let mut seen = HashSet::new();
    for (i, name) in gate_names(spec).into_iter().enumerate() {
        let at = format!("{path}.schedulingGates[{i}]");
        for msg in syntax::qualified_name(name) {
            errs.push(FieldError::invalid(&at, json!(name), msg));
        }
        if !seen.insert(name) {
            errs.push(FieldError::new(&at, FieldErrorKind::Duplicate, Some(json!(name)), ""));
        }
    }
}

/// `ValidatePodCreate`'s rule for gates: a pod cannot be created bound to a node while gated.
pub(super) fn validate_pod_create(pod: &Value, errs: &mut Vec<FieldError>) {
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    if !node.is_empty() && !gate_names(pod.get("spec")).is_empty() {
        errs.push(FieldError::forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"));
    }
}

/// `validateOnlyDeletedSchedulingGates` (pod update): gates may be removed, never added; one
/// error per added gate, at its index in the new list.
pub(super) fn validate_pod_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let before = gate_names(old.get("spec"));
    for (i, name) in gate_names(new.get("spec")).into_iter().enumerate() {
        if !before.contains(&name) {
            errs.push(FieldError::forbidden(
                &format!("spec.schedulingGates[{i}].name"),
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
}

fn validate_containers(spec: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let containers = spec.and_then(|s| s.get("containers")).and_then(Value::as_array);
    let Some(cs) = containers.filter(|cs| !cs.is_empty()) else {
        errs.push(FieldError::required(&format!("{path}.containers"), ""));
        return;
    };
    let mut seen = HashSet::new();
    for (i, c) in cs.iter().enumerate() {
        let at = format!("{path}.containers[{i}]");
        match c.get("name").and_then(Value::as_str).unwrap_or("") {
            "" => errs.push(FieldError::required(&format!("{at}.name"), "")),
            n => {
                for msg in syntax::dns1123_label(n) {
                    errs.push(FieldError::invalid(&format!("{at}.name"), json!(n), msg));
                }
                if !seen.insert(n.to_string()) {
                    errs.push(FieldError::new(&format!("{at}.name"), FieldErrorKind::Duplicate, Some(json!(n)), ""));
                }
            }
        }
        if c.get("image").and_then(Value::as_str).is_none_or(str::is_empty) {
            errs.push(FieldError::required(&format!("{at}.image"), ""));
        }
    }
}

/// `ValidateStatefulSetSpec`, in its order: policies, counts, selector, template.
pub(super) fn validate_statefulset_spec(obj: &Value, errs: &mut Vec<FieldError>) {
    match str_at(obj, "/spec/podManagementPolicy") {
        "" => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(FieldError::invalid(
            "spec.podManagementPolicy",
            json!(other),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let rolling = obj.pointer("/spec/updateStrategy/rollingUpdate").filter(|v| !v.is_null());
    match str_at(obj, "/spec/updateStrategy/type") {
        "" => errs.push(FieldError::required("spec.updateStrategy", "")),
        "OnDelete" => {
            if let Some(r) = rolling {
                errs.push(FieldError::invalid(
                    "spec.updateStrategy.rollingUpdate",
                    r.clone(),
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "RollingUpdate" => non_negative(
            obj,
            "/spec/updateStrategy/rollingUpdate/partition",
            "spec.updateStrategy.rollingUpdate.partition",
            errs,
        ),
        other => {
            errs.push(FieldError::invalid("spec.updateStrategy", json!(other), "must be 'RollingUpdate' or 'OnDelete'"))
        }
    }
    for policy in ["whenDeleted", "whenScaled"] {
        match obj.pointer(&format!("/spec/persistentVolumeClaimRetentionPolicy/{policy}")).and_then(Value::as_str) {
            None | Some("Retain" | "Delete") => {}
            Some(other) => errs.push(FieldError::not_supported(
                &format!("spec.persistentVolumeClaimRetentionPolicy.{policy}"),
                json!(other),
                &["Retain", "Delete"],
            )),
        }
    }
    non_negative(obj, "/spec/revisionHistoryLimit", "spec.revisionHistoryLimit", errs);
    non_negative(obj, "/spec/replicas", "spec.replicas", errs);
    non_negative(obj, "/spec/minReadySeconds", "spec.minReadySeconds", errs);
    non_negative(obj, "/spec/ordinals/start", "spec.ordinals.start", errs);
    validate_selector_and_template(obj, errs);
}

fn validate_selector_and_template(obj: &Value, errs: &mut Vec<FieldError>) {
    let selector = obj.pointer("/spec/selector").filter(|v| !v.is_null());
    let parsed = selector.map(LabelSelector::from_api);
    match (selector, &parsed) {
        (None, _) => errs.push(FieldError::required("spec.selector", "")),
        (Some(sel), Some(Err(e))) => errs.push(FieldError::invalid("spec.selector", sel.clone(), e.clone())),
        (Some(_), Some(Ok(s))) if s.is_everything() => {
            // Go prints the dereferenced struct with %#v; the text is carried in the detail.
            errs.push(FieldError::new(
                "spec.selector",
                FieldErrorKind::Invalid,
                None,
                "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for statefulset",
            ))
        }
        _ => {}
    }
    let labels = obj.pointer("/spec/template/metadata/labels");
    if let Some(Ok(sel)) = &parsed
        && !sel.is_everything()
        && !sel.matches(labels.and_then(Value::as_object))
    {
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            labels.cloned().unwrap_or(json!({})),
            "`selector` does not match template `labels`",
        ));
    }
    // Upstream reports template label syntax at `spec.template.labels` (sic).
    meta::validate_labels(labels, "spec.template.labels", errs);
    validate_pod_spec(obj.pointer("/spec/template/spec"), "spec.template.spec", errs);
    match str_at(obj, "/spec/template/spec/restartPolicy") {
        "" | "Always" => {}
        other => errs.push(FieldError::not_supported("spec.template.spec.restartPolicy", json!(other), &["Always"])),
    }
    if obj.pointer("/spec/template/spec/activeDeadlineSeconds").is_some_and(|v| !v.is_null()) {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in StatefulSet is not Supported",
        ));
    }
}

/// The StatefulSet spec fields that may change after creation (1.33).
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
        m.retain(|k, v| !keep_out.contains(&k.as_str()) && !v.is_null());
    }
    spec
}

/// `ValidateStatefulSetUpdate`'s immutability rule, worded as in 1.33.
pub(super) fn validate_statefulset_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    if spec_without(old, STATEFULSET_MUTABLE) != spec_without(new, STATEFULSET_MUTABLE) {
        errs.push(FieldError::forbidden(
            "spec",
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::validate::{invalid_message, validate_create, validate_update};

    fn sts(replicas: i64) -> Value {
        json!({"metadata": {"name": "web"}, "spec": {"replicas": replicas, "serviceName": "web",
               "podManagementPolicy": "OrderedReady", "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
               "selector": {"matchLabels": {"app": "web"}},
               "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i"}]}}}})
    }

    fn msg(errs: &[FieldError]) -> String {
        invalid_message("StatefulSet", "apps", "web", errs)
    }

    #[test]
    fn a_valid_statefulset_passes() {
        assert!(validate_create("apps", "statefulsets", &sts(3)).is_empty());
    }

    #[test]
    fn negative_counts_read_as_the_apiserver_words_them() {
        assert_eq!(
            msg(&validate_create("apps", "statefulsets", &sts(-1))),
            r#"StatefulSet.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#
        );
        let mut o = sts(1);
        o["spec"]["ordinals"] = json!({"start": -2});
        assert_eq!(
            msg(&validate_create("apps", "statefulsets", &o)),
            r#"StatefulSet.apps "web" is invalid: spec.ordinals.start: Invalid value: -2: must be greater than or equal to 0"#
        );
        let mut p = sts(1);
        p["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = json!(-1);
        assert!(msg(&validate_create("apps", "statefulsets", &p)).ends_with(
            "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0"
        ));
    }

    #[test]
    fn selector_must_exist_be_non_empty_and_match_the_template() {
        let mut none = sts(1);
        none["spec"].as_object_mut().unwrap().remove("selector");
        assert!(
            msg(&validate_create("apps", "statefulsets", &none)).ends_with("is invalid: spec.selector: Required value")
        );
        let mut empty = sts(1);
        empty["spec"]["selector"] = json!({});
        assert!(
            msg(&validate_create("apps", "statefulsets", &empty))
                .ends_with("spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for statefulset")
        );
        let mut bad = sts(-2);
        bad["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
        assert_eq!(
            msg(&validate_create("apps", "statefulsets", &bad)),
            r#"StatefulSet.apps "web" is invalid: [spec.replicas: Invalid value: -2: must be greater than or equal to 0, spec.template.metadata.labels: Invalid value: map[string]string{"app":"other"}: `selector` does not match template `labels`]"#
        );
    }

    #[test]
    fn policies_and_template_restrictions_are_worded_as_upstream() {
        let mut o = sts(1);
        o["spec"]["podManagementPolicy"] = json!("Random");
        o["spec"]["persistentVolumeClaimRetentionPolicy"] = json!({"whenScaled": "Keep"});
        o["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        o["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(5);
        let text: Vec<String> = validate_create("apps", "statefulsets", &o).iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                r#"spec.podManagementPolicy: Invalid value: "Random": must be 'OrderedReady' or 'Parallel'"#,
                r#"spec.persistentVolumeClaimRetentionPolicy.whenScaled: Unsupported value: "Keep": supported values: "Retain", "Delete""#,
                r#"spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always""#,
                "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported",
            ]
        );
    }

    #[test]
    fn updates_may_change_only_the_allowed_fields() {
        let mut changed = sts(3);
        changed["spec"]["serviceName"] = json!("other");
        let errs = validate_update("apps", "statefulsets", &sts(3), &changed);
        assert_eq!(
            msg(&errs),
            r#"StatefulSet.apps "web" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"#
        );
        let mut moved = sts(1);
        moved["spec"]["ordinals"] = json!({"start": 5});
        moved["spec"]["revisionHistoryLimit"] = json!(3);
        assert!(validate_update("apps", "statefulsets", &sts(3), &moved).is_empty());
        let mut both = changed.clone();
        both["spec"]["replicas"] = json!(-1);
        let errs = validate_update("apps", "statefulsets", &sts(3), &both);
        assert_eq!(
            errs.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
            ["spec.replicas", "spec"],
            "spec errors first"
        );
    }

    #[test]
    fn pods_need_named_containers_with_images() {
        let p = |spec: Value| validate_create("", "pods", &json!({"metadata": {"name": "p"}, "spec": spec}));
        assert_eq!(
            invalid_message("Pod", "", "p", &p(json!({"containers": [{"name": "c"}]}))),
            r#"Pod "p" is invalid: spec.containers[0].image: Required value"#
        );
        assert_eq!(p(json!({}))[0].to_string(), "spec.containers: Required value");
        let dup = p(json!({"containers": [{"name": "c", "image": "i"}, {"name": "c", "image": "i"}]}));
        assert_eq!(dup[0].to_string(), r#"spec.containers[1].name: Duplicate value: "c""#);
        assert!(
            p(json!({"containers": [{"name": "C", "image": "i"}]}))[0]
                .to_string()
                .starts_with(r#"spec.containers[0].name: Invalid value: "C": a lowercase RFC 1123 label"#)
        );
    }
    #[test]
    fn scheduling_gates_are_unique_qualified_names_and_may_only_be_removed() {
        let pod = |gates: Value| json!({"metadata": {"name": "p"}, "spec": {"schedulingGates": gates, "containers": [{"name": "c", "image": "i"}]}});
        let two = pod(json!([{"name": "example.com/a"}, {"name": "b"}]));
        assert!(validate_create("", "pods", &two).is_empty());
        let dup = validate_create("", "pods", &pod(json!([{"name": "a"}, {"name": "a"}])));
        assert_eq!(dup[0].to_string(), r#"spec.schedulingGates[1]: Duplicate value: "a""#);
        let bad = validate_create("", "pods", &pod(json!([{"name": "a b"}])));
        assert!(
            bad[0].to_string().starts_with(r#"spec.schedulingGates[0]: Invalid value: "a b": name part must consist"#)
        );
        let mut bound = pod(json!([{"name": "a"}]));
        bound["spec"]["nodeName"] = json!("node-1");
        assert_eq!(
            validate_create("", "pods", &bound)[0].to_string(),
            "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"
        );
        // Removing gates, one or all, is an update like any other; adding one is refused.
        assert!(validate_update("", "pods", &two, &pod(json!([{"name": "b"}]))).is_empty());
        let mut none = two.clone();
        none["spec"].as_object_mut().unwrap().remove("schedulingGates");
        assert!(validate_update("", "pods", &two, &none).is_empty());
        let added = validate_update("", "pods", &two, &pod(json!([{"name": "b"}, {"name": "c"}])));
        assert_eq!(
            invalid_message("Pod", "", "p", &added),
            r#"Pod "p" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'c'"#
        );
        assert_eq!(validate_update("", "pods", &none, &two).len(), 2, "one error per added gate");
    }
}
