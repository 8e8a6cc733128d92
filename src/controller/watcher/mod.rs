//! ClusterWatcher: one actor per member cluster, the only code that talks to that member. It
//! watches the managed StatefulSets and their pods into a compact [`MemberCache`], lists a
//! federation's pods again after each change of its StatefulSet so that absences become
//! confirmations, probes the member, reports to the subscribed coordinators, and performs their
//! writes with optimistic concurrency under the writer's term.

mod slices;

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use actix::prelude::*;
use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{ConfigMap, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service},
    discovery::v1::EndpointSlice,
    policy::v1::PodDisruptionBudget,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy},
    runtime::{WatchStreamExt, watcher},
};
use serde::de::DeserializeOwned;

use crate::{api::MemberCluster, plan::Backend};

use super::{
    labels::{FEDERATION, FIELD_MANAGER, MANAGED_BY, MANAGED_SELECTOR, MANAGER, TERM},
    leader::Leadership,
    member::{
        cache::{MemberCache, StsRecord, UncertainWrite, rv_of},
        endpoints::{SLICE_MANAGED_BY, SLICE_MANAGER},
        health::{Failure, Health},
        objects::FederationKey,
        storage,
        supporting::{self, STAND_IN_NAMESPACE, Supporting},
        workload::{self, KRUISE_GROUP, KRUISE_VERSION, api_resource, keeps_ordinals},
    },
    messages::{
        Admitted, AdoptClaims, DeleteFederation, DeletePods, EnsureSupporting, Identified, MemberObserved, MemberView,
        ReleaseClaims, ReleasePod, RetireClaims, Subscribe, Unsubscribe, WriteBudget, WriteError, WriteStatefulSet,
    },
    metrics::Metrics,
    spans,
    supervisor::Synced,
};

/// How often a member is probed when nothing else is heard from it.
pub const PROBE_PERIOD: Duration = Duration::from_secs(2);
/// How long a probe may wait for its answer before it counts as a `Timeout` failure.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long without an answer before the MemberCluster's `Reachable` condition turns False
/// (each federation judges with its own `failover.unreachableAfterSeconds`).
pub const MEMBER_UNREACHABLE_AFTER: Duration = super::reconcile::DEFAULT_UNREACHABLE_AFTER;
/// How often `status.lastContact` of a MemberCluster is refreshed when nothing else changes.
pub const CONTACT_REPORT_PERIOD: Duration = Duration::from_secs(30);
/// How often a member that does not serve Advanced StatefulSets is asked again (OpenKruise
/// may be installed later), in probes.
const ADVANCED_RECHECK_PROBES: u64 = 15;
/// How long reports are held to coalesce a burst of events into one.
const COALESCE: Duration = Duration::from_millis(20);

/// The watcher of one member cluster.
pub struct ClusterWatcher {
    cluster: String,
    /// Where the member's credentials come from (`Secret NS/NAME`, `context NAME`), for
    /// messages; never the credentials themselves.
    credentials: String,
    client: Client,
    leadership: Leadership,
    metrics: Arc<Metrics>,
    cache: MemberCache,
    subscribers: HashMap<FederationKey, Recipient<MemberObserved>>,
    dirty: HashSet<FederationKey>,
    flush_scheduled: bool,
    confirming: HashSet<FederationKey>,
    health: Health,
    started: Instant,
    probing: bool,
    probes: u64,
    /// The Advanced StatefulSet watch, while the member serves them.
    advanced_watch: Option<SpawnHandle>,
    keeps_ordinals: Option<bool>,
    advanced_keeps_ordinals: Option<bool>,
    server_version: Option<String>,
    relists: Relists,
    synced: Synced,
    host: Api<MemberCluster>,
    reported: Option<serde_json::Value>,
    reported_since: serde_json::Value,
    /// Whether the member was reachable at the last probe (its state changes are logged,
    /// counted and reported once each).
    last_up: Option<bool>,
    reported_at: Option<Instant>,
    /// The member's cluster id once read: `Some(None)` when the member does not show it.
    identity: Option<Option<String>>,
    /// Where the identity is told, to be admitted (none: the watcher admits itself).
    identities: Option<Recipient<Identified>>,
    /// Whether the supervisor lets this member be used, or why not yet.
    admission: Result<(), String>,
    /// The supervisor was told that the first probe found the member silent.
    told_silent: bool,
}

impl ClusterWatcher {
    /// A watcher for `cluster`, talking through `client`.
    pub fn new(
        cluster: String,
        credentials: String,
        client: Client,
        host: Client,
        leadership: Leadership,
        metrics: Arc<Metrics>,
        synced: Synced,
    ) -> Self {
        synced.insert(cluster.clone(), false);
        Self {
            cluster,
            credentials,
            client,
            leadership,
            metrics,
            cache: MemberCache::default(),
            subscribers: HashMap::new(),
            dirty: HashSet::new(),
            flush_scheduled: false,
            confirming: HashSet::new(),
            health: Health::default(),
            started: Instant::now(),
            probing: false,
            probes: 0,
            advanced_watch: None,
            keeps_ordinals: None,
            advanced_keeps_ordinals: None,
            server_version: None,
            relists: Relists::default(),
            synced,
            host: Api::all(host),
            reported: None,
            reported_since: serde_json::Value::Null,
            last_up: None,
            reported_at: None,
            identity: None,
            identities: None,
            admission: Ok(()),
            told_silent: false,
        }
    }

    /// Makes the member's use wait for the supervisor's [`Admitted`] after its identity is
    /// read and told to `to`: until then it is reported unsynced and written nothing.
    pub fn admitted_by(mut self, to: Recipient<Identified>) -> Self {
        self.identities = Some(to);
        self.admission = Err("its cluster identity is not read yet".into());
        self
    }

    fn view(&self, key: &FederationKey) -> MemberView {
        MemberView {
            // A member not admitted yet is not observed: it may reach another member's cluster.
            synced: self.cache.synced() && self.admission.is_ok(),
            federation: self.cache.federations.get(key).cloned().unwrap_or_default(),
            claims: self.cache.claims_of(key),
            last_contact: self.health.last_contact,
            watching_since: Some(self.started),
            failure: self.health.failure.clone(),
            keeps_ordinals: self.keeps_ordinals,
            advanced_keeps_ordinals: self.advanced_keeps_ordinals,
            serves_advanced: self.cache.serves_advanced,
            server_version: self.server_version.clone(),
            rv: self.cache.newest_rv,
            cordoned: self.cache.cordoned.clone(),
            budgets_known: self.cache.budgets_known(),
            slices_known: self.cache.slices_synced,
        }
    }

    fn touched(&mut self, keys: impl IntoIterator<Item = FederationKey>, ctx: &mut Context<Self>) {
        self.dirty.extend(keys);
        if !self.flush_scheduled {
            self.flush_scheduled = true;
            ctx.run_later(COALESCE, |act, ctx| act.flush(ctx));
        }
    }

    fn touched_all(&mut self, ctx: &mut Context<Self>) {
        let keys: Vec<FederationKey> = self.subscribers.keys().cloned().collect();
        self.touched(keys, ctx);
    }

    /// Starts due confirmations and reports every changed federation to its subscriber.
    fn flush(&mut self, ctx: &mut Context<Self>) {
        self.flush_scheduled = false;
        let dirty: Vec<FederationKey> = self.dirty.drain().collect();
        for key in dirty {
            if self.cache.synced() {
                self.confirm_if_due(&key, ctx);
            }
            // Reported before the first sync too (`synced: false`): the coordinator then knows
            // how long the member has been silent, which the automatic failover counts.
            if let Some(sub) = self.subscribers.get(&key) {
                let view = Arc::new(self.view(&key));
                sub.do_send(MemberObserved { cluster: self.cluster.clone(), key, view });
            }
        }
    }

