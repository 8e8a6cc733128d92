//! Supervisor: follows MemberCluster and FederatedStatefulSet objects in the host, starts a
//! ClusterWatcher per member and a Coordinator per federation, and stops them when their
//! objects go. It tells coordinators about members as they come, change (fenced) and go.
//!
//! While leading, it keeps the finalizer [`MEMBER_FINALIZER`] on every MemberCluster and
//! removes it from one being deleted only once no federation holds anything there (see
//! [`crate::decisions::holds`]): until then the member's watcher runs on and its pods keep their ordinals
//! from starting elsewhere.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::Arc,
};

use actix::prelude::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client, ResourceExt,
    api::DynamicObject,
    runtime::{WatchStreamExt, watcher},
};
use spanset_api::labels::MEMBER_FINALIZER;
use spanset_api::{
    FederatedStatefulSet, MemberCluster, MemberClusterSpec,
    decode::{self, Undecodable},
};

use crate::{
    actors::{
        coordinator::Coordinator,
        messages::{Admitted, Holds, Identified, SpecChanged, SpecUndecodable, Stop},
        watcher::{ClusterWatcher, MemberHandle, MembersChanged, Synced},
    },
    host::{
        events::{Note, Recorder},
        fencing, leftovers, undecodable,
    },
    leadership::shards::Shards,
    member::{
        contact_clock::ContactClock,
        identity::{self, Admission, Claimant},
        objects::FederationKey,
    },
    runtime::{host_client, member_http},
    telemetry::metrics::Metrics,
};

/// What the supervisor needs to reach members.
#[derive(Clone)]
pub struct SupervisorConfig {
    /// The controller's kubeconfig, whose contexts members may name.
    pub kubeconfig: Option<PathBuf>,
    /// Bounds on each federation's replicas.
    pub bounds: crate::decisions::bounds::ReplicaBounds,
}

/// The supervisor.
pub struct Supervisor {
    host: Client,
    config: SupervisorConfig,
    /// The leadership of each shard; shard 0's also does what belongs to no federation.
    leadership: Shards,
    metrics: Arc<Metrics>,
    members: BTreeMap<String, (MemberClusterSpec, MemberHandle)>,
    coordinators: BTreeMap<FederationKey, Addr<Coordinator>>,
    /// Members whose watcher is being (re)started, by the spec it is started for.
    connecting: BTreeMap<String, MemberClusterSpec>,
    /// The MemberCluster objects of those.
    connecting_members: BTreeMap<String, Arc<MemberCluster>>,
    synced: Synced,
    members_listed: bool,
    /// Names seen by a relist in progress (a watch restart), to drop what vanished meanwhile.
    relisted_members: Option<Vec<String>>,
    relisted_federations: Option<Vec<FederationKey>>,
    /// The resourceVersion of each member's kubeconfig Secret its client was built from
    /// (`None`: no Secret could be read), to reconnect when the Secret is rotated in place.
    secret_versions: BTreeMap<String, Option<String>>,
    /// The latest MemberCluster object of each member, for its finalizer.
    objects: BTreeMap<String, Arc<MemberCluster>>,
    /// The FederatedStatefulSet watch has listed once: every federation has its coordinator,
    /// so that their answers about a member are complete.
    federations_listed: bool,
    /// Members whose finalizer is being added, checked or removed (one at a time each).
    tending: BTreeSet<String>,
    /// What was last said (Event) about each member whose deletion is held.
    held_said: BTreeMap<String, String>,
    /// The cluster id each member's current watcher read (`None`: unreadable).
    identities: BTreeMap<String, Option<String>>,
    /// Members whose identity was admitted: they are used.
    admitted: BTreeSet<String>,
    /// Members whose current watcher's first probe is over (answered or not).
    probed: BTreeSet<String>,
    /// Members refused without a watcher, by the `Reachable` reason said (`InvalidSpec`,
    /// `DuplicateCluster`; absent: `BadKubeconfig`).
    refusals: BTreeMap<String, &'static str>,
    /// Federations whose stored object cannot be decoded and that have no coordinator (none
    /// was ever read by this process): reported by the supervisor itself.
    undecodable: BTreeMap<FederationKey, Arc<Undecodable>>,
    /// What was last logged about each federation that cannot be decoded: a line when it
    /// changes, not one per event.
    undecodable_said: BTreeMap<FederationKey, String>,
    /// Members whose leftovers are being swept (one sweep at a time each).
    sweeping: BTreeSet<String>,
}

/// How often the finalizers of MemberClusters are tended when nothing else happens.
pub const FINALIZER_RECHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// How often the kubeconfig Secrets of members are read again, to pick up rotated
/// credentials without a restart (a `get` each: no list or watch of Secrets is needed).
pub const SECRET_RECHECK: std::time::Duration = std::time::Duration::from_secs(10);

