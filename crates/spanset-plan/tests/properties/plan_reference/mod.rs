//! The reference for `tests/suite/plan_differential.rs`: the planner as it was before it worked on
//! ranges (`src/plan` at commit 3dd08e9, one `BTreeSet` entry per ordinal), copied unchanged
//! but for the spec types and `validate`, which it takes from the crate (they did not change).
//! Slow and obviously per ordinal, which is the point: do not "fix" or speed it up.
//!
//! The planner: pure functions from what is wanted and what is observed to the target slices
//! and the next safe steps. No I/O, no async, no actors, no clock: everything it needs comes
//! in as arguments, so property tests can reach all of it.
//!
//! `plan` is what the coordinator calls on every observation; `plan_to_completion` simulates
//! cooperating clusters to show the whole sequence (what `spanset plan` prints).

pub mod divide;
pub mod keep;
pub mod steps;
pub mod types;

use std::collections::{BTreeMap, BTreeSet};

pub use spanset_plan::{SpecError, validate};
pub use types::*;

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
    /// The moves in flight wait on moves that `maxConcurrentMoves` leaves no room for.
    #[error("{0}")]
    Stalled(String),
}

/// Plans from the current observation: the target, the safe steps now, the moves in flight.
/// `moving` is the set of ordinals recorded as moving (the durable `status.moves`).
pub fn plan(d: &Desired, obs: &Observed, moving: &BTreeSet<Ordinal>) -> Result<Plan, PlanError> {
    plan_balanced(d, obs, moving, None)
}

/// [`plan`] from a layout last divided by weight for `balanced` (`status.balancedPlacement`).
pub fn plan_balanced(
    d: &Desired,
    obs: &Observed,
    moving: &BTreeSet<Ordinal>,
    balanced: Option<&str>,
) -> Result<Plan, PlanError> {
    let errs = validate(d);
    if !errs.is_empty() {
        return Err(PlanError::Invalid(errs));
    }
    let divide::Target { slices, excluded, placement, division } = divide::target(d, obs, balanced)?;
    let target: Vec<(String, Slice)> = slices.into_iter().map(|(i, s)| (d.clusters[i].name.clone(), s)).collect();
    let targets: BTreeMap<String, BTreeSet<Ordinal>> = target.iter().map(|(n, s)| (n.clone(), s.ordinals())).collect();
    let in_flight = steps::in_flight(&targets, obs, moving);
    let (steps, stalled) = steps::next_steps(d, obs, &targets, &in_flight, &BTreeSet::new());
    let all_written = obs.iter().all(|(n, o)| {
        o.written.ordinals() == targets.get(n).cloned().unwrap_or_default() || (!o.reachable && o.fenced)
    });
    let all_ready = targets.iter().all(|(n, want)| want.is_subset(&steps::observation(obs, n).ready));
    let done = steps.is_empty() && all_written && all_ready && in_flight.is_empty();
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

/// [`plan_to_completion`] from a layout last divided by weight for `balanced`; each round
/// remembers what the one before would store.
pub fn plan_to_completion_balanced(
    d: &Desired,
    obs: &Observed,
    balanced: Option<&str>,
) -> Result<(Plan, Vec<Step>), PlanError> {
    let first = plan_balanced(d, obs, &BTreeSet::new(), balanced)?;
    let mut balanced = first.balanced_placement.clone();
    let mut obs = obs.clone();
    // Members that can act settle what they already show before the first round.
    for o in obs.values_mut().filter(|o| o.reachable) {
        o.observed_since_write = true;
    }
    let mut all = Vec::new();
    let mut moving = BTreeSet::new();
    let limit = 4 * (d.replicas as usize + d.clusters.len() + 4);
    for _ in 0..limit {
        let p = plan_balanced(d, &obs, &moving, balanced.as_deref())?;
        balanced.clone_from(&p.balanced_placement);
        if p.done {
            return Ok((first, all));
        }
        if p.stalled {
            let in_flight: spanset_plan::Ordinals = p.in_flight.iter().copied().collect();
            return Err(PlanError::Stalled(spanset_plan::stall_message(d, &in_flight)));
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
        for s in &p.steps {
            if let Step::Shrink { releases, .. } = s {
                moving.extend(
                    releases.iter().copied().filter(|k| p.target.iter().any(|(_, t)| t.ordinals().contains(k))),
                );
            }
            // An ordinal parked in a neighbour is no longer moving once it runs there.
            if let Step::Grow { cluster, acquires, .. } = s {
                let target = p.target.iter().find(|(c, _)| c == cluster).map(|(_, t)| t.ordinals()).unwrap_or_default();
                for k in acquires.iter().filter(|k| !target.contains(k)) {
                    moving.remove(k);
                }
            }
            cooperate(&mut obs, s);
            all.push(s.clone());
        }
    }
    Err(PlanError::Stuck(format!("no convergence after {limit} rounds")))
}
