//! `x-kubernetes-validations`: the CEL rules of a schema, compiled once with the schema by
//! kube-cel (the maintained implementation the admission policies use too), evaluated with
//! `self` (and `oldSelf` on an update, for transition rules, only where the old value exists),
//! and reported as the apiserver reports them: `spec.disruption: Invalid value: "object":
//! <message>` at the rule's node (`<nil>` for the root), or at its `fieldPath`, with its
//! `reason`; a rule that cannot be evaluated says `<error> evaluating rule: <message>`. From
//! 1.35 a failed rule shows its node's value instead of its type, and nothing for an object or
//! a list ([`ShownValue`]).

use std::collections::HashMap;

use kube_cel::{CompiledSchema, ErrorKind, ValidationError, Validator, compile_schema};
use serde_json::Value;

use super::path;
use crate::store::validate::{FieldError, FieldErrorKind};

/// What a rule's error needs besides what kube-cel reports: the type of the node it is on
/// (the apiserver's bad "value") and its static message.
struct RuleInfo {
    node_type: String,
    message: Option<String>,
}

/// What a failed rule's error shows as its bad value: the release's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShownValue {
    /// The node's schema type, quoted (`Invalid value: "object"`): through 1.34.
    #[default]
    SchemaType,
    /// The node's value (`Invalid value: 3`), none for an object or a list: from 1.35.
    NodeValue,
}

/// The compiled rules of one schema (`None` when it has none: nothing to evaluate).
pub(super) struct Rules {
    compiled: Option<CompiledSchema>,
    info: HashMap<String, RuleInfo>,
}

thread_local! {
    /// A validator carries the CEL function table; building it per write would be wasteful.
    static VALIDATOR: Validator = Validator::new();
}

impl Rules {
    /// Compiles every rule of the schema tree.
    pub(super) fn compile(schema: &Value) -> Self {
        let mut info = HashMap::new();
        collect(schema, &mut info);
        let compiled = if info.is_empty() { None } else { Some(compile_schema(schema)) };
        Self { compiled, info }
    }

    /// Whether the schema has any rule.
    pub(super) fn is_empty(&self) -> bool {
        self.compiled.is_none()
    }

    /// Evaluates the rules on `obj` (and `old` for transition rules), worded as `shown` says.
    pub(super) fn check(&self, obj: &Value, old: Option<&Value>, shown: ShownValue) -> Vec<FieldError> {
        let Some(compiled) = &self.compiled else { return Vec::new() };
        let result = VALIDATOR.with(|v| v.validate_compiled(compiled, obj, old));
        match result {
            Ok(()) => Vec::new(),
            Err(errs) => errs.iter().filter_map(|e| self.field_error(e, obj, shown)).collect(),
        }
    }

    fn field_error(&self, e: &ValidationError, obj: &Value, shown: ShownValue) -> Option<FieldError> {
        let at = self.compiled.as_ref().map(|c| printed_path(c, &e.field_path)).unwrap_or_default();
        let info = self.info.get(&e.rule);
        let node_type = info.map(|i| i.node_type.clone()).unwrap_or_default();
        let type_name = Some(Value::String(node_type.clone()));
        let (detail, value) = match e.kind {
            // A rule that returned false. From 1.35 it shows its node: a scalar's value (a rule
            // on a scalar has no `fieldPath` to move it elsewhere, so the path is the node's),
            // nothing for an object or a list.
            ErrorKind::ValidationFailure => {
                let value = match (shown, node_type.as_str()) {
                    (ShownValue::SchemaType, _) => type_name,
                    (ShownValue::NodeValue, "object" | "array") => None,
                    (ShownValue::NodeValue, _) => path::resolve(obj, &at).cloned().or(type_name),
                };
                (e.message.clone(), value)
            }
            ErrorKind::EvaluationError | ErrorKind::UnsupportedReference | ErrorKind::InvalidResult => {
                let why = e.message.strip_prefix("rule evaluation error: ").unwrap_or(&e.message);
                let what = info.and_then(|i| i.message.clone()).unwrap_or_else(|| e.rule.clone());
                (format!("{why} evaluating rule: {what}"), type_name)
            }
            // A rule that does not compile was refused with its CRD; nothing to report here.
            _ => return None,
        };
        let field = path::field(&at);
        let kind = match e.reason.as_deref() {
            Some("FieldValueForbidden") => FieldErrorKind::Forbidden,
            Some("FieldValueRequired") => FieldErrorKind::Required,
            Some("FieldValueDuplicate") => FieldErrorKind::Duplicate,
            _ => FieldErrorKind::Invalid,
        };
        let detail = if kind == FieldErrorKind::Duplicate { String::new() } else { detail };
        Some(FieldError { field, kind, value, detail })
    }

    /// The compile errors of the rules, as `path: message` (to refuse the CRD).
    pub(super) fn compile_errors(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(c) = &self.compiled {
            compile_errors(c, "", &mut out);
        }
        out
    }
}

/// kube-cel's path of a node (`spec.limits.cpu`) as the apiserver prints it, where a map's key
/// is in brackets (`spec.limits[cpu]`, Go's `field.Path.Key`): told apart from a property by the
/// schema. Where the schema does not say, the rest is kept as given.
fn printed_path(root: &CompiledSchema, raw: &str) -> String {
    if raw.is_empty() {
        return String::new();
    }
    let mut node = Some(root);
    let mut out = String::new();
    for segment in raw.split('.') {
        let (name, indexes) = segment.find('[').map_or((segment, ""), |i| (&segment[..i], &segment[i..]));
        match node {
            Some(n) if !name.is_empty() && !n.properties.contains_key(name) && n.additional_properties.is_some() => {
                out.push_str(&format!("[{name}]"));
                node = n.additional_properties.as_deref();
            }
            _ => {
                if !name.is_empty() {
                    out = path::child(&out, name);
                }
                node = node.and_then(|n| n.properties.get(name));
            }
        }
        for _ in indexes.split('[').filter(|s| !s.is_empty()) {
            node = node.and_then(|n| n.items.as_deref());
        }
        out.push_str(indexes);
    }
    out
}

fn compile_errors(c: &CompiledSchema, at: &str, out: &mut Vec<String>) {
    for e in c.compilation_errors() {
        out.push(format!("{}: {e}", path::field(at)));
    }
    for (k, child) in &c.properties {
        compile_errors(child, &path::child(at, k), out);
    }
    if let Some(items) = &c.items {
        compile_errors(items, &format!("{at}[*]"), out);
    }
    if let Some(additional) = &c.additional_properties {
        compile_errors(additional, &format!("{at}[*]"), out);
    }
}

fn collect(schema: &Value, info: &mut HashMap<String, RuleInfo>) {
    let node_type = schema.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    for r in schema.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten() {
        if let Some(rule) = r.get("rule").and_then(Value::as_str) {
            let message = r.get("message").and_then(Value::as_str).map(str::to_string);
            info.insert(rule.to_string(), RuleInfo { node_type: node_type.clone(), message });
        }
    }
    for child in super::subschemas(schema) {
        collect(child, info);
    }
}
