//! The kubelet's init stage for pods whose init containers run real processes (see
//! [`super::processes`]), as the Kubernetes docs describe it ("Init Containers",
//! kubernetes.io/docs/concepts/workloads/pods/init-containers/; "Sidecar Containers",
//! kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/):
//!
//! - `spec.initContainers` run one at a time, in order, each to a successful exit, before any
//!   of `spec.containers` starts; the pod stays `Pending` with its `Initialized` condition False
//!   meanwhile, and `status.initContainerStatuses` shows each one.
//! - A failing init container is restarted on the kubelet's back-off unless the pod's
//!   `restartPolicy` is `Never`, which fails the pod.
//! - An init container with `restartPolicy: Always` is a sidecar: once it runs (and its
//!   `startupProbe`, if any, passed) the next one starts; it keeps running beside the main
//!   containers, restarted whenever it exits, and is stopped after them (the sidecars in the
//!   reverse of their order).
//!
//! A pod whose init containers run real processes runs only real ones: a pod mixing runnable
//! and simulated images is never started ([`super::processes::Processes::refusals`]). Pods
//! whose containers are all simulated keep the sandbox's old behaviour: their init containers
//! are not shown.

use std::time::Instant;

use serde_json::{Value, json};

use super::{
    Cluster,
    container_processes::{self, POLL},
    controller_loop::Wake,
    processes::State,
};
use crate::store::{actor::Component, object, registry::Subresource, resources::ResourceType};

/// What one init container's process is doing, as the decision of what to start next needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Not started yet.
    NotStarted,
    /// Running; `started_up` once it runs its command and its startup probe (if any) passed.
    Running {
        /// Whether it has started up.
        started_up: bool,
    },
    /// Ended with `code`; `restart_due` when it is to start again now (its back-off is over).
    Exited {
        /// Its exit code.
        code: i32,
        /// Whether it restarts now.
        restart_due: bool,
    },
}

/// One init container, for [`next`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Init {
    /// Whether it is a sidecar (`restartPolicy: Always`).
    pub sidecar: bool,
    /// What its process does.
    pub view: View,
}

/// What the kubelet does next in a pod's init stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Start (or restart) the init container at this index.
    Start(usize),
    /// Wait: one runs, or backs off.
    Wait,
    /// Every init container is done (the sidecars run): the main containers start.
    Done,
    /// One failed under `restartPolicy: Never`: the pod fails.
    Failed,
}

/// The kubelet's next step in a pod's init stage: the first init container, in order, that is
/// not done decides — not started: start it; a regular one running, or a sidecar not started
/// up yet: wait; a regular one failed: restart it when its back-off is over, or fail the pod
/// under `Never`; a sidecar that exited: restart it when due. Regular ones that exited 0 and
/// sidecars that run are done.
pub fn next(inits: &[Init], never: bool) -> Step {
    for (i, init) in inits.iter().enumerate() {
        match (init.sidecar, init.view) {
            (_, View::NotStarted) => return Step::Start(i),
            (true, View::Running { started_up: true }) | (false, View::Exited { code: 0, .. }) => continue,
            (_, View::Running { .. }) => return Step::Wait,
            (false, View::Exited { .. }) if never => return Step::Failed,
            (_, View::Exited { restart_due: true, .. }) => return Step::Start(i),
            (_, View::Exited { .. }) => return Step::Wait,
        }
    }
    Step::Done
}

/// Whether a container of the spec is a sidecar: an init container with `restartPolicy:
/// Always`. Releases without sidecars (before 1.29) never store the field (see
/// [`crate::cluster::release::Release::runs_sidecars`]), so their pods have none.
pub fn is_sidecar(container: &Value) -> bool {
    container["restartPolicy"] == "Always"
}

/// The init containers of a pod: name, image and whether each is a sidecar.
pub fn init_containers(pod: &Value) -> Vec<(String, String, bool)> {
    pod.pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            (c["name"].as_str().unwrap_or("").to_string(), c["image"].as_str().unwrap_or("").to_string(), is_sidecar(c))
        })
        .collect()
}

