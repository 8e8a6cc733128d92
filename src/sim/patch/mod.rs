//! TEMPORARY stand-in until the patch module lands (same API).
use serde_json::Value;
#[derive(Debug)]
pub enum PatchError {
    BadRequest(String),
    Invalid(String),
    UnsupportedMediaType(String),
}
#[derive(Debug, Clone, Copy)]
pub struct BuiltinKind;
fn merge(t: &Value, p: &Value) -> Value {
    match (t, p) {
        (Value::Object(tm), Value::Object(pm)) => {
            let mut out = tm.clone();
            for (k, v) in pm {
                if v.is_null() {
                    out.remove(k);
                } else {
                    let cur = out.get(k).cloned().unwrap_or(Value::Null);
                    out.insert(k.clone(), merge(&cur, v));
                }
            }
            Value::Object(out)
        }
        (_, p) => p.clone(),
    }
}
pub fn apply_merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    Ok(merge(target, patch))
}
pub fn apply_json_patch(_target: &Value, _patch: &Value) -> Result<Value, PatchError> {
    Err(PatchError::Invalid("todo".into()))
}
pub fn apply_strategic_merge_patch(target: &Value, patch: &Value, _kind: BuiltinKind) -> Result<Value, PatchError> {
    Ok(merge(target, patch))
}
pub fn builtin_kind(group: &str, _kind: &str) -> Option<BuiltinKind> {
    (!group.contains('.') || group.ends_with("k8s.io")).then_some(BuiltinKind)
}
