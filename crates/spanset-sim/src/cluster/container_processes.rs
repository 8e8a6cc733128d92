//! The kubelet's side of containers that run real processes (see [`super::processes`]): it
//! starts them with the pod (after its init containers: [`super::init_containers`]), keeps its
//! sidecars running beside them, shows in `status.containerStatuses` (and, for sidecars,
//! `status.initContainerStatuses`) what their processes do
//! (running since, ready by their probes, terminated with an exit code and their termination
//! message), restarts them by the pod's `restartPolicy` with the kubelet's back-off (10 s
//! doubling to 5 min, in simulated time unless the cluster keeps it in real time:
//! [`ClusterConfig::real_back_off`](super::ClusterConfig::real_back_off)), and kills the ones
//! a startup or liveness probe gave up on.
//!
//! Apart from [`super::kubelet`], which keeps simulating every other container and calls in here
//! for the runnable ones.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{
    Cluster,
    controller_loop::Wake,
    init_containers,
    processes::{Exit, State},
};
use crate::store::{actor::Component, object, registry::Subresource, resources::ResourceType};

/// How often the kubelet looks at running processes (their probes and exits) while a pod has
/// any: they change outside the store, which is what wakes it otherwise.
pub const POLL: Duration = Duration::from_millis(100);

/// The kubelet's first restart back-off; it doubles per restart up to [`MAX_BACK_OFF`].
const BACK_OFF: Duration = Duration::from_secs(10);
/// The kubelet's longest restart back-off (`MaxContainerBackOff`).
const MAX_BACK_OFF: Duration = Duration::from_secs(300);

/// The containers of a pod that run real processes, with their images.
pub fn runnable(cluster: &Cluster, pod: &Value) -> Vec<String> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| cluster.processes.runnable(c["image"].as_str().unwrap_or("")))
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

/// The containers of a running pod that run real processes and that the kubelet keeps
/// running: its main containers, then its sidecars (init containers with `restartPolicy:
/// Always`, restarted whatever their exit), each with the status list that shows it.
fn kept(cluster: &Cluster, pod: &Value) -> Vec<(&'static str, String, bool)> {
    let mains = runnable(cluster, pod).into_iter().map(|n| ("containerStatuses", n, false));
    let sidecars = init_containers::init_containers(pod)
        .into_iter()
        .filter(|(_, image, sidecar)| *sidecar && cluster.processes.runnable(image))
        .map(|(n, ..)| ("initContainerStatuses", n, true));
    mains.chain(sidecars).collect()
}

/// Whether a running pod has containers that run real processes (main ones or sidecars).
pub fn any_kept(cluster: &Cluster, pod: &Value) -> bool {
    !kept(cluster, pod).is_empty()
}

/// Kills a container a startup or liveness probe gave up on, saying so in its log.
pub fn kill_unhealthy(cluster: &Cluster, uid: &str, name: &str) {
    if let Some(log) = cluster.logs.get(uid, name, false) {
        log.write("[sandbox] probe failed its threshold; killing the container to restart it");
    }
    cluster.processes.kill(uid, name);
}

/// When a container that ended (`exit`) after `restarts` earlier restarts may start again:
/// the kubelet's back-off after its end, scaled by the cluster's time factor unless it keeps
/// the back-off in real time.
pub fn restart_due(cluster: &Cluster, exit: &Exit, restarts: u32) -> Instant {
    let back_off = back_off(restarts);
    exit_instant(exit) + if cluster.config.real_back_off { back_off } else { cluster.config.real(back_off) }
}

/// Starts one container's process with a new log instance; a start that fails is shown as a
/// process that exited at once (code 128, as a runtime's StartError), and its log says why.
pub fn start(cluster: &Cluster, pod: &Value, container: &str, ip: &str) {
    let log = cluster.logs.start(object::uid(pod), container);
    let started = cluster.processes.start(cluster, pod, container, ip, log.clone());
    if started.is_ok()
        && let Some(hook) = post_start_hook(pod, container)
    {
        cluster.processes.post_start(object::uid(pod), container, hook, log.clone());
    }
    if let Err(why) = started {
        log.write(format!("[sandbox] cannot start container {container}: {why}"));
        log.exit();
        tracing::warn!(cluster = %cluster.config.name, pod = %object::name(pod), container, error = %why, "container start");
        cluster.processes.failed(object::uid(pod), container, &why);
    }
}

/// A container's `lifecycle.postStart.exec.command`, if it has one.
fn post_start_hook(pod: &Value, container: &str) -> Option<Vec<String>> {
    let c = super::processes::spec::container(pod, container)?;
    let argv: Vec<String> = c
        .pointer("/lifecycle/postStart/exec/command")?
        .as_array()?
        .iter()
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    (!argv.is_empty()).then_some(argv)
}

