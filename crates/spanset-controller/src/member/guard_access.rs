//! What the guards may do in a member: read their federations' pod Leases, those objects and
//! nothing else. One Role and one RoleBinding per namespace, both named [`ACCESS_NAME`], shared
//! by the namespace's federations with a pod lease: the Role may `get` each of their Leases by
//! name, the binding gives it to each of their pods' ServiceAccounts (the template's, or the
//! namespace's `default`: the pods keep the account their template gives them).
//!
//! Why one pair per namespace rather than one per federation: the member's identity then needs
//! rights on two names only (`resourceNames: [spanset-pod-leases]` for get, update and delete in
//! `deploy/member/rbac.yaml`), instead of on every Role and RoleBinding of the member, whose
//! `update` and `delete` would let a stolen member credential strip or remove anyone's RBAC
//! (`kube-system`'s included). `create` cannot be limited by name; RBAC's escalation prevention
//! and the member's guard `spanset-member-scope` confine what it may create.
//!
//! Which federations a pair serves, with their accounts, is the [`GUARDS`] annotation on each
//! object (`db=db,shop=default`); the rules, subjects and annotation are a function of it, so a
//! hand edit (a widened verb) is put back by the next ensure, and a federation's teardown
//! removes its own entry only, deleting the object with the last one.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::ResourceExt;
use spanset_api::{
    FederatedStatefulSet,
    labels::{FEDERATION, MANAGED_BY, MANAGER},
};

use crate::pod_lease::object::lease_name;

/// The name of the guards' Role and of its RoleBinding, in every namespace of a member that
/// holds federations with a pod lease.
pub const ACCESS_NAME: &str = "spanset-pod-leases";

/// Annotation on both: the federations whose guards they serve, each with its pods'
/// ServiceAccount, `federation=account` joined by commas, sorted by federation (neither name
/// can hold `=` or `,`).
pub const GUARDS: &str = "spanset.dev/pod-lease-guards";

/// One federation's part of its namespace's guard access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guarded {
    /// The federation.
    pub federation: String,
    /// Its namespace.
    pub namespace: String,
    /// Its pods' ServiceAccount.
    pub account: String,
}

/// A federation's part, if it has a pod lease (`None` without one).
pub fn guarded(fsts: &FederatedStatefulSet) -> Option<Guarded> {
    fsts.spec.failover.pod_lease?;
    let account = fsts
        .spec
        .template
        .template
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "default".into());
    Some(Guarded { federation: fsts.name_any(), namespace: fsts.namespace().unwrap_or_default(), account })
}

/// The federations a stored object serves, with their accounts (its [`GUARDS`] annotation).
pub fn served(meta: &ObjectMeta) -> BTreeMap<String, String> {
    let text = meta.annotations.as_ref().and_then(|a| a.get(GUARDS)).map(String::as_str).unwrap_or("");
    text.split(',')
        .filter_map(|e| e.split_once('='))
        .map(|(f, a)| (f.trim().to_string(), a.trim().to_string()))
        .filter(|(f, a)| !f.is_empty() && !a.is_empty())
        .collect()
}

/// Whether a stored object of [`ACCESS_NAME`] is spanset's (one a user made under that name is
/// left alone).
pub fn is_ours(meta: &ObjectMeta) -> bool {
    let labels = meta.labels.as_ref();
    labels.is_some_and(|l| l.contains_key(FEDERATION) && l.get(MANAGED_BY).map(String::as_str) == Some(MANAGER))
}

fn meta(namespace: &str, served: &BTreeMap<String, String>, owner: &str) -> ObjectMeta {
    let annotation = served.iter().map(|(f, a)| format!("{f}={a}")).collect::<Vec<_>>().join(",");
    ObjectMeta {
        name: Some(ACCESS_NAME.into()),
        namespace: Some(namespace.into()),
        // The member's guard `spanset-member-scope` lets spanset write only what carries a
        // federation's label: the first federation served, kept while it is served.
        labels: Some(BTreeMap::from([
            (FEDERATION.to_string(), owner.to_string()),
            (MANAGED_BY.to_string(), MANAGER.to_string()),
        ])),
        annotations: Some(BTreeMap::from([(GUARDS.to_string(), annotation)])),
        ..Default::default()
    }
}

/// The Role serving `served` in `namespace`: `get` on each federation's pod Lease, by name.
pub fn role(namespace: &str, served: &BTreeMap<String, String>, owner: &str) -> Role {
    Role {
        metadata: meta(namespace, served, owner),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["coordination.k8s.io".into()]),
            resources: Some(vec!["leases".into()]),
            resource_names: Some(served.keys().map(|f| lease_name(f)).collect()),
            verbs: vec!["get".into()],
            ..Default::default()
        }]),
    }
}

