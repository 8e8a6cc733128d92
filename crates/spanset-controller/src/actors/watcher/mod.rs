//! ClusterWatcher: one actor per member cluster, the only code that talks to that member. It
//! watches the managed StatefulSets and their pods into a compact [`MemberCache`], lists a
//! federation's pods again after each change of its StatefulSet so that absences become
//! confirmations, probes the member, reports to the subscribed coordinators, and performs their
//! writes with optimistic concurrency under the writer's term.
//!
//! What to do is decided by the plain functions of [`decide`] (which calls, in which order, what
//! each outcome changes in the cache and answers); the handlers in the other files only perform
//! those calls and feed their outcomes back. The cache is owned by the watcher actor and
//! mutated only from its handlers, through those functions.
//!
//! | file | one reason to change |
//! |---|---|
//! | `mod.rs` | the actor: its state, reports to subscribers, subscriptions, admission |
//! | `watch.rs` | the member's watches and what their events ask |
//! | `confirm.rs` | quorum reads: pods listed again, uncertain writes read again |
//! | `probe.rs`, `report.rs` | the probe, and the MemberCluster's status |
//! | `read_back.rs` | the member's own guards read back |
//! | `quiet.rs` | the member's silence told to every federation |
//! | `contact.rs` | contact and failures noted, refused writes |
//! | `sts_write.rs`, `pods.rs`, `budget.rs`, `slices.rs` | one kind of member write each |
//! | `claims.rs`, `teardown.rs` | storage handovers; a federation's supporting objects, teardown, and a deleted one's leftovers swept |
//! | `supporting_check.rs` | the supporting objects ensured here, read again to put back one deleted |
//! | `calls.rs` | member calls shared by several writes |
//! | `decide/` | every decision above, as plain functions |

mod backoff;
mod budget;
mod calls;
mod claims;
mod confirm;
mod contact;
pub mod decide;
mod handle;
mod pod_lease;
mod pods;
mod probe;
mod quiet;
mod read_back;
mod report;
mod slices;
mod sts_write;
mod supporting_check;
mod teardown;
mod watch;

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use actix::prelude::*;
use kube::{Api, Client};

use spanset_api::MemberCluster;

use crate::{
    actors::messages::{Admitted, Identified, MemberObserved, MemberView, Stop, Subscribe, Subscriber, Unsubscribe},
    leadership::shards::Shards,
    member::{
        cache::MemberCache, contact_clock::ContactClock, health::Health, objects::FederationKey, policies::Readback,
        protections::GuardFacts,
    },
    telemetry::metrics::Metrics,
};
pub use backoff::{RETRY_CAP, RetryBackoff};
pub use decide::{objects::release_patch, watch::Watched};
pub use handle::{MemberHandle, MembersChanged};

/// Which watchers have listed once (for `/readyz`): each watcher sets its member's entry.
pub type Synced = Arc<dashmap::DashMap<String, bool>>;

/// How often a member is probed when nothing else is heard from it.
pub const PROBE_PERIOD: Duration = Duration::from_secs(2);
/// How long a probe may wait for its answer before it counts as a `Timeout` failure.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long without an answer before the MemberCluster's `Reachable` condition turns False
/// (each federation judges with its own `failover.unreachableAfterSeconds`).
pub const MEMBER_UNREACHABLE_AFTER: Duration = crate::member::health::DEFAULT_UNREACHABLE_AFTER;
/// How often `status.lastContact` of a MemberCluster is refreshed when nothing else changes.
pub const CONTACT_REPORT_PERIOD: Duration = Duration::from_secs(30);
/// How often the member's own guards (every policy and binding `spanset join` installs) are
/// read back while it serves them: at the MemberCluster status's own refresh period, so that a
/// guard deleted or altered is in the status within one refresh, for one GET per shipped object
/// each time ([`crate::member::policies::read_back`]).
pub const GUARDS_READ_PERIOD: Duration = CONTACT_REPORT_PERIOD;
/// How long reports are held to coalesce a burst of events into one.
const COALESCE: Duration = Duration::from_millis(20);

