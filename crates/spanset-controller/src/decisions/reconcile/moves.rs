//! Stage 5b: the recorded moves (`status.moves`) advanced by what the members report. A move
//! ends when its ordinal is Ready where the plan targets it, or when a spec change overtakes
//! it; it parks where the plan lands it for now; its source's release is recorded once
//! confirmed; its storage is handed over (or left behind in a fenced source) before any grow;
//! and without identity gates its grow waits until the destination's records no longer name
//! it. Every grow these hold waits, and so does a grow whose release is recorded now (the
//! release is stored before the grow that takes the ordinal).

use std::collections::{BTreeMap, BTreeSet};

use spanset_api::MoveStatus;
use spanset_plan::{Observed, Ordinal, Ordinals, Plan, Step};

use super::{
    Handover, homes,
    move_storage::{self, Gate},
    planning::Planning,
    scope::Scope,
};
use crate::{
    decisions::{
        move_phase::{self, Ending, MovePhase},
        network,
    },
    host::events::Note,
    member::objects::gated,
};

/// Where the plan targets each ordinal: each cluster's target set once, so that an ordinal's
/// destination is found among the clusters, never through a map of every ordinal.
pub(super) struct Targets<'p> {
    targets: Vec<(&'p str, Ordinals)>,
}

impl<'p> Targets<'p> {
    /// The targets of `plan`.
    pub fn new(plan: &'p Plan) -> Self {
        Targets { targets: plan.target.iter().map(|(c, s)| (c.as_str(), s.ordinals())).collect() }
    }

    /// The member the plan targets `k` to.
    pub fn of(&self, k: Ordinal) -> Option<&'p str> {
        self.targets.iter().find(|(_, set)| set.contains(k)).map(|(c, _)| *c)
    }
}

/// The recorded moves as this round leaves them, and what advancing them found.
pub(super) struct Moves {
    /// The moves to store, by ordinal.
    pub moves: BTreeMap<Ordinal, MoveStatus>,
    /// A move was recorded or advanced: the status is stored before the writes.
    pub persist_first: bool,
    /// Moves finished in this round, with their durations in seconds.
    pub finished: Vec<(Ordinal, f64)>,
    /// Events of the moves.
    pub notes: Vec<Note>,
    /// Ordinals whose release is recorded in this round (`Draining` → `Released`).
    pub released: BTreeSet<Ordinal>,
    /// Ordinals whose grow waits (storage, or the destination's records).
    pub held: BTreeSet<Ordinal>,
    /// Why storage can never follow, for the condition.
    pub refused: Vec<String>,
    /// Why storage cannot follow yet, for the condition.
    pub storage_waits: Vec<String>,
    /// Moves whose fenced source keeps their volumes, with the condition's words.
    pub left_behind: BTreeMap<Ordinal, String>,
    /// Storage handovers to carry out before the writes.
    pub handovers: Vec<Handover>,
    /// Wall-clock now, as `since` is written.
    pub now: String,
}

/// Advances the recorded moves by this round's plan and observation.
pub(super) fn advance(cx: &Scope<'_>, obs: &Observed, planning: &Planning, stamping: bool) -> Moves {
    let mut m = Moves {
        moves: planning.recorded.clone(),
        persist_first: false,
        finished: Vec::new(),
        notes: Vec::new(),
        released: BTreeSet::new(),
        held: BTreeSet::new(),
        refused: Vec::new(),
        storage_waits: Vec::new(),
        left_behind: BTreeMap::new(),
        handovers: Vec::new(),
        now: cx.inp.wall.to_string(),
    };
    let Some(plan) = &planning.plan else { return m };
    let targets = Targets::new(plan);
    m.retire_ended(cx, obs, &targets);
    if !stamping {
        m.park_landings(cx, planning.steps(), &targets);
    }
    m.cancel_returns(cx, obs, &targets);
    m.end_overtaken(&targets);
    let mut moves = std::mem::take(&mut m.moves);
    for (k, mv) in moves.iter_mut() {
        m.advance_one(cx, obs, &targets, *k, mv);
    }
    m.moves = moves;
    m
}

/// The phase of a recorded move, as the rules read it.
pub(super) fn phase_of(m: &MoveStatus) -> MovePhase {
    MovePhase::read(&m.phase)
}

