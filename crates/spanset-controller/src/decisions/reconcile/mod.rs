//! What a coordinator decides in one reconcile, without I/O: from the FederatedStatefulSet, the
//! members' reports and the term, to the member writes, the moves to record first, and the
//! status. The coordinator actor only carries these decisions out, in order.
//!
//! [`decide`] runs the stages of a reconcile in order, each in its own module:
//! 1. `refusals`: refuse what only the controller can judge (spec the planner refuses, an
//!    unknown member, a member whose kubeconfig is unusable, a template a member refused): a
//!    condition names it and nothing is written anywhere;
//! 2. `observation`: the planner's view of every member that counts;
//! 3. `availability`: which pods are available, the rollout's cursor, the ordinals running
//!    twice;
//! 4. `stamps`: every member StatefulSet not yet written in this term (or with an old
//!    template) is written with its *stored* slice, so that a stale leader's later writes fail
//!    with 409; members without one get an empty one (replicas 0 cannot run anything, so a
//!    create never needs a precondition). No slice changes in the same round. A fenced member
//!    that answers again is shrunk, then its pods deleted;
//! 5. `planning` and `moves`: plan within the disruption budget, gate the steps, and
//!    advance the moves recorded in `status.moves` (release, storage handover, parking);
//! 6. `steps`: record new moves (`Draining`, `Starting`) in `status.moves` *before* the
//!    writes that act on them, then write the steps;
//! 7. `verdicts` and `status`: the conditions and the status to store;
//!    `member_writes`: the pod releases, budgets and EndpointSlices of the round;
//!    `homes`: where each ordinal was last seen Ready (`status.homes`), the claims to fetch
//!    before a release (`storage: Move`), and the claims left behind to retire once an ordinal
//!    is Ready in its home (`Detached`).

mod availability;
mod homes;
mod member_writes;
pub mod move_storage;
mod moves;
mod observation;
mod planning;
mod refusals;
mod scope;
mod stamps;
mod status;
mod steps;
mod verdicts;

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{ResourceExt, api::DynamicObject};
use spanset_api::{FailoverPolicy, FederatedStatefulSet, FederatedStatefulSetStatus};
use spanset_plan::Ordinal;

use crate::{actors::messages::MemberView, decisions::disruption::BudgetWrite, host::events::Note};

pub use observation::observe;

/// Move phases as stored in `status.moves`: the strings of [`MovePhase`], for code that
/// compares stored statuses (tests, tools).
pub mod phases {
    use super::MovePhase;

    /// [`MovePhase::Draining`].
    pub const DRAINING: &str = MovePhase::Draining.as_str();
    /// [`MovePhase::Released`].
    pub const RELEASED: &str = MovePhase::Released.as_str();
    /// [`MovePhase::Handover`].
    pub const HANDOVER: &str = MovePhase::Handover.as_str();
    /// [`MovePhase::Starting`].
    pub const STARTING: &str = MovePhase::Starting.as_str();
    /// [`MovePhase::Parked`].
    pub const PARKED: &str = MovePhase::Parked.as_str();
}

pub use crate::decisions::move_phase::MovePhase;

pub use crate::member::health::DEFAULT_UNREACHABLE_AFTER;
/// The shortest effective `unreachableAfterSeconds`: three probe periods, so that one slow or
/// failed probe never flips a member.
pub const MIN_UNREACHABLE_AFTER: Duration = Duration::from_secs(6);
/// Default of `failover.fenceAfterSeconds`.
pub const DEFAULT_FENCE_AFTER_SECONDS: i32 = 300;

/// One member as the coordinator knows it.
#[derive(Debug, Clone, Default)]
pub struct MemberInput {
    /// A MemberCluster of that name exists.
    pub exists: bool,
    /// Why no watcher runs for it (bad kubeconfig Secret…).
    pub unusable: Option<String>,
    /// `spec.fenced`.
    pub fenced: bool,
    /// Fenced, and heard from since this process saw the fence (`actors/coordinator/fence_clock.rs`): what
    /// it was last seen to hold keeps counting, silent or not.
    pub answered_since_fence: bool,
    /// The latest report of its watcher.
    pub view: Option<Arc<MemberView>>,
    /// It reaches the same cluster as another MemberCluster, which is used instead (why,
    /// naming the other): it gets no slice and is not observed, since the pods it would see
    /// are the other's; a federation placing it is said Degraded, not Blocked.
    pub duplicate: Option<String>,
}

