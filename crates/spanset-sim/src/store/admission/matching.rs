//! Which requests a policy or binding applies to, by the apiserver's rules: `resourceRules`
//! and `excludeResourceRules` (operations, groups, versions, `resource/subresource` patterns,
//! scope, names), `namespaceSelector` (the labels of the request's namespace; a cluster-scoped
//! object other than a Namespace is never excluded by it) and `objectSelector` (the labels of
//! the new or the old object).

use serde_json::{Map, Value};

use super::Request;
use crate::store::selector::LabelSelector;

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn any_or(list: &[String], want: &str) -> bool {
    list.iter().any(|s| s == "*" || s == want)
}

/// Whether one `NamedRuleWithOperations` covers the request. A resource pattern is
/// `resource[/subresource]`: `*` is every resource but no subresource, `*/*` everything,
/// `statefulsets/scale` one subresource.
pub fn rule_matches(rule: &Value, req: &Request<'_>) -> bool {
    if !any_or(&strings(rule, "operations"), req.operation.as_str())
        || !any_or(&strings(rule, "apiGroups"), &req.resource.group)
        || !any_or(&strings(rule, "apiVersions"), req.version)
    {
        return false;
    }
    let resource_ok = strings(rule, "resources").iter().any(|pattern| {
        let (res, sub) = pattern.split_once('/').unwrap_or((pattern.as_str(), ""));
        (res == "*" || res == req.resource.plural) && (sub == "*" || sub == req.subresource)
    });
    let scope_ok = match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "Cluster" => !req.resource.namespaced,
        "Namespaced" => req.resource.namespaced,
        _ => true,
    };
    let names = strings(rule, "resourceNames");
    resource_ok && scope_ok && (names.is_empty() || names.iter().any(|n| n == req.name))
}

/// A selector field, absent meaning "everything" (the API defaults it to `{}`).
fn selector(v: Option<&Value>, field: &str) -> Result<LabelSelector, String> {
    match v {
        None | Some(Value::Null) => Ok(LabelSelector::default()),
        Some(s) => LabelSelector::from_api(s).map_err(|e| format!("{field}: {e}")),
    }
}

fn labels(obj: Option<&Value>) -> Option<&Map<String, Value>> {
    obj.and_then(|o| o.pointer("/metadata/labels")).and_then(Value::as_object)
}

/// Whether a `MatchResources` (a policy's `matchConstraints` or a binding's `matchResources`)
/// covers the request. `namespace_labels` are the labels of the request's namespace (for a
/// namespaced request). A malformed selector is an error (the policy's failurePolicy decides).
pub fn resources_match(
    m: &Value,
    req: &Request<'_>,
    namespace_labels: Option<&Map<String, Value>>,
) -> Result<bool, String> {
    let rules = m.get("resourceRules").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    if !rules.iter().any(|r| rule_matches(r, req)) {
        return Ok(false);
    }
    let excluded = m.get("excludeResourceRules").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    if excluded.iter().any(|r| rule_matches(r, req)) {
        return Ok(false);
    }
    let ns_selector = selector(m.get("namespaceSelector"), "namespaceSelector")?;
    let is_namespace = req.resource.group.is_empty() && req.resource.plural == "namespaces";
    let ns_ok = if is_namespace {
        ns_selector.matches(labels(req.object.or(req.old_object)))
    } else if req.resource.namespaced {
        ns_selector.matches(namespace_labels)
    } else {
        true
    };
    let obj_selector = selector(m.get("objectSelector"), "objectSelector")?;
    let obj_ok = obj_selector.is_everything()
        || (req.object.is_some() && obj_selector.matches(labels(req.object)))
        || (req.old_object.is_some() && obj_selector.matches(labels(req.old_object)));
    Ok(ns_ok && obj_ok)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::{
        admission::Operation,
        resources::{ResourceType, builtins},
        tokens::UserInfo,
    };

    fn rt(plural: &str) -> ResourceType {
        builtins().into_iter().find(|t| t.plural == plural).unwrap()
    }

    fn request<'a>(
        rt: &'a ResourceType,
        op: Operation,
        sub: &'a str,
        obj: Option<&'a Value>,
        old: Option<&'a Value>,
        user: &'a UserInfo,
    ) -> Request<'a> {
        Request {
            operation: op,
            resource: rt,
            version: "v1",
            subresource: sub,
            namespace: "default",
            name: "redis",
            object: obj,
            old_object: old,
            kind: None,
            user,
            dry_run: false,
        }
    }

    #[test]
    fn resource_patterns_follow_the_apiserver() {
        let sts = rt("statefulsets");
        let admin = UserInfo::admin();
        let main = request(&sts, Operation::Update, "", None, None, &admin);
        let scale = request(&sts, Operation::Update, "scale", None, None, &admin);
        let rule = |resources: Value| json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": resources});
        assert!(rule_matches(&rule(json!(["statefulsets"])), &main));
        assert!(!rule_matches(&rule(json!(["statefulsets"])), &scale), "a bare resource names no subresource");
        assert!(rule_matches(&rule(json!(["statefulsets/scale"])), &scale));
        assert!(rule_matches(&rule(json!(["*/scale"])), &scale));
        assert!(rule_matches(&rule(json!(["*"])), &main) && !rule_matches(&rule(json!(["*"])), &scale));
        assert!(rule_matches(&rule(json!(["*/*"])), &main) && rule_matches(&rule(json!(["*/*"])), &scale));
        let create = request(&sts, Operation::Create, "", None, None, &admin);
        assert!(!rule_matches(&rule(json!(["*/*"])), &create), "operations are matched");
        let mut scoped = rule(json!(["*"]));
        scoped["scope"] = json!("Cluster");
        assert!(!rule_matches(&scoped, &main), "a namespaced resource is outside scope Cluster");
        let mut named = rule(json!(["*"]));
        named["resourceNames"] = json!(["other"]);
        assert!(!rule_matches(&named, &main));
    }

    #[test]
    fn selectors_read_the_namespace_and_either_object() {
        let sts = rt("statefulsets");
        let admin = UserInfo::admin();
        let labelled = json!({"metadata": {"labels": {"spanset.dev/federation": "redis"}}});
        let plain = json!({"metadata": {}});
        let m = json!({
            "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}],
            "objectSelector": {"matchExpressions": [{"key": "spanset.dev/federation", "operator": "Exists"}]},
            "namespaceSelector": {"matchLabels": {"team": "db"}},
        });
        let ns = json!({"team": "db"});
        let ns = ns.as_object();
        // The label on the old object is enough: removing it does not escape the policy.
        let unlabel = request(&sts, Operation::Update, "", Some(&plain), Some(&labelled), &admin);
        assert_eq!(resources_match(&m, &unlabel, ns), Ok(true));
        let neither = request(&sts, Operation::Update, "", Some(&plain), Some(&plain), &admin);
        assert_eq!(resources_match(&m, &neither, ns), Ok(false));
        assert_eq!(resources_match(&m, &unlabel, None), Ok(false), "the namespace lacks the label");
        let pv = rt("persistentvolumes");
        let cluster_scoped = request(&pv, Operation::Update, "", Some(&labelled), None, &admin);
        assert_eq!(resources_match(&m, &cluster_scoped, None), Ok(true), "never excluded by namespace");
        let bad = json!({"resourceRules": m["resourceRules"], "objectSelector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}});
        assert!(resources_match(&bad, &unlabel, ns).unwrap_err().starts_with("objectSelector: "));
    }
}
