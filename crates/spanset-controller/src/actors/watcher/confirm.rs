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
use crate::member::{cache::rv_of, health::Failure, objects::FederationKey, workload::api_resource};

/// The pause before a failed confirming list is tried again.
const CONFIRM_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

impl ClusterWatcher {
    /// Lists the pods of the federations among `keys` whose StatefulSet changed since their
    /// last confirmation, with one quorum read (see [`crate::member::cache`]): the
    /// pods of the federation's namespace when one is due, every pod of the member when several are
    /// (a controller starting with a thousand federations lists each member once, not a
    /// thousand times).
    pub(super) fn confirm_due(&mut self, keys: &[FederationKey], ctx: &mut Context<Self>) {
        let mut due = Vec::new();
        for key in keys {
            // A federation never seen here is due too: its absence must be confirmed by a list.
            let state = self.cache.federations.entry(key.clone()).or_default().confirmation_due();
            if let Some(state) = state
                && self.confirming.insert(key.clone())
            {
                due.push((key.clone(), state));
            }
        }
        // Without a label selector: a pod whose label was removed, or a bare pod given one of
        // the federation's pod names, runs its identity all the same (the cache takes them by
        // name). One federation's list reads its namespace; several read the whole member.
        let api: Api<Pod> = match due.as_slice() {
            [] => return,
            [(key, _)] => Api::namespaced(self.client.clone(), &key.namespace),
            _ => Api::all(self.client.clone()),
        };
        let lp = ListParams::default();
        self.metrics.api_request(&self.cluster, "list");
        ctx.spawn(async move { api.list(&lp).await }.into_actor(self).map(move |res, act, ctx| {
            for (key, _) in &due {
                act.confirming.remove(key);
            }
            // A federation that changed while this list ran is due again.
            act.confirm_scan = true;
            match res {
                Ok(list) => {
                    let rv = rv_of(list.metadata.resource_version.as_deref());
                    act.contact_ok();
                    // Each federation takes its own pods from the list (by label and namespace).
                    act.cache.pods_confirmed_all(&due, &list.items, rv);
                }
                Err(e) => {
                    act.contact_failed(&e);
                    // Tried again after a pause: a failing member is not asked in a loop.
                    let keys: Vec<FederationKey> = due.into_iter().map(|(key, _)| key).collect();
                    ctx.run_later(CONFIRM_RETRY, move |act, ctx| act.touched(keys, ctx));
                    return;
                }
            }
            // Due again if the StatefulSet changed meanwhile.
            act.touched(due.into_iter().map(|(key, _)| key), ctx);
        }));
    }

    /// Reads again each StatefulSet whose last write got no definite answer.
    pub(super) fn settle_uncertain_writes(&mut self, ctx: &mut Context<Self>) {
        // The StatefulSets whose last write got no definite answer, so that the cache holds what
        // the member really stored before anything there counts as confirmed; only those noted
        // in doubt are looked at (a look through every federation served was most of an idle
        // tick at 1,000).
        for (key, kind) in self.cache.writes_in_doubt() {
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
                act.confirm_scan = true;
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
