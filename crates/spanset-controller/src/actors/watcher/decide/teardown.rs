//! A federation leaving a member ([`DeleteFederation`], or the sweep of what a deleted
//! federation left in a fenced member, [`SweepLeftover`]): what is deleted there, in order, and
//! only what is spanset's, of this federation (labelled with its name), and not being deleted
//! already. What several federations may share (the headless Service, carried objects, the
//! ServiceExport) is released instead: deleted only when no other federation keeps it
//! ([`sharing`]).

use kube::Resource;
use spanset_api::{
    Leftover, LeftoverObject,
    labels::{FEDERATION, FEDERATION_UID},
};
use spanset_plan::Backend;

use super::{WriteRefusal, WriterStanding, admit::admit};
use crate::{
    actors::messages::{DeleteFederation, SweepLeftover},
    member::{cache::FederationCache, sharing},
};
use crate::{member::guard_access::ACCESS_NAME, pod_lease::object::lease_name};

/// One step of a federation's teardown in a member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Teardown {
    /// Its StatefulSet of this API.
    Workload(Backend),
    /// Its object of `kind` (PodDisruptionBudget) named `name`; other kinds are not deleted.
    Owned {
        /// The kind.
        kind: String,
        /// The name.
        name: String,
    },
    /// The guards' Role and RoleBinding of the namespace ([`ACCESS_NAME`]), shared by its
    /// federations with a pod lease: the leaving federation's entry removed, each deleted with
    /// the last (see [`crate::member::guard_access`]).
    GuardAccess,
    /// An object other federations may keep too (Service, Secret, ConfigMap): released.
    Shared {
        /// The kind.
        kind: String,
        /// The name.
        name: String,
    },
    /// Every EndpointSlice spanset published there (`spec.network`), whatever its chunk.
    PublishedSlices,
    /// The headless Service's ServiceExport (released, as the Service is).
    Export,
}

/// What a teardown removes, whether from a live federation or from a leftover's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// The headless Service's name.
    pub service: String,
    /// The carried objects, `(kind, name)`.
    pub carried: Vec<(String, String)>,
    /// Whether a ServiceExport was written.
    pub exported: bool,
    /// Whether it had a pod lease: its Lease goes too, and its entry in the guards' Role and
    /// RoleBinding.
    pub pod_lease: bool,
}

impl Removal {
    /// What [`DeleteFederation`] removes.
    pub fn of(msg: &DeleteFederation) -> Self {
        Removal {
            service: msg.service.clone(),
            carried: msg.carried.clone(),
            exported: msg.exported,
            pod_lease: msg.pod_lease,
        }
    }

    /// What a leftover's record names.
    pub fn of_leftover(l: &Leftover) -> Self {
        let carried = l
            .objects
            .iter()
            .filter(|o| o.kind == "Secret" || o.kind == "ConfigMap")
            .filter_map(|o| Some((o.kind.clone(), o.name.clone()?)))
            .collect();
        let pod_lease = l.objects.iter().any(|o| o.kind == "Lease");
        Removal { service: l.service.clone(), carried, exported: l.exported, pod_lease }
    }

    /// The objects, by kind and name, that a leftover's record lists (in teardown order).
    pub fn objects(&self, federation: &str) -> Vec<LeftoverObject> {
        let named = |kind: &str, name: &str| LeftoverObject { kind: kind.into(), name: Some(name.into()) };
        let mut out = vec![
            named("StatefulSet", federation),
            named("Service", &self.service),
            named("PodDisruptionBudget", federation),
            LeftoverObject { kind: "EndpointSlice".into(), name: None },
        ];
        if self.exported {
            out.push(named("ServiceExport", &self.service));
        }
        if self.pod_lease {
            out.push(named("Lease", &lease_name(federation)));
            out.extend(["RoleBinding", "Role"].map(|k| named(k, ACCESS_NAME)));
        }
        out.extend(self.carried.iter().map(|(k, n)| named(k, n)));
        out
    }
}

