//! What of the planner's steps may happen now, as one StatefulSet would allow it. The planner
//! keeps identities single and moves within `maxConcurrentMoves`; these gates add what a
//! StatefulSet promises about order and availability, across clusters:
//!
//! - **OrderedReady creation**: a member may take a new ordinal k only once every ordinal below
//!   k held by the *other* members is Running and Ready (its own StatefulSet controller orders
//!   the ordinals it holds itself);
//! - **OrderedReady scale-down**: ordinals leaving the range go highest first, one at a time,
//!   each once the one before is gone, and not while a pod of the range is not Ready;
//! - **the disruption budget**: a move's release of a pod that is available costs one
//!   unavailability, allowed only while the ordinals counted unavailable (for any reason, in
//!   any member, including a rollout's and other moves') stay within the budget.
//!
//! A gated step shrinks to what is allowed (a representable slice) or waits; the reasons are
//! given for the federation's condition. Pure.

use spanset_plan::{Backend, Observed, Ordinal, Ordinals, Slice, Step};

/// What the gates decide from.
pub struct Context<'a> {
    /// The federation's name (pods are `<name>-<ordinal>`).
    pub name: &'a str,
    /// The planner's steps.
    pub steps: &'a [Step],
    /// The members as observed.
    pub obs: &'a Observed,
    /// The federation's ordinals.
    pub range: Ordinals,
    /// The members' workload API.
    pub backend: Backend,
    /// `podManagementPolicy: OrderedReady` (the default).
    pub ordered: bool,
    /// How many ordinals of the range may be unavailable at once through spanset's own doing.
    pub budget: u32,
    /// Where the budget comes from, for the message (`spec.disruption.maxUnavailable 1`).
    pub budget_source: String,
    /// Ordinals of the range counted unavailable now: not Ready where written, missing, moving,
    /// or about to be replaced by the rollout.
    pub unavailable: &'a Ordinals,
}

/// The steps that may run now, and why others wait.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Gated {
    /// Steps to carry out.
    pub steps: Vec<Step>,
    /// Why some step (or part of one) waits: `(reason, message)`.
    pub held: Vec<(&'static str, String)>,
}

/// The ordinals Running and Ready in the member whose written slice holds them (reachable,
/// not fenced).
pub fn ready_where_written(obs: &Observed) -> Ordinals {
    let mut out = Ordinals::new();
    for o in obs.values().filter(|o| o.reachable && !o.fenced) {
        out = &out | &(&o.written.ordinals() & &o.ready);
    }
    out
}

/// The ordinals Ready where written in the members other than `cluster`.
fn ready_elsewhere(obs: &Observed, cluster: &str) -> Ordinals {
    let mut out = Ordinals::new();
    for (_, o) in obs.iter().filter(|(n, o)| n.as_str() != cluster && o.reachable && !o.fenced) {
        out = &out | &(&o.written.ordinals() & &o.ready);
    }
    out
}

