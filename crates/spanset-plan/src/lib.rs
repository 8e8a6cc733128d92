//! The planner: pure functions from what is wanted and what is observed to the target slices
//! and the next safe steps. No I/O, no async, no actors, no clock: everything it needs comes
//! in as arguments, so property tests can reach all of it.
//!
//! `plan` is what the coordinator calls on every observation; `plan_to_completion` simulates
//! cooperating clusters to show the whole sequence (what `spanset plan` prints).

pub mod divide;
pub mod keep;
pub mod members;
mod sets;
pub mod steps;
pub mod types;
pub mod validate;

pub use types::*;
pub use validate::{MAX_NAME_LEN, SpecError, validate, validate_names};

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The spec is impossible; every problem names its field.
    #[error("invalid spec: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<SpecError>),
    /// No target exists for the clusters that can take part.
    #[error(transparent)]
    NoTarget(#[from] divide::DivideError),
    /// The simulation made no progress (a planner bug or an impossible observation).
    #[error("no safe step leads on from here: {0}")]
    Stuck(String),
    /// The moves in flight wait on moves that `maxConcurrentMoves` leaves no room for
    /// ([`Plan::stalled`]); the message names the field and the ordinals.
    #[error("{0}")]
    Stalled(String),
}

/// Why a stalled plan cannot go on, naming the field to change: what the coordinator's
/// condition and `spanset plan` both say.
pub fn stall_message(d: &Desired, in_flight: &Ordinals) -> String {
    format!(
        "spec.migration.maxConcurrentMoves: ordinal(s) {} in flight can land only after other moves (apps/v1 slices \
         that cross), and the limit of {} leaves no room for them; raise it by one to go on",
        ordinal_runs(in_flight).join(", "),
        d.max_concurrent_moves
    )
}

/// Plans from the current observation: the target, the safe steps now, the moves in flight.
/// `moving` is the set of ordinals recorded as moving (the durable `status.moves`). Costs the
/// number of clusters times the number of ranges in their sets, whatever the ordinals.
pub fn plan(d: &Desired, obs: &Observed, moving: &Ordinals) -> Result<Plan, PlanError> {
    plan_balanced(d, obs, moving, None)
}

/// [`plan`], given the placement the layout was last divided for by weight (the stored
/// `status.balancedPlacement`; `None` for none): with `onScale: Keep` and that placement
/// unchanged, the target of a change of replicas moves no surviving ordinal ([`keep`]).
pub fn plan_balanced(
    d: &Desired,
    obs: &Observed,
    moving: &Ordinals,
    balanced: Option<&str>,
) -> Result<Plan, PlanError> {
    plan_parked(d, obs, moving, &Ordinals::new(), balanced)
}

/// [`plan_balanced`], with the ordinals recorded as landing in a neighbour (`status.moves`
/// phase `Parked`, see [`steps::next_steps`]): they count against `maxConcurrentMoves` until
/// Ready there, and are no move a plan may release again meanwhile.
pub fn plan_parked(
    d: &Desired,
    obs: &Observed,
    moving: &Ordinals,
    parked: &Ordinals,
    balanced: Option<&str>,
) -> Result<Plan, PlanError> {
    let errs = validate(d);
    if !errs.is_empty() {
        return Err(PlanError::Invalid(errs));
    }
    let divide::Target { slices, excluded, placement, division } = divide::target(d, obs, balanced)?;
    let members = members::members(d, obs, &slices);
    let holders = steps::Holders::new(&members);
    let in_flight = steps::in_flight(&members, &holders, moving);
    let (steps, stalled) = steps::next_steps(d, &members, &holders, &in_flight, parked);
    let all_written = members.iter().filter(|m| m.observed).all(|m| {
        (!m.obs.reachable && m.obs.fenced) || m.target.as_ref().map_or(m.written.is_empty(), |t| m.written == *t)
    });
    let all_ready = members.iter().all(|m| m.target.as_ref().is_none_or(|want| want.is_subset(&m.obs.ready)));
    let done = steps.is_empty() && all_written && all_ready && in_flight.is_empty();
    // A division by weight is remembered once every slice is written as divided (readiness
    // is no part of the layout); until then the placement stored before stays while nothing
    // was written for the new one, so that a placement that changes back before any step (a
    // cluster fenced and unfenced at once) is kept again.
    let laid_out = steps.is_empty() && all_written && in_flight.is_empty() && !stalled;
    let balanced_placement = match division {
        divide::Division::Kept => Some(placement),
        divide::Division::Unkeepable => None,
        divide::Division::Weighted if laid_out => Some(placement),
        // Once a division for another placement writes anything, the slices are no longer the
        // ones balanced before: setting that placement back (a weight change undone mid-way,
        // its move rolled back) divides by weight again rather than keeping the half-done
        // layout.
        divide::Division::Weighted if balanced != Some(placement.as_str()) && !steps.is_empty() => None,
        divide::Division::Weighted => balanced.map(str::to_string),
    };
    let target = slices.into_iter().map(|(i, s)| (d.clusters[i].name.clone(), s)).collect();
    Ok(Plan {
        target,
        excluded: excluded.into_iter().map(|(i, e)| (d.clusters[i].name.clone(), e)).collect(),
        steps,
        in_flight,
        done,
        stalled,
        balanced_placement,
    })
}

