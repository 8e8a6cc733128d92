//! Whether a member's pods are guarded, as spanset has seen them: a guard counts only where its
//! pod's spec carries it whole (the watch, every container run by its first process) for this
//! federation, and where the pod's status shows its watch reading its Lease (Ready: its
//! readiness probe passes only while its reads succeed), or shows that nothing of the pod
//! runs yet. A lapse fences a member only when everything of the federation last seen there
//! is guarded so; otherwise the member waits for a fence as without a lease, and the federation
//! says which pods, and why ([`unguarded`]; of a member's cache, `FederationCache::unguarded`).
//!
//! What was seen is the last observation before the member was cut off: a guard that crashes
//! after it changes nothing of the judgement, and needs not: every container ends itself by the
//! deadline its watch last posted.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::inject::{GUARD_INIT, GUARD_WATCH, GuardSpec, guard_of};

/// The most of a guard's words a condition repeats.
const MAX_WORDS: usize = 300;

/// What a pod's status shows of its guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardSeen {
    /// Nothing of the pod runs yet (its guard holds it, or it has not started): it can only
    /// start under a fresh extension. `failing`: why its guard fails, if it does (its last
    /// termination message), for the federation to say.
    NotStarted {
        /// The guard's own words, if it ended in error.
        failing: Option<Box<str>>,
    },
    /// The pod may run, and its watch is Ready: it reads its Lease.
    Watching,
    /// The pod may run, and its watch is not seen reading its Lease; why.
    NotWatching(Box<str>),
}

/// A pod's guard: what its spec carries and what its status shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGuard {
    /// From the spec.
    pub spec: GuardSpec,
    /// From the status.
    pub seen: GuardSeen,
}

impl PodGuard {
    /// The guard of a pod, if its spec carries one.
    pub fn of(pod: &Pod) -> Option<Box<PodGuard>> {
        let spec = serde_json::to_value(pod.spec.as_ref()?).ok()?;
        let spec = guard_of(&spec)?;
        Some(Box::new(PodGuard { spec, seen: seen(pod) }))
    }
}

/// How a container's status reads, in a few words.
fn state_of(c: &ContainerStatus) -> String {
    let Some(state) = &c.state else { return "no state reported".into() };
    if let Some(w) = &state.waiting {
        let reason = w.reason.as_deref().unwrap_or("waiting");
        return match w.message.as_deref().filter(|m| !m.is_empty()) {
            Some(m) => format!("{reason}: {m}"),
            None => reason.to_string(),
        };
    }
    if let Some(t) = &state.terminated {
        return format!("terminated ({})", t.exit_code);
    }
    if state.running.is_some() {
        return if c.started == Some(false) {
            "running, not started (its startup probe)".into()
        } else {
            "not ready".into()
        };
    }
    "no state reported".into()
}

/// The guard's own words in a container's last termination, if it ended in error.
fn failure_of(c: &ContainerStatus) -> Option<Box<str>> {
    let ended = [c.state.as_ref(), c.last_state.as_ref()].into_iter().flatten().find_map(|s| s.terminated.as_ref())?;
    if ended.exit_code == 0 {
        return None;
    }
    // Its last line: the reason, when the guard wrote one; the end of its log otherwise.
    let last = ended.message.as_deref().and_then(|m| m.lines().map(str::trim).rfind(|l| !l.is_empty()));
    let words = last.unwrap_or("it ended in error");
    Some(words.chars().take(MAX_WORDS).collect::<String>().into())
}

/// What a pod's status shows of its guard.
pub fn seen(pod: &Pod) -> GuardSeen {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    let inits = status.and_then(|s| s.init_container_statuses.as_deref()).unwrap_or_default();
    let mains = status.and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
    let guard = inits.iter().find(|c| c.name == GUARD_INIT);
    let failing = guard.and_then(failure_of);
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return GuardSeen::NotStarted { failing };
    }
    let ran = |c: &ContainerStatus| {
        c.name != GUARD_INIT
            && c.name != GUARD_WATCH
            && c.state.as_ref().is_some_and(|s| s.running.is_some() || s.terminated.is_some())
    };
    if !inits.iter().chain(mains).any(ran) {
        return GuardSeen::NotStarted { failing };
    }
    match inits.iter().find(|c| c.name == GUARD_WATCH) {
        Some(w) if w.ready => GuardSeen::Watching,
        Some(w) => {
            let mut why = format!("{GUARD_WATCH} {}", state_of(w));
            if let Some(said) = failure_of(w) {
                why += &format!("; it ended saying: {said}");
            }
            GuardSeen::NotWatching(why.into())
        }
        None => GuardSeen::NotWatching(format!("no status of {GUARD_WATCH}").into()),
    }
}

