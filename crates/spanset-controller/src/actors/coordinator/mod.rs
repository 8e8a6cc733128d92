//! Coordinator: one actor per FederatedStatefulSet. It keeps the spec and the latest report of
//! every member, asks [`reconcile::decide`] what to do, and carries the decision out in order:
//! finalizer, supporting objects, dry runs of a new template, moves recorded in the status,
//! member writes, status. One reconcile runs at a time; whatever arrives meanwhile triggers
//! another when it ends.

mod access;
pub mod carry;
mod deletion;
mod failures;
mod fence_clock;
mod follow_ups;
pub mod ownership;
mod pod_leases;
mod publish;
pub mod round_error;
mod silence;
mod wakes;

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use actix::prelude::*;
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use spanset_api::FederatedStatefulSet;
use spanset_api::labels::{FIELD_MANAGER, FINALIZER, LAST_DRILL};
use spanset_plan::Backend;

use crate::{
    actors::{
        messages::{
            AdoptClaims, Carried, DeletePods, EnsureSupporting, Holds, MemberObserved, MemberQuiet, ReleaseClaims,
            ReleasePod, RetireClaims, SpecChanged, SpecUndecodable, Stop, Subscribe, Subscriber, Unsubscribe,
            WriteBudget, WriteError, WriteStatefulSet,
        },
        watcher::{ClusterWatcher, MemberHandle, MembersChanged},
    },
    decisions::{
        effects::{self, Stage},
        reconcile::{self, AccessBlock, Decision, Inputs, MemberInput, Refusal, StsWrite},
        safety::Rules,
    },
    host::{
        events::{Note, Recorder},
        fencing,
    },
    leadership::{leader::Leadership, written_by},
    member::{
        cache::rv_of,
        contact_clock::ContactClock,
        objects::{self, FederationKey, headless_service, namespace, ownership_labels, template_hash},
        storage,
    },
    telemetry::{metrics::Metrics, spans},
};
use follow_ups::{Kept, RoundOutcome, ensured_digest};
use round_error::{MemberFailure, MemberPart, RoundError};

/// How often a federation is planned when nothing at all happened: a safety net for a missed
/// wake-up, not how the controller keeps up (it plans on every relevant change and on its own
/// timers). Spread per federation (by a hash of its key), so a thousand federations cost a
/// few no-op reconciles a second.
pub const SAFETY_RESYNC: Duration = Duration::from_secs(300);

/// Where in [`SAFETY_RESYNC`] a federation's first resync falls, from its key: federations
/// started together do not resync together.
fn resync_offset(key: &FederationKey) -> Duration {
    let h = crate::leadership::shard_hash::fnv1a(key.to_string().bytes());
    Duration::from_millis(h % SAFETY_RESYNC.as_millis() as u64)
}

/// The coordinator of one federation.
pub struct Coordinator {
    key: FederationKey,
    fsts: Arc<FederatedStatefulSet>,
    host: Client,
    leadership: Leadership,
    metrics: Arc<Metrics>,
    members: Arc<BTreeMap<String, MemberHandle>>,
    members_listed: bool,
    views: BTreeMap<String, Arc<crate::actors::messages::MemberView>>,
    /// When this process saw each member's fence (a member heard from since then keeps
    /// counting).
    fence_clock: crate::actors::coordinator::fence_clock::FenceClock,
    subscribed: BTreeMap<String, Addr<ClusterWatcher>>,
    /// Where the watchers' words reach this coordinator, shared by all its subscriptions.
    subscriber: Option<Arc<Subscriber>>,
    /// Bounds on the federation's replicas.
    bounds: crate::decisions::bounds::ReplicaBounds,
    /// The latest version of the federation, when it cannot be decoded: nothing is written in
    /// any member until one that decodes arrives (`fsts` stays the last one read).
    undecodable: Option<Arc<spanset_api::decode::Undecodable>>,
    /// When a reconcile is scheduled for the next silence threshold, if one is.
    deadline_at: Option<Instant>,
    /// The `now` the last reconcile planned with: a silence threshold crossed after it is news.
    planned_at: Option<Instant>,
    /// The wake-ups asked for (a decision's, a report wait's end, a refusal's recheck).
    wakes: wakes::Wakes,
    /// Ordinals the last reconcile saw running in two members.
    conflicting: std::collections::BTreeSet<u32>,
    /// Counted in `workqueue_depth`.
    queued: bool,
    /// Whether this federation's Event said that a newer controller version supersedes this
    /// process (said once per process, not at every reconcile asked for).
    said_superseded: bool,
    busy: bool,
    again: bool,
    recorder: Arc<tokio::sync::Mutex<crate::host::events::Recorder>>,
    /// The federation's pod leases (`spec.failover.podLease`) as this leader keeps them.
    pod_leases: Option<pod_leases::PodLeases>,
    /// What the rounds' outcomes change (see [`follow_ups`]).
    kept: Kept,
}

/// How long a coordinator waits for a watcher to report its own write before planning anyway.
pub const AWAIT_REPORT: Duration = Duration::from_secs(5);

impl Coordinator {
    /// Whether some member's report is older than this coordinator's last write there.
    fn report_pending(&mut self) -> bool {
        let views = &self.views;
        self.kept.awaiting.retain(|cluster, (rv, since)| {
            since.elapsed() < AWAIT_REPORT && views.get(cluster).is_none_or(|v| v.rv < *rv)
        });
        !self.kept.awaiting.is_empty()
    }
}

impl Coordinator {
    /// A coordinator for `fsts`.
    pub fn new(
        fsts: Arc<FederatedStatefulSet>,
        host: Client,
        leadership: Leadership,
        metrics: Arc<Metrics>,
        members: MembersChanged,
        bounds: crate::decisions::bounds::ReplicaBounds,
    ) -> Self {
        let recorder =
            Arc::new(tokio::sync::Mutex::new(crate::host::events::Recorder::new(host.clone(), "spanset".into())));
        let mut fence_clock = crate::actors::coordinator::fence_clock::FenceClock::default();
        fence_clock.note(&members.members, Instant::now());
        Self {
            fence_clock,
            key: FederationKey::of(&fsts),
            fsts,
            host,
            leadership,
            metrics,
            members: members.members,
            members_listed: members.listed,
            views: BTreeMap::new(),
            subscribed: BTreeMap::new(),
            subscriber: None,
            bounds,
            undecodable: None,
            deadline_at: None,
            planned_at: None,
            wakes: wakes::Wakes::default(),
            conflicting: Default::default(),
            queued: false,
            said_superseded: false,
            busy: false,
            again: false,
            recorder,
            pod_leases: None,
            kept: Kept::default(),
        }
    }

    /// Subscribes to every member's current watcher (again when a member's watcher was
    /// replaced, e.g. after its connection changed), and forgets members that are gone.
    fn subscribe_all(&mut self, ctx: &mut Context<Self>) {
        let me = self
            .subscriber
            .get_or_insert_with(|| {
                let me = ctx.address();
                Arc::new(Subscriber { reports: me.clone().recipient(), quiet: me.recipient() })
            })
            .clone();
        for (name, m) in self.members.iter() {
            if let Ok(w) = &m.watcher
                && self.subscribed.get(name) != Some(w)
            {
                w.do_send(Subscribe { key: self.key.clone(), subscriber: me.clone() });
                self.subscribed.insert(name.clone(), w.clone());
            }
        }
        let members = &self.members;
        self.subscribed.retain(|n, w| members.get(n).is_some_and(|m| m.watcher.as_ref().ok() == Some(w)));
        self.views.retain(|n, _| members.contains_key(n));
    }

