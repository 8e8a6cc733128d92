//! Defaulting and create-time status, as the apiserver's defaulters and `PrepareForCreate`
//! strategies do for the kinds the simulator serves.

use serde_json::{Value, json};

use crate::store::resources::ResourceType;

fn default_field(obj: &mut Value, path: &[&str], value: Value) {
    let mut cur = obj;
    for (i, seg) in path.iter().enumerate() {
        if !cur.is_object() {
            return;
        }
        let map = cur.as_object_mut().expect("checked above");
        if i + 1 == path.len() {
            map.entry(seg.to_string()).or_insert(value);
            return;
        }
        cur = map.entry(seg.to_string()).or_insert_with(|| json!({}));
    }
}

fn default_pod_spec(spec: &mut Value) {
    default_field(spec, &["restartPolicy"], json!("Always"));
    default_field(spec, &["terminationGracePeriodSeconds"], json!(30));
    default_field(spec, &["dnsPolicy"], json!("ClusterFirst"));
    default_field(spec, &["schedulerName"], json!("default-scheduler"));
    default_field(spec, &["securityContext"], json!({}));
    if let Some(containers) = spec.get_mut("containers").and_then(Value::as_array_mut) {
        for c in containers {
            default_field(c, &["terminationMessagePath"], json!("/dev/termination-log"));
            default_field(c, &["terminationMessagePolicy"], json!("File"));
            default_field(c, &["imagePullPolicy"], json!("IfNotPresent"));
            default_field(c, &["resources"], json!({}));
        }
    }
}

/// A policy's `matchConstraints` or a binding's `matchResources`: match policy, both selectors
/// (empty: everything) and each rule's scope.
fn default_match_resources(m: &mut Value) {
    if !m.is_object() {
        return;
    }
    default_field(m, &["matchPolicy"], json!("Equivalent"));
    default_field(m, &["namespaceSelector"], json!({}));
    default_field(m, &["objectSelector"], json!({}));
    for rules in ["resourceRules", "excludeResourceRules"] {
        for rule in m.get_mut(rules).and_then(Value::as_array_mut).into_iter().flatten() {
            default_field(rule, &["scope"], json!("*"));
        }
    }
}

/// Applies the defaults the real apiserver sets on every write of this kind.
pub fn apply(rt: &ResourceType, obj: &mut Value) {
    if rt.custom {
        return;
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "statefulsets") => {
            default_field(obj, &["spec", "replicas"], json!(1));
            default_field(obj, &["spec", "podManagementPolicy"], json!("OrderedReady"));
            default_field(obj, &["spec", "revisionHistoryLimit"], json!(10));
            default_field(obj, &["spec", "updateStrategy", "type"], json!("RollingUpdate"));
            if obj.pointer("/spec/updateStrategy/type").and_then(Value::as_str) == Some("RollingUpdate") {
                default_field(obj, &["spec", "updateStrategy", "rollingUpdate", "partition"], json!(0));
            }
            default_field(obj, &["spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted"], json!("Retain"));
            default_field(obj, &["spec", "persistentVolumeClaimRetentionPolicy", "whenScaled"], json!("Retain"));
            if let Some(tpl) = obj.pointer_mut("/spec/template/spec") {
                default_pod_spec(tpl);
            }
            if let Some(claims) = obj.pointer_mut("/spec/volumeClaimTemplates").and_then(Value::as_array_mut) {
                for c in claims {
                    default_field(c, &["spec", "volumeMode"], json!("Filesystem"));
                }
            }
        }
        ("", "pods") => {
            if let Some(spec) = obj.get_mut("spec") {
                default_pod_spec(spec);
            }
        }
        ("", "persistentvolumeclaims") => default_field(obj, &["spec", "volumeMode"], json!("Filesystem")),
        ("", "persistentvolumes") => {
            default_field(obj, &["spec", "persistentVolumeReclaimPolicy"], json!("Retain"));
            default_field(obj, &["spec", "volumeMode"], json!("Filesystem"));
        }
        ("", "services") => {
            default_field(obj, &["spec", "type"], json!("ClusterIP"));
            default_field(obj, &["spec", "sessionAffinity"], json!("None"));
        }
        ("", "secrets") => {
            default_field(obj, &["type"], json!("Opaque"));
            merge_string_data(obj);
        }
        ("", "namespaces") => default_field(obj, &["spec", "finalizers"], json!(["kubernetes"])),
        // `admissionregistration/v1` defaulters (`SetDefaults_ValidatingAdmissionPolicySpec`,
        // `SetDefaults_MatchResources`, `SetDefaults_Rule`): what a policy or binding reads back
        // with beyond what was written.
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
            default_field(obj, &["spec", "failurePolicy"], json!("Fail"));
            if let Some(m) = obj.pointer_mut("/spec/matchConstraints") {
                default_match_resources(m);
            }
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => {
            if let Some(m) = obj.pointer_mut("/spec/matchResources") {
                default_match_resources(m);
            }
        }
        ("storage.k8s.io", "storageclasses") => {
            default_field(obj, &["reclaimPolicy"], json!("Delete"));
            default_field(obj, &["volumeBindingMode"], json!("Immediate"));
        }
        _ => {}
    }
}

