//! Stage 5a: the plan and its gates. The planner keeps its moves within what the disruption
//! budget leaves once the pods unavailable for other reasons are counted (its liveness rules —
//! detours, parking — hold for any limit); the gates hold each step to it too, and to the
//! pod management policy.

use std::collections::BTreeMap;

use spanset_api::MoveStatus;
use spanset_plan as plan;
use spanset_plan::{Observed, Ordinal, Ordinals, Plan, Step};

use super::{availability::Availability, moves::phase_of, scope::Scope};
use crate::decisions::{move_phase, order_gates};

/// How many moves may run at once, and why no more.
pub(super) struct Budget {
    /// The limit: `maxConcurrentMoves`, or less when the disruption budget allows less.
    pub limit: u32,
    /// The field the limit comes from.
    pub source: String,
    /// Ordinals unavailable for reasons other than a recorded move.
    pub down_otherwise: u32,
    /// Every recorded move's ordinal (parked ones included).
    pub recorded_moving: Ordinals,
    /// The desired state as planned: its move limit is what the budget leaves.
    pub planned: plan::Desired,
}

/// The plan of this round, gated.
pub(super) struct Planning {
    /// The moves stored before this reconcile, by ordinal.
    pub recorded: BTreeMap<Ordinal, MoveStatus>,
    /// The plan, or none when the planner finds no placement.
    pub plan: Option<Plan>,
    /// Why the planner found no placement.
    pub error: Option<String>,
    /// The plan's steps that may run now, and what holds the others.
    pub gated: Option<order_gates::Gated>,
    /// The move budget.
    pub budget: Budget,
}

impl Planning {
    /// The steps that may run now.
    pub fn steps(&self) -> &[Step] {
        self.gated.as_ref().map(|g| g.steps.as_slice()).unwrap_or_default()
    }
}

/// Plans the round and gates its steps.
pub(super) fn plan(cx: &Scope<'_>, obs: &Observed, avail: &Availability) -> Planning {
    let recorded: BTreeMap<Ordinal, MoveStatus> =
        cx.previous.moves.iter().filter_map(|m| u32::try_from(m.ordinal).ok().map(|k| (k, m.clone()))).collect();
    let in_flight = |m: &MoveStatus| move_phase::follows_target(phase_of(m));
    let moving: Ordinals = recorded.iter().filter(|(_, m)| in_flight(m)).map(|(k, _)| *k).collect();
    let parked: Ordinals = recorded.iter().filter(|(_, m)| !in_flight(m)).map(|(k, _)| *k).collect();
    let budget = budget(cx, avail, recorded.keys().copied().collect());
    let balanced = cx.previous.balanced_placement.as_deref();
    let (plan, error) = match plan::plan_parked(&budget.planned, obs, &moving, &parked, balanced) {
        Ok(p) => (Some(p), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let gated = plan.as_ref().map(|p| {
        order_gates::gate(&order_gates::Context {
            name: &cx.name(),
            steps: &p.steps,
            obs,
            range: cx.desired.ordinals(),
            backend: cx.backend,
            ordered: cx.fsts.spec.template.pod_management_policy.as_deref() != Some("Parallel"),
            budget: budget.limit,
            budget_source: budget.source.clone(),
            unavailable: &avail.unavailable,
        })
    });
    Planning { recorded, plan, error, gated, budget }
}

/// The move budget: `maxConcurrentMoves`, or the disruption budget when smaller, less the
/// ordinals unavailable otherwise (at least one move, so the planner's detours stay live).
fn budget(cx: &Scope<'_>, avail: &Availability, recorded_moving: Ordinals) -> Budget {
    let desired = cx.desired;
    let limit = match &cx.fsts.spec.disruption {
        Some(d) => d.allowed_unavailable(desired.replicas).min(desired.max_concurrent_moves),
        None => desired.max_concurrent_moves,
    };
    let source = match &cx.fsts.spec.disruption {
        Some(d) if d.allowed_unavailable(desired.replicas) < desired.max_concurrent_moves => {
            let field = if d.max_unavailable.is_some() { "maxUnavailable" } else { "minAvailable" };
            format!("spec.disruption.{field}")
        }
        _ => "spec.migration.maxConcurrentMoves".to_string(),
    };
    let down_otherwise = u32::try_from((&avail.unavailable - &recorded_moving).len()).unwrap_or(u32::MAX);
    let planned =
        plan::Desired { max_concurrent_moves: limit.saturating_sub(down_otherwise).max(1), ..desired.clone() };
    Budget { limit, source, down_otherwise, recorded_moving, planned }
}