    fn inputs(&self) -> BTreeMap<String, MemberInput> {
        self.members
            .iter()
            .map(|(name, m)| {
                (
                    name.clone(),
                    MemberInput {
                        exists: true,
                        unusable: m.watcher.as_ref().err().filter(|_| !m.connecting && m.duplicate.is_none()).cloned(),
                        fenced: m.member.spec.fenced,
                        answered_since_fence: self.fence_clock.answered_since(
                            name,
                            m.contact.freshest(self.views.get(name).and_then(|v| v.last_contact)),
                        ),
                        // A duplicate's view (one reported before it was refused) is another
                        // member's pods: never used.
                        view: self
                            .views
                            .get(name)
                            .map(|v| with_contact(v, &m.contact))
                            .filter(|_| m.duplicate.is_none()),
                        duplicate: m.duplicate.clone(),
                    },
                )
            })
            .collect()
    }

    fn watcher(&self, cluster: &str) -> Option<Addr<ClusterWatcher>> {
        self.members.get(cluster).and_then(|m| m.watcher.as_ref().ok().cloned())
    }

    /// Whether this federation counts in `workqueue_depth`: a reconcile is wanted, not running.
    fn set_queued(&mut self, queued: bool) {
        if self.queued != queued {
            self.queued = queued;
            self.metrics.queued(queued);
        }
    }

    /// Asks for a reconcile; runs it now unless one is running.
    fn schedule(&mut self, ctx: &mut Context<Self>) {
        if self.busy {
            self.again = true;
            self.set_queued(true);
            return;
        }
        // A federation whose token a newer controller version raised is that version's: this
        // process stops leading for good rather than raise it back (see `written_by`). Judged
        // leading or not, so that a standby replica says why it will never lead.
        if let Some(newer) = written_by::newer_than_this(self.fsts.annotations()) {
            self.superseded_by(&newer);
            return self.set_queued(false);
        }
        // Superseded by what a watcher saw in a member: said on this federation too.
        if let Some(reason) = self.leadership.superseded() {
            self.say_superseded(reason);
            return self.set_queued(false);
        }
        let Some(term) = self.leadership.term() else { return self.set_queued(false) };
        if !self.members_listed {
            // A placement naming a member not listed yet is not "unknown": wait for the list.
            return self.set_queued(false);
        }
        // Nothing is written in a term before the federation's token is raised to it.
        match ownership::standing(&self.fsts, term, &self.leadership.owner()) {
            ownership::TokenStanding::Owned => {}
            ownership::TokenStanding::Raise => return self.raise_token(term, ctx),
            ownership::TokenStanding::Superseded { token, owner } => {
                self.leadership.observe_stamp(token);
                self.leadership.step_down(&format!(
                    "{}: the federation's owner token is {token} ({owner}), at or above this process's term {term}",
                    self.key
                ));
                return self.set_queued(false);
            }
        }
        if self.report_pending() {
            // The watcher's report of the last write triggers the next reconcile, or the wait
            // ends after `AWAIT_REPORT`.
            if let Some(first) = self.kept.awaiting.values().map(|(_, since)| *since).min() {
                let left = AWAIT_REPORT.saturating_sub(first.elapsed()) + Duration::from_millis(5);
                self.wake_after(left, ctx);
            }
            return self.set_queued(true);
        }
        self.set_queued(false);
        self.busy = true;
        self.again = false;
        self.refresh_contacts();
        let started = Instant::now();
        let span = spans::reconcile(&self.key, term);
        let fut = tracing::Instrument::instrument(span.in_scope(|| self.reconcile(term)), span);
        ctx.spawn(fut.into_actor(self).map(move |outcome, act, ctx| {
            act.busy = false;
            let next = follow_ups::after_round(&mut act.fsts, &mut act.kept, outcome, term, Instant::now());
            act.follow_up(next, started.elapsed(), ctx);
        }));
    }

    /// Carries out what [`follow_ups::after_round`] decided: the log, the metrics, the Events,
    /// the wake-ups and the next round.
    fn follow_up(&mut self, next: follow_ups::FollowUps, took: Duration, ctx: &mut Context<Self>) {
        for said in &next.said {
            said.log(&self.key);
        }
        let federation = self.key.to_string();
        for member in &next.failovers {
            self.metrics.failover(member);
        }
        for (_, seconds) in &next.handoffs {
            self.metrics.move_handoff(*seconds);
        }
        for (_, seconds) in &next.finished {
            self.metrics.move_finished(&federation, *seconds);
        }
        if !next.notes.is_empty() {
            let recorder = self.recorder.clone();
            let fsts = self.fsts.clone();
            actix::spawn(async move {
                let mut r = recorder.lock().await;
                for n in &next.notes {
                    r.record(&fsts, n).await;
                }
            });
        }
        self.metrics.reconciled(&federation, next.failed, took.as_secs_f64());
        self.again |= next.again;
        if self.again {
            ctx.run_later(next.pause, |act, ctx| act.schedule(ctx));
        }
        self.check_silence(ctx);
        self.extend_pod_leases(ctx);
        for after in next.wakes {
            self.wake_after(after, ctx);
        }
    }

    /// The federation's owner token was raised by a newer controller version: stop leading in
    /// every shard, and say so (a warning once per process; an Event on the federation, whose
    /// repeats the recorder folds; a metric).
    fn superseded_by(&mut self, newer: &written_by::Newer) {
        let message = format!(
            "FederatedStatefulSet {} was written by spanset {}, newer than this process's {}: this process stops leading \
             and writes nothing more (roll the controller forward, or see the upgrade page to roll back)",
            self.key, newer.theirs, newer.mine
        );
        if self.leadership.supersede(&message) {
            tracing::warn!(federation = %self.key, theirs = %newer.theirs, mine = %newer.mine,
                "an object written by a newer controller version: stepping down for good, writing nothing");
        }
        self.metrics.superseded(&newer.theirs);
        self.say_superseded(message);
    }

    /// Records the `NewerControllerVersion` Event on this federation, once per process.
    fn say_superseded(&mut self, message: String) {
        if std::mem::replace(&mut self.said_superseded, true) {
            return;
        }
        let (recorder, fsts) = (self.recorder.clone(), self.fsts.clone());
        actix::spawn(async move {
            recorder.lock().await.record(&fsts, &Note::warning("NewerControllerVersion", message)).await;
        });
    }

    /// Raises the federation's token to `term` before anything is written in it (see
    /// [`ownership`]); plans once it is raised. A conflict waits for the newer federation
    /// (its watch event plans again), with a wake-up in case that event was already handled.
    fn raise_token(&mut self, term: u64, ctx: &mut Context<Self>) {
        self.busy = true;
        self.again = false;
        let (host, fsts, owner) = (self.host.clone(), self.fsts.clone(), self.leadership.owner());
        let work = async move { ownership::raise(&host, &fsts, term, &owner).await };
        ctx.spawn(work.into_actor(self).map(move |raised, act, ctx| {
            act.busy = false;
            match raised {
                ownership::Raised::Stored(stored) => {
                    tracing::info!(federation = %act.key, term, owner = %act.leadership.owner(), "raised the federation's owner token");
                    if newer(&stored, &act.fsts) {
                        act.fsts = Arc::new(*stored);
                    }
                    act.schedule(ctx);
                }
                ownership::Raised::Conflict => {
                    tracing::debug!(federation = %act.key, term, "the federation changed before its token was raised; reading it again");
                    act.wake_after(Duration::from_secs(1), ctx);
                    if act.again {
                        act.schedule(ctx);
                    }
                }
                ownership::Raised::Failed(e) => {
                    tracing::warn!(federation = %act.key, term, error = %e, "cannot raise the federation's owner token; retrying");
                    act.wake_after(Duration::from_secs(2), ctx);
                }
            }
        }));
    }