    /// Lists a federation's pods with a quorum read when its StatefulSet changed since the last
    /// confirmation (see [`crate::controller::member::cache`]).
    fn confirm_if_due(&mut self, key: &FederationKey, ctx: &mut Context<Self>) {
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

    fn contact_ok(&mut self) {
        self.health.answered(Instant::now());
    }

    /// A member call as an actor future that notes the member's answer when it succeeds.
    fn noting_contact<T: 'static>(
        &self,
        work: impl std::future::Future<Output = Result<T, WriteError>> + 'static,
    ) -> ResponseActFuture<Self, Result<T, WriteError>> {
        Box::pin(work.into_actor(self).map(|res, act, _| {
            if res.is_ok() {
                act.contact_ok();
            }
            res
        }))
    }

    /// A write failed: a refusal the member answered (a 4xx other than 401/403) is contact all
    /// the same; anything else counts against its health.
    fn refused_or_failed(&mut self, e: &kube::Error) {
        if matches!(e, kube::Error::Api(s) if s.code < 500 && s.code != 401 && s.code != 403) {
            self.contact_ok();
        } else {
            self.contact_failed(e);
        }
    }

    fn contact_failed(&mut self, e: &kube::Error) {
        let message = match e {
            kube::Error::Api(s) if s.code == 401 => {
                format!("the member rejects the credentials of {}: {}", self.credentials, s.message)
            }
            kube::Error::Api(s) => s.message.clone(),
            other => other.to_string(),
        };
        self.health.failed(Failure::of(e), message);
    }

    /// Every [`PROBE_PERIOD`]: judges the member's health (so that detection lands within one
    /// period of the threshold even while a probe hangs), reports it, and starts a probe unless
    /// one is still waiting for its answer.
    fn tick(&mut self, ctx: &mut Context<Self>) {
        let up = self.health.reachable(Instant::now(), MEMBER_UNREACHABLE_AFTER);
        self.metrics.set_reachable(&self.cluster, up);
        self.report_status(ctx);
        // Coordinators judge reachability with their own thresholds on every report.
        self.touched_all(ctx);
        if !self.probing {
            self.probe(ctx);
        }
        self.settle_uncertain_writes(ctx);
    }

    /// Reads again each StatefulSet whose last write got no definite answer, so that the
    /// cache holds what the member really stored before anything there counts as confirmed.
    fn settle_uncertain_writes(&mut self, ctx: &mut Context<Self>) {
        let uncertain: Vec<(FederationKey, Backend)> =
            self.cache.federations.iter().filter_map(|(k, f)| Some((k.clone(), f.uncertain_write?.kind))).collect();
        for (key, kind) in uncertain {
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
                        let read_rv = found.as_ref().map(|s| rv_of(s.metadata.resource_version.as_deref()));
                        if let Some(sts) = found {
                            act.cache.sts_applied(&sts, kind);
                        }
                        let f = act.cache.federations.entry(key.clone()).or_default();
                        // Still at the write's precondition: it may land after this read. It stays
                        // uncertain; the coordinator's next stamp (conditional on the same version)
                        // voids it, whichever of the two lands first.
                        if f.uncertain_write.is_some_and(|u| u.settled_by(read_rv)) {
                            f.uncertain_write = None;
                        }
                        act.touched([key], ctx);
                    }
                    Ok(Err(e)) => act.contact_failed(&e),
                    Err(_) => act.health.failed(Failure::Timeout, "no answer to a StatefulSet read".into()),
                }
            }));
        }
    }

    fn probe(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        let sts: Api<StatefulSet> = Api::namespaced(self.client.clone(), "default");
        let check_ordinals = self.keeps_ordinals.is_none();
        let check_identity = self.identity.is_none();
        let check_advanced = match self.cache.serves_advanced {
            None => true,
            Some(true) => false,
            Some(false) => self.probes.is_multiple_of(ADVANCED_RECHECK_PROBES),
        };
        self.probes += 1;
        self.metrics.api_request(&self.cluster, "get");
        self.probing = true;
        let call = async move {
            let version = client.apiserver_version().await?;
            // Which cluster this is, read once per watcher, before anything else is asked.
            let identity = if check_identity { Some(read_identity(&client).await?) } else { None };
            // Whether the member keeps `.spec.ordinals`, asked once with a dry run that
            // stores nothing: a member that drops it never gets a slice.
            let keeps = if check_ordinals { Some(probe_ordinals(&sts).await?) } else { None };
            let advanced = if check_advanced { Some(serves_advanced(&client).await?) } else { None };
            Ok::<_, kube::Error>((version.git_version, identity, keeps, advanced))
        };
        ctx.spawn(async move { tokio::time::timeout(PROBE_TIMEOUT, call).await }.into_actor(self).map(
            |res, act, ctx| {
                act.probing = false;
                match res {
                    Ok(Ok((version, identity, keeps, advanced))) => {
                        act.contact_ok();
                        act.server_version = Some(version);
                        if let Some(identity) = identity {
                            act.identified(identity, ctx);
                        }
                        if keeps.is_some() {
                            act.keeps_ordinals = keeps;
                        }
                        if let Some(served) = advanced {
                            act.advanced_discovered(served, ctx);
                        }
                    }
                    Ok(Err(e)) => act.contact_failed(&e),
                    Err(_) => act
                        .health
                        .failed(Failure::Timeout, format!("no answer to a probe within {}s", PROBE_TIMEOUT.as_secs())),
                }
                // A first probe without an answer is told too: members ranked after this one
                // stop waiting for it.
                if act.identity.is_none() && !act.told_silent {
                    act.told_silent = true;
                    if let Some(to) = &act.identities {
                        to.do_send(Identified { cluster: act.cluster.clone(), id: None, answered: false });
                    }
                }
                let is_up = act.health.reachable(Instant::now(), MEMBER_UNREACHABLE_AFTER);
                // Compared with the state last acted on, not with a moment ago: silence turns a
                // member Unreachable between two probes, not during one.
                let previous = act.last_up.replace(is_up);
                if previous != Some(is_up) {
                    // One line per state change (none for the first probe), not one per failed call.
                    let (_, reason, message) = act.health.condition(Instant::now(), MEMBER_UNREACHABLE_AFTER);
                    match (previous, is_up) {
                        (None, _) => {}
                        (Some(_), true) => tracing::info!(cluster = %act.cluster, "member answers again"),
                        (Some(_), false) => {
                            tracing::warn!(cluster = %act.cluster, reason, message = %message, "member unreachable")
                        }
                    }
                    act.metrics.set_reachable(&act.cluster, is_up);
                    act.report_status(ctx);
                    act.touched_all(ctx);
                }
            },
        ));
    }

    /// Writes the MemberCluster's status when it changed (last contact at most every
    /// [`CONTACT_REPORT_PERIOD`]), and only while this process leads.
    fn report_status(&mut self, ctx: &mut Context<Self>) {
        if self.leadership.term().is_none() {
            return;
        }
        let (mut up, mut reason, mut message) = self.health.condition(Instant::now(), MEMBER_UNREACHABLE_AFTER);
        if let (true, Some(Some(_)), Err(why)) = (up, &self.identity, &self.admission) {
            (up, reason, message) = (false, "DuplicateCluster", why.clone());
        }
        let reachable = serde_json::json!({
            "type": "Reachable",
            "status": if up { "True" } else { "False" },
            "reason": reason,
            "message": message,
        });
        let facts = serde_json::json!({
            "conditions": [reachable],
            "serverVersion": self.server_version,
            "keepsOrdinals": self.keeps_ordinals,
            "servesAdvancedStatefulSets": self.cache.serves_advanced,
            "clusterID": self.identity.clone().flatten(),
        });
        let fresh = self.reported_at.is_some_and(|t| t.elapsed() < CONTACT_REPORT_PERIOD);
        if self.reported.as_ref() == Some(&facts) && fresh {
            return;
        }
        let transition = self.reported.as_ref().map(|r| r["conditions"][0]["status"].clone())
            != Some(facts["conditions"][0]["status"].clone());
        let now =
            jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now()).to_string();
        let mut status = facts.clone();
        if transition {
            status["conditions"][0]["lastTransitionTime"] = now.clone().into();
        } else {
            status["conditions"][0]["lastTransitionTime"] = self.reported_since.clone();
        }
        if let Some(t) = self.health.last_contact {
            let ago = jiff::SignedDuration::try_from(t.elapsed()).unwrap_or_default();
            let at = jiff::Timestamp::now().checked_sub(ago).unwrap_or_else(|_| jiff::Timestamp::now());
            status["lastContact"] = at.round(jiff::Unit::Second).unwrap_or(at).to_string().into();
        }
        let since = status["conditions"][0]["lastTransitionTime"].clone();
        let api = self.host.clone();
        let name = self.cluster.clone();
        let patch = serde_json::json!({"status": status});
        ctx.spawn(
            async move { api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await }
                .into_actor(self)
                .map(move |res, act, _| match res {
                    Ok(_) => {
                        act.reported = Some(facts);
                        act.reported_since = since;
                        act.reported_at = Some(Instant::now());
                    }
                    Err(e) => tracing::debug!(cluster = %act.cluster, error = %e, "MemberCluster status not written"),
                }),
        );
    }

    /// Notes the member's identity and tells it to the supervisor (or admits itself without
    /// one). An unreadable identity is said once, as a warning: the member is used without it.
    fn identified(&mut self, identity: Result<String, String>, ctx: &mut Context<Self>) {
        let id = match identity {
            Ok(uid) => Some(uid),
            Err(why) => {
                tracing::warn!(
                    cluster = %self.cluster, reason = %why,
                    "cannot read the member's cluster identity (the uid of its kube-system Namespace); \
                     it is used without one, so a second MemberCluster reaching the same cluster cannot be told"
                );
                None
            }
        };
        self.identity = Some(id.clone());
        match &self.identities {
            Some(to) => to.do_send(Identified { cluster: self.cluster.clone(), id, answered: true }),
            None => self.admission = Ok(()),
        }
        self.report_status(ctx);
    }

    /// Records, before a write is sent, that this process writes `key`'s object here in `term`.
    fn note_write(&self, term: u64, key: &FederationKey) {
        self.leadership.note_write(term, &self.cluster, &key.namespace, &key.name);
    }
}

