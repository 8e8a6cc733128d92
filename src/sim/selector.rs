//! Label and field selectors, as the apiserver parses and applies them (k8s-api.md A.9): used
//! by list and watch filtering, by the Scale subresource, and by the simulated controllers.

use serde_json::{Map, Value};

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        match self {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        }
    }

    fn render(&self) -> String {
        match self {
            Requirement::Equals(k, v) => format!("{k}={v}"),
            Requirement::NotEquals(k, v) => format!("{k}!={v}"),
            Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
            Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            Requirement::Exists(k) => k.clone(),
            Requirement::DoesNotExist(k) => format!("!{k}"),
        }
    }
}

/// A parsed label selector (query-string syntax or metav1.LabelSelector JSON), used by list and
/// watch filtering and by the simulated StatefulSet controller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    reqs: Vec<Requirement>,
}

fn valid_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b))
    });
    name_ok && prefix_ok
}

fn valid_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && v.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && v.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric()))
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn parse_requirement(raw: &str) -> Result<Requirement, String> {
    let term = raw.trim();
    let bad = |why: &str| format!("unable to parse requirement: {why}: {term:?}");
    let check_key = |k: &str| -> Result<String, String> {
        let k = k.trim();
        if valid_key(k) { Ok(k.to_string()) } else { Err(bad(&format!("invalid label key {k:?}"))) }
    };
    let check_value = |v: &str| -> Result<String, String> {
        let v = v.trim();
        if valid_value(v) { Ok(v.to_string()) } else { Err(bad(&format!("invalid label value {v:?}"))) }
    };
    if let Some(k) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(check_key(k)?));
    }
    for (op, neg) in [(" notin ", true), (" in ", false)] {
        if let Some(idx) = term.find(op) {
            let key = check_key(&term[..idx])?;
            let set = term[idx + op.len()..].trim();
            let inner = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| bad("expected a set in parentheses"))?;
            let values = inner.split(',').map(check_value).collect::<Result<Vec<_>, _>>()?;
            return Ok(if neg { Requirement::NotIn(key, values) } else { Requirement::In(key, values) });
        }
    }
    for (op, kind) in [("!=", 0), ("==", 1), ("=", 1)] {
        if let Some(idx) = term.find(op) {
            let key = check_key(&term[..idx])?;
            let value = check_value(&term[idx + op.len()..])?;
            return Ok(if kind == 0 { Requirement::NotEquals(key, value) } else { Requirement::Equals(key, value) });
        }
    }
    Ok(Requirement::Exists(check_key(term)?))
}

impl LabelSelector {
    /// Parses `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, comma-joined
    /// (AND); an empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        let reqs = split_top(s).into_iter().map(parse_requirement).collect::<Result<_, _>>()?;
        Ok(Self { reqs })
    }

    /// Reads a `metav1.LabelSelector` (`matchLabels` and `matchExpressions`).
    pub fn from_api(sel: &Value) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in ml {
                reqs.push(Requirement::Equals(k.clone(), v.as_str().unwrap_or("").to_string()));
            }
        }
        for e in sel.get("matchExpressions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("").to_string();
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|vs| vs.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            reqs.push(match e.get("operator").and_then(Value::as_str) {
                Some("In") => Requirement::In(key, values),
                Some("NotIn") => Requirement::NotIn(key, values),
                Some("Exists") => Requirement::Exists(key),
                Some("DoesNotExist") => Requirement::DoesNotExist(key),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            });
        }
        Ok(Self { reqs })
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.reqs.iter().all(|r| r.matches(labels))
    }

    /// Whether this selector selects everything.
    pub fn is_everything(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The selector in query-string form, as `Scale.status.selector` carries it.
    pub fn to_query_string(&self) -> String {
        self.reqs.iter().map(Requirement::render).collect::<Vec<_>>().join(",")
    }
}

/// A parsed field selector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    /// (field, value, equal?) triples, all of which must hold.
    terms: Vec<(String, String, bool)>,
}

/// Un-escapes a field selector value (`\,` `\=` `\\`).
fn unescape(v: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                _ => return Err(format!("invalid field selector: invalid escape sequence in {v:?}")),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Splits on commas not escaped by a backslash.
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let (mut parts, mut cur, mut escaped) = (Vec::new(), String::new(), false);
    for c in s.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if escaped {
        cur.push('\\');
    }
    parts.push(cur);
    parts
}

