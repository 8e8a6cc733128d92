//! Patch engines of the simulated API server: JSON merge patch (RFC 7386), JSON patch
//! (RFC 6902) and strategic merge patch for the built-in kinds, with the directives kubectl's
//! three-way apply emits (`$patch`, `$setElementOrder/...`, `$deleteFromPrimitiveList/...`,
//! `$retainKeys`). Server-side apply is approximated by a strategic merge of the applied
//! configuration.

mod json_patch;
mod strategic;

pub use json_patch::apply_json_patch;
pub use strategic::{BuiltinKind, apply_strategic_merge_patch, builtin_kind};

use serde_json::Value;

/// Error from applying a patch; the server maps BadRequest → HTTP 400, Invalid → HTTP 422
/// (reason Invalid), UnsupportedMediaType → 415.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// The patch document is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// The patch is well formed but cannot apply to this object.
    #[error("{0}")]
    Invalid(String),
    /// The patch type does not apply to this kind.
    #[error("{0}")]
    UnsupportedMediaType(String),
}

/// RFC 7386 JSON merge patch: objects merge, `null` deletes, everything else replaces.
pub fn apply_merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    if !patch.is_object() {
        return Err(PatchError::BadRequest("a merge patch must be a JSON object".into()));
    }
    Ok(merge(target, patch))
}

fn merge(target: &Value, patch: &Value) -> Value {
    match patch {
        Value::Object(p) => {
            let mut out = match target {
                Value::Object(t) => t.clone(),
                _ => serde_json::Map::new(),
            };
            for (k, v) in p {
                if v.is_null() {
                    out.remove(k);
                } else {
                    let merged = merge(out.get(k).unwrap_or(&Value::Null), v);
                    out.insert(k.clone(), merged);
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_merges_objects_deletes_nulls_and_replaces_lists() {
        let target = json!({"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2]});
        let out = apply_merge_patch(&target, &json!({"b": {"c": null, "e": 4}, "l": [3], "a": null})).unwrap();
        assert_eq!(out, json!({"b": {"d": 3, "e": 4}, "l": [3]}));
        assert!(matches!(apply_merge_patch(&target, &json!([1])), Err(PatchError::BadRequest(_))));
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<i64>().prop_map(Value::from),
            "[a-z]{0,3}".prop_map(Value::from),
            any::<bool>().prop_map(Value::from)
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                prop::collection::btree_map("[a-c]", inner, 0..3).prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn an_empty_merge_patch_is_the_identity(v in prop::collection::btree_map("[a-c]", json_value(), 0..4)) {
            let obj = Value::Object(v.into_iter().collect());
            prop_assert_eq!(apply_merge_patch(&obj, &json!({})).unwrap(), obj);
        }

        #[test]
        fn merge_patches_are_idempotent(
            t in prop::collection::btree_map("[a-c]", json_value(), 0..4),
            p in prop::collection::btree_map("[a-c]", json_value(), 0..4),
        ) {
            let target = Value::Object(t.into_iter().collect());
            let patch = Value::Object(p.into_iter().collect());
            let out = apply_merge_patch(&target, &patch).unwrap();
            // Applying the same patch twice changes nothing more (idempotence).
            prop_assert_eq!(apply_merge_patch(&out, &patch).unwrap(), out);
        }
    }
}
