//! A federation leaving a member ([`DeleteFederation`]): what is deleted there, in order, and
//! only what is spanset's (labelled) and not being deleted already.

use kube::Resource;

use super::{Refusal, Standing, gate::gate};
use crate::{
    controller::{labels::FEDERATION, member::cache::FederationCache, messages::DeleteFederation},
    plan::Backend,
};

/// One delete of a federation's teardown in a member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Teardown {
    /// Its StatefulSet of this API.
    Workload(Backend),
    /// An object of `kind` (Service, Secret, ConfigMap, PodDisruptionBudget) named `name`;
    /// other kinds are not deleted.
    Owned {
        /// The kind.
        kind: String,
        /// The name.
        name: String,
    },
    /// Every EndpointSlice spanset published there (`spec.network`), whatever its chunk.
    PublishedSlices,
    /// The headless Service's ServiceExport.
    Export,
}

/// The deletes of a federation's teardown, in order: the StatefulSets first (of both APIs
/// where the member serves Advanced StatefulSets), then the Service, the budget, the published
/// slices, the ServiceExport, the carried objects.
pub fn plan_teardown(
    standing: &Standing<'_>,
    msg: &DeleteFederation,
    serves_advanced: Option<bool>,
) -> Result<Vec<Teardown>, Refusal> {
    gate(standing, msg.term)?;
    let owned = |kind: &str, name: &str| Teardown::Owned { kind: kind.into(), name: name.into() };
    let mut out = vec![Teardown::Workload(Backend::StatefulSet)];
    if serves_advanced == Some(true) {
        out.push(Teardown::Workload(Backend::AdvancedStatefulSet));
    }
    out.push(owned("Service", &msg.service));
    out.push(owned("PodDisruptionBudget", &msg.key.name));
    out.push(Teardown::PublishedSlices);
    if msg.exported {
        out.push(Teardown::Export);
    }
    out.extend(msg.carried.iter().map(|(kind, name)| owned(kind, name)));
    Ok(out)
}

/// Whether an object found under a teardown's name is deleted: only spanset's (labelled with
/// its federation), and not one being deleted already.
pub fn deletable<K: Resource>(found: &K) -> bool {
    let ours = found.meta().labels.as_ref().is_some_and(|l| l.contains_key(FEDERATION));
    ours && found.meta().deletion_timestamp.is_none()
}

/// The teardown's answer: whether the StatefulSets and pods are all gone from the member.
pub fn all_gone(cached: &FederationCache) -> bool {
    cached.sts.is_none() && cached.other_kind.is_none() && cached.pods.is_empty()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Service;

    use super::*;
    use crate::controller::{member::objects::FederationKey, watcher::decide::gate::tests::standing};

    fn msg(exported: bool) -> DeleteFederation {
        DeleteFederation {
            key: FederationKey { namespace: "db".into(), name: "redis".into() },
            service: "redis-hl".into(),
            carried: vec![("Secret".into(), "creds".into())],
            exported,
            term: 4,
        }
    }

    #[test]
    fn the_statefulsets_go_first_and_the_carried_objects_last() {
        let owned = |kind: &str, name: &str| Teardown::Owned { kind: kind.into(), name: name.into() };
        assert_eq!(
            plan_teardown(&standing(Some(4), 4), &msg(true), Some(true)),
            Ok(vec![
                Teardown::Workload(Backend::StatefulSet),
                Teardown::Workload(Backend::AdvancedStatefulSet),
                owned("Service", "redis-hl"),
                owned("PodDisruptionBudget", "redis"),
                Teardown::PublishedSlices,
                Teardown::Export,
                owned("Secret", "creds"),
            ])
        );
        let plain = plan_teardown(&standing(Some(4), 4), &msg(false), None).expect("allowed");
        assert!(
            !plain.contains(&Teardown::Export) && !plain.contains(&Teardown::Workload(Backend::AdvancedStatefulSet))
        );
        assert_eq!(plan_teardown(&standing(Some(5), 4), &msg(false), None), Err(Refusal::NotLeading));
    }

    #[test]
    fn only_spanset_s_objects_not_being_deleted_are_deleted() {
        let svc = |labelled: bool, deleting: bool| {
            let mut s = Service::default();
            if labelled {
                s.metadata.labels = Some([(FEDERATION.to_string(), "redis".to_string())].into());
            }
            if deleting {
                s.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2026-01-01T00:00:00Z".parse().expect("a time"),
                ));
            }
            s
        };
        assert!(deletable(&svc(true, false)));
        assert!(!deletable(&svc(false, false)), "the user's own Service of that name stays");
        assert!(!deletable(&svc(true, true)));
    }

    #[test]
    fn the_teardown_is_done_once_the_statefulsets_and_pods_are_gone() {
        assert!(all_gone(&FederationCache::default()));
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "redis-0", "namespace": "db", "uid": "p-0", "resourceVersion": "3",
                "labels": {FEDERATION: "redis"}},
        }))
        .expect("a pod");
        let mut cache = crate::controller::member::cache::MemberCache::default();
        let key = cache.pod_applied(&pod).expect("a pod of the federation");
        assert!(!all_gone(&cache.federations[&key]), "a pod still terminating keeps it going");
    }
}
