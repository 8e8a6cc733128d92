//! What a coordinator decides in one reconcile, without I/O: from the FederatedStatefulSet, the
//! members' reports and the term, to the member writes, the moves to record first, and the
//! status. The coordinator actor only carries these decisions out, in order.
//!
//! Order of a reconcile:
//! 1. refuse what only the controller can judge (spec the planner refuses, an unknown member,
//!    a member whose kubeconfig is unusable, a template a member refused): a condition names
//!    it and nothing is written anywhere;
//! 2. stamp: every member StatefulSet not yet written in this term (or with an old template)
//!    is written with its *stored* slice, so that a stale leader's later writes fail with 409;
//!    members without one get an empty one (replicas 0 cannot run anything, so a create never
//!    needs a precondition). No slice changes in the same round;
//! 3. plan, record new moves (`Draining`, `Starting`) in `status.moves` *before* the writes
//!    that act on them, then write the steps.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{ResourceExt, api::DynamicObject};

use super::{
    disruption::{self, BudgetWrite},
    events::Note,
    gates,
    labels::IDENTITY_GATE,
    member::objects::{
        backend, global_partition, member_partition, on_delete, revision, rolling_max_unavailable, statefulset_at,
        template_hash,
    },
    messages::MemberView,
    move_storage::{self, Gate},
    network,
    rollout::{self, PodState, Rollout},
    status::{Verdict, conditions, types},
};
use crate::{
    api::{FailoverPolicy, FederatedStatefulSet, FederatedStatefulSetStatus, MoveStatus, SliceStatus},
    plan::{self, Backend, ClusterObservation, Exclusion, Observed, Ordinal, Ordinals, Slice, Step},
};

/// Move phases, as stored in `status.moves`.
pub mod phases {
    /// The source's slice no longer holds the ordinal; its pod may still run.
    pub const DRAINING: &str = "Draining";
    /// The source is confirmed not to run the ordinal.
    pub const RELEASED: &str = "Released";
    /// The ordinal's storage is being dealt with: with `migration.storage: Move` its volumes are
    /// handed to the destination, with `Detached` its claims in the source are retired.
    pub const HANDOVER: &str = "Handover";
    /// The destination's slice holds the ordinal; waiting for its pod to be Ready.
    pub const STARTING: &str = "Starting";
    /// The ordinal lands in a neighbour (`to`), not in its target: its target could not take it
    /// next and `maxConcurrentMoves` left no room for the moves in its way (a spec edit
    /// retargeted it). Done once Ready there; it moves on later like any misplaced ordinal.
    pub const PARKED: &str = "Parked";
}

/// Default of `failover.unreachableAfterSeconds`.
pub const DEFAULT_UNREACHABLE_AFTER: Duration = Duration::from_secs(15);
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
    pub bounds: super::bounds::ReplicaBounds,
    /// A member's refusal (401/403) of spanset's last write there, naming the permission.
    pub access_refusal: Option<String>,
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
}

pub use super::move_storage::{Handover, HandoverKind};

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
    /// Gated pods released in this reconcile (see [`releases`]).
    pub releases: Vec<PodRelease>,
    /// Plan again after this long even if nothing is reported (a pod becomes available once
    /// Ready for `minReadySeconds`, which no watch event announces).
    pub wake_after: Option<Duration>,
    /// The members' PodDisruptionBudgets to write or delete (`spec.disruption`), see
    /// [`disruption`].
    pub budgets: Vec<BudgetWrite>,
    /// spanset's EndpointSlices to write or delete in the members (`spec.network`), see
    /// [`super::network`].
    pub slices: Vec<super::network::SliceWrite>,
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

/// Members that the automatic policy fences now: unfenced, holding something of this
/// federation (in the placement, or in the observation with a slice or pods there: a member
/// removed from the placement while lost still holds its ordinals, issue 19 item 16), and
/// silent for `unreachableAfterSeconds` + `fenceAfterSeconds`. Silence is counted from the
/// last answer, or from the watcher's start when the member never answered this process, and
/// never from before this process began leading (issue 19 item 12): a standby's watcher may
/// have had no route to a member that the old leader reached, and its count says nothing
/// about that member's pods.
fn automatic_fences(
    fsts: &FederatedStatefulSet,
    inp: &Inputs<'_>,
    obs: &Observed,
    grace: Duration,
) -> Vec<(String, String)> {
    if fsts.spec.failover.policy != Some(FailoverPolicy::Automatic) {
        return Vec::new();
    }
    let fence_after = Duration::from_secs(
        fsts.spec.failover.fence_after_seconds.map_or(DEFAULT_FENCE_AFTER_SECONDS, |s| s.max(1)) as u64,
    );
    let placed = |n: &str| fsts.spec.placement.clusters.iter().any(|c| c.name == n);
    let holds = |n: &str| obs.get(n).is_some_and(|o| o.written.replicas > 0 || !o.pods.is_empty());
    let mut out = Vec::new();
    for (name, m) in inp.members {
        if m.fenced || !(placed(name) || holds(name)) {
            continue;
        }
        let Some(view) = &m.view else { continue };
        let Some(since) = view.last_contact.or(view.watching_since) else { continue };
        let since = since.max(inp.leading_since);
        let silent = inp.now.saturating_duration_since(since);
        if silent < grace + fence_after {
            continue;
        }
        let why = view.failure.as_ref().map(|(f, msg)| format!("{}: {msg}", f.reason())).unwrap_or_default();
        out.push((
            name.clone(),
            format!(
                "automatic failover: no answer for {}s (unreachableAfterSeconds {} + fenceAfterSeconds {}, counted \
                 from this leader's start at the earliest); {why}",
                silent.as_secs(),
                grace.as_secs(),
                fence_after.as_secs()
            ),
        ));
    }
    out
}

/// The planner's observation of a member whose watcher has not reported yet: the slice last
/// stored in the status (or nothing), unreachable and not observed since that write — so its
/// absences confirm nothing and every ordinal it might run stays where it is.
fn unreported(previous: &FederatedStatefulSetStatus, name: &str, fenced: bool) -> ClusterObservation {
    let written = previous
        .slices
        .iter()
        .find(|s| s.cluster == name)
        .map(|s| Slice {
            start: u32::try_from(s.start).unwrap_or(0),
            replicas: u32::try_from(s.replicas).unwrap_or(0),
            reserved: s.reserved_ordinals.iter().filter_map(|k| u32::try_from(*k).ok()).collect(),
        })
        .unwrap_or_else(Slice::empty);
    ClusterObservation {
        pods: written.ordinals(),
        written,
        observed_since_write: false,
        ready: Default::default(),
        reachable: false,
        fenced,
        compatible: true,
    }
}

/// Why a member cannot run a backend's StatefulSets, if it cannot: it drops `.spec.ordinals`
/// of that API, or (Advanced StatefulSets) its discovery does not list them. Unknowns do not
/// exclude (a member is unsynced until discovery answers; the first write tells the rest).
fn incompatibility(view: &MemberView, backend: Backend) -> Option<&'static str> {
    match backend {
        Backend::StatefulSet if view.keeps_ordinals == Some(false) => Some("its API server drops .spec.ordinals"),
        Backend::StatefulSet => None,
        Backend::AdvancedStatefulSet if view.serves_advanced == Some(false) => Some(
            "spec.backend is AdvancedStatefulSet and the member does not serve \
             statefulsets.apps.kruise.io/v1beta1; install OpenKruise there",
        ),
        Backend::AdvancedStatefulSet if view.advanced_keeps_ordinals == Some(false) => Some(
            "its OpenKruise drops .spec.ordinals of Advanced StatefulSets; upgrade it to a version that keeps them",
        ),
        Backend::AdvancedStatefulSet => None,
    }
}

/// The planner's observation of one member, from its watcher's report.
pub fn observe(view: &MemberView, backend: Backend, fenced: bool, now: Instant, grace: Duration) -> ClusterObservation {
    let f = &view.federation;
    let written = f.sts.as_ref().filter(|s| !s.deleting).map(|s| s.slice.clone()).unwrap_or_default();
    ClusterObservation {
        written,
        pods: f.pods.keys().copied().collect(),
        ready: f.pods.iter().filter(|(_, p)| p.ready).map(|(k, _)| *k).collect(),
        observed_since_write: view.synced && f.confirmed(),
        reachable: view.synced && view.last_contact.is_some_and(|t| now.saturating_duration_since(t) < grace),
        fenced,
        compatible: incompatibility(view, backend).is_none(),
    }
}

fn blocked(
    fsts: &FederatedStatefulSet,
    previous: &FederatedStatefulSetStatus,
    reason: &str,
    message: String,
    wall: &Time,
) -> Decision {
    let verdicts = [Verdict::yes(types::BLOCKED, reason, message.clone()), Verdict::no(types::READY, reason, message)];
    let mut status = previous.clone();
    status.observed_generation = fsts.metadata.generation;
    status.conditions = conditions(&previous.conditions, &verdicts, fsts.metadata.generation, wall);
    let already =
        previous.conditions.iter().any(|c| c.type_ == types::BLOCKED && c.status == "True" && c.reason == reason);
    let notes = if already { vec![] } else { vec![Note::warning(reason, verdicts[0].message.clone())] };
    Decision { status, blocked: true, notes, ..Default::default() }
}