/// The watcher of one member cluster.
pub struct ClusterWatcher {
    cluster: String,
    /// Where the member's credentials come from (`Secret NS/NAME`, `context NAME`), for
    /// messages; never the credentials themselves.
    credentials: String,
    client: Client,
    /// The leadership of each shard (one, unless federations are sharded).
    leadership: Shards,
    metrics: Arc<Metrics>,
    cache: MemberCache,
    subscribers: HashMap<FederationKey, Arc<Subscriber>>,
    dirty: HashSet<FederationKey>,
    flush_scheduled: bool,
    confirming: HashSet<FederationKey>,
    /// Whether a confirmation may still be due for some federation (something was touched, a
    /// watch delivered, or a confirming list ended since the probe tick last found none due):
    /// only then does the tick look through every federation served. Idle, it never does.
    confirm_scan: bool,
    health: Health,
    /// The instant of the member's last answer, shared with the coordinators.
    contact: ContactClock,
    started: Instant,
    probing: bool,
    probes: u64,
    /// The Advanced StatefulSet watch, while the member serves them.
    advanced_watch: Option<SpawnHandle>,
    keeps_ordinals: Option<bool>,
    advanced_keeps_ordinals: Option<bool>,
    server_version: Option<String>,
    /// The minor version of the member's `/version`.
    server_minor: Option<u32>,
    /// Whether the member's discovery lists ValidatingAdmissionPolicies (asked once).
    serves_policies: Option<bool>,
    /// What the latest read-back of the member's own guards found (`None` until one ended).
    installed: Option<Arc<Readback>>,
    /// A read-back of the guards is in flight.
    reading_back: bool,
    /// When the latest read-back of the guards started, and how many in a row failed since one
    /// was answered (the next comes sooner after a failure: see
    /// [`decide::health::read_back_due`]).
    read_back_at: Option<Instant>,
    read_back_failures: u32,
    relists: decide::watch::Relists,
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
    /// The member-wide part of the views last reported to every federation.
    told_all: Option<MemberFacts>,
    /// The start of the silence last told to every federation as quiet (see
    /// [`MemberQuiet`](crate::actors::messages::MemberQuiet)).
    quiet_told: Option<Instant>,
    /// The supporting objects ensured here, read again now and then, and the losses counted
    /// per federation.
    supporting: decide::supporting::SupportingIndex,
}

/// What every federation's view of a member shares besides the instant of its last answer
/// (which coordinators read from the [`ContactClock`]): a change of any of it is reported to
/// every federation; a probe that changes none of it wakes no coordinator.
#[derive(Debug, Clone, PartialEq)]
struct MemberFacts {
    synced: bool,
    failure: Option<(crate::member::health::Failure, String)>,
    keeps_ordinals: Option<bool>,
    advanced_keeps_ordinals: Option<bool>,
    serves_advanced: Option<bool>,
    server_version: Option<String>,
    server_minor: Option<u32>,
    serves_policies: Option<bool>,
    installed: Option<Arc<Readback>>,
    cordoned: std::collections::BTreeSet<String>,
    budgets_known: bool,
    slices_known: bool,
}

impl ClusterWatcher {
    /// A watcher for `cluster`, talking through `client`.
    pub fn new(
        cluster: String,
        credentials: String,
        client: Client,
        host: Client,
        leadership: impl Into<Shards>,
        metrics: Arc<Metrics>,
        synced: Synced,
    ) -> Self {
        synced.insert(cluster.clone(), false);
        let leadership = leadership.into();
        let mut cache = MemberCache::default();
        cache.shards = leadership.count();
        Self {
            cluster,
            credentials,
            client,
            leadership,
            metrics,
            cache,
            subscribers: HashMap::new(),
            dirty: HashSet::new(),
            flush_scheduled: false,
            confirming: HashSet::new(),
            confirm_scan: true,
            health: Health::default(),
            contact: ContactClock::default(),
            started: Instant::now(),
            probing: false,
            probes: 0,
            advanced_watch: None,
            keeps_ordinals: None,
            advanced_keeps_ordinals: None,
            server_version: None,
            server_minor: None,
            serves_policies: None,
            installed: None,
            reading_back: false,
            read_back_at: None,
            read_back_failures: 0,
            relists: Default::default(),
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
            told_all: None,
            quiet_told: None,
            supporting: Default::default(),
        }
    }

