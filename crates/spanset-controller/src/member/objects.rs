//! What spanset writes in a member cluster for one federation, built from the
//! FederatedStatefulSet alone: the StatefulSet of a slice, its headless Service, the namespace
//! and the carried objects. Pure functions, so the exact objects are unit-tested.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{StatefulSet, StatefulSetOrdinals, StatefulSetSpec},
        core::v1::{Namespace, PodSchedulingGate, Service, ServicePort, ServiceSpec},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{ResourceExt, api::DynamicObject};
use spanset_api::{
    FederatedStatefulSet, IdentityGate,
    labels::{FEDERATION, FEDERATION_NAMESPACE, FEDERATION_UID, IDENTITY_GATE, MANAGED_BY, MANAGER, TEMPLATE_HASH},
};
use spanset_plan::{Backend, Ordinal, Slice};

use super::workload::api_resource;

/// Which federation a member object belongs to: its namespace, name and uid.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FederationKey {
    /// Namespace of the FederatedStatefulSet (and of its member objects).
    pub namespace: String,
    /// Name of the FederatedStatefulSet (and of its member StatefulSets).
    pub name: String,
}

impl FederationKey {
    /// The key of a FederatedStatefulSet.
    pub fn of(fsts: &FederatedStatefulSet) -> Self {
        Self { namespace: fsts.namespace().unwrap_or_default(), name: fsts.name_any() }
    }
}

impl std::fmt::Display for FederationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The labels of every member object of a federation.
pub fn ownership_labels(fsts: &FederatedStatefulSet) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY.to_string(), MANAGER.to_string()),
        (FEDERATION.to_string(), fsts.name_any()),
        (FEDERATION_NAMESPACE.to_string(), fsts.namespace().unwrap_or_default()),
        (FEDERATION_UID.to_string(), fsts.uid().unwrap_or_default()),
    ])
}

/// FNV-1a over the bytes: a hash that stays the same across builds and Rust versions (the
/// standard hasher does not promise that), for the template-hash annotation.
fn stable_hash(bytes: &[u8]) -> String {
    format!("{:016x}", crate::leadership::shard_hash::fnv1a(bytes.iter().copied()))
}

/// The StatefulSet spec of a federation without its slice (replicas 0, no ordinals), with the
/// federation label added to the pod template so that pods can be watched by label, and to the
/// claim templates, so that the claims a member's StatefulSet controller creates are marked
/// spanset's (the members' `spanset-member-scope` admission policy lets spanset's identity
/// retire only objects it manages, such as a claim left behind by a move).
fn spec_without_slice(fsts: &FederatedStatefulSet) -> StatefulSetSpec {
    let t = &fsts.spec.template;
    let mut template = t.template.clone();
    let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    meta.labels.get_or_insert_with(BTreeMap::new).insert(FEDERATION.to_string(), fsts.name_any());
    if gated(fsts) {
        let pod = template.spec.get_or_insert_with(Default::default);
        let gates = pod.scheduling_gates.get_or_insert_with(Vec::new);
        if !gates.iter().any(|g| g.name == IDENTITY_GATE) {
            gates.push(PodSchedulingGate { name: IDENTITY_GATE.to_string() });
        }
    }
    // Self-fencing pods: the guard is part of the template, so its image and flags are in the
    // template hash, and a change of them rolls the pods as any template change does.
    if let Some(lease) = fsts.spec.failover.pod_lease {
        let namespace = fsts.namespace().unwrap_or_default();
        let settings = crate::pod_lease::settings::settings();
        crate::pod_lease::inject::inject(
            &mut template,
            &namespace,
            &fsts.name_any(),
            &fsts.uid().unwrap_or_default(),
            lease.seconds,
            settings,
        );
    }
    // The partition is written per slice (the rollout's cursor in the slice's own indices).
    let mut update_strategy = t.update_strategy.as_ref().map(spanset_api::UpdateStrategy::to_apps_v1);
    if let Some(r) = update_strategy.as_mut().and_then(|u| u.rolling_update.as_mut()) {
        r.partition = None;
    }
    let mut claims = t.volume_claim_templates.clone();
    for c in &mut claims {
        c.metadata.labels.get_or_insert_with(BTreeMap::new).insert(FEDERATION.to_string(), fsts.name_any());
    }
    StatefulSetSpec {
        selector: t.selector.clone(),
        service_name: Some(t.service_name.clone()),
        template,
        volume_claim_templates: (!claims.is_empty()).then_some(claims),
        pod_management_policy: t.pod_management_policy.clone(),
        update_strategy,
        persistent_volume_claim_retention_policy: t.persistent_volume_claim_retention_policy.clone(),
        min_ready_seconds: t.min_ready_seconds,
        ..Default::default()
    }
}

