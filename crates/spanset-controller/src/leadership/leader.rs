//! Leadership with fencing terms, held in a `coordination.k8s.io/v1` Lease in the host cluster.
//!
//! Only the leader writes to member clusters. A lease alone does not fence a process that was
//! paused past it, so leadership comes with a **term**: a number that
//! only grows, which writers stamp on the member objects they manage; a writer that sees a
//! newer stamp stops at once ([`Leadership::step_down`]).
//!
//! The rules, after client-go's `leaderelection` package, with terms added:
//!
//! - **Term** = `spec.leaseTransitions` after this process acquires. Creating the Lease sets 1;
//!   every acquisition (a take-over, or this process coming back after its own leadership
//!   lapsed) writes `leaseTransitions = previous + 1`, and never a term at or below one this
//!   process held before, nor at or below the highest term stamped on any member object its
//!   watchers have seen ([`Leadership::observe_stamp`]). The Lease and this process's memory
//!   are not the only record of past terms: the stamps in the members are, and they outlive a
//!   deleted Lease, a renamed one (`--lease-name`) and a restarted process. So the fencing
//!   token keeps growing, and no two leaders ever share a term. A renewal keeps the term.
//! - **Stamps first**: the elector campaigns only once every member watcher has listed once
//!   (so the stamps are known), or after one lease duration (a member that does not answer
//!   must not keep the federations leaderless). A member that answers later with a stamp at or
//!   above the term taken makes this process step down (see the watcher's `check_stamp`), and
//!   the next term is taken above that stamp.
//! - **Optimistic concurrency**: every write carries the resourceVersion it read; a 409 means
//!   someone else wrote, and the elector re-reads at once.
//! - **Taking over**: a candidate takes over a held Lease only after it has seen the *same*
//!   record (same resourceVersion) for the lease duration by its own monotonic clock
//!   (client-go's `observedTime`), so wall-clock skew between nodes does not matter; the wait
//!   is the longer of its own `lease_duration` and the record's `leaseDurationSeconds`. A Lease
//!   whose `holderIdentity` is empty (released) is taken at once.
//! - **Local validity**: the leader renews every `retry_period`; it leads until the instant its
//!   last successful renew (or acquire) *request started* plus `renew_deadline`. Because
//!   `renew_deadline < lease_duration`, and a candidate's observation of that record comes after
//!   the write, the old leader has stopped before anyone else can take over.
//!   [`Leadership::term`] checks the deadline on every call, so a process resumed after
//!   `SIGSTOP` past its deadline sees `None` before any of its tasks acts; a watchdog task also
//!   tells subscribers, even if the elector task itself was aborted.
//! - **Lapse**: when renewals fail past the deadline, the process stops leading and keeps
//!   campaigning. If the record still names it in its last term (nobody took over), it takes it
//!   back at once, in a new term.
//! - **Step down**: after [`Leadership::step_down`] the elector treats the record naming this
//!   process like anyone else's (it waits the lease duration before taking it again).
//! - **Release**: on shutdown the elector stops leading locally first, then clears
//!   `holderIdentity` (keeping `leaseTransitions`), so a successor takes over without waiting.
//!
//! `identity` must be unique per process (a pod name, or a pod name and a random suffix):
//! two processes with one identity would renew each other's record.
//!
//! State: [`Leadership`] is written only by [`run_elector`] (acquire, renew, lapse, release),
//! by its watchdog (lapse) and by [`Leadership::step_down`]; everything else reads it.