/// The status a new object starts with (`PrepareForCreate`): cleared for kinds whose status is
/// a subresource, with the initial phase where the kind has one.
pub fn initial_status(rt: &ResourceType, obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let initial = match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => Some(json!({"phase": "Pending", "qosClass": "BestEffort"})),
        ("", "persistentvolumeclaims") => Some(json!({"phase": "Pending"})),
        ("", "persistentvolumes") => Some(json!({"phase": "Pending"})),
        ("", "namespaces") => Some(json!({"phase": "Active"})),
        // The v1 status counters have no `omitempty`: a new budget shows them all at 0.
        ("policy", "poddisruptionbudgets") => {
            Some(json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}))
        }
        // Nodes register with their own status (the kubelet writes it on create).
        ("", "nodes") => return,
        _ if rt.status_subresource => Some(json!({})),
        _ => None,
    };
    let initial = initial.map(|mut s| {
        if (rt.group.as_str(), rt.plural.as_str()) == ("", "pods") && is_gated(map) {
            s["conditions"] = json!([scheduling_gated_condition()]);
        }
        s
    });
    match initial {
        Some(s) if s.as_object().is_some_and(|m| m.is_empty()) && !rt.custom => {
            map.insert("status".into(), s);
        }
        Some(s) if !rt.custom => {
            map.insert("status".into(), s);
        }
        // Custom resources with a status subresource drop status on create.
        Some(_) => {
            map.remove("status");
        }
        None => {}
    }
}

/// Whether a pod has scheduling gates left (`spec.schedulingGates` non-empty).
fn is_gated(pod: &serde_json::Map<String, Value>) -> bool {
    pod.get("spec").and_then(|s| s.get("schedulingGates")).and_then(Value::as_array).is_some_and(|g| !g.is_empty())
}

/// The condition the apiserver gives a pod created with scheduling gates (the pod strategy's
/// `PrepareForCreate`): the scheduler will not consider it until every gate is removed.
pub fn scheduling_gated_condition() -> Value {
    json!({"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
           "message": "Scheduling is blocked due to non-empty scheduling gates",
           "lastProbeTime": null, "lastTransitionTime": crate::store::object::now_rfc3339()})
}

/// A Secret's `stringData` is write-only: the apiserver merges it into `data` (base64), over
/// any key of the same name, and never stores it.
fn merge_string_data(obj: &mut Value) {
    use base64::Engine;
    let Some(map) = obj.as_object_mut() else { return };
    let Some(Value::Object(strings)) = map.remove("stringData") else { return };
    let data = map.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    for (k, v) in strings {
        if let Some(text) = v.as_str() {
            data[k] = json!(base64::engine::general_purpose::STANDARD.encode(text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secrets_string_data_is_merged_into_data_and_not_kept() {
        let rt = crate::store::resources::builtins().into_iter().find(|r| r.plural == "secrets").unwrap();
        let mut secret = json!({"data": {"a": "eA==", "b": "eQ=="}, "stringData": {"b": "two", "c": "three"}});
        apply(&rt, &mut secret);
        assert_eq!(secret, json!({"type": "Opaque", "data": {"a": "eA==", "b": "dHdv", "c": "dGhyZWU="}}));
    }

    #[test]
    fn a_policy_and_a_binding_read_back_with_the_apiservers_defaults() {
        let rt = |plural: &str| crate::store::resources::builtins().into_iter().find(|r| r.plural == plural).unwrap();
        let rule = json!({"apiGroups": ["apps"], "apiVersions": ["*"], "operations": ["UPDATE"], "resources": ["statefulsets"]});
        let mut policy = json!({"spec": {"matchConstraints": {"resourceRules": [rule]}, "validations": []}});
        apply(&rt("validatingadmissionpolicies"), &mut policy);
        let mut scoped = rule.clone();
        scoped["scope"] = json!("*");
        let defaulted = json!({"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {}, "resourceRules": [scoped]});
        assert_eq!(policy["spec"]["failurePolicy"], "Fail");
        assert_eq!(policy["spec"]["matchConstraints"], defaulted);
        // A binding's matchResources only when it has one (a binding without matches what its policy does).
        let mut bare = json!({"spec": {"policyName": "p", "validationActions": ["Deny"]}});
        apply(&rt("validatingadmissionpolicybindings"), &mut bare);
        assert_eq!(bare, json!({"spec": {"policyName": "p", "validationActions": ["Deny"]}}));
        let mut narrowed =
            json!({"spec": {"policyName": "p", "matchResources": {"objectSelector": {"matchLabels": {"a": "b"}}}}});
        apply(&rt("validatingadmissionpolicybindings"), &mut narrowed);
        assert_eq!(
            narrowed["spec"]["matchResources"],
            json!({"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {"matchLabels": {"a": "b"}}})
        );
    }

    #[test]
    fn a_gated_pod_starts_with_the_scheduling_gated_condition() {
        let rt = crate::store::resources::builtins().into_iter().find(|r| r.plural == "pods").unwrap();
        let mut gated = json!({"spec": {"schedulingGates": [{"name": "x"}], "containers": []}});
        initial_status(&rt, &mut gated);
        let c = &gated["status"]["conditions"][0];
        assert_eq!(
            (c["type"].as_str(), c["status"].as_str(), c["reason"].as_str()),
            (Some("PodScheduled"), Some("False"), Some("SchedulingGated"))
        );
        assert_eq!(c["message"], "Scheduling is blocked due to non-empty scheduling gates");
        let mut free = json!({"spec": {"schedulingGates": [], "containers": []}});
        initial_status(&rt, &mut free);
        assert_eq!(free["status"], json!({"phase": "Pending", "qosClass": "BestEffort"}));
    }
}
