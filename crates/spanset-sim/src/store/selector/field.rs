//! Field selectors as apimachinery's `fields.ParseSelector` reads them: comma-separated terms
//! (a backslash escapes `,` `=` `\` in values), each split at the first `!=`, `==` or `=`; no
//! whitespace trimming, as on a real server.

use serde_json::Value;

use crate::store::validate::syntax::go_quote;

/// One `field<op>value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    field: String,
    value: String,
    equal: bool,
}

/// A parsed field selector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    /// Terms, all of which must hold, in the sorted order the apiserver keeps.
    terms: Vec<Term>,
}

/// Splits on commas not escaped by a backslash, keeping escapes in place.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return vec![];
    }
    let (mut parts, mut start, mut escaped) = (Vec::new(), 0, false);
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            parts.push(&s[start..i]);
            start = i + 1;
        }
    }
    parts.push(&s[start..]);
    parts
}

/// Splits a term at the first operator; the field part supports no escaping.
fn split_term(term: &str) -> Option<(&str, &str, bool)> {
    (0..term.len()).filter(|&i| term.is_char_boundary(i)).find_map(|i| {
        let rest = &term[i..];
        ["!=", "==", "="].iter().find(|op| rest.starts_with(*op)).map(|op| (&term[..i], &rest[op.len()..], *op != "!="))
    })
}

/// Un-escapes a value; unescaped `,` or `=` and unknown escapes are errors (`UnescapeValue`).
fn unescape(v: &str) -> Result<String, String> {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(e) => return Err(format!("invalid field selector: invalid escape sequence: \\{e}")),
                None => return Err("invalid field selector: invalid escape sequence: \\".into()),
            },
            // Go prints the rune with %v, i.e. as its code point.
            ',' | '=' => return Err(format!("invalid field selector: unescaped character in value: {}", c as u32)),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// How a supported field reads from the object when it is not a plain dotted path.
fn field_path(field: &str) -> &str {
    match field {
        // Events: `source` is the reporting component (EventToSelectableFields).
        "source" => "source.component",
        "reportingComponent" => "reportingController",
        other => other,
    }
}

/// Boolean fields the apiserver always renders (a missing value reads as `false`).
fn is_bool_field(field: &str) -> bool {
    matches!(field, "spec.unschedulable" | "spec.hostNetwork")
}

