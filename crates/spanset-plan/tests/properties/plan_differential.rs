//! Differential test: the planner on ranges (`spanset_plan`) against `plan_reference`, a frozen
//! copy of the per-ordinal planner it replaced, over random specs, starting states and
//! interleavings of events (confirmations, partitions, heals, fences, weight edits, steps, and
//! here also pods turning unready, stale move records and changes of replicas, with either
//! `onScale` and a stored `balancedPlacement` carried from plan to plan). Small states as in
//! `plan_props`, and states of up to a few hundred ordinals on up to six clusters, scattered
//! ones included, on both backends. Both must agree on every plan — target, excluded
//! clusters, steps (their ordinals compared as sets), moves in flight, `done`, the placement to
//! remember — and on the whole `plan_to_completion`.

use std::collections::BTreeSet;

use plan_gen::{Event, event, settle};
use plan_reference as old;
use proptest::prelude::*;
use spanset_plan::{
    Desired, Exclusion, Observed, Ordinal, Ordinals, Plan, PlanError, Slice, Step, plan_balanced,
    plan_to_completion_balanced,
};

use crate::plan_gen;
use crate::plan_reference;

/// A slice as plain values: start, replicas, reserved ordinals.
type SliceValue = (u32, u32, Vec<Ordinal>);

/// A step as plain values, its ordinals sorted.
#[derive(Debug, PartialEq)]
enum StepValue {
    Shrink(String, SliceValue, Vec<Ordinal>),
    Grow(String, SliceValue, Vec<Ordinal>),
}

/// A plan as plain values, whichever planner made it.
#[derive(Debug, PartialEq)]
struct PlanValue {
    target: Vec<(String, SliceValue)>,
    excluded: Vec<(String, Exclusion)>,
    steps: Vec<StepValue>,
    in_flight: Vec<Ordinal>,
    done: bool,
    stalled: bool,
    balanced_placement: Option<String>,
}

fn new_slice(s: &Slice) -> SliceValue {
    (s.start, s.replicas, s.reserved.iter().collect())
}

fn old_slice(s: &old::Slice) -> SliceValue {
    (s.start, s.replicas, s.reserved.iter().copied().collect())
}

fn new_step(s: &Step) -> StepValue {
    match s {
        Step::Shrink { cluster, to, releases } => {
            StepValue::Shrink(cluster.clone(), new_slice(to), releases.iter().collect())
        }
        Step::Grow { cluster, to, acquires } => {
            StepValue::Grow(cluster.clone(), new_slice(to), acquires.iter().collect())
        }
    }
}

fn old_step(s: &old::Step) -> StepValue {
    let sorted = |v: &[Ordinal]| v.iter().copied().collect::<BTreeSet<_>>().into_iter().collect();
    match s {
        old::Step::Shrink { cluster, to, releases } => {
            StepValue::Shrink(cluster.clone(), old_slice(to), sorted(releases))
        }
        old::Step::Grow { cluster, to, acquires } => StepValue::Grow(cluster.clone(), old_slice(to), sorted(acquires)),
    }
}

fn new_plan(p: &Plan) -> PlanValue {
    PlanValue {
        target: p.target.iter().map(|(n, s)| (n.clone(), new_slice(s))).collect(),
        excluded: p.excluded.clone(),
        steps: p.steps.iter().map(new_step).collect(),
        in_flight: p.in_flight.iter().collect(),
        done: p.done,
        stalled: p.stalled,
        balanced_placement: p.balanced_placement.clone(),
    }
}

fn old_plan(p: &old::Plan) -> PlanValue {
    PlanValue {
        target: p.target.iter().map(|(n, s)| (n.clone(), old_slice(s))).collect(),
        excluded: p.excluded.clone(),
        steps: p.steps.iter().map(old_step).collect(),
        in_flight: p.in_flight.iter().copied().collect(),
        done: p.done,
        stalled: p.stalled,
        balanced_placement: p.balanced_placement.clone(),
    }
}

fn to_old(obs: &Observed) -> old::Observed {
    obs.iter()
        .map(|(n, o)| {
            let w = &o.written;
            let o = old::ClusterObservation {
                written: old::Slice { start: w.start, replicas: w.replicas, reserved: w.reserved.iter().collect() },
                pods: o.pods.iter().collect(),
                observed_since_write: o.observed_since_write,
                ready: o.ready.iter().collect(),
                reachable: o.reachable,
                fenced: o.fenced,
                compatible: o.compatible,
            };
            (n.clone(), o)
        })
        .collect()
}

