//! Each replica's fair share of the shards: a replica holds at most `ceil(shards / live
//! replicas)` shard Leases, so that a replica that joins gets shards from one holding more
//! than its share, and the shards of one that died are taken by the others.
//!
//! Replicas know of each other by **presence Leases** in the host (one per replica,
//! `BASE-replica-HASH`, labelled [`PRESENCE_LABEL`]), renewed every retry period. A replica
//! counts as live while its presence record keeps changing: one whose record has not changed
//! for a lease duration, by this process's own clock, is gone (as a leader is for the
//! elector). A replica stopping deletes its record; one long gone is deleted by the others.
//!
//! The quota only decides *who* campaigns: safety does not depend on it. Two replicas that
//! disagree about it for a while only take turns on a Lease, each acquisition in a new term.

use std::{
    collections::BTreeMap,
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Instant,
};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, PostParams, Preconditions},
};

use crate::leadership::{
    leader::{LeaseSettings, Quota},
    shards::{Shards, lease_name},
};

/// Label on presence Leases; its value is the base Lease name they belong to (hashed when too
/// long for a label value).
pub const PRESENCE_LABEL: &str = "spanset.dev/presence-of";

/// A presence record unchanged this many lease durations is deleted by whoever sees it.
const FORGET_AFTER_DURATIONS: u32 = 4;

fn fnv(s: &str) -> u64 {
    crate::leadership::shard_hash::fnv1a(s.bytes())
}

/// The label value naming `base`: itself when it fits a label value, else a hash of it.
fn presence_of(base: &str) -> String {
    if base.len() <= 63 { base.to_string() } else { format!("h-{:016x}", fnv(base)) }
}

/// The presence Lease of replica `identity`.
pub fn presence_name(base: &str, identity: &str) -> String {
    format!("{base}-replica-{:016x}", fnv(identity))
}

/// The most shards one of `live` replicas may hold.
pub fn cap(shards: u32, live: usize) -> usize {
    (shards as usize).div_ceil(live.max(1))
}

/// This process's quota of shard Leases, from the live replicas counted by [`run_presence`].
pub struct FairShare {
    shards: Shards,
    names: Vec<String>,
    live: AtomicUsize,
}

impl FairShare {
    /// The quota over `shards`, whose Leases are named after `base`; until replicas are counted,
    /// this one counts as alone.
    pub fn new(shards: Shards, base: &str) -> Self {
        let count = shards.count();
        Self { names: (0..count).map(|s| lease_name(base, s, count)).collect(), shards, live: AtomicUsize::new(1) }
    }

    /// Live replicas counted last (this one included).
    pub fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    fn cap(&self) -> usize {
        cap(self.shards.count(), self.live())
    }
}

impl Quota for FairShare {
    fn may_take(&self) -> bool {
        self.shards.held() < self.cap()
    }

    fn should_yield(&self, name: &str) -> bool {
        if self.shards.held() <= self.cap() {
            return false;
        }
        // One at a time: the highest-numbered shard held.
        let highest = self.shards.iter().enumerate().rev().find(|(_, l)| l.term().is_some()).map(|(i, _)| i);
        highest.is_some_and(|i| self.names[i] == name)
    }
}

/// Keeps this replica's presence Lease and counts the live ones into `share` every retry
/// period, until `shutdown`; then deletes its own record.
pub async fn run_presence(
    api: Api<Lease>,
    settings: LeaseSettings,
    share: Arc<FairShare>,
    shutdown: impl Future<Output = ()>,
) {
    let mut presence = Presence {
        name: presence_name(&settings.name, &settings.identity),
        label: presence_of(&settings.name),
        seen: BTreeMap::new(),
        api,
        s: settings,
    };
    tokio::pin!(shutdown);
    loop {
        let live = tokio::select! {
            biased;
            () = &mut shutdown => break,
            live = presence.round() => live,
        };
        if let Some(live) = live
            && share.live.swap(live, Ordering::SeqCst) != live
        {
            tracing::info!(live, cap = share.cap(), shards = share.shards.count(), "replicas counted");
        }
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            () = tokio::time::sleep(presence.s.retry_period) => {}
        }
    }
    let _ =
        tokio::time::timeout(presence.s.renew_deadline, presence.api.delete(&presence.name, &DeleteParams::default()))
            .await;
}

