//! The controller's Prometheus series (prefix `spanset_`), registered once and shared by the
//! actors; `/metrics` renders [`Metrics::render`]. Series of a member or federation that is
//! gone are removed, so label sets stay bounded: every label is a member (`cluster`), a
//! federation (`namespace/name`), or one of a closed set of values listed in this module.
//!
//! Beside the `spanset_` series, the reconcile totals, times and errors are also exposed under
//! controller-runtime's well-known names (`controller_runtime_reconcile_*`, label
//! `controller="federatedstatefulset"`), so that existing controller dashboards work.

use prometheus::{GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts};

use crate::{
    decisions::move_phase::MovePhase,
    telemetry::{exposition::Exposition, runtime_metrics::ControllerRuntime},
};

/// The drills whose figures are exposed.
pub const DRILLS: [&str; 2] = ["evacuate", "cluster-loss"];
/// The stages a drill report may name (bounded label values).
pub const DRILL_STAGES: [&str; 8] =
    ["out", "back", "total", "max_unavailable", "detection", "fenced", "rehome", "shrink_on_return"];

/// The parts of a round a reconcile can fail in: the `category` label of
/// `spanset_reconcile_errors_total`, bounded by this list (the coordinator's round errors name
/// one each, which its tests check).
pub const RECONCILE_ERROR_CATEGORIES: [&str; 12] = [
    "finalizer",
    "status",
    "fence",
    "carried_objects",
    "not_leader",
    "supporting_objects",
    "member_writes",
    "storage_step",
    "pod_deletes",
    "disruption_budgets",
    "endpoint_slices",
    "deletion",
];

/// Every series the controller exposes.
pub struct Metrics {
    registry: Exposition,
    drill_seconds: GaugeVec,
    api_requests: IntCounterVec,
    http_requests: IntCounterVec,
    http_duration: HistogramVec,
    watch_events: IntCounterVec,
    watch_restarts: IntCounterVec,
    member_reachable: IntGaugeVec,
    member_writes: IntCounterVec,
    reconciles: IntCounterVec,
    reconcile_errors: IntCounterVec,
    reconcile_duration: HistogramVec,
    moves: IntCounterVec,
    move_duration: Histogram,
    move_handoff: Histogram,
    moves_in_flight: IntGaugeVec,
    slice_replicas: IntGaugeVec,
    slice_start: IntGaugeVec,
    identity_conflicts: IntCounterVec,
    identity_conflict: IntGaugeVec,
    stale_writes: IntCounterVec,
    superseded: IntGaugeVec,
    leader: IntGauge,
    leader_term: IntGauge,
    shards: IntGauge,
    last_contact: GaugeVec,
    fenced: IntGaugeVec,
    failovers: IntCounterVec,
    federations: IntGauge,
    silence_checks: prometheus::IntCounter,
    runtime: ControllerRuntime,
    slice_clusters: parking_lot::Mutex<std::collections::BTreeMap<String, std::collections::BTreeSet<String>>>,
}

fn counter(registry: &Exposition, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help).namespace("spanset"), labels).expect("valid metric");
    registry.register(&c);
    c
}