/// The names of a pod's sidecars.
pub fn sidecars(pod: &Value) -> Vec<String> {
    init_containers(pod).into_iter().filter(|(_, _, s)| *s).map(|(n, ..)| n).collect()
}

/// Whether the kubelet runs an init stage for the pod: one of its init containers runs a real
/// process.
pub fn has_runnable(cluster: &Cluster, pod: &Value) -> bool {
    init_containers(pod).iter().any(|(_, image, _)| cluster.processes.runnable(image))
}

/// Where a pod's init stage stands after a [`sync`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// Still initializing.
    Initializing,
    /// Every init container is done: the main containers start.
    Initialized,
    /// An init container failed under `restartPolicy: Never`.
    Failed,
}

fn shown<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    pod.pointer("/status/initContainerStatuses")?.as_array()?.iter().find(|c| c["name"] == name)
}

fn fresh(name: &str, image: &str) -> Value {
    json!({"name": name, "image": image, "imageID": "", "ready": false, "started": false, "restartCount": 0,
           "state": {"waiting": {"reason": "PodInitializing"}}})
}

/// The `initContainerStatuses` of a pod none of whose init containers has started.
fn waiting(pod: &Value) -> Vec<Value> {
    init_containers(pod).iter().map(|(name, image, _)| fresh(name, image)).collect()
}

/// Takes the pod's init stage one step (starting the next init container, or restarting one)
/// and returns where it stands with the `initContainerStatuses` to show, in spec order. Asks
/// for the next look while a process runs or a back-off is pending.
fn sync(cluster: &Cluster, pod: &Value, ip: &str, wake: &Wake) -> (Progress, Vec<Value>) {
    let uid = object::uid(pod);
    let now = Instant::now();
    let never = pod.pointer("/spec/restartPolicy").and_then(Value::as_str) == Some("Never");
    let specs = init_containers(pod);
    let mut inits = Vec::new();
    let mut statuses = Vec::new();
    for (name, image, sidecar) in &specs {
        let shown = shown(pod, name).cloned().unwrap_or_else(|| fresh(name, image));
        let mut next = shown.clone();
        let view = if !cluster.processes.runnable(image) {
            // (Not reached: a pod mixing simulated and real containers is not started.) A
            // simulated init container completes as soon as its turn comes.
            if shown.pointer("/state/terminated").is_none() {
                let at = object::now_rfc3339();
                next["state"] =
                    json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": at, "finishedAt": at}});
                next["ready"] = json!(true);
            }
            View::Exited { code: 0, restart_due: false }
        } else {
            match cluster.processes.state(uid, name) {
                None => View::NotStarted,
                Some(State::Running { started, started_up, ready, unhealthy }) => {
                    if unhealthy {
                        container_processes::kill_unhealthy(cluster, uid, name);
                    }
                    next["state"] = json!({"running": {"startedAt": object::format_time(started)}});
                    next["started"] = json!(started_up && !unhealthy);
                    next["ready"] = json!(*sidecar && ready && !unhealthy);
                    View::Running { started_up: started_up && !unhealthy }
                }
                Some(State::Exited(exit)) => {
                    next["started"] = json!(false);
                    let restarts = *sidecar || (exit.code != 0 && !never);
                    let terminated = container_processes::terminated(&exit, &shown["containerID"]);
                    if restarts {
                        let count = shown["restartCount"].as_u64().unwrap_or(0) as u32;
                        let due = container_processes::restart_due(cluster, &exit, count);
                        next["lastState"] = terminated;
                        next["ready"] = json!(false);
                        if now < due {
                            wake.at(due);
                            let message =
                                format!("back-off restarting failed container {name} in pod {}", object::name(pod));
                            next["state"] = json!({"waiting": {"reason": "CrashLoopBackOff", "message": message}});
                        }
                        View::Exited { code: exit.code, restart_due: now >= due }
                    } else {
                        next["state"] = terminated;
                        next["ready"] = json!(exit.code == 0);
                        View::Exited { code: exit.code, restart_due: false }
                    }
                }
            }
        };
        inits.push(Init { sidecar: *sidecar, view });
        statuses.push(next);
    }
    let progress = match next(&inits, never) {
        Step::Start(i) => {
            let (name, ..) = &specs[i];
            container_processes::start(cluster, pod, name, ip);
            let s = &mut statuses[i];
            if matches!(inits[i].view, View::Exited { .. }) {
                s["restartCount"] = json!(s["restartCount"].as_u64().unwrap_or(0) + 1);
            }
            s["state"] = json!({"running": {"startedAt": object::now_rfc3339()}});
            s["started"] = json!(false);
            Progress::Initializing
        }
        Step::Wait => Progress::Initializing,
        Step::Done => Progress::Initialized,
        Step::Failed => Progress::Failed,
    };
    if cluster.processes.running(uid) {
        wake.at(now + POLL);
    }
    (progress, statuses)
}

