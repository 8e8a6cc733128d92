//! The watches of spanset's supporting objects in the member (Services, Secrets, ConfigMaps,
//! labelled; metadata only): an object deleted there counts a loss for the federations that
//! keep it ([`decide::supporting`]), whose reports then make their coordinators ensure their
//! supporting objects here again.

use actix::prelude::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::{
    Api, Resource,
    api::ObjectMeta,
    core::PartialObjectMeta,
    runtime::{WatchStreamExt, watcher},
};
use serde::de::DeserializeOwned;

use super::{ClusterWatcher, RetryBackoff};
use crate::controller::labels::MANAGED_SELECTOR;

/// One event of a supporting object's metadata watch.
pub struct SupportingWatched {
    /// `Service`, `Secret` or `ConfigMap`.
    kind: &'static str,
    /// The event.
    event: Result<watcher::Event<ObjectMeta>, watcher::Error>,
}

/// The labelled objects of one kind, metadata only, as [`SupportingWatched`] events.
fn watch<K>(client: kube::Client, kind: &'static str) -> impl futures::Stream<Item = SupportingWatched>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let cfg = watcher::Config::default().labels(MANAGED_SELECTOR);
    watcher(Api::<PartialObjectMeta<K>>::all(client), cfg).backoff(RetryBackoff::default()).map(move |e| {
        SupportingWatched {
            kind,
            event: e.map(|ev| match ev {
                watcher::Event::Apply(o) => watcher::Event::Apply(o.metadata),
                watcher::Event::Delete(o) => watcher::Event::Delete(o.metadata),
                watcher::Event::Init => watcher::Event::Init,
                watcher::Event::InitApply(o) => watcher::Event::InitApply(o.metadata),
                watcher::Event::InitDone => watcher::Event::InitDone,
            }),
        }
    })
}

impl ClusterWatcher {
    /// Starts the watches of spanset's Services, Secrets and ConfigMaps.
    pub(super) fn watch_supporting(&mut self, ctx: &mut Context<Self>) {
        ctx.add_stream(watch::<Service>(self.client.clone(), "Service"));
        ctx.add_stream(watch::<Secret>(self.client.clone(), "Secret"));
        ctx.add_stream(watch::<ConfigMap>(self.client.clone(), "ConfigMap"));
    }
}

impl StreamHandler<SupportingWatched> for ClusterWatcher {
    fn handle(&mut self, item: SupportingWatched, ctx: &mut Self::Context) {
        match item.event {
            Ok(event) => {
                if !matches!(event, watcher::Event::Init) {
                    self.contact_ok();
                }
                let lost = self.supporting.on_event(item.kind, event);
                if !lost.is_empty() {
                    tracing::info!(cluster = %self.cluster, kind = item.kind, federations = ?lost,
                        "a supporting object was deleted in the member; its federations ensure it again");
                    self.touched(lost, ctx);
                }
            }
            // Not counted against the member's health: the other watches and the probe judge
            // it; this one only retries (with backoff) and relists.
            Err(e) => {
                tracing::debug!(cluster = %self.cluster, kind = item.kind, error = %e, "supporting watch failed; retrying")
            }
        }
    }

    fn finished(&mut self, _: &mut Self::Context) {}
}
