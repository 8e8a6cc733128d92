//! What the guards may do in a member: read their federation's pod Lease, that one object and
//! nothing else. A Role naming the Lease, bound to the pods' ServiceAccount (the template's, or
//! the namespace's `default`): the pods keep the account their template gives them.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::ResourceExt;

use super::object::lease_name;
use crate::{
    api::FederatedStatefulSet,
    controller::labels::{FEDERATION, MANAGED_BY, MANAGER},
};

/// The name of the guards' Role and RoleBinding: the Lease's.
pub fn access_name(federation: &str) -> String {
    lease_name(federation)
}

fn meta(fsts: &FederatedStatefulSet) -> ObjectMeta {
    ObjectMeta {
        name: Some(access_name(&fsts.name_any())),
        namespace: fsts.namespace(),
        labels: Some(BTreeMap::from([
            (FEDERATION.to_string(), fsts.name_any()),
            (MANAGED_BY.to_string(), MANAGER.to_string()),
        ])),
        ..Default::default()
    }
}

/// The guards' Role and its binding to the pods' ServiceAccount, for a federation with a pod
/// lease (`None` without one).
pub fn guard_access(fsts: &FederatedStatefulSet) -> Option<(Role, RoleBinding)> {
    fsts.spec.failover.pod_lease?;
    let name = access_name(&fsts.name_any());
    let role = Role {
        metadata: meta(fsts),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["coordination.k8s.io".into()]),
            resources: Some(vec!["leases".into()]),
            resource_names: Some(vec![lease_name(&fsts.name_any())]),
            verbs: vec!["get".into()],
            ..Default::default()
        }]),
    };
    let account = fsts
        .spec
        .template
        .template
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "default".into());
    let binding = RoleBinding {
        metadata: meta(fsts),
        role_ref: RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: "Role".into(), name },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account,
            namespace: fsts.namespace(),
            ..Default::default()
        }]),
    };
    Some((role, binding))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guards_may_get_their_one_lease_as_the_pods_account() {
        let mut f: FederatedStatefulSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {"replicas": 1, "placement": {"clusters": [{"name": "east"}]},
                "template": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db"}},
                        "spec": {"serviceAccountName": "db", "containers": [{"name": "db", "image": "postgres"}]}}}}
        }))
        .unwrap();
        assert!(guard_access(&f).is_none(), "no pod lease, no access");
        f.spec.failover.pod_lease = Some(crate::api::PodLease { seconds: 30 });
        let (role, binding) = guard_access(&f).unwrap();
        let rule = &role.rules.unwrap()[0];
        assert_eq!(rule.verbs, ["get"]);
        assert_eq!(rule.resource_names.as_deref(), Some(&["db-pods".to_string()][..]));
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!((subject.name.as_str(), subject.namespace.as_deref()), ("db", Some("shop")));
    }
}
