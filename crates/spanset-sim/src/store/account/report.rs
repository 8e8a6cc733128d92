//! What the resource account says, as data: the counts of one cluster (writes by actor and
//! resource, volumes, Events by reason) and of a whole sandbox, with the accessors a test or a
//! report reads them by and [`AccountReport::since`], the cost of one phase. The admin API
//! serves it as JSON; `sim-ctl account`, `drill chaos`, the benches and the tests read it back
//! into the same types.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The writes of one actor to one resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WriteCounts {
    /// Objects created.
    pub created: u64,
    /// Updates and patches of the main resource (and `/scale`) that changed the object.
    pub updated: u64,
    /// Updates and patches of `/status` that changed the object.
    pub status_updated: u64,
    /// Updates and patches that changed nothing (still a request the server served).
    pub unchanged: u64,
    /// Delete requests (one per request, whether it removed the object or only marked it).
    pub deleted: u64,
    /// Objects this actor's writes removed from the store: a delete without finalizers, the
    /// last finalizer dropped, a kubelet confirming a pod's end.
    pub removed: u64,
}

impl WriteCounts {
    /// Creates, changing updates (main and status) and deletes: the writes that cost the
    /// cluster something.
    pub fn writes(&self) -> u64 {
        self.created + self.updated + self.status_updated + self.deleted
    }

    fn add(&mut self, other: &WriteCounts) {
        self.created += other.created;
        self.updated += other.updated;
        self.status_updated += other.status_updated;
        self.unchanged += other.unchanged;
        self.deleted += other.deleted;
        self.removed += other.removed;
    }

    fn minus(&self, earlier: &WriteCounts) -> WriteCounts {
        WriteCounts {
            created: self.created.saturating_sub(earlier.created),
            updated: self.updated.saturating_sub(earlier.updated),
            status_updated: self.status_updated.saturating_sub(earlier.status_updated),
            unchanged: self.unchanged.saturating_sub(earlier.unchanged),
            deleted: self.deleted.saturating_sub(earlier.deleted),
            removed: self.removed.saturating_sub(earlier.removed),
        }
    }

    fn is_zero(&self) -> bool {
        *self == WriteCounts::default()
    }
}

/// The PersistentVolumes of one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeCounts {
    /// Volumes the PersistentVolume controller provisioned for claims.
    pub provisioned: u64,
    /// Times the PersistentVolume controller turned a volume `Released` (its claim gone).
    pub released: u64,
    /// The PersistentVolumes that exist when the account is read, by `status.phase`: what is
    /// left over.
    pub by_phase: BTreeMap<String, u64>,
}

/// The Events of one reason in one cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EventCounts {
    /// Events created.
    pub created: u64,
    /// Updates of existing Events (a repeat's `count`, a series' count).
    pub updated: u64,
}

/// The account of one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterAccount {
    /// Writes by actor (`spanset`, a component's name, `user:<program>`), then by resource
    /// (`pods`, `statefulsets.apps`, …).
    pub writes: BTreeMap<String, BTreeMap<String, WriteCounts>>,
    /// Volumes.
    pub volumes: VolumeCounts,
    /// Events by reason.
    pub events: BTreeMap<String, EventCounts>,
}

impl ClusterAccount {
    /// One actor's writes to one resource (zeros when it made none).
    pub fn of(&self, actor: &str, resource: &str) -> WriteCounts {
        self.writes.get(actor).and_then(|r| r.get(resource)).copied().unwrap_or_default()
    }

    /// One actor's writes, summed over every resource.
    pub fn by_actor(&self, actor: &str) -> WriteCounts {
        let mut sum = WriteCounts::default();
        for counts in self.writes.get(actor).into_iter().flat_map(|r| r.values()) {
            sum.add(counts);
        }
        sum
    }

    /// The writes to one resource, summed over every actor.
    pub fn by_resource(&self, resource: &str) -> WriteCounts {
        let mut sum = WriteCounts::default();
        for counts in self.writes.values().filter_map(|r| r.get(resource)) {
            sum.add(counts);
        }
        sum
    }

    /// Objects of `resource` that `actor` created.
    pub fn created(&self, actor: &str, resource: &str) -> u64 {
        self.of(actor, resource).created
    }

    /// Delete requests of `actor` for `resource`.
    pub fn deleted(&self, actor: &str, resource: &str) -> u64 {
        self.of(actor, resource).deleted
    }

    /// Volumes provisioned.
    pub fn provisioned(&self) -> u64 {
        self.volumes.provisioned
    }

    /// Volumes turned `Released`.
    pub fn released(&self) -> u64 {
        self.volumes.released
    }

    /// PersistentVolumes in `phase` when the account was read.
    pub fn left(&self, phase: &str) -> u64 {
        self.volumes.by_phase.get(phase).copied().unwrap_or(0)
    }

    /// Events of `reason` created.
    pub fn events_of(&self, reason: &str) -> u64 {
        self.events.get(reason).map_or(0, |e| e.created)
    }

    /// Events created, of every reason.
    pub fn events_created(&self) -> u64 {
        self.events.values().map(|e| e.created).sum()
    }