use std::{
    future::Future,
    sync::{
        Arc, Weak,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use kube::{Api, api::PostParams};
use parking_lot::Mutex;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

/// How to campaign: which Lease, who this process is, and the three durations of client-go's
/// leader election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSettings {
    /// Namespace of the Lease in the host cluster.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This process's identity, written as `holderIdentity`; unique per process.
    pub identity: String,
    /// How long a candidate waits, after it last saw the record change, before taking over.
    pub lease_duration: Duration,
    /// How long the leader leads after the start of its last successful renew request; below
    /// `lease_duration`, so the leader stops before anyone may take over.
    pub renew_deadline: Duration,
    /// How often the leader renews and a candidate re-reads.
    pub retry_period: Duration,
}

impl LeaseSettings {
    /// Settings with client-go's defaults: lease 15 s, renew deadline 10 s, retry 2 s.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks what safety depends on: a non-empty name and identity, and
    /// `0 < retry_period < renew_deadline < lease_duration`. The error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() {
            return Err("lease name: must not be empty".into());
        }
        if self.identity.is_empty() {
            return Err("lease identity: must not be empty".into());
        }
        if self.retry_period.is_zero() {
            return Err("retry_period: must be above 0".into());
        }
        if self.renew_deadline <= self.retry_period {
            return Err(format!(
                "renew_deadline ({:?}) must be longer than retry_period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(format!(
                "lease_duration ({:?}) must be longer than renew_deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written: whole seconds, rounded up, at least 1.
    fn duration_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
    }
}

// === Leadership ===

/// Shared, cheap-to-clone view of whether this process leads, and in which term. Writers ask
/// [`Leadership::term`] right before each write and stamp the term they got.
#[derive(Clone)]
pub struct Leadership {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    tx: watch::Sender<Option<u64>>,
    /// The highest term seen stamped on a member object (see [`Leadership::observe_stamp`]);
    /// shared by the leaderships of one process's shards (see [`Leadership::sharing_floor`]).
    floor: Arc<AtomicU64>,
    /// Who leads, for the owner record a coordinator writes on its federation (see
    /// [`Leadership::owner`]).
    owner: Mutex<String>,
    /// Whether every member's stamps have been seen (see [`Leadership::set_stamps_known`]).
    stamps_known: watch::Sender<bool>,
    /// Why this process no longer campaigns: it met an object written by a newer version of
    /// the controller (see [`Leadership::supersede`]); shared like the floor, since one newer
    /// writer supersedes every shard of this process.
    superseded: Arc<watch::Sender<Option<String>>>,
}

#[derive(Default)]
struct State {
    /// The term this process leads in, and until when (`None` = no deadline, for `fixed`).
    leading: Option<(u64, Option<Instant>)>,
    /// Member objects (cluster, namespace, name) this process wrote in the term it leads in:
    /// an object carrying that same term that is not among them was stamped by another
    /// process in the same term.
    written: std::collections::HashSet<(String, String, String)>,
    /// Set by `step_down`, taken by the elector: the record naming this process no longer
    /// lets it resume without waiting.
    stepped_down: bool,
    /// When this process last began leading (see [`Leadership::leading_since`]).
    since: Option<Instant>,
}

impl Default for Leadership {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership").field("term", &self.term()).finish()
    }
}

impl Leadership {
    /// Not leading, until an elector acquires.
    pub fn new() -> Self {
        Self::with_state(State::default(), None)
    }

    fn with_state(state: State, term: Option<u64>) -> Self {
        let floor = Arc::new(AtomicU64::new(0));
        Self::with_floor(state, term, floor, Arc::new(watch::channel(None).0))
    }

    fn with_floor(
        state: State,
        term: Option<u64>,
        floor: Arc<AtomicU64>,
        superseded: Arc<watch::Sender<Option<String>>>,
    ) -> Self {
        let (tx, _) = watch::channel(term);
        let (stamps_known, _) = watch::channel(true);
        let owner = Mutex::new(String::from("spanset"));
        Self { inner: Arc::new(Inner { state: Mutex::new(state), tx, floor, stamps_known, owner, superseded }) }
    }

    /// Another leadership (not leading) of this process, for another shard's Lease: it shares
    /// this one's floor, so that a term any shard takes is above every stamp this process saw.
    pub fn sharing_floor(&self) -> Self {
        Self::with_floor(State::default(), None, self.inner.floor.clone(), self.inner.superseded.clone())
    }

    /// Names who leads through this leadership (`identity, shard 2 of 4`), for the owner record
    /// on each federation it acts for.
    pub fn describe_owner(&self, owner: impl Into<String>) {
        *self.inner.owner.lock() = owner.into();
    }

    /// See [`Leadership::describe_owner`].
    pub fn owner(&self) -> String {
        self.inner.owner.lock().clone()
    }

    /// Always leading in `term` (until [`Leadership::step_down`]): for tests and for
    /// single-process tools that need no election.
    pub fn fixed(term: u64) -> Self {
        Self::with_state(
            State { leading: Some((term, None)), since: Some(Instant::now()), ..State::default() },
            Some(term),
        )
    }

    /// A member object carries `term` in `spanset.dev/term`: the next term this process takes
    /// is above it. Called by the member watchers for every stamp they see, leading or not.
    pub fn observe_stamp(&self, term: u64) {
        self.inner.floor.fetch_max(term, Ordering::SeqCst);
    }

    /// The highest term seen stamped on a member object so far (0: none).
    pub fn floor(&self) -> u64 {
        self.inner.floor.load(Ordering::SeqCst)
    }

    /// Says whether every member's stamps have been seen (every member watcher listed once);
    /// the elector does not campaign before that, or before one lease duration has passed.
    /// A new `Leadership` has nothing to wait for; `spanset run` sets it false until its
    /// supervisor has seen every member listed.
    pub fn set_stamps_known(&self, known: bool) {
        self.inner.stamps_known.send_if_modified(|k| std::mem::replace(k, known) != known);
    }

    /// Waits until every member's stamps are known, or `limit` has passed.
    async fn stamps_known_within(&self, limit: Duration) -> bool {
        let mut rx = self.inner.stamps_known.subscribe();
        tokio::time::timeout(limit, rx.wait_for(|k| *k)).await.is_ok_and(|r| r.is_ok())
    }

    /// `Some(term)` only while leading and before the local renew deadline. Checked against
    /// the monotonic clock on every call, so a process resumed after a long pause sees `None`
    /// at once, before the watchdog or the elector run.
    pub fn term(&self) -> Option<u64> {
        if self.inner.superseded.borrow().is_some() {
            self.end();
            return None;
        }
        let mut st = self.inner.state.lock();
        let (term, deadline) = st.leading?;
        match deadline {
            Some(d) if Instant::now() >= d => {
                st.leading = None;
                self.inner.tx.send_replace(None);
                drop(st);
                info!(term, "lost leadership: the renew deadline passed");
                None
            }
            _ => Some(term),
        }
    }

    /// While leading, when this process began leading in its current term. What it observed
    /// before that, as a standby, is not evidence a leader may act on alone: the automatic
    /// failover policy counts a member's silence only from here.
    pub fn leading_since(&self) -> Option<Instant> {
        self.term()?;
        self.inner.state.lock().since
    }

    /// Leadership changes: `Some(term)` on acquiring, `None` on losing, stepping down or
    /// releasing.
    pub fn subscribe(&self) -> watch::Receiver<Option<u64>> {
        self.inner.tx.subscribe()
    }

    /// A member object stamped with a newer term was seen: someone else leads now, so stop
    /// leading at once. The elector then waits the full lease duration before it may take the
    /// Lease again, even if the record still names this process.
    pub fn step_down(&self, reason: &str) {
        let mut st = self.inner.state.lock();
        st.stepped_down = true;
        if let Some((term, _)) = st.leading.take() {
            self.inner.tx.send_replace(None);
            drop(st);
            warn!(term, reason, "stepping down from leadership");
        }
    }

    /// An object written by a newer version of the controller was read (`reason` names it and
    /// both versions): this process stops leading at once, in every shard, and never
    /// campaigns again (its electors release their Leases), so that it cannot undo what the
    /// newer version wrote. Returns true the first time only, for the caller to say so once.
    pub fn supersede(&self, reason: &str) -> bool {
        let first = self.inner.superseded.send_if_modified(|s| {
            if s.is_some() {
                return false;
            }
            *s = Some(reason.to_string());
            true
        });
        self.step_down(reason);
        first
    }

    /// Why this process was superseded by a newer version, if it was.
    pub fn superseded(&self) -> Option<String> {
        self.inner.superseded.borrow().clone()
    }

    /// Waits until this process is superseded (see [`Leadership::supersede`]): what ends its
    /// electors' campaigns and its presence among the replicas.
    pub async fn until_superseded(&self) {
        let mut rx = self.inner.superseded.subscribe();
        let _ = rx.wait_for(Option::is_some).await;
    }

    /// Records that this process is about to write member object `namespace/name` in cluster
    /// `cluster` in `term` (before the write is sent, so that its own watch event never looks
    /// foreign).
    pub fn note_write(&self, term: u64, cluster: &str, namespace: &str, name: &str) {
        let mut st = self.inner.state.lock();
        if st.leading.is_some_and(|(t, _)| t == term) {
            st.written.insert((cluster.to_string(), namespace.to_string(), name.to_string()));
        }
    }

    /// Whether a member object stamped with `stamp` shows that another process leads, or led in
    /// this process's own term: a stamp above this process's term, or equal to it on an object
    /// this process did not write in that term (a [`Leadership::fixed`] term is this process's
    /// alone: only a higher stamp counts). `None` while not leading.
    pub fn stamp_is_foreign(&self, stamp: u64, cluster: &str, namespace: &str, name: &str) -> Option<u64> {
        let mine = self.term()?;
        let st = self.inner.state.lock();
        let elected = st.leading.is_some_and(|(_, deadline)| deadline.is_some());
        let written = st.written.contains(&(cluster.to_string(), namespace.to_string(), name.to_string()));
        (stamp > mine || (stamp == mine && elected && !written)).then_some(mine)
    }

    /// Starts leading in `term` until `deadline`, and spawns the watchdog that ends it there.
    fn begin(&self, term: u64, deadline: Instant) {
        {
            let mut st = self.inner.state.lock();
            st.leading = Some((term, Some(deadline)));
            st.written.clear();
            st.stepped_down = false;
            st.since = Some(Instant::now());
            self.inner.tx.send_replace(Some(term));
        }
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(watchdog(weak, term));
    }

    /// Leads in `term` for an hour, as if elected: for unit tests of what reads leadership.
    #[cfg(test)]
    pub(crate) fn lead_for_tests(&self, term: u64) {
        self.begin(term, Instant::now() + Duration::from_secs(3600));
    }

    /// Moves the deadline of `term` later; false if this process no longer leads in `term`
    /// (it lapsed or stepped down meanwhile: a late renewal does not revive it).
    fn extend(&self, term: u64, deadline: Instant) -> bool {
        if self.term() != Some(term) {
            return false;
        }
        let mut st = self.inner.state.lock();
        match &mut st.leading {
            Some((t, Some(d))) if *t == term => {
                *d = (*d).max(deadline);
                true
            }
            _ => false,
        }
    }

    /// Stops leading (the record shows someone else, or this process is shutting down);
    /// returns the term it led in.
    fn end(&self) -> Option<u64> {
        let mut st = self.inner.state.lock();
        let (term, _) = st.leading.take()?;
        self.inner.tx.send_replace(None);
        Some(term)
    }

    /// Whether `step_down` was called since the last look (clears the flag).
    fn take_stepped_down(&self) -> bool {
        std::mem::take(&mut self.inner.state.lock().stepped_down)
    }
}

/// Ends leadership in `term` at its deadline, even if the elector task was aborted; stops when
/// the term ends by other means or every [`Leadership`] handle is gone.
async fn watchdog(inner: Weak<Inner>, term: u64) {
    loop {
        let deadline = {
            let Some(inner) = inner.upgrade() else { return };
            let leadership = Leadership { inner };
            // `term()` ends leadership itself when the deadline has passed.
            if leadership.term() != Some(term) {
                return;
            }
            match leadership.inner.state.lock().leading {
                Some((t, Some(d))) if t == term => d,
                _ => return,
            }
        };
        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await;
    }
}

// === The decision (pure) ===

/// What the elector needs to know of a Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `spec.holderIdentity`; `None` when absent or empty (released).
    pub holder: Option<String>,
    /// `spec.leaseTransitions` (a negative number reads as 0).
    pub transitions: u64,
    /// `spec.leaseDurationSeconds`, when set and positive.
    pub duration: Option<Duration>,
    /// `metadata.resourceVersion`: what "the same record" means.
    pub resource_version: String,
}

