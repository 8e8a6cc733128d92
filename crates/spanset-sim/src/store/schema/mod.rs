//! What kube-apiserver enforces on a custom resource from its CRD's structural schema
//! (`spec.versions[].schema.openAPIV3Schema`): pruning of unknown fields (and the
//! `fieldValidation` directive that refuses or reports them), defaulting, structural
//! validation ([`structural`]) and the `x-kubernetes-validations` CEL rules ([`rules`]), with
//! validation ratcheting on updates. A [`CrdSchema`] is parsed and compiled once, when its CRD
//! is installed, and kept with the served [`ResourceType`](super::resources::ResourceType), so
//! that no write parses or compiles it again.

mod default;
mod prune;
mod rules;
mod structural;

pub use rules::ShownValue;
#[cfg(test)]
mod tests;

use serde_json::{Value, json};

use crate::store::{
    error::{ApiError, Cause},
    resources::ScalePaths,
    validate::{FieldError, FieldErrorKind},
};

/// Field paths as the apiserver prints them: `spec.clusters[0].name`, `<nil>` for the root.
pub(crate) mod path {
    /// `parent.key`.
    pub fn child(parent: &str, key: &str) -> String {
        if parent.is_empty() { key.to_string() } else { format!("{parent}.{key}") }
    }

    /// `parent[i]`.
    pub fn index(parent: &str, i: usize) -> String {
        format!("{parent}[{i}]")
    }

    /// The printed field: the path, or `<nil>` for the root (a nil `field.Path` in Go).
    pub fn field(path: &str) -> String {
        if path.is_empty() { "<nil>".into() } else { path.to_string() }
    }

    /// The value at a printed path (`a.b[0].c`), if any.
    pub fn resolve<'a>(obj: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
        if path == "<nil>" || path.is_empty() {
            return Some(obj);
        }
        let mut cur = obj;
        for part in path.split('.') {
            let (name, indexes) = match part.find('[') {
                Some(i) => (&part[..i], &part[i..]),
                None => (part, ""),
            };
            if !name.is_empty() {
                cur = cur.get(name)?;
            }
            for ix in indexes.split('[').filter(|s| !s.is_empty()) {
                let ix = ix.trim_end_matches(']');
                // A list's index, or a map's key (`spec.limits[cpu]`).
                cur = match ix.parse::<usize>() {
                    Ok(i) => cur.get(i)?,
                    Err(_) => cur.get(ix)?,
                };
            }
        }
        Some(cur)
    }
}

/// The `fieldValidation` directive of a write: what to do with fields the schema does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop them silently (the simulated components' own writes; `--validate=false`).
    #[default]
    Ignore,
    /// Drop them and say so in a `Warning` header (the apiserver's default for API requests).
    Warn,
    /// Refuse the write with 400 (kubectl's default, `--validate=strict`).
    Strict,
}

impl FieldValidation {
    /// Reads the query parameter of a write whose options are `options_kind` (`CreateOptions`,
    /// `UpdateOptions`, `PatchOptions`); absent means `Warn`, as on the apiserver.
    pub fn parse(raw: Option<&str>, options_kind: &str) -> Result<Self, ApiError> {
        match raw {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Strict") => Ok(Self::Strict),
            Some("Ignore") => Ok(Self::Ignore),
            Some(other) => {
                let err = FieldError {
                    field: "fieldValidation".into(),
                    kind: FieldErrorKind::NotSupported,
                    value: Some(Value::String(other.into())),
                    detail: r#"supported values: "", "Ignore", "Strict", "Warn""#.into(),
                };
                let cause = Cause {
                    reason: err.cause_reason().into(),
                    message: err.to_string().trim_start_matches("fieldValidation: ").into(),
                    field: err.field.clone(),
                };
                Err(ApiError::invalid(options_kind, "meta.k8s.io", "", err.to_string(), vec![cause]))
            }
        }
    }
}