/// Records a transition: the move's phase and `since`.
pub(super) fn enter(m: &mut MoveStatus, phase: MovePhase, now: &str) {
    m.phase = phase.as_str().into();
    m.since = now.to_string();
}

impl Moves {
    /// Moves that ended (Ready in the target, or back where parked) or were overtaken by a
    /// spec change (no target, out of range).
    fn retire_ended(&mut self, cx: &Scope<'_>, obs: &Observed, targets: &Targets<'_>) {
        let range = cx.range();
        let wall = cx.inp.wall;
        let ready_in = |c: &str, k: Ordinal| obs.get(c).is_some_and(|o| o.written.contains(k) && o.ready.contains(k));
        self.moves.retain(|k, m| {
            let Some(to) = targets.of(*k) else { return false };
            let secs =
                || m.since.parse::<jiff::Timestamp>().map(|s| wall.duration_since(s).as_secs_f64()).unwrap_or(0.0);
            match move_phase::ended(phase_of(m), ready_in(to, *k), ready_in(&m.to, *k)) {
                Some(Ending::Finished) => {
                    self.finished.push((*k, secs()));
                    let msg = format!("ordinal {k} is Ready in {to} ({:.0} s)", secs());
                    self.notes.push(Note::normal("MoveFinished", msg));
                    false
                }
                Some(Ending::Landed) => {
                    let msg = format!("ordinal {k} runs in {} again until the moves in its way to {to} have run", m.to);
                    self.notes.push(Note::normal("MoveParked", msg));
                    false
                }
                None => range.contains(k),
            }
        });
    }

    /// A landing the plan chose (a grow outside the grower's target): the move goes there
    /// for now, so that its storage follows it there.
    fn park_landings(&mut self, cx: &Scope<'_>, steps: &[Step], targets: &Targets<'_>) {
        for step in steps {
            let Step::Grow { cluster, acquires, .. } = step else { continue };
            for k in acquires.iter().filter(|k| targets.of(*k) != Some(cluster.as_str())) {
                if let Some(m) = self.moves.get_mut(&k)
                    && let Some(next) = move_phase::parked(phase_of(m), m.to == *cluster)
                {
                    self.notes.push(Note::normal(
                        "MoveParked",
                        format!(
                            "ordinal {k} lands in {cluster} for now: {} cannot take it next and \
                             maxConcurrentMoves leaves no room for the moves in its way",
                            m.to
                        ),
                    ));
                    enter(m, next, &self.now);
                    m.to = cluster.clone();
                    m.stale_claims = move_storage::stale_claims_in(cx.view_of(cluster).as_deref(), k);
                    self.persist_first = true;
                }
            }
        }
    }

    /// A spec edit that sends an ordinal back to the cluster it was leaving ends its move: a
    /// move from a cluster to itself is never recorded. One grown in its destination already
    /// becomes the move back, recorded at once so that the destination gives the ordinal up as
    /// a move in flight (free of `maxConcurrentMoves`). If it never was Ready there (its home is
    /// still its source) that is a rollback: it returns on its own claims, none there older than
    /// its data. If it was, its source's claims are older than its run there, as for any move.
    fn cancel_returns(&mut self, cx: &Scope<'_>, obs: &Observed, targets: &Targets<'_>) {
        let mut back = Vec::new();
        self.moves.retain(|k, m| {
            let cancelled = move_phase::cancelled(phase_of(m), targets.of(*k) == Some(m.from.as_str()));
            if !cancelled {
                return true;
            }
            if phase_of(m) != MovePhase::Starting {
                let msg = format!("ordinal {k} stays in {}: the spec puts it back there", m.from);
                self.notes.push(Note::normal("MoveCancelled", msg));
                return false;
            }
            let ran_there = obs.get(&m.to).is_some_and(|o| o.ready.contains(*k))
                || homes::of(cx.inp, *k).as_deref() == Some(m.to.as_str());
            let stale = if ran_there {
                let msg = format!("ordinal {k}: {} → {} (the spec puts it back)", m.to, m.from);
                self.notes.push(Note::normal("MoveStarted", msg));
                move_storage::stale_claims_in(cx.view_of(&m.from).as_deref(), *k)
            } else {
                let msg = format!(
                    "ordinal {k} goes back to {} on its own claims: the spec puts it back there before it was Ready \
                     in {}",
                    m.from, m.to
                );
                self.notes.push(Note::normal("MoveCancelled", msg));
                Some(Vec::new())
            };
            back.push(MoveStatus {
                ordinal: m.ordinal,
                from: m.to.clone(),
                to: m.from.clone(),
                phase: MovePhase::Draining.as_str().into(),
                since: self.now.clone(),
                stale_claims: stale,
            });
            false
        });
        for m in back {
            self.persist_first = true;
            self.moves.insert(m.ordinal as Ordinal, m);
        }
    }

