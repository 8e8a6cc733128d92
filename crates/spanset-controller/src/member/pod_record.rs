//! What spanset keeps of a pod, and which pods are a federation's: a pod named
//! `<federation>-<ordinal>` that carries the federation's label or sits in a namespace where that
//! federation is known, whoever made it and whatever its labels say now. Everything else a
//! member runs is looked at by name and dropped.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use spanset_api::labels::{FEDERATION, IDENTITY_GATE};

pub use spanset_api::pod_name::statefulset_pod;

use super::{cache::rv_of, objects::FederationKey};

/// A pod's phase, as far as spanset cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    /// Not yet running (scheduling, pulling, starting).
    Pending,
    /// Running.
    Running,
    /// Ended (Succeeded or Failed): its containers no longer run.
    Ended,
    /// Unknown or unreported.
    Unknown,
}

/// What spanset keeps of a pod: enough to tell whether its identity runs here, and whether it
/// is Ready. About a hundred bytes, against tens of kilobytes for the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRecord {
    /// The pod's uid (one incarnation).
    pub uid: String,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Its phase.
    pub phase: PodPhase,
    /// Running and Ready.
    pub ready: bool,
    /// Being deleted (still running until its kubelet confirms).
    pub deleting: bool,
    /// The resourceVersion of this record.
    pub rv: u64,
    /// Its scheduling gates (`spec.schedulingGates` names): while spanset's identity gate is
    /// among them, the pod waits unscheduled for spanset's release.
    pub gates: Vec<String>,
    /// Its `controller-revision-hash` label: the member StatefulSet's revision it was made
    /// (or updated in place) from. A rollout compares it with the member's `updateRevision`.
    pub revision: Option<String>,
    /// Its Ready condition's transition time, while Ready, as the member wrote it: on the
    /// member's clock, so never compared with this process's; only a mark telling one Ready
    /// period from the next (a pod that went unready and Ready again between two looks).
    pub ready_since: Option<jiff::Timestamp>,
    /// When this process first saw it Ready in its current Ready period, on this process's
    /// monotonic clock: what `minReadySeconds` is judged on (see [`PodRecord::ready_for`]).
    pub ready_seen: Option<Instant>,
    /// While not Ready: what keeps it from running, in a few words (`container redis: waiting:
    /// ImagePullBackOff: Back-off pulling image "redis:7.9"`), for a stuck rollout to name.
    pub trouble: Option<String>,
    /// Its IP (`status.podIP`), once it has one: what spanset publishes for it in the other
    /// members (`spec.network`).
    pub ip: Option<String>,
    /// The uid of the StatefulSet that controls it (its controller ownerReference), if one
    /// does. A pod with an identity's name that the member's StatefulSet does not own (a
    /// copied manifest, a restore) still runs that identity: it is counted like any other, but
    /// spanset never releases it, and the federation's condition names it.
    pub owner: Option<String>,
    /// Whether it carries spanset's federation label. One without it (removed by hand) is
    /// still the federation's, by its name: counted, and named.
    pub labelled: bool,
    /// Its pod-lease guard, if its spec carries one (see [`crate::pod_lease::seen`]):
    /// what its spec carries and what its status shows.
    pub guard: Option<Box<crate::pod_lease::seen::PodGuard>>,
}

impl PodRecord {
    /// How long this process has seen the pod Ready, at `now` (its monotonic clock): the pod
    /// is available once that reaches `minReadySeconds`. One clock judges the whole duration,
    /// so a member whose clock runs ahead or behind changes nothing. The watcher sees Ready
    /// at or after the moment the member's kubelet set it (never before), so this counts a pod
    /// available later than the member would, by the watch's delay (or, after this process
    /// starts or relists, by the time the pod had been Ready already), and never earlier.
    pub fn ready_for(&self, now: Instant) -> Option<Duration> {
        self.ready_seen.filter(|_| self.ready).map(|t| now.saturating_duration_since(t))
    }

    /// Keeps the moment Ready was first seen from `old`, the record this one replaces, when
    /// both show the same incarnation in the same Ready period.
    pub(super) fn keep_ready_seen(&mut self, old: Option<&PodRecord>) {
        if let Some(old) = old
            && self.ready
            && old.ready
            && old.uid == self.uid
            && old.ready_since == self.ready_since
        {
            self.ready_seen = old.ready_seen.or(self.ready_seen);
        }
    }

    /// The lease its guard enforces, in seconds, if it carries a guard: it stops itself when
    /// its lease lapses.
    pub fn guard_lease(&self) -> Option<i32> {
        self.guard.as_ref().map(|g| g.spec.lease_seconds)
    }

    /// Whether the pod still waits for spanset's release (carries the identity gate).
    pub fn gated(&self) -> bool {
        self.gates.iter().any(|g| g == IDENTITY_GATE)
    }