/// Which part of an object a write validates: everything, or (the `/status` subresource) the
/// status only — CEL rules always see the whole object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Create, or an update of the main resource.
    Whole,
    /// An update through `/status`.
    Status,
}

/// One version's parsed and compiled schema.
pub struct CrdSchema {
    root: Value,
    patterns: structural::Patterns,
    rules: rules::Rules,
}

impl std::fmt::Debug for CrdSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrdSchema").field("rules", &!self.rules.is_empty()).finish_non_exhaustive()
    }
}

impl PartialEq for CrdSchema {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
    }
}

/// The reason CEL rules were skipped: the object already failed in a way that could make them
/// misbehave (the apiserver's `hasBlockingErr`).
const RULES_SKIPPED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

impl CrdSchema {
    /// Parses an `openAPIV3Schema`, compiling its patterns and CEL rules.
    pub fn new(open_api_v3_schema: &Value) -> Self {
        let mut patterns = structural::Patterns::new();
        structural::compile_patterns(open_api_v3_schema, &mut patterns);
        Self { root: open_api_v3_schema.clone(), patterns, rules: rules::Rules::compile(open_api_v3_schema) }
    }

    /// Rules that do not compile, as `path: error` (a CRD carrying one is refused).
    pub fn compile_errors(&self) -> Vec<String> {
        self.rules.compile_errors()
    }

    /// Decodes a written object as the apiserver does: prunes unknown fields (refusing them
    /// under `Strict`, returning them as warnings under `Warn`), then fills in defaults.
    pub fn decode(
        &self,
        kind: &str,
        version: &str,
        obj: &mut Value,
        mode: FieldValidation,
    ) -> Result<Vec<String>, ApiError> {
        let mut unknown = Vec::new();
        prune::prune(&self.root, obj, "", &mut unknown);
        unknown.sort();
        let listed: Vec<String> = unknown.iter().map(|p| format!("unknown field \"{p}\"")).collect();
        let warnings = match mode {
            FieldValidation::Strict if !listed.is_empty() => {
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                    listed.join(", ")
                )));
            }
            FieldValidation::Warn => listed,
            _ => Vec::new(),
        };
        default::apply(&self.root, obj);
        Ok(warnings)
    }

    /// Server-side apply types the applied configuration against the schema before anything
    /// else, whatever `fieldValidation` says: a field the schema does not declare fails the
    /// request as structured-merge-diff words it (`failed to create typed patch object
    /// (default/web; spanset.dev/v1alpha1, Kind=FederatedStatefulSet): .spec.replica: field not
    /// declared in schema`, a Status without a reason).
    pub fn check_applied(&self, doc: &Value, object: &str, api_version: &str, kind: &str) -> Result<(), ApiError> {
        let mut unknown = Vec::new();
        prune::prune(&self.root, &mut doc.clone(), "", &mut unknown);
        unknown.sort();
        let errs: Vec<String> = unknown.iter().map(|p| format!(".{p}: field not declared in schema")).collect();
        let listed = match errs.as_slice() {
            [] => return Ok(()),
            [one] => one.clone(),
            many => format!("errors:\n  {}", many.join("\n  ")),
        };
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        Err(ApiError::custom(
            500,
            "",
            format!("failed to create typed patch object ({object}; {group}/{version}, Kind={kind}): {listed}"),
        ))
    }

    /// Validates an object (after decoding): the schema, then — unless that found an error that
    /// blocks them — the CEL rules. On an update (`old`), errors on values left unchanged are
    /// ratcheted away, so an object stored under an older schema can still be written.
    /// `scale`: the resource's `/scale` paths, whose replicas must be int32s whatever the schema
    /// says (checked after the schema, before the rules, and never blocking them). `shown`: how
    /// the cluster's release words a failed rule's value.
    pub fn validate(
        &self,
        obj: &Value,
        old: Option<&Value>,
        part: Part,
        scale: Option<&ScalePaths>,
        shown: ShownValue,
    ) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match part {
            Part::Whole => structural::validate(&self.root, obj, "", &self.patterns, &mut errs),
            Part::Status => {
                if let (Some(s), Some(v)) = (self.root.pointer("/properties/status"), obj.get("status")) {
                    structural::validate(s, v, "status", &self.patterns, &mut errs);
                }
            }
        }
        ratchet(&mut errs, obj, old);
        if let Some(scale) = scale {
            if part == Part::Whole {
                errs.extend(scale_replicas(obj, &scale.spec_replicas));
            }
            errs.extend(scale_replicas(obj, &scale.status_replicas));
        }
        let blocking = errs.iter().any(|e| {
            matches!(
                e.kind,
                FieldErrorKind::NotSupported
                    | FieldErrorKind::Required
                    | FieldErrorKind::TooLong
                    | FieldErrorKind::TooMany
                    | FieldErrorKind::TypeInvalid
            )
        });
        if blocking {
            if !self.rules.is_empty() {
                errs.push(FieldError {
                    field: "<nil>".into(),
                    kind: FieldErrorKind::Invalid,
                    value: Some(Value::Null),
                    detail: RULES_SKIPPED.into(),
                });
            }
            return errs;
        }
        let mut rule_errs = self.rules.check(obj, old, shown);
        ratchet(&mut rule_errs, obj, old);
        errs.extend(rule_errs);
        errs
    }
}