/// Whether a main container must wait for its start: the `postStart` hook of a main container
/// listed before it still runs (the kubelet starts a pod's containers one after the other, each
/// once the previous one's hook returned).
pub fn held_by_hook(cluster: &Cluster, pod: &Value, container: &str) -> bool {
    let uid = object::uid(pod);
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .take_while(|n| *n != container)
        .any(|n| cluster.processes.hook_running(uid, n))
}

/// The back-off before the restart that follows `restarts` earlier ones.
fn back_off(restarts: u32) -> Duration {
    BACK_OFF.saturating_mul(1u32.checked_shl(restarts.min(16)).unwrap_or(u32::MAX)).min(MAX_BACK_OFF)
}

/// Whether a container that ended with `code` is started again under the pod's policy.
fn restarts(pod: &Value, code: i32) -> bool {
    match pod.pointer("/spec/restartPolicy").and_then(Value::as_str).unwrap_or("Always") {
        "Never" => false,
        "OnFailure" => code != 0,
        _ => true,
    }
}

fn status_of<'a>(pod: &'a Value, list: &str, container: &str) -> Option<&'a Value> {
    pod.pointer(&format!("/status/{list}"))?.as_array()?.iter().find(|c| c["name"] == container)
}

/// `state.terminated` of a container whose process ended, with its termination message.
pub fn terminated(exit: &Exit, container_id: &Value) -> Value {
    let mut state = json!({"terminated": {"exitCode": exit.code, "reason": exit.reason(),
        "startedAt": object::format_time(exit.started), "finishedAt": object::format_time(exit.finished),
        "containerID": container_id}});
    if let Some(message) = exit.message.as_deref().filter(|m| !m.is_empty()) {
        state["terminated"]["message"] = json!(message);
    }
    state
}

/// Brings the pod's runnable containers and their statuses to what their processes do;
/// whether all of them are ready (their probes pass). Asks for the next look while any runs.
pub fn sync(cluster: &Cluster, pods_rt: &ResourceType, pod: &Value, wake: &Wake) -> bool {
    let uid = object::uid(pod);
    let ip = pod.pointer("/status/podIP").and_then(Value::as_str).unwrap_or("").to_string();
    let now = Instant::now();
    let mut all_ready = true;
    let mut statuses: Vec<(&str, String, Value)> = Vec::new();
    // The exit code of each main container that ended for good (its pod's policy starts it no
    // more), `None` for one that runs or will run again; a container this look starts is not
    // counted at all, nor is the pod done then.
    let mut ended: Vec<Option<i32>> = Vec::new();
    let kept = kept(cluster, pod);
    let mains = kept.iter().filter(|(_, _, sidecar)| !*sidecar).count();
    let has_sidecars = mains < kept.len();
    for (list, name, sidecar) in kept {
        let mut ended_with = None;
        let shown = status_of(pod, list, &name).cloned().unwrap_or_else(|| json!({"name": name}));
        let restart_count = shown["restartCount"].as_u64().unwrap_or(0) as u32;
        let mut next = shown.clone();
        match cluster.processes.state(uid, &name) {
            None => {
                // A pod the kubelet runs but whose process is not there (the sandbox's process
                // runtime was enabled later, or an earlier container's postStart hook held it):
                // started now, unless a hook still holds it.
                all_ready = false;
                if !sidecar && held_by_hook(cluster, pod, &name) {
                    wake.at(now + POLL);
                    continue;
                }
                start(cluster, pod, &name, &ip);
            }
            Some(State::Running { started, started_up, ready, unhealthy }) => {
                if unhealthy {
                    kill_unhealthy(cluster, uid, &name);
                    all_ready = false;
                    continue;
                }
                next["state"] = json!({"running": {"startedAt": object::format_time(started)}});
                next["started"] = json!(if sidecar { started_up } else { true });
                next["ready"] = json!(ready);
                all_ready &= ready;
            }
            Some(State::Exited(exit)) => {
                all_ready = false;
                next["ready"] = json!(false);
                next["started"] = json!(false);
                if sidecar || restarts(pod, exit.code) {
                    let due = restart_due(cluster, &exit, restart_count);
                    if now >= due {
                        next["lastState"] = terminated(&exit, &shown["containerID"]);
                        next["restartCount"] = json!(restart_count + 1);
                        next["state"] = json!({"running": {"startedAt": object::now_rfc3339()}});
                        start(cluster, pod, &name, &ip);
                    } else {
                        wake.at(due);
                        next["lastState"] = terminated(&exit, &shown["containerID"]);
                        let message =
                            format!("back-off restarting failed container {name} in pod {}", object::name(pod));
                        next["state"] = json!({"waiting": {"reason": "CrashLoopBackOff", "message": message}});
                    }
                } else {
                    next["state"] = terminated(&exit, &shown["containerID"]);
                    ended_with = Some(exit.code);
                }
            }
        }
        if !sidecar {
            ended.push(ended_with);
        }
        if next != shown {
            statuses.push((list, name, next));
        }
    }
    let phase = if ended.len() == mains { completed_phase(&ended, has_sidecars) } else { None };
    let phase_due = phase.is_some_and(|p| pod.pointer("/status/phase").and_then(Value::as_str) != Some(p));
    if !statuses.is_empty() || phase_due {
        let written = cluster.update_incarnation(pods_rt, pod, Subresource::Status, Component::Kubelet, |p| {
            for (list, name, s) in &statuses {
                let shown = p.pointer_mut(&format!("/status/{list}")).and_then(Value::as_array_mut);
                if let Some(c) = shown.and_then(|cs| cs.iter_mut().find(|c| c["name"] == name.as_str())) {
                    *c = s.clone();
                }
            }
            if let Some(phase) = phase {
                p["status"]["phase"] = json!(phase);
            }
        });
        if let Err(e) = written {
            tracing::debug!(cluster = %cluster.config.name, pod = %object::name(pod), error = %e, "container statuses");
        }
    }
    if cluster.processes.running(uid) {
        wake.at(now + POLL);
    }
    all_ready
}

