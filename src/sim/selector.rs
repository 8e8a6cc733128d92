//! TEMPORARY stand-in until the selector module lands (same API).
use serde_json::{Map, Value};
pub struct LabelSelector(Vec<(String, String)>);
impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(Self(
            s.split(',')
                .filter(|p| !p.is_empty())
                .filter_map(|p| p.split_once('=').map(|(a, b)| (a.to_string(), b.to_string())))
                .collect(),
        ))
    }
    pub fn from_api(_sel: &Value) -> Result<Self, String> {
        Ok(Self(vec![]))
    }
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.0.iter().all(|(k, v)| labels.and_then(|l| l.get(k)).and_then(Value::as_str) == Some(v))
    }
    pub fn is_everything(&self) -> bool {
        self.0.is_empty()
    }
    pub fn to_query_string(&self) -> String {
        String::new()
    }
}
pub struct FieldSelector(Vec<(String, String)>);
impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(Self(
            s.split(',')
                .filter(|p| !p.is_empty())
                .filter_map(|p| p.split_once('=').map(|(a, b)| (a.to_string(), b.to_string())))
                .collect(),
        ))
    }
    pub fn check_supported(&self, _supported: &[&str]) -> Result<(), String> {
        Ok(())
    }
    pub fn matches(&self, obj: &Value) -> bool {
        self.0
            .iter()
            .all(|(k, v)| obj.pointer(&format!("/{}", k.replace('.', "/"))).and_then(Value::as_str).unwrap_or("") == v)
    }
    pub fn exact_name(&self) -> Option<&str> {
        None
    }
}
pub fn supported_field_selectors(_group: &str, _resource: &str) -> &'static [&'static str] {
    &["metadata.name"]
}