/// Whether a request failed because the member does not serve its resource at all (404
/// "the server could not find the requested resource"), rather than a missing object or
/// namespace (404 naming it).
fn resource_missing(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 && s.message.contains("could not find the requested resource"))
}

/// Whether a watch failed because its resource does not exist (404).
fn not_found(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s))
        | watcher::Error::WatchError(s) => s.code == 404,
        _ => false,
    }
}

/// Asks a member's discovery whether it serves Advanced StatefulSets: OpenKruise's
/// `statefulsets` in `apps.kruise.io/v1beta1`. Any answer of the API server is an answer: an
/// absent group (404), a refused discovery (403), and also a failing one (5xx): an optional
/// group failing is not the member failing, so until discovery works they count as not
/// served (no slice of that backend there; pods are watched whatever their owner, so nothing
/// they run is missed) and it is asked again later. Only no answer at all fails the probe.
async fn serves_advanced(client: &Client) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(&format!("{KRUISE_GROUP}/{KRUISE_VERSION}")).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == "statefulsets")),
        Err(kube::Error::Api(e)) => {
            if e.code != 404 && e.code != 403 {
                tracing::debug!(code = e.code, message = %e.message, "discovery of Advanced StatefulSets failed");
            }
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// The member's cluster id: the uid of its `kube-system` Namespace (KEP-2149's cluster id).
/// `Err(why)` when the member does not show it (403 or 404), which is an answer; other
/// failures fail the probe, and the identity is asked again at the next.
async fn read_identity(client: &Client) -> Result<Result<String, String>, kube::Error> {
    match Api::<Namespace>::all(client.clone()).get("kube-system").await {
        Ok(ns) => Ok(ns.metadata.uid.filter(|u| !u.is_empty()).ok_or_else(|| "kube-system has no uid".to_string())),
        Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404 => {
            Ok(Err(format!("get namespaces/kube-system answered {}: {}", s.code, s.message)))
        }
        Err(e) => Err(e),
    }
}

impl Handler<Admitted> for ClusterWatcher {
    type Result = ();

    fn handle(&mut self, msg: Admitted, ctx: &mut Self::Context) {
        if self.admission != msg.0 {
            if let Err(why) = &msg.0 {
                tracing::info!(cluster = %self.cluster, reason = %why, "member not used yet");
            }
            self.admission = msg.0;
            self.report_status(ctx);
            self.touched_all(ctx);
        }
    }
}

/// Asks a member, with a dry-run create, whether it keeps `.spec.ordinals`. The probe carries
/// spanset's label like every object it writes (the member's guard, `spanset-member-scope`,
/// admits nothing else from spanset's identity, dry runs included).
async fn probe_ordinals(api: &Api<StatefulSet>) -> Result<bool, kube::Error> {
    let probe: StatefulSet = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "spanset-ordinals-probe",
            "labels": {MANAGED_BY: MANAGER, FEDERATION: "spanset-ordinals-probe"}},
        "spec": {"replicas": 0, "ordinals": {"start": 1}, "serviceName": "spanset-ordinals-probe",
            "selector": {"matchLabels": {"spanset.dev/probe": "ordinals"}},
            "template": {"metadata": {"labels": {"spanset.dev/probe": "ordinals"}},
                "spec": {"containers": [{"name": "probe", "image": "probe"}]}}}
    }))
    .expect("a literal object");
    let pp = PostParams { dry_run: true, field_manager: Some(FIELD_MANAGER.into()) };
    match api.create(&pp, &probe).await {
        Ok(stored) => Ok(stored.spec.and_then(|s| s.ordinals).and_then(|o| o.start) == Some(1)),
        // Already there (someone created the probe's name) or refused: ask no further.
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 422 || e.code == 403 => Ok(true),
        Err(e) => Err(e),
    }
}

impl Actor for ClusterWatcher {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        tracing::info!(cluster = %self.cluster, "watching member");
        let _ = self.watch_statefulsets(Backend::StatefulSet, ctx);
        let cfg = watcher::Config::default().labels(MANAGED_SELECTOR);
        let pods: Api<Pod> = Api::all(self.client.clone());
        ctx.add_stream(watcher(pods, cfg).backoff(RetryBackoff::default()).map(|e| Watched::Pod(Box::new(e))));
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
            watcher(budgets, watcher::Config::default().labels(MANAGED_SELECTOR))
                .backoff(RetryBackoff::default())
                .map(|e| Watched::Budget(Box::new(e))),
        );
        // spanset's EndpointSlices: what each member's records name (`spec.network`).
        let slices: Api<EndpointSlice> = Api::all(self.client.clone());
        ctx.add_stream(
            watcher(slices, watcher::Config::default().labels(MANAGED_SELECTOR))
                .backoff(RetryBackoff::default())
                .map(|e| Watched::Slice(Box::new(e))),
        );
        let nodes: Api<Node> = Api::all(self.client.clone());
        ctx.add_stream(
            watcher(nodes, watcher::Config::default())
                .backoff(RetryBackoff::default())
                .map(|e| Watched::Node(Box::new(e))),
        );
        self.probe(ctx);
        ctx.run_interval(PROBE_PERIOD, |act, ctx| act.tick(ctx));
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        tracing::info!(cluster = %self.cluster, "stopped watching member");
        self.metrics.forget_cluster(&self.cluster);
        self.synced.remove(&self.cluster);
    }
}

/// The member watches' retry delays: doubling from 100 ms up to [`RETRY_CAP`]. Shorter than
/// kube's default (up to 30 s) because confirmations wait on these watches: a member that
/// comes back must be seen again within seconds, and one controller retrying every couple of
/// seconds is no load for an apiserver.
pub struct RetryBackoff {
    next: Duration,
}

/// The longest pause between two attempts of a member watch.
pub const RETRY_CAP: Duration = Duration::from_secs(2);

impl Default for RetryBackoff {
    fn default() -> Self {
        Self { next: Duration::from_millis(100) }
    }
}

