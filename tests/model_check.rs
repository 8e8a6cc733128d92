//! The move protocol, model-checked: stateright explores every interleaving of two controller
//! replicas (the real `reconcile::decide`), two members, their kubelets and nodes, lost answers
//! and partitions, and checks the at-most-one rule at every state.
//!
//! The bounded check runs in the suite; a deeper one:
//! `SPANSET_MODEL_SECONDS=900 SPANSET_MODEL_FAULTS=3 cargo test --release --test model_check -- --ignored --nocapture`.

mod model;

use std::time::{Duration, Instant};

use model::{Spanset, spec};
use std::collections::BTreeMap;

use stateright::{Checker, Expectation, Model};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn model(faults: u8) -> Spanset {
    Spanset::new(vec![spec([1, 0]), spec([1, 1]), spec([0, 1])], faults, 1)
}

/// What one check covered and found.
struct Report {
    /// Counterexamples (and examples, for `sometimes` properties) by property: the actions.
    found: BTreeMap<&'static str, Vec<String>>,
    /// The safety properties (always) of the model.
    safety: Vec<&'static str>,
}

fn summarize(checker: &impl Checker<Spanset>, started: Instant) -> Report {
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "model: {} states ({} unique) in {secs:.0} s, {:.0} unique states/s, depth {}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.unique_state_count() as f64 / secs,
        checker.max_depth()
    );
    let properties = checker.model().properties();
    let found = properties
        .iter()
        .filter_map(|p| {
            let path = checker.discovery(p.name)?;
            Some((p.name, path.into_actions().iter().map(|a| format!("{a:?}")).collect()))
        })
        .collect();
    let safety = properties.iter().filter(|p| p.expectation == Expectation::Always).map(|p| p.name).collect();
    Report { found, safety }
}

/// Runs the checker (breadth first; `SPANSET_MODEL_SEARCH=dfs` for depth first) for at most
/// `seconds` and prints what it covered.
fn check(m: Spanset, seconds: u64) -> Report {
    let started = Instant::now();
    let builder = m.checker().threads(2).timeout(Duration::from_secs(seconds));
    if std::env::var("SPANSET_MODEL_SEARCH").as_deref() == Ok("dfs") {
        summarize(&builder.spawn_dfs().join(), started)
    } else {
        summarize(&builder.spawn_bfs().join(), started)
    }
}

fn assert_safe(report: &Report) {
    for name in &report.safety {
        if let Some(steps) = report.found.get(name) {
            panic!("{name}: counterexample after {} steps:\n  {}", steps.len(), steps.join("\n  "));
        }
    }
}

#[test]
fn every_interleaving_keeps_each_identity_single() {
    let report = check(model(env("SPANSET_MODEL_FAULTS", 1) as u8), env("SPANSET_MODEL_SECONDS", 60));
    assert_safe(&report);
    eprintln!("a finished move: {:#?}", report.found.get("an ordinal moves and the federation settles"));
    assert!(
        report.found.contains_key("an ordinal moves and the federation settles"),
        "the check never reached a finished move: it explored nothing of interest"
    );
}

#[test]
#[ignore = "deep check: minutes to hours; see the module doc"]
fn deep() {
    let report = check(model(env("SPANSET_MODEL_FAULTS", 3) as u8), env("SPANSET_MODEL_SECONDS", 900));
    assert_safe(&report);
}
