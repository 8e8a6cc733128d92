//! Seeing the pods: one watch per member of a federation's pods (by the federation label every
//! pod spanset writes carries), each change turned into an [`Observation`] stamped with the
//! auditor's clock the moment it arrives. A watch that breaks is re-listed: a pod seen before
//! and missing from the new list is recorded gone when the list says so, which is the first the
//! auditor can know of it.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use tokio::sync::mpsc;

use super::timeline::{Observation, State};

/// What a pod's own status says it is doing.
pub fn state_of(pod: &Pod) -> State {
    let Some(status) = pod.status.as_ref() else { return State::Waiting };
    let phase = status.phase.as_deref().unwrap_or("Pending");
    if matches!(phase, "Succeeded" | "Failed") {
        return State::Stopped;
    }
    let containers = status.container_statuses.iter().flatten().chain(status.init_container_statuses.iter().flatten());
    let mut any_running = false;
    let mut any_terminated = false;
    for c in containers {
        let state = c.state.as_ref();
        any_running |= state.is_some_and(|s| s.running.is_some());
        any_terminated |= state.is_some_and(|s| s.terminated.is_some());
    }
    // kwok, and a kubelet before its first status, say Running with no container statuses.
    let running = any_running || (phase == "Running" && !any_terminated);
    if !running {
        return if any_terminated { State::Stopped } else { State::Waiting };
    }
    let ready = status.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
    if ready { State::Ready } else { State::Running }
}

/// Watches `pods` (one member's, already scoped to a namespace) with `selector`, sending an
/// observation of each change to `out` until `out` is closed.
pub async fn watch_member(member: String, pods: Api<Pod>, selector: String, out: mpsc::UnboundedSender<Observation>) {
    let config = watcher::Config::default().labels(&selector);
    let mut events = watcher(pods, config).default_backoff().boxed();
    // Pods believed present, by uid (their names): what a re-list must account for.
    let mut present: BTreeMap<String, String> = BTreeMap::new();
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    let observe = |name: String, uid: String, state: State, deleting: bool| {
        out.send(Observation { at: Timestamp::now(), member: member.clone(), name, uid, state, deleting })
    };
    let send = |pod: &Pod, state: State| {
        let deleting = pod.metadata.deletion_timestamp.is_some();
        observe(pod.name_any(), pod.uid().unwrap_or_default(), state, deleting)
    };
    loop {
        let event = match events.try_next().await {
            Ok(Some(e)) => e,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(%member, error = %e, "the pods watch failed; re-listing");
                continue;
            }
        };
        let sent = match event {
            watcher::Event::Init => {
                listed.clear();
                Ok(())
            }
            watcher::Event::InitApply(pod) => {
                listed.insert(pod.uid().unwrap_or_default(), pod.name_any());
                send(&pod, state_of(&pod))
            }
            watcher::Event::InitDone => {
                let vanished: Vec<(String, String)> = present
                    .iter()
                    .filter(|(uid, _)| !listed.contains_key(*uid))
                    .map(|(u, n)| (u.clone(), n.clone()))
                    .collect();
                present = std::mem::take(&mut listed);
                vanished.into_iter().try_for_each(|(uid, name)| observe(name, uid, State::Gone, true))
            }
            watcher::Event::Apply(pod) => {
                present.insert(pod.uid().unwrap_or_default(), pod.name_any());
                send(&pod, state_of(&pod))
            }
            watcher::Event::Delete(pod) => {
                present.remove(&pod.uid().unwrap_or_default());
                send(&pod, State::Gone)
            }
        };
        if sent.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "redis-0"}, "status": status})).unwrap()
    }

    #[test]
    fn the_state_follows_the_pods_own_status() {
        assert_eq!(state_of(&pod(serde_json::json!({"phase": "Pending"}))), State::Waiting);
        assert_eq!(
            state_of(&pod(serde_json::json!({"phase": "Running"}))),
            State::Running,
            "kwok's pods list no containers"
        );
        let ready = serde_json::json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                                   "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]});
        assert_eq!(state_of(&pod(ready)), State::Ready);
        let ended = serde_json::json!({"phase": "Running",
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                                   "state": {"terminated": {"exitCode": 0}}}]});
        assert_eq!(state_of(&pod(ended)), State::Stopped, "every container ended: nothing runs");
        assert_eq!(state_of(&pod(serde_json::json!({"phase": "Failed"}))), State::Stopped);
        let waiting = serde_json::json!({"phase": "Pending",
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                                   "state": {"waiting": {"reason": "ContainerCreating"}}}]});
        assert_eq!(state_of(&pod(waiting)), State::Waiting);
    }
}
