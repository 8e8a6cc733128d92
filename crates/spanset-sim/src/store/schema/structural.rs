//! Structural validation of a custom resource against its CRD's `openAPIV3Schema`, worded as
//! kube-openapi's validator words it and as the apiextensions-apiserver turns those errors into
//! field errors (`ValidateCustomResource`): `spec.replicas: Invalid value: -1: spec.replicas in
//! body should be greater than or equal to 0`, `Unsupported value`, `Required value`, `Too
//! long`, `Too many`, list-type uniqueness. `x-kubernetes-validations` are the CEL side
//! ([`super::rules`]); metadata is validated as ObjectMeta by the registry.

use std::collections::HashMap;

use regex::Regex;
use serde_json::Value;

use super::path;
use crate::store::validate::{FieldError, FieldErrorKind, syntax::go_quote};

/// Compiled `pattern`s of a schema, by source text (compiled once, with the schema).
pub(super) type Patterns = HashMap<String, Regex>;

/// Collects and compiles every `pattern` of a schema tree.
pub(super) fn compile_patterns(schema: &Value, out: &mut Patterns) {
    if let Some(p) = schema.get("pattern").and_then(Value::as_str)
        && !out.contains_key(p)
        && let Ok(re) = Regex::new(p)
    {
        out.insert(p.to_string(), re);
    }
    for child in super::subschemas(schema) {
        compile_patterns(child, out);
    }
}

/// The JSON type name of a value, as kube-openapi names it in `must be of type` errors.
pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `%v` of a float64 (what kube-openapi prints for `minimum`/`maximum`): the shortest
/// digits, in exponent form (`1e+06`) when the exponent is below -4 or at least 6.
pub(super) fn go_float(f: f64) -> String {
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        format!("{f}")
    } else {
        format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

fn err(path: &str, kind: FieldErrorKind, value: Option<Value>, detail: String) -> FieldError {
    FieldError { field: path::field(path), kind, value, detail }
}

fn flag(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool) == Some(true)
}

/// Validates `v` against schema node `s` at `path`, appending errors.
pub(super) fn validate(s: &Value, v: &Value, path: &str, patterns: &Patterns, errs: &mut Vec<FieldError>) {
    let in_body = |what: String| format!("{path} in body {what}");
    if v.is_null() && flag(s, "nullable") {
        return;
    }
    let declared = s.get("type").and_then(Value::as_str);
    let int_or_string = flag(s, "x-kubernetes-int-or-string");
    let actual = type_name(v);
    let type_ok = if int_or_string {
        matches!(actual, "integer" | "string")
    } else {
        match declared {
            None => !v.is_null() || flag(s, "x-kubernetes-preserve-unknown-fields"),
            Some("number") => matches!(actual, "integer" | "number"),
            Some(t) => t == actual,
        }
    };
    // kube-openapi checks the type first, then (whatever the type) the enum.
    if !type_ok {
        let want = if int_or_string { "integer,string" } else { declared.unwrap_or("object") };
        errs.push(err(
            path,
            FieldErrorKind::TypeInvalid,
            Some(Value::String(actual.into())),
            in_body(format!("must be of type {want}: {}", go_quote(actual))),
        ));
        enum_check(s, v, path, errs);
        return;
    }
    // Then in kube-openapi's order: junctors, string, number and array keywords, the enum,
    // the object's keywords and properties.
    junctors(s, v, path, patterns, errs);
    match v {
        Value::String(text) => string_checks(s, text, path, patterns, errs),
        Value::Number(n) => number_checks(s, v, n.as_f64().unwrap_or(f64::NAN), path, errs),
        Value::Array(items) => array_checks(s, items, path, patterns, errs),
        _ => {}
    }
    enum_check(s, v, path, errs);
    if let Value::Object(map) = v {
        object_checks(s, map, path, patterns, errs);
    }
}