/// Applies the gates to the planner's steps.
pub fn gate(ctx: &Context<'_>) -> Gated {
    let mut out = Gated::default();
    let range = ctx.range.clone();
    let ready = ready_where_written(ctx.obs);
    let pod = |k: Ordinal| format!("{}-{k}", ctx.name);
    let mut left = ctx.budget.saturating_sub(u32::try_from(ctx.unavailable.len()).unwrap_or(u32::MAX));
    // Pods of ordinals beyond the range, anywhere (not fenced): the scale-down's condemned.
    let mut condemned = Ordinals::new();
    for o in ctx.obs.values().filter(|o| !o.fenced) {
        condemned = &condemned | &(&o.pods - &range);
    }
    let not_ready_in_range = &range - &ready;
    // Pods of the range that exist and are not Ready: a scale-down waits for them (one that is
    // missing, e.g. moving, does not hold it: the moves that bring it back may wait for the
    // very shrink the scale-down asks of its member).
    let mut existing = Ordinals::new();
    for o in ctx.obs.values().filter(|o| o.reachable && !o.fenced) {
        existing = &existing | &o.pods;
    }
    let unready_pods = &(&existing & &range) - &ready;
    for step in ctx.steps {
        let Some(o) = ctx.obs.get(step.cluster()) else { continue };
        let written = o.written.ordinals();
        match step {
            Step::Grow { cluster, to, acquires } => {
                if !ctx.ordered {
                    out.steps.push(step.clone());
                    continue;
                }
                // The first ordinal not Ready among those the other members hold or should.
                let own = to.ordinals();
                let blocking = (&not_ready_in_range - &own).first();
                let allowed = match blocking {
                    Some(b) => acquires - &Ordinals::from_iter([b..=Ordinal::MAX]),
                    None => acquires.clone(),
                };
                if allowed == *acquires {
                    out.steps.push(step.clone());
                    continue;
                }
                let b = blocking.expect("something was held back");
                let first_held = (acquires - &allowed).first().expect("something was held back");
                out.held.push((
                    "OrderedReady",
                    format!("{} waits for {} to be Ready (podManagementPolicy OrderedReady)", pod(first_held), pod(b)),
                ));
                if let Some(s) = representable(&(&written | &allowed), ctx.backend)
                    && !allowed.is_empty()
                {
                    out.steps.push(Step::Grow { cluster: cluster.clone(), to: s, acquires: allowed });
                }
            }
            Step::Shrink { cluster, releases, .. } => {
                let mut allowed = Ordinals::new();
                // Leaving the range (a scale-down).
                let leaving = releases - &range;
                if !leaving.is_empty() {
                    if ctx.ordered {
                        let going = leaving_now(ctx, &leaving, &condemned, &unready_pods, &pod);
                        match going {
                            Ok(k) => allowed = &allowed | &k,
                            Err(why) => out.held.push(("OrderedReady", why)),
                        }
                    } else {
                        allowed = &allowed | &leaving;
                    }
                }
                // Moving elsewhere: within the budget, highest first. A release costs one
                // unavailability when it takes down the ordinal's available pod: not when the
                // ordinal is unavailable anyway, nor when another member runs it Ready too (a
                // drift being undone).
                let moving = releases & &range;
                let elsewhere = ready_elsewhere(ctx.obs, cluster);
                let mut waiting = Vec::new();
                for k in moving.iter().rev() {
                    let costs = !ctx.unavailable.contains(k) && o.ready.contains(k) && !elsewhere.contains(k);
                    if !costs || left > 0 {
                        allowed.insert(k);
                        left -= u32::from(costs);
                    } else {
                        waiting.push(k);
                    }
                }
                if !waiting.is_empty() {
                    let down: Vec<String> = ctx.unavailable.iter().take(5).map(pod).collect();
                    let more = ctx.unavailable.len().saturating_sub(5);
                    out.held.push((
                        "DisruptionBudget",
                        format!(
                            "moving {} waits: {} pod(s) unavailable ({}{}), {} allows {}",
                            waiting.iter().rev().map(|k| pod(*k)).collect::<Vec<_>>().join(", "),
                            ctx.unavailable.len(),
                            down.join(", "),
                            if more > 0 { format!(" and {more} more") } else { String::new() },
                            ctx.budget_source,
                            ctx.budget
                        ),
                    ));
                }
                if allowed == *releases {
                    out.steps.push(step.clone());
                    continue;
                }
                let allowed = removable(&written, &allowed, ctx.backend);
                if !allowed.is_empty()
                    && let Some(s) = representable(&(&written - &allowed), ctx.backend)
                {
                    out.steps.push(Step::Shrink { cluster: cluster.clone(), to: s, releases: allowed });
                }
            }
        }
    }
    out
}

/// OrderedReady scale-down: of the ordinals `leaving` this member, those that may go now —
/// the highest pod beyond the range anywhere (and ordinals above it that have no pod), and
/// only while no such pod is already going and every pod of the range is Ready.
fn leaving_now(
    ctx: &Context<'_>,
    leaving: &Ordinals,
    condemned: &Ordinals,
    unready_pods: &Ordinals,
    pod: &dyn Fn(Ordinal) -> String,
) -> Result<Ordinals, String> {
    // A condemned pod no longer in any member's written slice is on its way out.
    let mut still_written = Ordinals::new();
    for o in ctx.obs.values().filter(|o| !o.fenced) {
        still_written = &still_written | &o.written.ordinals();
    }
    if let Some(k) = (condemned - &still_written).last() {
        return Err(format!("scaling down waits for {} to be gone (podManagementPolicy OrderedReady)", pod(k)));
    }
    let Some(highest) = condemned.last() else { return Ok(leaving.clone()) };
    // Ordinals above the highest pod have none: they go with it.
    let from_highest = leaving & &Ordinals::from_iter([highest..=Ordinal::MAX]);
    if from_highest.contains(highest)
        && let Some(k) = unready_pods.first()
    {
        return Err(format!(
            "scaling down waits: {} is not Ready (podManagementPolicy OrderedReady removes pods only while all are)",
            pod(k)
        ));
    }
    Ok(from_highest)
}