/// How often the supervisor tells the elector whether every member has listed once.
const STAMPS_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// Where a member's credentials come from, for messages (never the credentials).
pub fn credentials_of(spec: &MemberClusterSpec) -> String {
    match (&spec.context, &spec.kubeconfig_secret) {
        (Some(ctx), _) => format!("context {ctx:?}"),
        (None, Some(s)) => format!("Secret {}/{}", s.namespace, s.name),
        (None, None) => "no credentials".into(),
    }
}

impl Supervisor {
    /// A supervisor over the host cluster reached by `host`.
    pub fn new(
        host: Client,
        config: SupervisorConfig,
        leadership: impl Into<Shards>,
        metrics: Arc<Metrics>,
        synced: Synced,
    ) -> Self {
        let leadership = leadership.into();
        Self {
            host,
            config,
            leadership,
            metrics,
            members: BTreeMap::new(),
            coordinators: BTreeMap::new(),
            connecting: BTreeMap::new(),
            connecting_members: BTreeMap::new(),
            synced,
            members_listed: false,
            relisted_members: None,
            relisted_federations: None,
            secret_versions: BTreeMap::new(),
            objects: BTreeMap::new(),
            federations_listed: false,
            tending: BTreeSet::new(),
            held_said: BTreeMap::new(),
            identities: BTreeMap::new(),
            admitted: BTreeSet::new(),
            probed: BTreeSet::new(),
            refusals: BTreeMap::new(),
            undecodable: BTreeMap::new(),
            undecodable_said: BTreeMap::new(),
            sweeping: BTreeSet::new(),
        }
    }

    /// While leading: puts the finalizer on every MemberCluster that lacks it, and lets a
    /// deleted one go once no federation holds anything there (each coordinator is asked).
    fn tend_finalizers(&mut self, ctx: &mut Context<Self>) {
        if self.leadership.cluster_duties().term().is_none() || !self.members_listed {
            return;
        }
        let due: Vec<Arc<MemberCluster>> = self
            .objects
            .iter()
            .filter(|(n, _)| !self.tending.contains(*n))
            .map(|(_, mc)| mc.clone())
            .filter(|mc| {
                let ours = mc.finalizers().iter().any(|f| f == MEMBER_FINALIZER);
                match mc.metadata.deletion_timestamp {
                    None => !ours,
                    Some(_) => ours && self.federations_listed,
                }
            })
            .collect();
        for mc in due {
            let name = mc.name_any();
            self.tending.insert(name.clone());
            if mc.metadata.deletion_timestamp.is_none() {
                let mut finalizers = mc.finalizers().to_vec();
                finalizers.push(MEMBER_FINALIZER.to_string());
                let write = set_finalizers(&self.host, &mc, finalizers);
                ctx.spawn(write.into_actor(self).map(move |res, act, _| {
                    act.tending.remove(&name);
                    if let Err(e) = res {
                        tracing::debug!(cluster = %name, error = %e, "finalizer not added; retrying");
                    }
                }));
                continue;
            }
            let coordinators: Vec<Addr<Coordinator>> = self.coordinators.values().cloned().collect();
            // A federation never read by this process may have pods there: unknown is held.
            let mut unread: Vec<String> = self
                .undecodable
                .iter()
                .map(|(key, u)| format!("{key}: cannot be decoded ({u}), so what it runs there is unknown"))
                .collect();
            // What deleted federations left there is swept when it answers: its record goes with
            // it, so it is kept too, unless it is fenced and silent (as for a federation's pods).
            let silent = self
                .members
                .get(&name)
                .is_none_or(|(_, h)| h.contact.last().is_none_or(|t| t.elapsed() > leftovers::SWEEP_AFTER_CONTACT));
            unread.extend(leftovers::holding(&mc, silent));
            let cluster = name.clone();
            let ask = async move {
                let mut held = unread;
                for c in coordinators {
                    match c.send(Holds { cluster: cluster.clone() }).await {
                        Ok(h) => held.extend(h),
                        Err(e) => held.push(format!("a coordinator did not answer: {e}")),
                    }
                }
                held
            };
            ctx.spawn(ask.into_actor(self).map(move |held, act, ctx| {
                if !held.is_empty() {
                    act.tending.remove(&name);
                    act.deletion_held(&mc, held.join("; "));
                    return;
                }
                let rest: Vec<String> = mc.finalizers().iter().filter(|f| *f != MEMBER_FINALIZER).cloned().collect();
                let write = set_finalizers(&act.host, &mc, rest);
                ctx.spawn(write.into_actor(act).map(move |res, act, _| {
                    act.tending.remove(&name);
                    match res {
                        Ok(()) => tracing::info!(cluster = %name, "no federation holds anything in the member; its deletion goes ahead"),
                        Err(e) => tracing::debug!(cluster = %name, error = %e, "finalizer not removed; retrying"),
                    }
                }));
            }));
        }
    }

