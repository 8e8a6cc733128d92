//! The whole protocol between the actors, in one place. Commands are imperative
//! (`WriteStatefulSet`), facts past tense (`MemberObserved`). Every message, by who sends it
//! to whom (`tests/layering.rs` checks that this picture names each of them):
//!
//! ```text
//! Supervisor ──SpecChanged, SpecUndecodable, MembersChanged, Holds, Stop──▶ Coordinator
//! Supervisor ──Admitted, SweepLeftover, Stop──▶ ClusterWatcher
//! Coordinator ──Subscribe, Unsubscribe, WriteStatefulSet, WriteBudget, WriteEndpointSlice,
//!               EnsureSupporting, DeleteFederation, DeletePods, ReleasePod, ExtendPodLease,
//!               ReleaseClaims, AdoptClaims, RetireClaims──▶ ClusterWatcher
//! ClusterWatcher ──MemberObserved, MemberQuiet──▶ Coordinator   (to its subscribers)
//! ClusterWatcher ──Identified──▶ Supervisor
//! the process (app) ──Stop──▶ Supervisor
//! ```
//!
//! The messages are plain data: none names an actor. The one that hands out watchers'
//! addresses, `MembersChanged` with its `MemberHandle`s, lives beside the watcher
//! ([`crate::actors::watcher::MemberHandle`]); replies and subscriptions carry `Recipient`s.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Instant,
};

use actix::prelude::*;
use k8s_openapi::api::{
    core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Service},
    discovery::v1::EndpointSlice,
    policy::v1::PodDisruptionBudget,
};
use kube::api::DynamicObject;

/// How long an actor waits for a watcher to carry out one call (a write, a dry run, the
/// supporting objects, a sweep): a few request deadlines, so that a watcher that cannot answer
/// never holds a reconcile, and with it every other member's writes and the status, without
/// bound.
pub const MEMBER_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A carried object, as [`EnsureSupporting`] carries it (defined where it is written).
pub use crate::member::supporting::Carried;
use crate::member::{
    cache::{ClaimRecord, FederationCache, StsRecord},
    health::Failure,
    objects::FederationKey,
};
use spanset_api::FederatedStatefulSet;
use spanset_plan::Backend;

impl MemberView {
    /// What the view shows of the member's guards (docs/version-skew.md).
    pub fn guard_facts(&self) -> crate::member::protections::GuardFacts {
        crate::member::protections::GuardFacts {
            minor: self.server_minor,
            serves_policies: self.serves_policies,
            installed: self.installed_policies.clone(),
            keeps_ordinals: self.keeps_ordinals,
        }
    }
}

/// What one member's watcher knows of one federation, and of the member's health.
#[derive(Debug, Clone, Default)]
pub struct MemberView {
    /// Both watches have listed: absent records mean absent objects.
    pub synced: bool,
    /// The federation's StatefulSet and pods there: the watcher's own records, shared (a
    /// thousand federations reported by a hundred members are not copied a hundred thousand
    /// times).
    pub federation: Arc<FederationCache>,
    /// The federation's claims there, by ordinal.
    pub claims: BTreeMap<u32, Vec<ClaimRecord>>,
    /// The last successful call to the member.
    pub last_contact: Option<Instant>,
    /// When the watcher started: silence is counted from here when the member never answered.
    pub watching_since: Option<Instant>,
    /// Why the latest call to the member failed, until one succeeds.
    pub failure: Option<(Failure, String)>,
    /// Whether the member keeps `.spec.ordinals` of apps/v1 StatefulSets (`None` until known).
    pub keeps_ordinals: Option<bool>,
    /// Whether it keeps `.spec.ordinals` of Advanced StatefulSets (an OpenKruise too old for
    /// them prunes the field; `None` until one was written or seen).
    pub advanced_keeps_ordinals: Option<bool>,
    /// Whether the member serves Advanced StatefulSets (`apps.kruise.io/v1beta1`; `None`
    /// until discovery answered).
    pub serves_advanced: Option<bool>,
    /// The member's `gitVersion`.
    pub server_version: Option<String>,
    /// The minor version of its `/version` (`None` until read).
    pub server_minor: Option<u32>,
    /// Whether its discovery lists ValidatingAdmissionPolicies (`None` until read, and while
    /// served until their first read-back ended, so that both are judged together).
    pub serves_policies: Option<bool>,
    /// What the latest read-back of the policies and bindings `spanset join` installs found
    /// there: they count as in force only when each was seen as shipped (shared, as the
    /// federation records are).
    pub installed_policies: Option<Arc<crate::member::policies::Readback>>,
    /// The newest resourceVersion the watcher had seen when it made this report: the
    /// observation is at least this recent.
    pub rv: u64,
    /// The member's cordoned nodes (`spec.unschedulable`): a drain waits on the federation's
    /// pods there.
    pub cordoned: BTreeSet<String>,
    /// The budget and node watches have listed: `federation.budget` and `cordoned` are known.
    pub budgets_known: bool,
    /// The watch of spanset's EndpointSlices has listed: `federation.published` is known.
    pub slices_known: bool,
    /// How many of the federation's supporting objects (Service, carried objects) were found
    /// missing here: a new count makes the coordinator ensure them here again.
    pub supporting_lost: u64,
}

