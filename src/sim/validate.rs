//! TEMPORARY stand-in until the validation module lands (same API).
use serde_json::Value;
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    Required,
    Invalid,
    Forbidden,
}
#[derive(Debug, Clone)]
pub struct FieldError {
    pub field: String,
    pub kind: FieldErrorKind,
    pub value: Option<Value>,
    pub detail: String,
}
impl FieldError {
    pub fn cause_reason(&self) -> &'static str {
        "FieldValueInvalid"
    }
}
impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {:?}: {}", self.field, self.kind, self.detail)
    }
}
pub fn validate_create(_g: &str, _r: &str, _o: &Value) -> Vec<FieldError> {
    vec![]
}
pub fn validate_update(_g: &str, _r: &str, _o: &Value, _n: &Value) -> Vec<FieldError> {
    vec![]
}
pub fn invalid_message(kind: &str, group: &str, name: &str, errs: &[FieldError]) -> String {
    format!(
        "{kind}.{group} \"{name}\" is invalid: {}",
        errs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ")
    )
}
