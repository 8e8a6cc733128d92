//! A member cluster as its watcher knows it: compact records of the managed StatefulSets and
//! of their pods (uid, node, phase, readiness, deletion; never whole objects), filed by
//! federation, and when an absence counts as a confirmation.
//!
//! The at-most-one rule lets a cluster gain ordinal k only once every other cluster is
//! *confirmed* not to run k: a list of its pods newer than the write that removed k. Here that
//! is made exact: when a federation's StatefulSet changes (created, deleted, or a new
//! generation that the member's StatefulSet controller has observed), the watcher lists that
//! federation's pods with a quorum read, whose resourceVersion is newer than the change, and
//! only then reports the federation `confirmed`. Watch events after the list keep it current.
//! Pure state, no I/O: the watcher actor feeds it and the tests below drive it directly.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
};

use k8s_openapi::api::{
    core::v1::{Node, PersistentVolumeClaim, Pod},
    policy::v1::PodDisruptionBudget,
};
use kube::{ResourceExt, api::DynamicObject};
use spanset_api::labels::{FEDERATION, FEDERATION_UID, TEMPLATE_HASH, TERM};
use spanset_plan::{Backend, Slice};

pub use super::pod_record::{PodPhase, PodRecord, REVISION_LABEL, SeenPod, statefulset_pod};
use super::{
    budget::{BudgetRecord, cordoned},
    endpoints::SliceRecord,
    objects::FederationKey,
    workload::{observed_generation, ordinals_start, stored_slice},
};

/// A resourceVersion as a number. Kubernetes calls them opaque, but every apiserver (etcd's
/// revision) and the sandbox hand out increasing integers, and the at-most-one rule needs
/// "newer than"; an unparsable one counts as 0, the oldest, which only delays confirmations.
pub fn rv_of(meta_rv: Option<&str>) -> u64 {
    meta_rv.and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// What spanset keeps of a PersistentVolumeClaim: enough to find an ordinal's claims and
/// their volumes (for storage handover), never the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRecord {
    /// The claim's name (`<template>-<statefulset>-<ordinal>`).
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// `Pending`, `Bound` or `Lost`.
    pub phase: String,
    /// The bound PersistentVolume.
    pub volume: Option<String>,
    /// Being deleted.
    pub deleting: bool,
    /// The resourceVersion of this record.
    pub rv: u64,
}

impl ClaimRecord {
    /// The record of a claim, filed by `(namespace, name)`.
    pub fn of(pvc: &PersistentVolumeClaim) -> ((String, String), ClaimRecord) {
        let name = pvc.name_any();
        let record = ClaimRecord {
            name: name.clone(),
            uid: pvc.uid().unwrap_or_default(),
            phase: pvc.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_else(|| "Pending".into()),
            volume: pvc.spec.as_ref().and_then(|s| s.volume_name.clone()),
            deleting: pvc.metadata.deletion_timestamp.is_some(),
            rv: rv_of(pvc.metadata.resource_version.as_deref()),
        };
        ((pvc.namespace().unwrap_or_default(), name), record)
    }

    /// The ordinal this claim belongs to, if it is a claim of the StatefulSet `set`
    /// (`<template>-<set>-<ordinal>`).
    pub fn ordinal_in(&self, set: &str) -> Option<u32> {
        let (rest, ordinal) = self.name.rsplit_once('-')?;
        let ordinal: u32 = ordinal.parse().ok()?;
        let template = rest.strip_suffix(set)?.strip_suffix('-')?;
        (!template.is_empty()).then_some(ordinal)
    }
}

/// What spanset keeps of a member StatefulSet it manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsRecord {
    /// Its API: apps/v1 or Advanced StatefulSet.
    pub kind: Backend,
    /// The object's uid.
    pub uid: String,
    /// Its resourceVersion: the precondition of spanset's next write.
    pub rv: u64,
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`: the member's StatefulSet controller has seen the spec.
    pub observed_generation: i64,
    /// The slice as stored (from ordinal 0 when the server dropped `.spec.ordinals`).
    pub slice: Slice,
    /// Whether `.spec.ordinals` is present in the stored object.
    pub has_ordinals: bool,
    /// The leader term that last wrote it.
    pub term: Option<u64>,
    /// The template hash that was written.
    pub template_hash: Option<String>,
    /// The federation uid it was written for.
    pub federation_uid: Option<String>,
    /// Being deleted.
    pub deleting: bool,
    /// `spec.updateStrategy.rollingUpdate.partition` as stored (0 when absent).
    pub partition: i32,
    /// `status.updateRevision` once its controller observed the stored generation (a pod
    /// labelled with it runs the stored template); kept across a new generation that changed
    /// nothing of the template (a new partition or slice), since that keeps the revision.
    pub update_revision: Option<String>,
    /// The stored pod template, only when it lacks the identity gate (see [`super::ungated`]).
    pub ungated_template: Option<std::sync::Arc<serde_json::Value>>,
    /// The revision of the pods held since the gate was added (see [`super::ungated`]).
    pub ungated_revision: Option<String>,
    /// Its pod template's pod-lease guard, if it carries one: the pods it makes stop themselves
    /// when their lease lapses.
    pub guard: Option<Box<crate::pod_lease::inject::GuardSpec>>,
}

impl StsRecord {
    /// The lease its template's guard enforces, in seconds, if it carries a guard.
    pub fn guard_lease(&self) -> Option<i32> {
        self.guard.as_ref().map(|g| g.lease_seconds)
    }

    /// The record of a managed StatefulSet read from the API of `kind`.
    pub fn of(sts: &DynamicObject, kind: Backend) -> Option<(FederationKey, StsRecord)> {
        sts.labels().get(FEDERATION)?;
        let ann = |k: &str| sts.annotations().get(k).cloned();
        let record = StsRecord {
            kind,
            uid: sts.uid().unwrap_or_default(),
            rv: rv_of(sts.metadata.resource_version.as_deref()),
            generation: sts.metadata.generation.unwrap_or(0),
            observed_generation: observed_generation(sts),
            slice: stored_slice(sts, kind),
            has_ordinals: ordinals_start(sts).is_some(),
            term: ann(TERM).and_then(|t| t.parse().ok()),
            template_hash: ann(TEMPLATE_HASH),
            federation_uid: sts.labels().get(FEDERATION_UID).cloned(),
            deleting: sts.metadata.deletion_timestamp.is_some(),
            partition: sts
                .data
                .pointer("/spec/updateStrategy/rollingUpdate/partition")
                .and_then(serde_json::Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0),
            // Only once its controller has observed this generation: before, the status may
            // name the revision of an older template.
            update_revision: sts
                .data
                .pointer("/status/updateRevision")
                .and_then(|v| v.as_str())
                .filter(|_| observed_generation(sts) >= sts.metadata.generation.unwrap_or(0))
                .map(str::to_string),
            ungated_template: super::ungated::ungated_template(sts),
            ungated_revision: ann(super::ungated::UNGATED_REVISION),
            guard: sts.data.pointer("/spec/template/spec").and_then(crate::pod_lease::inject::guard_of).map(Box::new),
        };
        Some((FederationKey { namespace: sts.namespace().unwrap_or_default(), name: sts.name_any() }, record))
    }
}

/// The StatefulSet state a confirmation is made for: a list of pods only confirms absences for
/// the state it was made after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StsState {
    /// No StatefulSet.
    Absent,
    /// This object at this generation, already observed by the member's controller.
    Present {
        /// The object's uid.
        uid: String,
        /// Its generation.
        generation: i64,
    },
}

/// A StatefulSet write that got no definite answer. A request the client gave up on may still
/// be applied by the member later (held in a slow admission webhook or storage), so reading the
/// object once is not enough: while the object is still at the write's precondition, the write
/// may land after the read. Found by the model checker (`crates/spanset-controller/tests/model_check/model_check.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UncertainWrite {
    /// The API of the write (the object to read again).
    pub kind: Backend,
    /// Its resourceVersion precondition; `None`: a create.
    pub expected_rv: Option<u64>,
}