/// A watcher's report on one federation: sent after every change, coalesced.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct MemberObserved {
    /// The member cluster.
    pub cluster: String,
    /// The federation.
    pub key: FederationKey,
    /// What the watcher knows.
    pub view: Arc<MemberView>,
}

/// A coordinator asks a watcher for reports on its federation (the first comes at once once
/// the watcher has synced).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Subscribe {
    /// The federation.
    pub key: FederationKey,
    /// Where the watcher's words go.
    pub subscriber: Arc<Subscriber>,
}

/// Where a coordinator hears from the watchers: one per coordinator, shared by all its
/// subscriptions (a thousand federations over a hundred members hold a thousand of these, not
/// a hundred thousand).
pub struct Subscriber {
    /// Where reports go.
    pub reports: Recipient<MemberObserved>,
    /// Where the member's silence is told (see [`MemberQuiet`]).
    pub quiet: Recipient<MemberQuiet>,
}

/// A watcher tells each subscribed coordinator that its member has not answered for
/// [`QUIET_AFTER`](crate::member::contact_clock::QUIET_AFTER): the coordinator sets its silence
/// thresholds' timer from the member's last answer, without planning. Told once per silence.
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct MemberQuiet {
    /// The member cluster.
    pub cluster: String,
    /// The federation.
    pub key: FederationKey,
}

/// A coordinator no longer wants reports (its federation is gone).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Unsubscribe {
    /// The federation.
    pub key: FederationKey,
}

/// Why a member write did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The object changed since it was read (409): read again, plan again.
    #[error("conflict: the object changed since it was read")]
    Conflict,
    /// This process does not lead in the term the write was planned in.
    #[error("not the leader in term {0}")]
    NotLeader(u64),
    /// The member refused the object (4xx other than 409), with its message.
    #[error("{cluster} refused the write ({code}): {message}")]
    Refused {
        /// The member.
        cluster: String,
        /// HTTP status.
        code: u16,
        /// The apiserver's message.
        message: String,
    },
    /// The member did not answer, or failed (5xx, timeout, connection).
    #[error("{cluster} is not answering: {message}")]
    Unavailable {
        /// The member.
        cluster: String,
        /// What failed.
        message: String,
    },
}

/// Writes a federation's StatefulSet in a member, conditionally: created when `expected_rv` is
/// `None` (fails if it exists), else replaced only if still at `expected_rv`.
#[derive(Message)]
#[rtype(result = "Result<StsRecord, WriteError>")]
pub struct WriteStatefulSet {
    /// The federation.
    pub key: FederationKey,
    /// The whole object to store.
    pub object: DynamicObject,
    /// Its API (apps/v1 or Advanced StatefulSet).
    pub kind: Backend,
    /// The resourceVersion it must still have.
    pub expected_rv: Option<u64>,
    /// The term the write was planned in.
    pub term: u64,
    /// Server-side dry run: validate only (nothing is stored).
    pub dry_run: bool,
    /// Delete the stored object with its pods orphaned and create it again, rather than
    /// replace it (see [`crate::member::ungated`]).
    pub recreate: bool,
}

