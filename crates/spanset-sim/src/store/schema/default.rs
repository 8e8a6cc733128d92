//! Defaulting from the schema's `default`s, as the apiserver defaults a custom resource when
//! it decodes it: a missing field (or a `null` one that is not `nullable`) takes its default,
//! defaults are themselves defaulted inside, and a non-nullable `null` without a default is
//! dropped (the apiserver's `PruneNonNullableNullsWithoutDefaults`).

use serde_json::Value;

/// Fills the defaults of schema node `s` into `v`.
pub(super) fn apply(s: &Value, v: &mut Value) {
    match v {
        Value::Object(map) => {
            let props = s.get("properties").and_then(Value::as_object);
            for (k, ps) in props.into_iter().flatten() {
                let nullable = ps.get("nullable").and_then(Value::as_bool) == Some(true);
                let missing = match map.get(k) {
                    None => true,
                    Some(Value::Null) => !nullable,
                    Some(_) => false,
                };
                if !missing {
                    continue;
                }
                match ps.get("default") {
                    Some(d) => {
                        map.insert(k.clone(), d.clone());
                    }
                    None => {
                        if map.get(k).is_some_and(Value::is_null) {
                            map.remove(k);
                        }
                    }
                }
            }
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in map.iter_mut() {
                if let Some(cs) = props.and_then(|p| p.get(k)).or(additional) {
                    apply(cs, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items") {
                items.iter_mut().for_each(|item| apply(item_schema, item));
            }
        }
        _ => {}
    }
}
