//! The watcher's writes of spanset's EndpointSlices (`spec.network`): created, replaced on the
//! version its watch saw last, deleted on their uid; the cache takes the stored object at once,
//! so the next reconcile decides from it even before the watch event arrives.

use actix::prelude::*;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, api::PostParams};

use super::{ClusterWatcher, delete_on_uid, write_error};
use crate::controller::{
    labels::FIELD_MANAGER,
    member::cache::rv_of,
    messages::{WriteEndpointSlice, WriteError},
    network::SliceChange,
};

impl Handler<WriteEndpointSlice> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<u64, WriteError>>;

    fn handle(&mut self, msg: WriteEndpointSlice, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_term(msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), &msg.key.namespace);
        let name = msg.name.clone();
        let verb = match &msg.change {
            SliceChange::Create(_) => "create",
            SliceChange::Replace { .. } => "update",
            SliceChange::Delete { .. } => "delete",
        };
        self.metrics.api_request(&self.cluster, verb);
        let work = async move {
            let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
            match msg.change {
                SliceChange::Create(slice) => api.create(&pp, &slice).await.map(Some),
                SliceChange::Replace { mut slice, rv } => {
                    slice.metadata.resource_version = Some(rv.to_string());
                    api.replace(&name, &pp, &slice).await.map(Some)
                }
                SliceChange::Delete { uid } => delete_on_uid(&api, &name, uid).await.map(|()| None),
            }
        };
        let cluster = self.cluster.clone();
        let key = msg.key;
        let name = msg.name;
        Box::pin(work.into_actor(self).map(move |res, act, ctx| match res {
            Ok(stored) => {
                act.contact_ok();
                act.metrics.member_write(&cluster, "endpointslice");
                let rv = stored.as_ref().map_or(0, |s| rv_of(s.metadata.resource_version.as_deref()));
                match &stored {
                    Some(s) => {
                        act.cache.slice_applied(s);
                    }
                    None => {
                        act.cache.federations.entry(key.clone()).or_default().published.remove(&name);
                    }
                }
                tracing::debug!(cluster = %cluster, federation = %key, slice = %name, rv, "wrote a published EndpointSlice");
                act.touched([key], ctx);
                Ok(rv)
            }
            Err(e) => {
                act.refused_or_failed(&e);
                Err(write_error(&cluster, e))
            }
        }))
    }
}