/// Creates what a federation's pods need besides their StatefulSet, where missing or
/// different: the namespace, the headless Service, the carried objects (with `dry_run`, only
/// asks the member whether it accepts them, so that nothing is written anywhere before every
/// member did). Answers whether anything was (or would be) written.
#[derive(Message)]
#[rtype(result = "Result<bool, WriteError>")]
pub struct EnsureSupporting {
    /// The namespace.
    pub namespace: Namespace,
    /// The headless Service.
    pub service: Service,
    /// Carried Secrets and ConfigMaps.
    pub carried: Vec<Carried>,
    /// The headless Service's ServiceExport (`spec.network.mode: MultiClusterServices`);
    /// `None`: one spanset wrote earlier is deleted.
    pub export: Option<kube::api::DynamicObject>,
    /// The federation's part of its namespace's pod-lease guards' Role and RoleBinding
    /// (`spec.failover.podLease`).
    pub guard_access: Option<crate::member::guard_access::Guarded>,
    /// The federation written for (its shard's leadership judges the term).
    pub key: FederationKey,
    /// The term the write was planned in.
    pub term: u64,
    /// `dryRun=All`: run every check of the member, store nothing.
    pub dry_run: bool,
}

/// Removes a federation's objects from a member (its FederatedStatefulSet is being deleted).
/// Answers whether the StatefulSet and its pods are all gone.
#[derive(Message)]
#[rtype(result = "Result<bool, WriteError>")]
pub struct DeleteFederation {
    /// The federation.
    pub key: FederationKey,
    /// Its headless Service's name.
    pub service: String,
    /// Its carried objects, `(kind, name)`.
    pub carried: Vec<(String, String)>,
    /// It runs with `spec.network.mode: MultiClusterServices`: its ServiceExport goes too.
    pub exported: bool,
    /// It has a pod lease: its Lease goes too, and its entry in the guards' Role and
    /// RoleBinding.
    pub pod_lease: bool,
    /// The term the delete was planned in.
    pub term: u64,
    /// The uid of the federation being deleted, as the deciding leader read it: only objects
    /// labelled with it (or with no uid label, as older spanset wrote them) are deleted, so a
    /// teardown sent late, by a leader since replaced, can never remove the objects of a
    /// federation re-created under the same name.
    pub uid: Option<String>,
    /// The other federations that keep its Service or carried objects in this member, as the
    /// host says: those objects are released, not deleted.
    pub sharers: crate::member::sharing::Sharers,
}

/// Removes what a deleted federation left in a member that answers again (recorded in its
/// MemberCluster's `status.leftovers`): its StatefulSet shrunk to nothing first, then its pods
/// deleted, then, once none is left, its objects (shared ones released).
#[derive(Message)]
#[rtype(result = "Result<Swept, WriteError>")]
pub struct SweepLeftover {
    /// The record.
    pub leftover: spanset_api::Leftover,
    /// The other federations keeping its Service or carried objects there, as the host says.
    pub sharers: crate::member::sharing::Sharers,
    /// A federation of the same name exists in the host now: the objects of that name are
    /// the namesake's, and only the record goes.
    pub namesake: bool,
    /// The writer's term.
    pub term: u64,
}

/// How far a leftover's sweep got in one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swept {
    /// Its StatefulSet was shrunk to nothing: its pods go next.
    Shrunk,
    /// Its pods were deleted (this many): they are waited for.
    PodsDeleted(usize),
    /// Its pods are still terminating.
    Waiting,
    /// Nothing of it is left: the record can go.
    Removed,
}

/// The supervisor tells a coordinator the latest FederatedStatefulSet.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SpecChanged(pub Arc<FederatedStatefulSet>);

/// The supervisor tells a coordinator that the latest version of its federation cannot be
/// decoded: it writes nothing in any member until a version that decodes arrives, and keeps
/// answering what the last one it could read holds.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SpecUndecodable(pub Arc<spanset_api::decode::Undecodable>);

/// A watcher tells the supervisor the identity it read from its member (the uid of its
/// `kube-system` Namespace; `None`: the member does not show it), once per watcher.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Identified {
    /// The member.
    pub cluster: String,
    /// Its cluster id, if it could be read.
    pub id: Option<String>,
    /// Whether the member answered: `false` tells that its first probe found it silent (no
    /// identity yet), so that members ranked after it need not wait for it.
    pub answered: bool,
}