/// The apiserver's check of a `/scale` replicas path on every write of a custom resource: the
/// value, where present, is an integer from 0 to 2³¹−1. Its words are Go's (`%T` of the decoded
/// JSON value) and the path is the CRD's own, leading dot included.
fn scale_replicas(obj: &Value, path: &str) -> Option<FieldError> {
    let pointer = format!("/{}", path.trim_start_matches('.').replace('.', "/"));
    let value = obj.pointer(&pointer)?;
    let invalid = |value: Value, detail: String| FieldError {
        field: path.to_string(),
        kind: FieldErrorKind::Invalid,
        value: Some(value),
        detail,
    };
    match value.as_i64() {
        Some(n) if n < 0 => Some(invalid(json!(n), "should be a non-negative integer".into())),
        Some(n) if n > i64::from(i32::MAX) => {
            Some(invalid(json!(n), format!("should be less than or equal to {}", i32::MAX)))
        }
        Some(_) => None,
        None => {
            let (shown, go_type) = match value {
                Value::String(s) => (s.clone(), "string"),
                Value::Bool(b) => (b.to_string(), "bool"),
                Value::Number(n) => (n.to_string(), "float64"),
                Value::Object(_) => ("map[...]".to_string(), "map[string]interface {}"),
                Value::Array(_) => ("[...]".to_string(), "[]interface {}"),
                Value::Null => ("<nil>".to_string(), "<nil>"),
            };
            Some(invalid(json!(0), format!("{path} accessor error: {shown} is of the type {go_type}, expected int64")))
        }
    }
}

/// Validation ratcheting: an error about a value the update did not change is dropped (a
/// `Required` error is about its parent object).
fn ratchet(errs: &mut Vec<FieldError>, obj: &Value, old: Option<&Value>) {
    let Some(old) = old else { return };
    errs.retain(|e| {
        let at = if e.kind == FieldErrorKind::Required {
            e.field.rsplit_once('.').map(|(parent, _)| parent).unwrap_or("")
        } else {
            e.field.as_str()
        };
        path::resolve(obj, at) != path::resolve(old, at)
    });
}

/// The schema-bearing children of a schema node (for walks over the whole tree).
pub(crate) fn subschemas(s: &Value) -> Vec<&Value> {
    let mut out: Vec<&Value> = Vec::new();
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        out.extend(props.values());
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(v) = s.get(key).filter(|v| v.is_object()) {
            out.push(v);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        out.extend(s.get(key).and_then(Value::as_array).into_iter().flatten());
    }
    out
}
