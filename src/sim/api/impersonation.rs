//! Impersonation, as the apiserver's filter does it (`kubectl --as USER --as-group GROUP`): the
//! `Impersonate-User` and `Impersonate-Group` headers each need an `impersonate` rule for the
//! requester — on `users` (or on `serviceaccounts` in their namespace, for a ServiceAccount's
//! user name) and on `groups` — and the request then runs as that user, with the groups asked
//! for plus `system:authenticated` (and a ServiceAccount's own groups).

use hyper::HeaderMap;

use super::auth;
use crate::sim::{
    cluster::Cluster,
    store::{audit::Attributes, error::ApiError, tokens::UserInfo},
};

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";

fn impersonating(resource: &str, namespace: &str, name: &str) -> Attributes {
    Attributes {
        verb: "impersonate".into(),
        resource_request: true,
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..Default::default()
    }
}

/// The user a request runs as: `requester`, or whom it impersonates if it may (403 naming the
/// missing `impersonate` permission otherwise; 500 for groups without a user, as the
/// apiserver answers).
pub fn apply(cluster: &Cluster, requester: UserInfo, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
    let values = |h: &str| -> Vec<String> {
        headers.get_all(h).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
    };
    let user = values(USER).into_iter().next();
    let groups = values(GROUP);
    let Some(user) = user else {
        if groups.is_empty() {
            return Ok(requester);
        }
        return Err(ApiError::custom(
            500,
            "InternalError",
            format!("Internal error occurred: requested {groups:?} without impersonating a user"),
        ));
    };
    let (target, checks) = match user.strip_prefix("system:serviceaccount:").and_then(|r| r.split_once(':')) {
        Some((ns, name)) => (UserInfo::service_account(ns, name), vec![impersonating("serviceaccounts", ns, name)]),
        None => (UserInfo { name: user.clone(), groups: Vec::new() }, vec![impersonating("users", "", &user)]),
    };
    let checks = checks.into_iter().chain(groups.iter().map(|g| impersonating("groups", "", g)));
    for a in checks {
        auth::authorize(cluster, &requester, &a)?;
    }
    let mut all = groups;
    for g in target.groups {
        if !all.contains(&g) {
            all.push(g);
        }
    }
    if !all.iter().any(|g| g == "system:authenticated") {
        all.push("system:authenticated".into());
    }
    Ok(UserInfo { name: target.name, groups: all })
}
