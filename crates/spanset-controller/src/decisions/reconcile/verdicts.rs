//! Stage 7a: the conditions of the round, each a verdict with its reason: `Blocked` (no
//! placement), `Ready` and `Progressing` (with the first of the reasons the federation is not
//! done), `Degraded`, `ClusterUnreachable`, `Updating`, `IdentityConflict`, `GuardsMissing`,
//! `ReplicasHeld`;
//! and the events they announce.

use kube::ResourceExt;
use spanset_api::FederatedStatefulSet;
use spanset_plan as plan;
use spanset_plan::{Exclusion, Ordinals};

use super::{
    Conflict,
    observation::incompatibility,
    scope::Scope,
    status::{MemberStanding, StatusInputs as Round},
};
use crate::{
    decisions::{
        rollout::Rollout,
        status::{Verdict, types},
    },
    host::events::Note,
    member::{objects::on_delete, protections::guards},
};

/// The conditions of the round.
pub(super) fn verdicts(cx: &Scope<'_>, round: &Round<'_>, standing: &MemberStanding<'_>, done: bool) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    match &round.planning.error {
        Some(e) => verdicts.push(Verdict::yes(types::BLOCKED, "NoPlacement", e.clone())),
        None => verdicts.push(Verdict::no(types::BLOCKED, "Planned", "")),
    }
    if done {
        let ready = format!("{}/{} ready", standing.ready_total, cx.desired.replicas);
        verdicts.push(Verdict::yes(types::READY, "AllReady", ready));
        verdicts.push(Verdict::no(types::PROGRESSING, "Complete", "every slice is as targeted"));
    } else {
        let (reason, why) = not_done(cx, round, standing);
        verdicts.push(Verdict::no(types::READY, reason, why.clone()));
        verdicts.push(Verdict::yes(types::PROGRESSING, reason, why));
    }
    verdicts.push(degraded(cx, round));
    verdicts.push(if standing.unreachable.is_empty() {
        Verdict::no(types::CLUSTER_UNREACHABLE, "AllReachable", "")
    } else {
        let msg = format!("not answering: {}", standing.unreachable.join(", "));
        Verdict::yes(types::CLUSTER_UNREACHABLE, "Unreachable", msg)
    });
    verdicts.push(updating(&round.avail.roll, on_delete(cx.fsts)));
    verdicts.push(identity_conflict(cx, &round.avail.conflicts));
    verdicts.push(guards_missing(cx));
    verdicts.push(pods_unguarded(cx));
    verdicts.push(match cx.replicas_held {
        Some((reason, message)) => Verdict::yes(types::REPLICAS_HELD, reason, message.clone()),
        None => Verdict::no(types::REPLICAS_HELD, "WithinBounds", ""),
    });
    verdicts
}

/// Why the federation is not done: the reason and message of `Ready` (False) and
/// `Progressing` (True), the first that applies of: storage refused or waiting, members not
/// reported, members unconfirmed, stamping, a gate's hold, the disruption budget, a move whose
/// pod cannot run in its destination, the move limit, moves running, members unreachable.
fn not_done(cx: &Scope<'_>, round: &Round<'_>, standing: &MemberStanding<'_>) -> (&'static str, String) {
    let (moves, planning) = (round.moves, round.planning);
    let budget = &planning.budget;
    let plan = planning.plan.as_ref();
    if !moves.refused.is_empty() {
        ("HandoverRefused", format!("storage cannot follow: {}", moves.refused.join("; ")))
    } else if !moves.storage_waits.is_empty() {
        ("HandoverWaiting", format!("storage cannot follow yet: {}", moves.storage_waits.join("; ")))
    } else if !standing.missing.is_empty() {
        ("WaitingForMembers", format!("no report yet from {}", standing.missing.join(", ")))
    } else if !round.unstamped.is_empty() {
        (
            "MembersUnconfirmed",
            format!(
                "{} cannot be reached and does not carry term {} yet: a write of an earlier leader may still \
                 land there, so no ordinal starts anywhere until it answers or is fenced",
                round.unstamped.join(", "),
                cx.inp.term
            ),
        )
    } else if round.stamping {
        ("Writing", "writing member StatefulSets in this term".to_string())
    } else if let Some((reason, why)) = planning.gated.as_ref().and_then(|g| g.held.first()) {
        (*reason, why.clone())
    } else if budget.down_otherwise > 0 && plan.is_some_and(|p| !p.done) {
        let down: Vec<String> = (&round.avail.unavailable - &budget.recorded_moving)
            .iter()
            .take(5)
            .map(|k| format!("{}-{k}", cx.name()))
            .collect();
        (
            "DisruptionBudget",
            format!(
                "{} pod(s) unavailable ({}) count against {} {}: at most {} move(s) at once",
                budget.down_otherwise,
                down.join(", "),
                budget.source,
                budget.limit,
                budget.planned.max_concurrent_moves.min(budget.limit.saturating_sub(budget.down_otherwise))
            ),
        )
    } else if let Some(why) = stuck_move(cx, round) {
        ("MoveStuck", why)
    } else if let Some(p) = plan.filter(|p| p.stalled) {
        ("MoveLimit", plan::stall_message(cx.desired, &p.in_flight))
    } else if !moves.moves.is_empty() {
        ("Migrating", format!("{} ordinal(s) moving", moves.moves.len()))
    } else if !standing.holding_unreachable.is_empty() {
        (
            "MembersUnreachable",
            format!(
                "{} cannot be reached: what it runs there is unknown and cannot be written",
                standing.holding_unreachable.join(", ")
            ),
        )
    } else {
        ("Reconciling", format!("{}/{} ready", standing.ready_total, cx.desired.replicas))
    }
}

