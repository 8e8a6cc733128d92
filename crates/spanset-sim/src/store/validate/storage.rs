//! PersistentVolumeClaim rules: the spec basics on create, and on update an immutable spec
//! except for growing `resources.requests` (and binding filling `volumeName` once).

use serde_json::{Value, json};

use super::FieldError;

const ACCESS_MODES: &[&str] = &["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];

/// `ValidatePersistentVolumeClaimSpec`: access modes and a storage request.
pub(super) fn validate_pvc_spec(obj: &Value, errs: &mut Vec<FieldError>) {
    match obj.pointer("/spec/accessModes").and_then(Value::as_array).filter(|a| !a.is_empty()) {
        None => errs.push(FieldError::required("spec.accessModes", "at least 1 access mode is required")),
        Some(modes) => {
            for m in modes {
                if !m.as_str().is_some_and(|m| ACCESS_MODES.contains(&m)) {
                    errs.push(FieldError::not_supported("spec.accessModes", m.clone(), ACCESS_MODES));
                }
            }
        }
    }
    match obj.pointer("/spec/resources/requests/storage") {
        None => errs.push(FieldError::required("spec.resources[storage]", "")),
        Some(q) => {
            if quantity(q).is_none_or(|v| v <= 0.0) {
                errs.push(FieldError::invalid("spec.resources[storage]", q.clone(), "must be greater than zero"));
            }
        }
    }
}

/// Parses a resource quantity (`1Gi`, `500M`, `100m`, `1e3`) to a number of base units.
fn quantity(v: &Value) -> Option<f64> {
    if let Some(n) = v.as_f64() {
        return Some(n);
    }
    let s = v.as_str()?.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E').unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let factor = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    num.parse::<f64>().ok().map(|n| n * factor)
}

fn spec_without(obj: &Value, keep_out: &[&str]) -> Value {
    let mut spec = obj.get("spec").cloned().unwrap_or(json!({}));
    if let Some(m) = spec.as_object_mut() {
        m.retain(|k, v| !keep_out.contains(&k.as_str()) && !v.is_null());
    }
    spec
}

/// `ValidatePersistentVolumeClaimUpdate`: the spec is immutable except requests (which may not
/// shrink below the old value) and the binding fields while still unset.
pub(super) fn validate_pvc_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    validate_pvc_spec(new, errs);
    let mut keep_out = vec!["resources", "volumeAttributesClassName"];
    if old.pointer("/spec/volumeName").and_then(Value::as_str).unwrap_or("").is_empty() {
        keep_out.push("volumeName");
    }
    if old.pointer("/spec/storageClassName").is_none() {
        keep_out.push("storageClassName");
    }
    if spec_without(old, &keep_out) != spec_without(new, &keep_out) {
        errs.push(FieldError::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    let storage = |o: &Value| o.pointer("/spec/resources/requests/storage").and_then(quantity);
    if let (Some(was), Some(now)) = (storage(old), storage(new))
        && now < was
    {
        errs.push(FieldError::forbidden(
            "spec.resources.requests.storage",
            "field can not be less than previous value",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::validate::{invalid_message, validate_create, validate_update};

    fn claim(size: &str) -> Value {
        json!({"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}})
    }

    #[test]
    fn claims_need_access_modes_and_a_size() {
        let errs = validate_create("", "persistentvolumeclaims", &json!({"metadata": {"name": "d"}, "spec": {}}));
        assert_eq!(
            invalid_message("PersistentVolumeClaim", "", "d", &errs),
            r#"PersistentVolumeClaim "d" is invalid: [spec.accessModes: Required value: at least 1 access mode is required, spec.resources[storage]: Required value]"#
        );
        let mut odd = claim("1Gi");
        odd["spec"]["accessModes"] = json!(["ReadWriteSometimes"]);
        assert_eq!(
            validate_create("", "persistentvolumeclaims", &odd)[0].to_string(),
            r#"spec.accessModes: Unsupported value: "ReadWriteSometimes": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod""#
        );
        assert!(validate_create("", "persistentvolumeclaims", &claim("1Gi")).is_empty());
    }

    #[test]
    fn bound_claims_may_only_grow() {
        let mut bound = claim("1Gi");
        bound["spec"]["volumeName"] = json!("pv-1");
        assert!(
            validate_update("", "persistentvolumeclaims", &claim("1Gi"), &bound).is_empty(),
            "binding fills volumeName"
        );
        let mut grown = bound.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert!(validate_update("", "persistentvolumeclaims", &bound, &grown).is_empty());
        let errs = validate_update("", "persistentvolumeclaims", &grown, &bound);
        assert_eq!(
            errs[0].to_string(),
            "spec.resources.requests.storage: Forbidden: field can not be less than previous value"
        );
        let mut changed = bound.clone();
        changed["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        assert_eq!(
            validate_update("", "persistentvolumeclaims", &bound, &changed)[0].to_string(),
            "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
        );
        assert_eq!(quantity(&json!("500M")), Some(5e8));
        assert_eq!(quantity(&json!("1Ki")), Some(1024.0));
    }
}