fn enum_check(s: &Value, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(allowed) = s.get("enum").and_then(Value::as_array) else { return };
    if allowed.contains(v) {
        return;
    }
    let listed: Vec<String> =
        allowed.iter().map(|a| go_quote(&a.as_str().map(str::to_string).unwrap_or_else(|| a.to_string()))).collect();
    errs.push(err(
        path,
        FieldErrorKind::NotSupported,
        Some(v.clone()),
        format!("supported values: {}", listed.join(", ")),
    ));
}

fn string_checks(s: &Value, text: &str, path: &str, patterns: &Patterns, errs: &mut Vec<FieldError>) {
    let len = text.chars().count() as u64;
    let value = || Some(Value::String(text.to_string()));
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        let unit = if max == 1 { "byte" } else { "bytes" };
        errs.push(err(path, FieldErrorKind::TooLong, value(), format!("may not be more than {max} {unit}")));
    }
    if let Some(min) = s.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        errs.push(err(
            path,
            FieldErrorKind::Invalid,
            value(),
            format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str)
        && patterns.get(p).is_some_and(|re| !re.is_match(text))
    {
        errs.push(err(path, FieldErrorKind::Invalid, value(), format!("{path} in body should match '{p}'")));
    }
    if let Some(format) = s.get("format").and_then(Value::as_str)
        && !format_ok(format, text)
    {
        errs.push(err(
            path,
            FieldErrorKind::TypeInvalid,
            value(),
            format!("{path} in body must be of type {format}: {}", go_quote(text)),
        ));
    }
}

/// The formats the apiserver checks on strings (a subset of kube-openapi's registry; unknown
/// formats, like `int32` on strings, are not checked).
fn format_ok(format: &str, text: &str) -> bool {
    use base64::Engine;
    match format {
        "date-time" | "datetime" => text.parse::<jiff::Timestamp>().is_ok(),
        "date" => text.parse::<jiff::civil::Date>().is_ok() && text.len() == 10,
        "byte" => base64::engine::general_purpose::STANDARD.decode(text).is_ok(),
        "uuid" => {
            let parts: Vec<&str> = text.split('-').collect();
            parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
                && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
        }
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        _ => true,
    }
}

fn number_checks(s: &Value, v: &Value, n: f64, path: &str, errs: &mut Vec<FieldError>) {
    let mut bound = |key: &str, exclusive_key: &str, fails: &dyn Fn(f64, bool) -> bool, words: (&str, &str)| {
        if let Some(limit) = s.get(key).and_then(Value::as_f64) {
            let exclusive = flag(s, exclusive_key);
            if fails(limit, exclusive) {
                let words = if exclusive { words.1 } else { words.0 };
                errs.push(err(
                    path,
                    FieldErrorKind::Invalid,
                    Some(v.clone()),
                    format!("{path} in body should be {words} {}", go_float(limit)),
                ));
            }
        }
    };
    bound(
        "minimum",
        "exclusiveMinimum",
        &|min, ex| if ex { n <= min } else { n < min },
        ("greater than or equal to", "greater than"),
    );
    bound(
        "maximum",
        "exclusiveMaximum",
        &|max, ex| if ex { n >= max } else { n > max },
        ("less than or equal to", "less than"),
    );
    if let Some(m) = s.get("multipleOf").and_then(Value::as_f64)
        && m > 0.0
        && (n / m).fract() != 0.0
    {
        errs.push(err(
            path,
            FieldErrorKind::Invalid,
            Some(v.clone()),
            format!("{path} in body should be a multiple of {}", go_float(m)),
        ));
    }
}

fn array_checks(s: &Value, items: &[Value], path: &str, patterns: &Patterns, errs: &mut Vec<FieldError>) {
    let len = items.len() as u64;
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
        && len > max
    {
        errs.push(err(path, FieldErrorKind::TooMany, Some(len.into()), format!("must have at most {max} items")));
    }
    if let Some(min) = s.get("minItems").and_then(Value::as_u64)
        && len < min
    {
        errs.push(err(
            path,
            FieldErrorKind::Invalid,
            Some(len.into()),
            format!("{path} in body should have at least {min} items"),
        ));
    }
    if let Some(item_schema) = s.get("items") {
        for (i, item) in items.iter().enumerate() {
            validate(item_schema, item, &path::index(path, i), patterns, errs);
        }
    }
    list_type(s, items, path, errs);
}