impl Iterator for RetryBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (self.next * 2).min(RETRY_CAP);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for RetryBackoff {
    fn reset(&mut self) {
        *self = Self::default();
    }
}

/// An event of one of the watcher's watches.
pub enum Watched {
    /// A StatefulSet watch: apps/v1, or Advanced StatefulSets where the member serves them.
    Sts(Backend, Box<Result<watcher::Event<DynamicObject>, watcher::Error>>),
    /// The pod watch.
    Pod(Box<Result<watcher::Event<Pod>, watcher::Error>>),
    /// The claim watch.
    Claim(Box<Result<watcher::Event<PersistentVolumeClaim>, watcher::Error>>),
    /// The watch of spanset's PodDisruptionBudgets.
    Budget(Box<Result<watcher::Event<PodDisruptionBudget>, watcher::Error>>),
    /// The node watch (only cordons are kept).
    Node(Box<Result<watcher::Event<Node>, watcher::Error>>),
    /// The watch of spanset's EndpointSlices (`spec.network`).
    Slice(Box<Result<watcher::Event<EndpointSlice>, watcher::Error>>),
}

/// Buffers of a relist in progress (watcher `Init` … `InitDone`): applied whole at the end.
#[derive(Default)]
struct Relists {
    sts: Option<Vec<DynamicObject>>,
    advanced: Option<Vec<DynamicObject>>,
    pods: Option<Vec<Pod>>,
    claims: Option<Vec<PersistentVolumeClaim>>,
    budgets: Option<Vec<PodDisruptionBudget>>,
    nodes: Option<Vec<Node>>,
    slices: Option<Vec<EndpointSlice>>,
}

impl ClusterWatcher {
    /// Watches the managed StatefulSets of one API.
    fn watch_statefulsets(&mut self, kind: Backend, ctx: &mut Context<Self>) -> SpawnHandle {
        let cfg = watcher::Config::default().labels(MANAGED_SELECTOR);
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &api_resource(kind));
        ctx.add_stream(watcher(api, cfg).backoff(RetryBackoff::default()).map(move |e| Watched::Sts(kind, Box::new(e))))
    }

    /// Discovery answered whether the member serves Advanced StatefulSets: where it newly
    /// does, they are watched too, with a fresh watch (the cache reports once it has listed).
    fn advanced_discovered(&mut self, served: bool, ctx: &mut Context<Self>) {
        let before = self.cache.serves_advanced;
        if before == Some(served) || before == Some(true) {
            return;
        }
        let was_synced = self.cache.synced();
        self.cache.serves_advanced = Some(served);
        if served {
            tracing::info!(cluster = %self.cluster, "member serves Advanced StatefulSets; watching them");
            // A fresh watch: its first list is what marks them synced.
            self.cache.advanced_synced = false;
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
    fn advanced_gone(&mut self, ctx: &mut Context<Self>) -> Vec<FederationKey> {
        if self.cache.serves_advanced == Some(false) {
            return vec![];
        }
        tracing::warn!(cluster = %self.cluster, "member no longer serves Advanced StatefulSets");
        self.contact_ok();
        if let Some(old) = self.advanced_watch.take() {
            ctx.cancel_future(old);
        }
        self.relists.advanced = None;
        self.cache.serves_advanced = Some(false);
        self.cache.sts_relisted(&[], Backend::AdvancedStatefulSet)
    }

    fn sts_event(&mut self, kind: Backend, ev: watcher::Event<DynamicObject>) -> Vec<FederationKey> {
        if let watcher::Event::Apply(s) | watcher::Event::InitApply(s) = &ev {
            self.check_stamp(s, kind);
        }
        let buffer = match kind {
            Backend::StatefulSet => &mut self.relists.sts,
            Backend::AdvancedStatefulSet => &mut self.relists.advanced,
        };
        match relist_step(buffer, ev) {
            Step::Applied(s) => self.cache.sts_applied(&s, kind).into_iter().collect(),
            Step::Deleted(s) => self.cache.sts_deleted(&s, kind).into_iter().collect(),
            Step::Relisted(listed) => self.cache.sts_relisted(&listed, kind),
            Step::Buffered => vec![],
        }
    }

    fn pod_event(&mut self, ev: watcher::Event<Pod>) -> Vec<FederationKey> {
        match relist_step(&mut self.relists.pods, ev) {
            Step::Applied(p) => self.cache.pod_applied(&p).into_iter().collect(),
            Step::Deleted(p) => self.cache.pod_deleted(&p).into_iter().collect(),
            Step::Relisted(listed) => self.cache.pods_relisted(&listed),
            Step::Buffered => vec![],
        }
    }

    fn claim_event(&mut self, ev: watcher::Event<PersistentVolumeClaim>) -> Vec<FederationKey> {
        let namespace = match relist_step(&mut self.relists.claims, ev) {
            Step::Applied(c) => self.cache.claim_event(&c, false),
            Step::Deleted(c) => self.cache.claim_event(&c, true),
            Step::Relisted(listed) => {
                self.cache.claims_relisted(&listed);
                return self.subscribers.keys().cloned().collect();
            }
            Step::Buffered => return vec![],
        };
        self.subscribers.keys().filter(|k| k.namespace == namespace).cloned().collect()
    }

    fn budget_event(&mut self, ev: watcher::Event<PodDisruptionBudget>) -> Vec<FederationKey> {
        match relist_step(&mut self.relists.budgets, ev) {
            Step::Applied(b) => self.cache.budget_applied(&b).into_iter().collect(),
            Step::Deleted(b) => self.cache.budget_deleted(&b).into_iter().collect(),
            Step::Relisted(listed) => self.cache.budgets_relisted(&listed),
            Step::Buffered => vec![],
        }
    }

    fn slice_event(&mut self, ev: watcher::Event<EndpointSlice>) -> Vec<FederationKey> {
        match relist_step(&mut self.relists.slices, ev) {
            Step::Applied(s) => self.cache.slice_applied(&s).into_iter().collect(),
            Step::Deleted(s) => self.cache.slice_deleted(&s).into_iter().collect(),
            Step::Relisted(listed) => self.cache.slices_relisted(&listed),
            Step::Buffered => vec![],
        }
    }

    /// A node changed: every federation is told when the cordoned nodes changed (node status
    /// heartbeats change nothing spanset keeps).
    fn node_event(&mut self, ev: watcher::Event<Node>) -> Vec<FederationKey> {
        let changed = match relist_step(&mut self.relists.nodes, ev) {
            Step::Applied(n) => self.cache.node_event(&n, false),
            Step::Deleted(n) => self.cache.node_event(&n, true),
            Step::Relisted(listed) => self.cache.nodes_relisted(&listed),
            Step::Buffered => false,
        };
        if changed { self.subscribers.keys().cloned().collect() } else { vec![] }
    }

    /// A watch delivered `ev`. `Init` is not news from the member: kube's watcher yields it
    /// before each list attempt, also when the member then refuses the list, so it proves no
    /// contact (counting it once kept a member that never answered "reachable").
    fn watch_event_seen<K>(&mut self, resource: &str, ev: &watcher::Event<K>) {
        if matches!(ev, watcher::Event::Init) {
            return;
        }
        self.contact_ok();
        self.health.denied.remove(resource);
        self.metrics.watch_event(&self.cluster, resource);
    }

    fn watch_failed(&mut self, resource: &str, e: &watcher::Error) -> Vec<FederationKey> {
        tracing::debug!(cluster = %self.cluster, error = %e, "member watch failed; retrying");
        self.metrics.watch_restart(&self.cluster);
        let cause = match e {
            watcher::Error::InitialListFailed(e)
            | watcher::Error::WatchStartFailed(e)
            | watcher::Error::WatchFailed(e) => Failure::of(e),
            watcher::Error::WatchError(s) => Failure::of(&kube::Error::Api(s.clone())),
            _ => Failure::ServerError,
        };
        let status = match e {
            watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.message.clone()),
            watcher::Error::WatchError(s) => Some(s.message.clone()),
            _ => None,
        };
        match cause {
            // The member's own words name the missing permission.
            Failure::Forbidden => {
                self.health.denied.insert(resource.to_string(), status.clone().unwrap_or_else(|| e.to_string()));
            }
            Failure::Unauthorized => {
                let message = format!(
                    "the member rejects the credentials of {}: {}",
                    self.credentials,
                    status.clone().unwrap_or_else(|| e.to_string())
                );
                self.health.failed(cause, message);
                return vec![];
            }
            _ => {}
        }
        self.health.failed(cause, e.to_string());
        vec![]
    }

    /// Every stamp raises the floor of the next term this process may take (leading or not).
    /// A managed object stamped with a newer term than this process's, or with its own term
    /// but not written by it, means another process leads (or led in the same term): stop
    /// writing at once. One without `.spec.ordinals` means the member dropped it (spanset
    /// always writes it), for that API only.
    fn check_stamp(&mut self, s: &DynamicObject, kind: Backend) {
        let (namespace, name) = (s.namespace().unwrap_or_default(), s.name_any());
        if let Some(t) = s.annotations().get(TERM).and_then(|t| t.parse::<u64>().ok()) {
            if t > MAX_TERM {
                // Not a term any leader wrote (leaseTransitions is an int32): taking a term
                // above it would be impossible, so it is named and left out.
                tracing::warn!(cluster = %self.cluster, object = %format!("{namespace}/{name}"), stamp = t,
                    "a member object carries a term no leader can hold; ignoring it");
            } else {
                self.leadership.observe_stamp(t);
                if let Some(mine) = self.leadership.stamp_is_foreign(t, &self.cluster, &namespace, &name) {
                    let whose = if t > mine { "newer than" } else { "not written by this process in" };
                    self.leadership.step_down(&format!(
                        "{}: {namespace}/{name} is stamped with term {t}, {whose} this process's term {mine}",
                        self.cluster
                    ));
                }
            }
        }
        if workload::ordinals_start(s).is_none() {
            *self.keeps_ordinals_of(kind) = Some(false);
        }
    }

    /// Whether the member keeps `.spec.ordinals` of one API's StatefulSets.
    fn keeps_ordinals_of(&mut self, kind: Backend) -> &mut Option<bool> {
        match kind {
            Backend::StatefulSet => &mut self.keeps_ordinals,
            Backend::AdvancedStatefulSet => &mut self.advanced_keeps_ordinals,
        }
    }
}