    /// Plans again after `after`, whatever else is asked (see [`wakes::Wakes`]): a pod becomes
    /// available once Ready for `minReadySeconds`, which no watch event announces.
    fn wake_after(&mut self, after: Duration, ctx: &mut Context<Self>) {
        if let Some(at) = self.wakes.ask(Instant::now() + after) {
            self.arm_wake(at, ctx);
        }
    }

    /// Arms the timer of the wake-up at `at` (see [`wakes::Wakes`]).
    fn arm_wake(&mut self, at: Instant, ctx: &mut Context<Self>) {
        ctx.run_later(at.saturating_duration_since(Instant::now()), move |act, ctx| {
            let (due, next) = act.wakes.fired(at, Instant::now());
            if let Some(next) = next {
                act.arm_wake(next, ctx);
            }
            if due {
                act.schedule(ctx);
            }
        });
    }

    /// Exposes the figures of the federation's last drill, which `spanset drill` stores in the
    /// annotation `spanset.dev/last-drill`.
    fn expose_last_drill(&self) {
        let Some(text) = self.fsts.annotations().get(LAST_DRILL) else { return };
        let Ok(report) = serde_json::from_str::<serde_json::Value>(text) else { return };
        let drill = report["drill"].as_str().unwrap_or_default();
        let stages: Vec<(&str, f64)> = report["stages"]
            .as_object()
            .map(|m| m.iter().filter_map(|(k, v)| v.as_f64().map(|f| (k.as_str(), f))).collect())
            .unwrap_or_default();
        self.metrics.drill(&self.key.to_string(), drill, &stages);
    }

    /// Brings each member's view up to its last answer (probes note it on the member's
    /// contact clock without reporting).
    fn refresh_contacts(&mut self) {
        // Both maps are sorted by member name: walked side by side, not looked up (this runs at
        // every silence deadline of every coordinator, a hundred views each at 100 members).
        let mut members = self.members.iter().peekable();
        for (name, view) in self.views.iter_mut() {
            while members.next_if(|(m, _)| m.as_str() < name.as_str()).is_some() {}
            if let Some((_, m)) = members.next_if(|(m, _)| *m == name) {
                let fresh = m.contact.freshest(view.last_contact);
                if fresh != view.last_contact {
                    Arc::make_mut(view).last_contact = fresh;
                }
            }
        }
    }

    /// The instants at which a quiet member's silence crosses a threshold (Unreachable, or the
    /// automatic fence), as of the views' last answers (see [`Self::refresh_contacts`] and
    /// [`silence`]).
    fn silence_thresholds(&self, now: Instant) -> Vec<Instant> {
        let deadlines = reconcile::silence_deadlines(&self.fsts);
        // Silence counts for the automatic fence only from this process's leadership.
        let leading = self.leadership.leading_since().unwrap_or(now);
        let since = self.views.values().filter_map(|v| v.last_contact.or(v.watching_since));
        silence::thresholds(since, &deadlines, leading, now)
    }

    /// Looks at the quiet members' silence (after each plan, when a watcher tells that its
    /// member turned quiet, and at the timer this sets): plans now if a threshold was crossed
    /// since the last plan, rather than at the watcher's next report (which a silent member
    /// never causes); otherwise sets the timer for the next threshold. A member that answered
    /// meanwhile moved its threshold, and one that keeps answering sets none, so that an idle
    /// federation is neither planned nor woken once per threshold.
    fn check_silence(&mut self, ctx: &mut Context<Self>) {
        self.refresh_contacts();
        let now = Instant::now();
        let thresholds = self.silence_thresholds(now);
        let planned = self.planned_at;
        if thresholds.iter().any(|t| *t <= now && planned.is_none_or(|p| *t > p)) {
            return self.schedule(ctx);
        }
        let next = thresholds.into_iter().filter(|t| *t > now).min();
        if let Some(at) = next
            && self.deadline_at.is_none_or(|scheduled| scheduled <= now || at < scheduled)
        {
            self.deadline_at = Some(at);
            ctx.run_later(at - now, |act, ctx| {
                act.deadline_at = None;
                act.metrics.silence_check();
                act.check_silence(ctx);
            });
        }
    }

    /// One reconcile; answers the FederatedStatefulSet as last stored by it, if it wrote one.
    fn reconcile(&mut self, term: u64) -> impl Future<Output = RoundOutcome> + 'static {
        let frozen = self.undecodable.clone();
        let fsts = self.fsts.clone();
        let mut members = self.inputs();
        self.apply_pod_leases(term, &mut members, Instant::now());
        let hash = template_hash(&fsts);
        let refusal = self
            .kept
            .template_refusal
            .as_ref()
            .filter(|(h, _, at)| *h == hash && at.elapsed() < REFUSAL_RECHECK)
            .map(|(_, r, _)| r.clone());
        let now = Instant::now();
        self.planned_at = Some(now);
        let decision = reconcile::decide(&Inputs {
            fsts: &fsts,
            members: &members,
            term,
            template_refusal: refusal,
            bounds: self.bounds,
            access_refusal: self.kept.access.for_round(now).map(|r| AccessBlock {
                reason: r.refusal.reason,
                message: r.refusal.message,
                blocks: r.blocks,
            }),
            handover_refusals: self.kept.handover_refusals.clone(),
            rules: Rules::ALL,
            now,
            leading_since: self.leadership.leading_since().unwrap_or(now),
            // Whole seconds, truncated, like the times it is written beside (availability is
            // judged on the monotonic `now`, never on this).
            wall: {
                let now = jiff::Timestamp::now();
                let whole = jiff::TimestampRound::new().smallest(jiff::Unit::Second).mode(jiff::RoundMode::Trunc);
                now.round(whole).unwrap_or(now)
            },
        });
        tracing::debug!(
            federation = %self.key, writes = decision.writes.len(), blocked = decision.blocked, done = decision.done,
            fence = ?decision.fence.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), "decided"
        );
        for k in &decision.released {
            self.kept.released_at.entry(*k).or_insert(now);
        }
        self.kept.released_at.retain(|k, _| decision.status.moves.iter().any(|m| m.ordinal as i64 == i64::from(*k)));
        let name = self.key.to_string();
        // Counted once per occurrence (an ordinal newly seen running twice), not per reconcile.
        for c in newly_conflicting(&self.conflicting, &decision.conflicts) {
            tracing::error!(
                federation = %name, ordinal = c.ordinal, members = %c.members.join(","),
                "identity conflict: one ordinal runs in two members"
            );
            self.metrics.identity_conflict(&name);
        }
        self.conflicting = decision.conflicts.iter().map(|c| c.ordinal).collect();
        self.metrics.identity_conflict_now(&name, !decision.conflicts.is_empty());
        let slices: Vec<(String, i64, i64, i64)> = decision
            .status
            .slices
            .iter()
            .map(|s| (s.cluster.clone(), i64::from(s.start), i64::from(s.replicas), i64::from(s.ready_replicas)))
            .collect();
        self.metrics.federation_state(&name, &slices, decision.status.moves.iter().map(|m| m.phase.as_str()));
        let watchers: BTreeMap<String, Addr<ClusterWatcher>> =
            self.members.keys().filter_map(|n| self.watcher(n).map(|w| (n.clone(), w))).collect();
        // A supporting object found missing in a member makes it due again at once.
        let lost: BTreeMap<String, u64> = self.views.iter().map(|(c, v)| (c.clone(), v.supporting_lost)).collect();
        let ensure_due: Vec<String> = self
            .views
            .keys()
            .filter(|c| decision.writable.contains(*c) && decision.starting.is_empty())
            .filter(|c| {
                !self.kept.ensured.contains(&(
                    (*c).clone(),
                    term,
                    hash.clone(),
                    ensured_digest(&self.kept.supporting_digest, lost.get(*c)),
                ))
            })
            .cloned()
            .collect();
        let host = self.host.clone();
        let key = self.key.clone();
        let wake_after = decision.wake_after;
        let deleting = fsts.metadata.deletion_timestamp.is_some().then(|| {
            (deletion::states(&fsts, &members, now, reconcile::unreachable_after(&fsts)), self.kept.cleaned.clone())
        });
        async move {
            if let Some((states, cleaned)) = deleting {
                let mut out = RoundOutcome::default();
                let round = deletion::DeletionRound {
                    host: &host,
                    decision: &decision,
                    watchers: &watchers,
                    members: &states,
                    cleaned: &cleaned,
                    term,
                };
                if let Err(e) = deletion::carry_out(&fsts, round, &mut out).await {
                    out.error = Some(RoundError::Deletion(e));
                    out.again = true;
                }
                return out;
            }
            if let Some(u) = frozen {
                // Only the report: nothing is written in any member for an object that cannot
                // be read.
                let error =
                    crate::host::undecodable::report(&host, &u).await.err().map(|e| RoundError::Status(e.to_string()));
                return RoundOutcome { error, ..RoundOutcome::default() };
            }
            let mut out = RoundOutcome { wake_after, lost, ..RoundOutcome::default() };
            if let Err(e) = carry_out(&host, &fsts, &decision, &watchers, &ensure_due, &key, term, &mut out).await {
                out.error = Some(e);
                out.again = true;
            }
            out
        }
    }
}