/// The RoleBinding giving the [`role`] to each served federation's pods' ServiceAccount.
pub fn binding(namespace: &str, served: &BTreeMap<String, String>, owner: &str) -> RoleBinding {
    let mut accounts: Vec<&String> = served.values().collect();
    accounts.sort();
    accounts.dedup();
    RoleBinding {
        metadata: meta(namespace, served, owner),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: ACCESS_NAME.into(),
        },
        subjects: Some(
            accounts
                .into_iter()
                .map(|a| Subject {
                    kind: "ServiceAccount".into(),
                    name: a.clone(),
                    namespace: Some(namespace.into()),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

/// The federation the labels name: the stored one while it is still served, else the first.
fn owner(stored: Option<&ObjectMeta>, served: &BTreeMap<String, String>) -> String {
    let labelled = stored.and_then(|m| m.labels.as_ref()).and_then(|l| l.get(FEDERATION));
    match labelled.filter(|o| served.contains_key(*o)) {
        Some(o) => o.clone(),
        None => served.keys().next().cloned().unwrap_or_default(),
    }
}

/// What `g`'s ensure serves over what is stored (nothing stored: `g` alone): `(served,
/// owner)`, the stored entries with `g`'s added or its account replaced.
pub fn joined(stored: Option<&ObjectMeta>, g: &Guarded) -> (BTreeMap<String, String>, String) {
    let mut served = stored.map(served).unwrap_or_default();
    served.insert(g.federation.clone(), g.account.clone());
    let owner = owner(stored, &served);
    (served, owner)
}

/// What federation `leaving`'s teardown does to a stored object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leave {
    /// Nothing: not spanset's, not serving `leaving`, or being deleted already.
    Untouched,
    /// Deleted (conditional on the version read): `leaving` was the last served.
    Delete,
    /// Written for the others (conditional on the version read): `(served, owner)`.
    Keep(BTreeMap<String, String>, String),
}

/// What federation `leaving`'s teardown does to `stored`.
pub fn left(stored: &ObjectMeta, leaving: &str) -> Leave {
    let mut served = served(stored);
    if !is_ours(stored) || stored.deletion_timestamp.is_some() || served.remove(leaving).is_none() {
        return Leave::Untouched;
    }
    if served.is_empty() {
        return Leave::Delete;
    }
    let owner = owner(Some(stored), &served);
    Leave::Keep(served, owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fsts(name: &str, account: Option<&str>) -> FederatedStatefulSet {
        let mut f: FederatedStatefulSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"replicas": 1, "placement": {"clusters": [{"name": "east"}]},
                "template": {"serviceName": name, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                        "spec": {"containers": [{"name": "db", "image": "postgres"}]}}}}
        }))
        .unwrap();
        if let Some(a) = account {
            f.spec.template.template.spec.as_mut().unwrap().service_account_name = Some(a.into());
        }
        f
    }

    #[test]
    fn the_guards_may_get_their_leases_as_their_pods_accounts() {
        let mut f = fsts("db", Some("db"));
        assert!(guarded(&f).is_none(), "no pod lease, no access");
        f.spec.failover.pod_lease = Some(spanset_api::PodLease { seconds: 30 });
        let g = guarded(&f).unwrap();
        assert_eq!((g.federation.as_str(), g.namespace.as_str(), g.account.as_str()), ("db", "shop", "db"));
        let (served, owner) = joined(None, &g);
        let role = role("shop", &served, &owner);
        let rule = &role.rules.unwrap()[0];
        assert_eq!(rule.verbs, ["get"]);
        assert_eq!(rule.resource_names.as_deref(), Some(&["db-pods".to_string()][..]));
        let binding = binding("shop", &served, &owner);
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!((subject.name.as_str(), subject.namespace.as_deref()), ("db", Some("shop")));
        assert_eq!(binding.role_ref.name, ACCESS_NAME);
        assert_eq!(role.metadata.annotations.unwrap()[GUARDS], "db=db");
        assert_eq!(binding.metadata.labels.unwrap()[FEDERATION], "db");
        let mut cache = fsts("cache", None);
        cache.spec.failover.pod_lease = Some(spanset_api::PodLease { seconds: 30 });
        assert_eq!(guarded(&cache).unwrap().account, "default", "the namespace's default account");
    }

    #[test]
    fn federations_of_one_namespace_share_the_pair_and_leave_it_one_by_one() {
        let g = |f: &str, a: &str| Guarded { federation: f.into(), namespace: "shop".into(), account: a.into() };
        let (served, owner) = joined(None, &g("db", "db"));
        let stored = role("shop", &served, &owner).metadata;
        let (served, owner) = joined(Some(&stored), &g("cache", "default"));
        assert_eq!(owner, "db", "the first federation keeps the labels");
        let both = binding("shop", &served, &owner);
        let names: Vec<&str> = both.subjects.as_ref().unwrap().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["db", "default"]);
        assert_eq!(
            role("shop", &served, &owner).rules.unwrap()[0].resource_names.as_deref().unwrap(),
            ["cache-pods", "db-pods"]
        );
        // A new account replaces the federation's old one.
        let (moved, _) = joined(Some(&both.metadata), &g("db", "db-v2"));
        assert_eq!(moved["db"], "db-v2");
        assert_eq!(moved.len(), 2);
        // Leaving: the others are kept (the labels move to one still served), the last deletes.
        match left(&both.metadata, "db") {
            Leave::Keep(rest, owner) => {
                assert_eq!(rest.keys().collect::<Vec<_>>(), ["cache"]);
                assert_eq!(owner, "cache");
            }
            other => panic!("{other:?}"),
        }
        let cache_only = binding("shop", &BTreeMap::from([("cache".to_string(), "default".to_string())]), "cache");
        assert_eq!(left(&cache_only.metadata, "cache"), Leave::Delete);
        assert_eq!(left(&cache_only.metadata, "db"), Leave::Untouched, "not served: nothing to do");
        let mut users = cache_only.metadata.clone();
        users.labels = None;
        assert_eq!(left(&users, "cache"), Leave::Untouched, "a user's object of that name is left alone");
    }
}
