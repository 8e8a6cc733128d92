//! The member's watches: started with the actor, each event handed to
//! [`decide::watch::on_watched`] (which changes the cache), and what it asks carried out here:
//! contact noted, a term stamp checked against this process's leadership, a failed watch noted
//! against the member's health, the federations touched reported.

use actix::prelude::*;
use futures::StreamExt;
use k8s_openapi::api::{
    core::v1::{Node, PersistentVolumeClaim, Pod},
    discovery::v1::EndpointSlice,
    policy::v1::PodDisruptionBudget,
};
use kube::{
    Api,
    api::DynamicObject,
    runtime::{WatchStreamExt, watcher},
};
use spanset_api::labels::MANAGED_SELECTOR;
use spanset_plan::Backend;

use super::{
    ClusterWatcher, RetryBackoff, Watched,
    decide::{
        self,
        watch::{Discovered, Stamp, Touched},
    },
};
use crate::{
    leadership::written_by::Newer,
    member::{objects::FederationKey, workload::api_resource},
};

impl ClusterWatcher {
    /// Starts the watches of the member: StatefulSets, pods, claims, spanset's budgets and
    /// EndpointSlices, nodes.
    pub(super) fn start_watches(&mut self, ctx: &mut Context<Self>) {
        let _ = self.watch_statefulsets(Backend::StatefulSet, ctx);
        let managed = || watcher::Config::default().labels(MANAGED_SELECTOR);
        // Every pod, not only those labelled: a label anyone may remove must not hide a pod of
        // a federation (the cache recognises them by name, and keeps nothing of the others).
        let pods: Api<Pod> = Api::all(self.client.clone());
        ctx.add_stream(
            watcher(pods, watcher::Config::default())
                .backoff(RetryBackoff::default())
                .map(|e| Watched::Pod(Box::new(e))),
        );
        // Claims carry the StatefulSet's selector labels, not spanset's: watch them all.
        let claims: Api<PersistentVolumeClaim> = Api::all(self.client.clone());
        ctx.add_stream(
            watcher(claims, watcher::Config::default())
                .backoff(RetryBackoff::default())
                .map(|e| Watched::Claim(Box::new(e))),
        );
        // spanset's disruption budgets, and which nodes are cordoned (a drain waits there).
        let budgets: Api<PodDisruptionBudget> = Api::all(self.client.clone());
        ctx.add_stream(
            watcher(budgets, managed()).backoff(RetryBackoff::default()).map(|e| Watched::Budget(Box::new(e))),
        );
        // spanset's EndpointSlices: what each member's records name (`spec.network`).
        let slices: Api<EndpointSlice> = Api::all(self.client.clone());
        ctx.add_stream(
            watcher(slices, managed()).backoff(RetryBackoff::default()).map(|e| Watched::Slice(Box::new(e))),
        );
        let nodes: Api<Node> = Api::all(self.client.clone());
        ctx.add_stream(
            watcher(nodes, watcher::Config::default())
                .backoff(RetryBackoff::default())
                .map(|e| Watched::Node(Box::new(e))),
        );
    }

