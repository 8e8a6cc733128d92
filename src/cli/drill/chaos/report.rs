//! The chaos drill's report: what was injected, what moved, whether the federation converged,
//! the verdicts of the data markers and the ledger, and what the run cost each cluster (from
//! the sandbox's resource account); as a table or JSON.

use std::collections::BTreeMap;

use serde::Serialize;
use spanset_sim::store::account::report::{ClusterAccount, WriteCounts};

/// What the drill cost one cluster, from the resource account over the whole run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCost {
    /// spanset's writes.
    pub spanset: WriteCounts,
    /// Volumes provisioned.
    pub volumes_provisioned: u64,
    /// Volumes turned Released.
    pub volumes_released: u64,
    /// Volumes Released at the end: left over.
    pub volumes_left_released: u64,
    /// Events created, by reason.
    pub events: BTreeMap<String, u64>,
}

impl ClusterCost {
    /// The summary of one cluster's account over the run.
    pub fn of(a: &ClusterAccount) -> Self {
        Self {
            spanset: a.by_actor(spanset_sim::store::actor::SPANSET),
            volumes_provisioned: a.provisioned(),
            volumes_released: a.released(),
            volumes_left_released: a.left("Released"),
            events: a.events.iter().filter(|(_, e)| e.created > 0).map(|(r, e)| (r.clone(), e.created)).collect(),
        }
    }
}

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
    /// What the run cost, by cluster (empty when the sandbox serves no account).
    pub cost: BTreeMap<String, ClusterCost>,
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
    if !r.cost.is_empty() {
        out.push_str(&format!(
            "\n{:<12} {:>8} {:>8} {:>8} {:>8} {:>12} {:>9} {:>14} {:>7}\n",
            "COST", "CREATED", "UPDATED", "STATUS", "DELETED", "PROVISIONED", "RELEASED", "LEFT RELEASED", "EVENTS"
        ));
        for (cluster, c) in &r.cost {
            let s = &c.spanset;
            out.push_str(&format!(
                "{cluster:<12} {:>8} {:>8} {:>8} {:>8} {:>12} {:>9} {:>14} {:>7}\n",
                s.created,
                s.updated,
                s.status_updated,
                s.deleted,
                c.volumes_provisioned,
                c.volumes_released,
                c.volumes_left_released,
                c.events.values().sum::<u64>()
            ));
        }
        out.push_str("(spanset's creates, updates, status updates and deletes; volumes; Events of every source)\n\n");
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

#[cfg(test)]
mod tests {
    use super::*;
    use spanset_sim::store::account::report::{EventCounts, VolumeCounts};

    #[test]
    fn the_cost_sums_spansets_writes_and_shows_volumes_and_events() {
        let mut a = ClusterAccount::default();
        let spanset = a.writes.entry("spanset".into()).or_default();
        spanset.insert("persistentvolumeclaims".into(), WriteCounts { created: 2, deleted: 3, ..Default::default() });
        spanset.insert("statefulsets.apps".into(), WriteCounts { updated: 4, ..Default::default() });
        a.writes
            .entry("kubelet".into())
            .or_default()
            .insert("pods".into(), WriteCounts { status_updated: 9, ..Default::default() });
        a.volumes = VolumeCounts { provisioned: 5, released: 3, by_phase: [("Released".to_string(), 2)].into() };
        a.events.insert("StaleClaimRetired".into(), EventCounts { created: 7, updated: 1 });
        a.events.insert("Repeated".into(), EventCounts { created: 0, updated: 2 });
        let cost = ClusterCost::of(&a);
        assert_eq!(cost.spanset, WriteCounts { created: 2, updated: 4, deleted: 3, ..Default::default() });
        assert_eq!((cost.volumes_provisioned, cost.volumes_released, cost.volumes_left_released), (5, 3, 2));
        assert_eq!(cost.events, [("StaleClaimRetired".to_string(), 7)].into());

        let report = ChaosReport {
            seed: 1,
            federation: "default/redis".into(),
            members: vec!["east".into()],
            refused_members: vec![],
            duration_seconds: 1.0,
            controllers: 0,
            faults: BTreeMap::new(),
            faults_per_minute: 0.0,
            spec_changes: BTreeMap::new(),
            injection_errors: vec![],
            moves_completed: 0,
            converged: true,
            converge_seconds: Some(1.0),
            markers_written: 0,
            markers_checked: 0,
            marker_violations: vec![],
            ledger_violations: vec![],
            verdict: "clean".into(),
            schedule: vec![],
            log_dir: None,
            cost: [("east".to_string(), cost)].into(),
        };
        let text = table(&report);
        let row: Vec<&str> = text.lines().find(|l| l.starts_with("east ")).unwrap().split_whitespace().collect();
        assert_eq!(row, ["east", "2", "4", "0", "3", "5", "3", "2", "7"], "{text}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["cost"]["east"]["volumesLeftReleased"], 2);
        assert_eq!(json["cost"]["east"]["spanset"]["deleted"], 3);
    }
}