/// Runs a Pending pod's init stage on IP `ip` of node address `host_ip`, writing what it shows;
/// once every init container is done and the pod showed it (`Initialized` True, its main
/// containers still `PodInitializing`, as a kubelet shows them before it starts them), returns
/// their final statuses for the write that starts the main containers; else `None`. The pod
/// shows its IP before the first init container starts, so that they all run on it; a pod
/// failed under `Never` stops what still runs (its sidecars).
pub fn stage(
    cluster: &Cluster,
    pods_rt: &ResourceType,
    pod: &Value,
    ip: &str,
    host_ip: &str,
    wake: &Wake,
) -> Option<Vec<Value>> {
    let write = |statuses: Vec<Value>, progress: Progress| {
        let written = cluster.update_incarnation(pods_rt, pod, Subresource::Status, Component::Kubelet, |p| {
            set_initializing(p, statuses, ip, host_ip, progress)
        });
        if let Err(e) = written {
            tracing::debug!(cluster = %cluster.config.name, pod = %object::name(pod), error = %e, "init statuses");
        }
    };
    if pod.pointer("/status/podIP").and_then(Value::as_str).is_none_or(str::is_empty) {
        write(waiting(pod), Progress::Initializing);
        return None;
    }
    let (progress, statuses) = sync(cluster, pod, ip, wake);
    match progress {
        Progress::Initialized if initialized(pod) => return Some(statuses),
        Progress::Failed => {
            let now = Instant::now();
            cluster.processes.terminate(object::uid(pod), |_| true, now);
            cluster.processes.enforce(now);
        }
        Progress::Initialized | Progress::Initializing => {}
    }
    write(statuses, progress);
    None
}

/// Whether the pod's `Initialized` condition is True.
fn initialized(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Initialized" && c["status"] == "True"))
}