/// What one watch event means for the cache, once relists are buffered.
enum Step<K> {
    /// An object to apply now.
    Applied(K),
    /// An object gone.
    Deleted(K),
    /// A relist ended: these are all the objects.
    Relisted(Vec<K>),
    /// Part of a relist in progress.
    Buffered,
}

/// Buffers a relist (`Init` … `InitDone`) so that it is applied whole, and passes the rest on.
fn relist_step<K>(buffer: &mut Option<Vec<K>>, ev: watcher::Event<K>) -> Step<K> {
    use watcher::Event::*;
    match ev {
        Init => {
            *buffer = Some(Vec::new());
            Step::Buffered
        }
        InitDone => Step::Relisted(buffer.take().unwrap_or_default()),
        Apply(k) | InitApply(k) => match buffer.as_mut() {
            Some(b) => {
                b.push(k);
                Step::Buffered
            }
            None => Step::Applied(k),
        },
        Delete(k) => Step::Deleted(k),
    }
}

impl StreamHandler<Watched> for ClusterWatcher {
    fn handle(&mut self, item: Watched, ctx: &mut Self::Context) {
        let was_synced = self.cache.synced();
        let keys = match item {
            Watched::Sts(kind, ev) => {
                let resource = match kind {
                    Backend::StatefulSet => "statefulsets",
                    Backend::AdvancedStatefulSet => "statefulsets.apps.kruise.io",
                };
                match *ev {
                    Ok(ev) => {
                        self.watch_event_seen(resource, &ev);
                        self.sts_event(kind, ev)
                    }
                    Err(e) if kind == Backend::AdvancedStatefulSet && not_found(&e) => self.advanced_gone(ctx),
                    Err(e) => self.watch_failed(resource, &e),
                }
            }
            Watched::Pod(ev) => match *ev {
                Ok(ev) => {
                    self.watch_event_seen("pods", &ev);
                    self.pod_event(ev)
                }
                Err(e) => self.watch_failed("pods", &e),
            },
            Watched::Claim(ev) => match *ev {
                Ok(ev) => {
                    self.watch_event_seen("persistentvolumeclaims", &ev);
                    self.claim_event(ev)
                }
                Err(e) => self.watch_failed("persistentvolumeclaims", &e),
            },
            Watched::Budget(ev) => match *ev {
                Ok(ev) => {
                    self.watch_event_seen("poddisruptionbudgets", &ev);
                    self.budget_event(ev)
                }
                Err(e) => self.watch_failed("poddisruptionbudgets", &e),
            },
            Watched::Node(ev) => match *ev {
                Ok(ev) => {
                    self.watch_event_seen("nodes", &ev);
                    self.node_event(ev)
                }
                Err(e) => self.watch_failed("nodes", &e),
            },
            Watched::Slice(ev) => match *ev {
                Ok(ev) => {
                    self.watch_event_seen("endpointslices", &ev);
                    self.slice_event(ev)
                }
                Err(e) => self.watch_failed("endpointslices", &e),
            },
        };
        self.after_events(was_synced, keys, ctx);
    }

    fn finished(&mut self, _: &mut Self::Context) {
        // The watch streams retry forever with backoff; ending means the actor is stopping.
    }
}

impl ClusterWatcher {
    /// Reports the federations `keys` touched, and every subscribed one on the first sync.
    fn after_events(&mut self, was_synced: bool, mut keys: Vec<FederationKey>, ctx: &mut Context<Self>) {
        if self.cache.synced() && !was_synced {
            self.synced.insert(self.cluster.clone(), true);
            keys.extend(self.subscribers.keys().cloned());
        }
        self.touched(keys, ctx);
    }
}

impl Handler<Subscribe> for ClusterWatcher {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, ctx: &mut Self::Context) {
        self.subscribers.insert(msg.key.clone(), msg.subscriber);
        self.touched([msg.key], ctx);
    }
}

impl Handler<Unsubscribe> for ClusterWatcher {
    type Result = ();

    fn handle(&mut self, msg: Unsubscribe, _: &mut Self::Context) {
        self.subscribers.remove(&msg.key);
    }
}

/// Turns a kube error into the watcher's answer.
fn write_error(cluster: &str, e: kube::Error) -> WriteError {
    match e {
        kube::Error::Api(s) if s.code == 409 => WriteError::Conflict,
        kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 429 => {
            WriteError::Refused { cluster: cluster.to_string(), code: s.code, message: s.message }
        }
        other => WriteError::Unavailable { cluster: cluster.to_string(), message: other.to_string() },
    }
}

impl ClusterWatcher {
    /// Refuses a write unless this process leads in `term` and the member carries no newer
    /// term. A newer term there means this process is a stale leader: that is said loudly
    /// (a warning and `spanset_stale_writes_refused_total`) and it steps down, so that the
    /// elector takes a term above the member's.
    fn check_term(&self, term: u64) -> Result<(), WriteError> {
        // Nothing is written through a member not admitted (it may reach another's cluster).
        if let Err(why) = &self.admission {
            return Err(WriteError::Unavailable { cluster: self.cluster.clone(), message: format!("not used: {why}") });
        }
        match super::safety::term_allows(
            &super::safety::Rules::ALL,
            self.leadership.term(),
            self.cache.newest_term,
            term,
        ) {
            Ok(()) => {}
            Err(super::safety::TermRefusal::NotLeading) => return Err(WriteError::NotLeader(term)),
            Err(super::safety::TermRefusal::Superseded { newest }) => {
                tracing::warn!(
                    cluster = %self.cluster, term, member_term = newest,
                    "write refused as stale: the member carries a newer term than this leader's; stepping down"
                );
                self.metrics.stale_write_refused(&self.cluster);
                self.leadership.step_down(&format!(
                    "{}: a write in term {term} was refused, the member carries term {newest}",
                    self.cluster
                ));
                return Err(WriteError::NotLeader(term));
            }
        }
        Ok(())
    }
}