/// The supervisor tells a watcher whether its member is used (`Ok`) or waits, and why: until
/// told `Ok`, the watcher reports its member unsynced and refuses every write.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Admitted(pub Result<(), String>);

/// The supervisor asks a coordinator what its federation still holds in a member whose
/// MemberCluster is being deleted (see [`crate::decisions::holds`]); the answer is empty when nothing.
#[derive(Message)]
#[rtype(result = "Vec<String>")]
pub struct Holds {
    /// The member.
    pub cluster: String,
}

/// Stops an actor (its object is gone, or the process is shutting down).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop;

/// Storage handover, source side: sets the PVs behind these claims to Retain and answers the
/// PV and PVC objects as the destination should create them (see
/// [`crate::member::storage`]). A volume tied to a node is refused (`Refused`,
/// code 422, naming the PV) and nothing is changed.
#[derive(Message)]
#[rtype(result = "Result<Vec<(PersistentVolume, PersistentVolumeClaim)>, WriteError>")]
pub struct ReleaseClaims {
    /// The claims' namespace.
    pub namespace: String,
    /// The claims of the ordinal, by name.
    pub claims: Vec<String>,
    /// The federation written for (its shard's leadership judges the term).
    pub key: FederationKey,
    /// The writer's term.
    pub term: u64,
}

/// Storage handover, destination side: creates the handed-over PVs and PVCs, leaving those
/// already there for the same volume. A claim of that name bound to another volume is stale
/// (the ordinal ran elsewhere since): it is retired, its volume kept (Retain), and answered
/// with that volume so that an Event can name both.
#[derive(Message)]
#[rtype(result = "Result<Vec<(String, Option<String>)>, WriteError>")]
pub struct AdoptClaims {
    /// The claims' namespace.
    pub namespace: String,
    /// The objects from [`ReleaseClaims`].
    pub objects: Vec<(PersistentVolume, PersistentVolumeClaim)>,
    /// The federation written for (its shard's leadership judges the term).
    pub key: FederationKey,
    /// The writer's term.
    pub term: u64,
}

/// `storage: Detached`: deletes these claims of an ordinal, older than its data, so that they
/// never bind again (`migration.staleClaims`), setting their volumes to Retain first when
/// `keep_volume`. Each delete is conditional on the uid and resourceVersion the deciding
/// reconcile observed: a claim that changed since is left for the next decision (the answer is
/// a conflict), one already gone is skipped. Answers each claim deleted with its volume.
#[derive(Message)]
#[rtype(result = "Result<Vec<(String, Option<String>)>, WriteError>")]
pub struct RetireClaims {
    /// The claims' namespace.
    pub namespace: String,
    /// The claims of the ordinal, as the deciding reconcile observed them.
    pub claims: Vec<ClaimRecord>,
    /// Keep each claim's volume (reclaim policy Retain) rather than let it go by its policy.
    pub keep_volume: bool,
    /// The federation written for (its shard's leadership judges the term).
    pub key: FederationKey,
    /// The writer's term.
    pub term: u64,
}

/// Deletes pods of a federation in a member, gracefully and each only as the incarnation named
/// (a uid precondition): the pods left in a fenced member that answers again (see
/// [`crate::decisions::reconcile::PodDelete`]). A pod already gone or replaced counts as done.
#[derive(Message)]
#[rtype(result = "Result<(), WriteError>")]
pub struct DeletePods {
    /// The pods' namespace.
    pub namespace: String,
    /// The pods, as (name, uid).
    pub pods: Vec<(String, String)>,
    /// The federation written for (its shard's leadership judges the term).
    pub key: FederationKey,
    /// The writer's term.
    pub term: u64,
}

/// Releases one gated pod: removes spanset's identity gate from it and stamps the writer's term
/// on it, in one write conditional on the pod's uid and resourceVersion (so a pod recreated or
/// changed since it was judged is left gated until judged again).
#[derive(Message)]
#[rtype(result = "Result<(), WriteError>")]
pub struct ReleasePod {
    /// The federation (the pod is `<name>-<ordinal>` in its namespace).
    pub key: FederationKey,
    /// The pod's ordinal.
    pub ordinal: u32,
    /// The pod's uid.
    pub uid: String,
    /// The pod's resourceVersion as judged.
    pub rv: u64,
    /// Its other scheduling gates, which stay.
    pub remaining: Vec<String>,
    /// The term the release was decided in.
    pub term: u64,
}