/// The deletes of a federation's teardown, in order: the StatefulSets first (of both APIs
/// where the member serves Advanced StatefulSets), then the Service, the budget, the published
/// slices, the ServiceExport, the carried objects.
pub fn plan_teardown(
    standing: &WriterStanding<'_>,
    term: u64,
    removal: &Removal,
    federation: &str,
    serves_advanced: Option<bool>,
) -> Result<Vec<Teardown>, WriteRefusal> {
    admit(standing, term)?;
    let shared = |kind: &str, name: &str| Teardown::Shared { kind: kind.into(), name: name.into() };
    let mut out = vec![Teardown::Workload(Backend::StatefulSet)];
    if serves_advanced == Some(true) {
        out.push(Teardown::Workload(Backend::AdvancedStatefulSet));
    }
    out.push(shared("Service", &removal.service));
    out.push(Teardown::Owned { kind: "PodDisruptionBudget".into(), name: federation.into() });
    if removal.pod_lease {
        out.push(Teardown::Owned { kind: "Lease".into(), name: lease_name(federation) });
        out.push(Teardown::GuardAccess);
    }
    out.push(Teardown::PublishedSlices);
    if removal.exported {
        out.push(Teardown::Export);
    }
    out.extend(removal.carried.iter().map(|(kind, name)| shared(kind, name)));
    Ok(out)
}

/// Whether an object found under a teardown's name is deleted: only spanset's of `federation`
/// (labelled with its name), and not one being deleted already.
pub fn deletable<K: Resource>(found: &K, federation: &str, uid: Option<&str>) -> bool {
    let labels = found.meta().labels.as_ref();
    let ours = labels.and_then(|l| l.get(FEDERATION)).is_some_and(|f| f == federation);
    // Labelled with another incarnation's uid: a federation re-created under the same name.
    let namesake = match (uid, labels.and_then(|l| l.get(FEDERATION_UID))) {
        (Some(deleting), Some(labelled)) => labelled != deleting,
        _ => false,
    };
    ours && !namesake && found.meta().deletion_timestamp.is_none()
}

/// The teardown's answer: whether the StatefulSets and pods are all gone from the member.
pub fn all_gone(cached: &FederationCache) -> bool {
    cached.sts.is_none() && cached.other_kind.is_none() && cached.pods.is_empty()
}

/// The step of a leftover's sweep in a member that answers, from what was read there: a
/// returning fenced member is treated as always, its StatefulSet shrunk to nothing first, then
/// its pods deleted, and only once none is left are its objects removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SweepStep {
    /// Shrink this API's StatefulSet to 0 replicas (conditional on the version read).
    Shrink(Backend),
    /// Delete these pods, `(name, uid)`, and wait for them to go.
    DeletePods(Vec<(String, String)>),
    /// Pods are still terminating: wait.
    Wait,
    /// Nothing of it runs: remove its objects.
    Remove,
}

/// A StatefulSet found where a leftover's record points, as the sweep judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundSts {
    /// Its API.
    pub kind: Backend,
    /// Its `spec.replicas`.
    pub replicas: i64,
    /// It is being deleted.
    pub deleting: bool,
}

/// The next step of a sweep: a StatefulSet that may still run pods is shrunk first (one API at
/// a time), then every pod not yet being deleted is deleted, and the objects are removed only
/// once no pod is left.
pub fn sweep_step(found: &[FoundSts], pods: &[(String, String, bool)]) -> SweepStep {
    if let Some(s) = found.iter().find(|s| !s.deleting && s.replicas > 0) {
        return SweepStep::Shrink(s.kind);
    }
    let live: Vec<(String, String)> =
        pods.iter().filter(|(_, _, deleting)| !deleting).map(|(n, u, _)| (n.clone(), u.clone())).collect();
    if !live.is_empty() {
        return SweepStep::DeletePods(live);
    }
    if pods.is_empty() { SweepStep::Remove } else { SweepStep::Wait }
}

/// Whether a leftover's sweep may act on the member's objects of its federation's name at all:
/// not when a namesake federation now exists in the host (they are the namesake's, or will be
/// adopted by it), and not when the StatefulSet found there carries another federation's uid.
pub fn sweep_applies(msg: &SweepLeftover, found_uids: &[Option<String>]) -> bool {
    !msg.namesake && found_uids.iter().flatten().all(|uid| *uid == msg.leftover.uid)
}