/// Why the federation's StatefulSet and pods last seen in a member are not all guarded, one
/// sentence each (empty: all are): `sts`, the StatefulSet's template's guard (`None` when there
/// is no StatefulSet, `Some(None)` when its template has no guard); `pods`, each pod's name and
/// guard; `uid`, the federation's.
pub fn unguarded<'a>(
    sts: Option<Option<&GuardSpec>>,
    pods: impl IntoIterator<Item = (String, Option<&'a PodGuard>)>,
    uid: Option<&str>,
) -> Vec<String> {
    let mut out = Vec::new();
    let not_ours = |g: &GuardSpec| uid.is_some() && g.federation_uid.as_deref() != uid;
    match sts {
        Some(None) => out.push("its StatefulSet's pod template has no guard".into()),
        Some(Some(g)) if not_ours(g) => out.push("its StatefulSet's guard reads another federation's Lease".into()),
        Some(Some(GuardSpec { defect: Some(d), .. })) => {
            out.push(format!("its StatefulSet's guard is incomplete: {d}"))
        }
        _ => {}
    }
    for (name, guard) in pods {
        match guard {
            None => out.push(format!("{name} has no guard (made before the pod lease)")),
            Some(g) if not_ours(&g.spec) => out.push(format!(
                "{name}'s guard reads the Lease of an earlier federation of this name (its pods are released, or \
                 stop at once): it is replaced by the rollout"
            )),
            Some(PodGuard { spec: GuardSpec { defect: Some(d), .. }, .. }) => out.push(format!("{name}: {d}")),
            Some(PodGuard { seen: GuardSeen::NotWatching(why), .. }) => {
                out.push(format!("{name} runs, and its guard is not seen reading its Lease: {why}"))
            }
            Some(_) => {}
        }
    }
    out
}

/// The guards that fail closed among a member's pods: each pod's name and its guard's words
/// (such a pod does not start, and would not without a fix).
pub fn failing<'a>(pods: impl IntoIterator<Item = (String, Option<&'a PodGuard>)>) -> Vec<String> {
    pods.into_iter()
        .filter_map(|(name, g)| match &g?.seen {
            GuardSeen::NotStarted { failing: Some(why) } => Some(format!("{name}: {why}")),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": "db-0"}, "spec": {"containers": []}, "status": status}),
        )
        .unwrap()
    }

    #[test]
    fn a_pod_that_may_run_counts_as_guarded_only_while_its_watch_is_ready() {
        let waiting = pod(serde_json::json!({"phase": "Pending", "initContainerStatuses": [
            {"name": GUARD_INIT, "ready": false, "restartCount": 0, "image": "", "imageID": "", "state": {"running": {}}}]}));
        assert_eq!(seen(&waiting), GuardSeen::NotStarted { failing: None });
        let failing = pod(serde_json::json!({"phase": "Pending", "initContainerStatuses": [
            {"name": GUARD_INIT, "ready": false, "restartCount": 2, "image": "", "imageID": "",
             "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "message": "lease default/db-pods unreadable: forbidden"}}}]}));
        assert_eq!(
            seen(&failing),
            GuardSeen::NotStarted { failing: Some("lease default/db-pods unreadable: forbidden".into()) }
        );
        let running = |watch: serde_json::Value| {
            pod(serde_json::json!({"phase": "Running",
                "initContainerStatuses": [watch],
                "containerStatuses": [{"name": "db", "ready": true, "restartCount": 0, "image": "", "imageID": "",
                    "state": {"running": {}}}]}))
        };
        let ready = running(serde_json::json!({"name": GUARD_WATCH, "ready": true, "restartCount": 0, "image": "",
            "imageID": "", "started": true, "state": {"running": {}}}));
        assert_eq!(seen(&ready), GuardSeen::Watching);
        let backing_off =
            running(serde_json::json!({"name": GUARD_WATCH, "ready": false, "restartCount": 3, "image": "",
            "imageID": "", "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}}));
        assert_eq!(
            seen(&backing_off),
            GuardSeen::NotWatching(format!("{GUARD_WATCH} CrashLoopBackOff: back-off 40s").into())
        );
        let unready = running(serde_json::json!({"name": GUARD_WATCH, "ready": false, "restartCount": 0, "image": "",
            "imageID": "", "started": true, "state": {"running": {}}}));
        assert_eq!(seen(&unready), GuardSeen::NotWatching(format!("{GUARD_WATCH} not ready").into()));
    }

    #[test]
    fn every_unguarded_pod_is_named_with_why() {
        let ours = GuardSpec { lease_seconds: 10, federation_uid: Some("u1".into()), defect: None };
        let watching = PodGuard { spec: ours.clone(), seen: GuardSeen::Watching };
        let not = PodGuard { spec: ours.clone(), seen: GuardSeen::NotWatching("spanset-guard-watch not ready".into()) };
        let theirs = PodGuard {
            spec: GuardSpec { federation_uid: Some("u0".into()), ..ours.clone() },
            seen: GuardSeen::Watching,
        };
        let held = PodGuard { spec: ours.clone(), seen: GuardSeen::NotStarted { failing: Some("forbidden".into()) } };
        assert!(
            unguarded(
                Some(Some(&ours)),
                [("db-0".to_string(), Some(&watching)), ("db-1".into(), Some(&held))],
                Some("u1")
            )
            .is_empty()
        );
        let said = unguarded(
            Some(Some(&ours)),
            [("db-0".to_string(), Some(&not)), ("db-1".into(), None), ("db-2".into(), Some(&theirs))],
            Some("u1"),
        );
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(
            said[0].starts_with("db-0 runs") && said[1].starts_with("db-1 has no guard") && said[2].contains("earlier")
        );
        assert_eq!(unguarded(Some(None), [], Some("u1")), ["its StatefulSet's pod template has no guard"]);
        assert_eq!(failing([("db-1".to_string(), Some(&held)), ("db-0".into(), Some(&watching))]), ["db-1: forbidden"]);
    }
}
