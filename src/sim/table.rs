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
    let col = |n: &str| json!({"name": n, "type": "string", "format": "", "description": "", "priority": 0});
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "columnDefinitions": [col("Name"), col("Ready"), col("Age")], "rows": items.iter().map(|i| json!({"cells": [i["metadata"]["name"], format!("{}/{}", i["status"]["readyReplicas"].as_i64().unwrap_or(0), i["spec"]["replicas"].as_i64().unwrap_or(0)), "1s"], "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": i["metadata"]}})).collect::<Vec<_>>()})
}