/// The part of `allowed` a member can give up now keeping a slice it can hold: any part for
/// the Advanced StatefulSet; for apps/v1, only from its top or its bottom.
fn removable(written: &Ordinals, allowed: &Ordinals, backend: Backend) -> Ordinals {
    if backend == Backend::AdvancedStatefulSet {
        return allowed.clone();
    }
    let mut out = Ordinals::new();
    for k in written.iter().rev() {
        if !allowed.contains(k) {
            break;
        }
        out.insert(k);
    }
    for k in written.iter() {
        if !allowed.contains(k) || out.contains(k) {
            break;
        }
        out.insert(k);
    }
    out
}

/// The slice selecting exactly `set`, if the backend can express it.
fn representable(set: &Ordinals, backend: Backend) -> Option<Slice> {
    let s = Slice::from_ordinals(set);
    (backend == Backend::AdvancedStatefulSet || s.is_contiguous()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spanset_plan::ClusterObservation;

    fn slice(start: Ordinal, n: u32) -> Slice {
        Slice { start, replicas: n, ..Slice::empty() }
    }

    fn member(start: Ordinal, n: u32, ready: &[Ordinal]) -> ClusterObservation {
        let mut o = ClusterObservation::settled(slice(start, n));
        o.ready = ready.iter().copied().collect();
        o
    }

    fn ctx<'a>(steps: &'a [Step], obs: &'a Observed, ordered: bool, unavailable: &'a Ordinals) -> Context<'a> {
        Context {
            name: "db",
            steps,
            obs,
            range: Ordinals::from_iter([0..=5]),
            backend: Backend::StatefulSet,
            ordered,
            budget: 1,
            budget_source: "spec.migration.maxConcurrentMoves".into(),
            unavailable,
        }
    }

    #[test]
    fn ordered_creation_waits_for_the_lower_ordinals_of_other_members() {
        // east holds 0-1 with only 0 Ready; west would take 2-3.
        let obs = Observed::from([("east".to_string(), member(0, 2, &[0])), ("west".to_string(), member(2, 0, &[]))]);
        let grow = Step::Grow { cluster: "west".into(), to: slice(2, 2), acquires: Ordinals::from_iter([2..=3]) };
        let none = Ordinals::new();
        let steps = [grow.clone()];
        let g = gate(&ctx(&steps, &obs, true, &none));
        assert!(g.steps.is_empty(), "{g:?}");
        assert_eq!(g.held[0].0, "OrderedReady");
        assert!(g.held[0].1.contains("db-2 waits for db-1"), "{:?}", g.held);
        // Parallel: no wait.
        assert_eq!(gate(&ctx(&steps, &obs, false, &none)).steps, vec![grow.clone()]);
        // Once 1 is Ready, west takes both (its own controller orders 2 before 3).
        let obs =
            Observed::from([("east".to_string(), member(0, 2, &[0, 1])), ("west".to_string(), member(2, 0, &[]))]);
        assert_eq!(gate(&ctx(&steps, &obs, true, &none)).steps, vec![grow]);
    }

    #[test]
    fn ordered_creation_takes_the_part_of_a_grow_that_may_start() {
        // Kruise-like interleaving: east holds 0 and will take 2; west holds 1, not Ready.
        let mut east = member(0, 1, &[0]);
        east.written = slice(0, 1);
        let obs = Observed::from([("east".to_string(), east), ("west".to_string(), member(1, 1, &[]))]);
        let to = Slice::from_ordinals(&Ordinals::from_iter([0, 2]));
        let steps = [Step::Grow { cluster: "east".into(), to, acquires: Ordinals::from_iter([2]) }];
        let none = Ordinals::new();
        let mut c = ctx(&steps, &obs, true, &none);
        c.backend = Backend::AdvancedStatefulSet;
        let g = gate(&c);
        assert!(g.steps.is_empty(), "2 waits for 1 in west: {g:?}");
    }

    #[test]
    fn ordered_scale_down_removes_the_highest_first_one_at_a_time() {
        // 6 → 2: east 0-1 stays, west 2-3 and central 4-5 leave.
        let obs = Observed::from([
            ("east".to_string(), member(0, 2, &[0, 1])),
            ("west".to_string(), member(2, 2, &[2, 3])),
            ("central".to_string(), member(4, 2, &[4, 5])),
        ]);
        let steps = [
            Step::Shrink { cluster: "west".into(), to: slice(2, 0), releases: Ordinals::from_iter([2..=3]) },
            Step::Shrink { cluster: "central".into(), to: slice(4, 0), releases: Ordinals::from_iter([4..=5]) },
        ];
        let none = Ordinals::new();
        let mut c = ctx(&steps, &obs, true, &none);
        c.range = Ordinals::from_iter([0..=1]);
        let g = gate(&c);
        assert_eq!(
            g.steps,
            vec![Step::Shrink { cluster: "central".into(), to: slice(4, 1), releases: Ordinals::from_iter([5]) }],
            "only the highest, 5"
        );
        // 5 released, its pod still there: nothing else goes.
        let mut central = member(4, 1, &[4]);
        central.pods = Ordinals::from_iter([4, 5]);
        let obs = Observed::from([
            ("east".to_string(), member(0, 2, &[0, 1])),
            ("west".to_string(), member(2, 2, &[2, 3])),
            ("central".to_string(), central),
        ]);
        let steps = [
            Step::Shrink { cluster: "west".into(), to: slice(2, 0), releases: Ordinals::from_iter([2..=3]) },
            Step::Shrink { cluster: "central".into(), to: slice(4, 0), releases: Ordinals::from_iter([4]) },
        ];
        let none = Ordinals::new();
        let mut c = ctx(&steps, &obs, true, &none);
        c.range = Ordinals::from_iter([0..=1]);
        let g = gate(&c);
        assert!(g.steps.is_empty(), "{g:?}");
        assert!(g.held[0].1.contains("db-5 to be gone"), "{:?}", g.held);
        // Parallel: all at once.
        let mut c = ctx(&steps, &obs, false, &none);
        c.range = Ordinals::from_iter([0..=1]);
        assert_eq!(gate(&c).steps, steps.to_vec());
    }

    #[test]
    fn ordered_scale_down_waits_while_a_pod_of_the_range_is_not_ready() {
        let obs =
            Observed::from([("east".to_string(), member(0, 2, &[0])), ("west".to_string(), member(2, 2, &[2, 3]))]);
        let steps = [Step::Shrink { cluster: "west".into(), to: slice(2, 0), releases: Ordinals::from_iter([2..=3]) }];
        let none = Ordinals::new();
        let mut c = ctx(&steps, &obs, true, &none);
        c.range = Ordinals::from_iter([0..=1]);
        let g = gate(&c);
        assert!(g.steps.is_empty());
        assert!(g.held[0].1.contains("db-1 is not Ready"), "{:?}", g.held);
    }

    #[test]
    fn a_move_waits_while_the_budget_is_spent_elsewhere() {
        // east gives 0 and 1 away; db-4 in west is not Ready; budget 2.
        let obs = Observed::from([
            ("east".to_string(), member(0, 2, &[0, 1])),
            ("west".to_string(), member(2, 4, &[2, 3, 5])),
        ]);
        let steps = [Step::Shrink { cluster: "east".into(), to: slice(0, 0), releases: Ordinals::from_iter([0..=1]) }];
        let unavailable = Ordinals::from_iter([4]);
        let mut c = ctx(&steps, &obs, false, &unavailable);
        c.budget = 2;
        let g = gate(&c);
        // Only one more may go: east gives up its top ordinal, 1.
        assert_eq!(
            g.steps,
            vec![Step::Shrink { cluster: "east".into(), to: slice(0, 1), releases: Ordinals::from_iter([1]) }]
        );
        assert!(g.held[0].1.contains("moving db-0 waits: 1 pod(s) unavailable (db-4)"), "{:?}", g.held);
        // A pod already unavailable costs nothing to move; the other waits (two are down).
        let unavailable = Ordinals::from_iter([0, 4]);
        let mut c = ctx(&steps, &obs, false, &unavailable);
        c.budget = 2;
        assert_eq!(
            gate(&c).steps,
            vec![Step::Shrink { cluster: "east".into(), to: slice(1, 1), releases: Ordinals::from_iter([0]) }]
        );
        c.budget = 3;
        assert_eq!(gate(&c).steps, steps.to_vec());
    }
}