impl FieldSelector {
    /// Parses `field=value`, `field==value`, `field!=value`, comma-joined.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for raw in split_unescaped(s, ',') {
            let raw = raw.trim();
            if raw.is_empty() {
                continue;
            }
            let (field, value, eq) = if let Some((f, v)) = raw.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = raw.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = raw.split_once('=') {
                (f, v, true)
            } else {
                return Err(format!("invalid field selector: {raw:?} must be of the form field=value"));
            };
            terms.push((field.trim().to_string(), unescape(value.trim())?, eq));
        }
        Ok(Self { terms })
    }

    /// Fails, with the apiserver's wording, if a field is not one the resource supports.
    pub fn check_supported(&self, supported: &[&str]) -> Result<(), String> {
        match self.terms.iter().find(|(f, _, _)| !supported.contains(&f.as_str())) {
            None => Ok(()),
            Some((f, _, _)) => {
                let list = supported.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
                Err(format!("{f:?} is not a known field selector: only {list}"))
            }
        }
    }

    /// Whether the object's fields satisfy every term (a missing field reads as `""`).
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|(f, v, eq)| {
            let actual = f.split('.').try_fold(obj, |o, seg| o.get(seg));
            let actual = match actual {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            };
            (actual == *v) == *eq
        })
    }

    /// The `metadata.name=X` equality, if present (lets the server skip a scan).
    pub fn exact_name(&self) -> Option<&str> {
        self.terms.iter().find(|(f, _, eq)| *eq && f == "metadata.name").map(|(_, v, _)| v.as_str())
    }
}

/// Field selectors each resource supports, as a real apiserver does.
pub fn supported_field_selectors(group: &str, resource: &str) -> &'static [&'static str] {
    match (group, resource) {
        ("", "pods") => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "metadata.name",
            "metadata.namespace",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "secrets") => &["metadata.name", "metadata.namespace", "type"],
        ("", "namespaces") => &["metadata.name", "metadata.namespace", "status.phase"],
        ("", "nodes") => &["metadata.name", "metadata.namespace", "spec.unschedulable"],
        ("", "persistentvolumes") => &["metadata.name", "metadata.namespace", "name"],
        ("apps", "statefulsets") => &["metadata.name", "metadata.namespace", "status.successful"],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn equality_and_set_based_requirements() {
        let l = labels(json!({"app": "web", "tier": "db", "env": "prod"}));
        let yes = [
            "app=web",
            "app==web",
            "app!=api",
            "tier in (db,cache)",
            "env notin (dev)",
            "app",
            "!missing",
            "app=web,tier in (db)",
            " app = web , env ",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(Some(&l)), "{s} should match");
        }
        let no =
            ["app=api", "app!=web", "tier in (cache)", "env notin (prod,dev)", "missing", "!app", "app=web,tier=cache"];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(Some(&l)), "{s} should not match");
        }
        assert!(LabelSelector::parse("").unwrap().is_everything());
        assert!(LabelSelector::parse("x notin (a)").unwrap().matches(None), "notin matches a missing key");
    }

    #[test]
    fn bad_selectors_are_refused_with_a_readable_reason() {
        for s in ["app=web,=x", "a in b", "bad key=x", "app=va lue", "-app=x"] {
            let e = LabelSelector::parse(s).unwrap_err();
            assert!(e.starts_with("unable to parse requirement"), "{s}: {e}");
        }
    }

    #[test]
    fn api_selectors_render_as_query_strings() {
        let sel = LabelSelector::from_api(&json!({
            "matchLabels": {"app": "quiz"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}, {"key": "x", "operator": "DoesNotExist"}],
        }))
        .unwrap();
        assert_eq!(sel.to_query_string(), "app=quiz,tier in (a,b),!x");
        assert!(sel.matches(Some(&labels(json!({"app": "quiz", "tier": "b"})))));
        assert!(LabelSelector::from_api(&json!({"matchExpressions": [{"key": "a", "operator": "Near"}]})).is_err());
    }

    #[test]
    fn field_selectors_match_paths_and_name_their_supported_fields() {
        let pod = json!({"metadata": {"name": "web-0", "namespace": "ns"}, "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}});
        assert!(FieldSelector::parse("metadata.name=web-0,status.phase=Running").unwrap().matches(&pod));
        assert!(FieldSelector::parse("spec.nodeName!=node-2").unwrap().matches(&pod));
        assert!(!FieldSelector::parse("status.phase==Pending").unwrap().matches(&pod));
        assert!(
            FieldSelector::parse("spec.nodeName=").unwrap().matches(&json!({"spec": {}})),
            "missing reads as empty"
        );
        assert_eq!(FieldSelector::parse("metadata.name=a\\,b").unwrap().exact_name(), Some("a,b"));
        let err = FieldSelector::parse("foo.bar=x")
            .unwrap()
            .check_supported(supported_field_selectors("apps", "controllerrevisions"))
            .unwrap_err();
        assert_eq!(err, r#""foo.bar" is not a known field selector: only "metadata.name", "metadata.namespace""#);
        assert!(
            FieldSelector::parse("spec.nodeName=n")
                .unwrap()
                .check_supported(supported_field_selectors("", "pods"))
                .is_ok()
        );
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
