//! Impersonation, as the apiserver's filter does it (`kubectl --as USER --as-group GROUP`): the
//! `Impersonate-User` and `Impersonate-Group` headers each need an `impersonate` rule for the
//! requester — on `users` (or on `serviceaccounts` in their namespace, for a ServiceAccount's
//! user name), on `groups`, and on `uids` for `Impersonate-Uid` (`--as-uid`) — and the request
//! then runs as that user, with the groups asked for plus `system:authenticated` (and a
//! ServiceAccount's own groups).

use hyper::HeaderMap;

use super::auth;
use crate::{
    cluster::Cluster,
    store::{audit::Attributes, error::ApiError, tokens::UserInfo},
};

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";

fn impersonating(resource: &str, namespace: &str, name: &str) -> Attributes {
    Attributes {
        verb: "impersonate".into(),
        resource_request: true,
        // A uid is impersonated through `uids.authentication.k8s.io`; users, groups and
        // ServiceAccounts through the core group.
        group: if resource == "uids" { "authentication.k8s.io".into() } else { String::new() },
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
    let uid = values(UID).into_iter().next();
    let Some(user) = user else {
        if groups.is_empty() && uid.is_none() {
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
        None => (UserInfo::named(&user, Vec::new()), vec![impersonating("users", "", &user)]),
    };
    let checks = checks
        .into_iter()
        .chain(groups.iter().map(|g| impersonating("groups", "", g)))
        .chain(uid.iter().map(|u| impersonating("uids", "", u)));
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
    Ok(UserInfo { name: target.name, groups: all, uid: uid.unwrap_or_default(), extra: Default::default() })
}
