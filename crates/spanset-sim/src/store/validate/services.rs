//! Service rules on update: an allocated ClusterIP stays (`validateUpgradeDowngradeClusterIPs`
//! in the apiserver's core validation), worded as the apiserver words it:
//! `spec.clusterIPs[0]: Invalid value: []string{"10.96.0.20"}: may not change once set`.

use serde_json::Value;

use super::FieldError;

fn cluster_ips(service: &Value) -> Vec<&str> {
    match service.pointer("/spec/clusterIPs").and_then(Value::as_array) {
        Some(ips) => ips.iter().filter_map(Value::as_str).collect(),
        None => {
            service.pointer("/spec/clusterIP").and_then(Value::as_str).filter(|s| !s.is_empty()).into_iter().collect()
        }
    }
}

fn is_external_name(service: &Value) -> bool {
    service.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName")
}

/// `ValidateServiceUpdate`'s ClusterIP part: the primary address of a Service that had one may
/// neither change nor be unset, except to or from ExternalName.
pub(super) fn validate_service_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    if is_external_name(old) || is_external_name(new) {
        return;
    }
    let (before, after) = (cluster_ips(old), cluster_ips(new));
    let Some(first) = before.first() else { return };
    let value = Value::from(after.iter().map(|s| Value::from(*s)).collect::<Vec<_>>());
    match after.first() {
        None => errs.push(FieldError::invalid("spec.clusterIPs[0]", value, "primary clusterIP can not be unset")),
        Some(now) if now != first => {
            errs.push(FieldError::invalid("spec.clusterIPs[0]", value, "may not change once set"));
        }
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_allocated_cluster_ip_may_not_change() {
        let old = json!({"spec": {"clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20"]}});
        let mut errs = vec![];
        validate_service_update(&old, &old, &mut errs);
        assert!(errs.is_empty());
        let moved = json!({"spec": {"clusterIP": "10.96.0.21", "clusterIPs": ["10.96.0.21"]}});
        validate_service_update(&old, &moved, &mut errs);
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [r#"spec.clusterIPs[0]: Invalid value: []string{"10.96.0.21"}: may not change once set"#]
        );
        let headless = json!({"spec": {"clusterIP": "None", "clusterIPs": ["None"]}});
        errs.clear();
        validate_service_update(&old, &headless, &mut errs);
        assert_eq!(errs.len(), 1, "ClusterIP to headless is a change too");
        errs.clear();
        validate_service_update(
            &old,
            &json!({"spec": {"type": "ExternalName", "externalName": "x.example"}}),
            &mut errs,
        );
        assert!(errs.is_empty(), "to ExternalName releases the address");
    }
}