    /// Sweeps the leftovers of deleted federations (`status.leftovers`) from each member that
    /// answered lately, one sweep per member at a time (see [`leftovers::sweep`]).
    fn tend_leftovers(&mut self, ctx: &mut Context<Self>) {
        for (name, mc) in &self.objects {
            let entries = leftovers::of(mc);
            if entries.is_empty() || self.sweeping.contains(name) {
                continue;
            }
            let Some((_, h)) = self.members.get(name) else { continue };
            let Ok(watcher) = &h.watcher else { continue };
            if h.contact.last().is_none_or(|t| t.elapsed() > leftovers::SWEEP_AFTER_CONTACT) {
                continue;
            }
            self.sweeping.insert(name.clone());
            let sweep = leftovers::sweep(
                self.host.clone(),
                name.clone(),
                fencing::reference(mc),
                watcher.clone(),
                entries.to_vec(),
                self.leadership.clone(),
            );
            let name = name.clone();
            ctx.spawn(sweep.into_actor(self).map(move |(), act, _| {
                act.sweeping.remove(&name);
            }));
        }
    }

    /// Says (log line and Warning Event `DeletionHeld`, once per distinct reason) why a deleted
    /// MemberCluster is kept.
    fn deletion_held(&mut self, mc: &MemberCluster, why: String) {
        let name = mc.name_any();
        if self.held_said.get(&name) == Some(&why) {
            return;
        }
        self.held_said.insert(name.clone(), why.clone());
        tracing::warn!(cluster = %name, held = %why, "MemberCluster deleted, but a federation still holds the member; kept until it holds nothing or is fenced");
        let message = format!(
            "deletion held until no federation holds anything here (or the member is fenced and silent): {why}"
        );
        let mut events = Recorder::new(self.host.clone(), "spanset".into());
        let about = fencing::reference(mc);
        actix::spawn(
            async move { events.record_about("default", about, &Note::warning("DeletionHeld", message)).await },
        );
    }

    fn handles(&self) -> MembersChanged {
        let mut members: BTreeMap<String, MemberHandle> =
            self.members.iter().map(|(n, (_, h))| (n.clone(), h.clone())).collect();
        for (name, member) in &self.connecting_members {
            members.entry(name.clone()).or_insert_with(|| MemberHandle {
                member: member.clone(),
                watcher: Err("connecting".into()),
                connecting: true,
                duplicate: None,
                contact: Default::default(),
            });
        }
        MembersChanged { members: Arc::new(members), listed: self.members_listed }
    }

    /// Tells the elector whether every member's stamps are known: the MemberClusters are
    /// listed, no member is still connecting, and every watcher has listed once (a member
    /// whose client cannot be built has no stamps to read).
    fn tell_stamps_known(&self) {
        let known = self.members_listed
            && self.federations_listed
            && self.connecting.is_empty()
            && self.synced.iter().all(|e| *e.value());
        self.leadership.set_stamps_known(known);
    }

    fn broadcast(&self) {
        let handles = self.handles();
        for c in self.coordinators.values() {
            c.do_send(handles.clone());
        }
    }

    fn member_applied(&mut self, mc: MemberCluster, ctx: &mut Context<Self>) {
        let name = mc.name_any();
        self.objects.insert(name.clone(), Arc::new(mc.clone()));
        self.metrics.set_fenced(&name, mc.spec.fenced);
        let connection = |s: &MemberClusterSpec| (s.context.clone(), s.kubeconfig_secret.clone());
        let same_connection = self.members.get(&name).is_some_and(|(spec, _)| connection(spec) == connection(&mc.spec))
            || self.connecting.get(&name).is_some_and(|spec| connection(spec) == connection(&mc.spec));
        let mc = Arc::new(mc);
        if same_connection {
            if let Some((_, h)) = self.members.get_mut(&name) {
                let unchanged = planned_from(&h.member) == planned_from(&mc);
                h.member = mc;
                // Its status (refreshed by its watcher every half minute) is not read by
                // coordinators: telling them would wake every federation for nothing.
                if unchanged {
                    return;
                }
            }
            self.broadcast();
            return;
        }
        self.connect(mc, ctx);
    }

