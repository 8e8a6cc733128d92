//! What a recorded move's storage needs before its destination may grow into the ordinal, and
//! what the claims an ordinal left behind need once it runs elsewhere: pure decisions of each
//! reconcile, carried out by the coordinator.
//!
//! - `storage: Move`: the source's claims are handed over (PV reclaim Retain, PV and PVC copied
//!   into the destination) before the grow, so the ordinal starts on its own volume.
//! - `storage: Detached`: the destination's claims of the ordinal that were there when the move
//!   was recorded (`status.moves[].staleClaims`: left by an earlier run there) are retired before
//!   the grow, so that it starts on a fresh claim rather than on data older than its run
//!   elsewhere; a claim made after that is the destination's own for this arrival and is never
//!   touched. The claims it leaves in its source stay until it is Ready in its destination
//!   ([`left_behind`]): until then the move can be rolled back onto them.
//!
//! Either way the gate holds every grow of the ordinal, whatever the move's phase, until its
//! storage is dealt with: the planner may let a grow through on its confirmation rule while the
//! move is still recorded as `Draining`. The work itself is done only once the source is
//! confirmed not to run the ordinal (`Released`), never before, and never after the grow. A
//! member that is unreachable holds only its own ordinals, and no request is sent to it; a
//! fenced source's volumes stay behind by the rules of failover (the ordinal starts on fresh
//! claims, and a condition says so).
//!
//! Every retirement names the claims by the uid and resourceVersion this reconcile observed,
//! and the member deletes exactly that version: a claim that changed since (bound again, taken
//! back into use) is decided again, never deleted on a later read.

use std::collections::BTreeMap;

use spanset_api::{MoveStatus, StaleClaims, StorageMode};
use spanset_plan::{Observed, Ordinal};

use super::{Inputs, homes};
use crate::{
    actors::messages::MemberView,
    decisions::move_phase::{self, MovePhase},
    member::cache::ClaimRecord,
};

/// What a storage step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoverKind {
    /// `storage: Move`: the source's volumes go to the destination.
    Move,
    /// `storage: Detached`: claims of the ordinal that are older than its data are deleted,
    /// in the destination before it arrives (`arrival`) or, once it is Ready in its home, in
    /// the member it left (`from`); `keep_volume` sets their volumes to Retain first
    /// (`staleClaims: Release`).
    Retire {
        /// Keep each claim's volume (reclaim policy Retain) when its claim is deleted.
        keep_volume: bool,
        /// The claims are in the destination (`to`), not the member it left (`from`).
        arrival: bool,
    },
}

/// One ordinal's storage step, carried out before the writes of the round.
#[derive(Debug, Clone, PartialEq)]
pub struct Handover {
    /// The ordinal.
    pub ordinal: Ordinal,
    /// Source member (for a retirement after the run: the member it left).
    pub from: String,
    /// Destination member (for a retirement after the run: where it is Ready).
    pub to: String,
    /// The claims concerned, as this reconcile observed them (uid and resourceVersion: a
    /// retirement deletes exactly these versions).
    pub claims: Vec<ClaimRecord>,
    /// What is done with them.
    pub kind: HandoverKind,
}

impl Handover {
    /// The claims' names, for messages.
    pub fn claim_names(&self) -> String {
        names(&self.claims)
    }
}

