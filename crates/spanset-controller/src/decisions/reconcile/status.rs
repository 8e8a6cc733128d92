//! Stage 7b: the status to store. Each member's slice as last seen (with its Ready count), the
//! conditions (see [`super::verdicts`]), the moves as advanced, the rollout's revisions and
//! cursor, the replicas accepted — and whether the status must be stored before the writes.

use spanset_api::{FederatedStatefulSetStatus, MoveStatus, SliceStatus};
use spanset_plan::Observed;

use super::{
    PodDelete, StsWrite, availability::Availability, moves::Moves, planning::Planning, scope::Scope, verdicts,
};
use crate::{
    decisions::status::conditions,
    host::events::Note,
    pod_lease::in_force::{MemberLeases, in_force},
};

/// What the earlier stages of the round decided, for the status.
pub(super) struct StatusInputs<'a> {
    /// Members that cannot be reached and do not carry this term.
    pub unstamped: &'a [String],
    /// What runs.
    pub avail: &'a Availability,
    /// Whether the round stamps (and so changes no slice).
    pub stamping: bool,
    /// Every member StatefulSet write of the round.
    pub writes: &'a [StsWrite],
    /// Pods deleted in fenced members that answer again.
    pub pod_deletes: &'a [PodDelete],
    /// The plan and its gates.
    pub planning: &'a Planning,
    /// The recorded moves as advanced.
    pub moves: &'a Moves,
}

/// Where the members stand, as the conditions report it.
pub(super) struct MemberStanding<'a> {
    /// Pods Ready in the slices counted.
    pub ready_total: i32,
    /// Each unreachable placement member, with why its latest call failed.
    pub unreachable: Vec<String>,
    /// Placement members with no report yet.
    pub missing: Vec<&'a str>,
    /// Unfenced members that cannot be reached and hold something: they may run anything of
    /// the federation, with any template, so the federation is not done while one does.
    pub holding_unreachable: Vec<&'a str>,
}

/// The status of the round.
pub(super) struct Report {
    /// The status to store.
    pub status: FederatedStatefulSetStatus,
    /// Every slice as targeted and every ordinal Ready.
    pub done: bool,
    /// Store the status before the writes.
    pub persist_first: bool,
    /// Events of the conditions (after the moves' own).
    pub notes: Vec<Note>,
}

/// The status of the round.
pub(super) fn report(cx: &Scope<'_>, obs: &Observed, round: &StatusInputs<'_>) -> Report {
    let slices = slices(cx, obs);
    let standing = standing(cx, obs, &slices);
    let plan = round.planning.plan.as_ref();
    let done = plan.is_some_and(|p| p.done)
        && round.writes.is_empty()
        && round.pod_deletes.is_empty()
        && standing.holding_unreachable.is_empty();
    let verdicts = verdicts::verdicts(cx, round, &standing, done);
    let mut notes = verdicts::notes(cx, &round.avail.roll);
    notes.extend(verdicts.iter().filter_map(|v| verdicts::unguarded_note(&cx.previous.conditions, v)));
    let roll = &round.avail.roll;
    let desired = cx.desired;
    let previous = cx.previous;
    // Any change of the recorded moves is stored before the writes of the round; so is the
    // rollout's cursor, before any member is written with it.
    let moves: Vec<MoveStatus> = round.moves.moves.values().cloned().collect();
    // A longer pod lease is stored before any member's template carries it.
    let pod_lease_seconds = pod_lease_in_force(cx, obs);
    let persist_first = round.moves.persist_first
        || previous.pod_lease_seconds != pod_lease_seconds
        || moves != previous.moves
        || previous.accepted_replicas != Some(desired.replicas as i32)
        || previous.update_partition != Some(roll.cursor as i32)
        || previous.update_revision.as_deref() != Some(roll.update_revision.as_str());
    let generation = cx.fsts.metadata.generation;
    let status = FederatedStatefulSetStatus {
        observed_generation: generation,
        conditions: conditions(&previous.conditions, &verdicts, generation, &cx.wall),
        ready: Some(format!("{}/{}", standing.ready_total, desired.replicas)),
        ready_replicas: Some(standing.ready_total),
        clusters: Some(slices.iter().filter(|s| s.replicas > 0).count() as i32),
        moving: Some(moves.len() as i32),
        replicas: Some(existing_pods(obs)),
        label_selector: Some(spanset_api::selector_text(&cx.fsts.spec.template.selector)),
        slices,
        moves,
        // The homes of the round are set once its releases and grows are known.
        homes: previous.homes.clone(),
        current_revision: Some(roll.current_revision.clone()),
        update_revision: Some(roll.update_revision.clone()),
        current_replicas: Some(roll.current as i32),
        updated_replicas: Some(roll.updated as i32),
        available_replicas: Some(roll.available as i32),
        update_partition: Some(roll.cursor as i32),
        accepted_replicas: Some(desired.replicas as i32),
        pod_lease_seconds,
        // Without a plan (no placement) what was stored stays.
        balanced_placement: match plan {
            Some(p) => p.balanced_placement.clone(),
            None => previous.balanced_placement.clone(),
        },
    };
    Report { status, done, persist_first, notes }
}