impl LeaseRecord {
    /// Reads a Lease; an object without a resourceVersion cannot be written safely, so it is
    /// refused with an error saying so.
    pub fn from_lease(lease: &Lease) -> Result<Self, String> {
        let resource_version = lease
            .metadata
            .resource_version
            .clone()
            .filter(|rv| !rv.is_empty())
            .ok_or_else(|| "the Lease has no metadata.resourceVersion".to_string())?;
        let spec = lease.spec.as_ref();
        Ok(Self {
            holder: spec.and_then(|s| s.holder_identity.clone()).filter(|h| !h.is_empty()),
            transitions: spec.and_then(|s| s.lease_transitions).map_or(0, |t| u64::try_from(t).unwrap_or(0)),
            duration: spec
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|d| u64::try_from(d).ok())
                .filter(|d| *d > 0)
                .map(Duration::from_secs),
            resource_version,
        })
    }
}

/// What this process knows of itself when it decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// Its identity.
    pub identity: &'a str,
    /// The term it leads in now (locally valid), if any.
    pub leading: Option<u64>,
    /// The term it held last and may take back without waiting, if the record still shows it
    /// (`None` after a step-down, or when it never held one).
    pub resumable: Option<u64>,
    /// The highest term it ever held; a new term is always above it.
    pub highest_term: u64,
    /// The highest term seen stamped on a member object; a new term is always above it too.
    pub floor: u64,
}