fn names(claims: &[ClaimRecord]) -> String {
    claims.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
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

fn live(claims: Vec<ClaimRecord>) -> Vec<ClaimRecord> {
    claims.into_iter().filter(|c| !c.deleting).collect()
}

/// The uids of `k`'s live claims in a member, as a move records them when it takes that member
/// as its destination (`status.moves[].staleClaims`); `None` while the member's records are not
/// known (no report yet, or its watches have not listed).
pub fn stale_claims_in(view: Option<&MemberView>, k: Ordinal) -> Option<Vec<String>> {
    let view = view.filter(|v| v.synced)?;
    Some(live(claims_of(Some(view), k)).into_iter().map(|c| c.uid).collect())
}

fn storage(inp: &Inputs<'_>) -> StorageMode {
    inp.fsts.spec.migration.storage.unwrap_or(StorageMode::Detached)
}

fn keep_volume(inp: &Inputs<'_>) -> bool {
    inp.fsts.spec.migration.stale_claims.unwrap_or_default() == StaleClaims::Release
}

/// The claims `k`'s storage still needs dealt with before it may grow in `to`, and how:
/// `None` when nothing is due. `stale` is what the move recorded of the destination's claims
/// (`status.moves[].staleClaims`).
///
/// `Move`: none when the source has no claims or the destination holds every one for the
/// same volume. `Detached`: the destination's live claims among `stale` (none when nothing was
/// recorded: nothing older is known); none when the ordinal goes back to where it came from.
///
/// Where the ordinal last ran (`status.homes`) overrides both: if that is the destination, its
/// claims there are its newest (the source's were never used since, e.g. it was re-homed there
/// while the destination was fenced and never ran), so nothing is handed over and nothing of
/// the destination's is retired.
pub fn due(
    inp: &Inputs<'_>,
    k: Ordinal,
    from: &str,
    to: &str,
    stale: Option<&[String]>,
) -> Option<(HandoverKind, Vec<ClaimRecord>)> {
    let view = |c: &str| inp.members.get(c).and_then(|m| m.view.as_deref());
    let home_is_destination = inp.rules.handover_gate && homes::of(inp, k).as_deref() == Some(to);
    if home_is_destination {
        return None;
    }
    match storage(inp) {
        StorageMode::Move => {
            let source = claims_of(view(from), k);
            let there = claims_of(view(to), k);
            let arrived =
                source.iter().all(|c| there.iter().any(|d| d.name == c.name && d.volume == c.volume && !d.deleting));
            (!source.is_empty() && !arrived).then_some((HandoverKind::Move, source))
        }
        StorageMode::Detached if from == to => None,
        StorageMode::Detached => {
            let kind = |arrival| HandoverKind::Retire { keep_volume: keep_volume(inp), arrival };
            if !inp.rules.retire_after_ready {
                // Only the model's planted bug: the claims it leaves retired before it runs
                // elsewhere (what was done before the rule).
                let leaving = live(claims_of(view(from), k));
                if !leaving.is_empty() {
                    return Some((kind(false), leaving));
                }
            }
            let stale = stale?;
            let older: Vec<ClaimRecord> =
                live(claims_of(view(to), k)).into_iter().filter(|c| stale.contains(&c.uid)).collect();
            (!older.is_empty()).then_some((kind(true), older))
        }
    }
}

/// The gate of move `m` of ordinal `k` this round (see the module doc).
pub fn gate(inp: &Inputs<'_>, obs: &Observed, m: &MoveStatus, k: Ordinal) -> Gate {
    let phase = MovePhase::read(&m.phase);
    let detached = storage(inp) == StorageMode::Detached;
    // Before the grow, a Detached move must know which of the destination's claims are older.
    if detached && m.stale_claims.is_none() && m.from != m.to && phase != MovePhase::Starting {
        return Gate::Held {
            handover: None,
            waiting: Some(format!("ordinal {k}: waiting for {} to report its claims", m.to)),
            refused: None,
        };
    }
    let Some((kind, claims)) = due(inp, k, &m.from, &m.to, m.stale_claims.as_deref()) else { return Gate::Open };
    if kind == HandoverKind::Move && inp.members.get(&m.from).is_some_and(|s| s.fenced) {
        return Gate::LeftBehind(format!(
            "ordinal {k}: {} left in fenced {} (failover: it starts on fresh claims)",
            names(&claims),
            m.from
        ));
    }
    // Before the release is confirmed nothing may touch the volumes; after the grow there is
    // nothing left to hand over, and nothing there is older than the arrival.
    if !move_phase::storage_may_be_touched(phase) {
        return Gate::held();
    }
    if let Some(why) = inp.handover_refusals.get(&k) {
        return Gate::Held { handover: None, waiting: None, refused: Some(format!("ordinal {k}: {why}")) };
    }
    let involved: &[&str] = match kind {
        HandoverKind::Move => &[&m.from, &m.to],
        HandoverKind::Retire { arrival: true, .. } => &[&m.to],
        HandoverKind::Retire { arrival: false, .. } => &[&m.from],
    };
    if let Some(c) = involved.iter().find(|c| obs.get(**c).is_none_or(|o| !o.reachable)) {
        return Gate::Held {
            handover: None,
            waiting: Some(format!("ordinal {k}: {c} is unreachable ({} wait there)", names(&claims))),
            refused: None,
        };
    }
    let handover = Handover { ordinal: k, from: m.from.clone(), to: m.to.clone(), claims, kind };
    Gate::Held { handover: Some(handover), waiting: None, refused: None }
}

/// With `storage: Detached`, the claims ordinals left behind, to retire now: an ordinal Ready
/// in its home (`homes`, updated this round) and moving no more has its live claims in every
/// other member that answers, is not fenced, and neither holds nor runs it (observed since its
/// last write) retired. Until the ordinal is Ready elsewhere its old claims are its way back:
/// a move whose destination never got it Ready is rolled back onto them.
pub fn left_behind(
    inp: &Inputs<'_>,
    obs: &Observed,
    homes: &homes::Homes,
    moves: &BTreeMap<Ordinal, MoveStatus>,
    range: std::ops::Range<Ordinal>,
) -> Vec<Handover> {
    if storage(inp) != StorageMode::Detached || !inp.rules.handover_gate {
        return Vec::new();
    }
    let keep_volume = keep_volume(inp);
    let runs_in_home = |k: Ordinal, home: &str| {
        inp.members.get(home).is_some_and(|m| !m.fenced)
            && obs.get(home).is_some_and(|o| o.reachable && o.written.contains(k) && o.ready.contains(k))
    };
    let mut out = Vec::new();
    for (name, member) in inp.members {
        if member.fenced {
            continue;
        }
        let Some(view) = member.view.as_deref().filter(|v| v.synced) else { continue };
        let Some(o) = obs.get(name).filter(|o| o.reachable && o.observed_since_write) else { continue };
        for (k, claims) in &view.claims {
            let k = *k;
            if !range.contains(&k) || moves.contains_key(&k) || o.written.contains(k) || o.pods.contains(k) {
                continue;
            }
            let Some(home) = homes.get(&k).filter(|h| *h != name && runs_in_home(k, h)) else { continue };
            let claims = live(claims.clone());
            if claims.is_empty() {
                continue;
            }
            out.push(Handover {
                ordinal: k,
                from: name.clone(),
                to: home.clone(),
                claims,
                kind: HandoverKind::Retire { keep_volume, arrival: false },
            });
        }
    }
    out
}
