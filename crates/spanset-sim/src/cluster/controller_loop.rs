//! The loop every simulated controller runs: a level-triggered sweep over the cluster, woken by
//! any change to its objects (coalesced), by a change of its injected faults, or by a deadline
//! the sweep itself asked for ([`Wake`]: a pod start finishing, a grace period ending, a node
//! timeout, `minReadySeconds`…) — and otherwise asleep, so that an idle cluster costs nothing
//! (a sandbox of 100 members runs beside the controller on one host). A long [`SAFETY_TICK`]
//! only bounds the harm of a deadline some component forgot to ask for. A watch dropped by the
//! storage (as too slow, or by a fault) is simply re-registered: sweeps read the whole state,
//! so nothing is lost.

use std::{
    cell::Cell,
    sync::Weak,
    time::{Duration, Instant},
};

use crate::{
    cluster::Cluster,
    store::storage::{Event, WatchStart},
};

/// Longest sleep of an idle component: a safety net, not a clock anything relies on.
pub const SAFETY_TICK: Duration = Duration::from_secs(300);

/// Shortest pause between two sweeps woken by deadlines, so that a deadline asked for "now"
/// again and again (a time factor of 0) cannot spin the loop.
const MIN_GAP: Duration = Duration::from_millis(2);

/// When a sweep wants to run again even if nothing changes: the earliest of the deadlines its
/// time-driven rules asked for. A `Cell`, so that helpers deep in a sweep can ask through a
/// shared reference.
#[derive(Debug, Default)]
pub struct Wake {
    at: Cell<Option<Instant>>,
}

impl Wake {
    /// Asks for a sweep at `at` (or earlier, if another rule asked for earlier).
    pub fn at(&self, at: Instant) {
        self.at.set(Some(self.at.get().map_or(at, |a| a.min(at))));
    }

    /// Asks for a sweep once `after` has passed from now.
    pub fn after(&self, after: Duration) {
        self.at(Instant::now() + after);
    }

    /// Whether `after` has passed since `since` at `now`; if not, asks for a sweep when it has.
    /// The one-liner time-driven rules use in place of `now - since >= after`.
    pub fn due(&self, since: Instant, after: Duration, now: Instant) -> bool {
        let at = since + after;
        if now >= at {
            return true;
        }
        self.at(at);
        false
    }

    /// The earliest deadline asked for, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.at.get()
    }
}

/// Stored kinds a component never reads, so that their changes do not wake it: Events (every
/// component writes them, none acts on them) and EndpointSlices (spanset publishes the pods of
/// the other members there, hundreds of writes a second while 100 members converge; only the
/// EndpointSlice controller reads them). Each stored kind is `(group, plural)`.
pub const UNREAD_BY_WORKLOADS: &[(&str, &str)] = &[("", "events"), ("discovery.k8s.io", "endpointslices")];

/// Only Events: what the EndpointSlice controller does not read.
pub const UNREAD_BUT_EVENTS: &[(&str, &str)] = &[("", "events")];

/// Whether a change of the stored kind `resource` wakes a component that never reads `unread`.
pub fn wakes(resource: &(String, String), unread: &[(&str, &str)]) -> bool {
    !unread.iter().any(|(group, plural)| resource.0 == *group && resource.1 == *plural)
}

/// Runs `sweep` on every change of a kind not in `unread` and at each deadline it asks for
/// through its [`Wake`], until the cluster is gone.
pub async fn run(cluster: Weak<Cluster>, unread: &[(&str, &str)], sweep: impl FnMut(&Cluster, &Wake)) {
    run_woken_by(cluster, |ev| wakes(&ev.resource, unread), sweep).await;
}

/// [`run`] for a component that tells the changes it acts on by more than their kind (the
/// EndpointSlice controller: only the slices it manages).
pub async fn run_woken_by(
    cluster: Weak<Cluster>,
    woken_by: impl Fn(&Event) -> bool,
    mut sweep: impl FnMut(&Cluster, &Wake),
) {
    let mut events = None;
    let Some(mut pokes) = cluster.upgrade().map(|c| c.faults.pokes()) else { return };
    loop {
        let Some(c) = cluster.upgrade() else { return };
        if events.is_none() {
            events = c.storage.watch(None, WatchStart::After(c.storage.current_rv())).ok().map(|s| s.live);
        }
        pokes.mark_unchanged();
        let wake = Wake::default();
        sweep(&c, &wake);
        drop(c);
        let now = Instant::now();
        let deadline = match wake.deadline() {
            Some(at) => at.max(now + MIN_GAP).min(now + SAFETY_TICK),
            None => now + SAFETY_TICK,
        };
        let sleep = tokio::time::sleep_until(deadline.into());
        match events.as_mut() {
            Some(rx) => {
                tokio::pin!(sleep);
                // Changes of kinds it never reads are drained without a sweep.
                let closed = loop {
                    tokio::select! {
                        ev = rx.recv() => {
                            let Some(ev) = ev else { break true };
                            let mut woken = woken_by(&ev);
                            // Coalesce a burst of changes into one sweep.
                            while let Ok(ev) = rx.try_recv() {
                                woken |= woken_by(&ev);
                            }
                            if woken {
                                break false;
                            }
                        }
                        _ = pokes.changed() => break false,
                        _ = &mut sleep => break false,
                    }
                };
                if closed {
                    events = None;
                }
            }
            // No watch (the storage refused one): poll, as before, until it takes one again.
            None => tokio::time::sleep(MIN_GAP.max(Duration::from_millis(20))).await,
        }
    }
}
