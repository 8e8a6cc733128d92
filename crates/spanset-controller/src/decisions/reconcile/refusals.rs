//! Stage 1: what only the controller can judge. A federation it refuses (duplicate members
//! only, an invalid spec, replicas above the ceiling, a StatefulSet of another API, an unknown
//! or unusable member, a template or a write a member refused) gets a `Blocked` condition
//! naming why, and nothing is written anywhere.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use spanset_api::{FederatedStatefulSet, FederatedStatefulSetStatus};
use spanset_plan as plan;
use spanset_plan::Backend;

use super::{Decision, Inputs, MemberInput};
use crate::{
    decisions::{
        bounds::{Judgement, ReplicaBounds, approved, judge},
        status::{Verdict, conditions, types},
    },
    host::events::Note,
    member::objects::backend,
};

/// A held change of replicas: the reason and message of `ReplicasHeld`.
pub(super) type Held = (&'static str, String);

/// A federation the refusals let through: what the later stages plan.
pub(super) struct Accepted<'a> {
    /// The federation without its duplicate members.
    pub fsts: Cow<'a, FederatedStatefulSet>,
    /// The desired state, within the controller's bounds on replicas.
    pub desired: plan::Desired,
    /// Why `desired` holds replicas other than the spec's, if it does.
    pub replicas_held: Option<Held>,
    /// The API of the member StatefulSets.
    pub backend: Backend,
    /// The placement's duplicate members, each with why (for the `Degraded` condition).
    pub duplicates: Vec<String>,
}

/// Why nothing may be written: the `Blocked` condition's reason and message.
pub(super) struct Refused {
    reason: &'static str,
    message: String,
}

impl Refused {
    fn new(reason: &'static str, message: String) -> Self {
        Refused { reason, message }
    }
}

/// The federation as the later stages plan it, or why it is refused.
pub(super) fn accept<'a>(inp: &Inputs<'a>, previous: &FederatedStatefulSetStatus) -> Result<Accepted<'a>, Refused> {
    let (fsts, duplicates) = without_duplicates(inp)?;
    let (desired, replicas_held) = desired(&fsts, previous, &inp.bounds)?;
    let backend = backend(&fsts);
    members_refusal(inp, &fsts, backend)?;
    Ok(Accepted { fsts, desired, replicas_held, backend, duplicates })
}

/// The decision of a refused federation: its status keeps everything but the conditions, and
/// a warning is recorded when the refusal is new.
pub(super) fn blocked(
    fsts: &FederatedStatefulSet,
    previous: &FederatedStatefulSetStatus,
    refused: Refused,
    wall: &Time,
) -> Decision {
    let Refused { reason, message } = refused;
    let verdicts = [Verdict::yes(types::BLOCKED, reason, message.clone()), Verdict::no(types::READY, reason, message)];
    let mut status = previous.clone();
    status.observed_generation = fsts.metadata.generation;
    status.conditions = conditions(&previous.conditions, &verdicts, fsts.metadata.generation, wall);
    let already =
        previous.conditions.iter().any(|c| c.type_ == types::BLOCKED && c.status == "True" && c.reason == reason);
    let notes = if already { vec![] } else { vec![Note::warning(reason, verdicts[0].message.clone())] };
    Decision { status, blocked: true, notes, ..Default::default() }
}

/// The conditions of a round that tries a refused member's writes again: `Blocked` and `Ready`
/// stay the refusal's (with their transition times from before), so the condition does not
/// flip while the refusal is held; the other conditions are as decided.
pub(super) fn keep_blocked(
    status: &mut FederatedStatefulSetStatus,
    previous: &FederatedStatefulSetStatus,
    a: &super::AccessBlock,
    generation: Option<i64>,
    wall: &Time,
) {
    let verdicts = [
        Verdict::yes(types::BLOCKED, a.reason, a.message.clone()),
        Verdict::no(types::READY, a.reason, a.message.clone()),
    ];
    status.conditions.retain(|c| c.type_ != types::BLOCKED && c.type_ != types::READY);
    status.conditions.extend(conditions(&previous.conditions, &verdicts, generation, wall));
}

/// Duplicates are not placed: the federation is planned as if they were not listed. Answers
/// the federation without them and each with why; refused when nothing else is placed.
fn without_duplicates<'a>(inp: &Inputs<'a>) -> Result<(Cow<'a, FederatedStatefulSet>, Vec<String>), Refused> {
    let duplicates: Vec<String> = inp
        .fsts
        .spec
        .placement
        .clusters
        .iter()
        .filter_map(|c| {
            Some(format!("{} (DuplicateCluster: {})", c.name, inp.members.get(&c.name)?.duplicate.as_ref()?))
        })
        .collect();
    if duplicates.is_empty() {
        return Ok((Cow::Borrowed(inp.fsts), duplicates));
    }
    let mut f = inp.fsts.clone();
    f.spec.placement.clusters.retain(|c| inp.members.get(&c.name).is_none_or(|m| m.duplicate.is_none()));
    if f.spec.placement.clusters.is_empty() {
        let msg = format!("spec.placement.clusters: no member can be used: {}", duplicates.join("; "));
        return Err(Refused::new("DuplicateCluster", msg));
    }
    Ok((Cow::Owned(f), duplicates))
}