impl FieldSelector {
    /// Parses `field=value`, `field==value`, `field!=value`, comma-joined; values may escape
    /// `\,` `\=` `\\`. Errors carry the apiserver's wording.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let (field, value, equal) =
                split_term(part).ok_or_else(|| format!("invalid selector: '{s}'; can't understand '{part}'"))?;
            terms.push(Term { field: field.to_string(), value: unescape(value)?, equal });
        }
        Ok(Self { terms })
    }

    /// Fails, with the generic apiserver wording, if a field is not in `supported`:
    /// `"foo.bar" is not a known field selector: only "metadata.name", "metadata.namespace"`.
    pub fn check_supported(&self, supported: &[&str]) -> Result<(), String> {
        match self.terms.iter().find(|t| !supported.contains(&t.field.as_str())) {
            None => Ok(()),
            Some(t) => {
                let list = supported.iter().map(|s| go_quote(s)).collect::<Vec<_>>().join(", ");
                Err(format!("{} is not a known field selector: only {list}", go_quote(&t.field)))
            }
        }
    }

    /// Checks (and converts, e.g. the legacy `spec.host` of pods) the fields for one resource
    /// with that resource's own wording: kinds with a registered field-label conversion say
    /// `field label not supported: X`, the rest use [`check_supported`](Self::check_supported).
    pub fn for_resource(mut self, group: &str, resource: &str) -> Result<Self, String> {
        if (group, resource) == ("", "pods") {
            for t in &mut self.terms {
                if t.field == "spec.host" {
                    t.field = "spec.nodeName".into();
                }
            }
        }
        let supported = super::supported_field_selectors(group, resource);
        if super::has_field_label_conversion(group, resource) {
            if let Some(t) = self.terms.iter().find(|t| !supported.contains(&t.field.as_str())) {
                return Err(format!("field label not supported: {}", t.field));
            }
            return Ok(self);
        }
        self.check_supported(supported)?;
        Ok(self)
    }

    /// Whether the object's fields satisfy every term: dotted paths into the object, numbers
    /// and booleans as text, a missing field as `""` (`"false"` for the boolean fields).
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|t| {
            let found = field_path(&t.field).split('.').try_fold(obj, |o, seg| o.get(seg));
            let actual = match found {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ if is_bool_field(&t.field) => "false".into(),
                _ => String::new(),
            };
            (actual == t.value) == t.equal
        })
    }

    /// The `metadata.name=X` equality, if present (lets the server skip a scan).
    pub fn exact_name(&self) -> Option<&str> {
        self.terms.iter().find(|t| t.equal && t.field == "metadata.name").map(|t| t.value.as_str())
    }

    /// Whether the selector has no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::selector::supported_field_selectors;

    #[test]
    fn terms_match_dotted_paths_with_missing_fields_empty() {
        let pod = json!({"metadata": {"name": "web-0", "namespace": "ns"}, "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}});
        assert!(FieldSelector::parse("metadata.name=web-0,status.phase=Running").unwrap().matches(&pod));
        assert!(FieldSelector::parse("spec.nodeName!=node-2").unwrap().matches(&pod));
        assert!(!FieldSelector::parse("status.phase==Pending").unwrap().matches(&pod));
        assert!(FieldSelector::parse("spec.nodeName=").unwrap().matches(&json!({"spec": {}})));
        assert!(FieldSelector::parse("spec.unschedulable=false").unwrap().matches(&json!({"spec": {}})));
        assert!(
            FieldSelector::parse("spec.unschedulable=true").unwrap().matches(&json!({"spec": {"unschedulable": true}}))
        );
        assert!(FieldSelector::parse("source=kubelet").unwrap().matches(&json!({"source": {"component": "kubelet"}})));
        assert!(FieldSelector::parse("").unwrap().is_empty());
        assert!(FieldSelector::parse(",,").unwrap().is_empty());
    }

    #[test]
    fn values_unescape_and_names_short_circuit() {
        assert_eq!(FieldSelector::parse("metadata.name=a\\,b").unwrap().exact_name(), Some("a,b"));
        assert_eq!(FieldSelector::parse("metadata.name==x\\=y\\\\").unwrap().exact_name(), Some("x=y\\"));
        assert_eq!(FieldSelector::parse("metadata.name!=x").unwrap().exact_name(), None);
        assert_eq!(FieldSelector::parse("a=b\\x").unwrap_err(), "invalid field selector: invalid escape sequence: \\x");
        assert_eq!(
            FieldSelector::parse("a=b=c").unwrap_err(),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(FieldSelector::parse("a=b\\").unwrap_err(), "invalid field selector: invalid escape sequence: \\");
    }

    #[test]
    fn terms_without_an_operator_are_refused() {
        assert_eq!(
            FieldSelector::parse("metadata.name=x,nonsense").unwrap_err(),
            "invalid selector: 'metadata.name=x,nonsense'; can't understand 'nonsense'"
        );
        // No trimming: the field keeps its space and is then unknown.
        let sel = FieldSelector::parse("metadata.name =x").unwrap();
        assert!(sel.check_supported(&["metadata.name"]).is_err());
    }

    #[test]
    fn unsupported_fields_are_worded_per_resource() {
        let generic = FieldSelector::parse("foo.bar=x").unwrap().for_resource("apps", "statefulsets").unwrap_err();
        assert_eq!(generic, r#""foo.bar" is not a known field selector: only "metadata.name", "metadata.namespace""#);
        let pods = FieldSelector::parse("foo.bar=x").unwrap().for_resource("", "pods").unwrap_err();
        assert_eq!(pods, "field label not supported: foo.bar");
        let nodes = FieldSelector::parse("metadata.namespace=x").unwrap().for_resource("", "nodes").unwrap_err();
        assert_eq!(nodes, "field label not supported: metadata.namespace");
        let legacy = FieldSelector::parse("spec.host=n1").unwrap().for_resource("", "pods").unwrap();
        assert!(legacy.matches(&json!({"spec": {"nodeName": "n1"}})));
        assert!(
            FieldSelector::parse("spec.nodeName=n")
                .unwrap()
                .check_supported(supported_field_selectors("", "pods"))
                .is_ok()
        );
    }
}
