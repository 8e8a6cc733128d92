//! RBAC's escalation prevention, as the apiserver's RBAC storage applies it to every create and
//! update that comes through the API (dry runs included), before the write is validated and
//! admitted: without it, anyone who may write Roles or RoleBindings could grant anything to
//! anyone, themselves included, and a stolen credential with `create rolebindings` would be a
//! cluster administrator's. Kubernetes refuses, with 403:
//!
//! - a Role or ClusterRole whose rules the writer does not hold itself, where the role lives
//!   (every rule of every role bound to it there, through ClusterRoleBindings and that
//!   namespace's RoleBindings), unless it may `escalate` roles (clusterroles) there; a
//!   ClusterRole with an `aggregationRule` needs every permission (`*` on `*`), since it
//!   gathers whatever other roles grant;
//! - a RoleBinding or ClusterRoleBinding to a role whose rules the writer does not hold in the
//!   binding's namespace (all namespaces, for a ClusterRoleBinding), unless it may `bind` that
//!   role there; a binding to a role that does not exist is refused (404) unless it may `bind`.
//!
//! An update that changes only what the garbage collector changes (owner references,
//! finalizers) is not checked, and `system:masters` is never refused. The refusal is worded as
//! the apiserver's `ConfirmNoEscalation` words it (`user "U" (groups=[…]) is attempting to grant
//! RBAC permissions not currently held:` and each missing permission on its own line, in the
//! compact form `{APIGroups:["…"], Resources:["…"], Verbs:["…"]}`). A cluster that does not
//! enforce authorization (no `--auth`) checks nothing, as it authorizes nothing.

use serde_json::{Value, json};

use super::{
    audit::Attributes,
    error::{ApiError, ApiResult},
    rbac::{self, Decision, GROUP, strings},
    resources::ResourceType,
    tokens::UserInfo,
};
use crate::cluster::Cluster;

/// What one write of an RBAC object must pass, read from storage before the write starts
/// (storage cannot be read while it is being updated).
#[derive(Debug, Clone, Default)]
pub struct Guard(Option<Check>);

#[derive(Debug, Clone)]
enum Check {
    /// A Role or ClusterRole: its rules must be among what the writer holds where it lives.
    Role { user: UserInfo, held: Vec<Value> },
    /// A binding: the rules of the role it refers to (or why they cannot be read) must be
    /// among what the writer holds in the binding's namespace.
    Binding { user: UserInfo, granted: Result<Vec<Value>, ApiError>, held: Vec<Value> },
}

/// Whether `rt` is one of the four RBAC kinds, and which.
fn rbac_kind(rt: &ResourceType) -> Option<&'static str> {
    if rt.group != GROUP {
        return None;
    }
    ["roles", "clusterroles", "rolebindings", "clusterrolebindings"].into_iter().find(|p| *p == rt.plural)
}

impl Cluster {
    /// What a write by `user` of `object` (a create's body, or the stored object an update
    /// changes, whose `roleRef` cannot change) of `rt` in `ns` must pass. `url_name` is the
    /// name in the request's URL (none for a create), which an `escalate` grant is checked on.
    pub fn escalation_guard(
        &self,
        rt: &ResourceType,
        ns: &str,
        url_name: &str,
        user: &UserInfo,
        object: &Value,
    ) -> Guard {
        let Some(kind) = rbac_kind(rt) else { return Guard::default() };
        if !self.config.auth || user.groups.iter().any(|g| g == "system:masters") {
            return Guard::default();
        }
        let may = |verb: &str, group: &str, resource: &str, name: &str| {
            let a = Attributes {
                verb: verb.into(),
                resource_request: true,
                group: group.into(),
                resource: resource.into(),
                namespace: ns.into(),
                name: name.into(),
                ..Default::default()
            };
            matches!(rbac::decide(self, user, &a), Decision::Allow(_))
        };
        let held = || rbac::rules_for(self, user, ns);
        match kind {
            "roles" | "clusterroles" => {
                if may("escalate", GROUP, kind, url_name) {
                    return Guard::default();
                }
                Guard(Some(Check::Role { user: user.clone(), held: held() }))
            }
            _ => {
                let role_ref = object.get("roleRef").cloned().unwrap_or(Value::Null);
                let field = |k: &str| role_ref.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let (ref_kind, ref_name) = (field("kind"), field("name"));
                let plural = match ref_kind.as_str() {
                    "Role" => Some("roles"),
                    "ClusterRole" => Some("clusterroles"),
                    _ => None,
                };
                if let Some(plural) = plural
                    && may("bind", &field("apiGroup"), plural, &ref_name)
                {
                    return Guard::default();
                }
                let granted = match plural {
                    None => Err(ApiError::custom(
                        500,
                        "InternalError",
                        format!("unsupported role reference kind: {ref_kind:?}"),
                    )),
                    Some(plural) => {
                        let role_ns = if plural == "roles" { ns } else { "" };
                        match self.storage.get(&(GROUP.to_string(), plural.to_string()), role_ns, &ref_name) {
                            Some(role) => Ok(role.get("rules").and_then(Value::as_array).cloned().unwrap_or_default()),
                            None => Err(match self.resources.by_plural(GROUP, plural) {
                                Some(role_rt) => ApiError::not_found(&role_rt, &ref_name),
                                None => ApiError::no_route(),
                            }),
                        }
                    }
                };
                Guard(Some(Check::Binding { user: user.clone(), granted, held: held() }))
            }
        }
    }
}

