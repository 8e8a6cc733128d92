//! The resource account of one simulated cluster: what was created, updated and deleted, by
//! resource and by [`Actor`], which volumes were provisioned and released, and which Events
//! were written, by reason. The identity ledger judges who ran where; this counts what it cost,
//! so that a test or a bench can say "spanset deleted at most 4 claims" or "no volume was left
//! Released". Every write that goes through the registry is counted here, a few counters under
//! one lock: the sandbox runs ten thousand pods in its benches.

pub mod report;

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use serde_json::Value;

use self::report::{ClusterAccount, EventCounts, VolumeCounts, WriteCounts};
use crate::{
    cluster::Cluster,
    store::{
        actor::Actor,
        object::str_at,
        resources::{ResourceKey, ResourceType},
    },
};

/// What one counted write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// An object created.
    Created,
    /// An update or patch of the main resource (or `/scale`) that changed the object.
    Updated,
    /// An update or patch of `/status` that changed the object.
    StatusUpdated,
    /// An update or patch that changed nothing.
    Unchanged,
    /// A delete request (the object removed, or only marked for deletion).
    Deleted,
    /// An object removed from the store by this write.
    Removed,
}

#[derive(Default)]
struct Counts {
    writes: HashMap<Actor, HashMap<String, WriteCounts>>,
    events: HashMap<String, EventCounts>,
    provisioned: u64,
    released: u64,
}

/// The live counters of one cluster (owned by its [`Cluster`], like its audit log).
#[derive(Default)]
pub struct Account {
    counts: Mutex<Counts>,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Account")
    }
}

/// Core Events, or the events.k8s.io view of them (written through the core resource).
fn is_event(rt: &ResourceType) -> bool {
    rt.plural == "events" && (rt.group.is_empty() || rt.group == "events.k8s.io")
}

impl Account {
    /// Counts one write of `actor` to an object of `rt` (`object`: what was written, whose
    /// `reason` an Event is counted under).
    pub fn record(&self, rt: &ResourceType, actor: &Actor, verb: Verb, object: &Value) {
        let event = is_event(rt) && matches!(verb, Verb::Created | Verb::Updated);
        let resource = rt.group_resource();
        let mut counts = self.counts.lock();
        let c = counts.writes.entry(actor.clone()).or_default().entry(resource).or_default();
        match verb {
            Verb::Created => c.created += 1,
            Verb::Updated => c.updated += 1,
            Verb::StatusUpdated => c.status_updated += 1,
            Verb::Unchanged => c.unchanged += 1,
            Verb::Deleted => c.deleted += 1,
            Verb::Removed => c.removed += 1,
        }
        if event {
            let reason = str_at(object, "/reason");
            let e = match counts.events.get_mut(reason) {
                Some(e) => e,
                None => counts.events.entry(reason.to_string()).or_default(),
            };
            if verb == Verb::Created {
                e.created += 1;
            } else {
                e.updated += 1;
            }
        }
    }

    /// Counts a volume the PersistentVolume controller provisioned.
    pub fn provisioned(&self) {
        self.counts.lock().provisioned += 1;
    }

    /// Counts a volume the PersistentVolume controller turned `Released`.
    pub fn released(&self) {
        self.counts.lock().released += 1;
    }

    /// The counts so far, with `by_phase` (the volumes that exist now) left for the caller.
    fn counted(&self) -> ClusterAccount {
        let counts = self.counts.lock();
        let mut writes: BTreeMap<String, BTreeMap<String, WriteCounts>> = BTreeMap::new();
        for (actor, resources) in &counts.writes {
            let into = writes.entry(actor.to_string()).or_default();
            for (resource, c) in resources {
                *into.entry(resource.clone()).or_default() = *c;
            }
        }
        ClusterAccount {
            writes,
            volumes: VolumeCounts { provisioned: counts.provisioned, released: counts.released, ..Default::default() },
            events: counts.events.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        }
    }
}

impl Cluster {
    /// This cluster's account now: the counts, and its PersistentVolumes by phase.
    pub fn account_report(&self) -> ClusterAccount {
        let mut account = self.account.counted();
        let pvs: ResourceKey = (String::new(), "persistentvolumes".into());
        for pv in self.storage.list(&pvs, None).0 {
            let phase = match str_at(&pv, "/status/phase") {
                "" => "Pending",
                p => p,
            };
            *account.volumes.by_phase.entry(phase.to_string()).or_default() += 1;
        }
        account
    }
}

#[cfg(test)]
mod tests;
