//! What a federation needs in a member besides its StatefulSet (the namespace, Service, carried
//! objects, ServiceExport), ensured; and its teardown there, in the order and on the objects
//! [`decide::teardown`] names.

use actix::prelude::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Secret, Service},
    discovery::v1::EndpointSlice,
    policy::v1::PodDisruptionBudget,
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, DynamicObject, ListParams, PostParams, PropagationPolicy},
};
use spanset_api::labels::{FEDERATION, FEDERATION_UID, FIELD_MANAGER};
use spanset_plan::Backend;

use super::{
    ClusterWatcher,
    calls::{delete_if_ours, delete_on_uid, release, release_guard_access},
    decide::{
        self, CallFailure,
        teardown::{FoundSts, Removal, SweepStep, Teardown, plan_teardown},
    },
};
use crate::{
    actors::messages::{DeleteFederation, EnsureSupporting, SweepLeftover, Swept, WriteError},
    member::{
        endpoints::{SLICE_MANAGED_BY, SLICE_MANAGER},
        guard_access as access,
        objects::FederationKey,
        sharing::Sharers,
        supporting::{self, Supporting},
        workload::api_resource,
    },
};

impl Handler<EnsureSupporting> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<bool, WriteError>>;

    fn handle(&mut self, msg: EnsureSupporting, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_term(&msg.key, msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        let client = self.client.clone();
        let dry_run = msg.dry_run;
        let key = msg.key.clone();
        let mut ensured = vec![("Service", msg.service.metadata.name.clone().unwrap_or_default())];
        for c in &msg.carried {
            ensured.push(match c {
                supporting::Carried::Secret(s) => ("Secret", s.metadata.name.clone().unwrap_or_default()),
                supporting::Carried::ConfigMap(m) => ("ConfigMap", m.metadata.name.clone().unwrap_or_default()),
            });
        }
        let work = async move {
            let s = Supporting {
                namespace: &msg.namespace,
                service: &msg.service,
                carried: &msg.carried,
                export: msg.export.as_ref(),
                guard_access: msg.guard_access.as_ref(),
            };
            supporting::ensure_supporting(&client, &s, dry_run).await
        };
        Box::pin(work.into_actor(self).map(move |res, act, _| match res {
            Ok(kinds) => {
                act.contact_ok();
                if !dry_run {
                    // Read again now and then: one deleted by hand is put back.
                    let now = std::time::Instant::now();
                    for (kind, name) in &ensured {
                        act.supporting.ensured(&key, kind, name, now);
                    }
                    for kind in &kinds {
                        act.metrics.member_write(&act.cluster, kind);
                    }
                }
                Ok(!kinds.is_empty())
            }
            Err(supporting::Failed { field, error: e }) => {
                act.refused_or_failed(&e);
                Err(decide::objects::supporting_reply(&act.cluster, &field, &CallFailure::of(&e)))
            }
        }))
    }
}

impl Handler<DeleteFederation> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<bool, WriteError>>;

    fn handle(&mut self, msg: DeleteFederation, _: &mut Self::Context) -> Self::Result {
        let removal = Removal::of(&msg);
        let standing = self.standing(&msg.key);
        let steps = match plan_teardown(&standing, msg.term, &removal, &msg.key.name, self.cache.serves_advanced) {
            Ok(steps) => steps,
            Err(refusal) => return self.refused(refusal, &msg.key, msg.term),
        };
        self.supporting.released(&msg.key);
        let client = self.client.clone();
        let key = msg.key;
        let cached = self.cache.federations.get(&key).cloned().unwrap_or_default();
        let (service, sharers, uid) = (msg.service, msg.sharers, msg.uid);
        let work = async move {
            for step in steps {
                tear_down(&client, &key, uid.as_deref(), &service, &sharers, step).await?;
            }
            Ok::<(), kube::Error>(())
        };
        Box::pin(work.into_actor(self).map(move |res, act, _| {
            res.map_err(|e| CallFailure::of(&e).reply(&act.cluster))?;
            act.contact_ok();
            Ok(decide::teardown::all_gone(&cached))
        }))
    }
}