/// Shows a pod in its init stage: its sandbox up (IPs, start time), `inits` as its
/// `initContainerStatuses`, its main containers waiting (`PodInitializing`), and its
/// `Initialized` condition False naming the init containers not done — True once `progress`
/// says they all are, and the pod `Failed` when one failed under `Never`.
fn set_initializing(pod: &mut Value, inits: Vec<Value>, ip: &str, host_ip: &str, progress: Progress) {
    let failed = progress == Progress::Failed;
    let now = object::now_rfc3339();
    let pending: Vec<String> = inits
        .iter()
        .filter(|s| s.pointer("/state/terminated/exitCode").and_then(Value::as_i64) != Some(0))
        .filter_map(|s| s["name"].as_str().map(str::to_string))
        .collect();
    let mains = object::container_images(pod);
    let status = &mut pod["status"];
    status["phase"] = json!(if failed { "Failed" } else { "Pending" });
    status["podIP"] = json!(ip);
    status["podIPs"] = json!([{"ip": ip}]);
    status["hostIP"] = json!(host_ip);
    if status.get("startTime").is_none() {
        status["startTime"] = json!(now);
    }
    status["initContainerStatuses"] = json!(inits);
    if status.get("containerStatuses").is_none_or(Value::is_null) {
        let waiting: Vec<Value> = mains
            .iter()
            .map(|(name, image)| {
                json!({"name": name, "image": image, "imageID": "", "ready": false, "started": false,
                       "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}})
            })
            .collect();
        status["containerStatuses"] = json!(waiting);
    }
    let names: Vec<&str> = mains.iter().map(|(n, _)| n.as_str()).collect();
    let initialized = match progress {
        Progress::Initialized => json!({"type": "Initialized", "status": "True", "lastTransitionTime": now}),
        _ => json!({"type": "Initialized", "status": "False", "reason": "ContainersNotInitialized",
            "message": format!("containers with incomplete status: [{}]", pending.join(" ")), "lastTransitionTime": now}),
    };
    let unready = format!("containers with unready status: [{}]", names.join(" "));
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    for c in [
        initialized,
        json!({"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady", "message": unready, "lastTransitionTime": now}),
        json!({"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": unready, "lastTransitionTime": now}),
    ] {
        match conditions.iter_mut().find(|e| e["type"] == c["type"]) {
            Some(e) if e["status"] != c["status"] || e["message"] != c["message"] => *e = c,
            Some(_) => {}
            None => conditions.push(c),
        }
    }
    status["conditions"] = json!(conditions);
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGULAR: bool = false;
    const SIDECAR: bool = true;

    fn init(sidecar: bool, view: View) -> Init {
        Init { sidecar, view }
    }

    #[test]
    fn init_containers_run_one_at_a_time_in_order_each_to_success() {
        let done = View::Exited { code: 0, restart_due: false };
        let running = View::Running { started_up: true };
        assert_eq!(next(&[init(REGULAR, View::NotStarted), init(REGULAR, View::NotStarted)], false), Step::Start(0));
        assert_eq!(
            next(&[init(REGULAR, running), init(REGULAR, View::NotStarted)], false),
            Step::Wait,
            "one at a time"
        );
        assert_eq!(next(&[init(REGULAR, done), init(REGULAR, View::NotStarted)], false), Step::Start(1));
        assert_eq!(next(&[init(REGULAR, done), init(REGULAR, done)], false), Step::Done);
        assert_eq!(next(&[], false), Step::Done);
    }

    #[test]
    fn a_failed_init_container_is_retried_when_due_or_fails_the_pod_under_never() {
        let failed = |due| View::Exited { code: 1, restart_due: due };
        let later = init(REGULAR, View::NotStarted);
        assert_eq!(next(&[init(REGULAR, failed(false)), later], false), Step::Wait, "backing off");
        assert_eq!(next(&[init(REGULAR, failed(true)), later], false), Step::Start(0));
        assert_eq!(next(&[init(REGULAR, failed(true)), later], true), Step::Failed);
    }

    #[test]
    fn a_sidecar_lets_the_next_start_once_started_up_and_is_restarted_when_it_exits() {
        let main = init(REGULAR, View::NotStarted);
        assert_eq!(next(&[init(SIDECAR, View::Running { started_up: false }), main], false), Step::Wait);
        assert_eq!(next(&[init(SIDECAR, View::Running { started_up: true }), main], false), Step::Start(1));
        assert_eq!(next(&[init(SIDECAR, View::Running { started_up: true })], false), Step::Done, "it never exits");
        let exited = |due| init(SIDECAR, View::Exited { code: 0, restart_due: due });
        assert_eq!(next(&[exited(true), main], true), Step::Start(0), "restarted even under Never");
        assert_eq!(next(&[exited(false), main], false), Step::Wait);
    }
}