/// Why a candidate may take the Lease now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireReason {
    /// Nobody holds it (released, or never held).
    Vacant,
    /// The holder's record has not changed for the lease duration.
    Expired,
    /// It names this process in the term it last held: its own leadership lapsed, nobody
    /// took over.
    Resume,
}

/// The next write, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseWrite {
    /// No Lease: create it, holding `term`.
    Create {
        /// The term to hold.
        term: u64,
    },
    /// This process leads and the record is its own: renew, keeping `term`.
    Renew {
        /// The current term.
        term: u64,
    },
    /// Take the Lease in a new `term`.
    Acquire {
        /// The new term.
        term: u64,
        /// Why taking it is safe now.
        reason: AcquireReason,
    },
    /// Someone else holds a valid Lease; it cannot expire before `until`.
    Wait {
        /// The earliest instant it may be taken, if its record stays unchanged.
        until: Instant,
    },
}

/// Decides from the record (if the Lease exists), what this process knows of itself, the
/// instant it first saw this record's resourceVersion, now, and its own lease duration. No
/// I/O, no clock: the elector passes the instants.
pub fn decide(
    record: Option<&LeaseRecord>,
    me: &Candidate<'_>,
    observed_at: Instant,
    now: Instant,
    lease_duration: Duration,
) -> LeaseWrite {
    let next_term = |previous: u64| previous.max(me.highest_term).max(me.floor).saturating_add(1);
    let Some(record) = record else {
        return LeaseWrite::Create { term: next_term(0) };
    };
    match record.holder.as_deref() {
        None => LeaseWrite::Acquire { term: next_term(record.transitions), reason: AcquireReason::Vacant },
        Some(holder) if holder == me.identity && me.resumable == Some(record.transitions) => {
            if me.leading == Some(record.transitions) {
                LeaseWrite::Renew { term: record.transitions }
            } else {
                LeaseWrite::Acquire { term: next_term(record.transitions), reason: AcquireReason::Resume }
            }
        }
        Some(_) => {
            let wait = lease_duration.max(record.duration.unwrap_or_default());
            // An instant too far to represent never comes.
            match observed_at.checked_add(wait) {
                Some(expires) if now >= expires => {
                    LeaseWrite::Acquire { term: next_term(record.transitions), reason: AcquireReason::Expired }
                }
                Some(expires) => LeaseWrite::Wait { until: expires },
                None => LeaseWrite::Wait { until: now + lease_duration },
            }
        }
    }
}

// === The elector ===

/// Campaigns for the Lease and renews it until `shutdown` resolves; on shutdown stops leading
/// and releases the Lease if held (`holderIdentity` cleared), so a successor need not wait.
/// Invalid settings (see [`LeaseSettings::validate`]) are logged and the elector returns
/// without campaigning: this process then never leads.
pub async fn run_elector(
    api: Api<Lease>,
    settings: LeaseSettings,
    leadership: Leadership,
    shutdown: impl Future<Output = ()>,
) {
    run_shard_elector(api, settings, leadership, None, shutdown).await;
}

/// How many Leases one process may hold when federations are sharded over several processes
/// (see `crate::leadership::share`): asked before taking a Lease and after each renewal.
pub trait Quota: Send + Sync {
    /// Whether this process may take one more Lease now.
    fn may_take(&self) -> bool;
    /// Whether this process should give the Lease `name` up now (it holds more than its share,
    /// and that is the one to give).
    fn should_yield(&self, name: &str) -> bool;
}

