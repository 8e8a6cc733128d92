//! When a coordinator wakes for its members' silence: at the instant a quiet member's silence
//! crosses one of the federation's thresholds (Unreachable, the automatic fence). Only quiet
//! members count: one that answered within [`QUIET_AFTER`] cannot cross a threshold before its
//! watcher tells the coordinator it is quiet (see [`MemberQuiet`]), so a federation whose
//! members all answer sets no timer at all.
//!
//! [`MemberQuiet`]: crate::actors::messages::MemberQuiet

use std::time::{Duration, Instant};

use crate::{decisions::reconcile::MIN_UNREACHABLE_AFTER, member::contact_clock::QUIET_AFTER};

/// A member silent at least this long counts as quiet when the timer is set: a little under
/// [`QUIET_AFTER`], so that the watcher's notice, sent at that instant, always finds it so.
const QUIET_WHEN_SET: Duration = Duration::from_millis(QUIET_AFTER.as_millis() as u64 - 500);

// The notice must come before the shortest threshold it serves, with a second to spare.
const _: () = assert!(MIN_UNREACHABLE_AFTER.as_millis() >= QUIET_AFTER.as_millis() + 1000);

/// The instants at which the silence of each quiet member (`silent_since`: its last answer, or
/// its watcher's start) crosses one of `deadlines`, counted from `leading` at the earliest (the
/// automatic fence counts silence only from this process's leadership).
pub(super) fn thresholds(
    silent_since: impl IntoIterator<Item = Instant>,
    deadlines: &[Duration],
    leading: Instant,
    now: Instant,
) -> Vec<Instant> {
    let quiet = silent_since.into_iter().filter(|since| now.saturating_duration_since(*since) >= QUIET_WHEN_SET);
    quiet.flat_map(|since| deadlines.iter().map(move |d| since.max(leading) + *d + Duration::from_millis(5))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn members_that_answer_set_no_timer() {
        let now = Instant::now();
        // Answered 1 s and 3 s ago: neither is quiet.
        let since = [now - S, now - 3 * S];
        assert!(thresholds(since, &[10 * S, 310 * S], now - 60 * S, now).is_empty());
    }

    #[test]
    fn a_quiet_member_crosses_each_threshold_from_its_last_answer_or_the_leadership() {
        let now = Instant::now();
        let ms5 = Duration::from_millis(5);
        let quiet = now - 4 * S;
        let got = thresholds([now - S, quiet], &[10 * S, 310 * S], now - 60 * S, now);
        assert_eq!(got, vec![quiet + 10 * S + ms5, quiet + 310 * S + ms5]);
        // Leading for 2 s only: silence counts from the leadership.
        let leading = now - 2 * S;
        assert_eq!(thresholds([quiet], &[10 * S], leading, now), vec![leading + 10 * S + ms5]);
        // Just under the notice's threshold (the notice is on its way): counted.
        let nearly = now - QUIET_AFTER + Duration::from_millis(100);
        assert_eq!(thresholds([nearly], &[10 * S], now - 60 * S, now), vec![nearly + 10 * S + ms5]);
    }
}
