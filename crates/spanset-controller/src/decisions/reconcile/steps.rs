//! Stage 6: the gated plan steps become member writes. A shrink that releases an ordinal
//! bound elsewhere records its move (`Draining`); a grow into a recorded move records it as
//! `Starting` (or moves a parked ordinal on to its target). Both are stored before the writes
//! (`persist_first`). A grow waits while any ordinal it acquires is held or was released in
//! this very round. Nothing is written from the plan in a round that stamps.

use spanset_api::{MoveStatus, StorageMode};
use spanset_plan::{Ordinal, Ordinals, Step};

use super::{
    StsWrite, homes, move_storage,
    moves::{Moves, Targets, enter, phase_of},
    planning::Planning,
    scope::Scope,
};
use crate::{
    decisions::move_phase::{self, MovePhase},
    host::events::Note,
};

/// The writes of the plan's steps.
#[derive(Default)]
pub(super) struct Steps {
    /// One write per step, with the step's slice.
    pub writes: Vec<StsWrite>,
    /// Ordinals of recorded moves that these writes grow into their destination.
    pub grows: Vec<Ordinal>,
}

/// The writes of this round's gated steps, recording the moves they start or grow into.
pub(super) fn write(cx: &Scope<'_>, planning: &Planning, moves: &mut Moves, cursor: Ordinal, stamping: bool) -> Steps {
    let mut out = Steps::default();
    let Some(plan) = planning.plan.as_ref().filter(|_| !stamping) else { return out };
    let targets = Targets::new(plan);
    for step in planning.steps() {
        let cluster = step.cluster();
        let view = cx.view_of(cluster).expect("steps name observed members");
        let Some(s) = &view.federation.sts else { continue };
        match step {
            Step::Shrink { releases, .. } => record_releases(cx, moves, cluster, releases, &targets),
            Step::Grow { acquires, .. }
                if acquires.iter().any(|k| moves.released.contains(&k) || moves.held.contains(&k)) =>
            {
                continue;
            }
            Step::Grow { acquires, .. } if record_orphans(cx, moves, cluster, acquires) => continue,
            Step::Grow { acquires, .. } => out.grows.extend(record_grows(moves, cluster, acquires)),
        }
        let (object, recreate) = cx.statefulset(step.slice(), cursor, Some(s));
        out.writes.push(StsWrite {
            cluster: cluster.to_string(),
            object,
            expected_rv: Some(s.rv),
            new_template: false,
            recreate,
        });
    }
    out
}

/// A shrink's released ordinals that the plan targets elsewhere start moving (`Draining`).
fn record_releases(cx: &Scope<'_>, moves: &mut Moves, cluster: &str, releases: &Ordinals, targets: &Targets<'_>) {
    for k in releases.iter() {
        if let Some(to) = targets.of(k).filter(|to| *to != cluster)
            && let Some(phase) = move_phase::started(moves.moves.get(&k).map(phase_of))
        {
            let stale = move_storage::stale_claims_in(cx.view_of(to).as_deref(), k);
            record_move(moves, k, cluster, to, phase, stale, format!("ordinal {k}: {cluster} → {to}"));
        }
    }
}

/// Records the move of `k` from `from` to `to` in `phase` (stored before the writes), with what
/// the destination holds of it already (`stale`, see [`MoveStatus::stale_claims`]) and its
/// `MoveStarted` Event.
fn record_move(
    moves: &mut Moves,
    k: Ordinal,
    from: &str,
    to: &str,
    phase: MovePhase,
    stale: Option<Vec<String>>,
    why: String,
) {
    moves.notes.push(Note::normal("MoveStarted", why));
    let since = moves.now.clone();
    let status = MoveStatus {
        ordinal: k as i32,
        from: from.into(),
        to: to.into(),
        phase: phase.as_str().into(),
        since,
        stale_claims: stale,
    };
    moves.moves.insert(k, status);
    moves.persist_first = true;
}

/// A grow of ordinals that no recorded move covers, though their storage needs dealing with
/// (a move cancelled after its source gave the ordinal up, then retargeted; a scale-down and
/// up): with `storage: Move` their volumes are in another unfenced member, with `Detached` the
/// grower keeps claims of theirs older than their last run elsewhere. Each gets its move
/// recorded as `Released` (the plan grows only an ordinal confirmed held and run nowhere), and
/// the grow waits, so that the storage gate holds it until those volumes are handed over (or
/// the older claims retired). Without this the ordinal started on a fresh volume beside its own
/// (found by the model checker). Answers whether any was recorded.
fn record_orphans(cx: &Scope<'_>, moves: &mut Moves, cluster: &str, acquires: &Ordinals) -> bool {
    if !cx.inp.rules.handover_gate || !cx.inp.rules.orphan_moves {
        return false;
    }
    let detached = cx.fsts.spec.migration.storage.unwrap_or(StorageMode::Detached) == StorageMode::Detached;
    let mut recorded = false;
    let unrecorded: Vec<Ordinal> = acquires.iter().filter(|k| !moves.moves.contains_key(k)).collect();
    for k in unrecorded {
        // Where it last ran is where its data is: its claims there, if it is elsewhere (none to
        // fetch if it ran here last: claims left elsewhere are older).
        let home = homes::of(cx.inp, k);
        if home.as_deref() == Some(cluster) {
            continue;
        }
        let stale = move_storage::stale_claims_in(cx.view_of(cluster).as_deref(), k);
        let from = if detached {
            // The grower's claims of it are older than its run in its home.
            match (&home, &stale) {
                (Some(home), Some(stale)) if !stale.is_empty() => home.clone(),
                _ => continue,
            }
        } else {
            let Some((from, _)) = cx
                .inp
                .members
                .iter()
                .filter(|(name, m)| name.as_str() != cluster && !m.fenced)
                .filter(|(name, _)| home.as_ref().is_none_or(|h| h == *name))
                // Its volumes are there (a live claim of the ordinal), and they need dealing with.
                .filter(|(_, m)| {
                    m.view.as_ref().and_then(|v| v.claims.get(&k)).is_some_and(|c| c.iter().any(|c| !c.deleting))
                })
                .find(|(name, _)| move_storage::due(cx.inp, k, name, cluster, None).is_some())
            else {
                continue;
            };
            from.clone()
        };
        let why = if detached {
            format!("ordinal {k}: {from} → {cluster} ({cluster} keeps claims of it older than its run in {from})")
        } else {
            format!("ordinal {k}: {from} → {cluster} (its volumes are in {from})")
        };
        record_move(moves, k, &from, cluster, MovePhase::Released, stale, why);
        recorded = true;
    }
    recorded
}

/// A grow's acquired ordinals with a recorded move are `Starting` (a parked one whose target
/// takes it after all moves on). Answers the ordinals grown into.
fn record_grows(moves: &mut Moves, cluster: &str, acquires: &Ordinals) -> Vec<Ordinal> {
    let mut grows = Vec::new();
    for k in acquires.iter() {
        let Some(m) = moves.moves.get_mut(&k) else { continue };
        grows.push(k);
        let phase = phase_of(m);
        let Some(next) = move_phase::starting(phase, m.to == cluster) else { continue };
        if phase == MovePhase::Parked {
            // Its target takes it after all: the move goes on.
            m.to = cluster.to_string();
        }
        if let Some(why) = moves.left_behind.get(&k) {
            moves.notes.push(Note::warning("VolumesLeftBehind", why.clone()));
        }
        enter(m, next, &moves.now);
        moves.persist_first = true;
    }
    grows
}
