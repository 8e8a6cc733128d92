//! The model's world, as plain hashable data: the host (the federation's spec and stored status,
//! the leader Lease, the fences), the member clusters (API server objects and what really runs
//! on their nodes), the controller replicas (what each one's watchers have seen, the effects it
//! is carrying out) and the requests still in flight.

use std::collections::BTreeMap;

/// The member clusters, by index.
pub const MEMBERS: [&str; 2] = ["a", "b"];
/// How many `spanset run` replicas contend for the Lease.
pub const CONTROLLERS: usize = 2;
/// The federation's replicas: ordinals `0..REPLICAS`.
pub const REPLICAS: u32 = 2;

/// A member's StatefulSet of the federation, as its API server stores it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sts {
    /// Incarnation (the object's uid).
    pub uid: u32,
    /// resourceVersion.
    pub rv: u64,
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`: the member's StatefulSet controller saw the spec.
    pub observed: i64,
    /// `.spec.ordinals.start`.
    pub start: u32,
    /// `.spec.replicas`.
    pub replicas: u32,
    /// The leader term stamped on it (the fencing token).
    pub term: u64,
    /// The template hash written.
    pub hash: String,
    /// `rollingUpdate.partition`.
    pub partition: i32,
}

impl Sts {
    /// Whether the slice holds ordinal `k`.
    pub fn holds(&self, k: u32) -> bool {
        k >= self.start && k < self.start + self.replicas
    }

    /// The member's update revision for the written template.
    pub fn revision(&self) -> String {
        format!("rev-{}", &self.hash[..self.hash.len().min(8)])
    }
}

/// A pod: its API object and whether its containers really run (what the ledger records).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pod {
    /// Incarnation.
    pub uid: u32,
    /// resourceVersion.
    pub rv: u64,
    /// spanset's identity gate is still on it.
    pub gated: bool,
    /// The API says Running (the kubelet reported it).
    pub phase_running: bool,
    /// The API says Ready.
    pub ready: bool,
    /// Being deleted (Terminating).
    pub deleting: bool,
    /// The leader term stamped on it.
    pub term: u64,
    /// Its `controller-revision-hash`.
    pub revision: String,
    /// Its containers run: the truth the at-most-one property counts.
    pub running: bool,
    /// The volume its containers run on (its claim's, when they started).
    pub volume: Option<u32>,
}

/// A member's node (one per member in the model).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// Heartbeating.
    Up,
    /// Lost its network or kubelet: its containers keep running until it returns.
    NetLost,
    /// Powered off: its containers stopped.
    PoweredOff,
}

/// One member cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    /// The federation's StatefulSet.
    pub sts: Option<Sts>,
    /// The federation's pods by ordinal.
    pub pods: BTreeMap<u32, Pod>,
    /// The API server's resourceVersion counter.
    pub rv: u64,
    /// The next uid.
    pub next_uid: u32,
    /// Its API server answers the controllers.
    pub api_up: bool,
    /// Its node.
    pub node: Node,
    /// `MemberCluster.spec.fenced` in the host.
    pub fenced: bool,
    /// Since it was fenced, a write shrinking its StatefulSet to nothing landed.
    pub shrunk_since_fence: bool,
    /// The federation's claims by ordinal: the volume each is bound to.
    pub claims: BTreeMap<u32, u32>,
    /// Its kubelet is slow: it does nothing until it catches up.
    pub kubelet_stalled: bool,
    /// Its StatefulSet controller stopped in the middle of a sync, holding the copy of the
    /// StatefulSet it read then: when it resumes it finishes that sync on that copy.
    pub paused_sync: Option<Sts>,
    /// Its API server has spanset's admission policy (`deploy/member/admission.yaml`), which
    /// refuses a write of a lower term than the object carries. A member may lack it (not
    /// installed, or a Kubernetes without ValidatingAdmissionPolicy).
    pub admission: bool,
}

/// What a StatefulSet list confirmed absences for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Confirmed {
    /// No StatefulSet.
    Absent,
    /// This incarnation at this generation.
    Present(u32, i64),
}

/// What one controller replica's watcher of one member knows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct View {
    /// Listed at least once.
    pub synced: bool,
    /// The latest call succeeded.
    pub reachable: bool,
    /// The StatefulSet as last seen.
    pub sts: Option<Sts>,
    /// The pods as last listed.
    pub pods: BTreeMap<u32, Pod>,
    /// The claims as last listed.
    pub claims: BTreeMap<u32, u32>,
    /// The state the latest list confirmed absences for.
    pub confirmed: Option<Confirmed>,
    /// A StatefulSet write got no answer and was not voided since: its precondition
    /// (`None`: a create).
    pub uncertain: Option<Option<u64>>,
    /// `(uid, generation)` this process last wrote.
    pub written: Option<(u32, i64)>,
    /// The newest term seen on the member's objects.
    pub newest_term: u64,
    /// Listed since this process read the member's fence (`fence_clock`).
    pub answered_since_fence: bool,
}

/// What a controller read of the host.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostCopy {
    /// Which spec (index into the model's specs).
    pub spec: u8,
    /// `metadata.generation`.
    pub generation: i64,
    /// The stored status (JSON).
    pub status: String,
    /// The federation's resourceVersion.
    pub rv: u64,
    /// The fenced members.
    pub fenced: [bool; MEMBERS.len()],
}

/// One effect a controller carries out, as the model sends it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Effect {
    /// Store the federation's status (conditional on the resourceVersion read).
    Store {
        /// The status, JSON.
        status: String,
    },
    /// Write a member StatefulSet.
    Write {
        /// Member index.
        member: u8,
        /// Slice start.
        start: u32,
        /// Slice replicas.
        replicas: u32,
        /// Partition.
        partition: i32,
        /// Template hash.
        hash: String,
        /// Precondition (`None`: create).
        expected_rv: Option<u64>,
        /// The writer's term.
        term: u64,
        /// Planned by a controller that knew the member fenced.
        to_fenced: bool,
        /// Ordinals of this slice whose data is in another member that the deciding controller
        /// knew fenced (the oracle's note, not the product's): with the identity gate off, the
        /// write lets them start here on fresh claims by the rules of failover.
        rehomed: Vec<u32>,
    },
    /// Remove the identity gate of one pod incarnation.
    Release {
        /// Member index.
        member: u8,
        /// Ordinal.
        ordinal: u32,
        /// Pod uid.
        uid: u32,
        /// Pod resourceVersion.
        rv: u64,
        /// The writer's term.
        term: u64,
        /// Planned by a controller that knew the member fenced.
        to_fenced: bool,
        /// The ordinal's data is in another member that the deciding controller knew fenced
        /// (the oracle's note): the release lets it start here on a fresh claim.
        rehomed: bool,
    },
    /// Hand an ordinal's volume over: the destination gets a claim bound to the source's
    /// volume (`storage: Move`).
    Handover {
        /// Source member.
        from: u8,
        /// Destination member.
        to: u8,
        /// Ordinal.
        ordinal: u32,
    },
    /// Retire a claim of an ordinal (`storage: Detached`): delete the claim, exactly the one of
    /// this volume (its uid) unless `volume` is `None` (the planted bug: whatever claim bears the
    /// name when the request lands).
    Retire {
        /// Member index.
        member: u8,
        /// Ordinal.
        ordinal: u32,
        /// The claim's volume as the decision observed it (the uid precondition).
        volume: Option<u32>,
        /// The writer's term.
        term: u64,
    },
    /// Delete one pod incarnation (in a fenced member that answers again).
    DeletePod {
        /// Member index.
        member: u8,
        /// Ordinal.
        ordinal: u32,
        /// Pod uid.
        uid: u32,
    },
}

/// One `spanset run` replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Controller {
    /// The process runs.
    pub up: bool,
    /// The term it believes it leads in.
    pub term: Option<u64>,
    /// The federation and fences as it last read them.
    pub host: Option<HostCopy>,
    /// Its watchers' knowledge, by member.
    pub views: [View; MEMBERS.len()],
    /// The effects of its current decision still to carry out, in order.
    pub pending: Vec<Effect>,
    /// A member write of the current decision failed: what follows the writes is skipped.
    pub failed: bool,
    /// Its watch of each member is stalled (no events reach it), though its requests go through.
    pub stalled: [bool; MEMBERS.len()],
    /// The process is frozen (SIGSTOP, a VM stall, a long pause): it does nothing, not even
    /// notice that its Lease expired, until it resumes where it stopped.
    pub frozen: bool,
    /// In the pod-lease world, while it leads: its clocks of the members' pod leases.
    pub leases: Option<super::lease::ControllerLeases>,
}

impl Controller {
    /// A process that knows nothing yet (just started, or crashed: `up` false).
    pub fn fresh(up: bool) -> Controller {
        Controller {
            up,
            term: None,
            host: None,
            views: Default::default(),
            pending: vec![],
            failed: false,
            stalled: [false; MEMBERS.len()],
            frozen: false,
            leases: None,
        }
    }
}

/// The host cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Host {
    /// Which spec.
    pub spec: u8,
    /// `metadata.generation`.
    pub generation: i64,
    /// The stored status (JSON).
    pub status: String,
    /// The federation's resourceVersion.
    pub rv: u64,
    /// The Lease's holder.
    pub holder: Option<u8>,
    /// The Lease's term (`leaseTransitions`).
    pub term: u64,
}

/// The whole world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World {
    /// The host.
    pub host: Host,
    /// The members.
    pub members: [Member; MEMBERS.len()],
    /// The controllers.
    pub controllers: [Controller; CONTROLLERS],
    /// Requests whose answer was lost: each may still land, once.
    pub in_flight: Vec<(u8, Effect)>,
    /// Faults the schedule may still inject.
    pub faults_left: u8,
    /// Spec edits the schedule may still make.
    pub edits_left: u8,
    /// A broken rule seen at the moment it broke (a property reads it).
    pub broken: Option<String>,
    /// An ordinal started on a volume other than its own, where its own was not in a fenced
    /// member (seen as it started).
    pub lost_data: Option<String>,
    /// Each ordinal's data: the volume its containers last ran on, and where.
    pub data: BTreeMap<u32, (u32, u8)>,
    /// `storage: Detached`: every (ordinal, volume) its containers ever ran on, so that a start
    /// on a claim older than its data is seen.
    pub ran_on: std::collections::BTreeSet<(u32, u32)>,
    /// A claim deleted while it held its ordinal's data (seen as the retirement landed).
    pub retired_data: Option<String>,
    /// Ordinals let run on fresh claims by the rules of failover (a release, or with the
    /// identity gate off a write, planned knowing the member with their data fenced): the
    /// fence wrote their data off, so their next start may be on that fresh claim (wherever it
    /// is handed since), even if the member was unfenced meanwhile.
    pub rehomed: BTreeMap<u32, Rehomed>,
    /// The next volume's id.
    pub next_volume: u32,
    /// The fair scheduler's turn (fault-placement search only).
    pub turn: u32,
    /// Fair steps since the last fault (fault-placement search only).
    pub since_fault: u32,
    /// The pod-lease world: time, the members' pod Leases and the pods' guards (`None`
    /// without pod leases).
    pub leases: Option<super::lease::Leases>,
}

impl World {
    /// Ordinals whose containers run in two members at once, with where.
    pub fn doubled(&self) -> Option<(u32, Vec<&'static str>)> {
        (0..8).find_map(|k| {
            let at: Vec<&'static str> = self
                .members
                .iter()
                .enumerate()
                .filter(|(_, m)| m.pods.get(&k).is_some_and(|p| p.running))
                .map(|(i, _)| MEMBERS[i])
                .collect();
            (at.len() > 1).then_some((k, at))
        })
    }
}

/// Where a re-homed ordinal may start on a fresh claim (see [`World::rehomed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rehomed {
    /// On the claim its StatefulSet controller makes in this member (none yet).
    In(u8),
    /// On this volume.
    On(u32),
}
