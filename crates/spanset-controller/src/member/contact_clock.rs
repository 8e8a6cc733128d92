//! When a member last answered, shared by its watcher (which notes every answer) and the
//! coordinators (which read it when they plan or set their silence deadlines). Probes keep it
//! fresh without a report to every federation: a probe changes nothing a federation plans
//! from except this instant, and a coordinator reads it only when it has a reason to plan.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

/// How long a member is silent before its watcher tells every subscribed coordinator so
/// ([`crate::actors::messages::MemberQuiet`]): coordinators time their own silence
/// thresholds only while a member is quiet, so that a thousand federations over members that
/// all answer set no timers. Two probe periods: one late answer does not make a member quiet.
/// Below the shortest threshold a federation may set (`MIN_UNREACHABLE_AFTER`), with a
/// second to spare, so that the notice always comes before the first threshold it serves.
pub const QUIET_AFTER: Duration = Duration::from_secs(4);

/// The instant of a member's last answer, or none yet. Cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct ContactClock(Arc<Mutex<Option<Instant>>>);

impl ContactClock {
    /// The member answered at `at` (an earlier instant than the one noted is ignored).
    pub fn note(&self, at: Instant) {
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|t| t < at) {
            *last = Some(at);
        }
    }

    /// The member's last answer, if any.
    pub fn last(&self) -> Option<Instant> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The later of `seen` (e.g. what a report carried) and the last answer noted here.
    pub fn freshest(&self, seen: Option<Instant>) -> Option<Instant> {
        seen.max(self.last())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn clones_share_the_latest_answer_and_never_go_back() {
        let clock = ContactClock::default();
        let reader = clock.clone();
        assert_eq!(reader.last(), None);
        let t0 = Instant::now();
        clock.note(t0 + Duration::from_secs(2));
        clock.note(t0);
        assert_eq!(reader.last(), Some(t0 + Duration::from_secs(2)));
        assert_eq!(reader.freshest(Some(t0 + Duration::from_secs(5))), Some(t0 + Duration::from_secs(5)));
        assert_eq!(reader.freshest(None), Some(t0 + Duration::from_secs(2)));
    }
}