/// [`run_elector`] for one shard's Lease, taking and keeping it only as `quota` allows: a
/// Lease held beyond the quota is released (leadership ends locally first, as on shutdown),
/// and one not held is taken only while the quota has room.
pub async fn run_shard_elector(
    api: Api<Lease>,
    settings: LeaseSettings,
    leadership: Leadership,
    quota: Option<Arc<dyn Quota>>,
    shutdown: impl Future<Output = ()>,
) {
    if let Err(problem) = settings.validate() {
        error!(lease = %settings.name, %problem, "invalid leader election settings; not campaigning");
        return;
    }
    let mut elector = Elector {
        api,
        leadership,
        observed: None,
        resumable: None,
        highest_term: 0,
        duration_seconds: settings.duration_seconds(),
        s: settings,
        quota,
    };
    tokio::pin!(shutdown);
    tokio::select! {
        biased;
        () = &mut shutdown => return,
        known = elector.leadership.stamps_known_within(elector.s.lease_duration) => if !known {
            warn!(
                lease = %elector.s.name, floor = elector.leadership.floor(),
                "not every member listed within the lease duration; campaigning above the highest term stamped so far \
                 (a member that answers later with a higher stamp makes this process step down and take a term above it)"
            );
        },
    }
    let superseded = elector.leadership.clone();
    let superseded = superseded.until_superseded();
    tokio::pin!(superseded);
    loop {
        let pause = tokio::select! {
            biased;
            () = &mut shutdown => break,
            () = &mut superseded => break,
            pause = elector.round() => pause,
        };
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            () = &mut superseded => break,
            () = tokio::time::sleep(pause) => {}
        }
    }
    elector.release().await;
    if let Some(reason) = elector.leadership.superseded() {
        warn!(lease = %elector.s.name, %reason, "a newer version of the controller writes here: this process no longer campaigns");
        shutdown.await;
    }
}

/// One round's outcome.
enum Attempt {
    /// Wait this long before the next round.
    Done(Duration),
    /// A write conflicted (409): re-read at once.
    Conflict,
}

/// Owned by `run_elector`.
struct Elector {
    api: Api<Lease>,
    s: LeaseSettings,
    leadership: Leadership,
    /// The resourceVersion last seen, and when it was first seen (monotonic).
    observed: Option<(String, Instant)>,
    /// See [`Candidate::resumable`].
    resumable: Option<u64>,
    /// See [`Candidate::highest_term`].
    highest_term: u64,
    duration_seconds: i32,
    /// How many Leases this process may hold, when sharded.
    quota: Option<Arc<dyn Quota>>,
}

/// Most immediate re-reads after conflicts in one round.
const CONFLICT_RETRIES: usize = 3;

impl Elector {
    async fn round(&mut self) -> Duration {
        if self.leadership.take_stepped_down() {
            self.resumable = None;
        }
        for _ in 0..CONFLICT_RETRIES {
            match self.attempt().await {
                Attempt::Done(pause) => return pause,
                Attempt::Conflict => debug!(lease = %self.s.name, "lease write conflicted; re-reading"),
            }
        }
        self.s.retry_period
    }

    /// The pause of a candidate: `retry_period` plus up to 20% jitter, so candidates that
    /// started together do not keep colliding (client-go's JitterFactor 1.2).
    fn candidate_pause(&self) -> Duration {
        self.s.retry_period.mul_f64(1.0 + 0.2 * rand::random::<f64>())
    }

    fn observe(&mut self, rv: &str, at: Instant) -> Instant {
        match &self.observed {
            Some((seen, since)) if seen == rv => *since,
            _ => {
                self.observed = Some((rv.to_string(), at));
                at
            }
        }
    }