    /// Makes the member's use wait for the supervisor's [`Admitted`] after its identity is
    /// read and told to `to`: until then it is reported unsynced and written nothing.
    pub fn admitted_by(mut self, to: Recipient<Identified>) -> Self {
        self.identities = Some(to);
        self.admission = Err("its cluster identity is not read yet".into());
        self
    }

    /// Notes the member's answers on `clock` (the one its handle gives coordinators).
    pub fn noting_contact_on(mut self, clock: ContactClock) -> Self {
        self.contact = clock;
        self
    }

    fn view(&self, key: &FederationKey) -> MemberView {
        // Every field but the federation's own records and the instant is in `facts`.
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
            server_minor: self.server_minor,
            serves_policies: self.policies_seen(),
            installed_policies: self.installed.clone(),
            rv: self.cache.newest_rv,
            cordoned: self.cache.cordoned.clone(),
            budgets_known: self.cache.budgets_known(),
            slices_known: self.cache.slices_synced,
            supporting_lost: self.supporting.lost(key),
        }
    }

    /// Whether the report of `key` is the one every federation with nothing here gets: its
    /// record is the shared empty one and it has no claims here.
    fn has_nothing_of(&self, key: &FederationKey) -> bool {
        let shared = self.cache.nothing_here.as_ref();
        self.cache.federations.get(key).is_some_and(|f| shared.is_some_and(|s| Arc::ptr_eq(s, f)))
            && !self.cache.has_claims(key)
            && self.supporting.lost(key) == 0
    }

    fn facts(&self) -> MemberFacts {
        MemberFacts {
            synced: self.cache.synced() && self.admission.is_ok(),
            failure: self.health.failure.clone(),
            keeps_ordinals: self.keeps_ordinals,
            advanced_keeps_ordinals: self.advanced_keeps_ordinals,
            serves_advanced: self.cache.serves_advanced,
            server_version: self.server_version.clone(),
            server_minor: self.server_minor,
            serves_policies: self.policies_seen(),
            installed: self.installed.clone(),
            cordoned: self.cache.cordoned.clone(),
            budgets_known: self.cache.budgets_known(),
            slices_known: self.cache.slices_synced,
        }
    }

    /// Whether the member serves ValidatingAdmissionPolicies, as reported: a member that serves
    /// them is said to only once their first read-back ended, so that its status and its
    /// federations never show the policies served but not yet looked at (a condition that
    /// would turn at every start for a few milliseconds).
    fn policies_seen(&self) -> Option<bool> {
        match self.serves_policies {
            Some(true) if self.installed.is_none() => None,
            served => served,
        }
    }

    /// What the member's guards are judged from, as reported (see [`Self::policies_seen`]).
    fn guard_facts(&self) -> GuardFacts {
        GuardFacts {
            minor: self.server_minor,
            serves_policies: self.policies_seen(),
            installed: self.installed.clone(),
            keeps_ordinals: self.keeps_ordinals,
        }
    }

    /// Reports to every federation if the member-wide facts changed since they were last
    /// reported to all (see [`MemberFacts`]).
    fn touched_all_if_changed(&mut self, ctx: &mut Context<Self>) {
        let facts = self.facts();
        if self.told_all.as_ref() != Some(&facts) {
            tracing::debug!(cluster = %self.cluster, subscribers = self.subscribers.len(), "member-wide facts changed; reporting to every federation");
            self.told_all = Some(facts);
            self.touched_all(ctx);
        }
    }

    fn touched(&mut self, keys: impl IntoIterator<Item = FederationKey>, ctx: &mut Context<Self>) {
        self.dirty.extend(keys);
        self.confirm_scan = true;
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
        if self.cache.synced() {
            self.confirm_due(&dirty, ctx);
        }
        // The federations with nothing here share one report (see `MemberCache::nothing_here`).
        let mut nothing_here: Option<Arc<MemberView>> = None;
        for key in dirty {
            // Reported before the first sync too (`synced: false`): the coordinator then knows
            // how long the member has been silent, which the automatic failover counts.
            if let Some(sub) = self.subscribers.get(&key) {
                let view = if self.has_nothing_of(&key) {
                    nothing_here.get_or_insert_with(|| Arc::new(self.view(&key))).clone()
                } else {
                    Arc::new(self.view(&key))
                };
                sub.reports.do_send(MemberObserved { cluster: self.cluster.clone(), key, view });
            }
        }
    }

    /// What the gate of a write for federation `key` reads: the leadership of its shard, and
    /// the newest term stamped on the member's objects of that shard.
    fn standing(&self, key: &FederationKey) -> decide::WriterStanding<'_> {
        decide::WriterStanding {
            admission: &self.admission,
            leading: self.leadership.of(key).term(),
            member_newest: self.cache.newest_term_of(key),
        }
    }

    /// Records, before a write is sent, that this process writes `key`'s object here in `term`.
    fn note_write(&self, term: u64, key: &FederationKey) {
        self.leadership.of(key).note_write(term, &self.cluster, &key.namespace, &key.name);
    }
}