impl UncertainWrite {
    /// Whether the object as read now (its resourceVersion, `None` when absent) voids the
    /// write for good: a replace can no longer land once the object moved past its
    /// precondition or is gone; a create, once the object exists.
    pub fn settled_by(&self, read_rv: Option<u64>) -> bool {
        match (self.expected_rv, read_rv) {
            (Some(precondition), Some(now)) => now != precondition,
            (Some(_), None) => true,
            (None, found) => found.is_some(),
        }
    }
}

/// One federation in one member cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FederationCache {
    /// Its StatefulSet, if any (boxed, as the one below: most federations have none in most
    /// members, and an absent one then costs a pointer, not the record's size).
    pub sts: Option<Box<StsRecord>>,
    /// A second StatefulSet of the same name in the other API (apps/v1 beside an Advanced
    /// StatefulSet, after a backend change or someone's own object). While there is one,
    /// nothing here counts as confirmed and the coordinator writes nothing.
    pub other_kind: Option<Box<StsRecord>>,
    /// Its pods by ordinal.
    pub pods: BTreeMap<u32, PodRecord>,
    /// The StatefulSet state the last confirming list was made after.
    pub confirmed_for: Option<StsState>,
    /// The resourceVersion of the last confirming list: older pod events are stale.
    pub floor_rv: u64,
    /// Pods (by uid) and StatefulSets seen deleted, with the resourceVersion of the deletion:
    /// a list or event older than that must not bring them back (a confirming list can be
    /// answered before, and applied after, the delete event).
    pub gone: BTreeMap<String, u64>,
    /// `(uid, generation)` of the StatefulSet as this process last wrote it: another
    /// generation means someone else changed its spec (drift, to be reverted).
    pub written_generation: Option<(String, i64)>,
    /// A write of its StatefulSet got no answer (timeout, cut connection): it may or may not
    /// have been applied, and may still be, late, while the object stays at its precondition;
    /// nothing here is a confirmation until the object is read past it (see [`UncertainWrite`]).
    pub uncertain_write: Option<UncertainWrite>,
    /// spanset's PodDisruptionBudget there (`spec.disruption`), if any.
    pub budget: Option<BudgetRecord>,
    /// spanset's EndpointSlices there (`spec.network`), by name.
    pub published: BTreeMap<String, SliceRecord>,
}

impl FederationCache {
    /// What of the federation `name` (uid `uid`) held here would not stop itself when its
    /// lease lapses, one sentence each ([`crate::pod_lease::seen::unguarded`]).
    pub fn unguarded(&self, name: &str, uid: Option<&str>) -> Vec<String> {
        let sts = self.sts.as_ref().map(|s| s.guard.as_deref());
        let pods = self.pods.iter().map(|(k, p)| (format!("{name}-{k}"), p.guard.as_deref()));
        crate::pod_lease::seen::unguarded(sts, pods, uid)
    }

    /// The guards failing closed among the pods of the federation `name` held here
    /// ([`crate::pod_lease::seen::failing`]).
    pub fn failing_guards(&self, name: &str) -> Vec<String> {
        crate::pod_lease::seen::failing(self.pods.iter().map(|(k, p)| (format!("{name}-{k}"), p.guard.as_deref())))
    }

    /// Whether the stored spec is the one this process last wrote (false when unknown, e.g.
    /// after a restart: one idempotent write settles it).
    pub fn spec_is_ours(&self) -> bool {
        self.sts.as_ref().is_some_and(|s| self.written_generation == Some((s.uid.clone(), s.generation)))
    }

    /// The state a confirming list must follow now; `None` while the member's StatefulSet
    /// controller has not yet observed the latest generation (a list now could miss the pods
    /// it is about to create or delete).
    pub fn state(&self) -> Option<StsState> {
        if self.other_kind.is_some() {
            return None;
        }
        match &self.sts {
            None => Some(StsState::Absent),
            Some(s) if s.observed_generation >= s.generation => {
                Some(StsState::Present { uid: s.uid.clone(), generation: s.generation })
            }
            Some(_) => None,
        }
    }

    /// Whether nothing of the federation is here, as a confirming list found: no StatefulSet,
    /// pods, budget, slices or write in doubt; only the confirmation and its floor.
    pub fn is_nothing_here(&self) -> bool {
        *self
            == FederationCache {
                confirmed_for: self.confirmed_for.clone(),
                floor_rv: self.floor_rv,
                ..Default::default()
            }
    }

    /// Whether the pod records are confirmations of absence for the current StatefulSet.
    pub fn confirmed(&self) -> bool {
        self.uncertain_write.is_none() && self.state().is_some() && self.state() == self.confirmed_for
    }

    /// The state to confirm, when a confirming list is due.
    pub fn confirmation_due(&self) -> Option<StsState> {
        self.state().filter(|s| self.confirmed_for.as_ref() != Some(s))
    }

    /// Whether a confirming list is due ([`Self::confirmation_due`] is `Some`), without
    /// building the state: every watcher asks it of every federation it serves at every probe
    /// tick, and at 1,000 federations building it (a uid copied each time) was most of the idle
    /// controller's CPU.
    pub fn is_confirmation_due(&self) -> bool {
        if self.other_kind.is_some() {
            return false;
        }
        match (&self.sts, &self.confirmed_for) {
            (None, confirmed) => !matches!(confirmed, Some(StsState::Absent)),
            (Some(s), Some(StsState::Present { uid, generation })) if s.observed_generation >= s.generation => {
                *uid != s.uid || *generation != s.generation
            }
            (Some(s), _) => s.observed_generation >= s.generation,
        }
    }
}

/// Everything one member's watcher knows, by federation.
#[derive(Debug, Default)]
pub struct MemberCache {
    /// Federations by key. Shared with the reports made of them ([`crate::actors::messages::MemberView`]):
    /// a report costs no copy, and a change copies only what a coordinator still holds
    /// ([`MemberCache::federation_mut`]).
    pub federations: HashMap<FederationKey, Arc<FederationCache>>,
    /// The StatefulSet watch has listed once.
    pub sts_synced: bool,
    /// The pod watch has listed once.
    pub pods_synced: bool,
    /// Whether the member serves Advanced StatefulSets (`None` until discovery answered).
    pub serves_advanced: Option<bool>,
    /// The Advanced StatefulSet watch has listed once.
    pub advanced_synced: bool,
    /// The newest resourceVersion seen on any watch.
    pub newest_rv: u64,
    /// The newest leader term seen stamped on a managed object (of any shard).
    pub newest_term: u64,
    /// How many shards federations are divided into (0 or 1: not sharded), for
    /// [`MemberCache::newest_term_of`].
    pub shards: u32,
    /// The newest term seen stamped on a managed object, by shard (when sharded: the terms of
    /// different shards' Leases do not compare).
    pub newest_in_shard: HashMap<u32, u64>,
    /// Every claim of the member, by `(namespace, name)`: claims carry the StatefulSet's
    /// selector labels, not spanset's, so they are filed by name when asked.
    pub claims: HashMap<(String, String), ClaimRecord>,
    /// The claim watch has listed once.
    pub claims_synced: bool,
    /// The PodDisruptionBudget watch has listed once.
    pub budgets_synced: bool,
    /// The node watch has listed once.
    pub nodes_synced: bool,
    /// The watch of spanset's EndpointSlices has listed once: `published` is known.
    pub slices_synced: bool,
    /// Names of the member's cordoned nodes (`spec.unschedulable`); no other node is kept.
    pub cordoned: BTreeSet<String>,
    /// The record a confirming list last left with nothing in it (no StatefulSet, no pods):
    /// every federation that list left so shares it, since most federations have nothing in
    /// most members (a thousand federations over a hundred members: ninety thousand records).
    pub nothing_here: Option<Arc<FederationCache>>,
    /// Every federation whose StatefulSet write may be in doubt ([`UncertainWrite`]), and maybe
    /// some no longer: what [`Self::writes_in_doubt`] looks through at each probe tick instead
    /// of every federation the member serves.
    in_doubt: BTreeSet<FederationKey>,
}