/// The highest term a leader can hold: `spec.leaseTransitions` is an int32.
const MAX_TERM: u64 = i32::MAX as u64;

impl Handler<WriteStatefulSet> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<StsRecord, WriteError>>;

    fn handle(&mut self, msg: WriteStatefulSet, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_term(msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        if !msg.dry_run {
            self.note_write(msg.term, &msg.key);
        }
        let kind = msg.kind;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &msg.key.namespace, &api_resource(kind));
        let cluster = self.cluster.clone();
        let pp = PostParams { dry_run: msg.dry_run, field_manager: Some(FIELD_MANAGER.into()) };
        let mut object = msg.object;
        let verb = if msg.expected_rv.is_some() { "update" } else { "create" };
        self.metrics.api_request(&self.cluster, verb);
        let written = object.clone();
        let name = msg.key.name.clone();
        let span = spans::member_write(&cluster, &msg.key, &object, kind, msg.dry_run);
        let client = self.client.clone();
        let ns = msg.key.namespace.clone();
        let work = async move {
            // Whether the answer is only the object sent back (see the stand-in below).
            let mut echoed = false;
            let res = match msg.expected_rv {
                None => match api.create(&pp, &object).await {
                    // The dry run of a new federation's StatefulSet in a member without its
                    // namespace yet: made in the stand-in namespace, since creating the
                    // namespace before every member accepted the template would be a write.
                    Err(e) if pp.dry_run && supporting::namespace_missing(&e, &ns) => {
                        let stand_in: Api<DynamicObject> =
                            Api::namespaced_with(client, STAND_IN_NAMESPACE, &api_resource(kind));
                        let mut moved = object.clone();
                        moved.metadata.namespace = Some(STAND_IN_NAMESPACE.into());
                        match stand_in.create(&pp, &moved).await {
                            // A name taken there answers 409 only after validation passed.
                            Err(kube::Error::Api(e)) if e.code == 409 => {
                                echoed = true;
                                Ok(object)
                            }
                            other => other,
                        }
                    }
                    other => other,
                },
                Some(rv) => {
                    object.metadata.resource_version = Some(rv.to_string());
                    api.replace(&name, &pp, &object).await
                }
            };
            res.map(|stored| (stored, echoed))
        };
        let work = tracing::Instrument::instrument(work, span);
        let dry_run = msg.dry_run;
        let expected_rv = msg.expected_rv;
        let term = msg.term;
        let name_for_log = msg.key.to_string();
        let key = msg.key.clone();
        Box::pin(work.into_actor(self).map(move |res, act, ctx| {
            let (stored, echoed) = res.map_err(|e| {
                let answered = matches!(&e, kube::Error::Api(s) if s.code < 500 && s.code != 401 && s.code != 403);
                if answered {
                    act.contact_ok();
                } else {
                    act.contact_failed(&e);
                }
                // No answer, or a server error: the write may have been applied or not.
                if !dry_run && !matches!(&e, kube::Error::Api(s) if s.code < 500) {
                    act.cache.federations.entry(key.clone()).or_default().uncertain_write =
                        Some(UncertainWrite { kind, expected_rv });
                    tracing::warn!(cluster = %cluster, federation = %key, error = %e,
                        "a StatefulSet write got no definite answer; nothing there counts as confirmed until it is read again");
                }
                // The member stopped serving Advanced StatefulSets (OpenKruise removed): not the
                // template's fault; the member is marked, and the next report excludes it.
                if kind == Backend::AdvancedStatefulSet && resource_missing(&e) {
                    let keys = act.advanced_gone(ctx);
                    act.touched(keys, ctx);
                    return WriteError::Unavailable {
                        cluster: cluster.clone(),
                        message: "the member no longer serves statefulsets.apps.kruise.io/v1beta1".into(),
                    };
                }
                write_error(&cluster, e)
            })?;
            act.contact_ok();
            // An echo of what was sent says nothing of what the member keeps.
            let kept = keeps_ordinals(&written, &stored);
            let known = act.keeps_ordinals_of(kind);
            if !echoed && (!kept || known.is_none()) {
                *known = Some(kept);
            }
            let (_, record) = StsRecord::of(&stored, kind).ok_or_else(|| WriteError::Refused {
                cluster: cluster.clone(),
                code: 500,
                message: "the stored object lost its federation label".into(),
            })?;
            if !dry_run {
                tracing::debug!(
                    cluster = %cluster, federation = %name_for_log, term, rv = record.rv,
                    start = record.slice.start, replicas = record.slice.replicas,
                    reserved = %crate::plan::ordinal_runs(&record.slice.reserved).join(","), "wrote member StatefulSet"
                );
                act.metrics.member_write(&cluster, "statefulset");
                let keys = act.cache.sts_written(&stored, kind);
                act.touched(keys, ctx);
            }
            Ok(record)
        }))
    }
}

/// The merge patch that releases a gated pod: the uid and resourceVersion it was judged at
/// (the apiserver refuses the patch if either changed: 409 for the version, 422 for the uid),
/// the writer's term, and the pod's scheduling gates without spanset's (`null` when none is
/// left: a merge patch replaces a list whole).
pub fn release_patch(msg: &ReleasePod) -> serde_json::Value {
    let gates: serde_json::Value = if msg.remaining.is_empty() {
        serde_json::Value::Null
    } else {
        msg.remaining.iter().map(|g| serde_json::json!({"name": g})).collect()
    };
    serde_json::json!({
        "metadata": {
            "uid": msg.uid,
            "resourceVersion": msg.rv.to_string(),
            "annotations": {TERM: msg.term.to_string()},
        },
        "spec": {"schedulingGates": gates},
    })
}

impl Handler<ReleasePod> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<(), WriteError>>;

    fn handle(&mut self, msg: ReleasePod, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_term(msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &msg.key.namespace);
        let name = format!("{}-{}", msg.key.name, msg.ordinal);
        let patch = release_patch(&msg);
        let pp = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        self.metrics.api_request(&self.cluster, "patch");
        let cluster = self.cluster.clone();
        let work = async move { api.patch(&name, &pp, &Patch::Merge(&patch)).await };
        Box::pin(work.into_actor(self).map(move |res, act, _| match res {
            Ok(_) => {
                act.contact_ok();
                act.metrics.member_write(&cluster, "pod");
                tracing::debug!(cluster = %cluster, federation = %msg.key, ordinal = msg.ordinal, term = msg.term,
                    "released pod (identity gate removed)");
                Ok(())
            }
            Err(e) => {
                act.refused_or_failed(&e);
                Err(write_error(&cluster, e))
            }
        }))
    }
}

