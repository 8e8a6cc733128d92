//! The watcher's writes of spanset's EndpointSlices (`spec.network`): created, replaced on the
//! version its watch saw last, deleted on their uid; the cache takes the stored object at once,
//! so the next reconcile decides from it even before the watch event arrives. Planned and
//! settled by [`decide::objects`].

use actix::prelude::*;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, api::PostParams};
use spanset_api::labels::FIELD_MANAGER;

use super::{
    ClusterWatcher, calls,
    decide::{self, answer::reading, objects::SliceCall},
};
use crate::actors::messages::{WriteEndpointSlice, WriteError};

impl Handler<WriteEndpointSlice> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<u64, WriteError>>;

    fn handle(&mut self, msg: WriteEndpointSlice, _: &mut Self::Context) -> Self::Result {
        let (key, name, term) = (msg.key.clone(), msg.name.clone(), msg.term);
        let call = match decide::objects::plan_slice_write(&self.standing(&key), msg) {
            Ok(call) => call,
            Err(refusal) => return self.refused(refusal, &key, term),
        };
        self.metrics.api_request(&self.cluster, call.verb());
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), &key.namespace);
        let target = name.clone();
        let work = async move {
            let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
            match call {
                SliceCall::Create(slice) => api.create(&pp, &slice).await.map(Some),
                SliceCall::Replace(slice) => api.replace(&target, &pp, &slice).await.map(Some),
                SliceCall::Delete { uid } => calls::delete_on_uid(&api, &target, uid).await.map(|()| None),
            }
        };
        Box::pin(work.into_actor(self).map(move |res, act, ctx| {
            let reply = reading(&res, |end| {
                decide::objects::settle_slice_write(&mut act.cache, &act.cluster, &key, &name, end.map(Option::as_ref))
            });
            match (&res, &reply) {
                (Err(e), _) => act.refused_or_failed(e),
                (Ok(_), Ok(rv)) => {
                    act.contact_ok();
                    act.metrics.member_write(&act.cluster, "endpointslice");
                    tracing::debug!(cluster = %act.cluster, federation = %key, slice = %name, rv,
                        "wrote a published EndpointSlice");
                    act.touched([key], ctx);
                }
                (Ok(_), Err(_)) => {}
            }
            reply
        }))
    }
}
