//! RFC 6902 JSON patch: `add`, `remove`, `replace`, `move`, `copy` and `test` over RFC 6901
//! JSON pointers.

use serde_json::Value;

use super::PatchError;

fn parse_pointer(p: &str) -> Result<Vec<String>, PatchError> {
    if p.is_empty() {
        return Ok(vec![]);
    }
    let Some(rest) = p.strip_prefix('/') else {
        return Err(PatchError::BadRequest(format!("invalid JSON pointer {p:?}: it must start with '/'")));
    };
    Ok(rest.split('/').map(|s| s.replace("~1", "/").replace("~0", "~")).collect())
}

fn index(token: &str, len: usize, allow_end: bool) -> Option<usize> {
    if token == "-" && allow_end {
        return Some(len);
    }
    if token.len() > 1 && token.starts_with('0') {
        return None;
    }
    let i: usize = token.parse().ok()?;
    (i < len || (allow_end && i == len)).then_some(i)
}

fn missing(path: &str) -> PatchError {
    PatchError::Invalid(format!(
        "the server rejected our request due to an error in our request: path {path:?} does not exist"
    ))
}

fn parent_mut<'a>(doc: &'a mut Value, tokens: &[String], path: &str) -> Result<&'a mut Value, PatchError> {
    let mut cur = doc;
    for t in tokens {
        cur = match cur {
            Value::Object(m) => m.get_mut(t).ok_or_else(|| missing(path))?,
            Value::Array(a) => {
                let len = a.len();
                a.get_mut(index(t, len, false).ok_or_else(|| missing(path))?).ok_or_else(|| missing(path))?
            }
            _ => return Err(missing(path)),
        };
    }
    Ok(cur)
}

fn get<'a>(doc: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    tokens.iter().try_fold(doc, |cur, t| match cur {
        Value::Object(m) => m.get(t),
        Value::Array(a) => index(t, a.len(), false).and_then(|i| a.get(i)),
        _ => None,
    })
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    let tokens = parse_pointer(path)?;
    let Some((last, parents)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, parents, path)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        Value::Array(a) => {
            let i = index(last, a.len(), true).ok_or_else(|| missing(path))?;
            a.insert(i, value);
        }
        _ => return Err(missing(path)),
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let tokens = parse_pointer(path)?;
    let Some((last, parents)) = tokens.split_last() else {
        return Err(PatchError::Invalid(
            "the server rejected our request due to an error in our request: cannot remove the whole document".into(),
        ));
    };
    match parent_mut(doc, parents, path)? {
        Value::Object(m) => m.remove(last).ok_or_else(|| missing(path)),
        Value::Array(a) => {
            let i = index(last, a.len(), false).ok_or_else(|| missing(path))?;
            Ok(a.remove(i))
        }
        _ => Err(missing(path)),
    }
}

/// Applies an RFC 6902 patch (an array of operations).
pub fn apply_json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops =
        patch.as_array().ok_or_else(|| PatchError::BadRequest("a JSON patch must be an array of operations".into()))?;
    let mut doc = target.clone();
    for (i, op) in ops.iter().enumerate() {
        let field = |name: &str| -> Result<&str, PatchError> {
            op.get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| PatchError::BadRequest(format!("operation {i} is missing its {name:?} field")))
        };
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| PatchError::BadRequest(format!("operation {i} is missing its \"value\" field")))
        };
        let path = field("path")?;
        match field("op")? {
            "add" => add(&mut doc, path, value()?)?,
            "remove" => {
                remove(&mut doc, path)?;
            }
            "replace" => {
                let tokens = parse_pointer(path)?;
                if get(&doc, &tokens).is_none() {
                    return Err(missing(path));
                }
                if tokens.is_empty() {
                    doc = value()?;
                } else {
                    *parent_mut(&mut doc, &tokens, path)? = value()?;
                }
            }
            "move" => {
                let from = field("from")?;
                if path.starts_with(&format!("{from}/")) {
                    return Err(PatchError::Invalid(format!("cannot move {from:?} into its own child {path:?}")));
                }
                let v = remove(&mut doc, from)?;
                add(&mut doc, path, v)?;
            }
            "copy" => {
                let from = field("from")?;
                let v = get(&doc, &parse_pointer(from)?).cloned().ok_or_else(|| missing(from))?;
                add(&mut doc, path, v)?;
            }
            "test" => {
                let want = value()?;
                if get(&doc, &parse_pointer(path)?) != Some(&want) {
                    return Err(PatchError::Invalid(format!(
                        "the server rejected our request due to an error in our request: testing value {path} failed: test failed"
                    )));
                }
            }
            other => return Err(PatchError::BadRequest(format!("unexpected JSON patch operation {other:?}"))),
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn operations_apply_in_order() {
        let doc = json!({"spec": {"replicas": 3, "list": [1, 2]}, "a/b": {"~c": 1}});
        let patch = json!([
            {"op": "test", "path": "/spec/replicas", "value": 3},
            {"op": "replace", "path": "/spec/replicas", "value": 5},
            {"op": "add", "path": "/spec/list/-", "value": 3},
            {"op": "add", "path": "/spec/list/0", "value": 0},
            {"op": "remove", "path": "/spec/list/1"},
            {"op": "copy", "from": "/spec/replicas", "path": "/spec/copied"},
            {"op": "move", "from": "/a~1b/~0c", "path": "/moved"},
        ]);
        let out = apply_json_patch(&doc, &patch).unwrap();
        assert_eq!(out, json!({"spec": {"replicas": 5, "list": [0, 2, 3], "copied": 5}, "a/b": {}, "moved": 1}));
    }

    #[test]
    fn failures_are_reported_and_leave_the_input_alone() {
        let doc = json!({"spec": {"replicas": 3}});
        let e = apply_json_patch(&doc, &json!([{"op": "test", "path": "/spec/replicas", "value": 4}])).unwrap_err();
        assert!(matches!(&e, PatchError::Invalid(m) if m.contains("testing value /spec/replicas failed")), "{e:?}");
        assert!(matches!(
            apply_json_patch(&doc, &json!([{"op": "remove", "path": "/nope"}])),
            Err(PatchError::Invalid(_))
        ));
        assert!(matches!(
            apply_json_patch(&doc, &json!([{"op": "frobnicate", "path": "/x"}])),
            Err(PatchError::BadRequest(_))
        ));
        assert!(matches!(apply_json_patch(&doc, &json!({"op": "add"})), Err(PatchError::BadRequest(_))));
        assert!(matches!(
            apply_json_patch(&doc, &json!([{"op": "add", "path": "nope", "value": 1}])),
            Err(PatchError::BadRequest(_))
        ));
        assert_eq!(doc, json!({"spec": {"replicas": 3}}));
    }
}