/// A member's refusal, in a dry run, of an object the federation would write there: nothing
/// is written in any member while it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The `Blocked` condition's reason: `TemplateRefused` (the StatefulSet, its Service or its
    /// namespace) or `CarriedObjectRefused` (`spec.migration.carry`).
    pub reason: &'static str,
    /// The message, starting with the field: `spec.template: east refused it (422): …`.
    pub message: String,
}

/// A member's refusal of spanset's writes (401/403) as one round shows it: `Blocked` with its
/// reason (`MemberForbidden` only for RBAC's own refusal) and message, and either nothing
/// written, or the writes tried again while the condition stays (a held refusal's recheck).
#[derive(Debug, Clone, PartialEq)]
pub struct AccessBlock {
    /// The `Blocked` condition's reason.
    pub reason: &'static str,
    /// Its message, naming the member and in its own words.
    pub message: String,
    /// Whether nothing is written this round.
    pub blocks: bool,
}

/// Everything a reconcile decides from.
pub struct Inputs<'a> {
    /// The federation.
    pub fsts: &'a FederatedStatefulSet,
    /// Members by name (every MemberCluster, not only the placement's).
    pub members: &'a BTreeMap<String, MemberInput>,
    /// The leader term writes are made in.
    pub term: u64,
    /// A member's refusal, in a dry run, of the current template or of what it writes with
    /// it (Service, namespace, carried objects), if any.
    pub template_refusal: Option<Refusal>,
    /// The controller's bounds on replicas.
    pub bounds: crate::decisions::bounds::ReplicaBounds,
    /// A member's refusal (401/403) of spanset's writes, as this round shows it.
    pub access_refusal: Option<AccessBlock>,
    /// Ordinals whose storage cannot be handed over, with why (naming the PV).
    pub handover_refusals: BTreeMap<Ordinal, String>,
    /// Monotonic now, for reachability.
    pub now: Instant,
    /// When this process began leading in `term`: the automatic policy counts a member's
    /// silence for fencing only from here, never from what the watchers counted while this
    /// process was a standby (which may simply have no route to a member the old leader
    /// reached).
    pub leading_since: Instant,
    /// Wall-clock now, for `since` and transition times.
    pub wall: jiff::Timestamp,
    /// The safety rules in force: always [`Rules::ALL`] but in the model checker's planted-bug
    /// tests.
    pub rules: Rules,
}

pub use crate::decisions::safety::Rules;
pub use move_storage::{Handover, HandoverKind};

/// A pod that spanset deletes itself: one left running in a fenced member that answers again,
/// after its StatefulSet was shrunk to nothing. Its ordinal was re-homed while the member was
/// declared dead, and an OrderedReady scale-down would wait on a pod stuck Terminating on a
/// dead node while the others kept running — and restarted when their nodes power on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDelete {
    /// The member.
    pub cluster: String,
    /// The pod's name.
    pub name: String,
    /// Its uid: only this incarnation is deleted.
    pub uid: String,
}

/// A member StatefulSet write.
#[derive(Debug, Clone)]
pub struct StsWrite {
    /// The member.
    pub cluster: String,
    /// The object (of the federation's backend).
    pub object: DynamicObject,
    /// Its resourceVersion precondition (`None`: create).
    pub expected_rv: Option<u64>,
    /// Whether the write changes the template (a dry run goes first).
    pub new_template: bool,
    /// Whether the write recreates the StatefulSet with its pods orphaned, rather than
    /// replacing it (see [`crate::member::ungated`]).
    pub recreate: bool,
}

