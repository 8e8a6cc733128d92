//! The CEL side of admission: JSON objects as CEL values, compiled programs (cached by source,
//! since the same few policy expressions run on every write), and one evaluation context per
//! request with the variables a ValidatingAdmissionPolicy sees (`object`, `oldObject`,
//! `request`, `params`, `namespaceObject`, `variables`). The language is the `cel` crate
//! (cel-rust) with the Kubernetes libraries of `kube-cel` (strings, lists, regex, quantity…),
//! as the apiserver adds them to cel-go; nothing here interprets CEL by hand.

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock},
};

use kube_cel::{
    KubeCelExt,
    cel::{
        Context, Program, Value as Cel,
        objects::{Key, Map},
    },
};
use parking_lot::Mutex;
use serde_json::Value;

/// A JSON value as CEL sees it. Object keys stay as they are (no `__dash__` escaping), so that
/// maps such as labels and annotations are indexed by their real keys, as in the apiserver.
pub fn to_cel(value: &Value) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => map_of(map.iter().map(|(k, v)| (k.clone(), to_cel(v)))),
    }
}

/// A CEL map with string keys.
pub fn map_of(entries: impl IntoIterator<Item = (String, Cel)>) -> Cel {
    let map: HashMap<Key, Cel> = entries.into_iter().map(|(k, v)| (Key::String(Arc::new(k)), v)).collect();
    Cel::Map(Map { map: Arc::new(map) })
}

/// A compiled program, or the parser's error.
type Compiled = Result<Arc<Program>, String>;

/// Compiled programs by source text. Policies are few and their expressions fixed, so the
/// cache stays small; a policy's expressions are compiled once, not on every request.
fn cache() -> &'static Mutex<HashMap<String, Compiled>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Compiled>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Compiles an expression (or answers the parser's error, one line).
pub fn compile(source: &str) -> Result<Arc<Program>, String> {
    if let Some(done) = cache().lock().get(source) {
        return done.clone();
    }
    let compiled = Program::compile(source)
        .map(Arc::new)
        .map_err(|e| e.to_string().lines().map(str::trim).collect::<Vec<_>>().join(" "));
    let mut cache = cache().lock();
    if cache.len() > 4096 {
        cache.clear();
    }
    cache.insert(source.to_string(), compiled.clone());
    compiled
}

/// The variables of one evaluation, bound by name.
#[derive(Debug, Clone, Default)]
pub struct Bindings {
    vars: Vec<(String, Cel)>,
}

impl Bindings {
    /// Binds (or rebinds) a variable.
    pub fn set(&mut self, name: &str, value: Cel) {
        self.vars.retain(|(n, _)| n != name);
        self.vars.push((name.to_string(), value));
    }

    /// A CEL context holding these variables and the standard plus Kubernetes functions.
    fn context(&self) -> Context<'static> {
        let mut ctx = Context::default().with_all();
        for (name, value) in &self.vars {
            ctx.add_variable_from_value(name.clone(), value.clone());
        }
        ctx
    }
}

/// Evaluates `source` with `bindings`; an error (parse or run time) is answered as text.
pub fn eval(source: &str, bindings: &Bindings) -> Result<Cel, String> {
    let program = compile(source)?;
    program.execute(&bindings.context()).map_err(|e| e.to_string())
}

/// Evaluates an expression that must answer a boolean.
pub fn eval_bool(source: &str, bindings: &Bindings) -> Result<bool, String> {
    match eval(source, bindings)? {
        Cel::Bool(b) => Ok(b),
        other => Err(format!("expected a boolean, got {}", other.type_of())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with_object(obj: Value) -> Bindings {
        let mut b = Bindings::default();
        b.set("object", to_cel(&obj));
        b
    }

    #[test]
    fn objects_are_read_with_their_real_keys() {
        let b = with_object(json!({"metadata": {"labels": {"spanset.dev/federation": "redis"},
            "annotations": {"spanset.dev/term": "7"}}, "spec": {"replicas": 3}}));
        assert_eq!(eval_bool("object.metadata.labels['spanset.dev/federation'] == 'redis'", &b), Ok(true));
        assert_eq!(eval_bool("int(object.metadata.annotations['spanset.dev/term']) > 6", &b), Ok(true));
        assert_eq!(eval_bool("has(object.metadata.labels) && !has(object.status)", &b), Ok(true));
        assert_eq!(eval_bool("'spanset.dev/term' in object.metadata.annotations", &b), Ok(true));
        assert_eq!(eval_bool("object.spec.replicas <= 5", &b), Ok(true));
    }

    #[test]
    fn maps_compare_by_value_and_kubernetes_functions_are_there() {
        let mut b = with_object(json!({"spec": {"a": [1, {"b": "x"}]}}));
        b.set("oldObject", to_cel(&json!({"spec": {"a": [1, {"b": "x"}]}})));
        assert_eq!(eval_bool("object.spec == oldObject.spec", &b), Ok(true));
        b.set("oldObject", to_cel(&json!({"spec": {"a": [1, {"b": "y"}]}})));
        assert_eq!(eval_bool("object.spec == oldObject.spec", &b), Ok(false));
        // A Kubernetes library function (kube-cel), and a standard macro.
        assert_eq!(eval_bool("'Spanset'.lowerAscii() == 'spanset'", &b), Ok(true));
        assert_eq!(eval_bool("object.spec.a.exists(x, x == 1)", &b), Ok(true));
        assert_eq!(eval_bool("'42'.matches('^[0-9]+$')", &b), Ok(true));
    }

    #[test]
    fn errors_are_text_and_non_booleans_are_refused() {
        let b = with_object(json!({}));
        assert!(eval_bool("object.spec.replicas > 1", &b).unwrap_err().contains("spec"));
        assert!(eval_bool("1 +", &b).is_err(), "a parse error");
        assert_eq!(eval_bool("'x'", &b), Err("expected a boolean, got string".into()));
        // The compile cache answers the same error again.
        assert_eq!(compile("1 +").unwrap_err(), compile("1 +").unwrap_err());
    }
}