/// The conflicts not already seen in the previous reconcile: each occurrence is counted once.
fn newly_conflicting<'a>(
    before: &std::collections::BTreeSet<u32>,
    now: &'a [reconcile::Conflict],
) -> impl Iterator<Item = &'a reconcile::Conflict> {
    now.iter().filter(move |c| !before.contains(&c.ordinal))
}

/// Carries a decision out, stage by stage in [`effects::stages`] order; records what it did in
/// `out`.
#[allow(clippy::too_many_arguments)]
async fn carry_out(
    host: &Client,
    fsts: &FederatedStatefulSet,
    decision: &Decision,
    watchers: &BTreeMap<String, Addr<ClusterWatcher>>,
    ensure_due: &[String],
    key: &FederationKey,
    term: u64,
    out: &mut RoundOutcome,
) -> Result<(), RoundError> {
    let mut round = Round {
        host,
        fsts: fsts.clone(),
        decision,
        watchers,
        key,
        term,
        kind: objects::backend(fsts),
        skipped: BTreeMap::new(),
    };
    let mut timing = StageTiming::new(key);
    for stage in effects::stages(decision, &Rules::ALL) {
        timing.begin(stage);
        match stage {
            Stage::Fence => return round.fence(out).await,
            Stage::Finalizer => {
                if !round.fsts.finalizers().iter().any(|f| f == FINALIZER) {
                    round.fsts = add_finalizer(host, &round.fsts).await?;
                    out.stored = Some(round.fsts.clone());
                }
            }
            Stage::Supporting => {
                if !round.supporting(ensure_due, out).await? {
                    return Ok(());
                }
            }
            Stage::StoreStatus => round.store_status(out).await?,
            Stage::Handovers => round.handovers(out).await,
            Stage::MemberWrites => round.member_writes(out).await?,
            Stage::PodDeletes => round.pod_deletes(out).await?,
            Stage::Budgets => write_budgets(decision, watchers, key, term, out).await,
            Stage::Slices => publish::write_slices(decision, watchers, key, term, out).await,
        }
    }
    if !decision.writes.is_empty() {
        crash_points("written", decision);
    }
    Ok(())
}

/// How long each stage of one round took, logged at debug level when the round ends (however
/// it ends): where a slow round spends its time.
struct StageTiming<'a> {
    key: &'a FederationKey,
    /// Debug logging is on for this module: otherwise nothing is timed (a round is a hot path).
    enabled: bool,
    /// The stage running and when it began.
    current: Option<(Stage, Instant)>,
    /// The stages done, with their milliseconds.
    took: Vec<(Stage, u128)>,
}

impl<'a> StageTiming<'a> {
    fn new(key: &'a FederationKey) -> Self {
        StageTiming { key, enabled: tracing::enabled!(tracing::Level::DEBUG), current: None, took: Vec::new() }
    }

    /// Ends the stage running, if any, and starts `stage`.
    fn begin(&mut self, stage: Stage) {
        if !self.enabled {
            return;
        }
        self.end();
        self.current = Some((stage, Instant::now()));
    }

    fn end(&mut self) {
        if let Some((stage, began)) = self.current.take() {
            self.took.push((stage, began.elapsed().as_millis()));
        }
    }
}

impl Drop for StageTiming<'_> {
    fn drop(&mut self) {
        self.end();
        if !self.took.is_empty() {
            tracing::debug!(federation = %self.key, stages_ms = ?self.took, "carried out");
        }
    }
}

/// One decision being carried out: what its stages share.
struct Round<'a> {
    host: &'a Client,
    /// The federation as last stored in this round.
    fsts: FederatedStatefulSet,
    decision: &'a Decision,
    watchers: &'a BTreeMap<String, Addr<ClusterWatcher>>,
    key: &'a FederationKey,
    term: u64,
    kind: Backend,
    /// Members that get no write this round (their dry run or ensure failed), with why.
    skipped: BTreeMap<String, MemberFailure>,
}