/// A held change of replicas: the reason and message of `ReplicasHeld`.
type Held = (&'static str, String);

/// The desired state within the controller's bounds on replicas: as specified, or held at
/// the replicas accepted before with the reason and message of `ReplicasHeld`; an error for a
/// federation never accepted whose replicas are above the ceiling.
fn bounded(
    fsts: &FederatedStatefulSet,
    previous: &FederatedStatefulSetStatus,
    mut desired: plan::Desired,
    bounds: &super::bounds::ReplicaBounds,
) -> Result<(plan::Desired, Option<Held>), String> {
    use super::bounds::{Judgement, approved, judge};
    let accepted = previous.accepted_replicas.and_then(|r| u32::try_from(r).ok());
    match judge(desired.replicas, accepted, approved(fsts), bounds) {
        Judgement::Accept => Ok((desired, None)),
        Judgement::Hold { at, reason, message } => {
            desired.replicas = at;
            Ok((desired, Some((reason, message))))
        }
        Judgement::Refuse { message } => Err(message),
    }
}

/// Decides one reconcile.
pub fn decide(inp: &Inputs<'_>) -> Decision {
    let previous = inp.fsts.status.clone().unwrap_or_default();
    let wall = Time(inp.wall);
    // Duplicates are not placed: the federation is planned as if they were not listed.
    let duplicates: Vec<String> = inp
        .fsts
        .spec
        .placement
        .clusters
        .iter()
        .filter_map(|c| {
            Some(format!("{} (DuplicateCluster: {})", c.name, inp.members.get(&c.name)?.duplicate.as_ref()?))
        })
        .collect();
    let without_duplicates;
    let fsts = if duplicates.is_empty() {
        inp.fsts
    } else {
        let mut f = inp.fsts.clone();
        f.spec.placement.clusters.retain(|c| inp.members.get(&c.name).is_none_or(|m| m.duplicate.is_none()));
        if f.spec.placement.clusters.is_empty() {
            let msg = format!("spec.placement.clusters: no member can be used: {}", duplicates.join("; "));
            return blocked(inp.fsts, &previous, "DuplicateCluster", msg, &wall);
        }
        without_duplicates = f;
        &without_duplicates
    };
    // 1. What only the controller can judge.
    let names = crate::plan::validate_names(
        fsts.metadata.name.as_deref().unwrap_or_default(),
        fsts.metadata.namespace.as_deref().unwrap_or("default"),
        &fsts.spec.template.service_name,
    );
    let desired = match fsts.spec.to_desired() {
        Ok(d) if names.is_empty() => d,
        Ok(_) => {
            let msg = names.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            return blocked(fsts, &previous, "InvalidSpec", msg, &wall);
        }
        Err(mut errs) => {
            errs.extend(names);
            let msg = errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            return blocked(fsts, &previous, "InvalidSpec", msg, &wall);
        }
    };
    let (desired, replicas_held) = match bounded(fsts, &previous, desired, &inp.bounds) {
        Ok(bounded) => bounded,
        Err(msg) => return blocked(fsts, &previous, "ReplicasAboveCeiling", msg, &wall),
    };
    let backend = backend(fsts);
    if let Some(msg) = backend_mismatch(inp, backend) {
        return blocked(fsts, &previous, "BackendMismatch", msg, &wall);
    }
    for (i, c) in fsts.spec.placement.clusters.iter().enumerate() {
        match inp.members.get(&c.name) {
            None | Some(MemberInput { exists: false, .. }) => {
                let msg = format!("spec.placement.clusters[{i}].name: no MemberCluster named {:?}", c.name);
                return blocked(fsts, &previous, "UnknownCluster", msg, &wall);
            }
            Some(MemberInput { unusable: Some(why), .. }) => {
                let msg = format!("spec.placement.clusters[{i}].name: member {:?} cannot be used: {why}", c.name);
                return blocked(fsts, &previous, "MemberUnusable", msg, &wall);
            }
            _ => {}
        }
    }
    if let Some(r) = &inp.template_refusal {
        return blocked(fsts, &previous, r.reason, r.message.clone(), &wall);
    }
    if let Some(why) = &inp.access_refusal {
        return blocked(fsts, &previous, "MemberForbidden", why.clone(), &wall);
    }

    // The observation: placement members, and any other member still holding something.
    let grace = unreachable_after(fsts);
    let placement: BTreeSet<&str> = fsts.spec.placement.clusters.iter().map(|c| c.name.as_str()).collect();
    let listed_before: BTreeSet<&str> = previous.slices.iter().map(|s| s.cluster.as_str()).collect();
    let mut obs = Observed::new();
    for (name, m) in inp.members {
        match &m.view {
            // A duplicate is never observed: its pods are another member's. Only a slice the
            // status gave it before it was found out is kept, unconfirmed (as for a silent member).
            _ if m.duplicate.is_some() && listed_before.contains(name.as_str()) => {
                obs.insert(name.clone(), unreported(&previous, name, m.fenced));
            }
            _ if m.duplicate.is_some() => {}
            Some(view) if view.synced => {
                let holds = view.federation.sts.is_some() || !view.federation.pods.is_empty();
                if placement.contains(name.as_str()) || holds || listed_before.contains(name.as_str()) {
                    obs.insert(name.clone(), observe(view, backend, m.fenced, inp.now, grace));
                }
            }
            // Not reported yet, or not synced yet (a new process or a new watcher, or a member
            // down since it started): what it runs is unknown, so it counts as silent and
            // unconfirmed, and no ordinal grows anywhere until it reports or is fenced.
            _ if placement.contains(name.as_str()) || listed_before.contains(name.as_str()) => {
                obs.insert(name.clone(), unreported(&previous, name, m.fenced));
            }
            _ => {}
        }
    }
    let hash = template_hash(fsts);
    let view_of = |c: &str| inp.members.get(c).and_then(|m| m.view.clone());
    let unstamped = unstamped_unreachable(&mut obs, inp);
    let (pod_states, wake_after) = pod_states(inp, &obs, &hash, desired.start..desired.start + desired.replicas);
    let roll = rollout::roll(&rollout::Input {
        name: &fsts.name_any(),
        revision: revision(fsts),
        previous: &previous,
        range: desired.start..desired.start + desired.replicas,
        partition: global_partition(fsts),
        max_unavailable: rollout::resolve_max_unavailable(rolling_max_unavailable(fsts), desired.replicas)
            .min(fsts.spec.disruption.as_ref().map_or(u32::MAX, |d| d.allowed_unavailable(desired.replicas))),
        on_delete: on_delete(fsts),
        pods: &pod_states,
    });
    let cursor = roll.cursor;
    // Ordinals counted unavailable for the disruption budget: placed (in the written slice of
    // a member that answers and is not fenced, or moving) and not available there, or about to
    // be replaced by the rollout (at or above its cursor, not yet updated). An ordinal no
    // member holds yet (a scale-up not yet written) was never available and counts for nothing
    // (counting it would hold the very moves that make room for it); a member that does not
    // answer is not judged; see below for a fenced one's.
    let ok: Ordinals = pod_states
        .iter()
        .filter(|(k, p)| p.available && !p.deleting && (on_delete(fsts) || **k < cursor || p.updated))
        .map(|(k, _)| *k)
        .collect();
    let unavailable: Ordinals = {
        // Ordinals re-homed from a fenced member count once written in their new home: until
        // then they hold no voluntary move (which may be what makes room for them).
        let fenced = |c: &str| obs.get(c).is_some_and(|o| o.fenced);
        let mut placed: Ordinals =
            previous.moves.iter().filter(|m| !fenced(&m.from)).filter_map(|m| u32::try_from(m.ordinal).ok()).collect();
        for o in obs.values().filter(|o| o.reachable && !o.fenced) {
            placed = &placed | &o.written.ordinals();
        }
        &(&desired.ordinals() & &placed) - &ok
    };
    let statefulset = |slice: &Slice| statefulset_at(fsts, slice, inp.term, cursor);

    // 2. Stamps and creates.
    let starting = starting_members(inp, &placement);
    let mut writes = Vec::new();
    let mut supporting = Vec::new();
    for (name, o) in &obs {
        if !o.reachable {
            continue;
        }
        let view = view_of(name).expect("observed members have views");
        match &view.federation.sts {
            Some(s) if s.deleting => {}
            // A fenced member that answers again: the first write there gives up every
            // ordinal, which were re-homed while it was declared dead.
            Some(s) if o.fenced && s.slice.replicas > 0 => {
                writes.push(StsWrite {
                    cluster: name.clone(),
                    object: statefulset(&Slice::empty()),
                    expected_rv: Some(s.rv),
                    new_template: false,
                });
            }
            // Stamped in another term, another template, someone's edit, or the rollout's
            // cursor moved (the member's partition is its share of it).
            Some(s)
                if s.term != Some(inp.term)
                    || s.template_hash.as_deref() != Some(hash.as_str())
                    || !view.federation.spec_is_ours()
                    || member_partition(fsts, &s.slice, cursor).is_some_and(|p| p != s.partition) =>
            {
                writes.push(StsWrite {
                    cluster: name.clone(),
                    object: statefulset(&s.slice),
                    expected_rv: Some(s.rv),
                    new_template: s.template_hash.as_deref() != Some(hash.as_str()),
                });
            }
            Some(_) => {}
            // Nothing new is created anywhere while a member is still starting: whether it
            // refuses what the federation writes (its dry run) is not known yet.
            None if placement.contains(name.as_str()) && o.compatible && !o.fenced && starting.is_empty() => {
                supporting.push(name.clone());
                writes.push(StsWrite {
                    cluster: name.clone(),
                    object: statefulset(&Slice::empty()),
                    expected_rv: None,
                    new_template: true,
                });
            }
            None => {}
        }
    }

    // A fenced member that answers again and whose shrink is stored: every pod of the
    // federation still there goes now, whatever its StatefulSet controller's order.
    let mut pod_deletes = Vec::new();
    for name in obs.iter().filter(|(_, o)| o.fenced && o.reachable).map(|(n, _)| n) {
        let view = view_of(name).expect("observed members have views");
        let f = &view.federation;
        if f.sts.as_ref().is_some_and(|s| !s.deleting && s.slice.replicas == 0) {
            let pod_name = |k: &Ordinal| format!("{}-{k}", fsts.name_any());
            pod_deletes.extend(f.pods.iter().filter(|(_, p)| !p.deleting).map(|(k, p)| PodDelete {
                cluster: name.clone(),
                name: pod_name(k),
                uid: p.uid.clone(),
            }));
        }
    }

    // 3. Plan.
    let recorded: BTreeMap<Ordinal, MoveStatus> =
        previous.moves.iter().filter_map(|m| u32::try_from(m.ordinal).ok().map(|k| (k, m.clone()))).collect();
    let parked_now = |m: &MoveStatus| m.phase == phases::PARKED;
    let moving: Ordinals = recorded.iter().filter(|(_, m)| !parked_now(m)).map(|(k, _)| *k).collect();
    let parked: Ordinals = recorded.iter().filter(|(_, m)| parked_now(m)).map(|(k, _)| *k).collect();
    let conflicts = conflicts(inp, &obs);
    let mut verdicts = Vec::new();
    let balanced = previous.balanced_placement.as_deref();
    // The planner keeps its moves within what the disruption budget leaves once the pods
    // unavailable for other reasons are counted (its liveness rules — detours, parking —
    // hold for any limit); the gates below hold each release to it too.
    let budget = match &fsts.spec.disruption {
        Some(d) => d.allowed_unavailable(desired.replicas).min(desired.max_concurrent_moves),
        None => desired.max_concurrent_moves,
    };
    let recorded_moving: Ordinals = recorded.keys().copied().collect();
    let down_otherwise = u32::try_from((&unavailable - &recorded_moving).len()).unwrap_or(u32::MAX);
    let planned =
        plan::Desired { max_concurrent_moves: budget.saturating_sub(down_otherwise).max(1), ..desired.clone() };
    let (plan, plan_error) = match plan::plan_parked(&planned, &obs, &moving, &parked, balanced) {
        Ok(p) => (Some(p), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let stamping = !writes.is_empty();
    let mut moves = recorded.clone();
    let mut persist_first = false;
    let mut finished = Vec::new();
    let mut notes = Vec::new();
    // A release is stored before the grow that takes the ordinal, which waits a round.
    let mut newly_released = BTreeSet::new();
    let mut held: BTreeSet<Ordinal> = BTreeSet::new();
    let mut refused: Vec<String> = Vec::new();
    let mut storage_waits: Vec<String> = Vec::new();
    // Moves whose fenced source keeps their volumes, with the condition's words.
    let mut left_behind: BTreeMap<Ordinal, String> = BTreeMap::new();
    let mut handovers = Vec::new();
    let mut grows = Vec::new();
    let now_str = inp.wall.to_string();
    let budget_source = match &fsts.spec.disruption {
        Some(d) if d.allowed_unavailable(desired.replicas) < desired.max_concurrent_moves => {
            let field = if d.max_unavailable.is_some() { "maxUnavailable" } else { "minAvailable" };
            format!("spec.disruption.{field}")
        }
        _ => "spec.migration.maxConcurrentMoves".to_string(),
    };
    let gated = plan.as_ref().map(|p| {
        gates::gate(&gates::Context {
            name: &fsts.name_any(),
            steps: &p.steps,
            obs: &obs,
            range: desired.ordinals(),
            backend,
            ordered: fsts.spec.template.pod_management_policy.as_deref() != Some("Parallel"),
            budget,
            budget_source: budget_source.clone(),
            unavailable: &unavailable,
        })
    });
    let steps: &[Step] = gated.as_ref().map(|g| g.steps.as_slice()).unwrap_or_default();
    if let Some(p) = &plan {
        // Each cluster's target set once; an ordinal's destination is found among the clusters,
        // never through a map of every ordinal.
        let targets: Vec<(&str, Ordinals)> = p.target.iter().map(|(c, s)| (c.as_str(), s.ordinals())).collect();
        let target_of = |k: Ordinal| targets.iter().find(|(_, set)| set.contains(k)).map(|(c, _)| *c);
        let range = desired.start..desired.start + desired.replicas;
        // Moves that ended or were overtaken by a spec change.
        let ready_in = |c: &str, k: Ordinal| obs.get(c).is_some_and(|o| o.written.contains(k) && o.ready.contains(k));
        moves.retain(|k, m| {
            let Some(to) = target_of(*k) else { return false };
            let secs =
                || m.since.parse::<jiff::Timestamp>().map(|s| inp.wall.duration_since(s).as_secs_f64()).unwrap_or(0.0);
            if ready_in(to, *k) {
                finished.push((*k, secs()));
                notes.push(Note::normal("MoveFinished", format!("ordinal {k} is Ready in {to} ({:.0} s)", secs())));
                return false;
            }
            if parked_now(m) && ready_in(&m.to, *k) {
                notes.push(Note::normal(
                    "MoveParked",
                    format!("ordinal {k} runs in {} again until the moves in its way to {to} have run", m.to),
                ));
                return false;
            }
            range.contains(k)
        });
        // A landing the plan chose (a grow outside the grower's target): the move goes there
        // for now, so that its storage follows it there.
        for step in steps.iter().filter(|_| !stamping) {
            if let Step::Grow { cluster, acquires, .. } = step {
                for k in acquires.iter().filter(|k| target_of(*k) != Some(cluster.as_str())) {
                    if let Some(m) = moves.get_mut(&k)
                        && (m.phase != phases::PARKED || m.to != *cluster)
                    {
                        notes.push(Note::normal(
                            "MoveParked",
                            format!(
                                "ordinal {k} lands in {cluster} for now: {} cannot take it next and \
                                 maxConcurrentMoves leaves no room for the moves in its way",
                                m.to
                            ),
                        ));
                        m.phase = phases::PARKED.into();
                        m.to = cluster.clone();
                        m.since = now_str.clone();
                        persist_first = true;
                    }
                }
            }
        }
        // A spec edit that sends an ordinal back to the cluster it was leaving ends its move: a
        // move from a cluster to itself is never recorded.
        moves.retain(|k, m| {
            let back = !parked_now(m) && target_of(*k) == Some(m.from.as_str());
            if back {
                notes.push(Note::normal(
                    "MoveCancelled",
                    format!("ordinal {k} stays in {}: the spec puts it back there", m.from),
                ));
            }
            !back
        });
        for (k, m) in moves.iter_mut() {
            if let Some(to) = target_of(*k)
                && m.to != to
                && !parked_now(m)
            {
                m.to = to.to_string();
            }
            if m.phase == phases::DRAINING && released(&obs, *k, &m.to) {
                m.phase = phases::RELEASED.into();
                m.since = now_str.clone();
                newly_released.insert(*k);
                persist_first = true;
                continue;
            }
            // Every grow of the ordinal waits for its storage, whatever the phase.
            match move_storage::gate(inp, &obs, m, *k) {
                Gate::Open => {}
                Gate::LeftBehind(why) => {
                    left_behind.insert(*k, why);
                }
                Gate::Held { handover, waiting, refused: refusal } => {
                    held.insert(*k);
                    refused.extend(refusal);
                    storage_waits.extend(waiting);
                    if let Some(h) = handover {
                        if m.phase != phases::HANDOVER {
                            m.phase = phases::HANDOVER.into();
                            m.since = now_str.clone();
                            persist_first = true;
                        }
                        handovers.push(h);
                    }
                }
            }
            // Without identity gates a pod starts as soon as its slice holds it: the grow then
            // waits until spanset's records in the destination no longer name the ordinal.
            if !super::member::objects::gated(fsts)
                && m.phase != phases::STARTING
                && view_of(&m.to).is_none_or(|v| network::names_ordinal(fsts, &v, *k))
            {
                held.insert(*k);
            }
        }
        if !stamping {
            for step in steps {
                let cluster = step.cluster();
                let view = view_of(cluster).expect("steps name observed members");
                let Some(s) = &view.federation.sts else { continue };
                match step {
                    Step::Shrink { releases, .. } => {
                        for k in releases.iter() {
                            if let Some(to) = target_of(k).filter(|to| *to != cluster)
                                && !moves.contains_key(&k)
                            {
                                notes.push(Note::normal("MoveStarted", format!("ordinal {k}: {cluster} → {to}")));
                                moves.insert(
                                    k,
                                    MoveStatus {
                                        ordinal: k as i32,
                                        from: cluster.to_string(),
                                        to: to.to_string(),
                                        phase: phases::DRAINING.into(),
                                        since: now_str.clone(),
                                    },
                                );
                                persist_first = true;
                            }
                        }
                    }
                    Step::Grow { acquires, .. }
                        if acquires.iter().any(|k| newly_released.contains(&k) || held.contains(&k)) =>
                    {
                        continue;
                    }
                    Step::Grow { acquires, .. } => {
                        for k in acquires.iter() {
                            let Some(m) = moves.get_mut(&k) else { continue };
                            grows.push(k);
                            if m.phase == phases::PARKED {
                                if m.to == cluster {
                                    continue;
                                }
                                // Its target takes it after all: the move goes on.
                                m.to = cluster.to_string();
                            }
                            if m.phase != phases::STARTING
                                && let Some(why) = left_behind.get(&k)
                            {
                                notes.push(Note::warning("VolumesLeftBehind", why.clone()));
                            }
                            if m.phase != phases::STARTING {
                                m.phase = phases::STARTING.into();
                                m.since = now_str.clone();
                                persist_first = true;
                            }
                        }
                    }
                }
                writes.push(StsWrite {
                    cluster: cluster.to_string(),
                    object: statefulset(step.slice()),
                    expected_rv: Some(s.rv),
                    new_template: false,
                });
            }
        }
    }

    // Status.
    let mut slices: Vec<SliceStatus> = obs
        .iter()
        .filter_map(|(name, o)| match view_of(name).filter(|v| v.synced) {
            Some(view) => {
                view.federation.sts.as_ref()?;
                Some(SliceStatus {
                    cluster: name.clone(),
                    start: o.written.start as i32,
                    replicas: o.written.replicas as i32,
                    reserved_ordinals: o.written.reserved.iter().map(|k| k as i32).collect(),
                    // A fenced member is declared dead: its pods count for nothing (they show
                    // in the Degraded condition instead); an unreachable one's readiness is not
                    // known, only last seen.
                    ready_replicas: if o.fenced || !o.reachable {
                        0
                    } else {
                        (&o.written.ordinals() & &o.ready).len() as i32
                    },
                })
            }
            // Not reported yet: the slice it was last seen to hold stays in the status, which
            // is where the next reconcile (or the next leader) learns it from; none of its
            // pods counts as ready meanwhile.
            None => previous
                .slices
                .iter()
                .find(|s| &s.cluster == name)
                .map(|s| SliceStatus { ready_replicas: 0, ..s.clone() }),
        })
        .collect();
    let order = |c: &str| fsts.spec.placement.clusters.iter().position(|p| p.name == c).unwrap_or(usize::MAX);
    slices.sort_by(|a, b| order(&a.cluster).cmp(&order(&b.cluster)).then(a.cluster.cmp(&b.cluster)));
    let ready_total: i32 = slices.iter().map(|s| s.ready_replicas).sum();
    // Each unreachable placement member with why its latest call failed.
    let unreachable: Vec<String> = obs
        .iter()
        .filter(|(n, o)| !o.reachable && placement.contains(n.as_str()))
        .map(|(n, _)| match view_of(n).and_then(|v| v.failure.clone()) {
            Some((why, _)) => format!("{n} ({})", why.reason()),
            None => n.clone(),
        })
        .collect();
    let missing: Vec<&str> = placement
        .iter()
        .copied()
        .filter(|n| inp.members.get(*n).is_none_or(|m| m.view.as_ref().is_none_or(|v| !v.synced)))
        .collect();
    // An unfenced member that cannot be reached and holds something may run anything of it,
    // with any template: the federation is not done while one does (issue 19, item 2).
    let holding_unreachable: Vec<&str> = obs
        .iter()
        .filter(|(_, o)| !o.reachable && !o.fenced && (o.written.replicas > 0 || !o.pods.is_empty()))
        .map(|(n, _)| n.as_str())
        .collect();
    let done = plan.as_ref().is_some_and(|p| p.done)
        && writes.is_empty()
        && pod_deletes.is_empty()
        && holding_unreachable.is_empty();
    match &plan_error {
        Some(e) => verdicts.push(Verdict::yes(types::BLOCKED, "NoPlacement", e.clone())),
        None => verdicts.push(Verdict::no(types::BLOCKED, "Planned", "")),
    }
    if done {
        verdicts.push(Verdict::yes(types::READY, "AllReady", format!("{ready_total}/{} ready", desired.replicas)));
        verdicts.push(Verdict::no(types::PROGRESSING, "Complete", "every slice is as targeted"));
    } else {
        let why = if !refused.is_empty() {
            ("HandoverRefused", format!("storage cannot follow: {}", refused.join("; ")))
        } else if !storage_waits.is_empty() {
            ("HandoverWaiting", format!("storage cannot follow yet: {}", storage_waits.join("; ")))
        } else if !missing.is_empty() {
            ("WaitingForMembers", format!("no report yet from {}", missing.join(", ")))
        } else if !unstamped.is_empty() {
            (
                "MembersUnconfirmed",
                format!(
                    "{} cannot be reached and does not carry term {} yet: a write of an earlier leader may still \
                     land there, so no ordinal starts anywhere until it answers or is fenced",
                    unstamped.join(", "),
                    inp.term
                ),
            )
        } else if stamping {
            ("Writing", "writing member StatefulSets in this term".to_string())
        } else if let Some((reason, why)) = gated.as_ref().and_then(|g| g.held.first()) {
            (*reason, why.clone())
        } else if down_otherwise > 0 && plan.as_ref().is_some_and(|p| !p.done) {
            let down: Vec<String> =
                (&unavailable - &recorded_moving).iter().take(5).map(|k| format!("{}-{k}", fsts.name_any())).collect();
            (
                "DisruptionBudget",
                format!(
                    "{down_otherwise} pod(s) unavailable ({}) count against {budget_source} {budget}: at most {} \
                     move(s) at once",
                    down.join(", "),
                    planned.max_concurrent_moves.min(budget.saturating_sub(down_otherwise))
                ),
            )
        } else if let Some(p) = plan.as_ref().filter(|p| p.stalled) {
            ("MoveLimit", plan::stall_message(&desired, &p.in_flight))
        } else if !moves.is_empty() {
            ("Migrating", format!("{} ordinal(s) moving", moves.len()))
        } else if !holding_unreachable.is_empty() {
            (
                "MembersUnreachable",
                format!(
                    "{} cannot be reached: what it runs there is unknown and cannot be written",
                    holding_unreachable.join(", ")
                ),
            )
        } else {
            ("Reconciling", format!("{ready_total}/{} ready", desired.replicas))
        };
        verdicts.push(Verdict::no(types::READY, why.0, why.1.clone()));
        verdicts.push(Verdict::yes(types::PROGRESSING, why.0, why.1));
    }
    let excluded: Vec<String> = plan
        .as_ref()
        .map(|p| {
            p.excluded
                .iter()
                .map(|(c, e)| {
                    let why = view_of(c).and_then(|v| incompatibility(&v, backend));
                    let left: Ordinals =
                        view_of(c).map(|v| v.federation.pods.keys().copied().collect()).unwrap_or_default();
                    match (e, why) {
                        (Exclusion::Incompatible, Some(why)) => format!("{c} (Incompatible: {why})"),
                        (Exclusion::Fenced, _) if !left.is_empty() => format!(
                            "{c} (Fenced; it still reports pods of ordinals {}, counted nowhere)",
                            plan::ordinal_runs(&left).join(",")
                        ),
                        _ => format!("{c} ({e:?})"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let excluded: Vec<String> = excluded.into_iter().chain(duplicates).collect();
    let left: Vec<&str> = left_behind.values().map(String::as_str).collect();
    verdicts.push(match (excluded.is_empty(), left.is_empty()) {
        (true, true) => Verdict::no(types::DEGRADED, "AllMembersEligible", ""),
        (true, false) => Verdict::yes(types::DEGRADED, "VolumesLeftBehind", left.join("; ")),
        (false, true) => {
            Verdict::yes(types::DEGRADED, "MembersExcluded", format!("no slice for {}", excluded.join(", ")))
        }
        (false, false) => Verdict::yes(
            types::DEGRADED,
            "MembersExcluded",
            format!("no slice for {}; {}", excluded.join(", "), left.join("; ")),
        ),
    });
    verdicts.push(if unreachable.is_empty() {
        Verdict::no(types::CLUSTER_UNREACHABLE, "AllReachable", "")
    } else {
        Verdict::yes(types::CLUSTER_UNREACHABLE, "Unreachable", format!("not answering: {}", unreachable.join(", ")))
    });
    verdicts.push(updating(&roll, on_delete(fsts)));
    verdicts.push(identity_conflict(&fsts.name_any(), &conflicts));
    verdicts.push(match &replicas_held {
        Some((reason, message)) => Verdict::yes(types::REPLICAS_HELD, reason, message.clone()),
        None => Verdict::no(types::REPLICAS_HELD, "WithinBounds", ""),
    });
    if let Some((reason, message)) = &replicas_held
        && !previous
            .conditions
            .iter()
            .any(|c| c.type_ == types::REPLICAS_HELD && c.status == "True" && c.reason == *reason)
    {
        notes.push(Note::warning(reason, message.clone()));
    }
    rollout_notes(&roll, &previous, fsts, &mut notes);
    // Any change of the recorded moves is stored before the writes of the round; so is the
    // rollout's cursor, before any member is written with it.
    let moves_list: Vec<MoveStatus> = moves.values().cloned().collect();
    persist_first |= moves_list != previous.moves;
    persist_first |= previous.accepted_replicas != Some(desired.replicas as i32);
    persist_first |= previous.update_partition != Some(cursor as i32)
        || previous.update_revision.as_deref() != Some(roll.update_revision.as_str());
    let status = FederatedStatefulSetStatus {
        observed_generation: fsts.metadata.generation,
        conditions: conditions(&previous.conditions, &verdicts, fsts.metadata.generation, &wall),
        ready: Some(format!("{ready_total}/{}", desired.replicas)),
        ready_replicas: Some(ready_total),
        clusters: Some(slices.iter().filter(|s| s.replicas > 0).count() as i32),
        moving: Some(moves.len() as i32),
        replicas: Some(existing_pods(&obs)),
        label_selector: Some(crate::api::selector_text(&fsts.spec.template.selector)),
        slices,
        moves: moves_list,
        current_revision: Some(roll.current_revision.clone()),
        update_revision: Some(roll.update_revision.clone()),
        current_replicas: Some(roll.current as i32),
        updated_replicas: Some(roll.updated as i32),
        available_replicas: Some(roll.available as i32),
        update_partition: Some(cursor as i32),
        accepted_replicas: Some(desired.replicas as i32),
        // Without a plan (no placement) what was stored stays.
        balanced_placement: match &plan {
            Some(p) => p.balanced_placement.clone(),
            None => previous.balanced_placement.clone(),
        },
    };
    let releases = releases(inp, &obs, desired.start..desired.start + desired.replicas);
    let views = inp.members.iter().filter_map(|(n, m)| Some((n.clone(), m.view.clone()?))).collect();
    let order: Vec<String> = fsts.spec.placement.clusters.iter().map(|c| c.name.clone()).collect();
    let range = desired.start..desired.start + desired.replicas;
    let (budgets, _) = disruption::budgets(fsts, &views, &obs, range, &ok, &order, inp.term);
    let writable: Vec<String> = obs
        .iter()
        .filter(|(n, o)| placement.contains(n.as_str()) && o.reachable && !o.fenced && o.compatible)
        .map(|(n, _)| n.clone())
        .collect();
    let slices = network::slice_writes(fsts, &views, &obs, &writable, inp.term);
    Decision {
        status,
        persist_first,
        writes,
        supporting,
        writable,
        fence: automatic_fences(fsts, inp, &obs, grace),
        handovers,
        pod_deletes,
        blocked: false,
        done,
        finished_moves: finished,
        conflicts,
        notes,
        released: newly_released.into_iter().collect(),
        grows,
        releases,
        wake_after,
        budgets,
        slices,
        starting,
    }
}

/// See [`Decision::starting`].
fn starting_members(inp: &Inputs<'_>, placement: &BTreeSet<&str>) -> Vec<String> {
    placement
        .iter()
        .filter(|n| {
            inp.members.get(**n).is_some_and(|m| {
                m.exists
                    && m.unusable.is_none()
                    && m.duplicate.is_none()
                    && !m.fenced
                    && m.view.as_ref().is_none_or(|v| !v.synced && v.failure.is_none())
            })
        })
        .map(|n| n.to_string())
        .collect()
}

/// The rollout's view of every ordinal of `range`: the pod in the member whose written slice
/// holds it, when that member answers and is not fenced (otherwise the ordinal has no pod the
/// rollout can count on). A pod runs the spec's template when its revision label is its
/// member's `updateRevision` for the current template. Also: when the next pod becomes
/// available by time alone (`minReadySeconds`).
fn pod_states(
    inp: &Inputs<'_>,
    obs: &Observed,
    hash: &str,
    range: std::ops::Range<Ordinal>,
) -> (BTreeMap<Ordinal, PodState>, Option<Duration>) {
    let min_ready = inp.fsts.spec.template.min_ready_seconds.unwrap_or(0).max(0) as u64;
    let mut out = BTreeMap::new();
    let mut wake: Option<Duration> = None;
    for (name, o) in obs.iter().filter(|(_, o)| o.reachable && !o.fenced) {
        let Some(view) = inp.members.get(name).and_then(|m| m.view.as_ref()) else { continue };
        let f = &view.federation;
        let Some(sts) = f.sts.as_ref().filter(|s| !s.deleting) else { continue };
        let current_template = sts.template_hash.as_deref() == Some(hash);
        for (k, p) in f.pods.range(range.clone()).filter(|(k, _)| o.written.contains(**k)) {
            let ready = p.ready && !p.deleting;
            // Condition times have whole seconds: the transition may have come up to a second
            // after the time written, so the wait counts from the second after it (never early).
            let available_at = p.ready_since.map(|t| t + jiff::SignedDuration::from_secs(min_ready as i64 + 1));
            let available = ready && (min_ready == 0 || available_at.is_some_and(|t| t <= inp.wall));
            if ready
                && !available
                && let Some(at) = available_at
            {
                let left =
                    Duration::try_from(at.duration_since(inp.wall)).unwrap_or_default() + Duration::from_millis(50);
                wake = Some(wake.map_or(left, |w| w.min(left)));
            }
            // An ordinal two members hold (a drift being undone) counts by its better pod.
            if out.get(k).is_some_and(|p: &PodState| p.available || !ready) {
                continue;
            }
            out.insert(
                *k,
                PodState {
                    cluster: name.clone(),
                    updated: current_template && p.revision.is_some() && p.revision == sts.update_revision,
                    available,
                    ready,
                    deleting: p.deleting,
                    trouble: p.trouble.clone(),
                },
            );
        }
    }
    (out, wake)
}

/// The `Updating` condition: True while pods from the partition up run an older template.
fn updating(roll: &Rollout, on_delete: bool) -> Verdict {
    if roll.complete {
        return Verdict::no(types::UPDATING, "Updated", format!("every pod runs revision {}", roll.update_revision));
    }
    if on_delete {
        return Verdict::yes(
            types::UPDATING,
            "OnDelete",
            format!(
                "{} pod(s) run an older template and are replaced when deleted (updateStrategy OnDelete)",
                roll.current
            ),
        );
    }
    let (reason, why) = match &roll.waiting {
        Some(w) if w.stuck => ("RolloutStuck", w.message.clone()),
        Some(w) => ("RollingUpdate", w.message.clone()),
        None => ("RollingUpdate", "replacing pods".to_string()),
    };
    Verdict::yes(
        types::UPDATING,
        reason,
        format!("{} pod(s) updated to revision {}; {why}", roll.updated, roll.update_revision),
    )
}

/// Events of the rollout: each pod the cursor lets through, and a stuck rollout once per
/// stuck pod state.
fn rollout_notes(
    roll: &Rollout,
    previous: &FederatedStatefulSetStatus,
    fsts: &FederatedStatefulSet,
    notes: &mut Vec<Note>,
) {
    for k in &roll.lowered {
        notes.push(Note::normal(
            "RollingUpdate",
            format!("{}-{k} may now be replaced with revision {}", fsts.name_any(), roll.update_revision),
        ));
    }
    if let Some(w) = roll.waiting.as_ref().filter(|w| w.stuck) {
        // Once per stuck pod: its state's wording changes (ErrImagePull, then ImagePullBackOff).
        let pod = format!("{}-{} in ", fsts.name_any(), w.ordinal);
        let already = previous
            .conditions
            .iter()
            .any(|c| c.type_ == types::UPDATING && c.reason == "RolloutStuck" && c.message.contains(&pod));
        if !already {
            notes.push(Note::warning("RolloutStuck", w.message.clone()));
        }
    }
}

/// The gated pods that may run now. A pod of ordinal k in member m is released when:
/// m is reachable, unfenced, and its StatefulSet is the one this process wrote in this term
/// (stamped with it, spec not changed by anyone since) and selects k, an ordinal of the
/// federation's range (a drift stamped as spanset's own is shrunk by the next plan); the pod
/// carries the identity gate and is not being deleted; and every other member that counts
/// (unfenced, or fenced but answering again: [`plan::steps::counts`]) is confirmed not to hold
/// k in its spec nor to have a pod for k — the at-most-one rule's condition for a grow
/// (`Holders::free_for`): each is observed since its last write (an unreachable member counts
/// with what it was last seen to hold or run), and a member that has not reported blocks
/// every release. So a pod that a member's own StatefulSet controller made on its own (a hand
/// scale, a member back from an outage with its stale slice, a stale leader's late write)
/// waits, unscheduled, until spanset has undone it.
fn releases(inp: &Inputs<'_>, obs: &Observed, range: std::ops::Range<Ordinal>) -> Vec<PodRelease> {
    let mut out = Vec::new();
    for (name, o) in obs {
        if o.fenced || !o.reachable {
            continue;
        }
        let Some(view) = inp.members.get(name).and_then(|m| m.view.as_ref()).filter(|v| v.synced) else {
            continue;
        };
        let f = &view.federation;
        let Some(sts) = f.sts.as_ref().filter(|s| !s.deleting && s.term == Some(inp.term)) else { continue };
        if !f.spec_is_ours() {
            continue;
        }
        for (k, pod) in &f.pods {
            if !pod.gated() || pod.deleting || !sts.slice.contains(*k) || !range.contains(k) {
                continue;
            }
            // Its name must not answer twice: spanset's records here drop k's old address first.
            if network::names_ordinal(inp.fsts, view, *k) {
                continue;
            }
            let elsewhere = obs
                .iter()
                .filter(|(n, other)| *n != name && plan::steps::counts(other))
                .any(|(_, other)| !other.observed_since_write || other.written.contains(*k) || other.pods.contains(*k));
            if elsewhere {
                continue;
            }
            out.push(PodRelease {
                cluster: name.clone(),
                ordinal: *k,
                uid: pod.uid.clone(),
                rv: pod.rv,
                remaining: pod.gates.iter().filter(|g| *g != IDENTITY_GATE).cloned().collect(),
            });
        }
    }
    out
}

/// Why nothing may be written when a member holds this federation's StatefulSet in the API
/// that `spec.backend` does not name (the backend was changed, or someone created one): the
/// two objects would each run pods, and spanset does not convert one into the other.
fn backend_mismatch(inp: &Inputs<'_>, backend: Backend) -> Option<String> {
    let api = |b: Backend| match b {
        Backend::StatefulSet => "apps/v1 StatefulSet",
        Backend::AdvancedStatefulSet => "Advanced StatefulSet (apps.kruise.io)",
    };
    let holders: Vec<String> = inp
        .members
        .iter()
        .filter_map(|(name, m)| {
            let f = &m.view.as_ref()?.federation;
            let foreign = [&f.sts, &f.other_kind].into_iter().flatten().find(|s| s.kind != backend)?;
            Some(format!("{name} ({})", api(foreign.kind)))
        })
        .collect();
    (!holders.is_empty()).then(|| {
        format!(
            "spec.backend: {backend:?}, but this federation's StatefulSet is of another API in {}; spanset does not \
             convert between the two (each would run its own pods): set spec.backend back, or delete the federation \
             and create it again",
            holders.join(", ")
        )
    })
}

/// Members that this leader cannot reach and has not stamped with its term: an earlier
/// leader's write may still be in flight to them (sent before it stopped, delivered when the
/// member answers again), and nothing this leader writes can fence it off until its own stamp
/// lands there. What they were last seen to hold confirms nothing, so they count as not
/// observed since their last write, which holds every grow (issue 19, item 13). A member this
/// leader stamped is different: a late write of an earlier term, conditional on an older
/// resourceVersion, can only be refused there. Answers their names.
fn unstamped_unreachable(obs: &mut Observed, inp: &Inputs<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, o) in obs.iter_mut().filter(|(_, o)| !o.reachable && !o.fenced) {
        let term = inp.members.get(name).and_then(|m| m.view.as_ref()).and_then(|v| v.federation.sts.as_ref()?.term);
        if term != Some(inp.term) {
            o.observed_since_write = false;
            out.push(name.clone());
        }
    }
    out
}

/// Whether every member other than `to` that counts (unfenced, or fenced but answering again:
/// [`plan::steps::counts`]) is confirmed not to hold or run `k`: the planner's confirmation
/// rule ([`plan`]'s grows), under which a member that is unreachable now but was observed
/// since its last write confirms what that observation showed. A stricter rule here would let
/// the planner's grow overtake a move still recorded as `Draining`, past its storage step.
fn released(obs: &Observed, k: Ordinal, to: &str) -> bool {
    obs.iter()
        .filter(|(n, o)| n.as_str() != to && plan::steps::counts(o))
        .all(|(_, o)| !o.written.contains(k) && !o.pods.contains(k) && o.observed_since_write)
}

/// Pods of the federation that exist in reachable, unfenced members: what `status.replicas`
/// (the `/scale` subresource's current count) reports.
fn existing_pods(obs: &Observed) -> i32 {
    obs.values().filter(|o| o.reachable && !o.fenced).map(|o| o.pods.len()).sum::<u64>() as i32
}

/// Ordinals whose pods exist in two unfenced members at once; a pod still waiting for
/// spanset's release (identity gate) cannot run and does not count.
fn conflicts(inp: &Inputs<'_>, obs: &Observed) -> Vec<Conflict> {
    let mut runs: BTreeMap<Ordinal, Vec<String>> = BTreeMap::new();
    for (name, o) in obs.iter().filter(|(_, o)| !o.fenced) {
        let gated: Ordinals = inp
            .members
            .get(name)
            .and_then(|m| m.view.as_ref())
            .map(|v| v.federation.pods.iter().filter(|(_, p)| p.gated()).map(|(k, _)| *k).collect())
            .unwrap_or_default();
        for k in (&o.pods - &gated).iter() {
            runs.entry(k).or_default().push(name.clone());
        }
    }
    runs.into_iter().filter(|(_, m)| m.len() > 1).map(|(ordinal, members)| Conflict { ordinal, members }).collect()
}

/// The `IdentityConflict` condition: True, naming every ordinal seen running in two members and
/// where, while it lasts.
fn identity_conflict(name: &str, conflicts: &[Conflict]) -> Verdict {
    if conflicts.is_empty() {
        return Verdict::no(types::IDENTITY_CONFLICT, "NoConflict", "");
    }
    let each: Vec<String> =
        conflicts.iter().map(|c| format!("{name}-{} runs in {}", c.ordinal, c.members.join(" and "))).collect();
    Verdict::yes(types::IDENTITY_CONFLICT, "RunningTwice", each.join("; "))
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
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::{
        api::StorageMode,
        controller::member::cache::{FederationCache, PodPhase, PodRecord, StsRecord, StsState},
    };

    fn fsts(weights: &[(&str, i32)]) -> FederatedStatefulSet {
        let clusters: Vec<String> = weights.iter().map(|(c, _)| c.to_string()).collect();
        let mut f = crate::api::example(&clusters);
        for (p, (_, w)) in f.spec.placement.clusters.iter_mut().zip(weights) {
            p.weight = Some(*w);
        }
        f.metadata.uid = Some("uid-1".into());
        f.metadata.generation = Some(1);
        f.metadata.finalizers = Some(vec![crate::controller::labels::FINALIZER.into()]);
        f
    }

    /// A member that runs `[start, start+replicas)`, all Ready, written in `term`, confirmed.
    fn settled(f: &FederatedStatefulSet, start: u32, replicas: u32, term: u64) -> MemberInput {
        let sts = StsRecord {
            kind: crate::controller::member::objects::backend(f),
            uid: format!("sts-{start}"),
            rv: 10,
            generation: 2,
            observed_generation: 2,
            slice: Slice { start, replicas, ..Slice::empty() },
            has_ordinals: true,
            term: Some(term),
            template_hash: Some(template_hash(f)),
            federation_uid: Some("uid-1".into()),
            deleting: false,
            partition: 0,
            update_revision: Some("rev-1".into()),
        };
        let pods = (start..start + replicas)
            .map(|k| {
                let p = PodRecord {
                    uid: format!("p{k}"),
                    node: None,
                    phase: PodPhase::Running,
                    ready: true,
                    deleting: false,
                    rv: 5,
                    gates: vec![],
                    revision: Some("rev-1".into()),
                    ready_since: Some(jiff::Timestamp::UNIX_EPOCH),
                    trouble: None,
                    ip: None,
                };
                (k, p)
            })
            .collect();
        let federation = FederationCache {
            confirmed_for: Some(StsState::Present { uid: sts.uid.clone(), generation: 2 }),
            written_generation: Some((sts.uid.clone(), 2)),
            sts: Some(sts),
            pods,
            floor_rv: 11,
            gone: Default::default(),
            uncertain_write: None,
            other_kind: None,
            budget: None,
            published: Default::default(),
        };
        let view = MemberView {
            synced: true,
            slices_known: true,
            federation,
            last_contact: Some(Instant::now()),
            keeps_ordinals: Some(true),
            ..Default::default()
        };
        MemberInput { exists: true, unusable: None, fenced: false, view: Some(Arc::new(view)), duplicate: None }
    }

    fn decide_now(f: &FederatedStatefulSet, members: &BTreeMap<String, MemberInput>, term: u64) -> Decision {
        decide(&Inputs {
            fsts: f,
            members,
            term,
            template_refusal: None,
            bounds: Default::default(),
            access_refusal: None,
            handover_refusals: BTreeMap::new(),
            now: Instant::now(),
            leading_since: Instant::now() - Duration::from_secs(3600),
            wall: jiff::Timestamp::from_second(1_800_000_000).unwrap(),
        })
    }

    fn written_slices(d: &Decision) -> Vec<(String, Option<i32>, Option<i32>)> {
        d.writes
            .iter()
            .map(|w| {
                let spec = &w.object.data["spec"];
                let int = |v: &serde_json::Value| v.as_i64().map(|n| n as i32);
                (w.cluster.clone(), int(&spec["ordinals"]["start"]), int(&spec["replicas"]))
            })
            .collect()
    }

    /// A stored status in which `cluster` was last seen holding `[start, start+replicas)`, Ready.
    fn status_holding(cluster: &str, start: i32, replicas: i32) -> FederatedStatefulSetStatus {
        FederatedStatefulSetStatus {
            slices: vec![SliceStatus {
                cluster: cluster.into(),
                start,
                replicas,
                reserved_ordinals: vec![],
                ready_replicas: replicas,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn nothing_new_is_created_anywhere_while_a_member_is_starting() {
        let f = fsts(&[("east", 1), ("west", 1)]);
        let fresh = |synced: bool| MemberInput {
            exists: true,
            view: Some(Arc::new(MemberView {
                synced,
                slices_known: true,
                last_contact: Some(Instant::now()),
                keeps_ordinals: Some(true),
                ..Default::default()
            })),
            ..Default::default()
        };
        let members = BTreeMap::from([("east".into(), fresh(true)), ("west".into(), fresh(false))]);
        let d = decide_now(&f, &members, 1);
        assert!(d.writes.is_empty() && d.supporting.is_empty(), "{:?}", written_slices(&d));
        assert_eq!(d.starting, vec!["west".to_string()]);
        let members = BTreeMap::from([
            ("east".into(), fresh(true)),
            ("west".into(), MemberInput { exists: true, ..Default::default() }),
        ]);
        assert_eq!(decide_now(&f, &members, 1).starting, vec!["west".to_string()], "no report at all");
        // A member whose calls fail is not starting: it gets nothing, the others go on.
        let mut failing = MemberView { synced: false, ..Default::default() };
        failing.failure = Some((crate::controller::member::health::Failure::Refused, "connection refused".into()));
        let members = BTreeMap::from([
            ("east".into(), fresh(true)),
            ("west".into(), MemberInput { exists: true, view: Some(Arc::new(failing)), ..Default::default() }),
        ]);
        let d = decide_now(&f, &members, 1);
        assert!(d.starting.is_empty());
        assert_eq!(written_slices(&d).iter().map(|(c, ..)| c.as_str()).collect::<Vec<_>>(), ["east"]);
        let members = BTreeMap::from([("east".into(), fresh(true)), ("west".into(), fresh(true))]);
        assert_eq!(decide_now(&f, &members, 1).supporting, vec!["east".to_string(), "west".to_string()]);
    }

    #[test]
    fn nothing_grows_over_a_member_that_has_not_reported_yet() {
        // A new leader, after stamping east: west (which runs 3-5) has not reported yet, so
        // what it runs is unknown and east must not take its ordinals. This grew east to 0-6
        // before (an at-most-one violation seen once in CI after a controller restart).
        let mut f = fsts(&[("east", 1), ("west", 0)]);
        f.status = Some(status_holding("west", 3, 3));
        let mut west = settled(&f, 3, 3, 7);
        west.view = None;
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), west)]);
        let d = decide_now(&f, &members, 8);
        assert!(written_slices(&d).is_empty(), "nothing is written: {:?}", written_slices(&d));
        assert!(d.status.conditions.iter().any(|c| c.reason == "WaitingForMembers" && c.message.contains("west")));
        // The status keeps what west was last seen to hold, so that the next reconcile (west
        // still silent) knows it too.
        let kept = d.status.slices.iter().find(|s| s.cluster == "west").map(|s| (s.start, s.replicas));
        assert_eq!(kept, Some((3, 3)), "{:?}", d.status.slices);
        let mut again = f.clone();
        again.status = Some(d.status.clone());
        let d2 = decide_now(&again, &members, 8);
        assert!(written_slices(&d2).is_empty(), "still nothing: {:?}", written_slices(&d2));
        // Once west reports, the move starts with west's release, not east's grow.
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), settled(&f, 3, 3, 8))]);
        let d = decide_now(&f, &members, 8);
        assert!(written_slices(&d).iter().all(|(c, _, r)| c != "east" || *r == Some(3)), "{:?}", written_slices(&d));
    }

    #[test]
    fn a_fenced_member_that_answers_again_is_shrunk_then_its_remaining_pods_are_deleted() {
        // West was fenced and its ordinals 3-5 re-homed to east; west answers again. Its own
        // StatefulSet controller (OrderedReady) would delete one pod at a time and wait on one
        // stuck Terminating on a dead node: spanset deletes the others itself, once the shrink
        // is stored, each by uid.
        let f = fsts(&[("east", 1), ("west", 0)]);
        let mut west = settled(&f, 3, 3, 8);
        west.fenced = true;
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 6, 8)), ("west".into(), west)]);
        let d = decide_now(&f, &members, 8);
        assert_eq!(written_slices(&d), vec![("west".to_string(), Some(0), Some(0))], "the shrink first");
        assert!(d.pod_deletes.is_empty(), "no pod goes before the shrink is stored: {:?}", d.pod_deletes);
        let shrunk = reporting(settled(&f, 3, 3, 8), |v| {
            let sts = v.federation.sts.as_mut().unwrap();
            sts.slice = Slice::empty();
            v.federation.pods.get_mut(&5).unwrap().deleting = true;
        });
        let mut west = shrunk;
        west.fenced = true;
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 6, 8)), ("west".into(), west)]);
        let d = decide_now(&f, &members, 8);
        let deletes: Vec<(&str, &str, &str)> =
            d.pod_deletes.iter().map(|p| (p.cluster.as_str(), p.name.as_str(), p.uid.as_str())).collect();
        assert_eq!(deletes, vec![("west", "redis-3", "p3"), ("west", "redis-4", "p4")], "not the one already deleting");
        assert!(!d.done, "not done while pods are left there");
    }

    #[test]
    fn a_fenced_member_counts_for_no_readiness_and_its_pods_are_named_in_degraded() {
        // East runs everything after the re-homing; fenced west still reports Ready pods 3-5
        // (it answers again, or its last report was from before the fence).
        let f = fsts(&[("east", 1), ("west", 0)]);
        let mut west = settled(&f, 3, 3, 8);
        west.fenced = true;
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 6, 8)), ("west".into(), west)]);
        let d = decide_now(&f, &members, 8);
        assert_eq!(d.status.ready_replicas, Some(6), "6/6, not 9/6: {:?}", d.status.slices);
        assert_eq!(d.status.ready.as_deref(), Some("6/6"));
        let west = d.status.slices.iter().find(|s| s.cluster == "west").expect("west listed");
        assert_eq!(west.ready_replicas, 0);
        let degraded = d.status.conditions.iter().find(|c| c.type_ == "Degraded").expect("Degraded");
        assert_eq!(degraded.status, "True");
        assert!(degraded.message.contains("west (Fenced; it still reports pods of ordinals 3-5"), "{degraded:?}");
    }

    #[test]
    fn a_member_silent_since_its_watcher_started_is_fenced_automatically_but_not_one_that_answers() {
        let mut f = fsts(&[("east", 1), ("west", 1)]);
        f.spec.failover.policy = Some(FailoverPolicy::Automatic);
        f.spec.failover.fence_after_seconds = Some(10);
        f.status = Some(status_holding("west", 3, 3));
        let long_ago = Instant::now() - Duration::from_secs(60);
        // West never answered this process: its watcher reports, unsynced, since a minute.
        let silent = reporting(settled(&f, 3, 3, 7), |v| {
            *v = MemberView { synced: false, watching_since: Some(long_ago), ..Default::default() };
        });
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), silent)]);
        let d = decide_now(&f, &members, 8);
        assert_eq!(d.fence.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), ["west"]);
        assert!(
            written_slices(&d).iter().all(|(c, _, r)| c != "east" || *r == Some(3)),
            "nothing grows before the fence"
        );
        let kept =
            d.status.slices.iter().find(|s| s.cluster == "west").map(|s| (s.start, s.replicas, s.ready_replicas));
        assert_eq!(kept, Some((3, 3, 0)), "what west holds stays in the status, none of it ready");
        // West answers probes but has not listed yet (a slow first list): not silent, not fenced.
        let answering = reporting(settled(&f, 3, 3, 7), |v| {
            *v = MemberView {
                synced: false,
                watching_since: Some(long_ago),
                last_contact: Some(Instant::now()),
                ..Default::default()
            };
        });
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), answering)]);
        assert!(decide_now(&f, &members, 8).fence.is_empty());
    }

    #[test]
    fn a_new_leader_counts_silence_for_an_automatic_fence_only_from_its_own_leadership() {
        // Issue 19 item 12: this process's watcher has not reached west for a minute while it
        // was a standby (the old leader did); it has led for two seconds only.
        let mut f = fsts(&[("east", 1), ("west", 1)]);
        f.spec.failover.policy = Some(FailoverPolicy::Automatic);
        f.spec.failover.fence_after_seconds = Some(10);
        f.status = Some(status_holding("west", 3, 3));
        let now = Instant::now();
        let long_ago = now - Duration::from_secs(60);
        let silent = reporting(settled(&f, 3, 3, 7), |v| {
            *v = MemberView { synced: false, watching_since: Some(long_ago), ..Default::default() };
        });
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), silent)]);
        let at = |leading_since: Instant| {
            decide(&Inputs {
                fsts: &f,
                members: &members,
                term: 8,
                template_refusal: None,
                bounds: Default::default(),
                access_refusal: None,
                handover_refusals: BTreeMap::new(),
                now,
                leading_since,
                wall: jiff::Timestamp::from_second(1_800_000_000).unwrap(),
            })
        };
        let d = at(now - Duration::from_secs(2));
        assert!(d.fence.is_empty(), "a standby's count of silence fences nothing: {:?}", d.fence);
        // Past unreachableAfterSeconds (15) + fenceAfterSeconds (10) of its own leadership, it fences.
        let d = at(now - Duration::from_secs(26));
        assert_eq!(d.fence.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), ["west"]);
    }

    #[test]
    fn a_lost_member_removed_from_the_placement_is_still_fenced_automatically() {
        // Issue 19 item 16: central holds 4-5 but is no longer in the placement; it was lost,
        // and after a restart it has never answered. Unfenced, it blocks every grow.
        let mut f = fsts(&[("east", 1), ("west", 1)]);
        f.spec.failover.policy = Some(FailoverPolicy::Automatic);
        f.spec.failover.fence_after_seconds = Some(10);
        f.status = Some(status_holding("central", 4, 2));
        let long_ago = Instant::now() - Duration::from_secs(60);
        let silent = reporting(settled(&f, 4, 2, 7), |v| {
            *v = MemberView { synced: false, watching_since: Some(long_ago), ..Default::default() };
        });
        let members = BTreeMap::from([
            ("east".into(), settled(&f, 0, 2, 8)),
            ("west".into(), settled(&f, 2, 2, 8)),
            ("central".into(), silent),
        ]);
        let d = decide_now(&f, &members, 8);
        assert_eq!(d.fence.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), ["central"]);
        assert!(
            written_slices(&d).iter().all(|(_, s, r)| s.unwrap_or(0) + r.unwrap_or(0) <= 4),
            "nothing grows into 4-5 before the fence: {:?}",
            written_slices(&d)
        );
        // A silent member that holds nothing of this federation is not fenced by it.
        let mut g = f.clone();
        g.status = Some(status_holding("east", 0, 2));
        let idle = reporting(settled(&g, 0, 0, 7), |v| {
            *v = MemberView { synced: false, watching_since: Some(long_ago), ..Default::default() };
        });
        let members = BTreeMap::from([
            ("east".into(), settled(&g, 0, 3, 8)),
            ("west".into(), settled(&g, 3, 3, 8)),
            ("central".into(), idle),
        ]);
        assert!(decide_now(&g, &members, 8).fence.is_empty());
    }

    #[test]
    fn pods_of_a_fenced_member_that_answers_again_block_their_grow_elsewhere() {
        // Issue 19 item 14: west was fenced while lost, answers again and has been shrunk, but
        // its pods 3-5 still exist (still running, or terminating): east waits for them.
        let f = fsts(&[("east", 1), ("west", 1)]);
        let back = |pods: bool| {
            let mut m = reporting(settled(&f, 3, 3, 8), |v| {
                if let Some(sts) = v.federation.sts.as_mut() {
                    sts.slice = Slice { start: 3, replicas: 0, ..Slice::empty() };
                }
                if !pods {
                    v.federation.pods.clear();
                }
            });
            m.fenced = true;
            m
        };
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), back(true))]);
        let d = decide_now(&f, &members, 8);
        assert!(
            written_slices(&d).iter().all(|(c, _, r)| c != "east" || r.unwrap_or(0) <= 3),
            "east takes none of west's 3-5 while their pods exist there: {:?}",
            written_slices(&d)
        );
        // Once west's pods are gone, east takes the whole range.
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), back(false))]);
        let d = decide_now(&f, &members, 8);
        assert_eq!(written_slices(&d), vec![("east".to_string(), Some(0), Some(6))]);
        // A fenced member that does not answer counts for nothing: the fence stands for it.
        let mut lost = back(true);
        lost.view = Some(Arc::new(MemberView {
            last_contact: Some(Instant::now() - Duration::from_secs(60)),
            ..(**lost.view.as_ref().unwrap()).clone()
        }));
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), lost)]);
        let d = decide_now(&f, &members, 8);
        assert_eq!(written_slices(&d), vec![("east".to_string(), Some(0), Some(6))]);
    }

    #[test]
    fn a_settled_federation_writes_nothing_and_its_status_is_stable() {
        let mut f = fsts(&[("east", 1), ("west", 1)]);
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
        let first = decide_now(&f, &members, 7);
        assert!(first.writes.is_empty() && first.done && !first.blocked);
        assert_eq!(first.status.ready.as_deref(), Some("6/6"));
        f.status = Some(first.status.clone());
        let second = decide_now(&f, &members, 7);
        assert!(second.writes.is_empty());
        assert_eq!(second.status, first.status, "a no-op reconcile leaves nothing to store");
    }

    /// `m` with its report changed by `edit`.
    fn reporting(mut m: MemberInput, edit: impl FnOnce(&mut MemberView)) -> MemberInput {
        let mut view = (**m.view.as_ref().expect("a view")).clone();
        edit(&mut view);
        m.view = Some(Arc::new(view));
        m
    }

    #[test]
    fn an_ordinal_running_in_two_members_is_named_with_both_in_a_condition() {
        let f = fsts(&[("east", 1), ("west", 1)]);
        // West runs redis-1 too (ungated): someone's own pod, or a member's stale slice.
        let west = reporting(settled(&f, 3, 3, 7), |v| {
            let mut p = v.federation.pods[&3].clone();
            p.uid = "stray-1".into();
            v.federation.pods.insert(1, p);
        });
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), west)]);
        let d = decide_now(&f, &members, 7);
        assert_eq!(d.conflicts, [Conflict { ordinal: 1, members: vec!["east".into(), "west".into()] }]);
        let c = d.status.conditions.iter().find(|c| c.type_ == types::IDENTITY_CONFLICT).expect("the condition");
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "RunningTwice"));
        assert_eq!(c.message, "redis-1 runs in east and west");
        // Settled members: the condition is False.
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
        let d = decide_now(&f, &members, 7);
        let c = d.status.conditions.iter().find(|c| c.type_ == types::IDENTITY_CONFLICT).expect("the condition");
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "NoConflict"));
    }

    #[test]
    fn a_duplicate_member_gets_no_slice_is_not_observed_and_is_named_in_degraded() {
        let f = fsts(&[("east", 1), ("east-2", 1), ("west", 1)]);
        let why = r#"reaches the same cluster as MemberCluster "east" (clusterID u1)"#;
        // east-2 reaches east's cluster: what it would report is east's StatefulSet and pods.
        let members = BTreeMap::from([
            ("east".into(), settled(&f, 0, 3, 7)),
            ("east-2".into(), MemberInput { duplicate: Some(why.into()), ..settled(&f, 0, 3, 7) }),
            ("west".into(), settled(&f, 3, 3, 7)),
        ]);
        let d = decide_now(&f, &members, 7);
        assert!(!d.blocked);
        assert!(d.writes.iter().all(|w| w.cluster != "east-2"), "{:?}", written_slices(&d));
        assert!(!d.writable.contains(&"east-2".to_string()) && !d.supporting.contains(&"east-2".to_string()));
        assert!(d.conflicts.is_empty(), "its pods are east's, not a second copy: {:?}", d.conflicts);
        assert!(d.status.slices.iter().all(|s| s.cluster != "east-2"));
        assert!(d.done, "settled on east and west");
        let degraded = d.status.conditions.iter().find(|c| c.type_ == types::DEGRADED).expect("Degraded");
        assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("True", "MembersExcluded"));
        assert!(degraded.message.contains(&format!("east-2 (DuplicateCluster: {why})")), "{}", degraded.message);
        // Placed on duplicates only: blocked, naming them.
        let only = fsts(&[("east-2", 1)]);
        let d = decide_now(&only, &members, 7);
        assert!(d.blocked && d.writes.is_empty());
        let blocked = d.status.conditions.iter().find(|c| c.type_ == types::BLOCKED).expect("Blocked");
        assert_eq!(blocked.reason, "DuplicateCluster");
        assert!(blocked.message.contains("east-2 (DuplicateCluster"), "{}", blocked.message);
    }

    #[test]
    fn an_advanced_federation_gives_no_slice_to_a_member_without_openkruise_and_says_so() {
        let mut f = fsts(&[("east", 1), ("west", 1)]);
        f.spec.backend = crate::api::Backend::AdvancedStatefulSet;
        let east = reporting(settled(&f, 0, 2, 7), |v| v.serves_advanced = Some(true));
        let west = reporting(settled(&f, 0, 0, 7), |v| {
            v.serves_advanced = Some(false);
            v.federation = FederationCache::default();
        });
        let members = BTreeMap::from([("east".into(), east), ("west".into(), west)]);
        let d = decide_now(&f, &members, 7);
        assert!(d.writes.iter().all(|w| w.cluster == "east"), "nothing is written in west: {:?}", written_slices(&d));
        assert!(!d.writable.contains(&"west".to_string()));
        let degraded = d.status.conditions.iter().find(|c| c.type_ == types::DEGRADED).expect("Degraded");
        assert_eq!(degraded.status, "True");
        assert!(
            degraded.message.contains("west (Incompatible: spec.backend is AdvancedStatefulSet and the member does not serve statefulsets.apps.kruise.io/v1beta1"),
            "{}",
            degraded.message
        );
        // The same member runs apps/v1 federations.
        let mut plain = fsts(&[("east", 1), ("west", 1)]);
        plain.spec.replicas = 2;
        let members = BTreeMap::from([
            ("east".into(), settled(&plain, 0, 1, 7)),
            ("west".into(), reporting(settled(&plain, 1, 1, 7), |v| v.serves_advanced = Some(false))),
        ]);
        let d = decide_now(&plain, &members, 7);
        assert!(d.writable.contains(&"west".to_string()));
        assert!(d.done, "an apps/v1 federation is settled there");
    }

    #[test]
    fn a_statefulset_of_the_other_api_blocks_every_write() {
        let plain = fsts(&[("east", 1), ("west", 1)]);
        let members =
            BTreeMap::from([("east".into(), settled(&plain, 0, 1, 7)), ("west".into(), settled(&plain, 1, 1, 7))]);
        let mut f = plain.clone();
        f.spec.backend = crate::api::Backend::AdvancedStatefulSet;
        f.spec.replicas = 4;
        let d = decide_now(&f, &members, 7);
        assert!(d.blocked && d.writes.is_empty());
        let blocked = d.status.conditions.iter().find(|c| c.type_ == types::BLOCKED).expect("Blocked");
        assert_eq!(blocked.reason, "BackendMismatch");
        assert!(blocked.message.starts_with("spec.backend: AdvancedStatefulSet, but"), "{}", blocked.message);
        assert!(
            blocked.message.contains("east (apps/v1 StatefulSet), west (apps/v1 StatefulSet)"),
            "{}",
            blocked.message
        );
    }

    #[test]
    fn a_new_term_stamps_every_member_with_its_stored_slice_before_any_step() {
        let f = fsts(&[("east", 1), ("west", 0)]);
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
        let d = decide_now(&f, &members, 8);
        assert_eq!(
            written_slices(&d),
            vec![("east".to_string(), Some(0), Some(3)), ("west".to_string(), Some(3), Some(3))]
        );
        assert!(d.writes.iter().all(|w| w.expected_rv == Some(10)), "conditional on the version read");
        assert!(d.status.moves.is_empty(), "nothing moves before the stamps land");
    }

    #[test]
    fn a_shrink_records_its_move_first_and_a_release_is_stored_before_the_grow() {
        let mut f = fsts(&[("east", 1), ("west", 0)]);
        let mut members =
            BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
        let d = decide_now(&f, &members, 7);
        assert_eq!(written_slices(&d), vec![("west".to_string(), Some(4), Some(2))], "west gives up its bottom");
        assert!(d.persist_first);
        assert_eq!(d.status.moves.len(), 1);
        assert_eq!((d.status.moves[0].ordinal, d.status.moves[0].phase.as_str()), (3, phases::DRAINING));
        f.status = Some(d.status);
        // West shrank and its pod 3 is gone, confirmed by a list after the write.
        members.insert("west".into(), settled(&f, 4, 2, 7));
        let d = decide_now(&f, &members, 7);
        assert_eq!(d.status.moves[0].phase, phases::RELEASED);
        assert!(d.persist_first && d.writes.iter().all(|w| w.cluster != "east"), "east grows only next round");
        f.status = Some(d.status);
        let d = decide_now(&f, &members, 7);
        assert_eq!(d.status.moves[0].phase, phases::STARTING);
        assert!(written_slices(&d).contains(&("east".to_string(), Some(0), Some(4))));
    }

    /// `m` whose spanset EndpointSlices name ordinal `k` (another member's pod of it), or not.
    fn naming(m: MemberInput, k: Option<u32>) -> MemberInput {
        use crate::controller::member::endpoints::{EndpointRecord, SliceRecord};
        reporting(m, |v| {
            v.slices_known = true;
            v.federation.published.clear();
            if let Some(k) = k {
                let record = SliceRecord {
                    uid: "s1".into(),
                    rv: 3,
                    endpoints: BTreeMap::from([(
                        format!("redis-{k}"),
                        EndpointRecord { ip: "10.101.0.9".into(), ready: true, serving: true, terminating: false },
                    )]),
                    ports: String::new(),
                    service: "redis".into(),
                    deleting: false,
                };
                v.federation.published.insert("redis-spanset-0".into(), record);
            }
        })
    }

    #[test]
    fn a_gated_pod_waits_while_its_member_s_records_name_its_ordinal() {
        let f = fsts(&[("east", 1), ("west", 1)]);
        let west = settled(&f, 3, 3, 7);
        let east = |named| naming(gated_pod(settled(&f, 0, 3, 7), 2, &[]), named);
        let members = BTreeMap::from([("east".into(), east(Some(2))), ("west".into(), west.clone())]);
        assert!(decide_now(&f, &members, 7).releases.is_empty(), "east's records still give redis-2 another address");
        let members = BTreeMap::from([("east".into(), east(Some(4))), ("west".into(), west.clone())]);
        assert_eq!(
            released(&decide_now(&f, &members, 7)),
            vec![("east".to_string(), 2)],
            "another ordinal named: no matter"
        );
        let mut unknown = east(None);
        Arc::make_mut(unknown.view.as_mut().unwrap()).slices_known = false;
        let members = BTreeMap::from([("east".into(), unknown), ("west".into(), west)]);
        assert!(decide_now(&f, &members, 7).releases.is_empty(), "east's records not listed yet");
    }

    #[test]
    fn without_identity_gates_a_grow_waits_while_the_destination_s_records_name_the_ordinal() {
        let mut f = fsts(&[("east", 1), ("west", 0)]);
        f.spec.identity_gate = Some(crate::api::IdentityGate::Disabled);
        f.status = Some(FederatedStatefulSetStatus {
            moves: moving(&[3], "west", "east", phases::RELEASED),
            ..status_holding("west", 4, 2)
        });
        let west = settled(&f, 4, 2, 7);
        let members =
            BTreeMap::from([("east".into(), naming(settled(&f, 0, 3, 7), Some(3))), ("west".into(), west.clone())]);
        let d = decide_now(&f, &members, 7);
        assert!(
            d.writes.iter().all(|w| w.cluster != "east"),
            "east grew over its own record of redis-3: {:?}",
            written_slices(&d)
        );
        let members = BTreeMap::from([("east".into(), naming(settled(&f, 0, 3, 7), None)), ("west".into(), west)]);
        let d = decide_now(&f, &members, 7);
        assert!(written_slices(&d).contains(&("east".to_string(), Some(0), Some(4))), "{:?}", written_slices(&d));
    }

    #[test]
    fn the_release_and_the_grow_it_allows_are_reported_for_the_handoff_timing() {
        let mut f = fsts(&[("east", 1), ("west", 0)]);
        let mut members =
            BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
        let d = decide_now(&f, &members, 7);
        assert!(d.released.is_empty() && d.grows.is_empty(), "draining is neither");
        f.status = Some(d.status);
        members.insert("west".into(), settled(&f, 4, 2, 7));
        let d = decide_now(&f, &members, 7);
        assert_eq!((d.released.as_slice(), d.grows.as_slice()), (&[3][..], &[][..]), "released, not yet grown");
        f.status = Some(d.status);
        let d = decide_now(&f, &members, 7);
        assert_eq!((d.released.as_slice(), d.grows.as_slice()), (&[][..], &[3][..]), "the grow of the next round");
        // A grow written again (its first write failed) is reported again; the coordinator
        // times only the first one that lands.
        f.status = Some(d.status);
        let d = decide_now(&f, &members, 7);
        assert_eq!(d.grows, vec![3]);
        assert!(d.released.is_empty());
    }

    #[test]
    fn an_unknown_member_blocks_everything_with_the_field_named() {
        let f = fsts(&[("east", 1), ("nowhere", 1)]);
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 0, 7))]);
        let d = decide_now(&f, &members, 7);
        assert!(d.blocked && d.writes.is_empty());
        let blocked = d.status.conditions.iter().find(|c| c.type_ == types::BLOCKED).unwrap();
        assert_eq!((blocked.status.as_str(), blocked.reason.as_str()), ("True", "UnknownCluster"));
        assert!(blocked.message.starts_with("spec.placement.clusters[1].name"));
    }

    #[test]
    fn a_silent_member_is_reported_unreachable_and_holds_its_own_ordinals_only() {
        let f = fsts(&[("east", 1), ("west", 1)]);
        let silent = |start, replicas| {
            let mut west = settled(&f, start, replicas, 7);
            let mut view = (**west.view.as_ref().unwrap()).clone();
            view.last_contact = Some(Instant::now() - Duration::from_secs(31));
            view.failure = Some((super::super::member::health::Failure::Refused, "connection refused".into()));
            west.view = Some(Arc::new(view));
            west
        };
        // West holds 3-5: nothing of it may start in east while west cannot confirm.
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), silent(3, 3))]);
        let d = decide_now(&f, &members, 7);
        let c = d.status.conditions.iter().find(|c| c.type_ == types::CLUSTER_UNREACHABLE).unwrap();
        assert_eq!((c.status.as_str(), c.message.as_str()), ("True", "not answering: west (Refused)"));
        assert!(d.writes.is_empty(), "no grow of what west may run: {:?}", written_slices(&d));
        assert_eq!(d.writable, vec!["east".to_string()], "nothing is sent to west");
        // West was last seen holding nothing: east takes the whole range meanwhile.
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), silent(3, 0))]);
        let d = decide_now(&f, &members, 7);
        assert_eq!(written_slices(&d), vec![("east".to_string(), Some(0), Some(6))]);
    }
    /// `m` with pod `k` (created if missing) waiting for spanset's release: gated, Pending.
    fn gated_pod(m: MemberInput, k: u32, other_gates: &[&str]) -> MemberInput {
        reporting(m, |v| {
            let mut gates = vec![IDENTITY_GATE.to_string()];
            gates.extend(other_gates.iter().map(|g| g.to_string()));
            v.federation.pods.insert(
                k,
                PodRecord {
                    uid: format!("gated-{k}"),
                    node: None,
                    phase: PodPhase::Pending,
                    ready: false,
                    deleting: false,
                    rv: 12,
                    gates,
                    revision: Some("rev-1".into()),
                    ready_since: None,
                    trouble: None,
                    ip: None,
                },
            );
        })
    }

    fn released(d: &Decision) -> Vec<(String, u32)> {
        d.releases.iter().map(|r| (r.cluster.clone(), r.ordinal)).collect()
    }

    #[test]
    fn a_gated_pod_is_released_once_no_other_member_holds_or_runs_its_ordinal() {
        let f = fsts(&[("east", 1), ("west", 1)]);
        let east = gated_pod(settled(&f, 0, 3, 7), 2, &["example.com/users-own"]);
        let members = BTreeMap::from([("east".into(), east), ("west".into(), settled(&f, 3, 3, 7))]);
        let d = decide_now(&f, &members, 7);
        assert_eq!(
            d.releases,
            vec![PodRelease {
                cluster: "east".into(),
                ordinal: 2,
                uid: "gated-2".into(),
                rv: 12,
                remaining: vec!["example.com/users-own".into()],
            }],
            "released on the uid and version it was judged at; the user's own gate stays"
        );
        assert!(d.conflicts.is_empty());
        // Written in an older term (a new leader that has not stamped yet): not released.
        assert!(decide_now(&f, &members, 8).releases.is_empty());
        // Fenced, or being deleted: never.
        let mut fenced = members.clone();
        fenced.get_mut("east").unwrap().fenced = true;
        assert!(decide_now(&f, &fenced, 7).releases.is_empty());
        let deleting = reporting(members["east"].clone(), |v| {
            v.federation.pods.get_mut(&2).unwrap().deleting = true;
        });
        let members_deleting = BTreeMap::from([("east".into(), deleting), ("west".into(), settled(&f, 3, 3, 7))]);
        assert!(decide_now(&f, &members_deleting, 7).releases.is_empty());
        // Beyond the federation's range (a drift stamped as spanset's own): waits for the shrink.
        assert_eq!(f.spec.replicas, 6);
        let beyond = gated_pod(
            reporting(settled(&f, 3, 3, 7), |v| v.federation.sts.as_mut().unwrap().slice.replicas = 4),
            6,
            &[],
        );
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), beyond)]);
        assert!(decide_now(&f, &members, 7).releases.is_empty());
    }

    /// The partition written to each member, by member.
    fn partitions(d: &Decision) -> Vec<(String, Option<i64>)> {
        d.writes
            .iter()
            .map(|w| {
                (w.cluster.clone(), w.object.data["spec"]["updateStrategy"]["rollingUpdate"]["partition"].as_i64())
            })
            .collect()
    }

    /// East, west and central, each settled on two of six ordinals in term 7.
    fn two_each(f: &FederatedStatefulSet) -> BTreeMap<String, MemberInput> {
        BTreeMap::from([
            ("east".into(), settled(f, 0, 2, 7)),
            ("west".into(), settled(f, 2, 2, 7)),
            ("central".into(), settled(f, 4, 2, 7)),
        ])
    }

    #[test]
    fn a_new_template_lets_only_the_highest_ordinal_through_and_the_cursor_is_stored_first() {
        let mut f = fsts(&[("east", 1), ("west", 1), ("central", 1)]);
        let members = two_each(&f);
        // Settled: every pod runs the current template, the cursor rests at the partition.
        let d = decide_now(&f, &members, 7);
        assert!(d.writes.is_empty(), "{:?}", partitions(&d));
        assert_eq!(d.status.update_partition, Some(0));
        f.status = Some(d.status);
        // A new image: every member gets it, partitioned so that only redis-5 (central's index
        // 1) may be replaced: every pod is available, so the cursor comes down by one at once.
        f.spec.template.template.spec.as_mut().unwrap().containers[0].image = Some("redis:8".into());
        let d = decide_now(&f, &members, 7);
        assert_eq!(
            partitions(&d),
            [("central".to_string(), Some(1)), ("east".to_string(), Some(2)), ("west".to_string(), Some(2))]
        );
        assert!(d.writes.iter().all(|w| w.new_template));
        assert_eq!(d.status.update_partition, Some(5));
        assert!(d.persist_first, "the cursor is stored before the members are written with it");
        assert_ne!(d.status.update_revision, f.status.as_ref().unwrap().update_revision);
    }

    #[test]
    fn a_change_beyond_the_step_is_planned_at_the_accepted_replicas_and_a_new_one_is_stored_first() {
        let mut f = fsts(&[("east", 1), ("west", 1), ("central", 1)]);
        let members = two_each(&f);
        let d = decide_now(&f, &members, 7);
        assert_eq!(d.status.accepted_replicas, Some(6));
        assert!(d.persist_first, "the replicas accepted are stored before any write for them");
        f.status = Some(d.status);
        f.spec.replicas = 600;
        let d = decide_now(&f, &members, 7);
        assert!(d.writes.is_empty(), "nothing is written for a held change: {:?}", written_slices(&d));
        assert_eq!(d.status.accepted_replicas, Some(6));
        assert_eq!(d.status.ready.as_deref(), Some("6/6"));
        let held = d.status.conditions.iter().find(|c| c.type_ == "ReplicasHeld").unwrap();
        assert_eq!((held.status.as_str(), held.reason.as_str()), ("True", "StepTooLarge"));
        assert_eq!(d.notes.iter().filter(|n| n.reason == "StepTooLarge").count(), 1);
        // Approved: planned, and the new figure is stored before the members are written.
        f.metadata.annotations = Some([(super::super::bounds::APPROVE_REPLICAS.to_string(), "600".into())].into());
        let d = decide_now(&f, &members, 7);
        assert_eq!(d.status.accepted_replicas, Some(600));
        assert!(d.persist_first);
        assert!(!d.writes.is_empty());
    }

    #[test]
    fn a_hand_scaled_member_gets_no_release_and_its_extra_pod_holds_the_others_back() {
        // Nine replicas 3/3/3; someone scales west to 5: its own StatefulSet controller makes
        // pods 6 and 7, gated, while central runs 6-8.
        let mut f = fsts(&[("east", 1), ("west", 1), ("central", 1)]);
        f.spec.replicas = 9;
        let west = reporting(gated_pod(gated_pod(settled(&f, 3, 3, 7), 6, &[]), 7, &[]), |v| {
            let sts = v.federation.sts.as_mut().unwrap();
            sts.slice.replicas = 5;
            sts.generation = 3;
        });
        let members = BTreeMap::from([
            ("east".into(), settled(&f, 0, 3, 7)),
            ("west".into(), west),
            ("central".into(), settled(&f, 6, 3, 7)),
        ]);
        let d = decide_now(&f, &members, 7);
        assert!(d.releases.is_empty(), "{:?}", released(&d));
        assert!(d.conflicts.is_empty(), "gated pods run nowhere: {:?}", d.conflicts);
        // The stamp writes what west stores, as spanset's own (the next plan shrinks it): pods 6
        // and 7 are still held back, by central's spec and pods.
        assert_eq!(written_slices(&d), vec![("west".to_string(), Some(3), Some(5))]);
        let stamped =
            reporting(members["west"].clone(), |v| v.federation.written_generation = Some(("sts-3".into(), 3)));
        let mut after = members.clone();
        after.insert("west".into(), stamped);
        assert!(decide_now(&f, &after, 7).releases.is_empty());
        // Central's own pod 6 recreated meanwhile (gated) waits while west still has a pod 6.
        let members = BTreeMap::from([
            ("east".into(), settled(&f, 0, 3, 7)),
            ("west".into(), members["west"].clone()),
            ("central".into(), gated_pod(settled(&f, 6, 3, 7), 6, &[])),
        ]);
        assert_eq!(released(&decide_now(&f, &members, 7)), vec![]);
    }

    #[test]
    fn a_member_not_confirmed_since_its_last_write_blocks_every_release() {
        let f = fsts(&[("east", 1), ("west", 1)]);
        let unconfirmed = reporting(settled(&f, 3, 3, 7), |v| v.federation.confirmed_for = None);
        let members =
            BTreeMap::from([("east".into(), gated_pod(settled(&f, 0, 3, 7), 1, &[])), ("west".into(), unconfirmed)]);
        assert!(decide_now(&f, &members, 7).releases.is_empty());
        // Fenced but answering, west still counts; fenced and silent, its spec and pods no
        // longer do: east's pod goes.
        let mut fenced = members.clone();
        fenced.get_mut("west").unwrap().fenced = true;
        assert!(decide_now(&f, &fenced, 7).releases.is_empty());
        let silent =
            reporting(fenced["west"].clone(), |v| v.last_contact = Some(Instant::now() - Duration::from_secs(60)));
        fenced.insert("west".into(), silent);
        assert_eq!(released(&decide_now(&f, &fenced, 7)), vec![("east".to_string(), 1)]);
    }

    #[test]
    fn a_federation_with_a_silent_member_holding_a_slice_is_not_ready() {
        // Issue 19, item 2: central hangs with its slice (and whatever template it runs);
        // everything else is as targeted. The status must not say Ready, nor count its pods.
        let f = fsts(&[("east", 1), ("central", 1)]);
        let mut central = settled(&f, 3, 3, 7);
        let mut view = (**central.view.as_ref().unwrap()).clone();
        view.last_contact = Some(Instant::now() - Duration::from_secs(31));
        central.view = Some(Arc::new(view));
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("central".into(), central)]);
        let d = decide_now(&f, &members, 7);
        assert!(!d.done);
        let ready = d.status.conditions.iter().find(|c| c.type_ == types::READY).unwrap();
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "MembersUnreachable"));
        assert!(ready.message.starts_with("central cannot be reached"), "{}", ready.message);
        assert_eq!(d.status.ready.as_deref(), Some("3/6"), "central's pods are not counted");
    }

    #[test]
    fn a_silent_member_not_yet_stamped_by_this_leader_holds_every_grow() {
        // Issue 19, item 13: west was last seen holding nothing, but in term 6; the leader of
        // term 6 may have sent it a grow that has not landed yet. Term 7 cannot stamp west, so
        // nothing it saw there confirms anything.
        let f = fsts(&[("east", 1), ("west", 1)]);
        let mut west = settled(&f, 3, 0, 6);
        let mut view = (**west.view.as_ref().unwrap()).clone();
        view.last_contact = Some(Instant::now() - Duration::from_secs(31));
        west.view = Some(Arc::new(view));
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), west.clone())]);
        let d = decide_now(&f, &members, 7);
        assert!(
            d.writes.is_empty(),
            "no grow while west may still take an earlier term's write: {:?}",
            written_slices(&d)
        );
        let p = d.status.conditions.iter().find(|c| c.type_ == types::PROGRESSING).unwrap();
        assert_eq!(p.reason, "MembersUnconfirmed");
        assert!(p.message.starts_with("west cannot be reached and does not carry term 7"), "{}", p.message);
        // Fenced, west's workloads are dead by the operator's word: east takes everything.
        west.fenced = true;
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), west)]);
        let d = decide_now(&f, &members, 7);
        assert_eq!(written_slices(&d), vec![("east".to_string(), Some(0), Some(6))]);
    }

    // === storage of recorded moves (issue 19, items 1, 5 and 11) ===

    /// `m` with claims `data-redis-k` for `ordinals`, bound to `vol-<prefix>-k`.
    fn with_claims(m: MemberInput, ordinals: &[u32], prefix: &str) -> MemberInput {
        reporting(m, |v| {
            for &k in ordinals {
                let claim = crate::controller::member::cache::ClaimRecord {
                    name: format!("data-redis-{k}"),
                    uid: format!("{prefix}-{k}"),
                    phase: "Bound".into(),
                    volume: Some(format!("vol-{prefix}-{k}")),
                    deleting: false,
                    rv: 3,
                };
                v.claims.insert(k, vec![claim]);
            }
        })
    }

    /// `m`, silent for longer than the grace: unreachable, its last observation kept.
    fn unreachable(m: MemberInput) -> MemberInput {
        reporting(m, |v| {
            v.last_contact = Some(Instant::now() - Duration::from_secs(31));
            v.failure = Some((super::super::member::health::Failure::Refused, "connection refused".into()));
        })
    }

    fn moving(ordinals: &[i32], from: &str, to: &str, phase: &str) -> Vec<MoveStatus> {
        let at = "2027-01-15T08:00:00Z".to_string();
        ordinals
            .iter()
            .map(|&k| MoveStatus {
                ordinal: k,
                from: from.into(),
                to: to.into(),
                phase: phase.into(),
                since: at.clone(),
            })
            .collect()
    }

    /// Four replicas over a (weight 0), b and c, `storage` set; 0-1 recorded moving a → b.
    fn four_over_abc(storage: StorageMode, phase: &str) -> FederatedStatefulSet {
        let mut f = fsts(&[("a", 0), ("b", 1), ("c", 1)]);
        f.spec.replicas = 4;
        f.spec.migration.storage = Some(storage);
        f.status = Some(FederatedStatefulSetStatus { moves: moving(&[0, 1], "a", "b", phase), ..Default::default() });
        f
    }

    fn phases_of(d: &Decision) -> Vec<&str> {
        d.status.moves.iter().map(|m| m.phase.as_str()).collect()
    }

    fn grows_b(d: &Decision) -> bool {
        written_slices(d).iter().any(|(c, _, r)| c == "b" && r.unwrap_or(0) > 0)
    }

    #[test]
    fn a_moved_ordinal_is_handed_its_volumes_while_an_unrelated_member_is_unreachable() {
        // Issue 19, item 1: c (unreachable, observed since its last write) takes no part in
        // the move of 0-1 from a to b. The planner lets b grow past c; the move went straight
        // from Draining to Starting and b's pods started on empty claims.
        let mut f = four_over_abc(StorageMode::Move, phases::DRAINING);
        let a = with_claims(settled(&f, 0, 0, 7), &[0, 1], "a");
        let c = unreachable(settled(&f, 2, 2, 7));
        let mut members = BTreeMap::from([("a".into(), a), ("b".into(), settled(&f, 0, 0, 7)), ("c".into(), c)]);
        let d = decide_now(&f, &members, 7);
        assert!(!grows_b(&d), "no grow before the volumes: {:?}", written_slices(&d));
        assert_eq!(phases_of(&d), [phases::RELEASED, phases::RELEASED], "released on the planner's rule");
        f.status = Some(d.status);
        let d = decide_now(&f, &members, 7);
        assert!(!grows_b(&d), "{:?}", written_slices(&d));
        assert_eq!(phases_of(&d), [phases::HANDOVER, phases::HANDOVER]);
        let handed: Vec<(u32, &str, &str, HandoverKind)> =
            d.handovers.iter().map(|h| (h.ordinal, h.from.as_str(), h.to.as_str(), h.kind)).collect();
        assert_eq!(handed, [(0, "a", "b", HandoverKind::Move), (1, "a", "b", HandoverKind::Move)]);
        // The volumes arrived in b: b grows.
        f.status = Some(d.status);
        let b = members.remove("b").unwrap();
        members.insert("b".into(), with_claims(b, &[0, 1], "a"));
        let d = decide_now(&f, &members, 7);
        assert!(d.handovers.is_empty());
        assert!(written_slices(&d).contains(&("b".to_string(), Some(0), Some(2))), "{:?}", written_slices(&d));
    }

    #[test]
    fn a_handover_from_an_unreachable_source_holds_only_its_ordinals_and_says_why() {
        // Issue 19, item 11: the source a stopped answering after the release. Nothing is sent
        // to it (it would fail every round), 0-1 wait, and c still grows into ordinal 4.
        let mut f = four_over_abc(StorageMode::Move, phases::RELEASED);
        f.spec.replicas = 5;
        f.spec.placement.clusters[1].max_replicas = Some(2);
        // Parallel: under OrderedReady ordinal 4 would rightly wait for 0 and 1 to be Ready.
        f.spec.template.pod_management_policy = Some("Parallel".into());
        let a = unreachable(with_claims(settled(&f, 0, 0, 7), &[0, 1], "a"));
        let members =
            BTreeMap::from([("a".into(), a), ("b".into(), settled(&f, 0, 0, 7)), ("c".into(), settled(&f, 2, 2, 7))]);
        let d = decide_now(&f, &members, 7);
        assert!(d.handovers.is_empty(), "nothing is asked of a: {:?}", d.handovers);
        assert!(!grows_b(&d), "{:?}", written_slices(&d));
        assert!(written_slices(&d).contains(&("c".to_string(), Some(2), Some(3))), "{:?}", written_slices(&d));
        let p = d.status.conditions.iter().find(|c| c.type_ == types::PROGRESSING).unwrap();
        assert_eq!(p.reason, "HandoverWaiting");
        assert!(p.message.contains("ordinal 0: a is unreachable (data-redis-0 wait there)"), "{}", p.message);
    }

    #[test]
    fn a_fenced_source_keeps_its_volumes_by_the_rules_of_failover_and_a_condition_says_so() {
        // Issue 19, item 11: a is fenced: its workloads are declared dead and nothing is sent
        // to it; 0-1 start in b on fresh claims, as a failover's re-homed ordinals do.
        let mut f = four_over_abc(StorageMode::Move, phases::RELEASED);
        let mut a = unreachable(with_claims(settled(&f, 0, 0, 7), &[0, 1], "a"));
        a.fenced = true;
        let members =
            BTreeMap::from([("a".into(), a), ("b".into(), settled(&f, 0, 0, 7)), ("c".into(), settled(&f, 2, 2, 7))]);
        let d = decide_now(&f, &members, 7);
        assert!(d.handovers.is_empty(), "{:?}", d.handovers);
        assert!(written_slices(&d).contains(&("b".to_string(), Some(0), Some(2))), "{:?}", written_slices(&d));
        let degraded = d.status.conditions.iter().find(|c| c.type_ == types::DEGRADED).unwrap();
        assert_eq!(degraded.status, "True");
        assert!(
            degraded.message.contains("ordinal 0: data-redis-0 left in fenced a (failover: it starts on fresh claims)"),
            "{}",
            degraded.message
        );
        assert!(d.notes.iter().any(|n| n.reason == "VolumesLeftBehind"), "{:?}", d.notes);
        // The condition stays while the move is recorded; the Event is not repeated.
        f.status = Some(d.status);
        let d = decide_now(&f, &members, 7);
        assert!(d.status.conditions.iter().any(|c| c.reason == "VolumesLeftBehind" || c.message.contains("left in")));
        assert!(!d.notes.iter().any(|n| n.reason == "VolumesLeftBehind"));
    }

    #[test]
    fn a_detached_ordinal_retires_the_claims_it_leaves_before_it_starts_elsewhere() {
        // Issue 19, item 5: a claim left in the source would be bound again, with older data,
        // if the ordinal came back.
        let mut f = four_over_abc(StorageMode::Detached, phases::RELEASED);
        let a = with_claims(settled(&f, 0, 0, 7), &[0, 1], "a");
        let mut members =
            BTreeMap::from([("a".into(), a), ("b".into(), settled(&f, 0, 0, 7)), ("c".into(), settled(&f, 2, 2, 7))]);
        let d = decide_now(&f, &members, 7);
        assert!(!grows_b(&d), "{:?}", written_slices(&d));
        let retire = HandoverKind::Retire { keep_volume: true, arrival: false };
        let steps: Vec<(u32, &str, HandoverKind)> =
            d.handovers.iter().map(|h| (h.ordinal, h.from.as_str(), h.kind)).collect();
        assert_eq!(steps, [(0, "a", retire), (1, "a", retire)], "staleClaims defaults to Release");
        f.spec.migration.stale_claims = Some(crate::api::StaleClaims::Delete);
        let d = decide_now(&f, &members, 7);
        assert_eq!(d.handovers[0].kind, HandoverKind::Retire { keep_volume: false, arrival: false });
        // Claims being deleted count as gone: b grows.
        f.status = Some(d.status);
        let a = reporting(members.remove("a").unwrap(), |v| {
            v.claims.values_mut().flatten().for_each(|c| c.deleting = true);
        });
        members.insert("a".into(), a);
        let d = decide_now(&f, &members, 7);
        assert!(d.handovers.is_empty());
        assert!(written_slices(&d).contains(&("b".to_string(), Some(0), Some(2))), "{:?}", written_slices(&d));
    }

    #[test]
    fn a_detached_ordinal_arriving_where_an_older_claim_of_it_was_left_retires_that_claim_first() {
        // b kept a claim of ordinal 1 from a run before (a member fenced since, say): the
        // ordinal ran in a since, so that claim must not bind when it arrives.
        let f = four_over_abc(StorageMode::Detached, phases::RELEASED);
        let a = settled(&f, 0, 0, 7);
        let b = with_claims(settled(&f, 0, 0, 7), &[1], "b");
        let members = BTreeMap::from([("a".into(), a), ("b".into(), b), ("c".into(), settled(&f, 2, 2, 7))]);
        let d = decide_now(&f, &members, 7);
        assert!(!grows_b(&d), "{:?}", written_slices(&d));
        let steps: Vec<(u32, &str, HandoverKind)> =
            d.handovers.iter().map(|h| (h.ordinal, h.to.as_str(), h.kind)).collect();
        assert_eq!(steps, [(1, "b", HandoverKind::Retire { keep_volume: true, arrival: true })]);
    }

    #[test]
    fn an_ordinal_going_back_where_it_came_from_keeps_its_claims() {
        // The spec changed back before the grow: the source's claims are still the newest.
        let mut f = four_over_abc(StorageMode::Detached, phases::RELEASED);
        f.spec.placement.clusters[0].weight = Some(1);
        f.spec.placement.clusters[1].weight = Some(0);
        let a = with_claims(settled(&f, 0, 0, 7), &[0, 1], "a");
        let members =
            BTreeMap::from([("a".into(), a), ("b".into(), settled(&f, 0, 0, 7)), ("c".into(), settled(&f, 2, 2, 7))]);
        let d = decide_now(&f, &members, 7);
        assert!(d.handovers.is_empty(), "{:?}", d.handovers);
        // Its move ends: a move from a cluster to itself is never recorded.
        assert!(d.status.moves.is_empty(), "{:?}", d.status.moves);
        assert!(d.persist_first, "the end of the moves is stored first");
    }

    #[test]
    fn storage_move_with_claims_deleted_on_scale_down_blocks_every_write_naming_both_fields() {
        // Issue 19, item 10: a federation stored before the CRD's rule. The source's shrink
        // would garbage-collect the moving ordinal's claim before its handover.
        let mut f = fsts(&[("east", 1), ("west", 0)]);
        f.spec.migration.storage = Some(StorageMode::Move);
        f.spec.template.persistent_volume_claim_retention_policy =
            Some(serde_json::from_value(serde_json::json!({"whenScaled": "Delete"})).unwrap());
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
        let d = decide_now(&f, &members, 7);
        assert!(d.blocked && d.writes.is_empty() && d.handovers.is_empty());
        let blocked = d.status.conditions.iter().find(|c| c.type_ == types::BLOCKED).unwrap();
        assert_eq!(blocked.reason, "InvalidSpec");
        assert!(
            blocked.message.contains(
                "spec.migration.storage: Move cannot be combined with \
                 spec.template.persistentVolumeClaimRetentionPolicy.whenScaled: Delete"
            ),
            "{}",
            blocked.message
        );
    }

    #[test]
    fn a_54_character_name_blocks_every_write_naming_the_label_limit() {
        // Issue 22, item 2: stored without the CRD's rule, its member pods would fail the
        // 63-character label limit.
        let mut f = fsts(&[("east", 1), ("west", 0)]);
        f.metadata.name = Some("a".repeat(54));
        let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
        let d = decide_now(&f, &members, 7);
        assert!(d.blocked && d.writes.is_empty() && d.handovers.is_empty());
        let blocked = d.status.conditions.iter().find(|c| c.type_ == types::BLOCKED).unwrap();
        assert_eq!(blocked.reason, "InvalidSpec");
        assert!(blocked.message.starts_with("metadata.name: 54 characters; at most 52"), "{}", blocked.message);
    }
}