/// Both planners on one input, from a layout last divided for `balanced`; errors compared by
/// their message.
fn both(
    d: &Desired,
    obs: &Observed,
    moving: &Ordinals,
    balanced: Option<&str>,
) -> Result<Result<Plan, PlanError>, TestCaseError> {
    let new = plan_balanced(d, obs, moving, balanced);
    let reference = old::plan_balanced(d, &to_old(obs), &moving.iter().collect(), balanced);
    prop_assert_eq!(
        new.as_ref().map(new_plan).map_err(ToString::to_string),
        reference.as_ref().map(old_plan).map_err(ToString::to_string),
        "plans differ for {:?} moving {:?} balanced for {:?}",
        obs,
        moving,
        balanced
    );
    Ok(new)
}

/// An event of `plan_gen`, or one of five that only this test adds: a pod turns unready, an
/// ordinal is recorded as moving whether it moves or not (a stale `status.moves`), a cluster is
/// taken out of the placement while the observation still has it, a cluster's observation
/// is lost (a placement cluster never seen), and the replicas change (which `onScale` is about).
#[derive(Debug, Clone)]
enum Ev {
    Common(Event),
    Unready(usize, u32),
    Record(u32),
    Unplace(usize),
    Forget(usize),
    Scale(u32),
}

fn ev(replicas: u32) -> impl Strategy<Value = Ev> {
    prop_oneof![
        10 => event().prop_map(Ev::Common),
        1 => ((0usize..4), (0..replicas + 4)).prop_map(|(c, k)| Ev::Unready(c, k)),
        1 => (0..replicas + 4).prop_map(Ev::Record),
        1 => (0usize..4).prop_map(Ev::Unplace),
        1 => (0usize..4).prop_map(Ev::Forget),
        2 => (0..replicas + 4).prop_map(Ev::Scale),
    ]
}

/// The stored `status.balancedPlacement` a run starts from, by `how`: none, the placement of
/// the spec and state (a layout divided for it), or one that no longer holds.
fn stored(d: &Desired, obs: &Observed, how: u8) -> Option<String> {
    match how % 3 {
        0 => None,
        1 => Some(spanset_plan::keep::placement(d, &spanset_plan::keep::keepers(d, obs))),
        _ => Some("c0:9".into()),
    }
}