    /// (Re)builds a member's client from its spec and starts its watcher; a failure is
    /// reported on the MemberCluster (`Reachable=False`, `BadKubeconfig`) and to coordinators.
    fn connect(&mut self, mc: Arc<MemberCluster>, ctx: &mut Context<Self>) {
        let name = mc.name_any();
        let was_used = self.admitted.contains(&name);
        self.forget_identity(&name);
        if was_used {
            // It may reach another cluster now: its duplicates are decided again.
            self.reprobe_duplicates(&name, ctx);
        }
        self.connecting.insert(name.clone(), mc.spec.clone());
        self.connecting_members.insert(name.clone(), mc.clone());
        self.broadcast();
        let host = self.host.clone();
        let kubeconfig = self.config.kubeconfig.clone();
        let spec = mc.spec.clone();
        let secret_version = secret_version(&host, &spec);
        let connecting = async move {
            let version = secret_version.await;
            (member_client(&host, kubeconfig.as_deref(), &spec).await, version)
        };
        ctx.spawn(connecting.into_actor(self).map(move |(client, version), act, ctx| {
            if act.connecting.get(&name) != Some(&mc.spec) {
                return; // superseded by a newer spec, or deleted
            }
            act.secret_versions.insert(name.clone(), version);
            act.connecting.remove(&name);
            act.connecting_members.remove(&name);
            if let Some((_, old)) = act.members.remove(&name)
                && let Ok(w) = old.watcher
            {
                w.do_send(Stop);
            }
            let contact = ContactClock::default();
            let watcher = client.map(|client| {
                let client = member_http::instrumented(client, &name, act.metrics.clone());
                let w = ClusterWatcher::new(
                    name.clone(),
                    credentials_of(&mc.spec),
                    client,
                    act.host.clone(),
                    act.leadership.clone(),
                    act.metrics.clone(),
                    act.synced.clone(),
                )
                .admitted_by(ctx.address().recipient())
                .noting_contact_on(contact.clone());
                w.start()
            });
            if let Err(e) = &watcher {
                let reason = if spec_refusal(&mc.spec).is_some() { "InvalidSpec" } else { "BadKubeconfig" };
                tracing::warn!(cluster = %name, reason, error = %e, "member cannot be used");
                act.refusals.insert(name.clone(), reason);
                act.report_refusal(&name, reason, e, None);
            }
            let spec = mc.spec.clone();
            act.members.insert(
                name.clone(),
                (spec, MemberHandle { member: mc, watcher, connecting: false, duplicate: None, contact }),
            );
            act.broadcast();
            // A member without a watcher holds no one back from being used.
            act.settle_identities();
        }));
    }

    /// While leading: reports every member whose client could not be built and whose
    /// MemberCluster does not say so yet. The report at connect time is skipped by a process
    /// that does not lead yet (it campaigns only once members have listed), so it comes here.
    fn report_unusable(&self) {
        if self.leadership.cluster_duties().term().is_none() {
            return;
        }
        for (name, (_, handle)) in &self.members {
            let Err(why) = &handle.watcher else { continue };
            if handle.connecting {
                continue;
            }
            let reason = self.refusals.get(name).copied().unwrap_or("BadKubeconfig");
            let id = self.identities.get(name).cloned().flatten();
            let said = self.objects.get(name).and_then(|mc| mc.status.as_ref()).is_some_and(|s| {
                (id.is_none() || s.cluster_id == id)
                    && s.conditions.iter().any(|c| c.type_ == "Reachable" && c.reason == reason && c.message == *why)
            });
            if !said {
                self.report_refusal(name, reason, why, id.as_deref());
            }
        }
    }

    /// Writes `Reachable=False` with `reason` on a member that is not used: its client could
    /// not be built (`BadKubeconfig`, the message names the Secret or context and what is wrong
    /// with it), its spec is invalid (`InvalidSpec`), or it reaches the same cluster as
    /// another member (`DuplicateCluster`, with the `clusterID` read).
    fn report_refusal(&self, name: &str, reason: &str, message: &str, cluster_id: Option<&str>) {
        if self.leadership.cluster_duties().term().is_none() {
            return;
        }
        let api: Api<MemberCluster> = Api::all(self.host.clone());
        let now = jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now());
        let mut patch = serde_json::json!({"status": {"conditions": [{
            "type": "Reachable", "status": "False", "reason": reason, "message": message,
            "lastTransitionTime": now.to_string(),
        }]}});
        if let Some(id) = cluster_id {
            patch["status"]["clusterID"] = id.into();
        }
        let name = name.to_string();
        actix::spawn(async move {
            if let Err(e) =
                api.patch_status(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await
            {
                tracing::debug!(cluster = %name, error = %e, "cannot write the MemberCluster's status");
            }
        });
    }