impl Handler<WriteBudget> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<u64, WriteError>>;

    fn handle(&mut self, msg: WriteBudget, _: &mut Self::Context) -> Self::Result {
        use super::disruption::BudgetChange;
        if let Err(e) = self.check_term(msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), &msg.key.namespace);
        let name = msg.key.name.clone();
        let verb = match &msg.change {
            BudgetChange::Create(_) => "create",
            BudgetChange::Replace(_) => "update",
            BudgetChange::Delete { .. } => "delete",
        };
        // A replace is conditional on the newest version this watcher has seen (the member's
        // disruption controller changes the status with every eviction, which spanset does
        // not report); a 409 plans again.
        let stored_rv = self.cache.federations.get(&msg.key).and_then(|f| f.budget.as_ref()).map(|b| b.rv);
        self.metrics.api_request(&self.cluster, verb);
        let work = async move {
            match msg.change {
                BudgetChange::Create(pdb) => {
                    let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
                    match api.create(&pp, &pdb).await {
                        // Not spanset's (its watch sees only labelled budgets): left alone, said.
                        Err(kube::Error::Api(mut e)) if e.code == 409 => {
                            e.code = 422;
                            e.message = format!(
                                "a PodDisruptionBudget {}/{name} that is not spanset's (no spanset.dev/federation \
                                 label) is in the way of the federation's budget (spec.disruption); remove it",
                                pdb.namespace().unwrap_or_default()
                            );
                            Err(kube::Error::Api(e))
                        }
                        other => other.map(Some),
                    }
                }
                BudgetChange::Replace(mut pdb) => {
                    let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
                    pdb.metadata.resource_version = stored_rv.map(|rv| rv.to_string());
                    api.replace(&name, &pp, &pdb).await.map(Some)
                }
                BudgetChange::Delete { uid } => delete_on_uid(&api, &name, uid).await.map(|()| None),
            }
        };
        let cluster = self.cluster.clone();
        let key = msg.key;
        Box::pin(work.into_actor(self).map(move |res, act, ctx| match res {
            Ok(stored) => {
                act.contact_ok();
                act.metrics.member_write(&cluster, "poddisruptionbudget");
                let rv = stored.as_ref().map_or(0, |b| rv_of(b.metadata.resource_version.as_deref()));
                match &stored {
                    Some(b) => {
                        act.cache.budget_applied(b);
                    }
                    None => {
                        act.cache.federations.entry(key.clone()).or_default().budget = None;
                    }
                }
                tracing::debug!(cluster = %cluster, federation = %key, rv, "wrote the member's disruption budget");
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

/// Deletes spanset's object of this uid; one gone already, or another object by that name by
/// now, leaves nothing of spanset's: done.
async fn delete_on_uid<K>(api: &Api<K>, name: &str, uid: String) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let dp = DeleteParams {
        preconditions: Some(Preconditions { uid: Some(uid), resource_version: None }),
        ..Default::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

fn ours<K: kube::Resource>(k: &K) -> bool {
    k.meta().labels.as_ref().is_some_and(|l| l.contains_key(FEDERATION))
}

impl Handler<EnsureSupporting> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<bool, WriteError>>;

    fn handle(&mut self, msg: EnsureSupporting, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_term(msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        let client = self.client.clone();
        let dry_run = msg.dry_run;
        let work = async move {
            let s = Supporting {
                namespace: &msg.namespace,
                service: &msg.service,
                carried: &msg.carried,
                export: msg.export.as_ref(),
            };
            supporting::ensure_supporting(&client, &s, dry_run).await
        };
        let cluster = self.cluster.clone();
        Box::pin(work.into_actor(self).map(move |res, act, _| match res {
            Ok(kinds) => {
                act.contact_ok();
                if !dry_run {
                    for kind in &kinds {
                        act.metrics.member_write(&cluster, kind);
                    }
                }
                Ok(!kinds.is_empty())
            }
            Err(supporting::Failed { field, error: e }) => {
                act.refused_or_failed(&e);
                // The field heads the message, for the coordinator's condition.
                match write_error(&cluster, e) {
                    WriteError::Refused { cluster, code, message } => {
                        Err(WriteError::Refused { cluster, code, message: format!("{field}: {message}") })
                    }
                    other => Err(other),
                }
            }
        }))
    }
}

impl Handler<DeleteFederation> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<bool, WriteError>>;

    fn handle(&mut self, msg: DeleteFederation, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_term(msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        let client = self.client.clone();
        let key = msg.key.clone();
        let cached = self.cache.federations.get(&key).cloned().unwrap_or_default();
        let cluster = self.cluster.clone();
        let mut kinds = vec![Backend::StatefulSet];
        if self.cache.serves_advanced == Some(true) {
            kinds.push(Backend::AdvancedStatefulSet);
        }
        let work = async move {
            let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
            let delete_owned = |api_kind: &str, name: String| {
                let client = client.clone();
                let ns = key.namespace.clone();
                let kind = api_kind.to_string();
                let dp = dp.clone();
                async move {
                    match kind.as_str() {
                        "Service" => delete_if_ours(&Api::<Service>::namespaced(client, &ns), &name, &dp).await,
                        "Secret" => delete_if_ours(&Api::<Secret>::namespaced(client, &ns), &name, &dp).await,
                        "ConfigMap" => delete_if_ours(&Api::<ConfigMap>::namespaced(client, &ns), &name, &dp).await,
                        "PodDisruptionBudget" => {
                            delete_if_ours(&Api::<PodDisruptionBudget>::namespaced(client, &ns), &name, &dp).await
                        }
                        _ => Ok(()),
                    }
                }
            };
            for kind in kinds {
                let api = Api::<DynamicObject>::namespaced_with(client.clone(), &key.namespace, &api_resource(kind));
                delete_if_ours(&api, &key.name, &dp).await?;
            }
            delete_owned("Service", msg.service.clone()).await?;
            delete_owned("PodDisruptionBudget", key.name.clone()).await?;
            // Every EndpointSlice it published here (`spec.network`), whatever its chunk.
            let slices = Api::<EndpointSlice>::namespaced(client.clone(), &key.namespace);
            // (The member's own slices of the Service carry its labels too: only spanset's.)
            let lp =
                ListParams::default().labels(&format!("{FEDERATION}={},{SLICE_MANAGED_BY}={SLICE_MANAGER}", key.name));
            for slice in slices.list_metadata(&lp).await?.items {
                delete_if_ours(&slices, &slice.metadata.name.unwrap_or_default(), &dp).await?;
            }
            if msg.exported {
                let exports = Api::<DynamicObject>::namespaced_with(
                    client.clone(),
                    &key.namespace,
                    &supporting::service_export_resource(),
                );
                delete_if_ours(&exports, &msg.service, &dp).await?;
            }
            for (kind, name) in msg.carried {
                delete_owned(&kind, name).await?;
            }
            Ok::<(), kube::Error>(())
        };
        Box::pin(work.into_actor(self).map(move |res, act, _| {
            res.map_err(|e| write_error(&cluster, e))?;
            act.contact_ok();
            Ok(cached.sts.is_none() && cached.other_kind.is_none() && cached.pods.is_empty())
        }))
    }
}

async fn delete_if_ours<K>(api: &Api<K>, name: &str, dp: &DeleteParams) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await? {
        Some(obj) if ours(&obj) && obj.meta().deletion_timestamp.is_none() => match api.delete(name, dp).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        },
        _ => Ok(()),
    }
}

impl Handler<DeletePods> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<(), WriteError>>;

    fn handle(&mut self, msg: DeletePods, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_term(msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        let api = Api::<Pod>::namespaced(self.client.clone(), &msg.namespace);
        let cluster = self.cluster.clone();
        let work = async move {
            for (name, uid) in msg.pods {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions { uid: Some(uid), resource_version: None }),
                    ..Default::default()
                };
                match api.delete(&name, &dp).await {
                    Ok(_) => {
                        tracing::warn!(cluster = %cluster, pod = %name, "deleted a pod left running in a fenced member: its ordinal was re-homed")
                    }
                    // Gone already, or another incarnation by now: nothing of this one is left to delete.
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        };
        let cluster = self.cluster.clone();
        Box::pin(work.into_actor(self).map(move |res, act, _| {
            res.map_err(|e| write_error(&cluster, e))?;
            act.contact_ok();
            Ok(())
        }))
    }
}

impl Handler<ReleaseClaims> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<Vec<(PersistentVolume, PersistentVolumeClaim)>, WriteError>>;

    fn handle(&mut self, msg: ReleaseClaims, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_term(msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        let client = self.client.clone();
        let cluster = self.cluster.clone();
        let work = async move {
            let refused = |message: String| WriteError::Refused { cluster: cluster.clone(), code: 422, message };
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &msg.namespace);
            let pvs: Api<PersistentVolume> = Api::all(client);
            let mut found = Vec::new();
            for name in &msg.claims {
                let pvc = pvcs.get(name).await.map_err(|e| write_error(&cluster, e))?;
                let Some(volume) = pvc.spec.as_ref().and_then(|s| s.volume_name.clone()) else {
                    return Err(refused(format!("PersistentVolumeClaim {name} is not bound to a volume yet")));
                };
                let pv = pvs.get(&volume).await.map_err(|e| write_error(&cluster, e))?;
                if let Some(why) = storage::refusal(&pv) {
                    return Err(refused(why));
                }
                found.push((pv, pvc));
            }
            // Every volume can go: only now is anything changed.
            let retain = serde_json::json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}});
            let pp = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
            let mut out = Vec::new();
            for (pv, pvc) in found {
                let pv = pvs
                    .patch(&pv.name_any(), &pp, &Patch::Merge(&retain))
                    .await
                    .map_err(|e| write_error(&cluster, e))?;
                out.push((storage::pv_for_destination(&pv), storage::pvc_for_destination(&pvc)));
            }
            Ok(out)
        };
        self.noting_contact(work)
    }
}

