//! The API reference (`docs/api-reference.md`), rendered from the CRDs' own schemas: every
//! field with its type, default, validation and description. Generated rather than written so
//! that it cannot drift from what the API server enforces; a test renders it again and compares
//! it with the committed page.

use std::fmt::Write;

use kube::CustomResourceExt;
use serde_json::Value;

use super::{FederatedStatefulSet, MemberCluster};

/// The whole reference page, both kinds, as Markdown.
pub fn markdown() -> String {
    let mut out = String::from(
        "# API reference\n\n\
         Generated from the CRDs' schemas (`deploy/crds/`, `spanset crd`) by \
         `spanset::api::reference::markdown`; `tests/suite/api_reference.rs` fails when this page \
         and the schemas differ, and `SPANSET_BLESS=1 cargo test --test suite api_reference` \
         writes it again. A field's path uses `[]` for the items of a list and `{}` for the values \
         of a map.\n",
    );
    for crd in [FederatedStatefulSet::crd(), MemberCluster::crd()] {
        let crd = serde_json::to_value(&crd).expect("a CRD is JSON");
        kind_section(&mut out, &crd);
    }
    out
}

fn kind_section(out: &mut String, crd: &Value) {
    let spec = &crd["spec"];
    let kind = spec["names"]["kind"].as_str().unwrap_or_default();
    let group = spec["group"].as_str().unwrap_or_default();
    let short: Vec<&str> =
        spec["names"]["shortNames"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    for version in spec["versions"].as_array().into_iter().flatten() {
        let name = version["name"].as_str().unwrap_or_default();
        let _ = writeln!(out, "\n## {kind}\n");
        let _ = write!(out, "`{group}/{name}`, {}", spec["scope"].as_str().unwrap_or_default().to_lowercase());
        if !short.is_empty() {
            let _ = write!(out, ", short name{} {}", if short.len() > 1 { "s" } else { "" }, code_list(&short));
        }
        out.push_str(".\n\n| field | type | default | validation | description |\n|---|---|---|---|---|\n");
        let schema = &version["schema"]["openAPIV3Schema"];
        for part in ["spec", "status"] {
            let required = required_of(schema);
            if let Some(s) = schema["properties"].get(part) {
                field_rows(out, part, s, required.contains(&part.to_string()));
            }
        }
    }
}

fn required_of(schema: &Value) -> Vec<String> {
    schema["required"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(String::from)).collect()
}

/// One row for `path`, then one for each field under it.
fn field_rows(out: &mut String, path: &str, schema: &Value, required: bool) {
    let _ = writeln!(
        out,
        "| `{path}` | {} | {} | {} | {} |",
        type_of(schema, required),
        schema.get("default").map(|d| format!("`{}`", cell(&d.to_string()))).unwrap_or_default(),
        validation(schema),
        cell(schema["description"].as_str().unwrap_or_default())
    );
    let required = required_of(schema);
    if let Some(props) = schema["properties"].as_object() {
        for (name, sub) in props {
            field_rows(out, &format!("{path}.{name}"), sub, required.contains(name));
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.get("properties").is_some()) {
        let required = required_of(items);
        for (name, sub) in items["properties"].as_object().into_iter().flatten() {
            field_rows(out, &format!("{path}[].{name}"), sub, required.contains(name));
        }
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.get("properties").is_some()) {
        let required = required_of(values);
        for (name, sub) in values["properties"].as_object().into_iter().flatten() {
            field_rows(out, &format!("{path}{{}}.{name}"), sub, required.contains(name));
        }
    }
}

/// The field's type as a reader names it: `integer`, `list of string`, `map of string`,
/// `int or string`, `object`; then `, required` and `, nullable` where they apply.
fn type_of(schema: &Value, required: bool) -> String {
    let base = |s: &Value| -> String {
        if s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
            return "int or string".into();
        }
        if s.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true)
            && s.get("type").is_none()
        {
            return "any".into();
        }
        s["type"].as_str().unwrap_or("object").to_string()
    };
    let mut t = match schema["type"].as_str() {
        Some("array") => format!("list of {}", base(&schema["items"])),
        Some("object") if schema.get("additionalProperties").is_some() => {
            format!("map of {}", base(&schema["additionalProperties"]))
        }
        _ => base(schema),
    };
    if required {
        t.push_str(", required");
    }
    if schema.get("nullable").and_then(Value::as_bool) == Some(true) {
        t.push_str(", nullable");
    }
    t
}

/// What the schema refuses: enums, bounds, patterns, sizes, list semantics and CEL rules.
fn validation(schema: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> =
            values.iter().map(|v| v.as_str().map(String::from).unwrap_or(v.to_string())).collect();
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        parts.push(format!("one of {}", code_list(&values)));
    }
    for (key, word) in [
        ("minimum", "at least"),
        ("maximum", "at most"),
        ("minLength", "length at least"),
        ("maxLength", "length at most"),
        ("minItems", "items at least"),
        ("maxItems", "items at most"),
    ] {
        if let Some(v) = schema.get(key) {
            parts.push(format!("{word} {}", number(v)));
        }
    }
    if let Some(p) = schema["pattern"].as_str() {
        parts.push(format!("matches `{}`", cell(p)));
    }
    for branch in schema["anyOf"].as_array().into_iter().flatten() {
        let inner = validation(branch);
        if !inner.is_empty() {
            parts.push(format!("or: {inner}"));
        }
    }
    if let Some(kind) = schema["x-kubernetes-list-type"].as_str() {
        let keys: Vec<&str> =
            schema["x-kubernetes-list-map-keys"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        parts.push(if keys.is_empty() {
            format!("list type {kind}")
        } else {
            format!("list {kind} by {}", code_list(&keys))
        });
    }
    for rule in schema["x-kubernetes-validations"].as_array().into_iter().flatten() {
        let message = rule["message"]
            .as_str()
            .map(cell)
            .unwrap_or_else(|| format!("`{}`", cell(rule["rule"].as_str().unwrap_or_default())));
        parts.push(format!("rule: {message}"));
    }
    parts.join("; ")
}

/// A JSON number as written in the schema, without a trailing `.0` on whole numbers.
fn number(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        _ => v.to_string(),
    }
}

fn code_list(items: &[&str]) -> String {
    items.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
}

/// Text fit for one table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_of_both_kinds_has_a_row_with_its_type_default_and_rules() {
        let page = markdown();
        assert!(page.contains("\n## FederatedStatefulSet\n"), "{page}");
        assert!(page.contains("\n## MemberCluster\n"), "{page}");
        let row = page.lines().find(|l| l.starts_with("| `spec.backend` |")).expect("spec.backend has a row");
        assert!(
            row.contains("`\"StatefulSet\"`") && row.contains("one of `StatefulSet`, `AdvancedStatefulSet`"),
            "{row}"
        );
        assert!(
            page.lines().any(|l| l.starts_with("| `spec.placement.clusters[].name` | string, required |")),
            "{page}"
        );
        // No row breaks the table: five cells, so four inner borders (a pipe in a cell is escaped).
        for l in page.lines().filter(|l| l.starts_with("| `")) {
            assert_eq!(l.matches(" | ").count(), 4, "{l}");
        }
    }

    #[test]
    fn cells_are_one_line_with_pipes_escaped() {
        assert_eq!(cell("a |\n  b"), "a \\| b");
        assert_eq!(number(&serde_json::json!(0.0)), "0");
        assert_eq!(number(&serde_json::json!(1.5)), "1.5");
    }
}