/// A move grown into its destination whose pod there cannot run (an image that cannot be
/// pulled, a container that keeps failing): what keeps it, and what the user can do about it.
fn stuck_move(cx: &Scope<'_>, round: &Round<'_>) -> Option<String> {
    round.moves.moves.iter().find_map(|(k, m)| {
        if super::moves::phase_of(m) != crate::decisions::move_phase::MovePhase::Starting {
            return None;
        }
        let view = cx.view_of(&m.to)?;
        // Released from the identity gate (a gated pod waits for spanset, not for the member),
        // and kept by something that does not pass by itself: a pod still pulling its image or
        // starting its containers is only slow, as every pod of every move is for a while.
        let trouble = view.federation.pods.get(k).filter(|p| !p.ready && !p.gated())?.trouble.clone()?;
        if !crate::decisions::rollout::stuck(&trouble) {
            return None;
        }
        Some(format!(
            "{}-{k} cannot run in {} ({trouble}): fix what keeps it there, or put the placement back and it \
             returns to {} on its own claims",
            cx.name(),
            m.to,
            m.from
        ))
    })
}

/// The `GuardsMissing` condition: each placement member whose release lacks a guard spanset
/// relies on, with its version and what the federation loses there (members not read yet are
/// not named).
fn guards_missing(cx: &Scope<'_>) -> Verdict {
    let mut lacking = Vec::new();
    for c in &cx.placement {
        let Some(view) = cx.view_of(c) else { continue };
        let version = view.server_version.clone().unwrap_or_else(|| "version unread".into());
        for g in guards(&view.guard_facts()).into_iter().filter(|g| !g.in_force) {
            let mut message = g.message.clone();
            if cx.leased && g.name == crate::member::protections::ADMISSION_POLICIES {
                // The pod Lease's own protection is one of those policies.
                message += &format!(
                    "; nor writes of the pod Lease {}-pods by anyone but spanset: whoever may update Leases in {} \
                        there can keep its pods running past spanset's lapse",
                    cx.name(),
                    cx.fsts.namespace().unwrap_or_default()
                );
            }
            lacking.push(format!("{c} ({version}) lacks {}: {message}", g.name));
        }
    }
    if lacking.is_empty() {
        Verdict::no(types::GUARDS_MISSING, "AllGuardsInForce", "")
    } else {
        Verdict::yes(types::GUARDS_MISSING, "GuardsMissing", lacking.join("; "))
    }
}

