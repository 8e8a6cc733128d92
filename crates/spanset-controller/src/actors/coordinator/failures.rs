//! How a coordinator reports its failing reconciles in the log. A failed reconcile is retried
//! every quarter second, so warning on each would bury the log under one error, while an operator
//! paged by `SpansetReconcileErrors` must find one saying why. So each distinct failure (its
//! [`RoundError::category`] and the members it names: a member's words may differ at every try)
//! is logged at warn once while it lasts (its repeats at debug), a stream of ever-different
//! failures at most once per [`MIN_GAP`], and the first reconcile that finishes again says so at
//! info with how many failed before it.

use std::time::{Duration, Instant};

use super::round_error::RoundError;

/// What makes two failures one: the part of the round, and the members named.
type Sameness = (&'static str, Vec<String>);

fn sameness(error: &RoundError) -> Sameness {
    (error.category(), error.members().into_iter().map(str::to_string).collect())
}

/// The least time between two warnings about different errors of one federation.
pub const MIN_GAP: Duration = Duration::from_secs(30);

/// The failures of one federation's reconciles since the last that finished.
#[derive(Debug, Default)]
pub struct Failures {
    /// The failure last logged at warn, and when.
    warned: Option<(Sameness, Instant)>,
    /// Reconciles failed since the last one that finished.
    in_a_row: u64,
}

impl Failures {
    /// A reconcile failed with `error` at `now`: whether to log it at warn (else at debug).
    pub fn failed(&mut self, error: &RoundError, now: Instant) -> bool {
        self.in_a_row += 1;
        let this = sameness(error);
        let warn = match &self.warned {
            None => true,
            Some((last, at)) => *last != this && now.saturating_duration_since(*at) >= MIN_GAP,
        };
        if warn {
            self.warned = Some((this, now));
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
    use crate::actors::coordinator::round_error::{MemberFailure, MemberPart};

    fn writes(failures: &[(&str, &str)]) -> RoundError {
        RoundError::Members {
            part: MemberPart::Writes,
            failures: failures.iter().map(|(c, m)| MemberFailure::new(*c, m)).collect(),
        }
    }

    #[test]
    fn an_error_warns_once_while_it_lasts_and_again_after_a_reconcile_finished() {
        let mut f = Failures::default();
        let t = Instant::now();
        assert!(f.failed(&writes(&[("east", "connection refused")]), t), "the first failure warns");
        for i in 1..100 {
            let later = t + Duration::from_millis(250 * i);
            // The member's words change at every try (a timeout's figure, a resourceVersion).
            let words = format!("no answer within {i} ms");
            assert!(!f.failed(&writes(&[("east", &words)]), later), "a repeat warns again");
        }
        assert_eq!(f.finished(), 100);
        assert_eq!(f.finished(), 0, "counted once");
        let again = t + Duration::from_secs(60);
        assert!(f.failed(&writes(&[("east", "connection refused")]), again), "a new episode warns");
    }

    #[test]
    fn different_errors_warn_at_most_once_per_gap() {
        let mut f = Failures::default();
        let t = Instant::now();
        let east = writes(&[("east", "x")]);
        let both = writes(&[("east", "x"), ("west", "y")]);
        let status = RoundError::Status("Conflict".into());
        assert!(f.failed(&east, t));
        assert!(!f.failed(&both, t + MIN_GAP / 2), "another member failing within the gap stays at debug");
        assert!(f.failed(&both, t + MIN_GAP), "after the gap it warns");
        assert!(!f.failed(&both, t + MIN_GAP * 3), "and then is a repeat");
        assert!(f.failed(&status, t + MIN_GAP * 3), "another part failing after the gap warns");
    }
}