impl Round<'_> {
    /// The automatic policy's fences: what follows is planned on them, in the next reconcile.
    async fn fence(&self, out: &mut RoundOutcome) -> Result<(), RoundError> {
        let by = format!("spanset automatic failover ({})", self.key);
        let mut events = Recorder::new(self.host.clone(), by.clone());
        for (member, why) in &self.decision.fence {
            tracing::warn!(
                federation = %self.key, cluster = %member, reason = %why,
                "fencing an unreachable member automatically: a partitioned member may still run its pods, \
                 and their ordinals now start elsewhere"
            );
            fencing::fence(self.host, member, why, &by, true, &mut events)
                .await
                .map_err(|e| RoundError::Fence { member: member.clone(), message: e.to_string() })?;
            out.fenced.push(member.clone());
        }
        // The supervisor reports the fenced MemberClusters, which plans again.
        Ok(())
    }

    /// Stores the decision's status if it changed.
    async fn store_status(&mut self, out: &mut RoundOutcome) -> Result<(), RoundError> {
        if let Some(stored) = write_status(self.host, &self.fsts, self.decision).await? {
            self.fsts = stored.clone();
            out.stored = Some(stored);
            out.finished = self.decision.finished_moves.clone();
            out.notes = self.decision.notes.clone();
            if !self.decision.blocked {
                crash_points("persisted", self.decision);
            }
        }
        Ok(())
    }

    /// Namespace, Service and carried objects where they may be missing; every member at once,
    /// so that one that does not answer delays the others by one request deadline at most.
    /// Nothing is written in any member before every member accepted, as a dry run, all that
    /// this round writes there because something changed: the supporting objects, and the
    /// StatefulSet of a new template. A member that does not answer gets no write this round; a
    /// member that refuses holds every write everywhere (answers false: the round ends). Only a
    /// change is checked: an idle round asks nothing.
    async fn supporting(&mut self, ensure_due: &[String], out: &mut RoundOutcome) -> Result<bool, RoundError> {
        let fsts = &self.fsts;
        let carried = match carry::carried(self.host, fsts).await {
            Ok(carried) => carried,
            Err(carry::Unavailable::Refused(r)) => {
                out.refusal = Some((template_hash(fsts), r));
                return Ok(false);
            }
            Err(carry::Unavailable::Failed(e)) => return Err(RoundError::Carried(e)),
        };
        // The network mode decides the ServiceExport: a new mode makes every member due again.
        out.supporting_digest =
            Some(format!("{}/{:?}", digest_of(&carried), spanset_api::Network::mode(fsts.spec.network.as_ref())));
        out.ensured_for = Some(template_hash(fsts));
        let term = self.term;
        let supporting = |dry_run| EnsureSupporting {
            namespace: namespace(fsts),
            service: headless_service(fsts),
            carried: carried.clone(),
            export: crate::decisions::network::service_export(fsts, term),
            guard_access: crate::member::guard_access::guarded(fsts),
            key: self.key.clone(),
            term,
            dry_run,
        };
        let due: std::collections::BTreeSet<&String> =
            ensure_due.iter().chain(self.decision.supporting.iter()).collect();
        let checks = check_members(&due, self.decision, self.watchers, self.key, self.kind, term, &supporting).await;
        let mut to_ensure = Vec::new();
        for (cluster, what, res) in checks {
            match res {
                Ok(Ok(writes)) => {
                    if what == Checked::Supporting {
                        if writes {
                            to_ensure.push(cluster);
                        } else {
                            out.ensured.push(cluster);
                        }
                    }
                }
                Ok(Err(e)) if refuses_access(&e) => {
                    note_access_refusal(out, &e);
                    let failures = vec![MemberFailure::new(cluster, format!("{what}: {e}"))];
                    return Err(RoundError::Members { part: MemberPart::Supporting, failures });
                }
                Ok(Err(WriteError::Refused { cluster, code, message })) => {
                    out.refusal = Some((template_hash(fsts), refusal(what, &cluster, code, &message)));
                    return Ok(false);
                }
                Ok(Err(e @ WriteError::NotLeader(_))) => {
                    return Err(RoundError::NotLeader(MemberFailure::new(cluster, format!("{what}: {e}"))));
                }
                Ok(Err(e)) => {
                    self.skipped.insert(cluster.clone(), MemberFailure::new(cluster, format!("{what}: {e}")));
                }
                Err(e) => {
                    self.skipped
                        .insert(cluster.clone(), MemberFailure::new(cluster, format!("{what}: {}", call_failed(e))));
                }
            }
        }
        let ensures = to_ensure.into_iter().filter(|c| !self.skipped.contains_key(c)).filter_map(|c| {
            let w = self.watchers.get(&c)?.clone();
            let msg = supporting(false);
            Some(async move {
                let res = w.send(msg).timeout(MEMBER_CALL_TIMEOUT).await;
                (c, res)
            })
        });
        for (c, res) in futures::future::join_all(ensures).await {
            match res {
                Ok(Ok(_)) => out.ensured.push(c),
                Ok(Err(e @ WriteError::NotLeader(_))) => {
                    return Err(RoundError::NotLeader(MemberFailure::new(c, format!("supporting objects: {e}"))));
                }
                Ok(Err(e)) => {
                    note_access_refusal(out, &e);
                    self.skipped.insert(c.clone(), MemberFailure::new(c, format!("supporting objects: {e}")));
                }
                Err(e) => {
                    self.skipped
                        .insert(c.clone(), MemberFailure::new(c, format!("supporting objects: {}", call_failed(e))));
                }
            }
        }
        Ok(true)
    }

    /// A storage step that fails (its member stopped answering) holds only its own ordinal,
    /// whose grow is not among this round's writes: the others go ahead.
    async fn handovers(&self, out: &mut RoundOutcome) {
        let mut stuck = Vec::new();
        for h in &self.decision.handovers {
            if let Err(e) = handover(h, &self.fsts, self.watchers, self.term, out).await {
                tracing::warn!(federation = %self.key, ordinal = h.ordinal, error = %e, "storage step failed; its move waits");
                stuck.push(e);
            }
        }
        if let Err(e) = RoundError::of_members(MemberPart::Storage, stuck) {
            // Tried again after the pause that follows a failure.
            out.again = true;
            out.error = Some(e);
        }
    }

    /// The member StatefulSet writes and the pod releases, all sent at once; a member skipped
    /// this round gets no write. Any failure ends the round with an error.
    async fn member_writes(&mut self, out: &mut RoundOutcome) -> Result<(), RoundError> {
        let decision = self.decision;
        if !decision.writes.is_empty() {
            hold_points(decision).await;
        }
        let sends = decision.writes.iter().filter(|w| !self.skipped.contains_key(&w.cluster)).filter_map(|w| {
            let watcher = self.watchers.get(&w.cluster)?.clone();
            let msg = write_message(w, self.key, self.kind, self.term, false);
            Some(async move {
                let res = watcher.send(msg).timeout(MEMBER_CALL_TIMEOUT).await;
                (w.cluster.clone(), res, Instant::now())
            })
        });
        let releases = decision.releases.iter().filter_map(|r| {
            let watcher = self.watchers.get(&r.cluster)?.clone();
            let msg = ReleasePod {
                key: self.key.clone(),
                ordinal: r.ordinal,
                uid: r.uid.clone(),
                rv: r.rv,
                remaining: r.remaining.clone(),
                term: self.term,
            };
            Some(async move { (r, watcher.send(msg).await) })
        });
        let (results, released) =
            futures::future::join(futures::future::join_all(sends), futures::future::join_all(releases)).await;
        let skipped: Vec<MemberFailure> = std::mem::take(&mut self.skipped).into_values().collect();
        let mut failed = Vec::new();
        for (r, res) in released {
            match res {
                Ok(Ok(())) => {}
                // The pod changed or went since it was judged: its watch event plans again.
                Ok(Err(WriteError::Conflict | WriteError::Refused { code: 404, .. })) => {}
                Ok(Err(e)) => {
                    note_access_refusal(out, &e);
                    failed.push(MemberFailure::new(&r.cluster, format!("releasing pod of ordinal {}: {e}", r.ordinal)));
                }
                Err(e) => failed.push(MemberFailure::new(&r.cluster, format!("watcher gone: {e}"))),
            }
        }
        for (cluster, res, at) in results {
            match res {
                Ok(Ok(record)) => {
                    out.written.push((cluster.clone(), record.rv));
                    let to = |k: &u32| decision.status.moves.iter().find(|m| m.ordinal as i64 == i64::from(*k));
                    let grown = decision.grows.iter().filter(|k| to(k).is_some_and(|m| m.to == cluster));
                    out.grown.extend(grown.map(|k| (*k, at)));
                }
                Ok(Err(e)) => {
                    note_access_refusal(out, &e);
                    failed.push(MemberFailure::new(cluster, e));
                }
                Err(e) => failed.push(MemberFailure::new(cluster, call_failed(e))),
            }
        }
        // A member skipped for its supporting objects failed there, unless a write failed too.
        if failed.is_empty() {
            return RoundError::of_members(MemberPart::Supporting, skipped);
        }
        RoundError::of_members(MemberPart::Writes, skipped.into_iter().chain(failed).collect())
    }

    /// Deletes, by uid, the pods left in fenced members that answer again.
    async fn pod_deletes(&self, out: &mut RoundOutcome) -> Result<(), RoundError> {
        let mut by_cluster: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
        for d in &self.decision.pod_deletes {
            by_cluster.entry(d.cluster.as_str()).or_default().push((d.name.clone(), d.uid.clone()));
        }
        for (cluster, pods) in by_cluster {
            let Some(w) = self.watchers.get(cluster) else { continue };
            let msg =
                DeletePods { namespace: self.key.namespace.clone(), pods, key: self.key.clone(), term: self.term };
            match w.send(msg).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    note_access_refusal(out, &e);
                    let failure =
                        MemberFailure::new(cluster, format!("deleting the pods left in a fenced member: {e}"));
                    return RoundError::of_members(MemberPart::PodDeletes, vec![failure]);
                }
                Err(e) => {
                    let failure = MemberFailure::new(cluster, format!("watcher gone: {e}"));
                    return RoundError::of_members(MemberPart::PodDeletes, vec![failure]);
                }
            }
        }
        Ok(())
    }
}