impl Guard {
    /// Checks the object a write would store (`old`: the stored one, for an update).
    pub fn check(&self, rt: &ResourceType, name: &str, object: &Value, old: Option<&Value>) -> ApiResult<()> {
        let Some(check) = &self.0 else { return Ok(()) };
        if old.is_some_and(|old| only_gc_fields_change(object, old)) {
            return Ok(());
        }
        match check {
            Check::Role { user, held } => {
                let rules = object.get("rules").and_then(Value::as_array).cloned().unwrap_or_default();
                let missing = uncovered(held, &rules);
                if !missing.is_empty() {
                    return Err(ApiError::forbidden(rt, name, &not_held(user, missing)));
                }
                let aggregates = object.get("aggregationRule").is_some_and(|r| !r.is_null());
                let everything = [
                    json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
                    json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
                ];
                if aggregates && !uncovered(held, &everything).is_empty() {
                    return Err(ApiError::forbidden(
                        rt,
                        name,
                        "must have cluster-admin privileges to use the aggregationRule",
                    ));
                }
                Ok(())
            }
            Check::Binding { user, granted, held } => {
                let rules = granted.as_ref().map_err(Clone::clone)?;
                let missing = uncovered(held, rules);
                if missing.is_empty() { Ok(()) } else { Err(ApiError::forbidden(rt, name, &not_held(user, missing))) }
            }
        }
    }
}

/// Whether an update changes only what the garbage collector writes (the apiserver's
/// `IsOnlyMutatingGCFields`): such a write is never an escalation.
fn only_gc_fields_change(object: &Value, old: &Value) -> bool {
    let mut copy = object.clone();
    let keep = ["ownerReferences", "finalizers", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"];
    let (Some(meta), Some(old_meta)) =
        (copy.get_mut("metadata").and_then(Value::as_object_mut), old.get("metadata").and_then(Value::as_object))
    else {
        return false;
    };
    for k in keep.iter().chain(&["resourceVersion", "generation"]) {
        match old_meta.get(*k) {
            Some(v) => meta.insert((*k).to_string(), v.clone()),
            None => meta.remove(*k),
        };
    }
    copy == *old
}

/// One permission of a rule: one verb on one resource of one group (and one name, if the rule
/// names any), or one verb on one non-resource URL (`BreakdownRule`).
fn breakdown(rule: &Value) -> Vec<Value> {
    let (groups, resources, names, verbs) = (
        strings(rule, "apiGroups"),
        strings(rule, "resources"),
        strings(rule, "resourceNames"),
        strings(rule, "verbs"),
    );
    let mut out = Vec::new();
    for g in &groups {
        for r in &resources {
            for v in &verbs {
                if names.is_empty() {
                    out.push(json!({"apiGroups": [g], "resources": [r], "verbs": [v]}));
                }
                for n in &names {
                    out.push(json!({"apiGroups": [g], "resources": [r], "resourceNames": [n], "verbs": [v]}));
                }
            }
        }
    }
    for u in strings(rule, "nonResourceURLs") {
        for v in &verbs {
            out.push(json!({"nonResourceURLs": [u], "verbs": [v]}));
        }
    }
    out
}

/// Whether a held rule grants all of one permission (`ruleCovers`).
fn covers(held: &Value, sub: &Value) -> bool {
    let has = |list: &[String], want: &str| list.iter().any(|s| s == want);
    let all_in = |key: &str| {
        let held = strings(held, key);
        has(&held, "*") || strings(sub, key).iter().all(|s| has(&held, s))
    };
    let held_resources = strings(held, "resources");
    let resources = has(&held_resources, "*")
        || strings(sub, "resources").iter().all(|r| {
            has(&held_resources, r)
                || r.split_once('/').is_some_and(|(_, subresource)| has(&held_resources, &format!("*/{subresource}")))
        });
    let held_urls = strings(held, "nonResourceURLs");
    let urls = strings(sub, "nonResourceURLs").iter().all(|u| {
        held_urls.iter().any(|h| h == "*" || h == u || h.strip_suffix('*').is_some_and(|prefix| u.starts_with(prefix)))
    });
    let held_names = strings(held, "resourceNames");
    let names = held_names.is_empty() || {
        let wanted = strings(sub, "resourceNames");
        !wanted.is_empty() && wanted.iter().all(|n| has(&held_names, n))
    };
    all_in("verbs") && all_in("apiGroups") && resources && urls && names
}

/// The permissions of `requested` that no rule of `held` grants (`Covers`), each on its own.
fn uncovered(held: &[Value], requested: &[Value]) -> Vec<Value> {
    requested.iter().flat_map(breakdown).filter(|sub| !held.iter().any(|h| covers(h, sub))).collect()
}

/// The refusal's text: the writer and what it lacks, one compacted rule a line, sorted.
fn not_held(user: &UserInfo, missing: Vec<Value>) -> String {
    let mut lines: Vec<String> = compact(missing).iter().map(compact_string).collect();
    lines.sort();
    lines.dedup();
    format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        go_quoted(&user.groups),
        lines.join("\n")
    )
}