    /// Reads every member's kubeconfig Secret again and reconnects those whose Secret changed
    /// (rotated credentials) or appeared.
    fn recheck_secrets(&mut self, ctx: &mut Context<Self>) {
        let host = self.host.clone();
        let members: Vec<(String, Arc<MemberCluster>, Option<String>)> = self
            .members
            .iter()
            .filter(|(n, (spec, _))| spec.kubeconfig_secret.is_some() && !self.connecting.contains_key(*n))
            .map(|(n, (_, h))| (n.clone(), h.member.clone(), self.secret_versions.get(n).cloned().flatten()))
            .collect();
        for (name, mc, used) in members {
            let read = secret_version(&host, &mc.spec);
            ctx.spawn(read.into_actor(self).map(move |now, act, ctx| {
                let current = act.members.get(&name).map(|(spec, _)| spec.clone());
                if now != used && current.as_ref() == Some(&mc.spec) && !act.connecting.contains_key(&name) {
                    tracing::info!(cluster = %name, "the member's kubeconfig Secret changed; reconnecting");
                    act.connect(mc, ctx);
                }
            }));
        }
    }

    /// Forgets what the supervisor knew of a member's identity (its watcher is replaced or
    /// gone).
    fn forget_identity(&mut self, name: &str) {
        self.identities.remove(name);
        self.admitted.remove(name);
        self.probed.remove(name);
        self.refusals.remove(name);
    }

    /// Decides the members whose identity was read (see [`identity`]): an admitted member's
    /// watcher is told to go ahead, a waiting one why it waits, and a refused one is stopped
    /// (nothing is written through it) and reported `DuplicateCluster`.
    fn settle_identities(&mut self) {
        let mut claimants: Vec<Claimant> = self
            .objects
            .iter()
            .map(|(name, mc)| {
                let status = mc.status.as_ref();
                Claimant {
                    name: name.clone(),
                    created: mc.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()),
                    read: self.identities.get(name).cloned(),
                    recorded: status.and_then(|s| s.cluster_id.clone()),
                    recorded_refused: status.is_some_and(|s| {
                        s.conditions.iter().any(|c| c.type_ == "Reachable" && c.reason == "DuplicateCluster")
                    }),
                    admitted: self.admitted.contains(name),
                    refused: self.refusals.get(name) == Some(&"DuplicateCluster"),
                    // A member without a watcher (bad kubeconfig, invalid spec) has no probe
                    // to wait for.
                    probed: self.probed.contains(name)
                        || self.members.get(name).is_some_and(|(_, h)| h.watcher.is_err() && !h.connecting),
                }
            })
            .collect();
        let mut changed = false;
        for (name, admission) in identity::settle(&mut claimants) {
            let Some((_, handle)) = self.members.get_mut(&name) else { continue };
            match admission {
                Admission::Admit => {
                    self.admitted.insert(name.clone());
                    if let Ok(w) = &handle.watcher {
                        w.do_send(Admitted(Ok(())));
                    }
                }
                Admission::Wait(why) => {
                    if let Ok(w) = &handle.watcher {
                        w.do_send(Admitted(Err(why)));
                    }
                }
                Admission::Refuse(why) => {
                    tracing::warn!(cluster = %name, reason = %why, "member refused: DuplicateCluster");
                    if let Ok(w) = &handle.watcher {
                        w.do_send(Stop);
                    }
                    handle.watcher = Err(why.clone());
                    handle.duplicate = Some(why.clone());
                    self.refusals.insert(name.clone(), "DuplicateCluster");
                    let id = self.identities.get(&name).cloned().flatten();
                    self.report_refusal(&name, "DuplicateCluster", &why, id.as_deref());
                    changed = true;
                }
            }
        }
        if changed {
            self.broadcast();
        }
    }

    fn member_deleted(&mut self, name: &str, ctx: &mut Context<Self>) {
        let was_used = self.admitted.contains(name);
        self.forget_identity(name);
        self.objects.remove(name);
        self.held_said.remove(name);
        self.metrics.forget_member(name);
        self.secret_versions.remove(name);
        self.connecting.remove(name);
        self.connecting_members.remove(name);
        if let Some((_, h)) = self.members.remove(name)
            && let Ok(w) = h.watcher
        {
            w.do_send(Stop);
        }
        self.broadcast();
        // A member waiting for this one's identity is decided without it.
        self.settle_identities();
        // A member refused as a duplicate may reach the cluster of the member just gone: it
        // is probed afresh (a new watcher, which reads the identity again) before any use.
        if was_used {
            self.reprobe_duplicates(name, ctx);
        }
    }

    /// Starts a fresh watcher (which reads the identity again) for every member refused as a
    /// duplicate, once the member `gone` that was in use stops being it (deleted, or
    /// reconnected elsewhere).
    fn reprobe_duplicates(&mut self, gone: &str, ctx: &mut Context<Self>) {
        let refused: Vec<Arc<MemberCluster>> = self
            .members
            .iter()
            .filter(|(n, (_, h))| h.duplicate.is_some() && n.as_str() != gone)
            .map(|(_, (_, h))| h.member.clone())
            .collect();
        for mc in refused {
            tracing::info!(cluster = %mc.name_any(), gone, "probing a refused duplicate member afresh");
            self.connect(mc, ctx);
        }
    }

    /// A FederatedStatefulSet as stored: decoded and handed to its coordinator, or reported as
    /// undecodable.
    fn federation_stored(&mut self, obj: DynamicObject, ctx: &mut Context<Self>) {
        match decode::federation(&obj) {
            Ok(fsts) => {
                let key = FederationKey::of(&fsts);
                self.undecodable.remove(&key);
                if self.undecodable_said.remove(&key).is_some() {
                    tracing::info!(federation = %key, "the FederatedStatefulSet can be read again");
                }
                self.federation_applied(fsts);
            }
            Err(u) => self.federation_undecodable(Arc::from(u), ctx),
        }
    }

    /// A federation whose stored object cannot be decoded: its coordinator, if it has one,
    /// stops writing; otherwise the supervisor reports it. One log line per distinct reason.
    fn federation_undecodable(&mut self, u: Arc<Undecodable>, ctx: &mut Context<Self>) {
        let key = FederationKey { namespace: u.namespace(), name: u.name() };
        let said = u.to_string();
        if self.undecodable_said.get(&key) != Some(&said) {
            tracing::warn!(
                federation = %key, resource_version = u.resource_version().unwrap_or_default(),
                reason = %said, "the FederatedStatefulSet cannot be decoded; nothing is written for it until it is fixed"
            );
            self.undecodable_said.insert(key.clone(), said);
        }
        match self.coordinators.get(&key) {
            Some(c) => c.do_send(SpecUndecodable(u)),
            None => {
                self.undecodable.insert(key, u.clone());
                self.report_undecodable(u, ctx);
            }
        }
    }

    /// Stores the report of a federation without a coordinator (only while leading).
    fn report_undecodable(&self, u: Arc<Undecodable>, ctx: &mut Context<Self>) {
        if self.leadership.cluster_duties().term().is_none() {
            return;
        }
        let host = self.host.clone();
        ctx.spawn(
            async move {
                if let Err(e) = undecodable::report(&host, &u).await {
                    tracing::debug!(federation = %u.key(), error = %e, "report not stored; the next event retries");
                }
            }
            .into_actor(self),
        );
    }

    fn federation_applied(&mut self, fsts: FederatedStatefulSet) {
        let key = FederationKey::of(&fsts);
        // An owner's token is a term some shard's Lease held: every term taken is above it.
        if let Some(token) = crate::actors::coordinator::ownership::token(&fsts) {
            self.leadership.observe_stamp(token);
        }
        let fsts = Arc::new(fsts);
        match self.coordinators.get(&key) {
            Some(c) => c.do_send(SpecChanged(fsts)),
            None => {
                let c = Coordinator::new(
                    fsts,
                    self.host.clone(),
                    self.leadership.of(&key).clone(),
                    self.metrics.clone(),
                    self.handles(),
                    self.config.bounds,
                )
                .start();
                self.coordinators.insert(key, c);
            }
        }
    }

    fn federation_deleted(&mut self, key: &FederationKey) {
        self.undecodable.remove(key);
        self.undecodable_said.remove(key);
        if let Some(c) = self.coordinators.remove(key) {
            c.do_send(Stop);
        }
    }
}