/// `x-kubernetes-list-type: set` (items unique) and `map` (unique by the map keys).
fn list_type(s: &Value, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    let key_of = |item: &Value| -> Option<Value> {
        match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => Some(item.clone()),
            Some("map") => {
                let keys = s.get("x-kubernetes-list-map-keys").and_then(Value::as_array)?;
                let mut key = serde_json::Map::new();
                for k in keys.iter().filter_map(Value::as_str) {
                    if let Some(v) = item.get(k) {
                        key.insert(k.to_string(), v.clone());
                    }
                }
                Some(Value::Object(key))
            }
            _ => None,
        }
    };
    let mut seen: Vec<Value> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(key) = key_of(item) else { return };
        if seen.contains(&key) {
            errs.push(err(&path::index(path, i), FieldErrorKind::Duplicate, Some(key), String::new()));
        } else {
            seen.push(key);
        }
    }
}

fn object_checks(
    s: &Value,
    map: &serde_json::Map<String, Value>,
    path: &str,
    patterns: &Patterns,
    errs: &mut Vec<FieldError>,
) {
    for required in s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if !map.contains_key(required) {
            errs.push(err(&path::child(path, required), FieldErrorKind::Required, None, String::new()));
        }
    }
    let count = map.len() as u64;
    if let Some(max) = s.get("maxProperties").and_then(Value::as_u64)
        && count > max
    {
        errs.push(err(path, FieldErrorKind::TooMany, Some(count.into()), format!("must have at most {max} items")));
    }
    if let Some(min) = s.get("minProperties").and_then(Value::as_u64)
        && count < min
    {
        errs.push(err(
            path,
            FieldErrorKind::Invalid,
            Some(count.into()),
            format!("{path} in body should have at least {min} properties"),
        ));
    }
    if flag(s, "x-kubernetes-embedded-resource") {
        for key in ["apiVersion", "kind"] {
            if map.get(key).and_then(Value::as_str).unwrap_or("").is_empty() {
                errs.push(err(&path::child(path, key), FieldErrorKind::Required, None, "must not be empty".into()));
            }
        }
    }
    let props = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties").filter(|a| a.is_object());
    let root = path.is_empty();
    for (k, v) in map {
        // The root's (and an embedded object's) type and object meta are the registry's.
        if (root || flag(s, "x-kubernetes-embedded-resource"))
            && matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
        {
            continue;
        }
        match (props.and_then(|p| p.get(k)), additional) {
            (Some(child), _) | (None, Some(child)) => validate(child, v, &path::child(path, k), patterns, errs),
            _ => {}
        }
    }
}

/// `allOf` (every branch), `anyOf` (at least one), `oneOf` (exactly one).
fn junctors(s: &Value, v: &Value, path: &str, patterns: &Patterns, errs: &mut Vec<FieldError>) {
    let branches = |key: &str| s.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    for b in branches("allOf") {
        validate(&b, v, path, patterns, errs);
    }
    for (key, what) in [("anyOf", "at least one schema (anyOf)"), ("oneOf", "one and only one schema (oneOf)")] {
        let bs = branches(key);
        if bs.is_empty() {
            continue;
        }
        let results: Vec<Vec<FieldError>> = bs
            .iter()
            .map(|b| {
                let mut e = Vec::new();
                validate(b, v, path, patterns, &mut e);
                e
            })
            .collect();
        let passing = results.iter().filter(|e| e.is_empty()).count();
        let ok = if key == "anyOf" { passing >= 1 } else { passing == 1 };
        if !ok {
            errs.push(err(
                path,
                FieldErrorKind::Invalid,
                Some(v.clone()),
                format!("{path} in body must validate {what}"),
            ));
            if let Some(best) = results.into_iter().filter(|e| !e.is_empty()).min_by_key(Vec::len) {
                errs.extend(best);
            }
        }
    }
}