/// The longest pod lease any pod may still hold (see [`in_force`]): every observed member
/// (placement members, and any other holding something) counts, and what it holds is known
/// only while it answers, unfenced, seen since spanset's last write.
fn pod_lease_in_force(cx: &Scope<'_>, obs: &Observed) -> Option<i32> {
    let members: Vec<MemberLeases> = obs
        .iter()
        .map(|(name, o)| {
            let view = cx.view_of(name).filter(|v| v.synced);
            let guards = view
                .as_deref()
                .map(|v| &v.federation)
                .map(|f| {
                    f.sts.iter().map(|s| s.guard_lease()).chain(f.pods.values().map(|p| p.guard_lease())).collect()
                })
                .unwrap_or_default();
            MemberLeases { known: view.is_some() && o.reachable && !o.fenced && o.observed_since_write, guards }
        })
        .collect();
    in_force(cx.fsts.spec.failover.pod_lease.map(|p| p.seconds), cx.previous.pod_lease_seconds, &members)
}

/// Each observed member's slice, in placement order then by name.
fn slices(cx: &Scope<'_>, obs: &Observed) -> Vec<SliceStatus> {
    let mut slices: Vec<SliceStatus> = obs
        .iter()
        .filter_map(|(name, o)| match cx.view_of(name).filter(|v| v.synced) {
            Some(view) => {
                view.federation.sts.as_ref()?;
                Some(SliceStatus {
                    cluster: name.clone(),
                    start: o.written.start as i32,
                    replicas: o.written.replicas as i32,
                    reserved_ordinals: o.written.reserved.iter().map(|k| k as i32).collect(),
                    // A fenced member is declared dead: its pods count for nothing (they show
                    // in the Degraded condition instead); an unreachable one's readiness is not
                    // known, only last seen.
                    ready_replicas: if o.fenced || !o.reachable {
                        0
                    } else {
                        (&o.written.ordinals() & &o.ready).len() as i32
                    },
                })
            }
            // Not reported yet: the slice it was last seen to hold stays in the status, which
            // is where the next reconcile (or the next leader) learns it from; none of its
            // pods counts as ready meanwhile.
            None => cx
                .previous
                .slices
                .iter()
                .find(|s| &s.cluster == name)
                .map(|s| SliceStatus { ready_replicas: 0, ..s.clone() }),
        })
        .collect();
    let order = |c: &str| cx.fsts.spec.placement.clusters.iter().position(|p| p.name == c).unwrap_or(usize::MAX);
    slices.sort_by(|a, b| order(&a.cluster).cmp(&order(&b.cluster)).then(a.cluster.cmp(&b.cluster)));
    slices
}

/// Where the members stand.
fn standing<'a>(cx: &Scope<'a>, obs: &'a Observed, slices: &[SliceStatus]) -> MemberStanding<'a> {
    let unreachable = obs
        .iter()
        .filter(|(n, o)| !o.reachable && cx.placement.contains(n.as_str()))
        .map(|(n, _)| match cx.view_of(n).and_then(|v| v.failure.clone()) {
            Some((why, _)) => format!("{n} ({})", why.reason()),
            None => n.clone(),
        })
        .collect();
    let missing = cx
        .placement
        .iter()
        .copied()
        .filter(|n| cx.inp.members.get(*n).is_none_or(|m| m.view.as_ref().is_none_or(|v| !v.synced)))
        .collect();
    let holding_unreachable = obs
        .iter()
        .filter(|(_, o)| !o.reachable && !o.fenced && (o.written.replicas > 0 || !o.pods.is_empty()))
        .map(|(n, _)| n.as_str())
        .collect();
    MemberStanding {
        ready_total: slices.iter().map(|s| s.ready_replicas).sum(),
        unreachable,
        missing,
        holding_unreachable,
    }
}

/// Pods of the federation that exist in reachable, unfenced members: what `status.replicas`
/// (the `/scale` subresource's current count) reports.
fn existing_pods(obs: &Observed) -> i32 {
    obs.values().filter(|o| o.reachable && !o.fenced).map(|o| o.pods.len()).sum::<u64>() as i32
}