impl Handler<AdoptClaims> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<Vec<(String, Option<String>)>, WriteError>>;

    fn handle(&mut self, msg: AdoptClaims, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_term(msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        let client = self.client.clone();
        let cluster = self.cluster.clone();
        let metrics = self.metrics.clone();
        let work = async move {
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &msg.namespace);
            let pvs: Api<PersistentVolume> = Api::all(client);
            let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
            let mut retired = Vec::new();
            for (pv, pvc) in &msg.objects {
                let volume = pv.name_any();
                if pvs.get_opt(&volume).await.map_err(|e| write_error(&cluster, e))?.is_none() {
                    pvs.create(&pp, pv).await.map_err(|e| write_error(&cluster, e))?;
                    metrics.member_write(&cluster, "PersistentVolume");
                }
                match pvcs.get_opt(&pvc.name_any()).await.map_err(|e| write_error(&cluster, e))? {
                    None => {
                        pvcs.create(&pp, pvc).await.map_err(|e| write_error(&cluster, e))?;
                        metrics.member_write(&cluster, "PersistentVolumeClaim");
                    }
                    Some(there)
                        if there.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == Some(volume.as_str()) => {}
                    // A claim of that name for another volume is stale: the ordinal ran
                    // elsewhere since (a failover re-homed it onto a fresh claim, or it left
                    // with storage: Detached). It must never bind again: it is retired (its
                    // volume kept) and the handed-over claim takes its place once it is gone.
                    Some(there) => {
                        let name = there.name_any();
                        if there.metadata.deletion_timestamp.is_none() {
                            let old = retire_claim(&pvcs, &pvs, &there, true, &cluster, &metrics).await?;
                            tracing::warn!(
                                cluster = %cluster, claim = %name, volume = ?old, handed_over = %volume,
                                "stale claim retired in the destination of a storage handover; its volume is kept"
                            );
                            retired.push((name.clone(), old));
                        }
                        match pvcs.create(&pp, pvc).await {
                            Ok(_) => metrics.member_write(&cluster, "PersistentVolumeClaim"),
                            Err(kube::Error::Api(e)) if e.code == 409 => {
                                return Err(WriteError::Unavailable {
                                    cluster: cluster.clone(),
                                    message: format!(
                                        "stale PersistentVolumeClaim {name} is still being deleted; the handed-over \
                                         claim for volume {volume} is created once it is gone"
                                    ),
                                });
                            }
                            Err(e) => return Err(write_error(&cluster, e)),
                        }
                    }
                }
            }
            Ok(retired)
        };
        self.noting_contact(work)
    }
}

impl Handler<RetireClaims> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<Vec<(String, Option<String>)>, WriteError>>;

    fn handle(&mut self, msg: RetireClaims, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_term(msg.term) {
            return Box::pin(fut::ready(Err(e)));
        }
        let client = self.client.clone();
        let cluster = self.cluster.clone();
        let metrics = self.metrics.clone();
        let work = async move {
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &msg.namespace);
            let pvs: Api<PersistentVolume> = Api::all(client);
            let mut retired = Vec::new();
            for name in &msg.claims {
                let Some(pvc) = pvcs.get_opt(name).await.map_err(|e| write_error(&cluster, e))? else { continue };
                if pvc.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let volume = retire_claim(&pvcs, &pvs, &pvc, msg.keep_volume, &cluster, &metrics).await?;
                retired.push((name.clone(), volume));
            }
            Ok(retired)
        };
        self.noting_contact(work)
    }
}

/// Deletes the claim `pvc` (the very object read: a uid precondition), setting its volume to
/// Retain first when `keep_volume`; a claim already gone counts as deleted. Answers its volume.
async fn retire_claim(
    pvcs: &Api<PersistentVolumeClaim>,
    pvs: &Api<PersistentVolume>,
    pvc: &PersistentVolumeClaim,
    keep_volume: bool,
    cluster: &str,
    metrics: &Metrics,
) -> Result<Option<String>, WriteError> {
    let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.clone());
    if keep_volume
        && let Some(v) = &volume
        && pvs.get_opt(v).await.map_err(|e| write_error(cluster, e))?.is_some()
    {
        let retain = serde_json::json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}});
        let pp = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        pvs.patch(v, &pp, &Patch::Merge(&retain)).await.map_err(|e| write_error(cluster, e))?;
        metrics.member_write(cluster, "PersistentVolume");
    }
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions { uid: pvc.uid(), resource_version: None }),
        ..Default::default()
    };
    match pvcs.delete(&pvc.name_any(), &dp).await {
        Ok(_) => metrics.member_write(cluster, "PersistentVolumeClaim"),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(write_error(cluster, e)),
    }
    Ok(volume)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_removes_only_spansets_gate_stamps_the_term_and_is_conditional() {
        let msg = |remaining: Vec<String>| ReleasePod {
            key: FederationKey { namespace: "db".into(), name: "redis".into() },
            ordinal: 3,
            uid: "u-3".into(),
            rv: 42,
            remaining,
            term: 9,
        };
        assert_eq!(
            release_patch(&msg(vec![])),
            serde_json::json!({
                "metadata": {"uid": "u-3", "resourceVersion": "42", "annotations": {TERM: "9"}},
                "spec": {"schedulingGates": null},
            })
        );
        assert_eq!(
            release_patch(&msg(vec!["example.com/users-own".into()]))["spec"]["schedulingGates"],
            serde_json::json!([{"name": "example.com/users-own"}])
        );
    }

    fn watcher(leadership: Leadership, metrics: Arc<Metrics>) -> ClusterWatcher {
        // Nothing is sent: the client only has to exist.
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        let client = Client::try_from(config).expect("a client");
        ClusterWatcher::new("east".into(), "context \"east\"".into(), client.clone(), client, leadership, metrics, {
            Synced::default()
        })
    }

    #[tokio::test]
    async fn a_write_refused_as_stale_is_counted_and_the_writer_steps_down() {
        // Issue 19, item 15: a leader whose term is below what a member carries (seen before
        // its term began) used to have every write refused with a debug line only.
        let leadership = Leadership::fixed(1);
        let metrics = Arc::new(Metrics::new());
        let mut w = watcher(leadership.clone(), metrics.clone());
        w.cache.newest_term = 5;
        assert_eq!(w.check_term(1), Err(WriteError::NotLeader(1)));
        assert_eq!(leadership.term(), None, "it stepped down, so that the elector takes a term above 5");
        let text = metrics.render();
        assert!(
            text.contains("spanset_stale_writes_refused_total{cluster=\"east\"} 1"),
            "the refusal is counted:\n{text}"
        );
    }

    #[tokio::test]
    async fn a_write_in_the_member_s_own_term_goes_ahead() {
        let leadership = Leadership::fixed(5);
        let metrics = Arc::new(Metrics::new());
        let mut w = watcher(leadership.clone(), metrics);
        w.cache.newest_term = 5;
        assert_eq!(w.check_term(5), Ok(()));
        assert_eq!(w.check_term(4), Err(WriteError::NotLeader(4)), "not this process's term");
        assert_eq!(leadership.term(), Some(5));
    }
}
