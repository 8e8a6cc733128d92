//! A federation's pod Lease in this member: read when the coordinator does not know it, then
//! created or replaced on its resourceVersion with the next extension counter. What became of
//! the write is answered as the lease's clock counts it: stored, definitely refused, without an
//! answer (it may still land), or never sent.

use std::error::Error as _;

use actix::prelude::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, api::PostParams};
use spanset_api::labels::FIELD_MANAGER;

use super::{ClusterWatcher, decide::admit::admit};
use crate::{
    actors::{
        messages::{ExtendPodLease, LeaseWritten as Sent},
        watcher::decide::answer::CallFailure,
    },
    member::cache::rv_of,
    pod_lease::object::{LeaseWrite, extension_of, lease, lease_name},
};

impl Handler<ExtendPodLease> for ClusterWatcher {
    type Result = ResponseActFuture<Self, (Sent, Option<String>)>;

    fn handle(&mut self, msg: ExtendPodLease, _: &mut Self::Context) -> Self::Result {
        // Too late to send: the lease's clock may already count it as landed by now + W.
        if admit(&self.standing(&msg.key), msg.term).is_err() || std::time::Instant::now() > msg.send_by {
            return Box::pin(fut::ready((Sent::NotSent, None)));
        }
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &msg.key.namespace);
        let member = self.cluster.clone();
        let metrics = self.metrics.clone();
        let key = msg.key.clone();
        let work = async move {
            let name = lease_name(&msg.key.name);
            let known = match msg.known {
                Some(k) => Some(k),
                None => {
                    metrics.api_request(&member, "get");
                    match api.get_opt(&name).await {
                        Ok(Some(l)) => Some((rv_of(l.metadata.resource_version.as_deref()), extension_of(&l))),
                        Ok(None) => None,
                        // Nothing was written: the read alone failed.
                        Err(e) => return (Sent::NotSent, Some(e)),
                    }
                }
            };
            let write = LeaseWrite {
                federation: (&msg.key.name, &msg.key.namespace),
                member: &member,
                ordinals: &msg.ordinals,
                extension: known.map_or(1, |(_, extension)| extension + 1),
                lease_seconds: msg.lease_seconds,
                term: msg.term,
                rv: known.map(|(rv, _)| rv),
                federation_uid: &msg.federation_uid,
                release: msg.release,
            };
            let object = lease(&write);
            if std::time::Instant::now() > msg.send_by {
                return (Sent::NotSent, None);
            }
            let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
            let res = match known {
                Some(_) => {
                    metrics.api_request(&member, "update");
                    api.replace(&name, &pp, &object).await
                }
                None => {
                    metrics.api_request(&member, "create");
                    api.create(&pp, &object).await
                }
            };
            match res {
                Ok(l) => (
                    Sent::Stored { rv: rv_of(l.metadata.resource_version.as_deref()), extension: write.extension },
                    None,
                ),
                Err(e) if CallFailure::of(&e).is_definite() => (Sent::Refused, Some(e)),
                Err(e) if never_sent(&e) => (Sent::NotSent, Some(e)),
                Err(e) => (Sent::Lost, Some(e)),
            }
        };
        Box::pin(work.into_actor(self).map(move |(sent, error), act, _| {
            // A definite answer (403, 422…) is the member's refusal; a lost connection is not,
            // nor a conflict (the Lease changed since it was read: read again, extend then).
            let refusal = error.as_ref().map(CallFailure::of).filter(|f| f.is_definite() && !f.is(409)).map(|f| {
                format!("{} ({})", f.message, f.code.unwrap_or_default())
            });
            match &error {
                None if matches!(sent, Sent::Stored { .. }) => {
                    act.contact_ok();
                    act.metrics.member_write(&act.cluster, "lease");
                }
                None => tracing::debug!(cluster = %act.cluster, federation = %key, "pod lease extension too late to send"),
                Some(e) => {
                    act.refused_or_failed(e);
                    tracing::warn!(cluster = %act.cluster, federation = %key, error = %e, ?sent, "pod lease not extended");
                }
            }
            (sent, refusal)
        }))
    }
}

/// Whether a call failed before its request could reach the member (the connection, or its
/// TLS handshake, was never made): such a write never lands.
fn never_sent(e: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = e.source();
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper_util::client::legacy::Error>()
            && h.is_connect()
        {
            return true;
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = s.source();
    }
    false
}
