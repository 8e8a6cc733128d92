//! Authentication and RBAC authorization of a cluster that enforces them (`spanset sim --auth`),
//! as the apiserver does them: a bearer token names a user (401 `Unauthorized` otherwise), the
//! request becomes attributes (verb, API group, resource, subresource, namespace, name — or a
//! non-resource path), and the Roles, ClusterRoles and their bindings in storage decide (403
//! `Forbidden`, worded as the apiserver words it). Every decision is written to the cluster's
//! audit log with the rule that allowed it. The rules themselves are evaluated in the store
//! ([`crate::store::rbac`]), where escalation prevention reads them too.

use http::{HeaderMap, Method, header};
use serde_json::json;

use super::{query::Query, routes::Route};
pub use crate::store::rbac::{Decision, decide, rule_allows, rules_for};
use crate::{
    cluster::Cluster,
    store::{
        audit::{Attributes, AuditRecord},
        error::ApiError,
        object,
        tokens::{Lookup, UserInfo},
    },
};

/// The 401 the apiserver sends for a missing, unknown or expired token.
pub fn unauthorized() -> ApiError {
    ApiError::custom(401, "Unauthorized", "Unauthorized")
}

/// The user behind a request's bearer token. A ServiceAccount token stops working once its
/// ServiceAccount is deleted (or replaced by another of the same name).
pub fn authenticate(cluster: &Cluster, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(unauthorized)?;
    match cluster.tokens.lookup(token) {
        Lookup::Valid(user, None) => Ok(user),
        Lookup::Valid(user, Some(bound)) => {
            let sa = cluster.storage.get(&(String::new(), "serviceaccounts".into()), &bound.namespace, &bound.name);
            match sa {
                Some(sa) if object::uid(&sa) == bound.uid && !object::is_deleting(&sa) => Ok(user),
                _ => Err(unauthorized()),
            }
        }
        Lookup::Invalid => Err(unauthorized()),
    }
}

/// The attributes of a request, as the apiserver's `RequestInfoFactory` derives them.
pub fn attributes(method: &Method, path: &str, route: &Route, query: Option<&str>) -> Attributes {
    let Route::Resource(p) = route else {
        return Attributes { verb: method.as_str().to_lowercase(), path: path.to_string(), ..Default::default() };
    };
    let watch = Query::parse(query).is_ok_and(|q| q.watch);
    let named = p.name.is_some();
    let verb = match *method {
        Method::GET | Method::HEAD if watch && !named => "watch",
        Method::GET | Method::HEAD if named => "get",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "",
    };
    let namespace = match (&p.namespace, p.plural.as_str(), &p.name) {
        (Some(ns), _, _) => ns.clone(),
        (None, "namespaces", Some(name)) => name.clone(),
        _ => String::new(),
    };
    Attributes {
        verb: verb.to_string(),
        resource_request: true,
        group: p.group.clone(),
        resource: p.plural.clone(),
        subresource: p.subresource.clone().unwrap_or_default(),
        namespace,
        name: p.name.clone().unwrap_or_default(),
        path: path.to_string(),
    }
}

/// The second check a WebSocket `GET` on `pods/exec`, `pods/attach` or `pods/portforward`
/// needs: `create` on that subresource, as an SPDY `POST` needs (the apiserver's
/// `AuthorizePodWebsocketUpgradeCreatePermission`), so that a read-only role (`get` on
/// `pods/*`) cannot run commands in pods.
pub fn connect_also_creates(a: &Attributes) -> Option<Attributes> {
    let connect = a.resource_request
        && a.verb == "get"
        && a.group.is_empty()
        && a.resource == "pods"
        && matches!(a.subresource.as_str(), "exec" | "attach" | "portforward");
    connect.then(|| Attributes { verb: "create".into(), ..a.clone() })
}

/// The apiserver's `forbiddenMessage`, without the `RESOURCE is forbidden:` prefix.
pub fn forbidden_reason(user: &UserInfo, a: &Attributes) -> String {
    if !a.resource_request {
        return format!("User {:?} cannot {} path {:?}", user.name, a.verb, a.path);
    }
    let resource =
        if a.subresource.is_empty() { a.resource.clone() } else { format!("{}/{}", a.resource, a.subresource) };
    if a.namespace.is_empty() {
        format!(
            "User {:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
            user.name, a.verb, a.group
        )
    } else {
        format!(
            "User {:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
            user.name, a.verb, a.group, a.namespace
        )
    }
}

