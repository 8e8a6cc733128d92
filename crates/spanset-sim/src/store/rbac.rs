//! The RBAC authorizer's rule evaluation, read from the Roles, ClusterRoles and bindings in
//! storage: whether a rule grants a request, which rule of which role grants it to a user, and
//! every rule a user holds in a namespace (the rule resolver's `RulesFor`). The API server's
//! authorization (the HTTP layer's auth module) and the store's own escalation prevention
//! ([`super::escalation`], which asks whether a user holds what a role grants) both read it
//! here, beside the objects it reads.

use serde_json::Value;

use crate::{
    cluster::Cluster,
    store::{
        audit::{Attributes, RuleRef},
        tokens::UserInfo,
    },
};

/// The API group of Roles, ClusterRoles and their bindings.
pub const GROUP: &str = "rbac.authorization.k8s.io";

pub(crate) fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Whether one PolicyRule grants the request (`rbac/v1.PolicyRule` semantics).
pub fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    let has = |key: &str, want: &str| strings(rule, key).iter().any(|s| s == "*" || s == want);
    if !has("verbs", &a.verb) {
        return false;
    }
    if !a.resource_request {
        return strings(rule, "nonResourceURLs")
            .iter()
            .any(|u| u == "*" || u == &a.path || u.strip_suffix('*').is_some_and(|prefix| a.path.starts_with(prefix)));
    }
    if !has("apiGroups", &a.group) {
        return false;
    }
    let combined =
        if a.subresource.is_empty() { a.resource.clone() } else { format!("{}/{}", a.resource, a.subresource) };
    let resource_ok = strings(rule, "resources")
        .iter()
        .any(|r| r == "*" || *r == combined || (!a.subresource.is_empty() && *r == format!("*/{}", a.subresource)));
    if !resource_ok {
        return false;
    }
    let names = strings(rule, "resourceNames");
    names.is_empty() || (!a.name.is_empty() && names.contains(&a.name))
}

pub(crate) fn subject_matches(subject: &Value, user: &UserInfo, binding_ns: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or("");
    match subject["kind"].as_str().unwrap_or("") {
        "User" => name == user.name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = subject["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(binding_ns);
            user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

/// The first rule granting the request to the user, through a ClusterRoleBinding or a
/// RoleBinding of the request's namespace.
fn granting_rule(cluster: &Cluster, user: &UserInfo, a: &Attributes) -> Option<RuleRef> {
    let rbac = |plural: &str| (GROUP.to_string(), plural.to_string());
    let role_rules = |kind: &str, ns: &str, name: &str| -> Vec<Value> {
        let plural = if kind == "ClusterRole" { "clusterroles" } else { "roles" };
        cluster
            .storage
            .get(&rbac(plural), if kind == "ClusterRole" { "" } else { ns }, name)
            .and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    };
    let first_match = |binding: &Value, binding_ns: &str| -> Option<RuleRef> {
        let subjects = binding.get("subjects").and_then(Value::as_array)?;
        if !subjects.iter().any(|s| subject_matches(s, user, binding_ns)) {
            return None;
        }
        let kind = binding.pointer("/roleRef/kind").and_then(Value::as_str)?;
        let name = binding.pointer("/roleRef/name").and_then(Value::as_str)?;
        let index = role_rules(kind, binding_ns, name).iter().position(|r| rule_allows(r, a))?;
        let namespace = if kind == "ClusterRole" { String::new() } else { binding_ns.to_string() };
        Some(RuleRef { kind: kind.to_string(), namespace, name: name.to_string(), index })
    };
    let (cluster_bindings, _) = cluster.storage.list(&rbac("clusterrolebindings"), None);
    if let Some(r) = cluster_bindings.iter().find_map(|b| first_match(b, "")) {
        return Some(r);
    }
    if a.namespace.is_empty() {
        return None;
    }
    let (bindings, _) = cluster.storage.list(&rbac("rolebindings"), Some(&a.namespace));
    bindings.iter().find_map(|b| first_match(b, &a.namespace))
}

/// Every rule granted to `user` by ClusterRoleBindings and by the RoleBindings of `namespace`
/// (the RBAC rule resolver's `RulesFor`), in binding order.
pub fn rules_for(cluster: &Cluster, user: &UserInfo, namespace: &str) -> Vec<Value> {
    let rbac = |plural: &str| (GROUP.to_string(), plural.to_string());
    let mut out = Vec::new();
    let mut add = |binding: &Value, binding_ns: &str| {
        let bound = binding
            .get("subjects")
            .and_then(Value::as_array)
            .is_some_and(|subjects| subjects.iter().any(|s| subject_matches(s, user, binding_ns)));
        if !bound {
            return;
        }
        let kind = binding.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or("");
        let name = binding.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or("");
        let (plural, ns) = if kind == "ClusterRole" { ("clusterroles", "") } else { ("roles", binding_ns) };
        if let Some(role) = cluster.storage.get(&rbac(plural), ns, name) {
            out.extend(role.get("rules").and_then(Value::as_array).cloned().unwrap_or_default());
        }
    };
    let (cluster_bindings, _) = cluster.storage.list(&rbac("clusterrolebindings"), None);
    for b in &cluster_bindings {
        add(b, "");
    }
    if !namespace.is_empty() {
        let (bindings, _) = cluster.storage.list(&rbac("rolebindings"), Some(namespace));
        for b in &bindings {
            add(b, namespace);
        }
    }
    out
}

/// What the authorizer decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, by this rule (none for `system:masters`).
    Allow(Option<RuleRef>),
    /// Denied: no rule grants it.
    Deny,
}

/// Decides a request as RBAC does; `system:masters` may do everything.
pub fn decide(cluster: &Cluster, user: &UserInfo, a: &Attributes) -> Decision {
    if user.groups.iter().any(|g| g == "system:masters") {
        return Decision::Allow(None);
    }
    match granting_rule(cluster, user, a) {
        Some(rule) => Decision::Allow(Some(rule)),
        None => Decision::Deny,
    }
}