/// The pod template as written in every member (the federation's, with spanset's label and
/// gate), as JSON.
pub fn pod_template(fsts: &FederatedStatefulSet) -> serde_json::Value {
    serde_json::to_value(spec_without_slice(fsts).template).unwrap_or_default()
}

/// Whether the federation's pods carry the identity gate (`spec.identityGate`, default
/// `Enabled`).
pub fn gated(fsts: &FederatedStatefulSet) -> bool {
    fsts.spec.identity_gate.unwrap_or_default() == IdentityGate::Enabled
}

/// The hash of everything spanset writes in a member StatefulSet besides the slice and the term:
/// when it differs from the stored annotation, the template must be written again.
pub fn template_hash(fsts: &FederatedStatefulSet) -> String {
    let mut doc = serde_json::json!({
        "spec": spec_without_slice(fsts),
        "labels": ownership_labels(fsts),
    });
    // Only Advanced StatefulSets hold these: apps/v1 hashes stay what they were.
    if backend(fsts) == Backend::AdvancedStatefulSet {
        doc["advanced"] = advanced_fields(fsts);
    }
    stable_hash(doc.to_string().as_bytes())
}

/// What only an Advanced StatefulSet's spec holds besides its ordinals: the whole
/// `updateStrategy` (with `podUpdatePolicy`) and `scaleStrategy`.
fn advanced_fields(fsts: &FederatedStatefulSet) -> serde_json::Value {
    let t = &fsts.spec.template;
    let mut strategy = serde_json::to_value(&t.update_strategy).unwrap_or_default();
    if let Some(r) = strategy.get_mut("rollingUpdate").and_then(serde_json::Value::as_object_mut) {
        r.remove("partition");
    }
    serde_json::json!({"updateStrategy": strategy, "scaleStrategy": t.scale_strategy})
}

/// The federation's template revision, `<name>-<hash>`: a hash of the pod template as written
/// in every member, so that two specs with the same pod template have the same revision (a
/// rollback is applying the previous template). `status.updateRevision`.
pub fn revision(fsts: &FederatedStatefulSet) -> String {
    let template = spec_without_slice(fsts).template;
    let hash = stable_hash(serde_json::to_string(&template).unwrap_or_default().as_bytes());
    format!("{}-{}", fsts.name_any(), &hash[..10])
}

/// Whether the federation replaces pods only when someone deletes them
/// (`updateStrategy.type: OnDelete`): no rollout runs, and no partition is written.
pub fn on_delete(fsts: &FederatedStatefulSet) -> bool {
    fsts.spec.template.update_strategy.as_ref().and_then(|u| u.type_) == Some(spanset_api::UpdateStrategyType::OnDelete)
}

/// `updateStrategy.rollingUpdate.partition` of the federation: global ordinals at or above it
/// are updated, as in one StatefulSet (0 when unset).
pub fn global_partition(fsts: &FederatedStatefulSet) -> Ordinal {
    let rolling = fsts.spec.template.update_strategy.as_ref().and_then(|u| u.rolling_update.as_ref());
    rolling.and_then(|r| r.partition).map_or(0, |p| p.max(0) as Ordinal)
}

/// `updateStrategy.rollingUpdate.maxUnavailable` of the federation, if set.
pub fn rolling_max_unavailable(
    fsts: &FederatedStatefulSet,
) -> Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString> {
    let rolling = fsts.spec.template.update_strategy.as_ref()?.rolling_update.as_ref()?;
    rolling.max_unavailable.as_ref()
}

/// The partition a member StatefulSet holding `slice` is written with when the federation's
/// rollout may update ordinals from `cursor` up: how many of the slice's ordinals lie below
/// the cursor. A member counts its partition in pod indices, from its own first ordinal
/// (kubernetes/kubernetes#128529; Kruise the same, over the ordinals it does not reserve), so
/// the global ordinal is translated per slice. `None` with `OnDelete`.
pub fn member_partition(fsts: &FederatedStatefulSet, slice: &Slice, cursor: Ordinal) -> Option<i32> {
    if on_delete(fsts) {
        return None;
    }
    let below = match cursor {
        0 => 0,
        c => (&slice.ordinals() & &spanset_plan::Ordinals::from(0..=c - 1)).len(),
    };
    Some(i32::try_from(below).unwrap_or(i32::MAX))
}