/// The `PodsUnguarded` condition of a federation with a pod lease: each member whose pods
/// spanset has not seen guarded (it is then not fenced by a lapse: it waits for a fence as
/// without a lease), naming the pods and why, and each pod whose guard fails closed (it does not
/// start), in the guard's own words.
fn pods_unguarded(cx: &Scope<'_>) -> Verdict {
    if !cx.leased {
        return Verdict::no(types::PODS_UNGUARDED, "NoPodLease", "");
    }
    let uid = cx.fsts.metadata.uid.as_deref();
    let (mut unseen, mut failing) = (Vec::new(), Vec::new());
    for (member, m) in cx.inp.members {
        let Some(view) = m.view.as_ref() else { continue };
        let f = &view.federation;
        if f.sts.is_none() && f.pods.is_empty() {
            continue;
        }
        let why = f.unguarded(&cx.name(), uid);
        if !why.is_empty() {
            unseen.push(format!("in {member}, {}", why.join("; ")));
        }
        failing.extend(f.failing_guards(&cx.name()).into_iter().map(|w| format!("{w} (in {member})")));
    }
    match (unseen.is_empty(), failing.is_empty()) {
        (true, true) => Verdict::no(types::PODS_UNGUARDED, "AllPodsGuarded", ""),
        (false, _) => {
            let mut message = format!(
                "not fenced by a lapse of its lease while these stand (a member cut off waits for a fence as without a \
                    lease): {}",
                unseen.join("; ")
            );
            if !failing.is_empty() {
                message += &format!("; guards failing closed: {}", failing.join("; "));
            }
            Verdict::yes(types::PODS_UNGUARDED, "GuardsNotSeen", message)
        }
        (true, false) => Verdict::yes(
            types::PODS_UNGUARDED,
            "GuardsFailing",
            format!("these pods' guards keep them from starting: {}", failing.join("; ")),
        ),
    }
}

/// The `Degraded` condition: members the plan excludes (and duplicates), and volumes left
/// behind in fenced members.
fn degraded(cx: &Scope<'_>, round: &Round<'_>) -> Verdict {
    let excluded: Vec<String> = round
        .planning
        .plan
        .as_ref()
        .map(|p| p.excluded.iter().map(|(c, e)| exclusion(cx, c, e)).collect())
        .unwrap_or_default();
    let excluded: Vec<String> = excluded.into_iter().chain(cx.duplicates.iter().cloned()).collect();
    let left: Vec<&str> = round.moves.left_behind.values().map(String::as_str).collect();
    let strays = strays(cx);
    let verdict = match (excluded.is_empty(), left.is_empty()) {
        (true, true) if !strays.is_empty() => {
            return Verdict::yes(types::DEGRADED, "StrayPods", strays_message(&strays));
        }
        (true, true) => Verdict::no(types::DEGRADED, "AllMembersEligible", ""),
        (true, false) => Verdict::yes(types::DEGRADED, "VolumesLeftBehind", left.join("; ")),
        (false, true) => {
            Verdict::yes(types::DEGRADED, "MembersExcluded", format!("no slice for {}", excluded.join(", ")))
        }
        (false, false) => Verdict::yes(
            types::DEGRADED,
            "MembersExcluded",
            format!("no slice for {}; {}", excluded.join(", "), left.join("; ")),
        ),
    };
    if strays.is_empty() {
        verdict
    } else {
        Verdict::yes(types::DEGRADED, &verdict.reason, format!("{}; {}", verdict.message, strays_message(&strays)))
    }
}

/// What `Degraded` says of the pods spanset's guards did not keep.
fn strays_message(strays: &[String]) -> String {
    format!(
        "pods outside spanset's guards run ordinals of the federation, which start nowhere else while these exist \
         (delete them in their member): {}",
        strays.join(", ")
    )
}

/// One excluded member, with why, as `Degraded` names it.
fn exclusion(cx: &Scope<'_>, c: &str, e: &Exclusion) -> String {
    let why = cx.view_of(c).and_then(|v| incompatibility(&v, cx.backend, cx.leased));
    let left: Ordinals = cx.view_of(c).map(|v| v.federation.pods.keys().copied().collect()).unwrap_or_default();
    match (e, why) {
        (Exclusion::Incompatible, Some(why)) => match cx.view_of(c).and_then(|v| v.server_version.clone()) {
            Some(version) => format!("{c} (Incompatible: {why}; Kubernetes {version})"),
            None => format!("{c} (Incompatible: {why})"),
        },
        (Exclusion::Fenced, _) if !left.is_empty() => {
            format!(
                "{c} (Fenced; it still reports pods of ordinals {}, counted nowhere)",
                plan::ordinal_runs(&left).join(",")
            )
        }
        _ => format!("{c} ({e:?})"),
    }
}

/// The `Updating` condition: True while pods from the partition up run an older template.
fn updating(roll: &Rollout, on_delete: bool) -> Verdict {
    if roll.complete {
        return Verdict::no(types::UPDATING, "Updated", format!("every pod runs revision {}", roll.update_revision));
    }
    if on_delete {
        return Verdict::yes(
            types::UPDATING,
            "OnDelete",
            format!(
                "{} pod(s) run an older template and are replaced when deleted (updateStrategy OnDelete)",
                roll.current
            ),
        );
    }
    let (reason, why) = match &roll.waiting {
        Some(w) if w.stuck => ("RolloutStuck", w.message.clone()),
        Some(w) => ("RollingUpdate", w.message.clone()),
        None => ("RollingUpdate", "replacing pods".to_string()),
    };
    Verdict::yes(
        types::UPDATING,
        reason,
        format!("{} pod(s) updated to revision {}; {why}", roll.updated, roll.update_revision),
    )
}

