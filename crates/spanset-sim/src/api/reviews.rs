//! The auth APIs that answer a POST without storing anything: `SelfSubjectAccessReview`
//! (what `kubectl auth can-i` asks), `SelfSubjectRulesReview` (`kubectl auth can-i --list`),
//! `SelfSubjectReview` (`kubectl auth whoami`)
//! and the ServiceAccount `token` subresource (TokenRequest, what `kubectl create token` and
//! `spanset join` use to mint a token).

use std::time::Duration;

use serde_json::{Value, json};

use super::auth::{self, Decision};
use crate::{
    cluster::Cluster,
    store::{
        audit::Attributes,
        error::{ApiError, ApiResult},
        object,
        tokens::{BoundTo, UserInfo},
    },
};

/// Default lifetime of a requested token (`TokenRequestSpec.expirationSeconds`).
const DEFAULT_EXPIRATION: i64 = 3600;
/// The shortest lifetime the apiserver accepts.
const MIN_EXPIRATION: i64 = 600;

fn invalid(kind: &str, field: &str, message: String) -> ApiError {
    ApiError::custom(422, "Invalid", format!("{kind}.authentication.k8s.io \"\" is invalid: {field}: {message}"))
}

/// Answers a SelfSubjectAccessReview for `user`: the review echoed with `status.allowed`.
/// A cluster that does not enforce authorization allows everything, and says so.
pub fn access_review(cluster: &Cluster, user: &UserInfo, body: &Value) -> ApiResult<Value> {
    let spec = body.get("spec").cloned().unwrap_or(json!({}));
    let str_at = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let a = if let Some(r) = spec.get("resourceAttributes") {
        Attributes {
            verb: str_at(r, "verb"),
            resource_request: true,
            group: str_at(r, "group"),
            resource: str_at(r, "resource"),
            subresource: str_at(r, "subresource"),
            namespace: str_at(r, "namespace"),
            name: str_at(r, "name"),
            path: String::new(),
        }
    } else if let Some(n) = spec.get("nonResourceAttributes") {
        Attributes { verb: str_at(n, "verb"), path: str_at(n, "path"), ..Default::default() }
    } else {
        return Err(ApiError::custom(
            422,
            "Invalid",
            "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    };
    let allowed = !cluster.config.auth || matches!(auth::decide(cluster, user, &a), Decision::Allow(_));
    let mut out = body.clone();
    out["apiVersion"] = json!("authorization.k8s.io/v1");
    out["kind"] = json!("SelfSubjectAccessReview");
    object::metadata_mut(&mut out).insert("creationTimestamp".into(), Value::Null);
    out["status"] = if allowed { json!({"allowed": true}) } else { json!({"allowed": false}) };
    Ok(out)
}

/// Answers a SelfSubjectRulesReview for `user` in `spec.namespace`: every rule of the roles
/// bound to the user there and cluster-wide, split into resource and non-resource rules, as
/// the RBAC rule resolver lists them. A cluster that does not enforce authorization grants
/// everything, and says so.
pub fn rules_review(cluster: &Cluster, user: &UserInfo, body: &Value) -> ApiResult<Value> {
    let namespace = body.pointer("/spec/namespace").and_then(Value::as_str).unwrap_or("");
    let rules = if cluster.config.auth {
        auth::rules_for(cluster, user, namespace)
    } else {
        vec![
            json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
            json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
        ]
    };
    let keep = |r: &Value, keys: &[&str]| {
        let mut out = serde_json::Map::new();
        for k in keys {
            if let Some(v) = r.get(*k).filter(|v| v.as_array().is_some_and(|a| !a.is_empty())) {
                out.insert((*k).to_string(), v.clone());
            }
        }
        Value::Object(out)
    };
    let (resource, non_resource): (Vec<&Value>, Vec<&Value>) =
        rules.iter().partition(|r| r.get("nonResourceURLs").and_then(Value::as_array).is_none_or(Vec::is_empty));
    let mut out = body.clone();
    out["apiVersion"] = json!("authorization.k8s.io/v1");
    out["kind"] = json!("SelfSubjectRulesReview");
    object::metadata_mut(&mut out).insert("creationTimestamp".into(), Value::Null);
    out["status"] = json!({
        "resourceRules": resource.iter().map(|r| keep(r, &["verbs", "apiGroups", "resources", "resourceNames"])).collect::<Vec<_>>(),
        "nonResourceRules": non_resource.iter().map(|r| keep(r, &["verbs", "nonResourceURLs"])).collect::<Vec<_>>(),
        "incomplete": false,
    });
    Ok(out)
}

/// Answers a SelfSubjectReview (`kubectl auth whoami`) in the version it was sent to: the
/// review echoed with `status.userInfo`, the user the request was authenticated (or
/// impersonated) as, with uid and extra when known, as the apiserver omits them otherwise.
pub fn self_review(user: &UserInfo, version: &str, body: &Value) -> Value {
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        info["extra"] = json!(user.extra);
    }
    let mut out = body.clone();
    out["apiVersion"] = json!(format!("authentication.k8s.io/{version}"));
    out["kind"] = json!("SelfSubjectReview");
    object::metadata_mut(&mut out).insert("creationTimestamp".into(), Value::Null);
    out["status"] = json!({"userInfo": info});
    out
}

/// Mints a token for a ServiceAccount (`POST .../serviceaccounts/NAME/token`), bound to the
/// ServiceAccount's uid and expiring after `spec.expirationSeconds` (simulated time).
pub fn token_request(cluster: &Cluster, ns: &str, name: &str, body: &Value) -> ApiResult<Value> {
    let sa_rt = cluster.resources.by_plural("", "serviceaccounts").ok_or_else(ApiError::no_route)?;
    let sa = cluster.get(&sa_rt, ns, name)?;
    let seconds = match body.pointer("/spec/expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION,
        Some(v) => v.as_i64().ok_or_else(|| {
            invalid("TokenRequest", "spec.expirationSeconds", format!("Invalid value: {v}: must be a number"))
        })?,
    };
    if seconds < MIN_EXPIRATION {
        return Err(invalid(
            "TokenRequest",
            "spec.expirationSeconds",
            format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
        ));
    }
    let audiences: Vec<String> = body
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .filter(|a: &Vec<String>| !a.is_empty())
        .unwrap_or_else(|| vec!["https://kubernetes.default.svc.cluster.local".into()]);
    let lifetime = cluster.config.real(Duration::from_secs(seconds as u64));
    let bound = BoundTo { namespace: ns.into(), name: name.into(), uid: object::uid(&sa).into() };
    let token = cluster.tokens.issue_for(bound, &audiences, seconds, std::time::Instant::now() + lifetime);
    let expires = jiff::Timestamp::now() + jiff::SignedDuration::try_from(lifetime).unwrap_or_default();
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": null},
        "status": {"token": token, "expirationTimestamp": object::format_time(expires)},
    }))
}