    /// Watches the managed StatefulSets of one API.
    fn watch_statefulsets(&mut self, kind: Backend, ctx: &mut Context<Self>) -> SpawnHandle {
        let cfg = watcher::Config::default().labels(MANAGED_SELECTOR);
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &api_resource(kind));
        ctx.add_stream(watcher(api, cfg).backoff(RetryBackoff::default()).map(move |e| Watched::Sts(kind, Box::new(e))))
    }

    /// Discovery answered whether the member serves Advanced StatefulSets: where it newly
    /// does, they are watched too, with a fresh watch (the cache reports once it has listed).
    pub(super) fn advanced_discovered(&mut self, served: bool, ctx: &mut Context<Self>) {
        let was_synced = self.cache.synced();
        let Discovered::Noted { watch } = decide::watch::advanced_discovered(&mut self.cache, served) else { return };
        if watch {
            tracing::info!(cluster = %self.cluster, "member serves Advanced StatefulSets; watching them");
            if let Some(old) = self.advanced_watch.take() {
                ctx.cancel_future(old);
            }
            self.advanced_watch = Some(self.watch_statefulsets(Backend::AdvancedStatefulSet, ctx));
        }
        self.after_events(was_synced, Vec::new(), ctx);
    }

    /// The member answered 404 for Advanced StatefulSets (their watch, or a write):
    /// OpenKruise was removed, and with its CRD every Advanced StatefulSet. Not a health
    /// failure (the member answers); their records and their watch go, and discovery asks
    /// again later (a new watch then lists them afresh).
    pub(super) fn advanced_gone(&mut self, ctx: &mut Context<Self>) -> Vec<FederationKey> {
        let Some(keys) = decide::watch::advanced_gone(&mut self.cache, &mut self.relists) else { return vec![] };
        tracing::warn!(cluster = %self.cluster, "member no longer serves Advanced StatefulSets");
        self.contact_ok();
        if let Some(old) = self.advanced_watch.take() {
            ctx.cancel_future(old);
        }
        keys
    }

    /// Every stamp raises the floor of the next term this process may take (leading or not).
    /// A managed object stamped with a newer term than this process's, or with its own term
    /// but not written by it, means another process leads (or led in the same term): stop
    /// writing at once.
    fn check_stamp(&self, stamp: Stamp) {
        match stamp {
            Stamp::Impossible { term, object } => {
                tracing::warn!(cluster = %self.cluster, object = %object, stamp = term,
                    "a member object carries a term no leader can hold; ignoring it");
            }
            Stamp::Term { term, namespace, name } => {
                self.leadership.observe_stamp(term);
                let shard = self.leadership.of_object(&namespace, &name);
                if let Some(mine) = shard.stamp_is_foreign(term, &self.cluster, &namespace, &name) {
                    let whose = if term > mine { "newer than" } else { "not written by this process in" };
                    shard.step_down(&format!(
                        "{}: {namespace}/{name} is stamped with term {term}, {whose} this process's term {mine}",
                        self.cluster
                    ));
                }
            }
        }
    }

    /// A StatefulSet here was written by a newer controller version: this process stops leading
    /// in every shard and campaigns no more (see `Leadership::supersede`).
    fn newer_writer(&self, object: &str, newer: &Newer) {
        let reason = format!(
            "{}: StatefulSet {object} was written by spanset {}, newer than this process's {}",
            self.cluster, newer.theirs, newer.mine
        );
        if self.leadership.cluster_duties().supersede(&reason) {
            tracing::warn!(cluster = %self.cluster, object, theirs = %newer.theirs, mine = %newer.mine,
                "an object written by a newer controller version: stepping down for good, writing nothing");
            self.metrics.superseded(&newer.theirs);
        }
    }

    /// Whether the member keeps `.spec.ordinals` of one API's StatefulSets.
    pub(super) fn keeps_ordinals_of(&mut self, kind: Backend) -> &mut Option<bool> {
        match kind {
            Backend::StatefulSet => &mut self.keeps_ordinals,
            Backend::AdvancedStatefulSet => &mut self.advanced_keeps_ordinals,
        }
    }

    /// A watch failed: noted against the member's health (a denied watch by its resource).
    fn watch_failed(&mut self, resource: &str, e: &watcher::Error) {
        tracing::debug!(cluster = %self.cluster, error = %e, "member watch failed; retrying");
        self.metrics.watch_restart(&self.cluster);
        let failure = decide::health::watch_failure(e, &self.credentials);
        if let Some(words) = failure.denied {
            self.health.denied.insert(resource.to_string(), words);
        }
        self.health.failed(failure.cause, failure.message);
    }

    /// Reports the federations `keys` touched, and every subscribed one on the first sync.
    fn after_events(&mut self, was_synced: bool, mut keys: Vec<FederationKey>, ctx: &mut Context<Self>) {
        if self.cache.synced() && !was_synced {
            self.synced.insert(self.cluster.clone(), true);
            keys.extend(self.subscribers.keys().cloned());
        }
        self.touched(keys, ctx);
    }

    /// The federations a watch event touched, among the subscribed ones where it names none.
    fn touched_keys(&self, touched: Touched) -> Vec<FederationKey> {
        match touched {
            Touched::None => vec![],
            Touched::Keys(keys) => keys,
            Touched::Namespace(ns) => self.subscribers.keys().filter(|k| k.namespace == ns).cloned().collect(),
            Touched::Subscribed => self.subscribers.keys().cloned().collect(),
        }
    }
}

impl StreamHandler<Watched> for ClusterWatcher {
    fn handle(&mut self, item: Watched, ctx: &mut Self::Context) {
        let was_synced = self.cache.synced();
        self.confirm_scan = true;
        let seen = decide::watch::on_watched(&mut self.cache, &mut self.relists, item);
        // `Init` is not news from the member: kube's watcher yields it before each list
        // attempt, also when the member then refuses the list, so it proves no contact.
        if let Some(resource) = seen.heard {
            self.contact_ok();
            self.health.denied.remove(resource);
            self.metrics.watch_event(&self.cluster, resource);
        }
        // Before the term: a newer version's object stops this process even where its term is
        // older (an older replica may take the Lease after the newer one left it).
        if let Some((object, newer)) = seen.newer {
            self.newer_writer(&object, &newer);
        }
        if let Some(stamp) = seen.stamp {
            self.check_stamp(stamp);
        }
        if let Some(kind) = seen.drops_ordinals {
            *self.keeps_ordinals_of(kind) = Some(false);
        }
        let mut keys = self.touched_keys(seen.touched);
        if seen.advanced_gone {
            keys.extend(self.advanced_gone(ctx));
        }
        if let Some((resource, e)) = &seen.failed {
            self.watch_failed(resource, e);
        }
        self.after_events(was_synced, keys, ctx);
    }

    fn finished(&mut self, _: &mut Self::Context) {
        // The watch streams retry forever with backoff; ending means the actor is stopping.
    }
}