/// How long a refusal holds the federation before the dry runs are made again: long enough
/// that a refused federation costs its members a handful of dry runs a minute, not one per
/// reconcile; short enough that an operator who fixed a member's policy sees it taken up soon.
pub const REFUSAL_RECHECK: Duration = Duration::from_secs(30);

/// The refusal of a member's dry run, naming the field: the StatefulSet's is the template's;
/// the watcher names the field of a supporting object at the head of its message.
fn refusal(what: Checked, cluster: &str, code: u16, message: &str) -> Refusal {
    let (field, message) = match what {
        Checked::StatefulSet => ("spec.template", message),
        Checked::Supporting => message.split_once(": ").unwrap_or(("spec.template", message)),
    };
    let reason = if field.starts_with("spec.migration.carry") { "CarriedObjectRefused" } else { "TemplateRefused" };
    Refusal { reason, message: format!("{field}: {cluster} refused it ({code}): {message}") }
}

/// What a member's dry run checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checked {
    /// The namespace, the headless Service and the carried objects.
    Supporting,
    /// The StatefulSet of a new template.
    StatefulSet,
}

impl std::fmt::Display for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Checked::Supporting => "namespace, Service or carried objects",
            Checked::StatefulSet => "StatefulSet",
        })
    }
}

/// One member's answer to a dry run: for the supporting objects, whether a real pass would
/// write anything.
type CheckAnswer = (String, Checked, Result<Result<bool, WriteError>, MailboxError>);

/// Dry-runs, in every member at once, what this round may write there because something
/// changed: the supporting objects of the members in `due`, and every write of a new template.
#[allow(clippy::too_many_arguments)]
async fn check_members(
    due: &std::collections::BTreeSet<&String>,
    decision: &Decision,
    watchers: &BTreeMap<String, Addr<ClusterWatcher>>,
    key: &FederationKey,
    kind: Backend,
    term: u64,
    supporting: &impl Fn(bool) -> EnsureSupporting,
) -> Vec<CheckAnswer> {
    let supporting = due.iter().filter_map(|c| {
        let w = watchers.get(*c)?.clone();
        let msg = supporting(true);
        let c = (*c).clone();
        Some(futures::future::Either::Left(async move {
            (c, Checked::Supporting, w.send(msg).timeout(MEMBER_CALL_TIMEOUT).await)
        }))
    });
    let statefulsets = decision.writes.iter().filter(|w| w.new_template).filter_map(|w| {
        let watcher = watchers.get(&w.cluster)?.clone();
        let msg = write_message(w, key, kind, term, true);
        Some(futures::future::Either::Right(async move {
            let res = watcher.send(msg).timeout(MEMBER_CALL_TIMEOUT).await;
            (w.cluster.clone(), Checked::StatefulSet, res.map(|r| r.map(|_| true)))
        }))
    });
    futures::future::join_all(supporting.chain(statefulsets)).await
}

/// Writes the members' disruption budgets decided (`spec.disruption`), every member at once.
/// A conflict (a budget created meanwhile, or changed) plans again; the watchers report what
/// was stored, which triggers the next reconcile. A budget that cannot be written holds
/// nothing else of the reconcile (the slices and the status go on); it is tried again after
/// the pause that follows a failure, and a budget left unwritten only holds other members'
/// loosenings (see [`crate::decisions::disruption`]).
async fn write_budgets(
    decision: &Decision,
    watchers: &BTreeMap<String, Addr<ClusterWatcher>>,
    key: &FederationKey,
    term: u64,
    out: &mut RoundOutcome,
) {
    let sends = decision.budgets.iter().filter_map(|b| {
        let watcher = watchers.get(&b.cluster)?.clone();
        let msg = WriteBudget { key: key.clone(), change: b.change.clone(), term };
        Some(async move { (b.cluster.clone(), watcher.send(msg).timeout(MEMBER_CALL_TIMEOUT).await) })
    });
    let mut failed = Vec::new();
    for (cluster, res) in futures::future::join_all(sends).await {
        match res {
            Ok(Ok(_)) => {}
            Ok(Err(WriteError::Conflict)) => out.again = true,
            Ok(Err(e)) => {
                note_access_refusal(out, &e);
                failed.push(MemberFailure::new(cluster, format!("disruption budget: {e}")));
            }
            Err(e) => failed.push(MemberFailure::new(cluster, format!("disruption budget: {}", call_failed(e)))),
        }
    }
    if let Err(e) = RoundError::of_members(MemberPart::Budgets, failed) {
        tracing::warn!(federation = %key, error = %e, "disruption budgets not written; retrying");
        out.again = true;
        out.error = Some(e);
    }
}

pub use crate::actors::messages::MEMBER_CALL_TIMEOUT;

/// Why a call to a watcher got no answer.
fn call_failed(e: MailboxError) -> String {
    match e {
        MailboxError::Timeout => {
            format!("no answer within {}s (the member may still apply the write)", MEMBER_CALL_TIMEOUT.as_secs())
        }
        MailboxError::Closed => "watcher gone".to_string(),
    }
}

/// The message that makes (or, with `dry_run`, only validates) a decided StatefulSet write.
fn write_message(w: &StsWrite, key: &FederationKey, kind: Backend, term: u64, dry_run: bool) -> WriteStatefulSet {
    WriteStatefulSet {
        key: key.clone(),
        object: w.object.clone(),
        kind,
        expected_rv: w.expected_rv,
        term,
        dry_run,
        recreate: w.recreate,
    }
}

/// Records a member's 401 or 403, with what it means (see [`access`]).
fn note_access_refusal(out: &mut RoundOutcome, e: &WriteError) {
    if let WriteError::Refused { cluster, code, message } = e
        && let Some(r) = access::AccessRefusal::of(cluster, *code, message)
    {
        out.access_refused = Some(r);
    }
}

/// Whether a dry run's refusal is about spanset's access (a missing permission, rejected
/// credentials) rather than about what it would write: the others (an admission policy's
/// denial, a namespace being deleted, any 4xx) are the template's refusal, naming the field.
fn refuses_access(e: &WriteError) -> bool {
    matches!(e, WriteError::Refused { code, message, .. }
        if matches!(access::classify(*code, message), Some(access::Denial::Permission | access::Denial::Credentials)))
}

