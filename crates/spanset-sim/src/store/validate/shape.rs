//! The decoder's structural check: fields that must be JSON objects or lists, refused with 400
//! before validation, so no simulated controller is fed a shape it cannot read.

use serde_json::Value;

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
    ("policy", "poddisruptionbudgets", "/spec/selector", true),
];

/// Checks that the structural fields of a built-in kind have the right JSON type; the error is
/// the decoder's kind of message (HTTP 400), naming the field.
pub fn check_shape(group: &str, resource: &str, kind: &str, obj: &Value) -> Result<(), String> {
    if (group, resource) == ("policy", "poddisruptionbudgets") {
        super::policy::check_decodable(obj)?;
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
}