fn gauge(registry: &Exposition, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help).namespace("spanset"), labels).expect("valid metric");
    registry.register(&g);
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
        let registry = Exposition::default();
        let buckets = vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0];
        let reconcile_duration = HistogramVec::new(
            HistogramOpts::new("reconcile_duration_seconds", "Time of one reconcile of a federation")
                .namespace("spanset")
                .buckets(buckets),
            &["federation"],
        )
        .expect("valid metric");
        registry.register(&reconcile_duration);
        let move_duration = Histogram::with_opts(
            HistogramOpts::new("move_duration_seconds", "Time from an ordinal's release to Ready in its new cluster")
                .namespace("spanset")
                .buckets(vec![0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0]),
        )
        .expect("valid metric");
        registry.register(&move_duration);
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
        registry.register(&move_handoff);
        let leader = IntGauge::with_opts(
            Opts::new("leader", "How many shards this process leads (unsharded: 1 while it leads)")
                .namespace("spanset"),
        )
        .expect("valid metric");
        registry.register(&leader);
        let shards = IntGauge::with_opts(
            Opts::new("shards", "How many shards federations are divided into (--shards)").namespace("spanset"),
        )
        .expect("valid metric");
        registry.register(&shards);
        let leader_term = IntGauge::with_opts(
            Opts::new("leader_term", "The term this process leads in (0 while it does not lead)").namespace("spanset"),
        )
        .expect("valid metric");
        registry.register(&leader_term);
        let last_contact = GaugeVec::new(
            Opts::new("member_last_contact_timestamp_seconds", "Unix time of the member's last successful answer")
                .namespace("spanset"),
            &["cluster"],
        )
        .expect("valid metric");
        registry.register(&last_contact);
        let drill_seconds = GaugeVec::new(
            Opts::new("drill_seconds", "Stages of the last `spanset drill` of a federation, as its report says")
                .namespace("spanset"),
            &["federation", "drill", "stage"],
        )
        .expect("valid metric");
        registry.register(&drill_seconds);
        let federations =
            IntGauge::with_opts(Opts::new("federations", "FederatedStatefulSets coordinated now").namespace("spanset"))
                .expect("valid metric");
        registry.register(&federations);
        let silence_checks = prometheus::IntCounter::with_opts(
            Opts::new(
                "silence_checks_total",
                "Times a coordinator looked at its members' silence because one turned quiet or crossed a \
                 threshold (Unreachable, automatic fence); none while every member answers",
            )
            .namespace("spanset"),
        )
        .expect("valid metric");
        registry.register(&silence_checks);
        let runtime = ControllerRuntime::register(&registry);
        let http_duration = HistogramVec::new(
            HistogramOpts::new(
                "member_http_request_duration_seconds",
                "Time of a request to a member, to its whole response (a watch: until it is open)",
            )
            .namespace("spanset")
            .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0]),
            &["cluster", "verb"],
        )
        .expect("valid metric");
        registry.register(&http_duration);
        Self {
            drill_seconds,
            http_requests: counter(
                &registry,
                "member_http_requests_total",
                "HTTP requests to members as sent (kube's retries included), by verb and status code",
                &["cluster", "verb", "code"],
            ),
            http_duration,
            last_contact,
            fenced: gauge(
                &registry,
                "member_fenced",
                "1 while the member is fenced (MemberCluster spec.fenced)",
                &["cluster"],
            ),
            failovers: counter(
                &registry,
                "failovers_total",
                "Members fenced by the Automatic failover policy (their ordinals then start elsewhere)",
                &["cluster"],
            ),
            federations,
            silence_checks,
            runtime,
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
            reconcile_errors: counter(
                &registry,
                "reconcile_errors_total",
                "Reconciles of federations that did not finish, by the part of the round that failed",
                &["federation", "category"],
            ),
            moves: counter(&registry, "moves_total", "Ordinal moves finished", &["federation", "result"]),
            moves_in_flight: gauge(
                &registry,
                "moves_in_flight",
                "Ordinals moving now, by phase",
                &["federation", "phase"],
            ),
            slice_replicas: gauge(
                &registry,
                "slice_replicas",
                "Replicas of a federation's slice in a member",
                &["federation", "cluster", "state"],
            ),
            slice_start: gauge(
                &registry,
                "slice_start_ordinal",
                "First ordinal of a federation's slice in a member (.spec.ordinals.start written there)",
                &["federation", "cluster"],
            ),
            identity_conflicts: counter(
                &registry,
                "identity_conflicts_total",
                "Times one ordinal was seen running in two members (must stay 0)",
                &["federation"],
            ),
            identity_conflict: gauge(
                &registry,
                "identity_conflict",
                "1 while the federation's IdentityConflict condition is True (an ordinal runs in two members \
                 now), else 0",
                &["federation"],
            ),
            stale_writes: counter(
                &registry,
                "stale_writes_refused_total",
                "Member writes this process refused to make because the member carries a newer term (this \
                 process is a stale leader and steps down)",
                &["cluster"],
            ),
            superseded: gauge(
                &registry,
                "superseded_by_newer_version",
                "1 once this process met an object written by a newer controller version (label `version`) and \
                 stopped leading for good; roll forward, or see docs/operations/upgrade.md to roll back",
                &["version"],
            ),
            reconcile_duration,
            move_duration,
            move_handoff,
            leader,
            leader_term,
            shards,
            registry,
            slice_clusters: Default::default(),
        }
    }

    /// The text exposition of every series.
    pub fn render(&self) -> String {
        self.registry.render()
    }

    /// A request to a member.
    pub fn api_request(&self, cluster: &str, verb: &str) {
        self.api_requests.with_label_values(&[cluster, verb]).inc();
    }

    /// An HTTP request to a member ended: with a response of status `code`, or without one
    /// (`None`: connection refused, timeout…, counted as code `error`). Codes outside
    /// [`HTTP_CODES`] count as `other`, so the label set stays bounded.
    pub fn member_http_request(&self, cluster: &str, verb: &str, code: Option<u16>, seconds: f64) {
        let code = match code {
            None => "error",
            Some(c) => HTTP_CODES.iter().copied().find(|k| k.parse() == Ok(c)).unwrap_or("other"),
        };
        self.http_requests.with_label_values(&[cluster, verb, code]).inc();
        self.http_duration.with_label_values(&[cluster, verb]).observe(seconds);
    }

    /// A watch event from a member.
    pub fn watch_event(&self, cluster: &str, resource: &str) {
        self.watch_events.with_label_values(&[cluster, resource]).inc();
    }

    /// A member watch failed and will restart.
    pub fn watch_restart(&self, cluster: &str) {
        self.watch_restarts.with_label_values(&[cluster]).inc();
    }

    /// Whether a member answers (its probe's outcome). Its last contact time is not touched
    /// here but by [`Metrics::answered`], at each answer: a member stays reachable for a while
    /// after its last answer, and "how long since" must read its silence.
    pub fn set_reachable(&self, cluster: &str, up: bool) {
        self.member_reachable.with_label_values(&[cluster]).set(i64::from(up));
        let _ = self.watch_restarts.with_label_values(&[cluster]);
        let _ = self.stale_writes.with_label_values(&[cluster]);
        // Never answered: the series exists (at 0), so "how long since" alerts see it.
        let _ = self.last_contact.with_label_values(&[cluster]);
    }

    /// A member answered a call now: its last contact time, as it happens (between probe
    /// ticks too), so that "how long since" is exact to the answer.
    pub fn answered(&self, cluster: &str) {
        self.last_contact.with_label_values(&[cluster]).set(unix_now());
    }

    /// A member's MemberCluster was seen: whether it is fenced. Also starts its failover
    /// counter at 0, so that rate() and increase() see the first failover.
    pub fn set_fenced(&self, cluster: &str, fenced: bool) {
        self.fenced.with_label_values(&[cluster]).set(i64::from(fenced));
        let _ = self.failovers.with_label_values(&[cluster]);
    }

    /// A failover: the failover code calls this once each time it hands the ordinals of the
    /// fenced member `cluster` to the others (however many ordinals move). Labelled by the
    /// fenced member only, so the label set stays bounded by the members.
    pub fn failover(&self, cluster: &str) {
        self.failovers.with_label_values(&[cluster]).inc();
    }

    /// Removes the series the supervisor keeps for a MemberCluster that was deleted.
    pub fn forget_member(&self, cluster: &str) {
        let _ = self.fenced.remove_label_values(&[cluster]);
        let _ = self.failovers.remove_label_values(&[cluster]);
    }

    /// An object written in a member.
    pub fn member_write(&self, cluster: &str, kind: &str) {
        self.member_writes.with_label_values(&[cluster, kind]).inc();
    }

    /// A reconcile ended: finished, or failed in the part `failed` names (a bounded category:
    /// a series is made at its first failure, never per error message).
    pub fn reconciled(&self, federation: &str, failed: Option<&str>, seconds: f64) {
        let ok = failed.is_none();
        if let Some(category) = failed {
            self.reconcile_errors.with_label_values(&[federation, category]).inc();
        }
        self.reconciles.with_label_values(&[federation, if ok { "ok" } else { "error" }]).inc();
        let _ = self.reconciles.with_label_values(&[federation, if ok { "error" } else { "ok" }]);
        self.reconcile_duration.with_label_values(&[federation]).observe(seconds);
        self.runtime.reconciled(ok, seconds);
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

    /// The slices (cluster, first ordinal, desired, ready) and the phases of the moves in flight of a
    /// federation now. A cluster that no longer has a slice loses its series; every phase of
    /// [`PHASES`] gets a series (0 when none), and so does the conflict counter.
    pub fn federation_state<'a>(
        &self,
        federation: &str,
        slices: &[(String, i64, i64, i64)],
        moving: impl IntoIterator<Item = &'a str>,
    ) {
        let mut all = self.slice_clusters.lock();
        let fresh = !all.contains_key(federation);
        let known = all.entry(federation.to_string()).or_default();
        let now: std::collections::BTreeSet<String> = slices.iter().map(|(c, ..)| c.clone()).collect();
        for gone in known.difference(&now) {
            for state in ["desired", "ready"] {
                let _ = self.slice_replicas.remove_label_values(&[federation, gone, state]);
            }
            let _ = self.slice_start.remove_label_values(&[federation, gone]);
        }
        *known = now;
        for (cluster, start, desired, ready) in slices {
            self.slice_start.with_label_values(&[federation, cluster]).set(*start);
            self.slice_replicas.with_label_values(&[federation, cluster, "desired"]).set(*desired);
            self.slice_replicas.with_label_values(&[federation, cluster, "ready"]).set(*ready);
        }
        let mut counts = [0i64; PHASES.len()];
        for phase in moving {
            // An unknown phase (a newer controller's) counts under the last known one rather
            // than adding a label value.
            let i = PHASES.iter().position(|p| *p == phase).unwrap_or(PHASES.len() - 1);
            counts[i] += 1;
        }
        for (phase, n) in PHASES.iter().zip(counts) {
            self.moves_in_flight.with_label_values(&[federation, phase]).set(n);
        }
        let _ = self.identity_conflicts.with_label_values(&[federation]);
        let _ = self.identity_conflict.with_label_values(&[federation]);
        let _ = self.moves.with_label_values(&[federation, "done"]);
        if fresh {
            self.federations.set(all.len() as i64);
        }
    }

    /// One ordinal seen running in two members.
    pub fn identity_conflict(&self, federation: &str) {
        self.identity_conflicts.with_label_values(&[federation]).inc();
    }

    /// Whether an ordinal of the federation runs in two members now (its IdentityConflict
    /// condition): a gauge that goes back to 0 when the conflict ends, so that an alert on it
    /// resolves, where the counter above only ever grows.
    pub fn identity_conflict_now(&self, federation: &str, conflicting: bool) {
        self.identity_conflict.with_label_values(&[federation]).set(i64::from(conflicting));
    }

    /// How many shards this process leads (with one shard: 1 while it leads), and the term
    /// of shard 0's leadership.
    pub fn set_leader(&self, shards_led: usize, term: Option<u64>) {
        self.leader.set(i64::try_from(shards_led).unwrap_or(i64::MAX));
        self.leader_term.set(term.and_then(|t| i64::try_from(t).ok()).unwrap_or(0));
    }

    /// How many shards federations are divided into (`--shards`).
    pub fn set_shards(&self, count: u32) {
        self.shards.set(i64::from(count));
    }

    /// A write to member `cluster` was refused before it was sent: the member carries a term
    /// newer than the writer's.
    pub fn stale_write_refused(&self, cluster: &str) {
        self.stale_writes.with_label_values(&[cluster]).inc();
    }

    /// This process met an object written by controller version `theirs`, newer than its own,
    /// and stopped leading for good.
    pub fn superseded(&self, theirs: &str) {
        self.superseded.with_label_values(&[theirs]).set(1);
    }

    /// Removes the series of a member that is gone.
    pub fn forget_cluster(&self, cluster: &str) {
        let _ = self.member_reachable.remove_label_values(&[cluster]);
        let _ = self.last_contact.remove_label_values(&[cluster]);
        let _ = self.watch_restarts.remove_label_values(&[cluster]);
        let _ = self.stale_writes.remove_label_values(&[cluster]);
        for verb in VERBS {
            let _ = self.api_requests.remove_label_values(&[cluster, verb]);
        }
        for verb in HTTP_VERBS {
            let _ = self.http_duration.remove_label_values(&[cluster, verb]);
            for code in HTTP_CODES.iter().chain(&["other", "error"]) {
                let _ = self.http_requests.remove_label_values(&[cluster, verb, code]);
            }
        }
        for resource in WATCHED {
            let _ = self.watch_events.remove_label_values(&[cluster, resource]);
        }
        for kind in WRITTEN {
            let _ = self.member_writes.remove_label_values(&[cluster, kind]);
        }
    }

    /// The stages of a federation's last drill (`drill` is `evacuate` or `cluster-loss`, the
    /// stages a fixed list per drill); a new drill's stages replace the last one's.
    pub fn drill(&self, federation: &str, drill: &str, stages: &[(&str, f64)]) {
        for d in DRILLS {
            for stage in DRILL_STAGES {
                let _ = self.drill_seconds.remove_label_values(&[federation, d, stage]);
            }
        }
        for (stage, secs) in stages.iter().filter(|(s, _)| DRILL_STAGES.contains(s)) {
            if DRILLS.contains(&drill) {
                self.drill_seconds.with_label_values(&[federation, drill, stage]).set(*secs);
            }
        }
    }

    /// A coordinator looked at its members' silence: told one is quiet, or at a threshold (see
    /// `coordinator::silence`).
    pub fn silence_check(&self) {
        self.silence_checks.inc();
    }

    /// One federation's reconcile entered (`true`) or left (`false`) the work queue
    /// (`workqueue_depth`).
    pub fn queued(&self, queued: bool) {
        self.runtime.queued(queued);
    }

    /// Removes the series of a federation that is gone.
    pub fn forget_federation(&self, federation: &str) {
        self.drill(federation, "", &[]);
        let clusters = self.slice_clusters.lock().remove(federation).unwrap_or_default();
        for cluster in clusters {
            for state in ["desired", "ready"] {
                let _ = self.slice_replicas.remove_label_values(&[federation, &cluster, state]);
            }
            let _ = self.slice_start.remove_label_values(&[federation, &cluster]);
        }
        for phase in PHASES {
            let _ = self.moves_in_flight.remove_label_values(&[federation, phase]);
        }
        self.federations.set(self.slice_clusters.lock().len() as i64);
        let _ = self.identity_conflicts.remove_label_values(&[federation]);
        let _ = self.identity_conflict.remove_label_values(&[federation]);
        let _ = self.reconcile_duration.remove_label_values(&[federation]);
        for result in ["ok", "error"] {
            let _ = self.reconciles.remove_label_values(&[federation, result]);
        }
        for category in RECONCILE_ERROR_CATEGORIES {
            let _ = self.reconcile_errors.remove_label_values(&[federation, category]);
        }
        let _ = self.moves.remove_label_values(&[federation, "done"]);
    }
}