/// Permissions that differ only by verb, on one resource (and at most one name), merged into one
/// rule (`CompactRules`).
fn compact(missing: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for rule in missing {
        let key = |r: &Value| {
            (strings(r, "nonResourceURLs").is_empty() && strings(r, "resourceNames").len() <= 1)
                .then(|| (strings(r, "apiGroups"), strings(r, "resources"), strings(r, "resourceNames")))
        };
        let same = key(&rule).and_then(|k| out.iter_mut().find(|o| key(o).as_ref() == Some(&k)));
        match same {
            Some(existing) => {
                let verbs = existing["verbs"].as_array_mut().expect("a broken-down rule has verbs");
                for v in strings(&rule, "verbs") {
                    if !verbs.iter().any(|x| x == v.as_str()) {
                        verbs.push(json!(v));
                    }
                }
            }
            None => out.push(rule),
        }
    }
    out
}

/// A rule as the refusal prints it (`CompactString`): only the fields it has.
fn compact_string(rule: &Value) -> String {
    let parts: Vec<String> = [
        ("APIGroups", "apiGroups"),
        ("Resources", "resources"),
        ("NonResourceURLs", "nonResourceURLs"),
        ("ResourceNames", "resourceNames"),
        ("Verbs", "verbs"),
    ]
    .iter()
    .filter_map(|(label, key)| {
        let values = strings(rule, key);
        (!values.is_empty()).then(|| format!("{label}:{}", go_quoted(&values)))
    })
    .collect();
    format!("{{{}}}", parts.join(", "))
}