    /// What happened after `earlier` (a snapshot of the same cluster): every count less the
    /// earlier one, entries that did not move left out; the volumes by phase are this
    /// snapshot's, as they are a state, not a count.
    pub fn since(&self, earlier: &ClusterAccount) -> ClusterAccount {
        let mut writes: BTreeMap<String, BTreeMap<String, WriteCounts>> = BTreeMap::new();
        for (actor, resources) in &self.writes {
            for (resource, counts) in resources {
                let before = earlier.of(actor, resource);
                let moved = counts.minus(&before);
                if !moved.is_zero() {
                    writes.entry(actor.clone()).or_default().insert(resource.clone(), moved);
                }
            }
        }
        let events = self
            .events
            .iter()
            .filter_map(|(reason, e)| {
                let before = earlier.events.get(reason).copied().unwrap_or_default();
                let moved = EventCounts {
                    created: e.created.saturating_sub(before.created),
                    updated: e.updated.saturating_sub(before.updated),
                };
                (moved != EventCounts::default()).then(|| (reason.clone(), moved))
            })
            .collect();
        ClusterAccount {
            writes,
            volumes: VolumeCounts {
                provisioned: self.volumes.provisioned.saturating_sub(earlier.volumes.provisioned),
                released: self.volumes.released.saturating_sub(earlier.volumes.released),
                by_phase: self.volumes.by_phase.clone(),
            },
            events,
        }
    }
}

/// The account of every cluster of a sandbox (`GET /account` of the admin API).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AccountReport {
    /// Accounts by cluster name.
    pub clusters: BTreeMap<String, ClusterAccount>,
}

impl AccountReport {
    /// One cluster's account (empty for a cluster it does not name).
    pub fn cluster(&self, name: &str) -> ClusterAccount {
        self.clusters.get(name).cloned().unwrap_or_default()
    }

    /// What happened after `earlier`, cluster by cluster (see [`ClusterAccount::since`]).
    pub fn since(&self, earlier: &AccountReport) -> AccountReport {
        let clusters = self
            .clusters
            .iter()
            .map(|(name, now)| {
                (name.clone(), now.since(earlier.clusters.get(name).unwrap_or(&ClusterAccount::default())))
            })
            .collect();
        AccountReport { clusters }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(created: u64, deleted: u64, released: u64, events: u64, phase_released: u64) -> ClusterAccount {
        let mut a = ClusterAccount::default();
        a.writes
            .entry("spanset".into())
            .or_default()
            .insert("persistentvolumeclaims".into(), WriteCounts { created, deleted, ..Default::default() });
        a.writes
            .entry("kubelet".into())
            .or_default()
            .insert("pods".into(), WriteCounts { status_updated: 5, ..Default::default() });
        a.volumes = VolumeCounts {
            provisioned: created,
            released,
            by_phase: [("Released".to_string(), phase_released)].into(),
        };
        a.events.insert("StaleClaimRetired".into(), EventCounts { created: events, updated: 1 });
        a
    }

    #[test]
    fn since_subtracts_counts_and_keeps_the_later_state() {
        let before = account(2, 1, 1, 3, 1);
        let after = account(5, 1, 4, 4, 3);
        let d = after.since(&before);
        assert_eq!(d.of("spanset", "persistentvolumeclaims"), WriteCounts { created: 3, ..Default::default() });
        // The kubelet did nothing in between: it is left out.
        assert!(!d.writes.contains_key("kubelet"), "{d:?}");
        assert_eq!((d.provisioned(), d.released(), d.left("Released")), (3, 3, 3));
        assert_eq!(d.events_of("StaleClaimRetired"), 1);
        assert_eq!(d.events["StaleClaimRetired"].updated, 0);
        let report = AccountReport { clusters: [("east".to_string(), after.clone())].into() };
        let none = AccountReport::default();
        assert_eq!(report.since(&none).cluster("east"), after);
        assert_eq!(report.cluster("west"), ClusterAccount::default());
    }

    #[test]
    fn sums_by_actor_and_by_resource() {
        let a = account(2, 1, 0, 0, 0);
        assert_eq!(a.by_actor("spanset").writes(), 3);
        assert_eq!(a.by_resource("pods").status_updated, 5);
        assert_eq!(a.by_actor("nobody"), WriteCounts::default());
        assert_eq!(
            (a.created("spanset", "persistentvolumeclaims"), a.deleted("spanset", "persistentvolumeclaims")),
            (2, 1)
        );
    }

    #[test]
    fn reads_back_what_it_serves() {
        let report = AccountReport { clusters: [("east".to_string(), account(1, 2, 3, 4, 5))].into() };
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["clusters"]["east"]["writes"]["spanset"]["persistentvolumeclaims"]["deleted"], 2);
        assert_eq!(json["clusters"]["east"]["volumes"]["byPhase"]["Released"], 5);
        assert_eq!(json["clusters"]["east"]["events"]["StaleClaimRetired"]["created"], 4);
        let back: AccountReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, report);
    }
}