/// The other federations keeping `(kind, name)` in this member (see [`sharing::Sharers`]).
pub fn others(sharers: &sharing::Sharers, kind: &str, name: &str) -> std::collections::BTreeSet<String> {
    sharers.get(&(kind.to_string(), name.to_string())).cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Service;

    use super::*;
    use crate::{actors::watcher::decide::admit::tests::standing, member::objects::FederationKey};

    fn msg(exported: bool) -> DeleteFederation {
        DeleteFederation {
            key: FederationKey { namespace: "db".into(), name: "redis".into() },
            service: "redis-hl".into(),
            carried: vec![("Secret".into(), "creds".into())],
            exported,
            pod_lease: exported,
            term: 4,
            uid: Some("u-1".into()),
            sharers: Default::default(),
        }
    }

    #[test]
    fn the_statefulsets_go_first_and_the_carried_objects_last() {
        let shared = |kind: &str, name: &str| Teardown::Shared { kind: kind.into(), name: name.into() };
        let plan = |m: &DeleteFederation, term: Option<u64>, advanced| {
            plan_teardown(&standing(term, 4), m.term, &Removal::of(m), &m.key.name, advanced)
        };
        assert_eq!(
            plan(&msg(true), Some(4), Some(true)),
            Ok(vec![
                Teardown::Workload(Backend::StatefulSet),
                Teardown::Workload(Backend::AdvancedStatefulSet),
                shared("Service", "redis-hl"),
                Teardown::Owned { kind: "PodDisruptionBudget".into(), name: "redis".into() },
                Teardown::Owned { kind: "Lease".into(), name: "redis-pods".into() },
                Teardown::GuardAccess,
                Teardown::PublishedSlices,
                Teardown::Export,
                shared("Secret", "creds"),
            ])
        );
        let plain = plan(&msg(false), Some(4), None).expect("allowed");
        assert!(
            !plain.contains(&Teardown::Export) && !plain.contains(&Teardown::Workload(Backend::AdvancedStatefulSet))
        );
        assert_eq!(plan(&msg(false), Some(5), None), Err(WriteRefusal::NotLeading));
    }

    #[test]
    fn a_leftover_s_record_names_what_its_sweep_removes() {
        let m = msg(true);
        let removal = Removal::of(&m);
        let leftover = Leftover {
            federation: "redis".into(),
            namespace: "db".into(),
            uid: "u-1".into(),
            since: None,
            service: m.service.clone(),
            exported: true,
            objects: removal.objects("redis"),
        };
        assert_eq!(Removal::of_leftover(&leftover), removal);
        let kinds: Vec<&str> = leftover.objects.iter().map(|o| o.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "StatefulSet",
                "Service",
                "PodDisruptionBudget",
                "EndpointSlice",
                "ServiceExport",
                "Lease",
                "RoleBinding",
                "Role",
                "Secret"
            ]
        );
    }

    #[test]
    fn a_sweep_shrinks_first_then_deletes_pods_and_removes_only_once_none_is_left() {
        let sts = |replicas, deleting| FoundSts { kind: Backend::StatefulSet, replicas, deleting };
        let pod = |n: &str, deleting| (n.to_string(), format!("uid-{n}"), deleting);
        assert_eq!(sweep_step(&[sts(2, false)], &[pod("redis-4", false)]), SweepStep::Shrink(Backend::StatefulSet));
        assert_eq!(
            sweep_step(&[sts(0, false)], &[pod("redis-4", true), pod("redis-5", false)]),
            SweepStep::DeletePods(vec![("redis-5".into(), "uid-redis-5".into())])
        );
        assert_eq!(sweep_step(&[sts(0, false)], &[pod("redis-4", true)]), SweepStep::Wait);
        assert_eq!(sweep_step(&[sts(0, false)], &[]), SweepStep::Remove);
        assert_eq!(sweep_step(&[sts(3, true)], &[]), SweepStep::Remove, "one being deleted already is not shrunk");
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
        assert!(deletable(&svc(true, false), "redis", None));
        assert!(!deletable(&svc(true, false), "kv", None), "another federation's object of that name stays");
        assert!(!deletable(&svc(false, false), "redis", None), "the user's own Service of that name stays");
        assert!(!deletable(&svc(true, true), "redis", None));
        // The uid label: the deleted federation's objects go, a namesake's stay; an object
        // written before the label existed goes by its name.
        let with_uid = |uid: &str| {
            let mut s = svc(true, false);
            s.metadata.labels.get_or_insert_with(Default::default).insert(FEDERATION_UID.into(), uid.into());
            s
        };
        assert!(deletable(&with_uid("u-1"), "redis", Some("u-1")));
        assert!(!deletable(&with_uid("u-2"), "redis", Some("u-1")), "a re-created namesake's object stays");
        assert!(deletable(&svc(true, false), "redis", Some("u-1")), "an object without the uid label");
    }

    #[test]
    fn the_teardown_is_done_once_the_statefulsets_and_pods_are_gone() {
        assert!(all_gone(&FederationCache::default()));
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "redis-0", "namespace": "db", "uid": "p-0", "resourceVersion": "3",
                "labels": {FEDERATION: "redis"}},
        }))
        .expect("a pod");
        let mut cache = crate::member::cache::MemberCache::default();
        let key = cache.pod_applied(&pod).expect("a pod of the federation");
        assert!(!all_gone(&cache.federations[&key]), "a pod still terminating keeps it going");
    }
}
