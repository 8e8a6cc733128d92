//! Random specs, starting states and events for the planner's property tests, shared by
//! `plan_props` (small states, checked against the at-most-one rule) and `plan_differential`
//! (up to hundreds of ordinals, checked against the planner it replaced).

use std::ops::Range;

use proptest::{prelude::*, test_runner::FileFailurePersistence};
use spanset_plan::{Backend, ClusterObservation, ClusterTarget, Desired, Observed, OnScale, Ordinals, Slice};

/// The config of a planner property: `cases` cases unless `PROPTEST_CASES` is set (a literal
/// `ProptestConfig { cases, .. }` overrides the variable, so `PROPTEST_CASES=5000` would run
/// the default), with room for as many rejected inputs as cases (the default 1024 ends a
/// 5000-case run); shrinking bounded to a minute unless `PROPTEST_MAX_SHRINK_TIME` is set,
/// because proptest persists a failing seed and prints the minimal input only once shrinking
/// ends, and a run stopped while shrinking a slow case (a stall plays hundreds of rounds per
/// input) kept nothing. Seeds go to `tests/NAME.proptest-regressions`, named outright (the
/// default looks for a `lib.rs` beside the test, warns that it found none, and falls back to
/// the same file), to be committed with the fix.
pub fn config(cases: u32) -> ProptestConfig {
    let default = ProptestConfig::default();
    let set = |var: &str| std::env::var_os(var).is_some();
    let cases = if set("PROPTEST_CASES") { default.cases } else { cases };
    ProptestConfig {
        cases,
        max_global_rejects: if set("PROPTEST_MAX_GLOBAL_REJECTS") {
            default.max_global_rejects
        } else {
            default.max_global_rejects.max(cases)
        },
        max_shrink_time: if set("PROPTEST_MAX_SHRINK_TIME") { default.max_shrink_time } else { 60_000 },
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..default
    }
}

/// A member that has caught up with `written`.
pub fn healthy(written: Ordinals) -> ClusterObservation {
    ClusterObservation::settled(Slice::from_ordinals(&written))
}

/// Random valid spec: `clusters` clusters, weights 0–4 (the first above 0), `replicas`
/// replicas, start 0–3, 1–3 concurrent moves, either `onScale`, and optional min/max bounds that
/// scale with the replicas (0–2 and 0–9 per 12 replicas).
pub fn spec(clusters: Range<usize>, replicas: Range<u32>) -> impl Strategy<Value = Desired> {
    let scale = (replicas.end / 12).max(1);
    (
        prop::bool::ANY,
        replicas,
        0u32..4,
        prop::collection::vec((0u32..5, 0..3 * scale, prop::option::of(0..10 * scale)), clusters),
        1u32..4,
        prop::bool::ANY,
    )
        .prop_map(|(adv, replicas, start, cs, max_moves, keep)| Desired {
            replicas,
            start,
            backend: if adv { Backend::AdvancedStatefulSet } else { Backend::StatefulSet },
            clusters: cs
                .iter()
                .enumerate()
                .map(|(i, (w, min, max))| ClusterTarget {
                    name: format!("c{i}"),
                    weight: if i == 0 { (*w).max(1) } else { *w },
                    min_replicas: *min,
                    max_replicas: max.map(|m| m.max(*min)),
                })
                .collect(),
            max_concurrent_moves: max_moves,
            on_scale: if keep { OnScale::Keep } else { OnScale::Rebalance },
        })
        .prop_filter("a valid spec", |d| spanset_plan::validate(d).is_empty())
}

/// A random starting state: an earlier range of `seed[0] % old_max` ordinals split among the
/// clusters by the rest of `seed`, disjoint; for apps/v1 in contiguous blocks in placement
/// order unless `scattered` (a state only a broken or hand-edited member shows).
pub fn state(d: &Desired, seed: &[u32], old_max: u32, scattered: bool) -> Observed {
    let n = d.clusters.len();
    let old_replicas = seed.first().copied().unwrap_or(0) % old_max;
    let mut owner: Vec<usize> =
        (0..old_replicas as usize).map(|i| seed.get(i + 1).copied().unwrap_or(0) as usize % n).collect();
    if d.backend == Backend::StatefulSet && !scattered {
        owner.sort(); // contiguous blocks in placement order
    }
    let mut sets = vec![Ordinals::new(); n];
    for (k, c) in owner.iter().enumerate() {
        sets[*c].insert(d.start + k as u32);
    }
    d.clusters.iter().zip(sets).map(|(c, set)| (c.name.clone(), healthy(set))).collect()
}

/// A member catches up: pods follow its spec and it is observed after the write.
pub fn settle(o: &mut ClusterObservation) {
    o.pods = o.written.ordinals();
    o.ready = o.pods.clone();
    o.observed_since_write = true;
}

/// Something that happens between two plans.
#[derive(Debug, Clone)]
pub enum Event {
    /// A member catches up with its spec.
    Settle(usize),
    /// A member stops answering.
    Partition(usize),
    /// It answers again.
    Heal(usize),
    /// An operator fences it (only while it is cut off).
    Fence(usize),
    /// A weight is edited.
    Reweigh(usize, u32),
    /// The planner runs and its steps are written.
    Steps,
}

/// Random events; clusters are taken modulo the spec's number of clusters.
pub fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (0usize..4).prop_map(Event::Settle),
        1 => (0usize..4).prop_map(Event::Partition),
        2 => (0usize..4).prop_map(Event::Heal),
        1 => (0usize..4).prop_map(Event::Fence),
        1 => ((0usize..4), (0u32..4)).prop_map(|(c, w)| Event::Reweigh(c, w)),
        6 => Just(Event::Steps),
    ]
}
