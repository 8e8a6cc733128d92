//! How often a member watch is retried after it failed.

use std::time::Duration;

/// The member watches' retry delays: doubling from 100 ms up to [`RETRY_CAP`]. Shorter than
/// kube's default (up to 30 s) because confirmations wait on these watches: a member that
/// comes back must be seen again within seconds, and one controller retrying every couple of
/// seconds is no load for an apiserver.
pub struct RetryBackoff {
    next: Duration,
}

/// The longest pause between two attempts of a member watch.
pub const RETRY_CAP: Duration = Duration::from_secs(2);

impl Default for RetryBackoff {
    fn default() -> Self {
        Self { next: Duration::from_millis(100) }
    }
}

impl Iterator for RetryBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (self.next * 2).min(RETRY_CAP);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for RetryBackoff {
    fn reset(&mut self) {
        *self = Self::default();
    }
}