/// A gated pod that may run now: its identity gate is removed (the pod's other gates stay),
/// conditional on the pod being this very incarnation unchanged since it was read, and the
/// term is stamped on it in the same write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRelease {
    /// The member.
    pub cluster: String,
    /// The pod's ordinal.
    pub ordinal: Ordinal,
    /// The pod's uid (precondition).
    pub uid: String,
    /// The pod's resourceVersion (precondition).
    pub rv: u64,
    /// Its scheduling gates other than spanset's, which stay.
    pub remaining: Vec<String>,
}

/// An ordinal seen running (not gated) in more than one unfenced member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The ordinal.
    pub ordinal: Ordinal,
    /// The members that report a pod of it.
    pub members: Vec<String>,
}

/// What one reconcile decided.
#[derive(Debug, Clone, Default)]
pub struct Decision {
    /// The status to store.
    pub status: FederatedStatefulSetStatus,
    /// `status.moves` gained or advanced a move that the writes act on: store the status first.
    pub persist_first: bool,
    /// Member StatefulSet writes, safe to make concurrently.
    pub writes: Vec<StsWrite>,
    /// Members whose namespace, Service and carried objects should be ensured.
    pub supporting: Vec<String>,
    /// Placement members that may be written now: reachable, unfenced and keeping ordinals.
    /// Nothing else is sent to a member (an unreachable one would only time out, and a fenced
    /// one gets its shrink first).
    pub writable: Vec<String>,
    /// Members the automatic failover policy fences now, with why.
    pub fence: Vec<(String, String)>,
    /// Storage handovers to carry out before the writes.
    pub handovers: Vec<Handover>,
    /// Pods to delete (gracefully, by uid) in fenced members that answer again.
    pub pod_deletes: Vec<PodDelete>,
    /// Nothing may be written (a condition says why).
    pub blocked: bool,
    /// Every slice as targeted and every ordinal Ready.
    pub done: bool,
    /// Ordinals that finished moving in this reconcile, with their durations (counted once the
    /// status without them is stored).
    pub finished_moves: Vec<(Ordinal, f64)>,
    /// Ordinals seen running in two unfenced members, with where (must stay empty).
    pub conflicts: Vec<Conflict>,
    /// Events to record once the status of this decision is stored.
    pub notes: Vec<Note>,
    /// Ordinals whose release was observed in this reconcile (`Draining` → `Released`): the
    /// start of the controller's hand-off, timed by the coordinator.
    pub released: Vec<Ordinal>,
    /// Ordinals of recorded moves that this decision's writes grow into their destination: the
    /// end of the hand-off once that write lands.
    pub grows: Vec<Ordinal>,
    /// Gated pods released in this reconcile (see `member_writes::releases`).
    pub releases: Vec<PodRelease>,
    /// Plan again after this long even if nothing is reported (a pod becomes available once
    /// Ready for `minReadySeconds`, which no watch event announces).
    pub wake_after: Option<Duration>,
    /// The members' PodDisruptionBudgets to write or delete (`spec.disruption`), see
    /// [`disruption`](crate::decisions::disruption).
    pub budgets: Vec<BudgetWrite>,
    /// spanset's EndpointSlices to write or delete in the members (`spec.network`), see
    /// [`crate::decisions::network`].
    pub slices: Vec<crate::decisions::network::SliceWrite>,
    /// Placement members whose watcher has not reported a first listing yet, though nothing
    /// failed there (it is starting): until each has, nothing new is created in any member
    /// (no StatefulSet, no supporting object), since none of them could be asked yet whether
    /// it would refuse. A member that does not answer is not starting: it holds nothing here.
    pub starting: Vec<String>,
}

/// The federation's `failover.unreachableAfterSeconds`, at least [`MIN_UNREACHABLE_AFTER`].
pub fn unreachable_after(fsts: &FederatedStatefulSet) -> Duration {
    fsts.spec
        .failover
        .unreachable_after_seconds
        .map(|s| Duration::from_secs(s.max(1) as u64))
        .unwrap_or(DEFAULT_UNREACHABLE_AFTER)
        .max(MIN_UNREACHABLE_AFTER)
}