    /// A grown move that a spec edit targets in a third member ends: its destination gives the
    /// ordinal up as a move of its own (see [`move_phase::overtaken`]).
    fn end_overtaken(&mut self, targets: &Targets<'_>) {
        self.moves.retain(|k, m| {
            let Some(target) = targets.of(*k) else { return true };
            let ended = move_phase::overtaken(phase_of(m), target != m.to && target != m.from);
            if ended {
                self.notes.push(Note::normal(
                    "MoveRetargeted",
                    format!("ordinal {k} now goes to {target}: it moves on from {} once {} gives it up", m.to, m.to),
                ));
                self.persist_first = true;
            }
            !ended
        });
    }

    /// One move: retargeted, released once confirmed, or held by its storage or by the
    /// destination's records.
    fn advance_one(&mut self, cx: &Scope<'_>, obs: &Observed, targets: &Targets<'_>, k: Ordinal, m: &mut MoveStatus) {
        if let Some(to) = targets.of(k)
            && m.to != to
            && move_phase::follows_target(phase_of(m))
        {
            m.to = to.to_string();
            m.stale_claims = move_storage::stale_claims_in(cx.view_of(to).as_deref(), k);
        }
        // What the destination held of the ordinal before it arrives, once it has reported.
        if m.stale_claims.is_none()
            && phase_of(m) != MovePhase::Starting
            && let Some(stale) = move_storage::stale_claims_in(cx.view_of(&m.to).as_deref(), k)
        {
            m.stale_claims = Some(stale);
            self.persist_first = true;
        }
        if let Some(next) = move_phase::released(phase_of(m), released(obs, k, &m.to)) {
            enter(m, next, &self.now);
            self.released.insert(k);
            self.persist_first = true;
            return;
        }
        // Every grow of the ordinal waits for its storage, whatever the phase.
        let gate = if cx.inp.rules.handover_gate { move_storage::gate(cx.inp, obs, m, k) } else { Gate::Open };
        match gate {
            Gate::Open => {}
            Gate::LeftBehind(why) => {
                self.left_behind.insert(k, why);
            }
            Gate::Held { handover, waiting, refused } => {
                self.held.insert(k);
                self.refused.extend(refused);
                self.storage_waits.extend(waiting);
                if let Some(h) = handover {
                    if let Some(next) = move_phase::handing_over(phase_of(m)) {
                        enter(m, next, &self.now);
                        self.persist_first = true;
                    }
                    self.handovers.push(h);
                }
            }
        }
        // Without identity gates a pod starts as soon as its slice holds it: the grow then
        // waits until spanset's records in the destination no longer name the ordinal.
        if !gated(cx.fsts)
            && move_phase::grow_waits_for_records(phase_of(m))
            && cx.view_of(&m.to).is_none_or(|v| network::names_ordinal(cx.fsts, &v, k))
        {
            self.held.insert(k);
        }
    }
}

/// Whether every member other than `to` that counts (unfenced, or fenced but answering again:
/// [`spanset_plan::steps::counts`]) is confirmed not to hold or run `k`: the planner's
/// confirmation rule ([`spanset_plan`]'s grows), under which a member that is unreachable now
/// but was observed since its last write confirms what that observation showed. A stricter
/// rule here would let the planner's grow overtake a move still recorded as `Draining`, past
/// its storage step.
fn released(obs: &Observed, k: Ordinal, to: &str) -> bool {
    obs.iter()
        .filter(|(n, o)| n.as_str() != to && spanset_plan::steps::counts(o))
        .all(|(_, o)| !o.written.contains(k) && !o.pods.contains(k) && o.observed_since_write)
}