/// The key of a stored FederatedStatefulSet, whether or not it decodes.
fn key_of(obj: &DynamicObject) -> FederationKey {
    FederationKey { namespace: obj.namespace().unwrap_or_default(), name: obj.name_any() }
}

/// Sets a MemberCluster's finalizers, conditional on the resourceVersion it was read at.
fn set_finalizers(
    host: &Client,
    mc: &MemberCluster,
    finalizers: Vec<String>,
) -> impl std::future::Future<Output = Result<(), kube::Error>> + 'static {
    let api: Api<MemberCluster> = Api::all(host.clone());
    let name = mc.name_any();
    let patch = serde_json::json!({"metadata": {"finalizers": finalizers, "resourceVersion": mc.resource_version()}});
    async move { api.patch(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.map(|_| ()) }
}

/// How long a member connection may take to open.
pub const MEMBER_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
/// How long a request body may take to send to a member.
pub const MEMBER_WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The resourceVersion of a member's kubeconfig Secret, if it has one that can be read.
fn secret_version(
    host: &Client,
    spec: &MemberClusterSpec,
) -> impl std::future::Future<Output = Option<String>> + 'static {
    let secret = spec.kubeconfig_secret.clone();
    let host = host.clone();
    async move {
        let secret = secret?;
        let s = Api::<Secret>::namespaced(host, &secret.namespace).get_opt(&secret.name).await.ok()??;
        s.metadata.resource_version
    }
}