/// How long a member's silence lasts at each threshold that changes a decision: Unreachable,
/// and for the Automatic policy the fence.
pub fn silence_deadlines(fsts: &FederatedStatefulSet) -> Vec<Duration> {
    let grace = unreachable_after(fsts);
    let mut out = vec![grace];
    if fsts.spec.failover.policy == Some(FailoverPolicy::Automatic) {
        let fence_after = fsts.spec.failover.fence_after_seconds.map_or(DEFAULT_FENCE_AFTER_SECONDS, |s| s.max(1));
        out.push(grace + Duration::from_secs(fence_after as u64));
    }
    out
}

/// Decides one reconcile: runs the stages in order (see the module doc).
pub fn decide(inp: &Inputs<'_>) -> Decision {
    let previous = inp.fsts.status.clone().unwrap_or_default();
    let wall = Time(inp.wall);
    let accepted = match refusals::accept(inp, &previous) {
        Ok(accepted) => accepted,
        Err(refused) => return refusals::blocked(inp.fsts, &previous, refused, &wall),
    };
    let cx = scope::Scope::new(inp, &accepted, &previous, wall);
    let mut obs = observation::observed(&cx);
    let unstamped = observation::unstamped_unreachable(&mut obs, inp);
    let avail = availability::assess(&cx, &obs);
    let stamps = stamps::stamps(&cx, &obs, avail.roll.cursor);
    let stamping = stamps.stamping();
    let planning = planning::plan(&cx, &obs, &avail);
    let mut moves = moves::advance(&cx, &obs, &planning, stamping);
    let steps = steps::write(&cx, &planning, &mut moves, avail.roll.cursor, stamping);
    let mut writes = stamps.writes;
    writes.extend(steps.writes);
    let report = status::report(
        &cx,
        &obs,
        &status::StatusInputs {
            unstamped: &unstamped,
            avail: &avail,
            stamping,
            writes: &writes,
            pod_deletes: &stamps.pod_deletes,
            planning: &planning,
            moves: &moves,
        },
    );
    let homes = homes::seen(inp, &obs, homes::read(Some(&previous)));
    let others = member_writes::member_writes(&cx, &obs, &avail.ok, &homes);
    let mut notes = moves.notes;
    notes.extend(report.notes);
    let mut status = report.status;
    if let Some(a) = inp.access_refusal.as_ref().filter(|a| !a.blocks) {
        refusals::keep_blocked(&mut status, &previous, a, inp.fsts.metadata.generation, &Time(inp.wall));
    }
    let mut persist_first = report.persist_first;
    let mut handovers = moves.handovers;
    for fetch in others.fetches {
        if !handovers.iter().any(|h| h.ordinal == fetch.ordinal) {
            handovers.push(fetch);
        }
    }
    for retire in move_storage::left_behind(inp, &obs, &homes, &moves.moves, cx.range()) {
        if !handovers.iter().any(|h| h.ordinal == retire.ordinal && h.from == retire.from) {
            handovers.push(retire);
        }
    }
    let stored = homes::write(&homes);
    if stored != previous.homes {
        // Stored before the claims it makes stale are retired.
        status.homes = stored;
        persist_first = true;
    }
    Decision {
        status,
        persist_first,
        writes,
        supporting: stamps.supporting,
        writable: others.writable,
        fence: observation::automatic_fences(cx.fsts, inp, &obs, cx.grace),
        handovers,
        pod_deletes: stamps.pod_deletes,
        blocked: false,
        done: report.done,
        finished_moves: moves.finished,
        conflicts: avail.conflicts,
        notes,
        released: moves.released.into_iter().collect(),
        grows: steps.grows,
        releases: others.releases,
        wake_after: avail.wake_after,
        budgets: others.budgets,
        slices: others.slices,
        starting: stamps.starting,
    }
}

/// Whether two statuses differ in anything but transition times (a no-op reconcile writes nothing).
pub fn status_changed(a: &FederatedStatefulSetStatus, b: &FederatedStatefulSetStatus) -> bool {
    a != b
}

/// The name a member object is known by in logs.
pub fn describe(fsts: &FederatedStatefulSet) -> String {
    format!("{}/{}", fsts.namespace().unwrap_or_default(), fsts.name_any())
}

#[cfg(test)]
mod tests;