/// Carries out one ordinal's storage step: hands its volumes from its source to its
/// destination, or retires its claims in the source (all idempotent); or records why it cannot.
async fn handover(
    h: &reconcile::Handover,
    fsts: &FederatedStatefulSet,
    watchers: &BTreeMap<String, Addr<ClusterWatcher>>,
    term: u64,
    out: &mut RoundOutcome,
) -> Result<(), MemberFailure> {
    let (Some(from), Some(to)) = (watchers.get(&h.from), watchers.get(&h.to)) else {
        let missing = if watchers.contains_key(&h.from) { &h.to } else { &h.from };
        return Err(MemberFailure::new(missing, format!("ordinal {}: no watcher", h.ordinal)));
    };
    let namespace = fsts.namespace().unwrap_or_default();
    if let reconcile::HandoverKind::Retire { keep_volume, arrival } = h.kind {
        let (at, watcher) = if arrival { (&h.to, to) } else { (&h.from, from) };
        let msg = RetireClaims { namespace, claims: h.claims.clone(), keep_volume, key: FederationKey::of(fsts), term };
        return match watcher.send(msg).await {
            Ok(Ok(retired)) => {
                for (claim, volume) in retired {
                    let fate = match (volume, keep_volume) {
                        (Some(v), true) => format!("its volume {v} is kept (Retain, Released)"),
                        (Some(v), false) => format!("its volume {v} goes by its reclaim policy"),
                        (None, _) => "it had no volume".to_string(),
                    };
                    let why = if arrival {
                        format!("ordinal {} arrives in {at} from {}: its older claim {claim} there", h.ordinal, h.from)
                    } else {
                        format!("ordinal {} is Ready in {}: the claim {claim} it left in {at}", h.ordinal, h.to)
                    };
                    out.storage_notes.push(crate::host::events::Note::normal(
                        "StaleClaimRetired",
                        format!("{why} was deleted so that it never binds again (migration.staleClaims); {fate}"),
                    ));
                }
                Ok(())
            }
            Ok(Err(e)) => {
                note_access_refusal(out, &e);
                Err(MemberFailure::new(at, format!("ordinal {}: retiring its claims: {e}", h.ordinal)))
            }
            Err(e) => Err(MemberFailure::new(at, format!("watcher gone: {e}"))),
        };
    }
    let claims = h.claims.iter().map(|c| c.name.clone()).collect();
    let msg = ReleaseClaims { namespace: namespace.clone(), claims, key: FederationKey::of(fsts), term };
    let objects = match from.send(msg).timeout(MEMBER_CALL_TIMEOUT).await {
        Ok(Ok(objects)) => objects,
        Ok(Err(WriteError::Refused { code: 422, message, .. })) => {
            out.handover_refused.push((h.ordinal, message));
            return Ok(());
        }
        Ok(Err(e)) => {
            note_access_refusal(out, &e);
            return Err(MemberFailure::new(&h.from, format!("ordinal {}: handing its volumes over: {e}", h.ordinal)));
        }
        Err(e) => return Err(MemberFailure::new(&h.from, format!("watcher gone: {e}"))),
    };
    let labels = ownership_labels(fsts);
    let objects = objects
        .into_iter()
        .map(|(pv, pvc)| (storage::owned_by(pv, &labels), storage::owned_by(pvc, &labels)))
        .collect();
    // Failpoint `move-handover-released`: the source kept its volumes, the destination has no
    // copy yet; a restarted controller hands them over again.
    fail::fail_point!("move-handover-released", |_| {
        tracing::error!(failpoint = "move-handover-released", "failpoint: exiting as a crash would");
        std::process::exit(86)
    });
    match to
        .send(AdoptClaims { namespace, objects, key: FederationKey::of(fsts), term })
        .timeout(MEMBER_CALL_TIMEOUT)
        .await
    {
        Ok(Ok(retired)) => {
            for (claim, volume) in retired {
                let volume = volume.map(|v| format!("; its volume {v} is kept (Retain, Released)")).unwrap_or_default();
                out.storage_notes.push(crate::host::events::Note::warning(
                    "StaleClaimRetired",
                    format!(
                        "ordinal {} returned to {}: its older claim {claim} there was deleted so that it never binds \
                         again, and the handed-over one from {} takes its place{volume}",
                        h.ordinal, h.to, h.from
                    ),
                ));
            }
            Ok(())
        }
        Ok(Err(WriteError::Refused { message, .. })) => {
            out.handover_refused.push((h.ordinal, message));
            Ok(())
        }
        Ok(Err(e)) => {
            Err(MemberFailure::new(&h.to, format!("ordinal {}: adopting its volumes from {}: {e}", h.ordinal, h.from)))
        }
        Err(e) => Err(MemberFailure::new(&h.to, format!("watcher gone: {e}"))),
    }
}

/// Failpoints `move-<when>-<Phase>` (e.g. `move-persisted-Released`), one per move phase after
/// the status recording it is stored and after the member writes acting on it: with
/// `FAILPOINTS=move-persisted-Draining=return` the process exits there, as a crash would, so
/// that tests can show a restarted controller resumes from every phase. Without the cargo
/// feature `failpoints` (the production build) there are none.
fn crash_points(when: &str, decision: &Decision) {
    #[cfg(not(feature = "failpoints"))]
    let _ = (when, decision);
    #[cfg(feature = "failpoints")]
    for phase in decision.status.moves.iter().map(|m| m.phase.as_str()).collect::<std::collections::BTreeSet<_>>() {
        let name = format!("move-{when}-{phase}");
        fail::fail_point!(&name, |_| {
            tracing::error!(failpoint = %name, "failpoint: exiting as a crash would");
            std::process::exit(86)
        });
    }
}