/// The phase of a pod all of whose main containers ended for good (`ended` holds each one's exit
/// code, `None` for one that runs or will run again), as the kubelet computes it: `Succeeded`
/// when each exited 0, `Failed` otherwise; `None` while any may still run. A pod with sidecars
/// is left to its deletion: the kubelet would stop them first, which is not modelled.
fn completed_phase(ended: &[Option<i32>], has_sidecars: bool) -> Option<&'static str> {
    if has_sidecars || ended.is_empty() || ended.iter().any(Option::is_none) {
        return None;
    }
    Some(if ended.iter().all(|c| *c == Some(0)) { "Succeeded" } else { "Failed" })
}

/// The ledger of a pod of real processes follows its workload (see [`super::ledger`]): a run
/// begins when a process of it is seen running, from when that process started, and ends when
/// none is. Kept for every pod whose containers run real processes, whatever its kubelet's
/// state: a node cut off keeps its processes, and what they do is what ran.
pub fn follow_workload(cluster: &Cluster, pod: &Value, node: &str) {
    let uid = object::uid(pod);
    let name = &cluster.config.name;
    let open = cluster.ledger.is_open(name, uid);
    match (cluster.processes.workload_since(uid), open) {
        (Some(since), false) => cluster.ledger.resumed(super::ledger::Incarnation {
            cluster: name.clone(),
            namespace: object::namespace(pod).to_string(),
            pod: object::name(pod).to_string(),
            uid: uid.to_string(),
            node: node.to_string(),
            identity: super::ledger::identity_of(pod),
            running_from: since,
            running_until: None,
            images: super::kubelet::containers(pod).into_iter().map(|(_, image)| image).collect(),
            ready_periods: vec![],
            image_changes: vec![],
        }),
        (None, true) => cluster.ledger.stopped(name, uid, jiff::Timestamp::now()),
        _ => {}
    }
}

/// The instant on this machine's monotonic clock when a process ended.
fn exit_instant(exit: &Exit) -> Instant {
    let ago = jiff::Timestamp::now().duration_since(exit.finished);
    let ago = Duration::try_from(ago).unwrap_or_default();
    Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_done_once_every_main_container_ended_for_good() {
        assert_eq!(completed_phase(&[Some(0), Some(0)], false), Some("Succeeded"));
        assert_eq!(completed_phase(&[Some(0), Some(3)], false), Some("Failed"));
        assert_eq!(completed_phase(&[Some(0), None], false), None, "one still runs");
        assert_eq!(completed_phase(&[Some(0)], true), None, "its sidecars would be stopped first");
        assert_eq!(completed_phase(&[], false), None);
    }

    #[test]
    fn the_back_off_doubles_from_ten_seconds_to_five_minutes() {
        let secs: Vec<u64> = (0..7).map(|n| back_off(n).as_secs()).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(back_off(40), MAX_BACK_OFF);
    }

    #[test]
    fn the_restart_policy_decides_who_starts_again() {
        let pod = |policy: &str| json!({"spec": {"restartPolicy": policy}});
        assert!(restarts(&pod("Always"), 0) && restarts(&json!({}), 0));
        assert!(restarts(&pod("OnFailure"), 1) && !restarts(&pod("OnFailure"), 0));
        assert!(!restarts(&pod("Never"), 1));
    }
}