/// Creates, applies or deletes spanset's PodDisruptionBudget of a federation in a member
/// (`spec.disruption`, see [`crate::decisions::disruption`]). Answers the stored budget's
/// resourceVersion (0 for a delete).
#[derive(Message)]
#[rtype(result = "Result<u64, WriteError>")]
pub struct WriteBudget {
    /// The federation (the budget is named like it, in its namespace).
    pub key: FederationKey,
    /// What to do.
    pub change: BudgetChange,
    /// The writer's term.
    pub term: u64,
}

/// Creates, replaces or deletes one of spanset's EndpointSlices of a federation in a member
/// (`spec.network`, see [`crate::decisions::network`]). Answers the stored slice's
/// resourceVersion (0 for a delete).
#[derive(Message)]
#[rtype(result = "Result<u64, WriteError>")]
pub struct WriteEndpointSlice {
    /// The federation (the slice is in its namespace).
    pub key: FederationKey,
    /// The slice's name.
    pub name: String,
    /// What to do.
    pub change: SliceChange,
    /// The writer's term.
    pub term: u64,
}

/// A change to spanset's budget in one member.
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetChange {
    /// Create it (none is there; fails if a budget of that name exists).
    Create(PodDisruptionBudget),
    /// Replace spanset's own, conditional on the version its watcher saw last.
    Replace(PodDisruptionBudget),
    /// Delete spanset's budget of this uid.
    Delete {
        /// Its uid (the delete's precondition).
        uid: String,
    },
}

/// A change to one of spanset's slices in one member.
#[derive(Debug, Clone, PartialEq)]
pub enum SliceChange {
    /// Create it (none of that name is there).
    Create(Box<EndpointSlice>),
    /// Replace spanset's own, conditional on the version its watcher saw last (`rv`).
    Replace {
        /// The new object.
        slice: Box<EndpointSlice>,
        /// The resourceVersion it replaces.
        rv: u64,
    },
    /// Delete spanset's slice of this uid.
    Delete {
        /// Its uid (the delete's precondition).
        uid: String,
    },
}

/// Extends a federation's pod Lease in a member (see `controller::pod_lease`): one
/// conditional write naming `ordinals` with the next extension counter, after a read when the
/// Lease is not known. Answers what became of it, as the lease's clock counts it, and the
/// member's refusal of the read or the write, if it refused one (an Event says it: the member's
/// pods stop when their lease lapses, and nothing else would tell the operator why).
#[derive(Message)]
#[rtype(result = "(LeaseWritten, Option<String>)")]
pub struct ExtendPodLease {
    /// The federation (the Lease is `<name>-pods` in its namespace).
    pub key: FederationKey,
    /// The ordinals the Lease names from now on.
    pub ordinals: spanset_plan::Ordinals,
    /// The Lease as the coordinator knows it, `(resourceVersion, extension counter)` (`None`:
    /// read it first).
    pub known: Option<(u64, u64)>,
    /// `spec.failover.podLease.seconds`, written for people reading the Lease.
    pub lease_seconds: i32,
    /// The writer's term.
    pub term: u64,
    /// When the coordinator counted the extension as sent, and how long after that the write
    /// may still be sent: a message that waited longer in the watcher's mailbox is not sent at
    /// all, since the lease's clock counts the write as landing by its send + W.
    pub send_by: std::time::Instant,
    /// The federation's uid, which the Lease carries: a guard of another federation of the
    /// same name (deleted and made again) finds nothing named for it.
    pub federation_uid: String,
    /// The write releases the pods for good (an uninstall lets the federation go).
    pub release: bool,
}

/// What became of a pod Lease write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseWritten {
    /// Stored: the Lease's resourceVersion and extension counter now.
    Stored {
        /// Its resourceVersion.
        rv: u64,
        /// Its extension counter.
        extension: u64,
    },
    /// Definitely refused: nothing landed.
    Refused,
    /// No answer: it may still land.
    Lost,
    /// Never reached the member.
    NotSent,
}
