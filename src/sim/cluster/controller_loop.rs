//! The loop every simulated controller runs: a level-triggered sweep over the cluster, woken by
//! any change (coalesced) or by a short tick, until the cluster is dropped. A watch dropped by
//! the storage (as too slow, or by a fault) is simply re-registered: sweeps read the whole
//! state, so nothing is lost.

use std::{sync::Weak, time::Duration};

use crate::sim::{cluster::Cluster, store::storage::WatchStart};

/// Runs `sweep` on every change and at least every `tick`, until the cluster is gone.
pub async fn run(cluster: Weak<Cluster>, tick: Duration, mut sweep: impl FnMut(&Cluster)) {
    let mut events = None;
    loop {
        let Some(c) = cluster.upgrade() else { return };
        if events.is_none() {
            events = c.storage.watch(None, WatchStart::After(c.storage.current_rv())).ok().map(|s| s.live);
        }
        sweep(&c);
        drop(c);
        match events.as_mut() {
            Some(rx) => {
                tokio::select! {
                    ev = rx.recv() => {
                        if ev.is_none() {
                            events = None;
                        }
                        // Coalesce a burst of changes into one sweep.
                        while matches!(events.as_mut().map(|r| r.try_recv()), Some(Ok(_))) {}
                    }
                    _ = tokio::time::sleep(tick) => {}
                }
            }
            None => tokio::time::sleep(tick).await,
        }
    }
}
