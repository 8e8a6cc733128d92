//! TEMPORARY stand-in until the table module lands (same API).
use serde_json::{Value, json};
#[derive(Debug, Clone, Copy)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}
pub fn to_table(
    _group: &str,
    _resource: &str,
    items: &[&Value],
    _include: IncludeObject,
    _now: jiff::Timestamp,
    _printer_columns: Option<&[Value]>,
) -> Value {
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "columnDefinitions": [{"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0}], "rows": items.iter().map(|i| json!({"cells": [i["metadata"]["name"]], "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": i["metadata"]}})).collect::<Vec<_>>()})
}
