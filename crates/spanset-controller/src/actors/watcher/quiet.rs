//! The member's silence told to every subscribed coordinator once it lasts [`QUIET_AFTER`]
//! (see [`MemberQuiet`]): coordinators time their own silence thresholds only from then, so
//! that members which keep answering cost them no timers.

use std::time::{Duration, Instant};

use actix::prelude::*;

use super::{ClusterWatcher, PROBE_PERIOD};
use crate::{actors::messages::MemberQuiet, member::contact_clock::QUIET_AFTER};

/// What the watcher does about the member's silence at one instant.
#[derive(Debug, PartialEq, Eq)]
enum Quiet {
    /// Tell every federation: the member has been silent for [`QUIET_AFTER`] since this
    /// instant, and that silence was not told yet.
    Tell(Instant),
    /// Look again after this long: the member turns quiet before the next probe tick.
    LookAfter(Duration),
    /// Nothing until the next tick (told already, or quiet only after it).
    Nothing,
}

/// The decision for a member silent since `since` (its last answer, or the watcher's start),
/// with the silence last told starting at `told`.
fn quiet(since: Instant, told: Option<Instant>, now: Instant, period: Duration) -> Quiet {
    if told == Some(since) {
        return Quiet::Nothing;
    }
    let at = since + QUIET_AFTER;
    match at.checked_duration_since(now) {
        None | Some(Duration::ZERO) => Quiet::Tell(since),
        Some(left) if left <= period => Quiet::LookAfter(left + Duration::from_millis(5)),
        Some(_) => Quiet::Nothing,
    }
}

impl ClusterWatcher {
    /// At each probe tick (and at the instant found then): tells every federation that the
    /// member turned quiet, once per silence.
    pub(super) fn tell_if_quiet(&mut self, ctx: &mut Context<Self>) {
        let since = self.health.last_contact.unwrap_or(self.started);
        match quiet(since, self.quiet_told, Instant::now(), PROBE_PERIOD) {
            Quiet::Tell(since) => {
                self.quiet_told = Some(since);
                tracing::debug!(cluster = %self.cluster, subscribers = self.subscribers.len(), "member quiet; telling every federation");
                for (key, sub) in &self.subscribers {
                    sub.quiet.do_send(MemberQuiet { cluster: self.cluster.clone(), key: key.clone() });
                }
            }
            Quiet::LookAfter(left) => {
                ctx.run_later(left, |act, ctx| act.tell_if_quiet(ctx));
            }
            Quiet::Nothing => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silence_is_told_once_when_it_reaches_the_quiet_threshold() {
        let now = Instant::now();
        let period = Duration::from_secs(2);
        let since = now - QUIET_AFTER - Duration::from_millis(1);
        // Quiet, not told: tell it, once.
        assert_eq!(quiet(since, None, now, period), Quiet::Tell(since));
        assert_eq!(quiet(since, Some(since), now, period), Quiet::Nothing);
        // An earlier silence was told; the member answered since and is quiet again.
        assert_eq!(quiet(since, Some(since - Duration::from_secs(30)), now, period), Quiet::Tell(since));
    }

    #[test]
    fn a_silence_turning_quiet_before_the_next_tick_is_looked_at_then() {
        let now = Instant::now();
        let period = Duration::from_secs(2);
        // Quiet in 0.5 s: looked at then, not at the next tick 2 s away.
        let since = now - QUIET_AFTER + Duration::from_millis(500);
        assert_eq!(quiet(since, None, now, period), Quiet::LookAfter(Duration::from_millis(505)));
        // Answered just now: the tick after next looks (nothing to do before it).
        assert_eq!(quiet(now, None, now, period), Quiet::Nothing);
    }
}