/// The member StatefulSet selecting `slice`, stamped with the writer's `term`, of the
/// federation's backend: apps/v1, or an Advanced StatefulSet whose `reserveOrdinals` are the
/// slice's (only the gaps inside its set, the fewest that express it). Its `resourceVersion` is
/// left for the writer to set (the write's precondition).
pub fn statefulset(fsts: &FederatedStatefulSet, slice: &Slice, term: u64) -> DynamicObject {
    statefulset_at(fsts, slice, term, global_partition(fsts))
}

/// [`statefulset`] while a rollout may update the federation's ordinals from `cursor` up (see
/// [`member_partition`]).
pub fn statefulset_at(fsts: &FederatedStatefulSet, slice: &Slice, term: u64, cursor: Ordinal) -> DynamicObject {
    let mut spec = spec_without_slice(fsts);
    if let Some(p) = member_partition(fsts, slice, cursor) {
        let strategy = spec.update_strategy.get_or_insert_with(Default::default);
        strategy.type_.get_or_insert_with(|| "RollingUpdate".to_string());
        strategy.rolling_update.get_or_insert_with(Default::default).partition = Some(p);
    }
    spec.replicas = Some(slice.replicas as i32);
    spec.ordinals = Some(StatefulSetOrdinals { start: Some(slice.start as i32) });
    let typed = StatefulSet {
        metadata: ObjectMeta {
            name: Some(fsts.name_any()),
            namespace: fsts.namespace(),
            labels: Some(ownership_labels(fsts)),
            annotations: Some({
                let mut annotations = crate::leadership::written_by::stamps(term);
                annotations.insert(TEMPLATE_HASH.to_string(), template_hash(fsts));
                annotations
            }),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    };
    let backend = backend(fsts);
    let mut value = serde_json::to_value(&typed).expect("a StatefulSet serializes");
    value["apiVersion"] = api_resource(backend).api_version.into();
    if backend == Backend::AdvancedStatefulSet {
        if !slice.reserved.is_empty() {
            value["spec"]["reserveOrdinals"] = slice.reserved.iter().collect::<Vec<_>>().into();
        }
        for (field, v) in advanced_fields(fsts).as_object().into_iter().flatten() {
            if !v.is_null() {
                value["spec"][field] = v.clone();
            }
        }
        if let Some(p) = member_partition(fsts, slice, cursor) {
            value["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = p.into();
            if value["spec"]["updateStrategy"].get("type").is_none() {
                value["spec"]["updateStrategy"]["type"] = "RollingUpdate".into();
            }
        }
    }
    serde_json::from_value(value).expect("a StatefulSet is an object")
}

/// The planner's backend of a federation.
pub fn backend(fsts: &FederatedStatefulSet) -> Backend {
    match fsts.spec.backend {
        spanset_api::Backend::StatefulSet => Backend::StatefulSet,
        spanset_api::Backend::AdvancedStatefulSet => Backend::AdvancedStatefulSet,
    }
}

/// The headless Service named by the template's `serviceName`, selecting the federation's pods:
/// the per-pod DNS names of a StatefulSet need it in every member.
pub fn headless_service(fsts: &FederatedStatefulSet) -> Service {
    let t = &fsts.spec.template;
    let ports: Vec<ServicePort> = t
        .template
        .spec
        .iter()
        .flat_map(|p| p.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .map(|p| ServicePort {
            name: p.name.clone(),
            port: p.container_port,
            protocol: p.protocol.clone(),
            ..Default::default()
        })
        .collect();
    Service {
        metadata: ObjectMeta {
            name: Some(t.service_name.clone()),
            namespace: fsts.namespace(),
            labels: Some(ownership_labels(fsts)),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: t.selector.match_labels.clone(),
            ports: (!ports.is_empty()).then_some(ports),
            publish_not_ready_addresses: Some(true),
            ..Default::default()
        }),
        status: None,
    }
}

/// The federation's namespace, created in a member where it is missing, labelled as spanset's
/// (`app.kubernetes.io/managed-by: spanset`, not a federation's: several may share it), which is
/// how the member's guard tells it from namespaces spanset may not touch.
pub fn namespace(fsts: &FederatedStatefulSet) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: fsts.namespace(),
            labels: Some(BTreeMap::from([(MANAGED_BY.to_string(), MANAGER.to_string())])),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::workload::{keeps_ordinals, stored_slice};
    use spanset_api::FederatedStatefulSetSpec;

    fn fsts() -> FederatedStatefulSet {
        let spec: FederatedStatefulSetSpec = serde_yaml::from_str(
            r#"
replicas: 6
template:
  selector: {matchLabels: {app: redis}}
  serviceName: redis
  template:
    metadata: {labels: {app: redis}}
    spec:
      containers: [{name: redis, image: redis:7, ports: [{name: redis, containerPort: 6379}]}]
placement:
  clusters: [{name: east}, {name: west}]
"#,
        )
        .unwrap();
        let mut f = FederatedStatefulSet::new("redis", spec);
        f.metadata.namespace = Some("db".into());
        f.metadata.uid = Some("u-1".into());
        f
    }

    #[test]
    fn a_namespace_spanset_creates_is_labelled_as_spanset_s() {
        let ns = namespace(&fsts());
        assert_eq!(ns.metadata.labels.unwrap().get(MANAGED_BY).map(String::as_str), Some(MANAGER));
    }

    #[test]
    fn the_member_statefulset_selects_the_slice_and_carries_ownership_and_term() {
        let sts = statefulset(&fsts(), &Slice { start: 2, replicas: 2, ..Slice::empty() }, 7);
        assert_eq!(sts.types.as_ref().unwrap().api_version, "apps/v1");
        assert_eq!(sts.types.as_ref().unwrap().kind, "StatefulSet");
        let spec = &sts.data["spec"];
        assert_eq!(spec["replicas"], 2);
        assert_eq!(spec["ordinals"]["start"], 2);
        assert_eq!(spec["serviceName"], "redis");
        assert!(spec.get("reserveOrdinals").is_none());
        let labels = sts.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[FEDERATION_UID], "u-1");
        assert_eq!(labels[FEDERATION_NAMESPACE], "db");
        let annotations = sts.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations[spanset_api::labels::TERM], "7");
        assert_eq!(annotations[crate::leadership::written_by::WRITTEN_BY], crate::leadership::written_by::version());
        let pod_labels = &spec["template"]["metadata"]["labels"];
        assert_eq!(pod_labels[FEDERATION], "redis", "pods carry the federation label for the watchers");
        assert_eq!(pod_labels["app"], "redis", "the user's labels stay");
        assert_eq!(stored_slice(&sts, Backend::StatefulSet), Slice { start: 2, replicas: 2, ..Slice::empty() });
    }

    #[test]
    fn the_claims_a_member_creates_carry_the_federation_label() {
        let f = spanset_api::example(&["east".to_string()]);
        let sts = statefulset(&f, &Slice { start: 0, replicas: 1, ..Slice::empty() }, 1);
        let claims = sts.data["spec"]["volumeClaimTemplates"].as_array().expect("the example has claim templates");
        assert!(
            !claims.is_empty() && claims.iter().all(|c| c["metadata"]["labels"][FEDERATION] == "redis"),
            "so that spanset may retire them under the members' scope guard: {claims:?}"
        );
    }

    #[test]
    fn an_advanced_statefulset_writes_the_fewest_reservations_that_select_its_set() {
        let mut f = fsts();
        f.spec.backend = spanset_api::Backend::AdvancedStatefulSet;
        let set = spanset_plan::Ordinals::from([1, 4, 5, 9]);
        let sts = statefulset(&f, &Slice::from_ordinals(&set), 3);
        assert_eq!(sts.types.as_ref().unwrap().api_version, "apps.kruise.io/v1beta1");
        assert_eq!(sts.data["spec"]["ordinals"]["start"], 1);
        assert_eq!(sts.data["spec"]["replicas"], 4);
        assert_eq!(sts.data["spec"]["reserveOrdinals"], serde_json::json!([2, 3, 6, 7, 8]));
        assert_eq!(stored_slice(&sts, Backend::AdvancedStatefulSet).ordinals(), set);
        let contiguous = statefulset(&f, &Slice { start: 2, replicas: 3, ..Slice::empty() }, 3);
        assert!(contiguous.data["spec"].get("reserveOrdinals").is_none(), "a run needs no reservation");
        assert!(contiguous.data["spec"].get("scaleStrategy").is_none(), "nothing asked, nothing written");
    }

    #[test]
    fn kruise_policies_reach_only_advanced_statefulsets_and_change_their_hash() {
        let mut f = fsts();
        f.spec.backend = spanset_api::Backend::AdvancedStatefulSet;
        let plain_hash = template_hash(&f);
        f.spec.template.update_strategy = Some(
            serde_json::from_value(
                serde_json::json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "partition": 1}}),
            )
            .unwrap(),
        );
        f.spec.template.scale_strategy =
            Some(serde_json::from_value(serde_json::json!({"maxUnavailable": 1})).unwrap());
        assert_ne!(template_hash(&f), plain_hash, "a new policy is written to the members");
        let sts = statefulset(&f, &Slice { start: 0, replicas: 2, ..Slice::empty() }, 1);
        assert_eq!(sts.data["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"], "InPlaceIfPossible");
        assert_eq!(sts.data["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 1);
        assert_eq!(sts.data["spec"]["scaleStrategy"]["maxUnavailable"], 1);
        f.spec.backend = spanset_api::Backend::StatefulSet;
        let v1 = statefulset(&f, &Slice { start: 0, replicas: 2, ..Slice::empty() }, 1);
        assert_eq!(
            v1.data["spec"]["updateStrategy"],
            serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 1}})
        );
        assert!(v1.data["spec"].get("scaleStrategy").is_none());
        let errs = f.spec.to_desired().unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.template.updateStrategy.rollingUpdate.podUpdatePolicy", "spec.template.scaleStrategy"],
            "apps/v1 refuses Kruise's fields, naming them"
        );
    }

    #[test]
    fn the_template_hash_follows_the_template_but_not_the_slice_or_term() {
        let f = fsts();
        let a = statefulset(&f, &Slice { start: 0, replicas: 1, ..Slice::empty() }, 1);
        let b = statefulset(&f, &Slice { start: 3, replicas: 2, ..Slice::empty() }, 9);
        assert_eq!(a.metadata.annotations.as_ref().unwrap()[TEMPLATE_HASH], template_hash(&f));
        assert_eq!(template_hash(&f), b.metadata.annotations.as_ref().unwrap()[TEMPLATE_HASH]);
        let mut g = f.clone();
        g.spec.template.template.spec.as_mut().unwrap().containers[0].image = Some("redis:8".into());
        assert_ne!(template_hash(&f), template_hash(&g));
    }

    #[test]
    fn pods_carry_the_identity_gate_unless_it_is_disabled() {
        let mut f = fsts();
        f.spec.template.template.spec.as_mut().unwrap().scheduling_gates =
            Some(vec![PodSchedulingGate { name: "example.com/users-own".into() }]);
        let sts = statefulset(&f, &Slice { start: 0, replicas: 2, ..Slice::empty() }, 1);
        assert_eq!(
            sts.data["spec"]["template"]["spec"]["schedulingGates"],
            serde_json::json!([{"name": "example.com/users-own"}, {"name": IDENTITY_GATE}]),
            "the gate is added by default, beside the user's own"
        );
        let gated_hash = template_hash(&f);
        f.spec.identity_gate = Some(IdentityGate::Disabled);
        let sts = statefulset(&f, &Slice { start: 0, replicas: 2, ..Slice::empty() }, 1);
        assert_eq!(
            sts.data["spec"]["template"]["spec"]["schedulingGates"],
            serde_json::json!([{"name": "example.com/users-own"}])
        );
        assert_ne!(template_hash(&f), gated_hash, "turning the gate off or on rewrites the members' template");
        let plain = statefulset(&fsts(), &Slice::empty(), 1);
        let mut off = fsts();
        off.spec.identity_gate = Some(IdentityGate::Disabled);
        assert!(
            statefulset(&off, &Slice::empty(), 1).data["spec"]["template"]["spec"].get("schedulingGates").is_none()
        );
        assert_eq!(
            plain.data["spec"]["template"]["spec"]["schedulingGates"],
            serde_json::json!([{"name": IDENTITY_GATE}])
        );
    }

    #[test]
    fn a_stored_object_without_ordinals_is_caught_and_runs_from_zero() {
        let written = statefulset(&fsts(), &Slice { start: 4, replicas: 2, ..Slice::empty() }, 1);
        let mut dropped = written.clone();
        dropped.data["spec"].as_object_mut().unwrap().remove("ordinals");
        assert!(keeps_ordinals(&written, &written));
        assert!(!keeps_ordinals(&written, &dropped));
        assert_eq!(stored_slice(&dropped, Backend::StatefulSet), Slice { start: 0, replicas: 2, ..Slice::empty() });
        let at_zero = statefulset(&fsts(), &Slice::empty(), 1);
        let mut dropped_at_zero = at_zero.clone();
        dropped_at_zero.data["spec"].as_object_mut().unwrap().remove("ordinals");
        assert!(!keeps_ordinals(&at_zero, &dropped_at_zero), "a dropped start of 0 is caught too");
    }

    #[test]
    fn the_headless_service_selects_the_pods_and_publishes_their_ports() {
        let svc = headless_service(&fsts());
        let spec = svc.spec.unwrap();
        assert_eq!(svc.metadata.name.as_deref(), Some("redis"));
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.selector.unwrap()["app"], "redis");
        assert_eq!(spec.ports.unwrap()[0].port, 6379);
    }
}
