//! The reconcile series under controller-runtime's well-known names, so that dashboards and
//! alerts written for Go controllers (e.g. kubebuilder's) read spanset too. One controller,
//! `federatedstatefulset`; results `success` and `error` as controller-runtime spells them.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts};

use crate::telemetry::exposition::Exposition;

/// controller-runtime's name of this controller (its `controller` label).
pub const CONTROLLER: &str = "federatedstatefulset";

/// `controller_runtime_reconcile_total`, `…_errors_total`, `…_time_seconds`, and client-go's
/// `workqueue_depth`.
pub struct ControllerRuntime {
    total: IntCounterVec,
    errors: IntCounterVec,
    time: HistogramVec,
    depth: IntGaugeVec,
}

impl ControllerRuntime {
    /// Registers the three series in `registry` (without the `spanset_` prefix) and starts
    /// them at 0, so that rates exist before the first reconcile.
    pub fn register(registry: &Exposition) -> Self {
        let total = IntCounterVec::new(
            Opts::new("controller_runtime_reconcile_total", "Total number of reconciliations per controller"),
            &["controller", "result"],
        )
        .expect("valid metric");
        let errors = IntCounterVec::new(
            Opts::new(
                "controller_runtime_reconcile_errors_total",
                "Total number of reconciliation errors per controller",
            ),
            &["controller"],
        )
        .expect("valid metric");
        let time = HistogramVec::new(
            HistogramOpts::new(
                "controller_runtime_reconcile_time_seconds",
                "Length of time per reconciliation per controller",
            )
            .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0]),
            &["controller"],
        )
        .expect("valid metric");
        let depth = IntGaugeVec::new(Opts::new("workqueue_depth", "Current depth of workqueue"), &["name"])
            .expect("valid metric");
        registry.register(&total);
        registry.register(&errors);
        registry.register(&time);
        registry.register(&depth);
        for result in ["success", "error"] {
            let _ = total.with_label_values(&[CONTROLLER, result]);
        }
        let _ = errors.with_label_values(&[CONTROLLER]);
        let _ = depth.with_label_values(&[CONTROLLER]);
        Self { total, errors, time, depth }
    }

    /// A federation's reconcile became wanted (`queued`) or started or was dropped: spanset's
    /// work queue is the set of coordinators with a reconcile wanted and not yet running.
    pub fn queued(&self, queued: bool) {
        let g = self.depth.with_label_values(&[CONTROLLER]);
        if queued { g.inc() } else { g.dec() }
    }

    /// A reconcile ended.
    pub fn reconciled(&self, ok: bool, seconds: f64) {
        self.total.with_label_values(&[CONTROLLER, if ok { "success" } else { "error" }]).inc();
        if !ok {
            self.errors.with_label_values(&[CONTROLLER]).inc();
        }
        self.time.with_label_values(&[CONTROLLER]).observe(seconds);
    }
}
