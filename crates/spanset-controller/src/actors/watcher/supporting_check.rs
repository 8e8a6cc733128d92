//! The supporting objects ensured in the member, read again one at a time (see
//! [`decide::supporting`](super::decide::supporting)): one found missing makes the federations keeping it ensure their
//! supporting objects here again.

use std::time::Instant;

use actix::prelude::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::{Api, Client};

use super::{ClusterWatcher, decide::supporting::Id};

/// Whether the object `id` exists (a metadata-only `get`).
async fn exists(client: Client, id: Id) -> Result<bool, kube::Error> {
    let (kind, ns, name) = id;
    match kind.as_str() {
        "Service" => Ok(Api::<Service>::namespaced(client, &ns).get_metadata_opt(&name).await?.is_some()),
        "Secret" => Ok(Api::<Secret>::namespaced(client, &ns).get_metadata_opt(&name).await?.is_some()),
        "ConfigMap" => Ok(Api::<ConfigMap>::namespaced(client, &ns).get_metadata_opt(&name).await?.is_some()),
        _ => Ok(true),
    }
}

impl ClusterWatcher {
    /// Reads the supporting object due next, if one is and none is being read (nothing while
    /// the member does not answer: its return relists everything anyway).
    pub(super) fn check_supporting(&mut self, ctx: &mut Context<Self>) {
        if self.supporting.checking || self.health.failure.is_some() {
            return;
        }
        let Some(id) = self.supporting.due(Instant::now()) else { return };
        self.supporting.checking = true;
        let work = exists(self.client.clone(), id.clone());
        ctx.spawn(work.into_actor(self).map(move |res, act, ctx| {
            act.supporting.checking = false;
            match res {
                Ok(found) => {
                    act.contact_ok();
                    let lost = act.supporting.checked(&id, found, Instant::now());
                    if !lost.is_empty() {
                        tracing::info!(cluster = %act.cluster, kind = %id.0, namespace = %id.1, name = %id.2,
                            federations = ?lost, "a supporting object is missing in the member; its federations ensure it again");
                        act.touched(lost, ctx);
                    }
                }
                // Read again at the next tick; the probe judges the member's health.
                Err(e) => tracing::debug!(cluster = %act.cluster, error = %e, "supporting object not read"),
            }
        }));
    }
}
