//! Pod writes: the release of a gated pod (one patch conditional on the uid and version it was
//! judged at) and the deletes of pods left in a fenced member (each on its uid), as
//! [`decide::objects`] plans them.

use actix::prelude::*;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, Preconditions},
};
use spanset_api::labels::FIELD_MANAGER;

use super::{
    ClusterWatcher, calls,
    decide::{self, CallFailure, DeleteOutcome},
};
use crate::actors::messages::{DeletePods, ReleasePod, WriteError};

impl Handler<ReleasePod> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<(), WriteError>>;

    fn handle(&mut self, msg: ReleasePod, _: &mut Self::Context) -> Self::Result {
        let release = match decide::objects::plan_release(&self.standing(&msg.key), &msg) {
            Ok(release) => release,
            Err(refusal) => return self.refused(refusal, &msg.key, msg.term),
        };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &msg.key.namespace);
        let pp = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        self.metrics.api_request(&self.cluster, "patch");
        let work = async move { api.patch(&release.name, &pp, &Patch::Merge(&release.patch)).await };
        Box::pin(work.into_actor(self).map(move |res, act, _| match res {
            Ok(_) => {
                act.contact_ok();
                act.metrics.member_write(&act.cluster, "pod");
                tracing::debug!(cluster = %act.cluster, federation = %msg.key, ordinal = msg.ordinal, term = msg.term,
                    "released pod (identity gate removed)");
                Ok(())
            }
            Err(e) => {
                act.refused_or_failed(&e);
                Err(CallFailure::of(&e).reply(&act.cluster))
            }
        }))
    }
}

impl Handler<DeletePods> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<(), WriteError>>;

    fn handle(&mut self, msg: DeletePods, _: &mut Self::Context) -> Self::Result {
        let pods = match decide::objects::plan_pod_deletes(&self.standing(&msg.key), &msg) {
            Ok(pods) => pods,
            Err(refusal) => return self.refused(refusal, &msg.key, msg.term),
        };
        let api = Api::<Pod>::namespaced(self.client.clone(), &msg.namespace);
        let cluster = self.cluster.clone();
        let work = async move {
            for (name, uid) in pods {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions { uid: Some(uid), resource_version: None }),
                    ..Default::default()
                };
                // Gone already, or another incarnation by now: nothing of this one is left to delete.
                if calls::delete(&api, &name, &dp, true).await? == DeleteOutcome::Deleted {
                    tracing::warn!(cluster = %cluster, pod = %name,
                        "deleted a pod left running in a fenced member: its ordinal was re-homed");
                }
            }
            Ok::<(), kube::Error>(())
        };
        Box::pin(work.into_actor(self).map(move |res, act, _| {
            res.map_err(|e| CallFailure::of(&e).reply(&act.cluster))?;
            act.contact_ok();
            Ok(())
        }))
    }
}