/// Failpoints `hold-writes-<Phase>` (e.g. `FAILPOINTS=hold-writes-Starting=return(/tmp/go)`):
/// after the status recording a move in that phase is stored, and before the member writes
/// acting on it are sent, wait until the named file exists, so that a test can act in
/// between (cut the destination off, so that the write stays in flight there).
async fn hold_points(decision: &Decision) {
    for phase in decision.status.moves.iter().map(|m| m.phase.as_str()).collect::<std::collections::BTreeSet<_>>() {
        let name = format!("hold-writes-{phase}");
        if let Some(Some(path)) = fail::eval(&name, |arg| arg) {
            tracing::warn!(failpoint = %name, %path, "failpoint: holding the member writes until the file exists");
            while !std::path::Path::new(&path).exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// A digest of carried objects' content (names, types and data), to notice edits.
fn digest_of(carried: &[Carried]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for c in carried {
        let text = match c {
            Carried::Secret(s) => serde_json::to_string(&(&s.metadata.name, &s.type_, &s.data, &s.string_data)),
            Carried::ConfigMap(m) => serde_json::to_string(&(&m.metadata.name, &m.data, &m.binary_data)),
        };
        text.unwrap_or_default().hash(&mut h);
    }
    format!("{:016x}", h.finish())
}

async fn add_finalizer(host: &Client, fsts: &FederatedStatefulSet) -> Result<FederatedStatefulSet, RoundError> {
    let api: Api<FederatedStatefulSet> = Api::namespaced(host.clone(), &fsts.namespace().unwrap_or_default());
    let mut finalizers = fsts.finalizers().to_vec();
    finalizers.push(FINALIZER.to_string());
    let patch = serde_json::json!({"metadata": {"finalizers": finalizers, "resourceVersion": fsts.resource_version()}});
    api.patch(&fsts.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| RoundError::Finalizer(e.to_string()))
}

/// Stores the decided status if it differs; answers the stored object.
async fn write_status(
    host: &Client,
    fsts: &FederatedStatefulSet,
    decision: &Decision,
) -> Result<Option<FederatedStatefulSet>, RoundError> {
    if fsts.status.as_ref() == Some(&decision.status) {
        return Ok(None);
    }
    let api: Api<FederatedStatefulSet> = Api::namespaced(host.clone(), &fsts.namespace().unwrap_or_default());
    let mut next = fsts.clone();
    next.status = Some(decision.status.clone());
    let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
    api.replace_status(&fsts.name_any(), &pp, &next).await.map(Some).map_err(|e| RoundError::Status(e.to_string()))
}

impl Actor for Coordinator {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        tracing::info!(federation = %self.key, "coordinating");
        self.expose_last_drill();
        self.subscribe_all(ctx);
        ctx.run_later(resync_offset(&self.key), |act, ctx| {
            act.schedule(ctx);
            ctx.run_interval(SAFETY_RESYNC, |act, ctx| act.schedule(ctx));
        });
        ctx.add_stream(tokio_stream::wrappers::WatchStream::new(self.leadership.subscribe()));
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        self.set_queued(false);
        for w in self.subscribed.values() {
            w.do_send(Unsubscribe { key: self.key.clone() });
        }
        self.metrics.forget_federation(&self.key.to_string());
        tracing::info!(federation = %self.key, "stopped coordinating");
    }
}

impl Handler<Stop> for Coordinator {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl StreamHandler<Option<u64>> for Coordinator {
    fn handle(&mut self, term: Option<u64>, ctx: &mut Self::Context) {
        if term.is_some() {
            self.schedule(ctx);
        }
    }

    fn finished(&mut self, _: &mut Self::Context) {}
}

impl Handler<SpecChanged> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: SpecChanged, ctx: &mut Self::Context) {
        if let Some(lag) = spec_event_lag() {
            ctx.run_later(lag, move |act, ctx| act.spec_changed(msg.0, ctx));
            return;
        }
        self.spec_changed(msg.0, ctx);
    }
}

impl Coordinator {
    /// A version of the federation from the host's watch.
    fn spec_changed(&mut self, fsts: Arc<FederatedStatefulSet>, ctx: &mut Context<Self>) {
        // A watch event can lag behind the object this coordinator stored itself (its status
        // write answers the whole object): an older one would roll `status.moves` back.
        if !newer(&fsts, &self.fsts) {
            return;
        }
        self.fsts = fsts;
        self.undecodable = None;
        self.expose_last_drill();
        self.schedule(ctx);
    }
}

/// Failpoint `spec-event-lag` (`FAILPOINTS=spec-event-lag=return(MS)`): the host's watch events
/// of the federation reach its coordinator MS milliseconds late, as from a slow or busy host,
/// so that a test can show that nothing waits on the event of the coordinator's own status
/// write (which arrives after the reconcile that made it). None without the cargo feature
/// `failpoints` (the production build).
fn spec_event_lag() -> Option<Duration> {
    let arg = fail::eval("spec-event-lag", |arg| arg)??;
    arg.parse().ok().map(Duration::from_millis)
}

impl Handler<SpecUndecodable> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: SpecUndecodable, ctx: &mut Self::Context) {
        let u = msg.0;
        if rv_of(u.resource_version().as_deref()) <= rv_of(self.fsts.metadata.resource_version.as_deref()) {
            return;
        }
        if u.deleting() {
            // Deleting needs no spec beyond the last one read: the member objects it wrote are
            // removed and the finalizer released, as for any deleted federation.
            let mut last = (*self.fsts).clone();
            last.metadata = u.object.metadata.clone();
            self.fsts = Arc::new(last);
            self.undecodable = None;
        } else {
            self.undecodable = Some(u);
        }
        self.schedule(ctx);
    }
}

impl Handler<MembersChanged> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: MembersChanged, ctx: &mut Self::Context) {
        self.fence_clock.note(&msg.members, Instant::now());
        self.members = msg.members;
        self.members_listed = msg.listed;
        self.subscribe_all(ctx);
        self.schedule(ctx);
    }
}

impl Handler<Holds> for Coordinator {
    type Result = Vec<String>;

    fn handle(&mut self, msg: Holds, _: &mut Self::Context) -> Vec<String> {
        let members = self.inputs();
        let grace = reconcile::unreachable_after(&self.fsts);
        crate::decisions::holds::holds(&self.fsts, &msg.cluster, members.get(&msg.cluster), Instant::now(), grace)
    }
}

impl Handler<MemberObserved> for Coordinator {
    type Result = ();

    fn handle(&mut self, msg: MemberObserved, ctx: &mut Self::Context) {
        if msg.key == self.key {
            self.views.insert(msg.cluster, msg.view);
            self.schedule(ctx);
        }
    }
}

impl Handler<MemberQuiet> for Coordinator {
    type Result = ();

    /// A member turned quiet: the timer of its thresholds is set (nothing is planned now,
    /// unless the notice comes after a threshold).
    fn handle(&mut self, msg: MemberQuiet, ctx: &mut Self::Context) {
        if msg.key == self.key {
            self.metrics.silence_check();
            self.check_silence(ctx);
        }
    }
}

/// `view` with its last answer brought up to `contact` (a copy only if it is older).
fn with_contact(
    view: &Arc<crate::actors::messages::MemberView>,
    contact: &ContactClock,
) -> Arc<crate::actors::messages::MemberView> {
    let fresh = contact.freshest(view.last_contact);
    if fresh == view.last_contact {
        return view.clone();
    }
    let mut v = (**view).clone();
    v.last_contact = fresh;
    Arc::new(v)
}

/// Whether `candidate` is a later version of the federation than `current` (its
/// resourceVersion is higher): only a later one may replace what a coordinator holds, whichever
/// path brings it (a watch event, or the answer to its own status write).
fn newer(candidate: &FederatedStatefulSet, current: &FederatedStatefulSet) -> bool {
    rv_of(candidate.metadata.resource_version.as_deref()) > rv_of(current.metadata.resource_version.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_field_the_member_and_the_servers_message() {
        let r = refusal(Checked::StatefulSet, "east", 422, "StatefulSet.apps \"x\" is invalid: spec.selector: …");
        assert_eq!(r.reason, "TemplateRefused");
        assert_eq!(
            r.message,
            "spec.template: east refused it (422): StatefulSet.apps \"x\" is invalid: spec.selector: …"
        );
        let r = refusal(Checked::Supporting, "west", 422, "spec.migration.carry[1]: configmaps \"c\" is forbidden: no");
        assert_eq!(r.reason, "CarriedObjectRefused");
        assert_eq!(r.message, "spec.migration.carry[1]: west refused it (422): configmaps \"c\" is forbidden: no");
        let r = refusal(Checked::Supporting, "west", 422, "spec.template.serviceName: Service \"s\" is invalid: x");
        assert_eq!(
            (r.reason, r.message.starts_with("spec.template.serviceName: west refused it")),
            ("TemplateRefused", true)
        );
    }

    fn at(rv: &str) -> FederatedStatefulSet {
        let mut f = spanset_api::example(&["east".to_string()]);
        f.metadata.resource_version = Some(rv.into());
        f
    }

    #[test]
    fn a_conflict_is_counted_once_per_occurrence_not_per_reconcile() {
        let c = |k: u32| reconcile::Conflict { ordinal: k, members: vec!["a".into(), "b".into()] };
        let now = [c(2), c(5)];
        let none = std::collections::BTreeSet::new();
        assert_eq!(newly_conflicting(&none, &now).map(|c| c.ordinal).collect::<Vec<_>>(), [2, 5]);
        // The next reconcile sees the same two: nothing new to count.
        let seen: std::collections::BTreeSet<u32> = [2, 5].into();
        assert_eq!(newly_conflicting(&seen, &now).count(), 0);
        // 2 ended and came back: a new occurrence.
        let seen: std::collections::BTreeSet<u32> = [5].into();
        assert_eq!(newly_conflicting(&seen, &now).map(|c| c.ordinal).collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn a_lagging_version_never_replaces_a_later_one() {
        assert!(newer(&at("12"), &at("11")));
        assert!(!newer(&at("11"), &at("12")), "a watch event older than the stored status is ignored");
        assert!(!newer(&at("12"), &at("12")));
    }
}