impl Actor for ClusterWatcher {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        tracing::info!(cluster = %self.cluster, "watching member");
        self.start_watches(ctx);
        self.probe(ctx);
        ctx.run_interval(PROBE_PERIOD, |act, ctx| act.tick(ctx));
        ctx.run_interval(PROBE_PERIOD, |act, ctx| act.check_supporting(ctx));
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        tracing::info!(cluster = %self.cluster, "stopped watching member");
        self.metrics.forget_cluster(&self.cluster);
        self.synced.remove(&self.cluster);
    }
}

impl Handler<Stop> for ClusterWatcher {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Self::Context) {
        ctx.stop();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{actors::messages::WriteError, leadership::leader::Leadership};

    fn key() -> FederationKey {
        FederationKey { namespace: "db".into(), name: "redis".into() }
    }

    /// A federation of each of two shards.
    fn one_in_each_shard() -> (FederationKey, FederationKey) {
        let of = |i: u32| FederationKey { namespace: "db".into(), name: format!("f{i}") };
        let first = (0..).map(of).find(|k| crate::leadership::shards::shard_of(&k.namespace, &k.name, 2) == 0);
        let second = (0..).map(of).find(|k| crate::leadership::shards::shard_of(&k.namespace, &k.name, 2) == 1);
        (first.expect("shard 0"), second.expect("shard 1"))
    }

    #[tokio::test]
    async fn a_newer_term_of_one_shard_refuses_only_that_shard_s_writes() {
        let shards = Shards::new(2);
        shards.get(0).unwrap().lead_for_tests(3);
        shards.get(1).unwrap().lead_for_tests(8);
        let metrics = Arc::new(Metrics::new());
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        let client = Client::try_from(config).expect("a client");
        let mut w =
            ClusterWatcher::new("east".into(), "ctx".into(), client.clone(), client, shards.clone(), metrics, {
                Synced::default()
            });
        let (a, b) = one_in_each_shard();
        // Shard 1's objects carry its term 8; shard 0 leads in term 3 and is not stale for that.
        w.cache.newest_in_shard.insert(1, 8);
        assert_eq!(w.check_term(&a, 3), Ok(()), "another shard's newer term is not this shard's");
        assert_eq!(w.check_term(&b, 8), Ok(()));
        // A newer stamp in shard 0 makes shard 0 step down, and only shard 0.
        w.cache.newest_in_shard.insert(0, 5);
        assert_eq!(w.check_term(&a, 3), Err(WriteError::NotLeader(3)));
        assert_eq!(shards.get(0).unwrap().term(), None);
        assert_eq!(shards.get(1).unwrap().term(), Some(8));
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
        // A leader whose term is below what a member carries (seen before its term began) used
        // to have every write refused with a debug line only.
        let leadership = Leadership::fixed(1);
        let metrics = Arc::new(Metrics::new());
        let mut w = watcher(leadership.clone(), metrics.clone());
        w.cache.newest_term = 5;
        assert_eq!(w.check_term(&key(), 1), Err(WriteError::NotLeader(1)));
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
        assert_eq!(w.check_term(&key(), 5), Ok(()));
        assert_eq!(w.check_term(&key(), 4), Err(WriteError::NotLeader(4)), "not this process's term");
        assert_eq!(leadership.term(), Some(5));
    }
}