impl MemberCache {
    /// A StatefulSet write of `key` got no definite answer: it may still land (see
    /// [`UncertainWrite`]).
    pub fn write_in_doubt(&mut self, key: &FederationKey, write: UncertainWrite) {
        self.federation_mut(key).uncertain_write = Some(write);
        self.in_doubt.insert(key.clone());
    }

    /// The federations whose StatefulSet write is in doubt, with the API to read it again in.
    pub fn writes_in_doubt(&mut self) -> Vec<(FederationKey, Backend)> {
        let federations = &self.federations;
        self.in_doubt.retain(|k| federations.get(k).is_some_and(|f| f.uncertain_write.is_some()));
        self.in_doubt.iter().filter_map(|k| Some((k.clone(), federations.get(k)?.uncertain_write?.kind))).collect()
    }

    /// The records of federation `key`, to be changed: created when absent, and copied first
    /// while a report still shares them.
    pub fn federation_mut(&mut self, key: &FederationKey) -> &mut FederationCache {
        Arc::make_mut(self.federations.entry(key.clone()).or_default())
    }

    /// The newest term stamped on the member's objects of `key`'s shard: a write for `key` in
    /// an older term comes from a stale leader of that shard.
    pub fn newest_term_of(&self, key: &FederationKey) -> u64 {
        if self.shards <= 1 {
            return self.newest_term;
        }
        let shard = crate::leadership::shard_hash::shard_of(&key.namespace, &key.name, self.shards);
        self.newest_in_shard.get(&shard).copied().unwrap_or(0)
    }

    /// Every watch has listed, and whether the member serves Advanced StatefulSets is known
    /// (with their watch listed too where it does): the cache may be reported.
    pub fn synced(&self) -> bool {
        let advanced = match self.serves_advanced {
            None => false,
            Some(served) => !served || self.advanced_synced,
        };
        self.sts_synced && self.pods_synced && self.claims_synced && advanced
    }

    /// Whether the watches that spanset's disruption budgets need (its budgets, the nodes) have
    /// listed: until then a member's budget and its drains are unknown. Not part of
    /// [`Self::synced`]: a member that refuses them still runs its slice.
    pub fn budgets_known(&self) -> bool {
        self.budgets_synced && self.nodes_synced
    }

    /// A budget was created or changed; answers its federation when what spanset keeps of it
    /// changed (its status changes with every eviction, and tells spanset nothing).
    pub fn budget_applied(&mut self, pdb: &PodDisruptionBudget) -> Option<FederationKey> {
        let (key, record) = BudgetRecord::of(pdb)?;
        self.newest_rv = self.newest_rv.max(record.rv);
        // (uid and rv not newer, same but for the rv) of what is kept: read before any copy.
        let seen = self.federations.get(&key).and_then(|f| f.budget.as_ref()).map(|old| {
            (old.uid == record.uid && old.rv >= record.rv, BudgetRecord { rv: record.rv, ..old.clone() } == record)
        });
        match seen {
            Some((true, _)) => None,
            Some((false, true)) => {
                self.federation_mut(&key).budget = Some(record);
                None
            }
            _ => {
                self.federation_mut(&key).budget = Some(record);
                Some(key)
            }
        }
    }

    /// A budget is gone.
    pub fn budget_deleted(&mut self, pdb: &PodDisruptionBudget) -> Option<FederationKey> {
        let (key, record) = BudgetRecord::of(pdb)?;
        if self.federations.get(&key).and_then(|f| f.budget.as_ref()).is_some_and(|b| b.uid == record.uid) {
            self.federation_mut(&key).budget = None;
        }
        Some(key)
    }

    /// One of spanset's EndpointSlices was created or changed; answers its federation when
    /// what spanset keeps of it changed.
    pub fn slice_applied(&mut self, slice: &k8s_openapi::api::discovery::v1::EndpointSlice) -> Option<FederationKey> {
        let (key, name, record) = SliceRecord::of(slice)?;
        self.newest_rv = self.newest_rv.max(record.rv);
        let seen = self.federations.get(&key).and_then(|f| f.published.get(&name)).map(|old| {
            (old.uid == record.uid && old.rv >= record.rv, SliceRecord { rv: record.rv, ..old.clone() } == record)
        });
        match seen {
            Some((true, _)) => None,
            Some((false, true)) => {
                self.federation_mut(&key).published.insert(name, record);
                None
            }
            _ => {
                self.federation_mut(&key).published.insert(name, record);
                Some(key)
            }
        }
    }

    /// One of spanset's EndpointSlices is gone.
    pub fn slice_deleted(&mut self, slice: &k8s_openapi::api::discovery::v1::EndpointSlice) -> Option<FederationKey> {
        let (key, name, record) = SliceRecord::of(slice)?;
        if self.federations.get(&key).and_then(|f| f.published.get(&name)).is_some_and(|s| s.uid == record.uid) {
            self.federation_mut(&key).published.remove(&name);
        }
        Some(key)
    }

    /// Replaces every published slice after a relist.
    pub fn slices_relisted(&mut self, listed: &[k8s_openapi::api::discovery::v1::EndpointSlice]) -> Vec<FederationKey> {
        let mut touched: Vec<FederationKey> = self
            .federations
            .iter_mut()
            .filter(|(_, f)| !f.published.is_empty())
            .map(|(k, f)| {
                Arc::make_mut(f).published.clear();
                k.clone()
            })
            .collect();
        for slice in listed {
            if let Some((key, name, record)) = SliceRecord::of(slice) {
                self.newest_rv = self.newest_rv.max(record.rv);
                self.federation_mut(&key).published.insert(name, record);
                touched.push(key);
            }
        }
        self.slices_synced = true;
        touched
    }

    /// Replaces every budget after a relist.
    pub fn budgets_relisted(&mut self, listed: &[PodDisruptionBudget]) -> Vec<FederationKey> {
        let mut touched: Vec<FederationKey> = self
            .federations
            .iter_mut()
            .filter(|(_, f)| f.budget.is_some())
            .map(|(k, f)| {
                Arc::make_mut(f).budget = None;
                k.clone()
            })
            .collect();
        for pdb in listed {
            if let Some((key, record)) = BudgetRecord::of(pdb) {
                self.newest_rv = self.newest_rv.max(record.rv);
                self.federation_mut(&key).budget = Some(record);
                touched.push(key);
            }
        }
        self.budgets_synced = true;
        touched
    }

    /// A node was created or changed, or is gone (`deleted`); answers whether the set of
    /// cordoned nodes changed.
    pub fn node_event(&mut self, node: &Node, deleted: bool) -> bool {
        let name = node.name_any();
        if !deleted && cordoned(node) { self.cordoned.insert(name) } else { self.cordoned.remove(&name) }
    }