    /// The record of a pod, with its federation and ordinal, if it carries a federation's
    /// identity: named `<federation>-<ordinal>` and either labelled with that federation, or in
    /// a namespace where `known` says that federation is one (the label removed, or a bare pod
    /// given an identity's name). A label is only a label, anyone may remove it: the name is
    /// what the identity is (its DNS name, its claims), and the member's StatefulSet, named as
    /// the federation, owns only pods so named.
    pub fn of(pod: &Pod, known: impl Fn(&FederationKey) -> bool) -> Option<(FederationKey, u32, PodRecord)> {
        let (set, ordinal) = statefulset_pod(pod.metadata.name.as_deref()?)?;
        let key = FederationKey { namespace: pod.namespace().unwrap_or_default(), name: set.to_string() };
        let labelled = pod.labels().get(FEDERATION).is_some_and(|f| *f == key.name);
        if !labelled && !known(&key) {
            return None;
        }
        let status = pod.status.as_ref();
        let phase = match status.and_then(|s| s.phase.as_deref()) {
            Some("Pending") => PodPhase::Pending,
            Some("Running") => PodPhase::Running,
            Some("Succeeded" | "Failed") => PodPhase::Ended,
            _ => PodPhase::Unknown,
        };
        let ready = phase == PodPhase::Running
            && status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let ready_since = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready" && c.status == "True"))
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0)
            .filter(|_| ready);
        let ready = ready && !deleting;
        let record = PodRecord {
            uid: pod.uid().unwrap_or_default(),
            node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            phase,
            ready,
            deleting,
            rv: rv_of(pod.metadata.resource_version.as_deref()),
            gates: pod
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .map(|g| g.iter().map(|g| g.name.clone()).collect())
                .unwrap_or_default(),
            revision: pod.labels().get(REVISION_LABEL).cloned(),
            ready_since,
            // First seen Ready now, unless the record it replaces saw it so before.
            ready_seen: ready.then(Instant::now),
            trouble: if ready { None } else { trouble(pod) },
            ip: status.and_then(|s| s.pod_ip.clone()).filter(|ip| !ip.is_empty()),
            owner: pod
                .owner_references()
                .iter()
                .find(|r| r.controller == Some(true) && r.kind == "StatefulSet")
                .map(|r| r.uid.clone()),
            labelled,
            guard: crate::pod_lease::seen::PodGuard::of(pod),
        };
        Some((key, ordinal, record))
    }

    /// Why spanset's guards did not keep this pod, if they did not: the federation's label
    /// was removed from it, or no StatefulSet made it (created by hand, a copied manifest, a
    /// restore). spanset still counts it as running its ordinal; the federation's condition
    /// names it, since only someone with the member's keys can end it.
    pub fn stray(&self) -> Option<&'static str> {
        if self.owner.is_none() {
            Some("not made by a StatefulSet")
        } else if !self.labelled {
            Some("its spanset.dev/federation label was removed")
        } else {
            None
        }
    }

    /// Whether the member StatefulSet `sts` (its uid) made this pod: spanset releases only
    /// those, a pod someone else created with the identity's name waits for good.
    pub fn owned_by(&self, sts: &str) -> bool {
        self.owner.as_deref() == Some(sts)
    }
}

/// A pod as the pod watch delivered it, reduced at once to what spanset keeps.
#[derive(Debug, Clone, PartialEq)]
pub enum SeenPod {
    /// A pod carrying a federation's identity: its federation, ordinal and record.
    Ours(Box<(FederationKey, u32, PodRecord)>),
    /// Another workload's pod: only its resourceVersion (a relist's bound).
    Other(u64),
}

impl SeenPod {
    /// Its resourceVersion.
    pub fn rv(&self) -> u64 {
        match self {
            SeenPod::Ours(ours) => ours.2.rv,
            SeenPod::Other(rv) => *rv,
        }
    }
}

/// The label a StatefulSet controller (apps/v1 and Kruise alike) puts on each pod: the name
/// of the ControllerRevision the pod's spec comes from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// Why a pod that is not Ready is not: the first container (init containers first) that is
/// waiting or terminated, with its reason and message; else an unschedulable pod's reason;
/// else its phase. Short, for a condition and an Event.
fn trouble(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let containers = status.init_container_statuses.iter().flatten().chain(status.container_statuses.iter().flatten());
    for c in containers.filter(|c| !c.ready) {
        let state = c.state.as_ref();
        if let Some(w) = state.and_then(|s| s.waiting.as_ref()).filter(|w| w.reason.is_some()) {
            let msg = w.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
            return Some(format!("container {}: waiting: {}{msg}", c.name, w.reason.as_deref().unwrap_or("")));
        }
        if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
            let reason = t.reason.as_deref().unwrap_or("Terminated");
            return Some(format!("container {}: terminated: {reason} (exit code {})", c.name, t.exit_code));
        }
    }
    let unscheduled =
        status.conditions.iter().flatten().find(|c| c.type_ == "PodScheduled" && c.status == "False").map(|c| match c
            .reason
            .as_deref()
        {
            // Waiting for a gate's owner (spanset's identity release, or another's): not stuck.
            Some("SchedulingGated") => "scheduling gated".to_string(),
            _ => format!("not scheduled: {}", c.message.as_deref().or(c.reason.as_deref()).unwrap_or("")),
        });
    unscheduled.or_else(|| status.phase.as_ref().map(|p| format!("phase {p}, not Ready")))
}