/// Why a MemberCluster's spec cannot be used, naming the fields (the CRD's CEL rule says the
/// same, but an apiserver without it, or an older CRD, lets such a spec through).
pub fn spec_refusal(spec: &MemberClusterSpec) -> Option<String> {
    match (&spec.context, &spec.kubeconfig_secret) {
        (Some(_), Some(_)) => Some(
            "spec.context and spec.kubeconfigSecret are both set: set exactly one of them (which cluster was \
             meant cannot be told, so neither is used)"
                .into(),
        ),
        (None, None) => Some("spec: set one of context and kubeconfigSecret".into()),
        _ => None,
    }
}

/// A client for a member: a context of the controller's kubeconfig, or a kubeconfig held in a
/// Secret of the host. The error names what is wrong (never the credentials).
pub async fn member_client(
    host: &Client,
    kubeconfig: Option<&std::path::Path>,
    spec: &MemberClusterSpec,
) -> Result<Client, String> {
    // A member that stops answering must fail a write within seconds, not after kube's 30 s
    // connect and 295 s write defaults: a reconcile waits on its writes.
    fn tune(cfg: &mut kube::Config) {
        cfg.connect_timeout = Some(MEMBER_CONNECT_TIMEOUT);
        cfg.write_timeout = Some(MEMBER_WRITE_TIMEOUT);
        crate::runtime::connection::as_controller(cfg);
    }
    if let Some(why) = spec_refusal(spec) {
        return Err(why);
    }
    match (&spec.context, &spec.kubeconfig_secret) {
        (Some(ctx), _) => host_client::client_tuned(kubeconfig, Some(ctx), tune)
            .await
            .map_err(|e| format!("spec.context {ctx:?}: {e}")),
        (None, Some(secret)) => {
            let key = secret.key.clone().unwrap_or_else(|| "kubeconfig".into());
            let where_ = format!("spec.kubeconfigSecret {}/{} key {key:?}", secret.namespace, secret.name);
            let s = Api::<Secret>::namespaced(host.clone(), &secret.namespace)
                .get_opt(&secret.name)
                .await
                .map_err(|e| format!("{where_}: cannot read the Secret: {e}"))?
                .ok_or_else(|| format!("{where_}: the Secret does not exist"))?;
            let bytes = s
                .data
                .as_ref()
                .and_then(|d| d.get(&key))
                .map(|b| b.0.clone())
                .ok_or_else(|| format!("{where_}: the Secret has no such key"))?;
            let text = String::from_utf8(bytes).map_err(|_| format!("{where_}: the kubeconfig is not UTF-8"))?;
            let source = format!("Secret {}/{}", secret.namespace, secret.name);
            host_client::client_from_kubeconfig_yaml_tuned(&text, None, &source, tune)
                .await
                .map_err(|e| format!("{where_}: the kubeconfig cannot be parsed or used: {e}"))
        }
        (None, None) => Err("spec: set one of context and kubeconfigSecret".into()),
    }
}

/// An event of the supervisor's host watches.
pub enum HostEvent {
    /// MemberCluster watch.
    Member(Box<Result<watcher::Event<MemberCluster>, watcher::Error>>),
    /// FederatedStatefulSet watch, untyped: each object is decoded on its own.
    Federation(Box<Result<watcher::Event<DynamicObject>, watcher::Error>>),
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(SECRET_RECHECK, |act, ctx| act.recheck_secrets(ctx));
        ctx.run_interval(STAMPS_CHECK, |act, _| act.tell_stamps_known());
        ctx.run_interval(FINALIZER_RECHECK, |act, ctx| {
            act.tend_finalizers(ctx);
            act.tend_leftovers(ctx);
            act.report_unusable();
            // A report the last leader did not store (or made before this one led).
            for u in act.undecodable.values().cloned().collect::<Vec<_>>() {
                act.report_undecodable(u, ctx);
            }
        });
        let mcs: Api<MemberCluster> = Api::all(self.host.clone());
        let fsts: Api<DynamicObject> = Api::all_with(self.host.clone(), &decode::federation_resource());
        ctx.add_stream(
            watcher(mcs, watcher::Config::default()).default_backoff().map(|e| HostEvent::Member(Box::new(e))),
        );
        ctx.add_stream(
            watcher(fsts, watcher::Config::default()).default_backoff().map(|e| HostEvent::Federation(Box::new(e))),
        );
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        for c in self.coordinators.values() {
            c.do_send(Stop);
        }
        for (_, h) in self.members.values() {
            if let Ok(w) = &h.watcher {
                w.do_send(Stop);
            }
        }
    }
}