/// The 403 `Status` for a denied request (`apierrors.NewForbidden`).
pub fn forbidden(user: &UserInfo, a: &Attributes) -> ApiError {
    let reason = forbidden_reason(user, a);
    if !a.resource_request {
        return ApiError::custom(403, "Forbidden", format!("forbidden: {reason}"));
    }
    let qualified = if a.group.is_empty() { a.resource.clone() } else { format!("{}.{}", a.resource, a.group) };
    let message = if a.name.is_empty() {
        format!("{qualified} is forbidden: {reason}")
    } else {
        format!("{qualified} {:?} is forbidden: {reason}", a.name)
    };
    let mut details = json!({"group": a.group, "kind": a.resource});
    if !a.name.is_empty() {
        details["name"] = json!(a.name);
    }
    ApiError::custom(403, "Forbidden", message).with_details(details)
}

/// Authorizes a request and writes the decision to the audit log.
pub fn authorize(cluster: &Cluster, user: &UserInfo, a: &Attributes) -> Result<(), ApiError> {
    let decision = decide(cluster, user, a);
    let (allowed, rule) = match &decision {
        Decision::Allow(rule) => (true, rule.clone()),
        Decision::Deny => (false, None),
    };
    let mut request = a.clone();
    if a.resource_request {
        request.path.clear();
    }
    cluster.audit.record(AuditRecord { user: user.name.clone(), request, allowed, rule, denied_by: None });
    if allowed { Ok(()) } else { Err(forbidden(user, a)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::routes;

    fn attrs(method: Method, path_and_query: &str) -> Attributes {
        let (path, query) = path_and_query.split_once('?').map_or((path_and_query, None), |(p, q)| (p, Some(q)));
        attributes(&method, path, &routes::parse(path), query)
    }

    #[test]
    fn requests_become_the_apiservers_attributes() {
        let a = attrs(Method::GET, "/api/v1/namespaces/default/pods");
        assert_eq!((a.verb.as_str(), a.resource.as_str(), a.namespace.as_str()), ("list", "pods", "default"));
        assert_eq!(attrs(Method::GET, "/api/v1/namespaces/default/pods?watch=true").verb, "watch");
        let a = attrs(Method::PATCH, "/apis/apps/v1/namespaces/x/statefulsets/web/status");
        assert_eq!((a.group.as_str(), a.subresource.as_str(), a.name.as_str()), ("apps", "status", "web"));
        assert_eq!(attrs(Method::DELETE, "/api/v1/namespaces/x/pods").verb, "deletecollection");
        assert_eq!(attrs(Method::GET, "/api/v1/namespaces/kube-system").namespace, "kube-system");
        let a = attrs(Method::GET, "/version");
        assert!(!a.resource_request);
        assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", "/version"));
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let rule = json!({"apiGroups": ["apps"], "resources": ["statefulsets", "statefulsets/status"], "verbs": ["get", "patch"]});
        assert!(rule_allows(&rule, &attrs(Method::PATCH, "/apis/apps/v1/namespaces/x/statefulsets/web/status")));
        assert!(!rule_allows(&rule, &attrs(Method::PATCH, "/apis/apps/v1/namespaces/x/statefulsets/web/scale")));
        assert!(!rule_allows(&rule, &attrs(Method::DELETE, "/apis/apps/v1/namespaces/x/statefulsets/web")));
        assert!(!rule_allows(&rule, &attrs(Method::GET, "/api/v1/namespaces/x/pods/web-0")), "another group");
        let named =
            json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"], "verbs": ["get", "list"]});
        assert!(rule_allows(&named, &attrs(Method::GET, "/api/v1/namespaces/x/secrets/a")));
        assert!(!rule_allows(&named, &attrs(Method::GET, "/api/v1/namespaces/x/secrets/b")));
        assert!(!rule_allows(&named, &attrs(Method::GET, "/api/v1/namespaces/x/secrets")), "a list has no name");
        let sub = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]});
        assert!(rule_allows(&sub, &attrs(Method::PUT, "/apis/apps/v1/namespaces/x/statefulsets/web/status")));
        assert!(!rule_allows(&sub, &attrs(Method::PUT, "/apis/apps/v1/namespaces/x/statefulsets/web")));
        let paths = json!({"nonResourceURLs": ["/apis/*", "/version"], "verbs": ["get"]});
        assert!(rule_allows(&paths, &attrs(Method::GET, "/apis/apps/v1")));
        assert!(rule_allows(&paths, &attrs(Method::GET, "/version")));
        assert!(!rule_allows(&paths, &attrs(Method::GET, "/metrics")));
    }

    #[test]
    fn an_eviction_needs_create_on_pods_eviction() {
        let evict = attrs(Method::POST, "/api/v1/namespaces/x/pods/web-0/eviction");
        assert_eq!(
            (evict.verb.as_str(), evict.resource.as_str(), evict.subresource.as_str()),
            ("create", "pods", "eviction")
        );
        let drainer = json!({"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]});
        assert!(rule_allows(&drainer, &evict));
        let deleter = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]});
        assert!(!rule_allows(&deleter, &evict), "rights on pods are not rights on their evictions");
        let sa = UserInfo::service_account("ops", "drainer");
        assert!(
            forbidden(&sa, &evict)
                .message
                .ends_with(r#"cannot create resource "pods/eviction" in API group "" in the namespace "x""#)
        );
    }

    #[test]
    fn an_exec_needs_create_on_pods_exec_over_websocket_too() {
        let ws = attrs(Method::GET, "/api/v1/namespaces/x/pods/web-0/exec?command=sh&stdout=true");
        let create = connect_also_creates(&ws).expect("a WebSocket exec is checked as a create too");
        assert_eq!((create.verb.as_str(), create.subresource.as_str()), ("create", "exec"));
        let reader =
            json!({"apiGroups": [""], "resources": ["pods", "pods/exec", "pods/log"], "verbs": ["get", "list"]});
        assert!(rule_allows(&reader, &ws), "the GET itself is a get");
        assert!(!rule_allows(&reader, &create), "but a read-only role may not run commands");
        let spdy = attrs(Method::POST, "/api/v1/namespaces/x/pods/web-0/exec?command=sh");
        assert_eq!(spdy.verb, "create");
        assert!(connect_also_creates(&spdy).is_none(), "a POST is already a create");
        assert!(connect_also_creates(&attrs(Method::GET, "/api/v1/namespaces/x/pods/web-0/log")).is_none());
    }

    #[test]
    fn refusals_are_worded_as_the_apiserver_words_them() {
        let sa = UserInfo::service_account("spanset-system", "spanset");
        let e = forbidden(&sa, &attrs(Method::GET, "/api/v1/namespaces/default/pods"));
        assert_eq!(
            e.message,
            r#"pods is forbidden: User "system:serviceaccount:spanset-system:spanset" cannot list resource "pods" in API group "" in the namespace "default""#
        );
        let e = forbidden(&sa, &attrs(Method::GET, "/api/v1/nodes/n1"));
        assert_eq!(
            e.message,
            r#"nodes "n1" is forbidden: User "system:serviceaccount:spanset-system:spanset" cannot get resource "nodes" in API group "" at the cluster scope"#
        );
        let e = forbidden(&sa, &attrs(Method::PATCH, "/apis/apps/v1/namespaces/x/statefulsets/web/status"));
        assert!(e.message.starts_with(r#"statefulsets.apps "web" is forbidden: "#), "{}", e.message);
        assert!(
            e.message
                .ends_with(r#"cannot patch resource "statefulsets/status" in API group "apps" in the namespace "x""#)
        );
        let e = forbidden(&sa, &attrs(Method::GET, "/metrics"));
        assert_eq!(
            e.message,
            r#"forbidden: User "system:serviceaccount:spanset-system:spanset" cannot get path "/metrics""#
        );
    }
}
