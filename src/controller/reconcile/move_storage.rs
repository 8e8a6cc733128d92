//! What a recorded move's storage needs before its destination may grow into the ordinal: a
//! pure decision of each reconcile, carried out by the coordinator.
//!
//! - `storage: Move`: the source's claims are handed over (PV reclaim Retain, PV and PVC copied
//!   into the destination), so the ordinal starts on its own volume.
//! - `storage: Detached`: the claims the ordinal leaves in its source are retired
//!   (`migration.staleClaims`: deleted, their volume kept or not), so that a later return
//!   starts on a fresh claim instead of silently on data older than its run elsewhere.
//!
//! Either way the gate holds every grow of the ordinal, whatever the move's phase, until its
//! storage is dealt with: the planner may let a grow through on its confirmation rule while the
//! move is still recorded as `Draining` (issue 19, item 1). The work itself is done only once
//! the source is confirmed not to run the ordinal (`Released`), never before. A source that is
//! unreachable holds only its own ordinals, and no request is sent to it; a fenced source's
//! volumes stay behind by the rules of failover (the ordinal starts on fresh claims, and a
//! condition says so).

use super::{Inputs, homes};
use crate::{
    api::{MoveStatus, StaleClaims, StorageMode},
    controller::{
        member::cache::ClaimRecord,
        messages::MemberView,
        move_phase::{self, MovePhase},
    },
    plan::{Observed, Ordinal},
};

/// What a storage step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoverKind {
    /// `storage: Move`: the source's volumes go to the destination.
    Move,
    /// `storage: Detached`: stale claims of the ordinal are deleted, in the source (the ones it
    /// leaves) or, once those are gone, in the destination (older ones left there by a run
    /// before, e.g. in a member fenced since); `keep_volume` sets their volumes to Retain first
    /// (`staleClaims: Release`).
    Retire {
        /// Keep each claim's volume (reclaim policy Retain) when its claim is deleted.
        keep_volume: bool,
        /// The claims are in the destination, not the source.
        arrival: bool,
    },
}

/// One ordinal's storage step, carried out before the writes of the round.
#[derive(Debug, Clone, PartialEq)]
pub struct Handover {
    /// The ordinal.
    pub ordinal: Ordinal,
    /// Source member.
    pub from: String,
    /// Destination member.
    pub to: String,
    /// Its claims in the source, by name.
    pub claims: Vec<String>,
    /// What is done with them.
    pub kind: HandoverKind,
}

/// The gate of one recorded move in this round.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// Nothing stands between the ordinal and its grow.
    Open,
    /// The source is fenced: its volumes stay there and the ordinal starts on fresh claims
    /// (failover); the message says so in a condition.
    LeftBehind(String),
    /// The grow waits.
    Held {
        /// The step to carry out now, if one can be.
        handover: Option<Handover>,
        /// Why nothing can be done now, for a condition (an unreachable member).
        waiting: Option<String>,
        /// Why it can never be done (a member refused it, naming the PV).
        refused: Option<String>,
    },
}

impl Gate {
    fn held() -> Self {
        Gate::Held { handover: None, waiting: None, refused: None }
    }
}

fn claims_of(view: Option<&MemberView>, k: Ordinal) -> Vec<ClaimRecord> {
    view.and_then(|v| v.claims.get(&k).cloned()).unwrap_or_default()
}

/// The claims `k`'s storage still needs dealt with, and how: `None` when nothing is due.
///
/// `Move`: none when the source has no claims or the destination holds every one for the
/// same volume. `Detached`: the source's claims not being deleted, then the destination's (an
/// ordinal moving in ran elsewhere since any claim there was made); none when the ordinal goes
/// back to where it came from, whose claims are then still its newest.
///
/// Where the ordinal last ran (`status.homes`) overrides both: if that is the destination, its
/// claims there are its newest (the source's were never used since, e.g. it was re-homed there
/// while the destination was fenced and never ran), so nothing is handed over and nothing of
/// the destination's is retired.
pub fn due(inp: &Inputs<'_>, k: Ordinal, from: &str, to: &str) -> Option<(HandoverKind, Vec<String>)> {
    let view = |c: &str| inp.members.get(c).and_then(|m| m.view.as_deref());
    let source = claims_of(view(from), k);
    let home_is_destination = inp.rules.handover_gate && homes::of(inp, k).as_deref() == Some(to);
    match inp.fsts.spec.migration.storage.unwrap_or(StorageMode::Detached) {
        StorageMode::Move if home_is_destination => None,
        StorageMode::Move => {
            let there = claims_of(view(to), k);
            let arrived =
                source.iter().all(|c| there.iter().any(|d| d.name == c.name && d.volume == c.volume && !d.deleting));
            (!source.is_empty() && !arrived).then(|| (HandoverKind::Move, source.into_iter().map(|c| c.name).collect()))
        }
        StorageMode::Detached if from == to => None,
        StorageMode::Detached => {
            let keep_volume = inp.fsts.spec.migration.stale_claims.unwrap_or_default() == StaleClaims::Release;
            let live = |claims: Vec<ClaimRecord>| -> Vec<String> {
                claims.into_iter().filter(|c| !c.deleting).map(|c| c.name).collect()
            };
            let leaving = live(source);
            if !leaving.is_empty() {
                return Some((HandoverKind::Retire { keep_volume, arrival: false }, leaving));
            }
            if home_is_destination {
                return None;
            }
            let older = live(claims_of(view(to), k));
            (!older.is_empty()).then_some((HandoverKind::Retire { keep_volume, arrival: true }, older))
        }
    }
}

/// The gate of move `m` of ordinal `k` this round (see the module doc).
pub fn gate(inp: &Inputs<'_>, obs: &Observed, m: &MoveStatus, k: Ordinal) -> Gate {
    let Some((kind, claims)) = due(inp, k, &m.from, &m.to) else { return Gate::Open };
    if inp.members.get(&m.from).is_some_and(|s| s.fenced) {
        return Gate::LeftBehind(format!(
            "ordinal {k}: {} left in fenced {} (failover: it starts on fresh claims)",
            claims.join(", "),
            m.from
        ));
    }
    // Before the release is confirmed nothing may touch the volumes; after the grow there is
    // nothing left to hand over.
    if !move_phase::storage_may_be_touched(MovePhase::read(&m.phase)) {
        return Gate::held();
    }
    if let Some(why) = inp.handover_refusals.get(&k) {
        return Gate::Held { handover: None, waiting: None, refused: Some(format!("ordinal {k}: {why}")) };
    }
    let involved: &[&str] = match kind {
        HandoverKind::Move => &[&m.from, &m.to],
        HandoverKind::Retire { arrival: false, .. } => &[&m.from],
        HandoverKind::Retire { arrival: true, .. } => &[&m.to],
    };
    if let Some(c) = involved.iter().find(|c| obs.get(**c).is_none_or(|o| !o.reachable)) {
        return Gate::Held {
            handover: None,
            waiting: Some(format!("ordinal {k}: {c} is unreachable ({} wait there)", claims.join(", "))),
            refused: None,
        };
    }
    let handover = Handover { ordinal: k, from: m.from.clone(), to: m.to.clone(), claims, kind };
    Gate::Held { handover: Some(handover), waiting: None, refused: None }
}
