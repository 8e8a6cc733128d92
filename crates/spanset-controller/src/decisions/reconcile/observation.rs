//! Stage 2: the planner's view of the members. Every placement member is observed, and any
//! other member still holding something of the federation; a member that has not reported
//! (or is a duplicate) counts with the slice the status last gave it, unconfirmed. Also the
//! silences that matter: members an earlier leader may still write to, and members the
//! automatic failover policy fences.

use std::time::{Duration, Instant};

use spanset_api::{FailoverPolicy, FederatedStatefulSet, FederatedStatefulSetStatus};
use spanset_plan::{Backend, ClusterObservation, Observed, Slice};

use super::{DEFAULT_FENCE_AFTER_SECONDS, Inputs, scope::Scope};
use crate::actors::messages::MemberView;

/// The observation: placement members, and any other member still holding something.
pub(super) fn observed(cx: &Scope<'_>) -> Observed {
    let previous = cx.previous;
    let listed_before: std::collections::BTreeSet<&str> = previous.slices.iter().map(|s| s.cluster.as_str()).collect();
    let mut obs = Observed::new();
    for (name, m) in cx.inp.members {
        match &m.view {
            // A duplicate is never observed: its pods are another member's. Only a slice the
            // status gave it before it was found out is kept, unconfirmed (as for a silent member).
            _ if m.duplicate.is_some() && listed_before.contains(name.as_str()) => {
                obs.insert(name.clone(), unreported(previous, name, m.fenced));
            }
            _ if m.duplicate.is_some() => {}
            Some(view) if view.synced => {
                let holds = view.federation.sts.is_some() || !view.federation.pods.is_empty();
                if cx.placement.contains(name.as_str()) || holds || listed_before.contains(name.as_str()) {
                    let mut o = observe(view, cx.backend, cx.leased, m.fenced, cx.inp.now, cx.grace);
                    o.answered_since_fence = m.fenced && m.answered_since_fence;
                    let f = &view.federation;
                    if !cx.inp.rules.confirmation {
                        // Planted bug: any list confirms absences.
                        o.observed_since_write = true;
                    } else if !cx.inp.rules.uncertain_writes && f.uncertain_write.is_some() {
                        // Planted bug: a write without an answer is taken as not applied.
                        o.observed_since_write = f.state().is_some() && f.state() == f.confirmed_for;
                    }
                    obs.insert(name.clone(), o);
                }
            }
            // Not reported yet, or not synced yet (a new process or a new watcher, or a member
            // down since it started): what it runs is unknown, so it counts as silent and
            // unconfirmed, and no ordinal grows anywhere until it reports or is fenced.
            _ if cx.placement.contains(name.as_str()) || listed_before.contains(name.as_str()) => {
                obs.insert(name.clone(), unreported(previous, name, m.fenced));
            }
            _ => {}
        }
    }
    obs
}

/// The planner's observation of one member, from its watcher's report.
pub fn observe(
    view: &MemberView,
    backend: Backend,
    leased: bool,
    fenced: bool,
    now: Instant,
    grace: Duration,
) -> ClusterObservation {
    let f = &view.federation;
    let written = f.sts.as_ref().filter(|s| !s.deleting).map(|s| s.slice.clone()).unwrap_or_default();
    ClusterObservation {
        written,
        pods: f.pods.keys().copied().collect(),
        ready: f.pods.iter().filter(|(_, p)| p.ready).map(|(k, _)| *k).collect(),
        observed_since_write: view.synced && f.confirmed(),
        reachable: view.synced && view.last_contact.is_some_and(|t| now.saturating_duration_since(t) < grace),
        fenced,
        answered_since_fence: false,
        compatible: incompatibility(view, backend, leased).is_none(),
    }
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
        answered_since_fence: false,
        compatible: true,
    }
}

/// Why a member cannot run a backend's StatefulSets, if it cannot: it drops `.spec.ordinals`
/// of that API, or (Advanced StatefulSets) its discovery does not list them. Unknowns do not
/// exclude (a member is unsynced until discovery answers; the first write tells the rest).
pub(super) fn incompatibility(view: &MemberView, backend: Backend, leased: bool) -> Option<&'static str> {
    // A pod lease's watch is a native sidecar: before 1.29 the API server drops its
    // restartPolicy, and the watch, an ordinary init container that never ends, would hold
    // every pod in its init forever.
    if leased && view.server_minor.is_some_and(|m| m < crate::member::protections::SIDECARS_SINCE_MINOR) {
        return Some(
            "spec.failover.podLease: the pods' guard watches from a native sidecar, which Kubernetes 1.29 and later \
                run; upgrade the member, or remove podLease",
        );
    }
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

/// Members that this leader cannot reach and has not stamped with its term: an earlier
/// leader's write may still be in flight to them (sent before it stopped, delivered when the
/// member answers again), and nothing this leader writes can fence it off until its own stamp
/// lands there. What they were last seen to hold confirms nothing, so they count as not
/// observed since their last write, which holds every grow. A member this leader stamped is
/// different: a late write of an earlier term, conditional on an older resourceVersion, can
/// only be refused there. Answers their names.
pub(super) fn unstamped_unreachable(obs: &mut Observed, inp: &Inputs<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, o) in obs.iter_mut().filter(|(_, o)| !o.reachable && !o.fenced) {
        let term = inp.members.get(name).and_then(|m| m.view.as_ref()).and_then(|v| v.federation.sts.as_ref()?.term);
        if term != Some(inp.term) && inp.rules.term_check {
            o.observed_since_write = false;
            out.push(name.clone());
        }
    }
    out
}

/// Members that the automatic policy fences now: unfenced, holding something of this
/// federation (in the placement, or in the observation with a slice or pods there: a member
/// removed from the placement while lost still holds its ordinals), and silent for
/// `unreachableAfterSeconds` + `fenceAfterSeconds`. Silence is counted from the last answer, or
/// from the watcher's start when the member never answered this process, and never from before
/// this process began leading: a standby's watcher may have had no route to a member that the
/// old leader reached, and its count says nothing about that member's pods.
pub(super) fn automatic_fences(
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