impl Handler<SweepLeftover> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<Swept, WriteError>>;

    /// One step of a leftover's sweep (see [`decide::teardown::sweep_step`]), on what is read
    /// from the member now (a quorum read each), never on what the cache last saw before the
    /// member went silent.
    fn handle(&mut self, msg: SweepLeftover, _: &mut Self::Context) -> Self::Result {
        let key = FederationKey { namespace: msg.leftover.namespace.clone(), name: msg.leftover.federation.clone() };
        let removal = Removal::of_leftover(&msg.leftover);
        let standing = self.standing(&key);
        let steps = match plan_teardown(&standing, msg.term, &removal, &key.name, self.cache.serves_advanced) {
            Ok(steps) => steps,
            Err(refusal) => return self.refused(refusal, &key, msg.term),
        };
        if self.health.failure.is_some() || !self.cache.synced() {
            let unavailable = WriteError::Unavailable {
                cluster: self.cluster.clone(),
                message: "not answering; the leftovers wait for it".into(),
            };
            return Box::pin(fut::ready(Err(unavailable)));
        }
        // The shrink is this process's write in its term (its stamp, seen later, is its own).
        self.note_write(msg.term, &key);
        let client = self.client.clone();
        let advanced = self.cache.serves_advanced == Some(true);
        let work = async move { sweep(&client, &key, &msg, &removal, steps, advanced).await };
        Box::pin(work.into_actor(self).map(move |res, act, _| {
            let swept = res.map_err(|e| CallFailure::of(&e).reply(&act.cluster))?;
            act.contact_ok();
            Ok(swept)
        }))
    }
}

/// One step of a leftover's sweep (see [`SweepLeftover`]).
async fn sweep(
    client: &Client,
    key: &FederationKey,
    msg: &SweepLeftover,
    removal: &Removal,
    steps: Vec<Teardown>,
    advanced: bool,
) -> Result<Swept, kube::Error> {
    let ns = &key.namespace;
    let kinds: &[Backend] =
        if advanced { &[Backend::StatefulSet, Backend::AdvancedStatefulSet] } else { &[Backend::StatefulSet] };
    let mut stored = Vec::new();
    for kind in kinds {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &api_resource(*kind));
        let labelled = |s: &DynamicObject| s.labels().get(FEDERATION).is_some_and(|f| *f == key.name);
        if let Some(sts) = api.get_opt(&key.name).await?.filter(labelled) {
            stored.push((*kind, sts));
        }
    }
    let uids: Vec<Option<String>> = stored.iter().map(|(_, s)| s.labels().get(FEDERATION_UID).cloned()).collect();
    if !decide::teardown::sweep_applies(msg, &uids) {
        // Only what this federation shares with others is released; the rest is a namesake's.
        for step in steps.into_iter().filter(|s| matches!(s, Teardown::Shared { .. })) {
            tear_down(client, key, Some(msg.leftover.uid.as_str()), &removal.service, &msg.sharers, step).await?;
        }
        return Ok(Swept::Removed);
    }
    let found: Vec<FoundSts> = stored
        .iter()
        .map(|(kind, s)| FoundSts {
            kind: *kind,
            replicas: s.data["spec"]["replicas"].as_i64().unwrap_or(1),
            deleting: s.meta().deletion_timestamp.is_some(),
        })
        .collect();
    let pods_api = Api::<Pod>::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&format!("{FEDERATION}={}", key.name));
    let pods: Vec<(String, String, bool)> = pods_api
        .list_metadata(&lp)
        .await?
        .items
        .into_iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default(), p.metadata.deletion_timestamp.is_some()))
        .collect();
    match decide::teardown::sweep_step(&found, &pods) {
        SweepStep::Shrink(kind) => {
            let Some((_, sts)) = stored.into_iter().find(|(k, _)| *k == kind) else { return Ok(Swept::Waiting) };
            let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &api_resource(kind));
            api.replace(
                &key.name,
                &PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) },
                &shrunk(sts, msg.term),
            )
            .await?;
            Ok(Swept::Shrunk)
        }
        SweepStep::DeletePods(pods) => {
            let n = pods.len();
            for (name, uid) in pods {
                delete_on_uid(&pods_api, &name, uid).await?;
            }
            Ok(Swept::PodsDeleted(n))
        }
        SweepStep::Wait => Ok(Swept::Waiting),
        SweepStep::Remove => {
            for step in steps {
                tear_down(client, key, Some(msg.leftover.uid.as_str()), &removal.service, &msg.sharers, step).await?;
            }
            Ok(Swept::Removed)
        }
    }
}

