//! The watcher's quorum reads: a federation's pods listed again after each change of its
//! StatefulSet (so that absences become confirmations), and the StatefulSets whose last write
//! got no definite answer read again. What each read changes is the cache's and
//! [`super::decide::sts::settle_uncertain`]'s to say.

use actix::prelude::*;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DynamicObject, ListParams},
};

use super::{ClusterWatcher, PROBE_TIMEOUT, decide};
use crate::controller::{
    labels::FEDERATION,
    member::{cache::rv_of, health::Failure, objects::FederationKey, workload::api_resource},
};

impl ClusterWatcher {
    /// Lists a federation's pods with a quorum read when its StatefulSet changed since the last
    /// confirmation (see [`crate::controller::member::cache`]).
    pub(super) fn confirm_if_due(&mut self, key: &FederationKey, ctx: &mut Context<Self>) {
        // A federation never seen here is due too: its absence must be confirmed by a list.
        let Some(state) = self.cache.federations.entry(key.clone()).or_default().confirmation_due() else { return };
        if !self.confirming.insert(key.clone()) {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        let lp = ListParams::default().labels(&format!("{FEDERATION}={}", key.name));
        let key = key.clone();
        self.metrics.api_request(&self.cluster, "list");
        ctx.spawn(async move { api.list(&lp).await }.into_actor(self).map(move |res, act, ctx| {
            act.confirming.remove(&key);
            match res {
                Ok(list) => {
                    let rv = rv_of(list.metadata.resource_version.as_deref());
                    act.contact_ok();
                    act.cache.pods_confirmed(&key, &list.items, rv, state);
                }
                Err(e) => act.contact_failed(&e),
            }
            // Due again if the StatefulSet changed meanwhile, or the list failed.
            act.touched([key], ctx);
        }));
    }

    /// Reads again each StatefulSet whose last write got no definite answer.
    pub(super) fn settle_uncertain_writes(&mut self, ctx: &mut Context<Self>) {
        for (key, kind) in decide::sts::uncertain_reads(&self.cache) {
            if !self.confirming.insert(key.clone()) {
                continue;
            }
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), &key.namespace, &api_resource(kind));
            let name = key.name.clone();
            self.metrics.api_request(&self.cluster, "get");
            let read = async move { tokio::time::timeout(PROBE_TIMEOUT, api.get_opt(&name)).await };
            ctx.spawn(read.into_actor(self).map(move |res, act, ctx| {
                act.confirming.remove(&key);
                match res {
                    Ok(Ok(found)) => {
                        act.contact_ok();
                        decide::sts::settle_uncertain(&mut act.cache, &key, kind, found.as_ref());
                        act.touched([key], ctx);
                    }
                    Ok(Err(e)) => act.contact_failed(&e),
                    Err(_) => act.health.failed(Failure::Timeout, "no answer to a StatefulSet read".into()),
                }
            }));
        }
    }
}