/// Runs the events, comparing both planners at every plan, then both whole plans to completion.
/// `balanced` is carried from plan to plan as the coordinator stores it.
fn agree(mut d: Desired, mut obs: Observed, events: Vec<Ev>, balanced: u8) -> Result<(), TestCaseError> {
    let n = d.clusters.len();
    let name = |c: usize| format!("c{}", c % n);
    let mut balanced = stored(&d, &obs, balanced);
    let mut moving = Ordinals::new();
    for e in events {
        match e {
            Ev::Common(Event::Settle(c)) => {
                if let Some(o) = obs.get_mut(&name(c))
                    && o.reachable
                {
                    settle(o);
                }
            }
            Ev::Common(Event::Partition(c)) => {
                if let Some(o) = obs.get_mut(&name(c)) {
                    o.reachable = false;
                }
            }
            Ev::Common(Event::Heal(c)) => {
                if let Some(o) = obs.get_mut(&name(c)) {
                    o.reachable = true;
                }
            }
            Ev::Common(Event::Fence(c)) => {
                if let Some(o) = obs.get_mut(&name(c))
                    && !o.reachable
                {
                    o.fenced = true;
                    o.pods.clear();
                    o.ready.clear();
                }
            }
            Ev::Common(Event::Reweigh(c, w)) => {
                let mut edited = d.clone();
                let len = edited.clusters.len();
                edited.clusters[c % len].weight = w;
                if spanset_plan::validate(&edited).is_empty() {
                    d = edited;
                }
            }
            Ev::Unready(c, k) => {
                if let Some(o) = obs.get_mut(&name(c)) {
                    o.ready.remove(d.start + k);
                }
            }
            Ev::Unplace(c) => {
                let mut edited = d.clone();
                edited.clusters.retain(|t| t.name != name(c));
                if spanset_plan::validate(&edited).is_empty() {
                    d = edited;
                }
            }
            Ev::Forget(c) => {
                obs.remove(&name(c));
            }
            Ev::Record(k) => {
                moving.insert(d.start + k);
            }
            Ev::Scale(r) => {
                let mut edited = d.clone();
                edited.replicas = r;
                if spanset_plan::validate(&edited).is_empty() {
                    d = edited;
                }
            }
            Ev::Common(Event::Steps) => {
                let Ok(p) = both(&d, &obs, &moving, balanced.as_deref())? else { continue };
                balanced.clone_from(&p.balanced_placement);
                for s in &p.steps {
                    let o = obs.get_mut(s.cluster()).expect("steps name known clusters");
                    o.written = s.slice().clone();
                    o.observed_since_write = false;
                }
                moving = p.in_flight.clone();
                for s in &p.steps {
                    if let Step::Shrink { cluster, releases, .. } = s
                        && !obs[cluster].fenced
                    {
                        moving.extend(releases.iter().filter(|k| (d.start..d.start + d.replicas).contains(k)));
                    }
                }
            }
        }
    }
    // One more plan from here with every member answering, then the whole way to the target.
    for o in obs.values_mut() {
        o.reachable = true;
    }
    // Only the agreement matters here, not the plan.
    let _ = both(&d, &obs, &moving, balanced.as_deref())?;
    let new = plan_to_completion_balanced(&d, &obs, balanced.as_deref());
    let reference = old::plan_to_completion_balanced(&d, &to_old(&obs), balanced.as_deref());
    let steps_new = |(p, steps): &(Plan, Vec<Step>)| (new_plan(p), steps.iter().map(new_step).collect::<Vec<_>>());
    let steps_old =
        |(p, steps): &(old::Plan, Vec<old::Step>)| (old_plan(p), steps.iter().map(old_step).collect::<Vec<_>>());
    prop_assert_eq!(
        new.as_ref().map(steps_new).map_err(ToString::to_string),
        reference.as_ref().map(steps_old).map_err(ToString::to_string),
        "plans to completion differ from {:?}",
        obs
    );
    Ok(())
}

/// A starting state less settled than `plan_gen::state` makes it: per cluster (by `how`),
/// unchanged, every other pod unready, its last write not yet observed, pods of an older
/// incarnation left over, or a spec edited by hand; the last two may claim ordinals that another
/// cluster holds (what the at-most-one rule exists for, and what the planner must still read
/// the same way).
fn disturbed(mut obs: Observed, how: &[u8], start: Ordinal, span: u32) -> Observed {
    for ((_, o), h) in obs.iter_mut().zip(how.iter().cycle()) {
        let from = start + u32::from(*h) * 7 % span.max(1);
        let extra = Ordinals::from_iter([from..=from + u32::from(*h) % 5]);
        match h % 5 {
            1 => o.ready = o.ready.iter().step_by(2).collect(),
            2 => o.observed_since_write = false,
            3 => o.pods |= extra,
            4 => o.written = Slice::from_ordinals(&(o.written.ordinals() | extra)),
            _ => {}
        }
    }
    obs
}

proptest! {
    #![proptest_config(plan_gen::config(256))]

    #[test]
    fn small_states_plan_as_the_reference_planner_did(
        d in plan_gen::spec(1..5, 0..12),
        seed in prop::collection::vec(0u32..100, 1..14),
        scattered in prop::bool::weighted(0.2),
        how in prop::collection::vec(any::<u8>(), 1..5),
        events in prop::collection::vec(ev(12), 0..40),
        balanced in any::<u8>(),
    ) {
        let obs = disturbed(plan_gen::state(&d, &seed, 12, scattered), &how, d.start, 12);
        agree(d, obs, events, balanced)?;
    }
}

proptest! {
    #![proptest_config(plan_gen::config(32))]

    #[test]
    fn large_states_plan_as_the_reference_planner_did(
        d in plan_gen::spec(2..7, 0..300),
        seed in prop::collection::vec(0u32..1000, 1..300),
        scattered in prop::bool::weighted(0.2),
        how in prop::collection::vec(any::<u8>(), 1..7),
        events in prop::collection::vec(ev(300), 0..60),
        balanced in any::<u8>(),
    ) {
        let obs = disturbed(plan_gen::state(&d, &seed, 300, scattered), &how, d.start, 300);
        agree(d, obs, events, balanced)?;
    }
}
