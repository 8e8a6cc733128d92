//! How a coordinator reports its failing reconciles in the log. A failed reconcile is retried
//! every quarter second, so warning on each would bury the log under one error; at debug, as it
//! was, an operator paged by `SpansetReconcileErrors` found nothing saying why. So each distinct
//! error is logged at warn once while it lasts (its repeats at debug), a stream of ever-different
//! errors at most once per [`MIN_GAP`], and the first reconcile that finishes again says so at
//! info with how many failed before it.

use std::time::{Duration, Instant};

/// The least time between two warnings about different errors of one federation.
pub const MIN_GAP: Duration = Duration::from_secs(30);

/// The failures of one federation's reconciles since the last that finished.
#[derive(Debug, Default)]
pub struct Failures {
    /// The error last logged at warn, and when.
    warned: Option<(String, Instant)>,
    /// Reconciles failed since the last one that finished.
    in_a_row: u64,
}

impl Failures {
    /// A reconcile failed with `error` at `now`: whether to log it at warn (else at debug).
    pub fn failed(&mut self, error: &str, now: Instant) -> bool {
        self.in_a_row += 1;
        let warn = match &self.warned {
            None => true,
            Some((last, at)) => last != error && now.saturating_duration_since(*at) >= MIN_GAP,
        };
        if warn {
            self.warned = Some((error.to_string(), now));
        }
        warn
    }

    /// A reconcile finished: how many failed in a row before it (0: none, nothing to say).
    pub fn finished(&mut self) -> u64 {
        self.warned = None;
        std::mem::take(&mut self.in_a_row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_warns_once_while_it_lasts_and_again_after_a_reconcile_finished() {
        let mut f = Failures::default();
        let t = Instant::now();
        assert!(f.failed("member east: connection refused", t), "the first failure warns");
        for i in 1..100 {
            let later = t + Duration::from_millis(250 * i);
            assert!(!f.failed("member east: connection refused", later), "a repeat warns again");
        }
        assert_eq!(f.finished(), 100);
        assert_eq!(f.finished(), 0, "counted once");
        assert!(f.failed("member east: connection refused", t + Duration::from_secs(60)), "a new episode warns");
    }

    #[test]
    fn different_errors_warn_at_most_once_per_gap() {
        let mut f = Failures::default();
        let t = Instant::now();
        assert!(f.failed("a", t));
        assert!(!f.failed("b", t + MIN_GAP / 2), "a different error within the gap stays at debug");
        assert!(f.failed("b", t + MIN_GAP), "a different error after the gap warns");
        assert!(!f.failed("b", t + MIN_GAP * 3), "and then is a repeat");
        assert!(f.failed("c", t + MIN_GAP * 3), "another after the gap warns");
    }
}