/// The ordinals a step parks in a neighbour: a grow of ordinals outside that cluster's target
/// (see [`steps::next_steps`]). Once running there they are no longer moving.
pub fn parked_by(p: &Plan, step: &Step) -> Ordinals {
    match step {
        Step::Grow { cluster, acquires, .. } => {
            let target = p.target.iter().find(|(c, _)| c == cluster).map(|(_, t)| t.ordinals()).unwrap_or_default();
            acquires - &target
        }
        Step::Shrink { .. } => Ordinals::new(),
    }
}

/// Applies a step to an observation as a cooperating member would: the spec changes, then
/// its pods follow and are observed.
pub fn cooperate(obs: &mut Observed, step: &Step) {
    let o = obs.entry(step.cluster().to_string()).or_insert_with(|| ClusterObservation {
        reachable: true,
        compatible: true,
        ..Default::default()
    });
    o.written = step.slice().clone();
    o.pods = o.written.ordinals();
    o.ready = o.pods.clone();
    o.observed_since_write = true;
}

/// Plans every step to the target, assuming every member cooperates; returns the target and
/// the steps in order (rounds of steps flattened).
pub fn plan_to_completion(d: &Desired, obs: &Observed) -> Result<(Plan, Vec<Step>), PlanError> {
    plan_to_completion_balanced(d, obs, None)
}

/// [`plan_to_completion`] from a layout last divided by weight for `balanced` (see
/// [`plan_balanced`]); each round remembers what the one before would store, as the
/// coordinator does.
pub fn plan_to_completion_balanced(
    d: &Desired,
    obs: &Observed,
    balanced: Option<&str>,
) -> Result<(Plan, Vec<Step>), PlanError> {
    let first = plan_balanced(d, obs, &Ordinals::new(), balanced)?;
    let mut balanced = first.balanced_placement.clone();
    let mut obs = obs.clone();
    // Members that can act settle what they already show before the first round.
    for o in obs.values_mut().filter(|o| o.reachable) {
        o.observed_since_write = true;
    }
    let mut all = Vec::new();
    let mut moving = Ordinals::new();
    let limit = 4 * (d.replicas as usize + d.clusters.len() + 4);
    for _ in 0..limit {
        let p = plan_balanced(d, &obs, &moving, balanced.as_deref())?;
        balanced.clone_from(&p.balanced_placement);
        if p.done {
            return Ok((first, all));
        }
        if p.stalled {
            return Err(PlanError::Stalled(stall_message(d, &p.in_flight)));
        }
        if p.steps.is_empty() {
            // Nothing to write: only readiness is awaited, which cooperation has given.
            if p.in_flight.is_empty() {
                return Ok((first, all));
            }
            moving.clear();
            continue;
        }
        moving = p.in_flight.clone();
        // Released ordinals that some target holds start moving (the others leave the range).
        let placed: Ordinals = p.target.iter().flat_map(|(_, t)| t.ordinals().into_ranges()).collect();
        for s in &p.steps {
            if let Step::Shrink { releases, .. } = s {
                moving |= releases & &placed;
            }
            moving = &moving - &parked_by(&p, s);
            cooperate(&mut obs, s);
            all.push(s.clone());
        }
    }
    Err(PlanError::Stuck(format!("no convergence after {limit} rounds")))
}