/// A StatefulSet as read, with no replicas and stamped with `term` (the write stays conditional
/// on the version read, which it carries).
fn shrunk(mut sts: DynamicObject, term: u64) -> DynamicObject {
    sts.data["spec"]["replicas"] = serde_json::json!(0);
    sts.annotations_mut().extend(crate::leadership::written_by::stamps(term));
    sts
}

/// Performs one step of a federation's teardown (`uid`: the deleted federation's, whose objects
/// alone are deleted; `service`: its headless Service's name; `sharers`: who else keeps its
/// shared objects there).
async fn tear_down(
    client: &Client,
    key: &FederationKey,
    uid: Option<&str>,
    service: &str,
    sharers: &Sharers,
    step: Teardown,
) -> Result<(), kube::Error> {
    let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
    let ns = &key.namespace;
    let leaving = key.name.as_str();
    match step {
        Teardown::Workload(kind) => {
            let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &api_resource(kind));
            delete_if_ours(&api, &key.name, leaving, uid, &dp).await
        }
        Teardown::Owned { kind, name } => match kind.as_str() {
            "PodDisruptionBudget" => {
                delete_if_ours(&Api::<PodDisruptionBudget>::namespaced(client.clone(), ns), &name, leaving, uid, &dp)
                    .await
            }
            "Lease" => delete_if_ours(&Api::<Lease>::namespaced(client.clone(), ns), &name, leaving, uid, &dp).await,
            _ => Ok(()),
        },
        Teardown::GuardAccess => {
            // The binding first: a binding is never left naming a Role already gone.
            let bindings = Api::<RoleBinding>::namespaced(client.clone(), ns);
            release_guard_access(&bindings, leaving, |served, owner| access::binding(ns, served, owner)).await?;
            let roles = Api::<Role>::namespaced(client.clone(), ns);
            release_guard_access(&roles, leaving, |served, owner| access::role(ns, served, owner)).await
        }
        Teardown::Shared { kind, name } => {
            let others = decide::teardown::others(sharers, &kind, &name);
            match kind.as_str() {
                "Service" => release(&Api::<Service>::namespaced(client.clone(), ns), &name, leaving, &others).await,
                "Secret" => release(&Api::<Secret>::namespaced(client.clone(), ns), &name, leaving, &others).await,
                "ConfigMap" => {
                    release(&Api::<ConfigMap>::namespaced(client.clone(), ns), &name, leaving, &others).await
                }
                _ => Ok(()),
            }
        }
        Teardown::PublishedSlices => {
            let slices = Api::<EndpointSlice>::namespaced(client.clone(), ns);
            // (The member's own slices of the Service carry its labels too: only spanset's.)
            let lp =
                ListParams::default().labels(&format!("{FEDERATION}={},{SLICE_MANAGED_BY}={SLICE_MANAGER}", key.name));
            for slice in slices.list_metadata(&lp).await?.items {
                delete_if_ours(&slices, &slice.metadata.name.unwrap_or_default(), leaving, uid, &dp).await?;
            }
            Ok(())
        }
        Teardown::Export => {
            let exports =
                Api::<DynamicObject>::namespaced_with(client.clone(), ns, &supporting::service_export_resource());
            let others = decide::teardown::others(sharers, "Service", service);
            release(&exports, service, leaving, &others).await
        }
    }
}