/// A list of strings as Go's `%q` prints a `[]string`: `["a" "b"]`.
fn go_quoted(values: &[String]) -> String {
    format!("[{}]", values.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{
        cluster::ClusterConfig,
        store::registry::{Subresource, WriteOptions},
    };

    fn rt(c: &Cluster, plural: &str) -> Arc<ResourceType> {
        c.resources.by_plural(GROUP, plural).unwrap()
    }

    fn as_user(user: &UserInfo) -> WriteOptions {
        WriteOptions { user: Some(user.clone()), ..Default::default() }
    }

    fn role(name: &str, rules: Value) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name}, "rules": rules})
    }

    fn binding(name: &str, kind: &str, role: &str, subject: &str) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
               "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role},
               "subjects": [{"kind": "ServiceAccount", "name": subject, "namespace": "default"}]})
    }

    /// A cluster enforcing RBAC where `default/writer` may get and list pods and write Roles
    /// and RoleBindings in `default`, plus `extra` rules.
    fn cluster_with(extra: Value) -> (Arc<Cluster>, UserInfo) {
        let c = Cluster::new(ClusterConfig { auth: true, ..ClusterConfig::named("c") });
        let admin = WriteOptions::default();
        let mut rules = vec![
            json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}),
            json!({"apiGroups": [GROUP], "resources": ["roles", "rolebindings"], "verbs": ["create", "update", "get"]}),
        ];
        rules.extend(extra.as_array().cloned().unwrap_or_default());
        c.create(&rt(&c, "roles"), Some("default"), role("writer", json!(rules)), &admin).unwrap();
        c.create(&rt(&c, "rolebindings"), Some("default"), binding("writer", "Role", "writer", "writer"), &admin)
            .unwrap();
        c.create(
            &rt(&c, "roles"),
            Some("default"),
            role("deleter", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}])),
            &admin,
        )
        .unwrap();
        (c, UserInfo::service_account("default", "writer"))
    }

    #[test]
    fn a_writer_of_roles_and_bindings_grants_only_what_it_holds() {
        let (c, writer) = cluster_with(json!([]));
        let me = as_user(&writer);
        // A Role within its own rights, and a binding of it to anyone: allowed.
        let reader = role("reader", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]));
        c.create(&rt(&c, "roles"), Some("default"), reader, &me).expect("held: granted");
        c.create(&rt(&c, "rolebindings"), Some("default"), binding("reader", "Role", "reader", "anyone"), &me)
            .expect("a binding of what it holds");
        // A Role with more, or a binding of a role with more (even to itself): refused.
        let wider =
            role("wider", json!([{"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get", "delete"]}]));
        let e = c.create(&rt(&c, "roles"), Some("default"), wider, &me).unwrap_err();
        assert_eq!((e.code, e.reason), (403, "Forbidden"));
        assert_eq!(
            e.message,
            "roles.rbac.authorization.k8s.io \"wider\" is forbidden: user \"system:serviceaccount:default:writer\" \
             (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:default\" \"system:authenticated\"]) is \
             attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}\n\
             {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}"
        );
        let e = c
            .create(&rt(&c, "rolebindings"), Some("default"), binding("mine", "Role", "deleter", "writer"), &me)
            .unwrap_err();
        assert!(
            e.message.starts_with("rolebindings.rbac.authorization.k8s.io \"mine\" is forbidden: user "),
            "{}",
            e.message
        );
        assert!(
            e.message.ends_with(":\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"),
            "{}",
            e.message
        );
        // A binding of a role that does not exist: 404, naming the role.
        let e = c
            .create(&rt(&c, "rolebindings"), Some("default"), binding("ghost", "Role", "ghost", "x"), &me)
            .unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (404, "roles.rbac.authorization.k8s.io \"ghost\" not found"));
        // Dry runs are refused alike; the administrator (system:masters) is never refused.
        let dry = WriteOptions { dry_run: true, ..as_user(&writer) };
        assert!(
            c.create(&rt(&c, "rolebindings"), Some("default"), binding("mine", "Role", "deleter", "writer"), &dry)
                .is_err()
        );
        c.create(
            &rt(&c, "rolebindings"),
            Some("default"),
            binding("admins", "Role", "deleter", "writer"),
            &as_user(&UserInfo::admin()),
        )
        .expect("system:masters may grant anything");
        // Held in another namespace is not held here.
        let there = role("reader", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]));
        assert_eq!(c.create(&rt(&c, "roles"), Some("kube-system"), there, &me).unwrap_err().code, 403);
    }

    #[test]
    fn an_update_is_held_to_the_same_rule_and_a_binding_keeps_its_role() {
        let (c, writer) = cluster_with(json!([]));
        let me = as_user(&writer);
        let reader = role("reader", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]));
        c.create(&rt(&c, "roles"), Some("default"), reader, &me).unwrap();
        let widen = |cur: &Value| {
            let mut next = cur.clone();
            next["rules"][0]["verbs"] = json!(["get", "delete"]);
            Ok(next)
        };
        let e = c.update_with(&rt(&c, "roles"), "default", "reader", Subresource::Main, &me, widen).unwrap_err();
        assert_eq!(e.code, 403, "{}", e.message);
        // What the garbage collector changes passes.
        let finalize = |cur: &Value| {
            let mut next = cur.clone();
            next["metadata"]["finalizers"] = json!(["example.com/keep"]);
            Ok(next)
        };
        c.update_with(&rt(&c, "roles"), "default", "deleter", Subresource::Main, &me, finalize)
            .expect("a finalizer on a role it could not write");
        c.create(&rt(&c, "rolebindings"), Some("default"), binding("reader", "Role", "reader", "x"), &me).unwrap();
        let rebind = |cur: &Value| {
            let mut next = cur.clone();
            next["roleRef"]["name"] = json!("writer");
            Ok(next)
        };
        let admin = as_user(&UserInfo::admin());
        let e =
            c.update_with(&rt(&c, "rolebindings"), "default", "reader", Subresource::Main, &admin, rebind).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(e.message.ends_with("cannot change roleRef"), "{}", e.message);
        // Another subject on a binding of what it holds: allowed; of what it does not: refused.
        let more = |cur: &Value| {
            let mut next = cur.clone();
            next["subjects"].as_array_mut().unwrap().push(json!({"kind": "User", "name": "eve"}));
            Ok(next)
        };
        c.update_with(&rt(&c, "rolebindings"), "default", "reader", Subresource::Main, &me, more).unwrap();
        c.create(&rt(&c, "rolebindings"), Some("default"), binding("deleter", "Role", "deleter", "x"), &admin).unwrap();
        let e = c.update_with(&rt(&c, "rolebindings"), "default", "deleter", Subresource::Main, &me, more).unwrap_err();
        assert_eq!(e.code, 403);
    }

    #[test]
    fn bind_and_escalate_grant_what_the_writer_does_not_hold() {
        let (c, writer) = cluster_with(json!([
            {"apiGroups": [GROUP], "resources": ["roles"], "resourceNames": ["deleter"], "verbs": ["bind"]},
        ]));
        let me = as_user(&writer);
        c.create(&rt(&c, "rolebindings"), Some("default"), binding("deleter", "Role", "deleter", "x"), &me)
            .expect("bind on that role");
        c.create(&rt(&c, "rolebindings"), Some("default"), binding("ghost", "Role", "ghost", "x"), &me)
            .expect_err("bind on another name is no bind");
        let (c, writer) = cluster_with(json!([{"apiGroups": [GROUP], "resources": ["roles"], "verbs": ["escalate"]}]));
        let wider = role("wider", json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]));
        c.create(&rt(&c, "roles"), Some("default"), wider, &as_user(&writer)).expect("escalate on roles");
    }

    #[test]
    fn a_cluster_without_authorization_checks_nothing() {
        let c = Cluster::new(ClusterConfig::named("open"));
        let anyone = UserInfo::named("anyone", vec![]);
        let wide = role("wide", json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]));
        c.create(&rt(&c, "roles"), Some("default"), wide, &as_user(&anyone)).unwrap();
    }

    #[test]
    fn a_held_rule_covers_each_permission_it_grants_and_no_other() {
        // How many single permissions of `wanted` the one rule `held` does not grant.
        let lacks = |held: Value, wanted: Value| uncovered(&[held], &[wanted]).len();
        let leases = json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create"]});
        let named = json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["db-pods"], "verbs": ["get"]});
        assert_eq!(lacks(leases.clone(), named.clone()), 0, "a rule without names covers any name");
        assert_eq!(lacks(named.clone(), leases), 2, "a named rule covers neither any name nor another verb");
        assert_eq!(lacks(named.clone(), named), 0);
        let star = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]});
        let status = json!({"apiGroups": ["apps"], "resources": ["statefulsets/status"], "verbs": ["update"]});
        assert_eq!(lacks(star.clone(), status), 0);
        assert_eq!(lacks(star, json!({"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["update"]})), 1);
        let urls = json!({"nonResourceURLs": ["/healthz/*"], "verbs": ["get"]});
        assert_eq!(lacks(urls.clone(), json!({"nonResourceURLs": ["/healthz/etcd"], "verbs": ["get"]})), 0);
        assert_eq!(
            lacks(urls, json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]})),
            1,
            "a URL rule grants no resource"
        );
    }

    #[test]
    fn the_refusal_names_what_is_missing_as_the_apiserver_does() {
        let user = UserInfo::service_account("spanset-system", "spanset-member");
        let held = [json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]})];
        let wanted = [json!({"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["list", "get", "delete"]})];
        assert_eq!(
            not_held(&user, uncovered(&held, &wanted)),
            "user \"system:serviceaccount:spanset-system:spanset-member\" (groups=[\"system:serviceaccounts\" \
             \"system:serviceaccounts:spanset-system\" \"system:authenticated\"]) is attempting to grant RBAC \
             permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\" \"delete\"]}\n\
             {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"list\" \"get\" \"delete\"]}"
        );
    }

    #[test]
    fn only_a_change_the_garbage_collector_makes_goes_unchecked() {
        let old = json!({"metadata": {"name": "r", "resourceVersion": "4"}, "rules": []});
        let mut gc = old.clone();
        gc["metadata"]["finalizers"] = json!(["foregroundDeletion"]);
        gc["metadata"]["ownerReferences"] = json!([{"uid": "u"}]);
        assert!(only_gc_fields_change(&gc, &old));
        let mut wider = gc;
        wider["rules"] = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]);
        assert!(!only_gc_fields_change(&wider, &old));
    }
}
