//! The chaos drill's report: what was injected, what moved, whether the federation converged,
//! and the verdicts of the data markers and the ledger; as a table or JSON.

use std::collections::BTreeMap;

use serde::Serialize;

/// The chaos drill's report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChaosReport {
    /// The seed of the schedule.
    pub seed: u64,
    /// The federation soaked.
    pub federation: String,
    /// The members of its placement.
    pub members: Vec<String>,
    /// Members the controller refused to use, each with its `Reachable` reason and message
    /// (`east-2 (DuplicateCluster: ...)`): the soak ran on the others.
    pub refused_members: Vec<String>,
    /// Seconds of injection.
    pub duration_seconds: f64,
    /// Controllers the drill started.
    pub controllers: usize,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Faults injected per minute of the soak.
    pub faults_per_minute: f64,
    /// Spec changes made, by kind.
    pub spec_changes: BTreeMap<String, u64>,
    /// Steps that could not be performed (the soak goes on without them).
    pub injection_errors: Vec<String>,
    /// Ordinals that started running in another member than their previous run during the
    /// soak and its convergence (moves, and returns after a scale-down), from the ledger.
    pub moves_completed: u64,
    /// Whether the federation settled after the heal: its status current, Ready, nothing
    /// moving, and the members running each ordinal exactly once, Ready.
    pub converged: bool,
    /// Seconds from the heal to settled.
    pub converge_seconds: Option<f64>,
    /// Ordinals carrying their marker at the end.
    pub markers_written: usize,
    /// Marker checks done.
    pub markers_checked: u64,
    /// Ordinals found on a volume without their own marker.
    pub marker_violations: Vec<String>,
    /// The ledger's at-most-one violations over the whole run.
    pub ledger_violations: Vec<String>,
    /// `clean`, or what went wrong.
    pub verdict: String,
    /// The schedule performed.
    pub schedule: Vec<String>,
    /// Where the drill's controllers logged.
    pub log_dir: Option<String>,
}

impl ChaosReport {
    /// Whether the drill fails: a violation, or no convergence.
    pub fn failed(&self) -> bool {
        !self.marker_violations.is_empty() || !self.ledger_violations.is_empty() || !self.converged
    }
}

/// `clean`, or what went wrong.
pub fn verdict(r: &ChaosReport) -> String {
    let mut wrong = Vec::new();
    if !r.ledger_violations.is_empty() {
        wrong.push(format!("{} ledger violation(s)", r.ledger_violations.len()));
    }
    if !r.marker_violations.is_empty() {
        wrong.push(format!("{} marker violation(s)", r.marker_violations.len()));
    }
    if !r.converged {
        wrong.push("not converged".to_string());
    }
    if wrong.is_empty() { "clean".into() } else { wrong.join(", ") }
}

/// The report as aligned text.
pub fn table(r: &ChaosReport) -> String {
    let mut out = format!(
        "DRILL chaos on {} (seed {}, {:.0}s, {} controllers of its own)\n\n",
        r.federation, r.seed, r.duration_seconds, r.controllers
    );
    let used = r.members.len().saturating_sub(r.refused_members.len());
    out.push_str(&format!("members: {} ({used} used)\n", r.members.join(", ")));
    for m in &r.refused_members {
        out.push_str(&format!("REFUSED MEMBER (not soaked): {m}\n"));
    }
    out.push('\n');
    out.push_str("FAULT                 COUNT\n");
    for (k, n) in &r.faults {
        out.push_str(&format!("{k:<21} {n:>5}\n"));
    }
    out.push_str(&format!("{:<21} {:>5.1}\n\n", "per minute", r.faults_per_minute));
    out.push_str("SPEC CHANGE           COUNT\n");
    for (k, n) in &r.spec_changes {
        out.push_str(&format!("{k:<21} {n:>5}\n"));
    }
    out.push('\n');
    let converge = r.converge_seconds.map_or("never".to_string(), |s| format!("{s:.1}s"));
    for (what, value) in [
        ("moves completed", r.moves_completed.to_string()),
        ("converged after the heal", converge),
        ("markers written", r.markers_written.to_string()),
        ("markers checked", r.markers_checked.to_string()),
        ("steps that failed", r.injection_errors.len().to_string()),
    ] {
        out.push_str(&format!("{what:<26} {value}\n"));
    }
    if r.ledger_violations.is_empty() {
        out.push_str("ledger: at most one incarnation of every identity at any time\n");
    }
    for v in &r.ledger_violations {
        out.push_str(&format!("LEDGER VIOLATION: {v}\n"));
    }
    for v in &r.marker_violations {
        out.push_str(&format!("MARKER VIOLATION: {v}\n"));
    }
    out.push_str(&format!("verdict: {}\n", r.verdict));
    out
}