struct Presence {
    api: Api<Lease>,
    s: LeaseSettings,
    name: String,
    label: String,
    /// Each presence record's resourceVersion, and when this process first saw it.
    seen: BTreeMap<String, (String, Instant)>,
}

impl Presence {
    /// Renews this replica's record and counts the live ones; `None` when the list failed.
    async fn round(&mut self) -> Option<usize> {
        if let Err(e) = self.renew().await {
            tracing::warn!(lease = %self.name, error = %e, "cannot renew this replica's presence");
        }
        let lp = ListParams::default().labels(&format!("{PRESENCE_LABEL}={}", self.label));
        let listed = match tokio::time::timeout(self.s.renew_deadline, self.api.list(&lp)).await {
            Ok(Ok(list)) => list.items,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot list the replicas' presence");
                return None;
            }
            Err(_) => return None,
        };
        let now = Instant::now();
        let mut live = 1; // this replica, whether or not its renewal landed
        let mut seen = BTreeMap::new();
        for lease in listed {
            let (name, rv) = (lease.name_any(), lease.resource_version().unwrap_or_default());
            let since = match self.seen.get(&name) {
                Some((old, since)) if *old == rv => *since,
                _ => now,
            };
            let quiet = now.saturating_duration_since(since);
            if name != self.name && quiet < self.s.lease_duration {
                live += 1;
            }
            if name != self.name && quiet >= self.s.lease_duration * FORGET_AFTER_DURATIONS {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions { resource_version: Some(rv.clone()), uid: None }),
                    ..DeleteParams::default()
                };
                if self.api.delete(&name, &dp).await.is_ok() {
                    tracing::info!(lease = %name, "deleted the presence of a replica gone for long");
                    continue;
                }
            }
            seen.insert(name, (rv, since));
        }
        self.seen = seen;
        Some(live)
    }

    async fn renew(&self) -> Result<(), kube::Error> {
        let stamp = MicroTime(jiff::Timestamp::now());
        let duration = i32::try_from(self.s.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let fresh = |mut lease: Lease| {
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = Some(self.s.identity.clone());
            spec.lease_duration_seconds = Some(duration);
            spec.renew_time = Some(stamp.clone());
            lease
        };
        let read = tokio::time::timeout(self.s.renew_deadline, self.api.get_opt(&self.name)).await;
        match read {
            Ok(Ok(Some(lease))) => {
                self.api.replace(&self.name, &PostParams::default(), &fresh(lease)).await?;
            }
            Ok(Ok(None)) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.s.namespace.clone()),
                        labels: Some([(PRESENCE_LABEL.to_string(), self.label.clone())].into()),
                        ..ObjectMeta::default()
                    },
                    spec: None,
                };
                self.api.create(&PostParams::default(), &fresh(lease)).await?;
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_divides_the_shards_rounding_up() {
        assert_eq!(cap(4, 1), 4);
        assert_eq!(cap(4, 2), 2);
        assert_eq!(cap(4, 3), 2);
        assert_eq!(cap(4, 5), 1);
        assert_eq!(cap(4, 0), 4);
    }

    #[tokio::test]
    async fn a_replica_over_its_share_yields_its_highest_shard_only() {
        let shards = Shards::new(4);
        let share = FairShare::new(shards.clone(), "l");
        for i in 0..3 {
            shards.get(i).unwrap().lead_for_tests(7);
        }
        assert!(share.may_take(), "alone, it may hold all four");
        assert!(!share.should_yield("l-shard-2-of-4"));
        share.live.store(2, Ordering::SeqCst);
        assert!(!share.may_take(), "two replicas: two shards each, and it holds three");
        assert!(share.should_yield("l-shard-2-of-4"), "the highest held goes");
        assert!(!share.should_yield("l-shard-1-of-4"));
        assert!(!share.should_yield("l-shard-3-of-4"), "not held");
    }

    #[test]
    fn presence_names_fit_the_api() {
        let long = "x".repeat(200);
        assert!(presence_of(&long).len() <= 63);
        assert_eq!(presence_of("spanset-leader"), "spanset-leader");
        assert_ne!(presence_name("l", "a"), presence_name("l", "b"));
    }
}