/// What coordinators read of a MemberCluster (its spec, e.g. `fenced`; its annotations, e.g.
/// when it was fenced; whether it is being deleted): only a change of these is broadcast.
fn planned_from(mc: &MemberCluster) -> (&MemberClusterSpec, &BTreeMap<String, String>, bool) {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    (&mc.spec, mc.metadata.annotations.as_ref().unwrap_or(&NONE), mc.metadata.deletion_timestamp.is_some())
}

impl StreamHandler<HostEvent> for Supervisor {
    fn handle(&mut self, ev: HostEvent, ctx: &mut Self::Context) {
        use watcher::Event::*;
        match ev {
            HostEvent::Member(ev) => match *ev {
                Ok(Apply(mc)) => {
                    self.member_applied(mc, ctx);
                    self.tend_finalizers(ctx);
                }
                Ok(InitApply(mc)) => {
                    self.relisted_members.get_or_insert_with(Vec::new).push(mc.name_any());
                    self.member_applied(mc, ctx);
                }
                Ok(Delete(mc)) => self.member_deleted(&mc.name_any(), ctx),
                Ok(Init) => self.relisted_members = Some(Vec::new()),
                Ok(InitDone) => {
                    // Members deleted while the watch was down get no Delete event.
                    let seen = self.relisted_members.take().unwrap_or_default();
                    let known: Vec<String> = self.members.keys().chain(self.connecting.keys()).cloned().collect();
                    for name in known.iter().filter(|n| !seen.contains(n)) {
                        self.member_deleted(name, ctx);
                    }
                    self.members_listed = true;
                    self.broadcast();
                    self.tend_finalizers(ctx);
                }
                Err(e) => tracing::warn!(error = %e, "host watch of MemberClusters failed; retrying"),
            },
            HostEvent::Federation(ev) => match *ev {
                Ok(Apply(f)) => self.federation_stored(f, ctx),
                Ok(InitApply(f)) => {
                    self.relisted_federations.get_or_insert_with(Vec::new).push(key_of(&f));
                    self.federation_stored(f, ctx);
                }
                Ok(Delete(f)) => self.federation_deleted(&key_of(&f)),
                Ok(Init) => self.relisted_federations = Some(Vec::new()),
                Ok(InitDone) => {
                    let seen = self.relisted_federations.take().unwrap_or_default();
                    let gone: Vec<FederationKey> = self
                        .coordinators
                        .keys()
                        .chain(self.undecodable.keys())
                        .filter(|k| !seen.contains(k))
                        .cloned()
                        .collect();
                    for key in gone {
                        self.federation_deleted(&key);
                    }
                    self.federations_listed = true;
                }
                Err(e) => tracing::warn!(error = %e, "host watch of FederatedStatefulSets failed; retrying"),
            },
        }
    }

    fn finished(&mut self, _: &mut Self::Context) {}
}

impl Handler<Identified> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: Identified, _: &mut Self::Context) {
        // Only from the member's current watcher (a replaced one may still speak).
        let current = self.members.get(&msg.cluster).is_some_and(|(_, h)| h.watcher.is_ok())
            && !self.connecting.contains_key(&msg.cluster);
        if !current || self.identities.contains_key(&msg.cluster) {
            return;
        }
        self.probed.insert(msg.cluster.clone());
        if msg.answered {
            self.identities.insert(msg.cluster, msg.id);
        }
        self.settle_identities();
    }
}

impl Handler<Stop> for Supervisor {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spanset_api::SecretKeyRef;

    fn spec(context: Option<&str>, secret: bool) -> MemberClusterSpec {
        MemberClusterSpec {
            kubeconfig_secret: secret.then(|| SecretKeyRef { namespace: "ns".into(), name: "s".into(), key: None }),
            context: context.map(str::to_string),
            region: None,
            fenced: false,
        }
    }

    #[tokio::test]
    async fn a_member_naming_both_a_context_and_a_kubeconfig_secret_is_refused_naming_both_fields() {
        let both = spec(Some("east"), true);
        let why = spec_refusal(&both).expect("refused");
        assert!(why.contains("spec.context") && why.contains("spec.kubeconfigSecret"), "{why}");
        assert_eq!(spec_refusal(&spec(Some("east"), false)), None);
        assert_eq!(spec_refusal(&spec(None, true)), None);
        assert!(spec_refusal(&spec(None, false)).is_some());
        // No client is built for it (nothing is asked of the host or of any member): the
        // host client below points nowhere and is never called.
        let nowhere = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let host = Client::try_from(nowhere).unwrap();
        assert_eq!(member_client(&host, None, &both).await.err(), Some(why));
    }
}