    async fn attempt(&mut self) -> Attempt {
        let read = tokio::time::timeout(self.s.renew_deadline, self.api.get_opt(&self.s.name)).await;
        let lease = match read {
            Ok(Ok(lease)) => lease,
            Ok(Err(e)) => {
                warn!(lease = %self.s.name, error = %e, "cannot read the lease");
                return Attempt::Done(self.s.retry_period);
            }
            Err(_) => {
                warn!(lease = %self.s.name, timeout = ?self.s.renew_deadline, "reading the lease timed out");
                return Attempt::Done(self.s.retry_period);
            }
        };
        let now = Instant::now();
        let record = match lease.as_ref().map(LeaseRecord::from_lease).transpose() {
            Ok(r) => r,
            Err(problem) => {
                warn!(lease = %self.s.name, %problem, "cannot use the lease");
                return Attempt::Done(self.s.retry_period);
            }
        };
        let observed_at = record.as_ref().map_or(now, |r| self.observe(&r.resource_version, now));
        let leading = self.leadership.term();
        let me = Candidate {
            identity: &self.s.identity,
            leading,
            resumable: self.resumable,
            highest_term: self.highest_term,
            floor: self.leadership.floor(),
        };
        let decision = decide(record.as_ref(), &me, observed_at, now, self.s.lease_duration);
        if let Some(term) = leading
            && !matches!(decision, LeaseWrite::Renew { .. })
            && self.leadership.end().is_some()
        {
            let holder = record.as_ref().and_then(|r| r.holder.clone()).unwrap_or_default();
            let transitions = record.as_ref().map_or(0, |r| r.transitions);
            info!(lease = %self.s.name, term, %holder, transitions, "lost leadership: the lease changed hands");
            self.resumable = None;
        }
        if let Some(quota) = &self.quota {
            let taking = matches!(decision, LeaseWrite::Create { .. } | LeaseWrite::Acquire { .. });
            if taking && !quota.may_take() {
                return Attempt::Done(self.candidate_pause());
            }
            if matches!(decision, LeaseWrite::Renew { .. }) && quota.should_yield(&self.s.name) {
                info!(lease = %self.s.name, "holding more than this process's share of the shards; giving this one up");
                self.release().await;
                self.resumable = None;
                return Attempt::Done(self.s.retry_period);
            }
        }
        let (term, lease) = match decision {
            LeaseWrite::Wait { until } => {
                return Attempt::Done(self.candidate_pause().min(until.saturating_duration_since(now)));
            }
            LeaseWrite::Create { term } => (term, None),
            LeaseWrite::Renew { term } | LeaseWrite::Acquire { term, .. } => (term, lease),
        };
        let Ok(transitions) = i32::try_from(term) else {
            error!(lease = %self.s.name, term, "term exceeds leaseTransitions' int32 range; not acquiring");
            return Attempt::Done(self.s.retry_period);
        };
        let renewing = matches!(decision, LeaseWrite::Renew { .. });
        let started = Instant::now();
        let stamp = MicroTime(jiff::Timestamp::now());
        let write = match lease {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.s.name.clone()),
                        namespace: Some(self.s.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.s.identity.clone()),
                        lease_duration_seconds: Some(self.duration_seconds),
                        lease_transitions: Some(transitions),
                        acquire_time: Some(stamp.clone()),
                        renew_time: Some(stamp),
                        ..LeaseSpec::default()
                    }),
                };
                tokio::time::timeout(self.s.renew_deadline, self.api.create(&PostParams::default(), &lease)).await
            }
            Some(mut lease) => {
                // `lease` carries the resourceVersion just read: the write is conditional on it.
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.holder_identity = Some(self.s.identity.clone());
                spec.lease_duration_seconds = Some(self.duration_seconds);
                spec.lease_transitions = Some(transitions);
                if !renewing {
                    spec.acquire_time = Some(stamp.clone());
                }
                spec.renew_time = Some(stamp);
                tokio::time::timeout(
                    self.s.renew_deadline,
                    self.api.replace(&self.s.name, &PostParams::default(), &lease),
                )
                .await
            }
        };
        match write {
            Ok(Ok(stored)) => {
                let deadline = started + self.s.renew_deadline;
                if let Some(rv) = stored.metadata.resource_version.as_deref() {
                    self.observe(rv, Instant::now());
                }
                self.highest_term = self.highest_term.max(term);
                self.resumable = Some(term);
                if renewing {
                    if !self.leadership.extend(term, deadline) {
                        debug!(lease = %self.s.name, term, "renewed after leadership ended; campaigning anew");
                    }
                } else {
                    self.leadership.begin(term, deadline);
                    info!(lease = %self.s.name, identity = %self.s.identity, term, floor = self.leadership.floor(), "acquired leadership");
                }
                Attempt::Done(self.s.retry_period)
            }
            Ok(Err(kube::Error::Api(status))) if status.code == 409 => Attempt::Conflict,
            Ok(Err(e)) => {
                warn!(lease = %self.s.name, term, renewing, error = %e, "cannot write the lease");
                Attempt::Done(self.s.retry_period)
            }
            Err(_) => {
                warn!(lease = %self.s.name, term, renewing, timeout = ?self.s.renew_deadline, "writing the lease timed out");
                Attempt::Done(self.s.retry_period)
            }
        }
    }

    /// Stops leading, then clears `holderIdentity` if the record still names this process
    /// (in any term: identities are unique per process, and a write cut short by the shutdown
    /// may have succeeded unseen).
    async fn release(&mut self) {
        let was_leading = self.leadership.end();
        for _ in 0..CONFLICT_RETRIES {
            let read = tokio::time::timeout(self.s.renew_deadline, self.api.get_opt(&self.s.name)).await;
            let Ok(Ok(Some(mut lease))) = read else {
                warn!(lease = %self.s.name, "cannot read the lease to release it");
                return;
            };
            let Ok(record) = LeaseRecord::from_lease(&lease) else { return };
            if record.holder.as_deref() != Some(self.s.identity.as_str()) {
                return;
            }
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
            let write = tokio::time::timeout(
                self.s.renew_deadline,
                self.api.replace(&self.s.name, &PostParams::default(), &lease),
            )
            .await;
            match write {
                Ok(Ok(_)) => {
                    info!(lease = %self.s.name, term = record.transitions, was_leading = was_leading.is_some(), "released the lease");
                    return;
                }
                Ok(Err(kube::Error::Api(status))) if status.code == 409 => continue,
                Ok(Err(e)) => {
                    warn!(lease = %self.s.name, error = %e, "cannot release the lease");
                    return;
                }
                Err(_) => {
                    warn!(lease = %self.s.name, "releasing the lease timed out");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    fn record(holder: Option<&str>, transitions: u64, rv: &str) -> LeaseRecord {
        LeaseRecord {
            holder: holder.map(str::to_string),
            transitions,
            duration: Some(Duration::from_secs(15)),
            resource_version: rv.to_string(),
        }
    }

    fn stranger() -> Candidate<'static> {
        Candidate { identity: "me", leading: None, resumable: None, highest_term: 0, floor: 0 }
    }

    #[test]
    fn a_missing_lease_is_created_in_term_one() {
        let now = Instant::now();
        assert_eq!(decide(None, &stranger(), now, now, LEASE), LeaseWrite::Create { term: 1 });
    }

    #[test]
    fn a_recreated_lease_never_lowers_this_process_s_term() {
        let now = Instant::now();
        let me = Candidate { highest_term: 7, ..stranger() };
        assert_eq!(decide(None, &me, now, now, LEASE), LeaseWrite::Create { term: 8 });
        let vacant = record(None, 2, "5");
        assert_eq!(
            decide(Some(&vacant), &me, now, now, LEASE),
            LeaseWrite::Acquire { term: 8, reason: AcquireReason::Vacant }
        );
    }

    #[test]
    fn a_new_term_is_above_every_term_stamped_on_a_member() {
        // Members carry term 2; the Lease was deleted, renamed or is behind. The new term must
        // still be above every stamp, or its writes could not be told from the old leader's.
        let now = Instant::now();
        let me = Candidate { floor: 2, ..stranger() };
        assert_eq!(decide(None, &me, now, now, LEASE), LeaseWrite::Create { term: 3 });
        let behind = record(None, 1, "5");
        assert_eq!(
            decide(Some(&behind), &me, now, now, LEASE),
            LeaseWrite::Acquire { term: 3, reason: AcquireReason::Vacant }
        );
        let expired = record(Some("other"), 1, "5");
        assert_eq!(
            decide(Some(&expired), &me, now, now + LEASE, LEASE),
            LeaseWrite::Acquire { term: 3, reason: AcquireReason::Expired }
        );
        // A Lease ahead of the stamps keeps counting from itself.
        let ahead = record(None, 9, "5");
        assert_eq!(
            decide(Some(&ahead), &me, now, now, LEASE),
            LeaseWrite::Acquire { term: 10, reason: AcquireReason::Vacant }
        );
    }

    #[test]
    fn a_stamp_of_this_term_on_an_object_this_process_did_not_write_is_foreign() {
        let l = Leadership::new();
        assert_eq!(l.stamp_is_foreign(9, "a", "ns", "web"), None, "not leading: nothing to compare");
        {
            let mut st = l.inner.state.lock();
            st.leading = Some((3, Some(Instant::now() + Duration::from_secs(600))));
        }
        l.note_write(3, "a", "ns", "web");
        assert_eq!(l.stamp_is_foreign(3, "a", "ns", "web"), None, "its own stamp");
        assert_eq!(l.stamp_is_foreign(2, "b", "ns", "web"), None, "an older term");
        assert_eq!(l.stamp_is_foreign(3, "b", "ns", "web"), Some(3), "the same term, written by someone else");
        assert_eq!(l.stamp_is_foreign(4, "a", "ns", "web"), Some(3), "a newer term");
        l.note_write(2, "b", "ns", "web");
        assert_eq!(
            l.stamp_is_foreign(3, "b", "ns", "web"),
            Some(3),
            "a write noted for another term counts for nothing"
        );
        let fixed = Leadership::fixed(1);
        assert_eq!(fixed.stamp_is_foreign(1, "a", "ns", "web"), None, "a fixed term is this process's alone");
        assert_eq!(fixed.stamp_is_foreign(2, "a", "ns", "web"), Some(1));
    }

    #[test]
    fn stamps_raise_the_floor_and_never_lower_it() {
        let l = Leadership::new();
        assert_eq!(l.floor(), 0);
        l.observe_stamp(4);
        l.observe_stamp(2);
        assert_eq!(l.floor(), 4);
    }

    #[tokio::test]
    async fn a_newer_writer_ends_leadership_in_every_shard_for_good() {
        let l = Leadership::new();
        let other_shard = l.sharing_floor();
        l.lead_for_tests(3);
        other_shard.lead_for_tests(4);
        assert!(l.supersede("east: db/redis was written by 0.3.0, this process is 0.2.0"));
        assert!(!other_shard.supersede("again"), "said once");
        assert_eq!(l.term(), None);
        assert_eq!(other_shard.term(), None, "every shard of the process stops");
        assert_eq!(
            other_shard.superseded().as_deref(),
            Some("east: db/redis was written by 0.3.0, this process is 0.2.0")
        );
        l.lead_for_tests(5);
        assert_eq!(l.term(), None, "even a later acquisition does not lead");
        tokio::time::timeout(Duration::from_secs(600), other_shard.until_superseded()).await.unwrap();
    }

    #[tokio::test]
    async fn the_elector_waits_for_the_stamps_only_as_long_as_it_is_told() {
        let l = Leadership::new();
        assert!(l.stamps_known_within(Duration::ZERO).await, "nothing to wait for by default");
        l.set_stamps_known(false);
        assert!(!l.stamps_known_within(Duration::from_millis(1)).await);
        let waiting = {
            let l = l.clone();
            tokio::spawn(async move { l.stamps_known_within(Duration::from_secs(600)).await })
        };
        l.set_stamps_known(true);
        assert!(waiting.await.unwrap());
    }

    #[test]
    fn a_released_lease_is_taken_at_once_in_the_next_term() {
        let now = Instant::now();
        let r = record(None, 4, "9");
        assert_eq!(
            decide(Some(&r), &stranger(), now, now, LEASE),
            LeaseWrite::Acquire { term: 5, reason: AcquireReason::Vacant }
        );
    }

    #[test]
    fn another_holder_is_waited_for_until_its_record_stood_still_for_the_lease_duration() {
        let seen = Instant::now();
        let r = record(Some("other"), 3, "10");
        let almost = seen + LEASE - Duration::from_millis(1);
        assert_eq!(decide(Some(&r), &stranger(), seen, almost, LEASE), LeaseWrite::Wait { until: seen + LEASE });
        assert_eq!(
            decide(Some(&r), &stranger(), seen, seen + LEASE, LEASE),
            LeaseWrite::Acquire { term: 4, reason: AcquireReason::Expired }
        );
    }

    #[test]
    fn the_record_s_longer_lease_duration_is_honoured() {
        let seen = Instant::now();
        let mut r = record(Some("other"), 1, "10");
        r.duration = Some(Duration::from_secs(60));
        let later = seen + Duration::from_secs(30);
        assert_eq!(
            decide(Some(&r), &stranger(), seen, later, LEASE),
            LeaseWrite::Wait { until: seen + Duration::from_secs(60) }
        );
    }

    #[test]
    fn the_leader_renews_its_own_record_in_the_same_term() {
        let now = Instant::now();
        let me = Candidate { identity: "me", leading: Some(3), resumable: Some(3), highest_term: 3, floor: 0 };
        let r = record(Some("me"), 3, "11");
        assert_eq!(decide(Some(&r), &me, now, now, LEASE), LeaseWrite::Renew { term: 3 });
    }

    #[test]
    fn a_lapsed_leader_whose_record_is_untouched_takes_it_back_in_a_new_term() {
        let now = Instant::now();
        let me = Candidate { identity: "me", leading: None, resumable: Some(3), highest_term: 3, floor: 0 };
        let r = record(Some("me"), 3, "11");
        assert_eq!(
            decide(Some(&r), &me, now, now, LEASE),
            LeaseWrite::Acquire { term: 4, reason: AcquireReason::Resume }
        );
    }

    #[test]
    fn a_record_naming_this_identity_from_another_incarnation_is_waited_for() {
        // A restarted process (nothing resumable), or one that stepped down.
        let seen = Instant::now();
        let r = record(Some("me"), 3, "11");
        assert!(matches!(decide(Some(&r), &stranger(), seen, seen, LEASE), LeaseWrite::Wait { .. }));
        let me = Candidate { identity: "me", leading: None, resumable: Some(2), highest_term: 2, floor: 0 };
        assert!(matches!(decide(Some(&r), &me, seen, seen, LEASE), LeaseWrite::Wait { .. }));
    }

    #[test]
    fn a_leader_whose_record_changed_hands_does_not_renew() {
        let now = Instant::now();
        let me = Candidate { identity: "me", leading: Some(3), resumable: Some(3), highest_term: 3, floor: 0 };
        let r = record(Some("other"), 4, "12");
        assert!(matches!(decide(Some(&r), &me, now, now, LEASE), LeaseWrite::Wait { .. }));
    }

    #[test]
    fn lease_records_are_read_defensively() {
        let lease: Lease = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "l", "resourceVersion": "3"},
            "spec": {"holderIdentity": "", "leaseTransitions": -4, "leaseDurationSeconds": 0},
        }))
        .unwrap();
        assert_eq!(
            LeaseRecord::from_lease(&lease).unwrap(),
            LeaseRecord { holder: None, transitions: 0, duration: None, resource_version: "3".into() }
        );
        let no_rv: Lease = serde_json::from_value(serde_json::json!({"metadata": {"name": "l"}})).unwrap();
        assert!(LeaseRecord::from_lease(&no_rv).unwrap_err().contains("resourceVersion"));
    }

    #[test]
    fn settings_must_keep_the_leader_inside_its_lease() {
        let mut s = LeaseSettings::new("ns", "l", "me");
        assert_eq!(
            (s.lease_duration, s.renew_deadline, s.retry_period),
            (Duration::from_secs(15), Duration::from_secs(10), Duration::from_secs(2))
        );
        assert!(s.validate().is_ok());
        s.renew_deadline = Duration::from_secs(15);
        assert!(s.validate().unwrap_err().contains("lease_duration"));
        s.renew_deadline = Duration::from_secs(1);
        assert!(s.validate().unwrap_err().contains("retry_period"));
        let nameless = LeaseSettings::new("ns", "l", "");
        assert!(nameless.validate().unwrap_err().contains("identity"));
    }

    #[test]
    fn lease_duration_seconds_round_up() {
        let mut s = LeaseSettings::new("ns", "l", "me");
        s.lease_duration = Duration::from_millis(600);
        assert_eq!(s.duration_seconds(), 1);
        s.lease_duration = Duration::from_millis(1500);
        assert_eq!(s.duration_seconds(), 2);
        s.lease_duration = Duration::from_secs(15);
        assert_eq!(s.duration_seconds(), 15);
    }

    #[test]
    fn fixed_leadership_leads_until_it_steps_down() {
        let l = Leadership::fixed(5);
        let mut rx = l.subscribe();
        assert_eq!(l.term(), Some(5));
        assert_eq!(*rx.borrow_and_update(), Some(5));
        l.step_down("a member object carries term 6");
        assert_eq!(l.term(), None);
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), None);
        assert!(l.take_stepped_down(), "the elector learns of the step-down");
        assert!(!l.take_stepped_down(), "once");
    }

    #[tokio::test]
    async fn leadership_ends_at_its_deadline_even_without_an_elector() {
        let l = Leadership::new();
        assert_eq!(l.term(), None);
        let mut rx = l.subscribe();
        l.begin(2, Instant::now() + Duration::from_millis(50));
        assert_eq!(*rx.borrow_and_update(), Some(2));
        // The watchdog tells subscribers; no fixed sleep, just wait for the change.
        rx.changed().await.unwrap();
        assert_eq!(*rx.borrow(), None);
        assert_eq!(l.term(), None);
        assert!(!l.extend(2, Instant::now() + Duration::from_secs(10)), "a late renewal does not revive it");
        assert_eq!(l.term(), None);
    }

    #[test]
    fn term_is_none_as_soon_as_the_deadline_has_passed() {
        // No runtime: nothing but the check in term() can end it.
        let l = Leadership::new();
        {
            let mut st = l.inner.state.lock();
            st.leading = Some((3, Some(Instant::now())));
        }
        assert_eq!(l.term(), None);
        assert_eq!(*l.subscribe().borrow(), None);
    }
}