/// The `IdentityConflict` condition: True, naming every ordinal seen running in two members and
/// where, while it lasts; a pod there that spanset's guards did not keep (its label removed,
/// or no StatefulSet made it) is said to be one.
fn identity_conflict(cx: &Scope<'_>, conflicts: &[Conflict]) -> Verdict {
    if conflicts.is_empty() {
        return Verdict::no(types::IDENTITY_CONFLICT, "NoConflict", "");
    }
    let name = cx.name();
    let each: Vec<String> = conflicts
        .iter()
        .map(|c| {
            let strays: Vec<String> = c
                .members
                .iter()
                .filter_map(|m| Some(format!("in {m}: {}", cx.view_of(m)?.federation.pods.get(&c.ordinal)?.stray()?)))
                .collect();
            let strays = if strays.is_empty() { String::new() } else { format!(" ({})", strays.join("; ")) };
            format!("{name}-{} runs in {}{strays}", c.ordinal, c.members.join(" and "))
        })
        .collect();
    Verdict::yes(types::IDENTITY_CONFLICT, "RunningTwice", each.join("; "))
}

/// The pods of the federation, in any member that reports, that spanset's guards did not keep
/// ([`crate::member::cache::PodRecord::stray`]): `redis-3 in east (its
/// spanset.dev/federation label was removed)`.
fn strays(cx: &Scope<'_>) -> Vec<String> {
    let name = cx.name();
    let mut out = Vec::new();
    for (member, m) in cx.inp.members {
        let Some(view) = m.view.as_ref() else { continue };
        for (k, p) in &view.federation.pods {
            if let Some(why) = p.stray() {
                out.push(format!("{name}-{k} in {member} ({why})"));
            }
        }
    }
    out
}

/// Events of the conditions: a new hold of replicas; each pod the rollout's cursor lets
/// through; a stuck rollout once per stuck pod state.
pub(super) fn notes(cx: &Scope<'_>, roll: &Rollout) -> Vec<Note> {
    let mut notes = Vec::new();
    if let Some((reason, message)) = cx.replicas_held
        && !cx
            .previous
            .conditions
            .iter()
            .any(|c| c.type_ == types::REPLICAS_HELD && c.status == "True" && c.reason == *reason)
    {
        notes.push(Note::warning(reason, message.clone()));
    }
    rollout_notes(roll, cx.previous, cx.fsts, &mut notes);
    notes
}

/// The Warning Event of a `PodsUnguarded` condition whose message is new: every change of which
/// pods go unguarded, or whose guard fails, is said once.
pub(super) fn unguarded_note(
    previous: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    verdict: &Verdict,
) -> Option<Note> {
    if verdict.type_ != types::PODS_UNGUARDED || !verdict.status {
        return None;
    }
    let said =
        previous.iter().any(|c| c.type_ == types::PODS_UNGUARDED && c.status == "True" && c.message == verdict.message);
    (!said).then(|| Note::warning(&verdict.reason, verdict.message.clone()))
}

/// Events of the rollout: each pod the cursor lets through, and a stuck rollout once per
/// stuck pod state.
fn rollout_notes(
    roll: &Rollout,
    previous: &spanset_api::FederatedStatefulSetStatus,
    fsts: &FederatedStatefulSet,
    notes: &mut Vec<Note>,
) {
    for k in &roll.lowered {
        notes.push(Note::normal(
            "RollingUpdate",
            format!("{}-{k} may now be replaced with revision {}", fsts.name_any(), roll.update_revision),
        ));
    }
    if let Some(w) = roll.waiting.as_ref().filter(|w| w.stuck) {
        // Once per stuck pod: its state's wording changes (ErrImagePull, then ImagePullBackOff).
        let pod = format!("{}-{} in ", fsts.name_any(), w.ordinal);
        let already = previous
            .conditions
            .iter()
            .any(|c| c.type_ == types::UPDATING && c.reason == "RolloutStuck" && c.message.contains(&pod));
        if !already {
            notes.push(Note::warning("RolloutStuck", w.message.clone()));
        }
    }
}
