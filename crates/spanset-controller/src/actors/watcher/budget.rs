//! spanset's PodDisruptionBudget in a member (`spec.disruption`): created, replaced on the
//! version its watch saw last, deleted on its uid, as [`decide::objects`] plans and settles it.

use actix::prelude::*;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::{Api, ResourceExt, api::PostParams};
use spanset_api::labels::FIELD_MANAGER;

use super::{
    ClusterWatcher, calls,
    decide::{self, answer::reading, objects::BudgetCall},
};
use crate::actors::messages::{WriteBudget, WriteError};

impl Handler<WriteBudget> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<u64, WriteError>>;

    fn handle(&mut self, msg: WriteBudget, _: &mut Self::Context) -> Self::Result {
        let (key, term) = (msg.key.clone(), msg.term);
        let call = match decide::objects::plan_budget_write(&self.standing(&key), &self.cache, msg) {
            Ok(call) => call,
            Err(refusal) => return self.refused(refusal, &key, term),
        };
        self.metrics.api_request(&self.cluster, call.verb());
        let creating_in = match &call {
            BudgetCall::Create(pdb) => Some(pdb.namespace().unwrap_or_default()),
            _ => None,
        };
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), &key.namespace);
        let name = key.name.clone();
        let work = async move {
            let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
            match call {
                BudgetCall::Create(pdb) => api.create(&pp, &pdb).await.map(Some),
                BudgetCall::Replace(pdb) => api.replace(&name, &pp, &pdb).await.map(Some),
                BudgetCall::Delete { uid } => calls::delete_on_uid(&api, &name, uid).await.map(|()| None),
            }
        };
        Box::pin(work.into_actor(self).map(move |res, act, ctx| {
            let reply = reading(&res, |end| {
                let end = end.map(Option::as_ref);
                decide::objects::settle_budget_write(&mut act.cache, &act.cluster, &key, creating_in.as_deref(), end)
            });
            match (&res, &reply) {
                (Err(e), _) => act.refused_or_failed(e),
                (Ok(_), Ok(rv)) => {
                    act.contact_ok();
                    act.metrics.member_write(&act.cluster, "poddisruptionbudget");
                    tracing::debug!(cluster = %act.cluster, federation = %key, rv, "wrote the member's disruption budget");
                    act.touched([key], ctx);
                }
                (Ok(_), Err(_)) => {}
            }
            reply
        }))
    }
}
