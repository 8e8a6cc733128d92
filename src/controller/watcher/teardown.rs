//! What a federation needs in a member besides its StatefulSet (the namespace, Service, carried
//! objects, ServiceExport), ensured; and its teardown there, in the order and on the objects
//! [`decide::teardown`] names.

use actix::prelude::*;
use k8s_openapi::api::{
    core::v1::{ConfigMap, Secret, Service},
    discovery::v1::EndpointSlice,
    policy::v1::PodDisruptionBudget,
};
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, ListParams, PropagationPolicy},
};

use super::{
    ClusterWatcher,
    calls::delete_if_ours,
    decide::{self, CallFailure, teardown::Teardown},
};
use crate::controller::{
    labels::FEDERATION,
    member::{
        endpoints::{SLICE_MANAGED_BY, SLICE_MANAGER},
        objects::FederationKey,
        supporting::{self, Supporting},
        workload::api_resource,
    },
    messages::{DeleteFederation, EnsureSupporting, WriteError},
};

impl Handler<EnsureSupporting> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<bool, WriteError>>;

    fn handle(&mut self, msg: EnsureSupporting, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_term(&msg.key, msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        let client = self.client.clone();
        let dry_run = msg.dry_run;
        let work = async move {
            let s = Supporting {
                namespace: &msg.namespace,
                service: &msg.service,
                carried: &msg.carried,
                export: msg.export.as_ref(),
            };
            supporting::ensure_supporting(&client, &s, dry_run).await
        };
        Box::pin(work.into_actor(self).map(move |res, act, _| match res {
            Ok(kinds) => {
                act.contact_ok();
                if !dry_run {
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
        let steps = match decide::teardown::plan_teardown(&self.standing(&msg.key), &msg, self.cache.serves_advanced) {
            Ok(steps) => steps,
            Err(refusal) => return self.refused(refusal, &msg.key, msg.term),
        };
        let client = self.client.clone();
        let key = msg.key;
        let cached = self.cache.federations.get(&key).cloned().unwrap_or_default();
        let service = msg.service;
        let work = async move {
            for step in steps {
                tear_down(&client, &key, &service, step).await?;
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

/// Performs one delete of a federation's teardown (`service`: its headless Service's name).
async fn tear_down(client: &Client, key: &FederationKey, service: &str, step: Teardown) -> Result<(), kube::Error> {
    let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
    let ns = &key.namespace;
    match step {
        Teardown::Workload(kind) => {
            let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &api_resource(kind));
            delete_if_ours(&api, &key.name, &dp).await
        }
        Teardown::Owned { kind, name } => match kind.as_str() {
            "Service" => delete_if_ours(&Api::<Service>::namespaced(client.clone(), ns), &name, &dp).await,
            "Secret" => delete_if_ours(&Api::<Secret>::namespaced(client.clone(), ns), &name, &dp).await,
            "ConfigMap" => delete_if_ours(&Api::<ConfigMap>::namespaced(client.clone(), ns), &name, &dp).await,
            "PodDisruptionBudget" => {
                delete_if_ours(&Api::<PodDisruptionBudget>::namespaced(client.clone(), ns), &name, &dp).await
            }
            _ => Ok(()),
        },
        Teardown::PublishedSlices => {
            let slices = Api::<EndpointSlice>::namespaced(client.clone(), ns);
            // (The member's own slices of the Service carry its labels too: only spanset's.)
            let lp =
                ListParams::default().labels(&format!("{FEDERATION}={},{SLICE_MANAGED_BY}={SLICE_MANAGER}", key.name));
            for slice in slices.list_metadata(&lp).await?.items {
                delete_if_ours(&slices, &slice.metadata.name.unwrap_or_default(), &dp).await?;
            }
            Ok(())
        }
        Teardown::Export => {
            let exports =
                Api::<DynamicObject>::namespaced_with(client.clone(), ns, &supporting::service_export_resource());
            delete_if_ours(&exports, service, &dp).await
        }
    }
}
