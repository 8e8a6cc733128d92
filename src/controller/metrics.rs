//! The controller's Prometheus series (prefix `spanset_`), registered once and shared by the
//! actors; `/metrics` renders [`Metrics::render`]. Series of a member or federation that is
//! gone are removed, so label sets stay bounded.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Every series the controller exposes.
pub struct Metrics {
    registry: Registry,
    api_requests: IntCounterVec,
    watch_events: IntCounterVec,
    watch_restarts: IntCounterVec,
    member_reachable: IntGaugeVec,
    member_writes: IntCounterVec,
    reconciles: IntCounterVec,
    reconcile_duration: HistogramVec,
    moves: IntCounterVec,
    move_duration: Histogram,
    move_handoff: Histogram,
    moves_in_flight: IntGaugeVec,
    slice_replicas: IntGaugeVec,
    identity_conflicts: IntCounterVec,
    leader: IntGauge,
    slice_clusters: parking_lot::Mutex<std::collections::BTreeMap<String, std::collections::BTreeSet<String>>>,
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help).namespace("spanset"), labels).expect("valid metric");
    registry.register(Box::new(c.clone())).expect("registered once");
    c
}

fn gauge(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help).namespace("spanset"), labels).expect("valid metric");
    registry.register(Box::new(g.clone())).expect("registered once");
    g
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every series in a fresh registry.
    pub fn new() -> Self {
        let registry = Registry::new();
        let buckets = vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0];
        let reconcile_duration = HistogramVec::new(
            HistogramOpts::new("reconcile_duration_seconds", "Time of one reconcile of a federation")
                .namespace("spanset")
                .buckets(buckets),
            &["federation"],
        )
        .expect("valid metric");
        registry.register(Box::new(reconcile_duration.clone())).expect("registered once");
        let move_duration = Histogram::with_opts(
            HistogramOpts::new("move_duration_seconds", "Time from an ordinal's release to Ready in its new cluster")
                .namespace("spanset")
                .buckets(vec![0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0]),
        )
        .expect("valid metric");
        registry.register(Box::new(move_duration.clone())).expect("registered once");
        let move_handoff = Histogram::with_opts(
            HistogramOpts::new(
                "move_handoff_seconds",
                "The controller's own share of a move: from observing the source's release of an ordinal to \
                 the destination's grow written",
            )
            .namespace("spanset")
            .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]),
        )
        .expect("valid metric");
        registry.register(Box::new(move_handoff.clone())).expect("registered once");
        let leader = IntGauge::with_opts(Opts::new("leader", "1 while this process leads").namespace("spanset"))
            .expect("valid metric");
        registry.register(Box::new(leader.clone())).expect("registered once");
        Self {
            api_requests: counter(&registry, "api_requests_total", "Requests to member clusters", &["cluster", "verb"]),
            watch_events: counter(
                &registry,
                "watch_events_total",
                "Watch events from members",
                &["cluster", "resource"],
            ),
            watch_restarts: counter(
                &registry,
                "watch_restarts_total",
                "Member watches that failed and restarted",
                &["cluster"],
            ),
            member_reachable: gauge(&registry, "member_reachable", "1 while the member answers", &["cluster"]),
            member_writes: counter(
                &registry,
                "member_writes_total",
                "Objects written in members",
                &["cluster", "kind"],
            ),
            reconciles: counter(&registry, "reconciles_total", "Reconciles of federations", &["federation", "result"]),
            moves: counter(&registry, "moves_total", "Ordinal moves finished", &["federation", "result"]),
            moves_in_flight: gauge(&registry, "moves_in_flight", "Ordinals moving now", &["federation"]),
            slice_replicas: gauge(
                &registry,
                "slice_replicas",
                "Replicas of a federation's slice in a member",
                &["federation", "cluster", "state"],
            ),
            identity_conflicts: counter(
                &registry,
                "identity_conflicts_total",
                "Times one ordinal was seen running in two members (must stay 0)",
                &["federation"],
            ),
            reconcile_duration,
            move_duration,
            move_handoff,
            leader,
            registry,
            slice_clusters: Default::default(),
        }
    }

    /// The text exposition of every series.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buf).expect("text encoding never fails");
        String::from_utf8(buf).expect("the text format is UTF-8")
    }

    /// A request to a member.
    pub fn api_request(&self, cluster: &str, verb: &str) {
        self.api_requests.with_label_values(&[cluster, verb]).inc();
    }

    /// A watch event from a member.
    pub fn watch_event(&self, cluster: &str, resource: &str) {
        self.watch_events.with_label_values(&[cluster, resource]).inc();
    }

    /// A member watch failed and will restart.
    pub fn watch_restart(&self, cluster: &str) {
        self.watch_restarts.with_label_values(&[cluster]).inc();
    }

    /// Whether a member answers.
    pub fn set_reachable(&self, cluster: &str, up: bool) {
        self.member_reachable.with_label_values(&[cluster]).set(i64::from(up));
    }

    /// An object written in a member.
    pub fn member_write(&self, cluster: &str, kind: &str) {
        self.member_writes.with_label_values(&[cluster, kind]).inc();
    }

    /// A reconcile ended.
    pub fn reconciled(&self, federation: &str, ok: bool, seconds: f64) {
        self.reconciles.with_label_values(&[federation, if ok { "ok" } else { "error" }]).inc();
        self.reconcile_duration.with_label_values(&[federation]).observe(seconds);
    }

    /// A move ended.
    pub fn move_finished(&self, federation: &str, seconds: f64) {
        self.moves.with_label_values(&[federation, "done"]).inc();
        self.move_duration.observe(seconds);
    }

    /// An ordinal's release was observed `seconds` before its destination's grow was written.
    pub fn move_handoff(&self, seconds: f64) {
        self.move_handoff.observe(seconds);
    }

    /// The slices and moves of a federation now.
    pub fn federation_state(&self, federation: &str, slices: &[(String, i64, i64)], moving: i64) {
        let mut known = self.slice_clusters.lock();
        let known = known.entry(federation.to_string()).or_default();
        for (cluster, desired, ready) in slices {
            known.insert(cluster.clone());
            self.slice_replicas.with_label_values(&[federation, cluster, "desired"]).set(*desired);
            self.slice_replicas.with_label_values(&[federation, cluster, "ready"]).set(*ready);
        }
        self.moves_in_flight.with_label_values(&[federation]).set(moving);
    }

    /// One ordinal seen running in two members.
    pub fn identity_conflict(&self, federation: &str) {
        self.identity_conflicts.with_label_values(&[federation]).inc();
    }

    /// Whether this process leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Removes the series of a member that is gone.
    pub fn forget_cluster(&self, cluster: &str) {
        let _ = self.member_reachable.remove_label_values(&[cluster]);
        let _ = self.watch_restarts.remove_label_values(&[cluster]);
        for verb in VERBS {
            let _ = self.api_requests.remove_label_values(&[cluster, verb]);
        }
        for resource in WATCHED {
            let _ = self.watch_events.remove_label_values(&[cluster, resource]);
        }
        for kind in WRITTEN {
            let _ = self.member_writes.remove_label_values(&[cluster, kind]);
        }
    }

    /// Removes the series of a federation that is gone.
    pub fn forget_federation(&self, federation: &str) {
        let clusters = self.slice_clusters.lock().remove(federation).unwrap_or_default();
        for cluster in clusters {
            for state in ["desired", "ready"] {
                let _ = self.slice_replicas.remove_label_values(&[federation, &cluster, state]);
            }
        }
        let _ = self.moves_in_flight.remove_label_values(&[federation]);
        let _ = self.identity_conflicts.remove_label_values(&[federation]);
        let _ = self.reconcile_duration.remove_label_values(&[federation]);
        for result in ["ok", "error"] {
            let _ = self.reconciles.remove_label_values(&[federation, result]);
        }
        let _ = self.moves.remove_label_values(&[federation, "done"]);
    }
}

/// The verbs of member requests (a closed set, so their series can be removed).
pub const VERBS: [&str; 5] = ["get", "list", "create", "update", "delete"];
/// The watched member resources.
pub const WATCHED: [&str; 3] = ["statefulsets", "pods", "persistentvolumeclaims"];
/// The kinds of member writes.
pub const WRITTEN: [&str; 4] = ["statefulset", "namespace", "service", "carried"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handoff_is_rendered_in_its_histogram() {
        let m = Metrics::new();
        m.move_handoff(0.02);
        let text = m.render();
        assert!(text.contains("spanset_move_handoff_seconds_count 1"), "{text}");
        assert!(text.contains("spanset_move_handoff_seconds_bucket{le=\"0.025\"} 1"), "{text}");
        assert!(text.contains("spanset_move_handoff_seconds_bucket{le=\"0.01\"} 0"), "{text}");
    }
}