    /// Replaces the cordoned nodes after a relist; answers whether they changed.
    pub fn nodes_relisted(&mut self, listed: &[Node]) -> bool {
        let now: BTreeSet<String> = listed.iter().filter(|n| cordoned(n)).map(|n| n.name_any()).collect();
        let changed = now != self.cordoned || !self.nodes_synced;
        self.cordoned = now;
        self.nodes_synced = true;
        changed
    }

    /// A claim was created or changed, or is gone (`deleted`); answers its namespace.
    pub fn claim_event(&mut self, pvc: &PersistentVolumeClaim, deleted: bool) -> String {
        let (key, record) = ClaimRecord::of(pvc);
        self.newest_rv = self.newest_rv.max(record.rv);
        let ns = key.0.clone();
        if deleted {
            if self.claims.get(&key).is_some_and(|c| c.uid == record.uid) {
                self.claims.remove(&key);
            }
        } else if self.claims.get(&key).is_none_or(|c| c.uid != record.uid || c.rv <= record.rv) {
            self.claims.insert(key, record);
        }
        ns
    }

    /// Replaces every claim after a relist.
    pub fn claims_relisted(&mut self, listed: &[PersistentVolumeClaim]) {
        self.claims = listed.iter().map(ClaimRecord::of).collect();
        self.claims_synced = true;
    }

