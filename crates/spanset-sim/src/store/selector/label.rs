//! Label selectors: a lexer and recursive-descent parser for the query-string syntax that
//! follows the grammar and error wording of apimachinery's `labels.Parse`, plus conversion from
//! `metav1.LabelSelector` JSON. Both sort requirements by key, as the apiserver does, so
//! `to_query_string` prints what a real `Scale.status.selector` carries.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::store::validate::syntax::{go_quote, label_value, qualified_name};

/// A requirement's operator (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One label requirement: a key, an operator and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

/// Go's `%#v` of a `[]string`, used in requirement errors.
fn go_string_slice(vs: &[String]) -> String {
    if vs.is_empty() {
        return "[]string(nil)".into();
    }
    format!("[]string{{{}}}", vs.iter().map(|v| go_quote(v)).collect::<Vec<_>>().join(", "))
}

/// Joins errors the way `field.ErrorList.ToAggregate()` prints them.
fn aggregate(errs: Vec<String>) -> Result<(), String> {
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.into_iter().next().unwrap_or_default()),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

impl Requirement {
    /// `labels.NewRequirement`: checks values against the operator and label-value syntax.
    /// `key_path` is where a bad key is reported (`None` when the caller already checked it).
    fn new(key: &str, op: Op, values: Vec<String>, key_path: Option<&str>) -> Result<Self, String> {
        let mut errs = Vec::new();
        if let Some(path) = key_path {
            let msgs = qualified_name(key);
            if !msgs.is_empty() {
                errs.push(format!("{path}: Invalid value: {}: {}", go_quote(key), msgs.join("; ")));
            }
        }
        let invalid = |detail: &str| format!("values: Invalid value: {}: {detail}", go_string_slice(&values));
        match op {
            Op::In | Op::NotIn if values.is_empty() => {
                errs.push(invalid("for 'in', 'notin' operators, values set can't be empty"))
            }
            Op::Equals | Op::DoubleEquals | Op::NotEquals if values.len() != 1 => {
                errs.push(invalid("exact-match compatibility requires one single value"))
            }
            Op::Exists | Op::DoesNotExist if !values.is_empty() => {
                errs.push(invalid("values set must be empty for exists and does not exist"))
            }
            Op::GreaterThan | Op::LessThan => {
                if values.len() != 1 {
                    errs.push(invalid("for 'Gt', 'Lt' operators, exactly one value is required"));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(format!(
                            "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                            go_quote(v)
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            let msgs = label_value(v);
            if !msgs.is_empty() {
                errs.push(format!("values[{i}][{key}]: Invalid value: {}: {}", go_quote(v), msgs.join("; ")));
            }
        }
        aggregate(errs)?;
        Ok(Self { key: key.to_string(), op, values })
    }

    fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let got = labels.and_then(|l| l.get(&self.key)).map(|v| v.as_str().unwrap_or(""));
        let has = |x: &str| self.values.iter().any(|v| v == x);
        match self.op {
            Op::In | Op::Equals | Op::DoubleEquals => got.is_some_and(has),
            Op::NotIn | Op::NotEquals => got.is_none_or(|x| !has(x)),
            Op::Exists => got.is_some(),
            Op::DoesNotExist => got.is_none(),
            Op::GreaterThan | Op::LessThan => {
                let (Some(have), [want]) = (got.and_then(|x| x.parse::<i64>().ok()), self.values.as_slice()) else {
                    return false;
                };
                let Ok(want) = want.parse::<i64>() else { return false };
                if self.op == Op::GreaterThan { have > want } else { have < want }
            }
        }
    }

    /// `Requirement.String()`: values sorted on output, the operator spelled as parsed.
    fn render(&self) -> String {
        let mut values = self.values.clone();
        values.sort();
        let v = values.join(",");
        let k = &self.key;
        match self.op {
            Op::Equals => format!("{k}={v}"),
            Op::DoubleEquals => format!("{k}=={v}"),
            Op::NotEquals => format!("{k}!={v}"),
            Op::In => format!("{k} in ({v})"),
            Op::NotIn => format!("{k} notin ({v})"),
            Op::GreaterThan => format!("{k}>{v}"),
            Op::LessThan => format!("{k}<{v}"),
            Op::Exists => k.clone(),
            Op::DoesNotExist => format!("!{k}"),
        }
    }
}

// === lexer ===

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Error,
    End,
    ClosePar,
    Comma,
    Bang,
    DoubleEquals,
    Equals,
    GreaterThan,
    Ident,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosePar,
        "," => Tok::Comma,
        "!" => Tok::Bang,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::GreaterThan,
        "in" => Tok::In,
        "<" => Tok::LessThan,
        "!=" => Tok::NotEquals,
        "notin" => Tok::NotIn,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits a selector into tokens; the list always ends with `Tok::End`.
fn lex(s: &str) -> Vec<(Tok, String)> {
    let b = s.as_bytes();
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        while pos < b.len() && is_space(b[pos]) {
            pos += 1;
        }
        if pos >= b.len() {
            out.push((Tok::End, String::new()));
            return out;
        }
        let start = pos;
        if is_special(b[pos]) {
            // Longest run of symbols that still forms an operator ("!=", "==").
            let mut best: Option<(Tok, usize)> = None;
            while pos < b.len() && is_special(b[pos]) {
                pos += 1;
                match keyword(&s[start..pos]) {
                    Some(t) => best = Some((t, pos)),
                    None if best.is_some() => break,
                    None => {}
                }
            }
            match best {
                Some((t, end)) => {
                    out.push((t, s[start..end].to_string()));
                    pos = end;
                }
                None => out.push((Tok::Error, format!("error expected: keyword found '{}'", &s[start..pos]))),
            }
        } else {
            while pos < b.len() && !is_special(b[pos]) && !is_space(b[pos]) {
                pos += 1;
            }
            let word = &s[start..pos];
            out.push((keyword(word).unwrap_or(Tok::Ident), word.to_string()));
        }
    }
}

// === parser ===

/// Whether `in`/`notin` are read as operators (after a key) or as plain values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

impl Parser {
    fn peek(&self, ctx: Ctx) -> (Tok, String) {
        let (t, l) = self.items[self.pos.min(self.items.len() - 1)].clone();
        match t {
            Tok::In | Tok::NotIn if ctx == Ctx::Values => (Tok::Ident, l),
            _ => (t, l),
        }
    }

    fn next(&mut self, ctx: Ctx) -> (Tok, String) {
        let item = self.peek(ctx);
        self.pos += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.peek(Ctx::Values);
            match tok {
                Tok::Ident | Tok::Bang => {
                    let r = self.requirement().map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.next(Ctx::Values);
                    match t {
                        Tok::End => return Ok(reqs),
                        Tok::Comma => {
                            let (t2, l2) = self.peek(Ctx::Values);
                            if t2 != Tok::Ident && t2 != Tok::Bang {
                                return Err(format!("found '{l2}', expected: identifier after ','"));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::End => return Ok(reqs),
                _ => return Err(format!("found '{lit}', expected: !, identifier, or 'end of string'")),
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (key, inferred) = self.key_and_inferred_operator()?;
        if let Some(op) = inferred {
            return Requirement::new(&key, op, vec![], None);
        }
        let op = self.operator()?;
        let values = match op {
            Op::In | Op::NotIn => self.value_set()?,
            _ => self.exact_value()?,
        };
        Requirement::new(&key, op, values.into_iter().collect(), None)
    }

    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Op>), String> {
        let (mut tok, mut lit) = self.next(Ctx::Values);
        let negated = tok == Tok::Bang;
        if negated {
            (tok, lit) = self.next(Ctx::Values);
        }
        if tok != Tok::Ident {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let msgs = qualified_name(&lit);
        if !msgs.is_empty() {
            // The parser's field path is nil, which Go prints as "<nil>".
            return Err(format!("<nil>: Invalid value: {}: {}", go_quote(&lit), msgs.join("; ")));
        }
        let (t, _) = self.peek(Ctx::Values);
        let op = if negated {
            Some(Op::DoesNotExist)
        } else if matches!(t, Tok::End | Tok::Comma) {
            Some(Op::Exists)
        } else {
            None
        };
        Ok((lit, op))
    }

    fn operator(&mut self) -> Result<Op, String> {
        let (tok, lit) = self.next(Ctx::KeyAndOperator);
        Ok(match tok {
            Tok::In => Op::In,
            Tok::Equals => Op::Equals,
            Tok::DoubleEquals => Op::DoubleEquals,
            Tok::GreaterThan => Op::GreaterThan,
            Tok::LessThan => Op::LessThan,
            Tok::NotIn => Op::NotIn,
            Tok::NotEquals => Op::NotEquals,
            _ => return Err(format!("found '{lit}', expected: in, notin, =, ==, !=, gt, lt")),
        })
    }

    fn value_set(&mut self) -> Result<BTreeSet<String>, String> {
        let (tok, lit) = self.next(Ctx::Values);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.peek(Ctx::Values);
        match tok {
            Tok::Ident | Tok::Comma => {
                let set = self.identifiers()?;
                if self.next(Ctx::Values).0 != Tok::ClosePar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Tok::ClosePar => {
                self.next(Ctx::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    /// A comma-separated list where empty entries mean the empty value.
    fn identifiers(&mut self) -> Result<BTreeSet<String>, String> {
        let mut set = BTreeSet::new();
        loop {
            let (tok, lit) = self.next(Ctx::Values);
            match tok {
                Tok::Ident => {
                    set.insert(lit);
                    let (t2, l2) = self.peek(Ctx::Values);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosePar => return Ok(set),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    match self.peek(Ctx::Values).0 {
                        Tok::ClosePar => {
                            set.insert(String::new());
                            return Ok(set);
                        }
                        Tok::Comma => {
                            self.next(Ctx::Values);
                            set.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        if matches!(self.peek(Ctx::Values).0, Tok::End | Tok::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        match self.next(Ctx::Values) {
            (Tok::Ident, lit) => Ok(BTreeSet::from([lit])),
            (_, lit) => Err(format!("found '{lit}', expected: identifier")),
        }
    }
}

/// A parsed label selector (query-string syntax or metav1.LabelSelector JSON), used by list/watch
/// filtering and by the simulated StatefulSet controller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    /// Requirements sorted by key; all must hold.
    reqs: Vec<Requirement>,
    /// A null `metav1.LabelSelector`, which selects nothing (`labels.Nothing()`).
    nothing: bool,
}

impl LabelSelector {
    /// Parses `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k` (and `k>n`,
    /// `k<n`), comma-joined (AND), whitespace-tolerant; an empty string selects everything.
    /// Errors carry the apiserver's wording, e.g. `unable to parse requirement: ...`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Parser { items: lex(s), pos: 0 }.parse()?;
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { reqs, nothing: false })
    }

    /// Reads a `metav1.LabelSelector` (`matchLabels` and `matchExpressions`) the way
    /// `LabelSelectorAsSelector` does: null selects nothing, empty selects everything.
    pub fn from_api(sel: &Value) -> Result<Self, String> {
        if sel.is_null() {
            return Ok(Self { reqs: vec![], nothing: true });
        }
        let mut reqs = Vec::new();
        if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in ml {
                reqs.push(Requirement::new(k, Op::Equals, vec![v.as_str().unwrap_or("").to_string()], Some("key"))?);
            }
        }
        for e in sel.get("matchExpressions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|vs| vs.iter().map(|v| v.as_str().unwrap_or("").to_string()).collect())
                .unwrap_or_default();
            let operator = e.get("operator").and_then(Value::as_str).unwrap_or("");
            let op = match operator {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => return Err(format!("{} is not a valid label selector operator", go_quote(other))),
            };
            reqs.push(Requirement::new(key, op, values, Some("key"))?);
        }
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { reqs, nothing: false })
    }

    /// Whether the labels satisfy every requirement (a missing map has no labels).
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        !self.nothing && self.reqs.iter().all(|r| r.matches(labels))
    }

    /// Whether this selector selects everything (so callers can skip filtering).
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.reqs.is_empty()
    }

    /// The selector in query-string form, as `Scale.status.selector` carries it (e.g. `app=quiz`).
    pub fn to_query_string(&self) -> String {
        self.reqs.iter().map(Requirement::render).collect::<Vec<_>>().join(",")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn err(s: &str) -> String {
        LabelSelector::parse(s).expect_err(s)
    }

    #[test]
    fn equality_and_set_based_requirements_match_like_the_apiserver() {
        let l = labels(json!({"app": "web", "tier": "db", "env": "prod", "n": "5"}));
        let yes = [
            "app=web",
            "app==web",
            "app!=api",
            "tier in (db,cache)",
            "tier in(db)",
            "env notin (dev)",
            "app",
            "!missing",
            "app=web,tier in (db)",
            " app = web , env ",
            "n>4",
            "n<6",
            "missing!=x",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(Some(&l)), "{s} should match");
        }
        let no = [
            "app=api",
            "app!=web",
            "tier in (cache)",
            "env notin (prod,dev)",
            "missing",
            "!app",
            "app=web,tier=cache",
            "n>5",
            "app>1",
            "missing in (x)",
        ];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(Some(&l)), "{s} should not match");
        }
        assert!(LabelSelector::parse("").unwrap().is_everything());
        assert!(LabelSelector::parse("  ").unwrap().is_everything());
        assert!(LabelSelector::parse("x notin (a)").unwrap().matches(None), "notin matches a missing key");
    }

    #[test]
    fn keywords_are_values_inside_a_set_and_empty_values_are_allowed() {
        let sel = LabelSelector::parse("x in (in,notin),y=,z in (,a)").unwrap();
        assert_eq!(sel.to_query_string(), "x in (in,notin),y=,z in (,a)");
        assert!(sel.matches(Some(&labels(json!({"x": "in", "y": "", "z": ""})))));
        assert_eq!(LabelSelector::parse("a in ()").unwrap().to_query_string(), "a in ()");
    }

    #[test]
    fn parsed_selectors_print_sorted_by_key_with_sorted_values() {
        let sel = LabelSelector::parse("tier in (b, a),app==quiz,!gone").unwrap();
        assert_eq!(sel.to_query_string(), "app==quiz,!gone,tier in (a,b)");
    }

    #[test]
    fn syntax_errors_use_the_parser_wording() {
        assert_eq!(err("app=web,=x"), "found '=', expected: identifier after ','");
        assert_eq!(err("a in b"), "unable to parse requirement: found 'b' expected: '('");
        assert_eq!(
            err("bad key=x"),
            "unable to parse requirement: found 'key', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(err("a in (x y)"), "unable to parse requirement: found 'y', expected: ',' or ')'");
        assert_eq!(err("a=b c"), "found 'c', expected: ',' or 'end of string'");
        assert_eq!(err("!a=b"), "found '=', expected: ',' or 'end of string'");
        assert_eq!(err("=a"), "found '=', expected: !, identifier, or 'end of string'");
        assert_eq!(err("a=("), "unable to parse requirement: found '(', expected: identifier");
    }

    #[test]
    fn bad_keys_and_values_are_reported_as_field_errors() {
        assert_eq!(
            err("-app=x"),
            "unable to parse requirement: <nil>: Invalid value: \"-app\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
        assert_eq!(
            err("app=va_lue_"),
            "unable to parse requirement: values[0][app]: Invalid value: \"va_lue_\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        assert!(
            err("n>x")
                .contains("values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer")
        );
    }

    #[test]
    fn api_selectors_sort_by_key_and_render_as_query_strings() {
        let sel = LabelSelector::from_api(&json!({
            "matchLabels": {"app": "quiz"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}, {"key": "x", "operator": "DoesNotExist"}, {"key": "a", "operator": "Exists"}],
        }))
        .unwrap();
        assert_eq!(sel.to_query_string(), "a,app=quiz,tier in (a,b),!x");
        assert!(sel.matches(Some(&labels(json!({"app": "quiz", "tier": "b", "a": ""})))));
        assert!(!sel.matches(Some(&labels(json!({"app": "quiz", "tier": "b"})))));
    }

    #[test]
    fn api_selector_edge_cases_follow_label_selector_as_selector() {
        assert_eq!(
            LabelSelector::from_api(&json!({"matchExpressions": [{"key": "a", "operator": "Near"}]})).unwrap_err(),
            r#""Near" is not a valid label selector operator"#
        );
        assert_eq!(
            LabelSelector::from_api(&json!({"matchExpressions": [{"key": "a", "operator": "In"}]})).unwrap_err(),
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            LabelSelector::from_api(
                &json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})
            )
            .unwrap_err(),
            r#"values: Invalid value: []string{"x"}: values set must be empty for exists and does not exist"#
        );
        assert!(
            LabelSelector::from_api(&json!({"matchLabels": {"bad key": "x"}}))
                .unwrap_err()
                .starts_with("key: Invalid value: \"bad key\"")
        );
        let empty = LabelSelector::from_api(&json!({})).unwrap();
        assert!(empty.is_everything() && empty.matches(None));
        let nothing = LabelSelector::from_api(&Value::Null).unwrap();
        assert!(!nothing.is_everything() && !nothing.matches(Some(&labels(json!({"a": "b"})))));
    }
}