/// The phases of a move in flight (`status.moves[].phase`) that get a series, in order; a
/// `Parked` move (or an unknown phase) counts under the last.
pub const PHASES: [&str; 4] = [
    MovePhase::Draining.as_str(),
    MovePhase::Released.as_str(),
    MovePhase::Handover.as_str(),
    MovePhase::Starting.as_str(),
];

fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The verbs of member requests (a closed set, so their series can be removed).
pub const VERBS: [&str; 5] = ["get", "list", "create", "update", "delete"];
/// The verbs of HTTP requests to members (see [`crate::runtime::member_http::verb`]).
pub const HTTP_VERBS: [&str; 7] = ["get", "list", "watch", "create", "update", "patch", "delete"];
/// The status codes a member request is labelled with; any other is `other`, no answer `error`.
pub const HTTP_CODES: [&str; 15] =
    ["200", "201", "202", "204", "400", "401", "403", "404", "409", "410", "422", "429", "500", "503", "504"];
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

    fn series_of(text: &str, needle: &str) -> usize {
        text.lines().filter(|l| !l.starts_with('#') && l.contains(needle)).count()
    }

    #[test]
    fn the_work_queue_depth_counts_federations_waiting_to_reconcile_and_drills_replace_their_figures() {
        let m = Metrics::new();
        assert!(m.render().contains(r#"workqueue_depth{name="federatedstatefulset"} 0"#));
        m.queued(true);
        m.queued(true);
        m.queued(false);
        assert!(m.render().contains(r#"workqueue_depth{name="federatedstatefulset"} 1"#), "{}", m.render());
        m.drill("default/a", "evacuate", &[("total", 1.5), ("nonsense", 9.0)]);
        let text = m.render();
        assert!(text.contains(r#"spanset_drill_seconds{drill="evacuate",federation="default/a",stage="total"} 1.5"#));
        assert_eq!(series_of(&text, "nonsense"), 0, "stages outside the fixed list are not exposed");
        m.drill("default/a", "cluster-loss", &[("detection", 15.0)]);
        assert_eq!(series_of(&m.render(), r#"drill="evacuate""#), 0, "a new drill replaces the last one's figures");
        m.forget_federation("default/a");
        assert_eq!(series_of(&m.render(), "spanset_drill_seconds"), 0);
    }

    #[test]
    fn the_identity_conflict_gauge_is_1_while_a_conflict_lasts_and_back_to_0_when_it_ends() {
        let m = Metrics::new();
        m.federation_state("default/a", &[], std::iter::empty());
        let now =
            |m: &Metrics| m.render().lines().find(|l| l.starts_with("spanset_identity_conflict{")).map(str::to_string);
        assert_eq!(now(&m).as_deref(), Some(r#"spanset_identity_conflict{federation="default/a"} 0"#));
        m.identity_conflict_now("default/a", true);
        m.identity_conflict("default/a");
        assert_eq!(now(&m).as_deref(), Some(r#"spanset_identity_conflict{federation="default/a"} 1"#));
        m.identity_conflict_now("default/a", false);
        assert_eq!(
            now(&m).as_deref(),
            Some(r#"spanset_identity_conflict{federation="default/a"} 0"#),
            "the conflict ended"
        );
        assert!(
            m.render().contains(r#"spanset_identity_conflicts_total{federation="default/a"} 1"#),
            "the count stays"
        );
        m.forget_federation("default/a");
        assert_eq!(now(&m), None, "a forgotten federation has no series");
    }

    #[test]
    fn a_federation_s_series_start_at_zero_and_disappear_when_it_is_forgotten() {
        let m = Metrics::new();
        let slices = vec![("east".to_string(), 0, 2, 1), ("west".to_string(), 2, 1, 1)];
        m.federation_state("default/a", &slices, ["Draining", "Starting", "Starting"]);
        m.reconciled("default/a", None, 0.01);
        m.reconciled("default/a", Some("status"), 0.01);
        let text = m.render();
        assert!(text.contains(r#"spanset_moves_in_flight{federation="default/a",phase="Starting"} 2"#), "{text}");
        assert!(text.contains(r#"spanset_moves_in_flight{federation="default/a",phase="Released"} 0"#), "{text}");
        assert!(text.contains(r#"spanset_identity_conflicts_total{federation="default/a"} 0"#), "{text}");
        assert!(text.contains(r#"spanset_reconciles_total{federation="default/a",result="error"} 1"#), "{text}");
        assert!(
            text.contains(r#"spanset_reconcile_errors_total{category="status",federation="default/a"} 1"#),
            "{text}"
        );
        assert!(text.contains("spanset_federations 1"), "{text}");
        assert!(
            text.contains(
                r#"controller_runtime_reconcile_total{controller="federatedstatefulset",result="success"} 1"#
            ),
            "{text}"
        );
        m.federation_state("default/a", &slices[..1], std::iter::empty());
        assert_eq!(series_of(&m.render(), r#"cluster="west""#), 0, "a cluster without a slice loses its series");
        m.forget_federation("default/a");
        let text = m.render();
        assert_eq!(series_of(&text, "default/a"), 0, "{text}");
        assert!(text.contains("spanset_federations 0"), "{text}");
    }

    #[test]
    fn a_member_s_series_disappear_when_it_is_forgotten() {
        let m = Metrics::new();
        m.set_fenced("east", true);
        m.set_reachable("east", true);
        m.answered("east");
        m.failover("east");
        m.member_http_request("east", "list", Some(200), 0.01);
        m.member_http_request("east", "get", Some(418), 0.01);
        m.member_http_request("east", "get", None, 3.0);
        let text = m.render();
        assert!(text.contains(r#"spanset_member_fenced{cluster="east"} 1"#), "{text}");
        assert!(text.contains(r#"spanset_failovers_total{cluster="east"} 1"#), "{text}");
        for code in ["200", "other", "error"] {
            assert!(text.contains(&format!(r#"cluster="east",code="{code}""#)), "{text}");
        }
        assert!(!text.contains(r#"spanset_member_last_contact_timestamp_seconds{cluster="east"} 0"#), "{text}");
        m.forget_cluster("east");
        m.forget_member("east");
        assert_eq!(series_of(&m.render(), "east"), 0, "{}", m.render());
    }

    #[test]
    fn an_unknown_move_phase_adds_no_label_value() {
        let m = Metrics::new();
        m.federation_state("default/a", &[], ["Teleporting"]);
        let text = m.render();
        assert_eq!(series_of(&text, "spanset_moves_in_flight{"), PHASES.len(), "{text}");
    }
}