    /// A federation's claims here, with their ordinals, in no order.
    fn claims_in<'a>(&'a self, key: &'a FederationKey) -> impl Iterator<Item = (u32, &'a ClaimRecord)> + 'a {
        self.claims
            .iter()
            .filter(move |((ns, _), _)| ns == &key.namespace)
            .filter_map(move |(_, c)| Some((c.ordinal_in(&key.name)?, c)))
    }

    /// Whether a federation has any claim here ([`Self::claims_of`] without collecting them).
    pub fn has_claims(&self, key: &FederationKey) -> bool {
        self.claims_in(key).next().is_some()
    }

    /// A federation's claims by ordinal.
    pub fn claims_of(&self, key: &FederationKey) -> BTreeMap<u32, Vec<ClaimRecord>> {
        let mut out: BTreeMap<u32, Vec<ClaimRecord>> = BTreeMap::new();
        for (k, c) in self.claims_in(key) {
            out.entry(k).or_default().push(c.clone());
        }
        for v in out.values_mut() {
            v.sort_by(|a, b| a.name.cmp(&b.name));
        }
        out
    }

    /// A StatefulSet of API `kind` was created or changed. Returns its federation.
    pub fn sts_applied(&mut self, sts: &DynamicObject, kind: Backend) -> Option<FederationKey> {
        let (key, record) = StsRecord::of(sts, kind)?;
        self.newest_rv = self.newest_rv.max(record.rv);
        self.newest_term = self.newest_term.max(record.term.unwrap_or(0));
        if self.shards > 1 {
            let shard = crate::leadership::shard_hash::shard_of(&key.namespace, &key.name, self.shards);
            let newest = self.newest_in_shard.entry(shard).or_default();
            *newest = (*newest).max(record.term.unwrap_or(0));
        }
        // Nothing to keep (checked before any copy): a deleted object's late event, or a record
        // not newer than the one kept.
        if let Some(f) = self.federations.get(&key) {
            let slot = match &f.sts {
                Some(s) if s.kind != kind => &f.other_kind,
                _ => &f.sts,
            };
            if f.gone.get(&record.uid).is_some_and(|rv| *rv >= record.rv)
                || slot.as_ref().is_some_and(|s| s.uid == record.uid && s.rv > record.rv)
            {
                return Some(key);
            }
        }
        let f = self.federation_mut(&key);
        // Filed beside the record of the other API, never over it.
        let slot = match &f.sts {
            Some(s) if s.kind != kind => &mut f.other_kind,
            _ => &mut f.sts,
        };
        if slot.as_ref().is_none_or(|s| s.uid != record.uid || s.rv <= record.rv) {
            let mut record = record;
            if record.update_revision.is_none()
                && let Some(old) =
                    slot.as_ref().filter(|s| s.uid == record.uid && s.template_hash == record.template_hash)
            {
                record.update_revision = old.update_revision.clone();
            }
            *slot = Some(Box::new(record));
        }
        Some(key)
    }

    /// This process wrote a StatefulSet of API `kind` and got `stored` back.
    pub fn sts_written(&mut self, stored: &DynamicObject, kind: Backend) -> Option<FederationKey> {
        let key = self.sts_applied(stored, kind)?;
        let f = self.federation_mut(&key);
        f.written_generation = f.sts.as_ref().filter(|s| s.kind == kind).map(|s| (s.uid.clone(), s.generation));
        // A conditional write that landed moved the object past any earlier write's
        // precondition: an unanswered one can no longer land.
        if f.uncertain_write.is_some_and(|u| u.kind == kind) {
            f.uncertain_write = None;
        }
        Some(key)
    }

    /// A StatefulSet of API `kind` is gone.
    pub fn sts_deleted(&mut self, sts: &DynamicObject, kind: Backend) -> Option<FederationKey> {
        let (key, record) = StsRecord::of(sts, kind)?;
        self.newest_rv = self.newest_rv.max(record.rv);
        let f = self.federation_mut(&key);
        if f.other_kind.as_ref().is_some_and(|s| s.uid == record.uid) {
            f.other_kind = None;
        }
        if f.sts.as_ref().is_some_and(|s| s.uid == record.uid) {
            f.sts = f.other_kind.take();
        }
        f.gone.insert(record.uid, record.rv);
        Some(key)
    }

    /// Replaces the StatefulSets of API `kind` after a relist (a watch restart): those of that
    /// API not listed are gone.
    pub fn sts_relisted(&mut self, listed: &[DynamicObject], kind: Backend) -> Vec<FederationKey> {
        let mut seen = Vec::new();
        for sts in listed {
            if let Some(k) = self.sts_applied(sts, kind) {
                seen.push(k);
            }
        }
        let mut touched = seen.clone();
        for (k, f) in self.federations.iter_mut() {
            let of_kind = |s: &Option<Box<StsRecord>>| s.as_ref().is_some_and(|s| s.kind == kind);
            if seen.contains(k) || !(of_kind(&f.other_kind) || of_kind(&f.sts)) {
                continue;
            }
            let f = Arc::make_mut(f);
            let mut dropped = false;
            if f.other_kind.as_ref().is_some_and(|s| s.kind == kind) {
                f.other_kind = None;
                dropped = true;
            }
            if f.sts.as_ref().is_some_and(|s| s.kind == kind) {
                f.sts = f.other_kind.take();
                dropped = true;
            }
            if dropped {
                touched.push(k.clone());
            }
        }
        match kind {
            Backend::StatefulSet => self.sts_synced = true,
            Backend::AdvancedStatefulSet => self.advanced_synced = true,
        }
        touched
    }

    /// What spanset keeps of a pod the watch or a list delivered: its record when it carries
    /// the identity of a federation this member knows ([`PodRecord::of`]), else only its
    /// resourceVersion. The pod watch sees every pod of the member (a label anyone may remove
    /// cannot be what hides a pod from spanset), so most pods are another workload's: they
    /// cost a look at their name and nothing kept.
    pub fn seen_pod(&self, pod: &Pod) -> SeenPod {
        match PodRecord::of(pod, |key| self.federations.contains_key(key)) {
            Some(ours) => SeenPod::Ours(Box::new(ours)),
            None => SeenPod::Other(rv_of(pod.metadata.resource_version.as_deref())),
        }
    }

    /// A pod was created or changed.
    pub fn pod_applied(&mut self, pod: &Pod) -> Option<FederationKey> {
        let seen = self.seen_pod(pod);
        self.pod_seen(seen)
    }

    /// A pod was created or changed, as [`Self::seen_pod`] kept it.
    pub fn pod_seen(&mut self, seen: SeenPod) -> Option<FederationKey> {
        let (key, ordinal, mut record) = match seen {
            SeenPod::Ours(ours) => *ours,
            SeenPod::Other(rv) => {
                self.newest_rv = self.newest_rv.max(rv);
                return None;
            }
        };
        self.newest_rv = self.newest_rv.max(record.rv);
        // Checked before any copy of what a report shares.
        let none = FederationCache::default();
        let f = self.federations.get(&key).map_or(&none, |f| &**f);
        let stale = f.gone.get(&record.uid).is_some_and(|rv| *rv >= record.rv)
            || match f.pods.get(&ordinal) {
                Some(old) => old.rv > record.rv,
                // Older than the confirming list and absent from it: deleted since.
                None => record.rv <= f.floor_rv,
            };
        record.keep_ready_seen(f.pods.get(&ordinal));
        if !stale {
            self.federation_mut(&key).pods.insert(ordinal, record);
        }
        Some(key)
    }

    /// A pod is gone (its kubelet confirmed, or it was force-deleted).
    pub fn pod_deleted(&mut self, pod: &Pod) -> Option<FederationKey> {
        let seen = self.seen_pod(pod);
        self.pod_gone(seen)
    }

    /// A pod is gone, as [`Self::seen_pod`] kept it.
    pub fn pod_gone(&mut self, seen: SeenPod) -> Option<FederationKey> {
        let (key, ordinal, record) = match seen {
            SeenPod::Ours(ours) => *ours,
            SeenPod::Other(rv) => {
                self.newest_rv = self.newest_rv.max(rv);
                return None;
            }
        };
        self.newest_rv = self.newest_rv.max(record.rv);
        let f = self.federation_mut(&key);
        if f.pods.get(&ordinal).is_some_and(|p| p.uid == record.uid) {
            f.pods.remove(&ordinal);
        }
        f.gone.insert(record.uid, record.rv);
        Some(key)
    }

    /// Merges a relist of all pods (a watch restart, whose resourceVersion is unknown): records
    /// newer than everything listed are kept (they may postdate the list), the rest replaced;
    /// every confirmation is dropped, to be made again by an exact list.
    pub fn pods_relisted(&mut self, listed: &[Pod]) -> Vec<FederationKey> {
        let seen: Vec<SeenPod> = listed.iter().map(|p| self.seen_pod(p)).collect();
        self.pods_seen_relisted(seen)
    }

    /// [`Self::pods_relisted`] of the pods as [`Self::seen_pod`] kept them (a relist buffers
    /// these, not the objects: a member's every pod would otherwise be held at once).
    pub fn pods_seen_relisted(&mut self, listed: Vec<SeenPod>) -> Vec<FederationKey> {
        // Every pod listed bounds the list, ours or not.
        let bound = listed.iter().map(SeenPod::rv).max().unwrap_or(0);
        let mut listed = listed;
        for seen in &mut listed {
            if let SeenPod::Ours(ours) = seen {
                let (key, ordinal, record) = &mut **ours;
                record.keep_ready_seen(self.federations.get(key).and_then(|f| f.pods.get(ordinal)));
            }
        }
        for f in self.federations.values_mut() {
            let f = Arc::make_mut(f);
            f.pods.retain(|_, p| p.rv > bound);
            f.confirmed_for = None;
        }
        self.newest_rv = self.newest_rv.max(bound);
        for seen in listed {
            if let SeenPod::Ours(ours) = seen {
                let (key, ordinal, record) = *ours;
                self.federation_mut(&key).pods.insert(ordinal, record);
            }
        }
        self.pods_synced = true;
        self.federations.keys().cloned().collect()
    }

    /// Applies a quorum list of one federation's pods made at `list_rv`, after the StatefulSet
    /// state `for_state`: exact as of `list_rv`, and a confirmation for that state. The list
    /// holds the namespace's pods, labelled or not: those with the federation's pod names are
    /// its own.
    pub fn pods_confirmed(&mut self, key: &FederationKey, listed: &[Pod], list_rv: u64, for_state: StsState) {
        let mine = listed.iter().filter_map(|p| PodRecord::of(p, |k| k == key)).filter(|(k, ..)| k == key);
        let mine: Vec<(u32, PodRecord)> = mine.map(|(_, k, r)| (k, r)).collect();
        self.records_confirmed(key, mine, list_rv, for_state);
    }

    /// [`Self::pods_confirmed`] for each of `due` from one list of many federations' pods,
    /// each pod read once (a controller starting with a thousand federations confirms them
    /// all with one list per member).
    pub fn pods_confirmed_all(&mut self, due: &[(FederationKey, StsState)], listed: &[Pod], list_rv: u64) {
        let wanted: std::collections::HashSet<&FederationKey> = due.iter().map(|(k, _)| k).collect();
        let mut by_federation: HashMap<FederationKey, Vec<(u32, PodRecord)>> = HashMap::new();
        for (key, ordinal, record) in listed.iter().filter_map(|p| PodRecord::of(p, |k| wanted.contains(k))) {
            by_federation.entry(key).or_default().push((ordinal, record));
        }
        for (key, state) in due {
            let mine = by_federation.remove(key).unwrap_or_default();
            self.records_confirmed(key, mine, list_rv, state.clone());
        }
    }

    fn records_confirmed(
        &mut self,
        key: &FederationKey,
        listed: impl IntoIterator<Item = (u32, PodRecord)>,
        list_rv: u64,
        for_state: StsState,
    ) {
        self.newest_rv = self.newest_rv.max(list_rv);
        let f = self.federation_mut(key);
        let before = f.pods.clone();
        f.pods.retain(|_, p| p.rv > list_rv);
        for (ordinal, mut record) in listed {
            record.keep_ready_seen(before.get(&ordinal));
            if f.gone.get(&record.uid).is_none_or(|rv| *rv <= list_rv) {
                f.pods.entry(ordinal).or_insert(record);
            }
        }
        f.floor_rv = f.floor_rv.max(list_rv);
        // Deletions this list already reflects cannot be undone by anything older.
        f.gone.retain(|_, rv| *rv > list_rv);
        f.confirmed_for = Some(for_state);
        self.share_if_nothing_here(key);
    }

    /// Files `key`'s record as the shared [`Self::nothing_here`] when it equals it, or makes
    /// it the shared one when it is empty and differs (a later list).
    fn share_if_nothing_here(&mut self, key: &FederationKey) {
        let Some(record) = self.federations.get_mut(key) else { return };
        if !record.is_nothing_here() {
            return;
        }
        match &self.nothing_here {
            Some(shared) if Arc::ptr_eq(shared, record) => {}
            Some(shared) if **shared == **record => *record = shared.clone(),
            _ => self.nothing_here = Some(record.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use spanset_api::labels::IDENTITY_GATE;

    fn key() -> FederationKey {
        FederationKey { namespace: "db".into(), name: "redis".into() }
    }

    #[test]
    fn a_write_without_a_definite_answer_voids_the_confirmation_until_read_again() {
        let mut f = FederationCache { confirmed_for: Some(StsState::Absent), ..Default::default() };
        assert!(f.confirmed());
        f.uncertain_write = Some(UncertainWrite { kind: Backend::StatefulSet, expected_rv: Some(7) });
        assert!(!f.confirmed(), "the write may have created pods nobody has seen");
        assert_eq!(f.confirmation_due(), None, "a list alone does not settle it: the StatefulSet is read first");
    }

    #[test]
    fn the_cheap_due_check_agrees_with_the_state_it_avoids_building() {
        let record = |uid: &str, generation: i64, observed_generation: i64| StsRecord {
            kind: Backend::StatefulSet,
            uid: uid.into(),
            rv: 1,
            generation,
            observed_generation,
            slice: Slice::default(),
            has_ordinals: true,
            term: None,
            template_hash: None,
            federation_uid: None,
            deleting: false,
            partition: 0,
            update_revision: None,
            ungated_template: None,
            ungated_revision: None,
            guard: None,
        };
        let present = |uid: &str, generation: i64| StsState::Present { uid: uid.into(), generation };
        let stss = [None, Some(record("a", 2, 2)), Some(record("a", 3, 2)), Some(record("b", 2, 2))];
        let confirmed =
            [None, Some(StsState::Absent), Some(present("a", 2)), Some(present("a", 1)), Some(present("b", 2))];
        let mut due = 0;
        for sts in &stss {
            for confirmed_for in &confirmed {
                for other_kind in [None, Some(record("c", 1, 1))] {
                    let f = FederationCache {
                        sts: sts.clone().map(Box::new),
                        confirmed_for: confirmed_for.clone(),
                        other_kind: other_kind.map(Box::new),
                        ..Default::default()
                    };
                    assert_eq!(f.is_confirmation_due(), f.confirmation_due().is_some(), "{sts:?} {confirmed_for:?}");
                    due += usize::from(f.is_confirmation_due());
                }
            }
        }
        assert!(due > 0 && due < stss.len() * confirmed.len(), "both answers occur");
    }

    #[test]
    fn an_unanswered_write_is_settled_only_by_a_read_past_its_precondition() {
        let replace = UncertainWrite { kind: Backend::StatefulSet, expected_rv: Some(7) };
        assert!(!replace.settled_by(Some(7)), "still at its precondition: the write may land after this read");
        assert!(replace.settled_by(Some(9)), "moved on: the write can never land");
        assert!(replace.settled_by(None), "gone: a replace cannot land");
        let create = UncertainWrite { kind: Backend::StatefulSet, expected_rv: None };
        assert!(!create.settled_by(None), "a create may still land");
        assert!(create.settled_by(Some(3)));
    }

    fn pod(ordinal: u32, uid: &str, rv: u64, ready: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("redis-{ordinal}"), "namespace": "db", "uid": uid,
                "resourceVersion": rv.to_string(), "labels": {FEDERATION: "redis"}},
            "spec": {"nodeName": "node-1", "containers": []},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_pods_gates_are_kept_and_their_removal_is_seen() {
        let mut gated = pod(2, "p-2", 7, false);
        gated.spec.as_mut().unwrap().node_name = None;
        gated.spec.as_mut().unwrap().scheduling_gates = Some(vec![
            k8s_openapi::api::core::v1::PodSchedulingGate { name: "example.com/users-own".into() },
            k8s_openapi::api::core::v1::PodSchedulingGate { name: IDENTITY_GATE.into() },
        ]);
        let mut c = MemberCache::default();
        c.pod_applied(&gated);
        let record = &c.federations[&key()].pods[&2];
        assert!(record.gated());
        assert_eq!(record.gates, ["example.com/users-own", IDENTITY_GATE]);
        c.pod_applied(&pod(2, "p-2", 8, false));
        assert!(!c.federations[&key()].pods[&2].gated(), "released");
    }

    fn sts(generation: i64, observed: i64, rv: u64, start: i32, replicas: i32) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "redis", "namespace": "db", "uid": "s-1", "generation": generation,
                "resourceVersion": rv.to_string(), "labels": {FEDERATION: "redis"}, "annotations": {TERM: "3"}},
            "spec": {"replicas": replicas, "ordinals": {"start": start}, "selector": {}, "serviceName": "redis",
                "template": {}},
            "status": {"replicas": 0, "observedGeneration": observed}
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_is_filed_under_its_federation_by_label_and_name() {
        let unknown = |_: &FederationKey| false;
        let (k, ordinal, r) = PodRecord::of(&pod(4, "p", 7, true), unknown).unwrap();
        assert_eq!((k, ordinal, r.ready, r.rv, r.node.as_deref()), (key(), 4, true, 7, Some("node-1")));
        assert!(r.labelled);
        let mut unlabelled = pod(4, "p", 7, true);
        unlabelled.metadata.labels = None;
        assert!(PodRecord::of(&unlabelled, unknown).is_none(), "pods of other workloads are not ours");
        // The same pod where `redis` is a federation: its name is its identity, label or not.
        let (k, ordinal, r) = PodRecord::of(&unlabelled, |k| *k == key()).expect("known by its name");
        assert_eq!((k, ordinal, r.labelled), (key(), 4, false));
        // A label naming another federation than the name does: the name decides.
        let mut mislabelled = pod(4, "p", 7, true);
        mislabelled.metadata.labels = Some([(FEDERATION.to_string(), "pg".to_string())].into());
        assert!(PodRecord::of(&mislabelled, unknown).is_none());
        assert_eq!(PodRecord::of(&mislabelled, |k| *k == key()).map(|(k, o, _)| (k, o)), Some((key(), 4)));
    }

    fn owned(mut p: Pod, sts_uid: &str) -> Pod {
        p.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "apps/v1".into(),
            kind: "StatefulSet".into(),
            name: "redis".into(),
            uid: sts_uid.into(),
            controller: Some(true),
            ..Default::default()
        }]);
        p
    }

    #[test]
    fn a_pod_whose_label_is_removed_stays_counted_and_a_bare_namesake_is_counted_too() {
        let mut c = MemberCache::default();
        c.sts_applied(&sts(1, 1, 3, 0, 4), Backend::StatefulSet);
        let due = c.federations[&key()].confirmation_due().unwrap();
        c.pods_confirmed(&key(), &[owned(pod(3, "p3", 4, true), "s-1")], 5, due);
        let record = &c.federations[&key()].pods[&3];
        assert!(record.owned_by("s-1") && record.labelled && record.stray().is_none());
        // `kubectl label pod redis-3 spanset.dev/federation-`: a change, not a departure.
        let mut hidden = owned(pod(3, "p3", 6, true), "s-1");
        hidden.metadata.labels = Some([("app".to_string(), "redis".to_string())].into());
        assert_eq!(c.pod_applied(&hidden), Some(key()));
        let record = &c.federations[&key()].pods[&3];
        assert_eq!((record.uid.as_str(), record.labelled), ("p3", false));
        assert_eq!(record.stray(), Some("its spanset.dev/federation label was removed"));
        // A confirming list sees it as well, and a relist of the watch.
        c.pods_confirmed(
            &key(),
            std::slice::from_ref(&hidden),
            7,
            StsState::Present { uid: "s-1".into(), generation: 1 },
        );
        assert!(c.federations[&key()].pods.contains_key(&3));
        c.pods_relisted(std::slice::from_ref(&hidden));
        assert!(c.federations[&key()].pods.contains_key(&3));
        // A bare pod with ordinal 0's name and no owner: counted, never owned.
        let bare = pod(0, "b0", 8, true);
        c.pod_applied(&bare);
        let record = &c.federations[&key()].pods[&0];
        assert!(!record.owned_by("s-1"));
        assert_eq!(record.stray(), Some("not made by a StatefulSet"));
        // Only its deletion takes it out.
        c.pod_deleted(&hidden);
        assert!(!c.federations[&key()].pods.contains_key(&3));
        // Another workload's pod in the namespace is kept nowhere, though it moves the bound.
        let mut web = pod(1, "w1", 20, true);
        web.metadata.name = Some("web-1".into());
        web.metadata.labels = None;
        assert_eq!(c.seen_pod(&web), SeenPod::Other(20));
        assert_eq!(c.pod_applied(&web), None);
        assert!(!c.federations.contains_key(&FederationKey { namespace: "db".into(), name: "web".into() }));
    }

    #[test]
    fn one_list_of_every_pod_confirms_each_federation_with_its_unlabelled_pods() {
        let other = |name: &str| FederationKey { namespace: "db".into(), name: name.into() };
        let mut hidden = pod(1, "h1", 9, true);
        hidden.metadata.labels = None;
        let mut stranger = pod(0, "s0", 9, true);
        (stranger.metadata.name, stranger.metadata.labels) = (Some("web-0".into()), None);
        let due = [(key(), StsState::Absent), (other("pg"), StsState::Absent)];
        let mut c = MemberCache::default();
        c.pods_confirmed_all(&due, &[hidden, stranger], 10);
        assert_eq!(c.federations[&key()].pods.keys().copied().collect::<Vec<_>>(), [1], "redis-1, by its name");
        assert!(!c.federations[&key()].pods[&1].labelled);
        assert!(c.federations[&other("pg")].pods.is_empty());
        assert!(!c.federations.contains_key(&other("web")), "a pod of no federation is kept nowhere");
    }

    #[test]
    fn a_relist_bound_counts_the_pods_of_other_workloads() {
        let mut c = MemberCache::default();
        c.pod_applied(&pod(2, "p2", 30, true));
        // Listed at a version past 30 (another workload's pod at 40): redis-2 is gone.
        let mut web = pod(1, "w1", 40, true);
        web.metadata.name = Some("web-1".into());
        web.metadata.labels = None;
        c.pods_relisted(&[web]);
        assert!(!c.federations[&key()].pods.contains_key(&2), "deleted before the relist");
    }

    #[test]
    fn confirmation_needs_a_list_after_the_generation_the_member_observed() {
        let mut c = MemberCache::default();
        c.sts_applied(&sts(2, 1, 10, 0, 2), Backend::StatefulSet);
        let f = &c.federations[&key()];
        assert_eq!(f.confirmation_due(), None, "the member's controller has not seen generation 2");
        assert!(!f.confirmed());
        c.sts_applied(&sts(2, 2, 11, 0, 2), Backend::StatefulSet);
        let due = c.federations[&key()].confirmation_due().expect("a list is due");
        c.pods_confirmed(&key(), &[pod(0, "a", 9, true)], 12, due);
        let f = &c.federations[&key()];
        assert!(f.confirmed());
        assert_eq!(f.pods.keys().copied().collect::<Vec<_>>(), vec![0]);
        assert_eq!(c.newest_term, 3);
        // A new write: unconfirmed again until the next list.
        c.sts_applied(&sts(3, 3, 13, 0, 1), Backend::StatefulSet);
        assert!(!c.federations[&key()].confirmed());
    }

    #[test]
    fn a_report_shares_the_records_and_keeps_what_it_saw_when_they_change() {
        let mut c = MemberCache::default();
        c.pods_confirmed(&key(), &[pod(0, "a", 9, true)], 10, StsState::Absent);
        // What a report carries: the watcher's record itself, no copy.
        let reported = c.federations[&key()].clone();
        assert!(Arc::ptr_eq(&reported, &c.federations[&key()]));
        // An event that changes nothing (older than the record) leaves it shared.
        c.pod_applied(&pod(0, "a", 8, false));
        assert!(Arc::ptr_eq(&reported, &c.federations[&key()]), "a stale event copies nothing");
        // A change is made to a copy: the report still says what was seen when it was made.
        c.pod_applied(&pod(0, "a", 11, false));
        assert!(!Arc::ptr_eq(&reported, &c.federations[&key()]));
        assert!(reported.pods[&0].ready, "the report is unchanged");
        assert!(!c.federations[&key()].pods[&0].ready, "the cache has the change");
        // Unshared, a record is changed in place.
        drop(reported);
        let before = Arc::as_ptr(&c.federations[&key()]);
        c.pod_applied(&pod(0, "a", 12, true));
        assert_eq!(Arc::as_ptr(&c.federations[&key()]), before);
    }

    #[test]
    fn ready_is_timed_from_the_first_look_that_saw_it_on_this_processs_clock() {
        let mut c = MemberCache::default();
        c.pod_applied(&pod(0, "a", 5, true));
        assert!(c.federations[&key()].pods[&0].ready_seen.is_some(), "seen Ready");
        // As if that look were an hour ago.
        let Some(first) = Instant::now().checked_sub(Duration::from_secs(3600)) else { return };
        c.federation_mut(&key()).pods.get_mut(&0).unwrap().ready_seen = Some(first);
        // Later looks at the same Ready period keep the first moment, however they come.
        c.pod_applied(&pod(0, "a", 6, true));
        assert_eq!(c.federations[&key()].pods[&0].ready_seen, Some(first), "a watch event");
        c.pods_relisted(&[pod(0, "a", 7, true)]);
        assert_eq!(c.federations[&key()].pods[&0].ready_seen, Some(first), "a relist");
        c.pods_confirmed(&key(), &[pod(0, "a", 8, true)], 8, StsState::Absent);
        assert_eq!(c.federations[&key()].pods[&0].ready_seen, Some(first), "a confirming list");
        // Unready, then Ready again: timed anew; so is another incarnation.
        c.pod_applied(&pod(0, "a", 9, false));
        assert_eq!(c.federations[&key()].pods[&0].ready_seen, None);
        c.pod_applied(&pod(0, "a", 10, true));
        let recent = |c: &MemberCache| {
            let seen = c.federations[&key()].pods[&0].ready_seen.expect("seen Ready");
            seen.duration_since(first) > Duration::from_secs(3000)
        };
        assert!(recent(&c), "Ready again is timed from now");
        c.federation_mut(&key()).pods.get_mut(&0).unwrap().ready_seen = Some(first);
        c.pod_applied(&pod(0, "b", 11, true));
        assert!(recent(&c), "another incarnation is timed from now");
        // The member's clock plays no part: only this process's decides how long.
        let p = &c.federations[&key()].pods[&0];
        let later = p.ready_seen.unwrap() + Duration::from_secs(30);
        assert_eq!(p.ready_for(later), Some(Duration::from_secs(30)));
    }

    #[test]
    fn one_list_confirms_many_federations_as_lists_of_each_would_and_the_empty_ones_share_a_record() {
        let other = |name: &str| FederationKey { namespace: "db".into(), name: name.into() };
        let mut elsewhere = pod(0, "x", 9, true);
        elsewhere.metadata.labels = Some([(FEDERATION.to_string(), "pg".to_string())].into());
        elsewhere.metadata.name = Some("pg-0".into());
        let listed = [pod(0, "a", 9, true), elsewhere, pod(1, "b", 8, false)];
        let due: Vec<_> =
            [key(), other("pg"), other("mysql"), other("kafka")].into_iter().map(|k| (k, StsState::Absent)).collect();
        let mut one = MemberCache::default();
        one.pods_confirmed_all(&due, &listed, 10);
        let mut each = MemberCache::default();
        for (k, state) in &due {
            each.pods_confirmed(k, &listed, 10, state.clone());
        }
        // The same but for when each saw a pod Ready (this process's clock at each list).
        let unclocked = |f: &Arc<FederationCache>| {
            let mut f = (**f).clone();
            f.pods.values_mut().for_each(|p| p.ready_seen = None);
            f
        };
        for (k, _) in &due {
            assert_eq!(unclocked(&one.federations[k]), unclocked(&each.federations[k]), "{k}");
        }
        assert_eq!(one.federations[&key()].pods.keys().copied().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(one.federations[&other("pg")].pods.len(), 1);
        // The two with nothing here share one record; those with pods have their own.
        let (mysql, kafka) = (&one.federations[&other("mysql")], &one.federations[&other("kafka")]);
        assert!(Arc::ptr_eq(mysql, kafka));
        assert!(Arc::ptr_eq(mysql, one.nothing_here.as_ref().unwrap()));
        assert!(!Arc::ptr_eq(mysql, &one.federations[&other("pg")]));
        // A pod of one of them appears: that one alone has it.
        let mut late = pod(3, "k", 11, true);
        late.metadata.labels = Some([(FEDERATION.to_string(), "kafka".to_string())].into());
        late.metadata.name = Some("kafka-3".into());
        one.pod_applied(&late);
        assert_eq!(one.federations[&other("kafka")].pods.len(), 1);
        assert!(one.federations[&other("mysql")].pods.is_empty());
        assert!(Arc::ptr_eq(&one.federations[&other("mysql")], one.nothing_here.as_ref().unwrap()));
        // A later list leaving one empty at another floor: equal records only are shared.
        one.pods_confirmed(&other("kafka"), &[], 12, StsState::Absent);
        assert_eq!(one.federations[&other("kafka")].floor_rv, 12);
        assert_eq!(one.federations[&other("mysql")].floor_rv, 10);
    }

    #[test]
    fn a_stale_event_older_than_the_confirming_list_does_not_bring_a_pod_back() {
        let mut c = MemberCache::default();
        c.pods_confirmed(&key(), &[], 20, StsState::Absent);
        c.pod_applied(&pod(1, "old", 15, true));
        assert!(c.federations[&key()].pods.is_empty(), "deleted before the list: stale");
        c.pod_applied(&pod(1, "new", 21, false));
        assert_eq!(c.federations[&key()].pods[&1].uid, "new", "created after the list: kept");
    }

    #[test]
    fn a_confirming_list_keeps_records_newer_than_itself_and_drops_older_absent_ones() {
        let mut c = MemberCache::default();
        c.pod_applied(&pod(0, "a", 5, true));
        c.pod_applied(&pod(1, "b", 30, true));
        c.pods_confirmed(&key(), &[], 20, StsState::Absent);
        let pods = &c.federations[&key()].pods;
        assert!(!pods.contains_key(&0), "pod 0 was gone at rv 20");
        assert!(pods.contains_key(&1), "pod 1 changed after the list");
    }

    #[test]
    fn a_relist_drops_confirmations_and_keeps_possibly_newer_records() {
        let mut c = MemberCache::default();
        c.pods_confirmed(&key(), &[pod(0, "a", 5, true)], 6, StsState::Absent);
        c.pod_applied(&pod(2, "c", 50, true));
        c.pods_relisted(&[pod(1, "b", 40, true)]);
        let f = &c.federations[&key()];
        assert!(!f.confirmed());
        assert_eq!(f.pods.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
        assert!(c.pods_synced && !c.synced(), "the StatefulSets have not listed yet");
        c.sts_relisted(&[], Backend::StatefulSet);
        c.claims_relisted(&[]);
        assert!(!c.synced(), "whether the member serves Advanced StatefulSets is not known yet");
        c.serves_advanced = Some(true);
        assert!(!c.synced(), "it does, and their watch has not listed");
        c.sts_relisted(&[], Backend::AdvancedStatefulSet);
        assert!(c.synced());
    }

    #[test]
    fn claims_are_filed_by_name_under_their_statefulset_and_ordinal() {
        let claim = |name: &str, rv: u64| -> PersistentVolumeClaim {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "db", "uid": name, "resourceVersion": rv.to_string()},
                "spec": {"volumeName": format!("pv-{name}")},
                "status": {"phase": "Bound"}
            }))
            .unwrap()
        };
        let mut c = MemberCache::default();
        c.claims_relisted(&[claim("data-redis-0", 1), claim("data-redis-cache-0", 2), claim("data-other-1", 3)]);
        c.claim_event(&claim("logs-redis-3", 4), false);
        let mine = c.claims_of(&key());
        assert_eq!(mine.keys().copied().collect::<Vec<_>>(), vec![0, 3], "redis-cache and other are not redis");
        assert_eq!(mine[&0][0].volume.as_deref(), Some("pv-data-redis-0"));
        c.claim_event(&claim("logs-redis-3", 5), true);
        assert!(!c.claims_of(&key()).contains_key(&3));
    }

    #[test]
    fn a_confirming_list_answered_before_a_delete_event_does_not_bring_the_pod_back() {
        let mut c = MemberCache::default();
        c.pod_applied(&pod(2, "p2", 10, true));
        // The list was answered at rv 20 (pod 2 still terminating), the delete came at rv 25,
        // and the list's answer is applied after the delete event.
        c.pod_deleted(&pod(2, "p2", 25, true));
        c.pods_confirmed(&key(), &[pod(2, "p2", 18, false)], 20, StsState::Absent);
        assert!(!c.federations[&key()].pods.contains_key(&2), "pod 2 is gone");
        c.pod_applied(&pod(2, "p2", 19, false));
        assert!(!c.federations[&key()].pods.contains_key(&2), "a stale event does not revive it");
        c.pods_confirmed(&key(), &[], 30, StsState::Absent);
        assert!(c.federations[&key()].gone.is_empty(), "tombstones older than a list are dropped");
    }

    #[test]
    fn deletes_only_remove_the_same_incarnation() {
        let mut c = MemberCache::default();
        c.pod_applied(&pod(0, "new", 8, true));
        c.pod_deleted(&pod(0, "old", 9, true));
        assert!(c.federations[&key()].pods.contains_key(&0));
        c.pod_deleted(&pod(0, "new", 10, true));
        assert!(!c.federations[&key()].pods.contains_key(&0));
        c.sts_applied(&sts(1, 1, 3, 2, 2), Backend::StatefulSet);
        assert_eq!(
            c.federations[&key()].sts.as_ref().unwrap().slice,
            Slice { start: 2, replicas: 2, ..Slice::empty() }
        );
        c.sts_deleted(&sts(1, 1, 4, 2, 2), Backend::StatefulSet);
        assert!(c.federations[&key()].sts.is_none());
        assert_eq!(c.federations[&key()].confirmation_due(), Some(StsState::Absent));
    }

    #[test]
    fn a_statefulset_of_the_other_api_is_filed_beside_and_voids_confirmations_while_it_lasts() {
        let mut c = MemberCache::default();
        c.sts_applied(&sts(1, 1, 3, 0, 2), Backend::StatefulSet);
        let due = c.federations[&key()].confirmation_due().unwrap();
        c.pods_confirmed(&key(), &[], 4, due);
        assert!(c.federations[&key()].confirmed());
        let mut advanced = sts(1, 1, 5, 2, 2);
        advanced.metadata.uid = Some("a-1".into());
        c.sts_applied(&advanced, Backend::AdvancedStatefulSet);
        let f = &c.federations[&key()];
        assert_eq!(f.sts.as_ref().unwrap().kind, Backend::StatefulSet, "the first stays in place");
        assert_eq!(f.other_kind.as_ref().unwrap().uid, "a-1");
        assert!(!f.confirmed(), "two objects may run pods: nothing is confirmed");
        // A relist of apps/v1 without it: the Advanced StatefulSet becomes the record.
        c.sts_relisted(&[], Backend::StatefulSet);
        let f = &c.federations[&key()];
        assert_eq!(f.sts.as_ref().map(|s| (s.kind, s.uid.as_str())), Some((Backend::AdvancedStatefulSet, "a-1")));
        assert!(f.other_kind.is_none());
        c.sts_deleted(&advanced, Backend::AdvancedStatefulSet);
        assert!(c.federations[&key()].sts.is_none());
    }
}