/// The desired state of a valid spec, within the controller's bounds on replicas.
fn desired(
    fsts: &FederatedStatefulSet,
    previous: &FederatedStatefulSetStatus,
    bounds: &ReplicaBounds,
) -> Result<(plan::Desired, Option<Held>), Refused> {
    let names = spanset_plan::validate_names(
        fsts.metadata.name.as_deref().unwrap_or_default(),
        fsts.metadata.namespace.as_deref().unwrap_or("default"),
        &fsts.spec.template.service_name,
    );
    let joined = |errs: &[plan::SpecError]| errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    // A pod lease's guard needs things of the pod template only the controller checks.
    let mut names = names;
    if fsts.spec.failover.pod_lease.is_some() {
        names.extend(crate::pod_lease::inject::refusals(&fsts.spec.template.template));
    }
    let desired = match fsts.spec.to_desired() {
        Ok(d) if names.is_empty() => d,
        Ok(_) => return Err(Refused::new("InvalidSpec", joined(&names))),
        Err(mut errs) => {
            errs.extend(names);
            return Err(Refused::new("InvalidSpec", joined(&errs)));
        }
    };
    bounded(fsts, previous, desired, bounds).map_err(|msg| Refused::new("ReplicasAboveCeiling", msg))
}

/// The desired state within the controller's bounds on replicas: as specified, or held at
/// the replicas accepted before with the reason and message of `ReplicasHeld`; an error for a
/// federation never accepted whose replicas are above the ceiling.
fn bounded(
    fsts: &FederatedStatefulSet,
    previous: &FederatedStatefulSetStatus,
    mut desired: plan::Desired,
    bounds: &ReplicaBounds,
) -> Result<(plan::Desired, Option<Held>), String> {
    let accepted = previous.accepted_replicas.and_then(|r| u32::try_from(r).ok());
    match judge(desired.replicas, accepted, approved(fsts), bounds) {
        Judgement::Accept => Ok((desired, None)),
        Judgement::Hold { at, reason, message } => {
            desired.replicas = at;
            Ok((desired, Some((reason, message))))
        }
        Judgement::Refuse { message } => Err(message),
    }
}

/// What the members forbid: a StatefulSet of another API, an unknown or unusable placement
/// member, a template or carried object a member refused in a dry run, a write it refused.
fn members_refusal(inp: &Inputs<'_>, fsts: &FederatedStatefulSet, backend: Backend) -> Result<(), Refused> {
    if let Some(msg) = backend_mismatch(inp, backend) {
        return Err(Refused::new("BackendMismatch", msg));
    }
    for (i, c) in fsts.spec.placement.clusters.iter().enumerate() {
        match inp.members.get(&c.name) {
            None | Some(MemberInput { exists: false, .. }) => {
                let msg = format!("spec.placement.clusters[{i}].name: no MemberCluster named {:?}", c.name);
                return Err(Refused::new("UnknownCluster", msg));
            }
            Some(MemberInput { unusable: Some(why), .. }) => {
                let msg = format!("spec.placement.clusters[{i}].name: member {:?} cannot be used: {why}", c.name);
                return Err(Refused::new("MemberUnusable", msg));
            }
            _ => {}
        }
    }
    if let Some(r) = &inp.template_refusal {
        return Err(Refused::new(r.reason, r.message.clone()));
    }
    if let Some(a) = inp.access_refusal.as_ref().filter(|a| a.blocks) {
        return Err(Refused::new(a.reason, a.message.clone()));
    }
    Ok(())
}

/// Why nothing may be written when a member holds this federation's StatefulSet in the API
/// that `spec.backend` does not name (the backend was changed, or someone created one): the
/// two objects would each run pods, and spanset does not convert one into the other.
fn backend_mismatch(inp: &Inputs<'_>, backend: Backend) -> Option<String> {
    let api = |b: Backend| match b {
        Backend::StatefulSet => "apps/v1 StatefulSet",
        Backend::AdvancedStatefulSet => "Advanced StatefulSet (apps.kruise.io)",
    };
    let holders: Vec<String> = inp
        .members
        .iter()
        .filter_map(|(name, m)| {
            let f = &m.view.as_ref()?.federation;
            let foreign = [&f.sts, &f.other_kind].into_iter().flatten().find(|s| s.kind != backend)?;
            Some(format!("{name} ({})", api(foreign.kind)))
        })
        .collect();
    (!holders.is_empty()).then(|| {
        format!(
            "spec.backend: {backend:?}, but this federation's StatefulSet is of another API in {}; spanset does not \
             convert between the two (each would run its own pods): set spec.backend back, or delete the federation \
             and create it again",
            holders.join(", ")
        )
    })
}
