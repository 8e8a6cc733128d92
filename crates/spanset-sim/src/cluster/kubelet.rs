//! The node side of a simulated cluster: node registration, the scheduler, one kubelet per
//! node (pods go Pending → Running → Ready after configurable delays; graceful termination
//! ends with the kubelet's final delete), and the node-lifecycle controller (a node whose
//! kubelet stops is marked Unknown after the monitor grace period, tainted unreachable, and
//! its pods are evicted after the toleration — they then stay Terminating, never replaced,
//! until force-deleted: the at-most-one behaviour of
//! <https://kubernetes.io/docs/tasks/run-application/force-delete-stateful-set-pod/>).
//!
//! What runs is recorded in the ledger as a StatefulSet fears it (see
//! [`crate::cluster::ledger`]): a node out of reach keeps running its containers, a
//! powered-off node stops them at once and restarts the bound ones when it powers on, and a
//! live kubelet kills the containers of a pod whose object is gone.
//!
//! An image the cluster cannot pull (see [`crate::cluster::images`]) keeps a new pod
//! Pending — none of its containers start — with the container `ErrImagePull`, then
//! `ImagePullBackOff`, retried on the kubelet's back-off; an in-place image change to such an
//! image stops the old container and leaves the pod Running, that container waiting and the pod
//! unready, until a retry pulls the image.
//!
//! Runs as one task per cluster, in level-triggered sweeps woken by changes and by its own
//! timers' deadlines (see [`crate::cluster::controller_loop`]). Its timers live in the task
//! (not in objects), measured in real time scaled by the cluster's time factor.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::{
    cluster::{
        Cluster, SHUTDOWN_ANNOTATION, container_processes,
        controller_loop::Wake,
        faults::NodeOutage,
        images::{self, Pull, Pulls},
        init_containers,
        ledger::{self, Incarnation},
        network::{self, PodIps},
        node_events::{NodeEvents, Unfit},
        pod_sandbox, processes, volumes,
    },
    store::{
        account::Verb,
        actor::Component,
        object,
        registry::{DeleteOptions, Subresource, WriteOptions},
        resources::ResourceType,
        storage::Updated,
    },
};

/// Taint put on nodes whose kubelet stopped posting status.
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// Taint whose toleration lets a pod onto a cordoned node.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// The kubelet task's memory of when each pod entered its current stage, and its Events.
struct Timers {
    /// Pod uid → when it was bound, started running, or started terminating.
    since: HashMap<String, (Stage, Instant)>,
    /// Node → when it was tainted unreachable.
    tainted: HashMap<String, Instant>,
    /// The pod IPs of the nodes' CIDRs: held, and handed out.
    ips: PodIps,
    /// The scheduler's, kubelets' and node controllers' Events.
    events: NodeEvents,
    /// The kubelets' image pulls that failed, with their back-off.
    pulls: Pulls,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Scheduled,
    Running,
    Terminating,
}

/// Node names of a cluster.
pub fn node_names(cluster: &Cluster) -> Vec<String> {
    (1..=cluster.config.nodes).map(|i| format!("node-{i}")).collect()
}

/// The index `i` of `node-i` (0 for names the sandbox did not make), which numbers the
/// node's addresses as a cluster's network would.
fn node_index(node: &str) -> u32 {
    node.strip_prefix("node-").and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// The node's InternalIP, which pods report as their hostIP.
fn host_ip(node: &str) -> String {
    format!("192.168.0.{}", (node_index(node) + 10) % 256)
}

/// Runs the node side of a cluster until the cluster is dropped.
pub async fn run(cluster: Weak<Cluster>) {
    let Some(c) = cluster.upgrade() else { return };
    register_nodes(&c);
    let mut timers = Timers {
        since: HashMap::new(),
        tainted: HashMap::new(),
        ips: PodIps::new(c.config.pod_network()),
        events: NodeEvents::new(&c),
        pulls: Pulls::default(),
    };
    drop(c);
    crate::cluster::controller_loop::run(cluster, crate::cluster::controller_loop::UNREAD_BY_WORKLOADS, |c, wake| {
        sweep(c, &mut timers, wake)
    })
    .await;
}

fn rt(cluster: &Cluster, plural: &str) -> Arc<ResourceType> {
    cluster.resources.by_plural("", plural).expect("core resources are built in")
}

fn register_nodes(cluster: &Cluster) {
    let nodes = rt(cluster, "nodes");
    let cidr = |node: &str| network::node_pod_cidr(cluster.config.pod_network(), node_index(node));
    for name in node_names(cluster) {
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": format!("{}-a", cluster.config.name)}},
            "spec": {"podCIDR": cidr(&name), "podCIDRs": [cidr(&name)]},
            "status": {
                "conditions": [ready_condition("True", "KubeletReady", "kubelet is posting ready status")],
                "addresses": [{"type": "InternalIP", "address": host_ip(&name)}, {"type": "Hostname", "address": name}],
                "nodeInfo": {"kubeletVersion": cluster.config.release.git_version(), "kubeProxyVersion": cluster.config.release.git_version(),
                             "containerRuntimeVersion": "containerd://1.7.0", "operatingSystem": "linux", "architecture": "amd64",
                             "osImage": "Ubuntu 22.04.4 LTS", "kernelVersion": "5.15.0-105-generic"},
                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            },
        });
        let _ = cluster.create(&nodes, None, node, &WriteOptions::by(Component::Kubelet));
    }
}

fn ready_condition(status: &str, reason: &str, message: &str) -> Value {
    let now = object::now_rfc3339();
    json!({"type": "Ready", "status": status, "reason": reason, "message": message, "lastHeartbeatTime": now, "lastTransitionTime": now})
}

fn node_ready(node: &Value) -> Option<&str> {
    node.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == "Ready")?.get("status")?.as_str()
}

/// Whether the node is cordoned (`spec.unschedulable`, as `kubectl cordon` and `drain` set it).
fn cordoned(node: &Value) -> bool {
    node.pointer("/spec/unschedulable").and_then(Value::as_bool).unwrap_or(false)
}

/// Whether the pod tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint, and so
/// may still go to a cordoned node (the scheduler's NodeUnschedulable plugin).
fn tolerates_cordon(pod: &Value) -> bool {
    pod.pointer("/spec/tolerations").and_then(Value::as_array).into_iter().flatten().any(|t| {
        let key = t.get("key").and_then(Value::as_str).unwrap_or("");
        let exists = t.get("operator").and_then(Value::as_str) == Some("Exists");
        let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
        (key == UNSCHEDULABLE_TAINT || (key.is_empty() && exists)) && (effect.is_empty() || effect == "NoSchedule")
    })
}

fn has_unreachable_taint(node: &Value) -> bool {
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().any(|t| t["key"] == UNREACHABLE_TAINT))
}

/// One pass over nodes and pods.
fn sweep(cluster: &Cluster, timers: &mut Timers, wake: &Wake) {
    cluster.counters.kubelet_sweeps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nodes_rt = rt(cluster, "nodes");
    let pods_rt = rt(cluster, "pods");
    let (nodes, _) = cluster.storage.list(&(String::new(), "nodes".into()), None);
    let (pods, _) = cluster.storage.list(&(String::new(), "pods".into()), None);
    timers.ips.refresh(&pods);
    node_lifecycle(cluster, &nodes_rt, &pods_rt, &nodes, &pods, timers, wake);
    // Pods whose sandbox a restarted machine made anew: their objects as listed above are older
    // than that, so they wait for the next sweep.
    let renewed = machines(cluster, &pods_rt, &pods, timers);
    let kubelets = node_names(cluster);
    let schedulable: Vec<&str> = nodes
        .iter()
        .filter(|n| kubelets.iter().any(|k| k == object::name(n)))
        .filter(|n| {
            node_ready(n) == Some("True")
                && !has_unreachable_taint(n)
                && cluster.faults.node_down_since(object::name(n)).is_none()
        })
        .map(|n| object::name(n))
        .collect();
    let mut load: HashMap<&str, usize> = schedulable.iter().map(|n| (*n, 0)).collect();
    for p in &pods {
        if let Some(n) = p.pointer("/spec/nodeName").and_then(Value::as_str)
            && let Some(l) = load.get_mut(n)
        {
            *l += 1;
        }
    }
    for pod in &pods {
        let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
        if node.is_empty() {
            // A gated pod is not considered at all (no FailedScheduling either) until its last
            // scheduling gate is removed, as the scheduler's SchedulingGates plugin does.
            let held = cluster.config.release.honours_scheduling_gates() && scheduling_gated(pod);
            if !object::is_deleting(pod) && !held {
                schedule(cluster, &pods_rt, pod, &nodes, &mut load, timers);
            }
            continue;
        }
        // Only the simulated nodes have kubelets; a Node object created through the API has
        // none, like a node whose machine never came up.
        if cluster.faults.node_down_since(node).is_some()
            || !kubelets.iter().any(|k| k == node)
            || renewed.iter().any(|u| u == object::uid(pod))
        {
            continue;
        }
        kubelet(cluster, &pods_rt, pod, node, timers, wake);
    }
    // What the processes do is recorded whatever their kubelet can do (a node cut off keeps
    // them running); a machine powered off has none.
    if cluster.processes.enabled() {
        for pod in &pods {
            let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
            if !node.is_empty()
                && !renewed.iter().any(|u| u == object::uid(pod))
                && container_processes::any_kept(cluster, pod)
            {
                container_processes::follow_workload(cluster, pod, node);
                for (container, kind, said) in cluster.processes.probe_failures(object::uid(pod)) {
                    timers.events.unhealthy(cluster, pod, node, &container, kind.name(), &said);
                }
            }
        }
        if !cluster.processes.pods().is_empty() {
            wake.at(Instant::now() + container_processes::POLL);
        }
    }
    let live: std::collections::HashSet<&str> = pods.iter().map(|p| object::uid(p)).collect();
    timers.since.retain(|uid, _| live.contains(uid.as_str()));
    timers.pulls.retain(&live);
    timers.events.tick(cluster, &live, wake);
    if let Some(at) = timers.pulls.next_sync() {
        wake.at(at);
    }
    cluster.logs.retain_pods(&live);
}

/// Whether a pod still has scheduling gates (`spec.schedulingGates` non-empty).
pub fn scheduling_gated(pod: &Value) -> bool {
    pod.pointer("/spec/schedulingGates").and_then(Value::as_array).is_some_and(|g| !g.is_empty())
}

/// The node a pod must run on because one of its volumes is local to it, if any.
fn required_node(cluster: &Cluster, pod: &Value) -> Option<String> {
    let ns = object::namespace(pod);
    let claims = pod.pointer("/spec/volumes").and_then(Value::as_array)?;
    claims.iter().filter_map(|v| v.pointer("/persistentVolumeClaim/claimName").and_then(Value::as_str)).find_map(
        |claim| {
            let pvc = cluster.storage.get(&(String::new(), "persistentvolumeclaims".into()), ns, claim)?;
            let pv_name = pvc.pointer("/spec/volumeName").and_then(Value::as_str)?;
            let pv = cluster.storage.get(&(String::new(), "persistentvolumes".into()), "", pv_name)?;
            volumes::pv_node(&pv).map(str::to_string)
        },
    )
}

/// Why the scheduler would not put a pod on a node, if it would not (`required` is the node
/// the pod's local volume ties it to).
fn unfit(cluster: &Cluster, node: &Value, pod: &Value, required: Option<&str>) -> Option<Unfit> {
    let name = object::name(node);
    if cordoned(node) && !tolerates_cordon(pod) {
        Some(Unfit::Unschedulable)
    } else if has_unreachable_taint(node) {
        Some(Unfit::Unreachable)
    } else if node_ready(node) != Some("True") || cluster.faults.node_down_since(name).is_some() {
        Some(Unfit::NotReady)
    } else if required.is_some_and(|r| r != name) {
        Some(Unfit::VolumeAffinity)
    } else {
        None
    }
}

fn schedule(
    cluster: &Cluster,
    pods_rt: &ResourceType,
    pod: &Value,
    nodes: &[Arc<Value>],
    load: &mut HashMap<&str, usize>,
    timers: &mut Timers,
) {
    // A pod whose volume is local to a node goes there or nowhere (it stays Pending while that
    // node is down); otherwise the least-loaded ready node, ties broken by name.
    let required = required_node(cluster, pod);
    // A cordoned node takes no new pod unless the pod tolerates it.
    let open = |n: &str| {
        tolerates_cordon(pod) || nodes.iter().find(|node| object::name(node) == n).is_none_or(|node| !cordoned(node))
    };
    let chosen = match &required {
        Some(n) if load.contains_key(n.as_str()) && open(n) => Some(n.clone()),
        Some(_) => None,
        None => load.iter().filter(|(n, _)| open(n)).min_by_key(|(n, l)| (**l, **n)).map(|(n, _)| n.to_string()),
    };
    let Some(node) = chosen else {
        let reasons: Vec<Unfit> = nodes.iter().filter_map(|n| unfit(cluster, n, pod, required.as_deref())).collect();
        timers.events.failed_scheduling(cluster, pod, &reasons);
        return;
    };
    let ns = object::namespace(pod);
    let res = (String::new(), "pods".to_string());
    let bound = cluster.storage.update(pods_rt, &res, ns, object::name(pod), |cur| {
        let mut next = (**cur).clone();
        if !next.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("").is_empty() {
            return Ok(next);
        }
        next["spec"]["nodeName"] = json!(node);
        next["status"]["conditions"] =
            json!([{"type": "PodScheduled", "status": "True", "lastTransitionTime": object::now_rfc3339()}]);
        Ok(next)
    });
    if let Ok(b) = bound {
        let verb = if matches!(b, Updated::Unchanged(_)) { Verb::Unchanged } else { Verb::Updated };
        cluster.account.record(pods_rt, &Component::Scheduler.into(), verb, b.object());
        if let Some(l) = load.get_mut(node.as_str()) {
            *l += 1;
        }
        timers.since.insert(object::uid(b.object()).to_string(), (Stage::Scheduled, Instant::now()));
        timers.events.scheduled(cluster, b.object(), &node);
    }
}

fn write_status(cluster: &Cluster, pods_rt: &ResourceType, pod: &Value, f: impl FnOnce(&mut Value)) -> bool {
    cluster.update_incarnation(pods_rt, pod, Subresource::Status, Component::Kubelet, f).is_ok()
}

pub(super) fn containers(pod: &Value) -> Vec<(String, String)> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| (c["name"].as_str().unwrap_or("").to_string(), c["image"].as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn set_running(pod: &mut Value, ip: &str, host_ip: &str) {
    let now = object::now_rfc3339();
    // A container started again in a recreated sandbox keeps its count and last state.
    let before = |name: &str, field: &str| {
        pod.pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["name"] == name))
            .and_then(|c| c.get(field))
            .cloned()
    };
    let statuses: Vec<Value> = containers(pod)
        .into_iter()
        .map(|(name, image)| {
            let restarts = before(&name, "restartCount").unwrap_or(json!(0));
            let mut s = json!({"name": name, "image": image, "imageID": "", "containerID": format!("containerd://{name}"),
                   "ready": false, "started": true, "restartCount": restarts, "state": {"running": {"startedAt": now}}});
            if let Some(last) = before(&name, "lastState").filter(|l| !l.is_null()) {
                s["lastState"] = last;
            }
            s
        })
        .collect();
    let status = &mut pod["status"];
    status["phase"] = json!("Running");
    status["podIP"] = json!(ip);
    status["podIPs"] = json!([{"ip": ip}]);
    status["hostIP"] = json!(host_ip);
    status["startTime"] = json!(now);
    status["containerStatuses"] = json!(statuses);
    // Conditions others own (a readiness gate's, set by its controller) stay.
    let own = ["PodScheduled", "Initialized", "ContainersReady", "Ready"];
    let mut conditions: Vec<Value> = status["conditions"]
        .as_array()
        .map(|cs| cs.iter().filter(|c| !own.iter().any(|t| c["type"] == *t)).cloned().collect())
        .unwrap_or_default();
    conditions.extend([
        json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": now}),
        json!({"type": "Initialized", "status": "True", "lastTransitionTime": now}),
        json!({"type": "ContainersReady", "status": "False", "lastTransitionTime": now}),
        json!({"type": "Ready", "status": "False", "lastTransitionTime": now}),
    ]);
    status["conditions"] = json!(conditions);
}

/// Sets `ContainersReady` (and each container's `ready`) to `containers`, and `Ready` to
/// `ready` (which the pod's readiness gates may hold False while its containers are ready), at
/// `at` on the cluster's clock ([`Cluster::clock`]).
fn set_ready(pod: &mut Value, containers: bool, ready: bool, at: jiff::Timestamp) {
    let now = object::format_time(at);
    let word = |b: bool| if b { "True" } else { "False" };
    if let Some(conds) = pod.pointer_mut("/status/conditions").and_then(Value::as_array_mut) {
        for c in conds.iter_mut() {
            let value = match c["type"].as_str() {
                Some("Ready") => word(ready),
                Some("ContainersReady") => word(containers),
                _ => continue,
            };
            if c["status"] != value {
                c["status"] = json!(value);
                c["lastTransitionTime"] = json!(now);
            }
        }
    }
    if let Some(cs) = pod.pointer_mut("/status/containerStatuses").and_then(Value::as_array_mut) {
        for c in cs {
            c["ready"] = json!(containers);
        }
    }
}

fn condition_true(pod: &Value, kind: &str) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// Whether every readiness gate of the pod (`spec.readinessGates`) has its condition True.
fn gates_pass(pod: &Value) -> bool {
    pod.pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|g| g["conditionType"].as_str())
        .all(|kind| condition_true(pod, kind))
}

/// Containers whose image in the spec differs from the one running (an in-place update).
fn changed_containers(pod: &Value) -> Vec<String> {
    let running: BTreeMap<&str, &str> = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| (c["name"].as_str().unwrap_or(""), c["image"].as_str().unwrap_or("")))
        .collect();
    containers(pod)
        .into_iter()
        .filter(|(name, image)| running.get(name.as_str()).is_some_and(|r| r != image))
        .map(|(name, _)| name)
        .collect()
}

/// Restarts `changed` containers with their new image: the old instance terminated, a new one
/// running (not ready yet) and the restart counted — or, for those in `waiting` (their image
/// could not be pulled), waiting in that state; the pod is no longer Ready.
fn restart_containers(pod: &mut Value, changed: &[String], waiting: &BTreeMap<String, Value>, at: jiff::Timestamp) {
    let now = object::now_rfc3339();
    let images: BTreeMap<String, String> = containers(pod).into_iter().collect();
    if let Some(cs) = pod.pointer_mut("/status/containerStatuses").and_then(Value::as_array_mut) {
        for c in cs.iter_mut().filter(|c| changed.iter().any(|n| c["name"] == n.as_str())) {
            let name = c["name"].as_str().unwrap_or("").to_string();
            // A container already waiting (a second image change) keeps its last termination.
            if let Some(started) = c.pointer("/state/running/startedAt").cloned() {
                c["lastState"] = json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started,
                    "finishedAt": now, "containerID": c["containerID"].clone()}});
            }
            c["image"] = json!(images.get(&name).cloned().unwrap_or_default());
            match waiting.get(&name) {
                Some(w) => {
                    c["state"] = json!({"waiting": w});
                    c["started"] = json!(false);
                }
                None => {
                    c["state"] = json!({"running": {"startedAt": now}});
                    c["started"] = json!(true);
                    c["restartCount"] = json!(c["restartCount"].as_i64().unwrap_or(0) + 1);
                }
            }
        }
    }
    set_ready(pod, false, false, at);
}

/// Containers of a started pod that wait for their image (their new one could not be pulled,
/// or is being created). A real process waiting out its restart back-off
/// (`CrashLoopBackOff`) is not one: the back-off decides when it starts again.
fn waiting_containers(pod: &Value) -> Vec<String> {
    let for_image = [images::ERR_IMAGE_PULL, images::IMAGE_PULL_BACK_OFF, "ContainerCreating"];
    pod.pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| c.pointer("/state/waiting/reason").and_then(Value::as_str).is_some_and(|r| for_image.contains(&r)))
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

/// Starts the `started` containers of a running pod that waited for their image (a new
/// instance, the restart counted), and shows the others in their `waiting` state.
fn resume_containers(pod: &mut Value, started: &[String], waiting: &BTreeMap<String, Value>) {
    let now = object::now_rfc3339();
    if let Some(cs) = pod.pointer_mut("/status/containerStatuses").and_then(Value::as_array_mut) {
        for c in cs.iter_mut() {
            let name = c["name"].as_str().unwrap_or("").to_string();
            if started.contains(&name) {
                c["state"] = json!({"running": {"startedAt": now}});
                c["started"] = json!(true);
                c["restartCount"] = json!(c["restartCount"].as_i64().unwrap_or(0) + 1);
            } else if let Some(w) = waiting.get(&name) {
                c["state"] = json!({"waiting": w});
            }
        }
    }
}

/// Syncs the image pulls of the named containers of a pod; what each found.
fn sync_pulls(
    cluster: &Cluster,
    pod: &Value,
    names: &[String],
    pulls: &mut Pulls,
    now: Instant,
) -> Vec<(String, String, Pull)> {
    let uid = object::uid(pod);
    containers(pod)
        .into_iter()
        .filter(|(name, _)| names.contains(name))
        .map(|(name, image)| {
            let pullable = images::pullable(&cluster.faults, &image);
            let found = pulls.sync(uid, &name, &image, pullable, now, |d| cluster.config.real(d));
            (name, image, found)
        })
        .collect()
}

/// Records the kubelet's Events for pulls that failed or are backing off.
fn record_pull_failures(
    cluster: &Cluster,
    pod: &Value,
    node: &str,
    found: &[(String, String, Pull)],
    timers: &mut Timers,
) {
    for (name, image, pull) in found {
        match pull {
            Pull::Failed => timers.events.pull_failed(cluster, pod, node, name, image),
            Pull::BackOff => timers.events.pull_backing_off(cluster, pod, node, name, image),
            Pull::Ready | Pull::Waiting => {}
        }
    }
}

/// `state.waiting` of a container whose image could not be pulled, or of one created but not
/// started yet (`ContainerCreating`).
fn waiting_state(pulls: &Pulls, uid: &str, container: &str) -> Value {
    match pulls.waiting(uid, container) {
        Some(w) => json!({"reason": w.reason, "message": w.message}),
        None => json!({"reason": "ContainerCreating"}),
    }
}

/// The container statuses of a pod none of whose containers could start yet.
fn pending_statuses(pod: &Value, pulls: &Pulls) -> Value {
    let uid = object::uid(pod);
    let statuses: Vec<Value> = containers(pod)
        .into_iter()
        .map(|(name, image)| {
            let state = waiting_state(pulls, uid, &name);
            json!({"name": name, "image": image, "imageID": "", "ready": false, "started": false,
                   "restartCount": 0, "state": {"waiting": state}})
        })
        .collect();
    json!(statuses)
}

/// Shows a Pending pod whose sandbox is up (IPs, start time) and whose containers wait.
fn set_pending(pod: &mut Value, statuses: Value, ip: &str, host_ip: &str) {
    let now = object::now_rfc3339();
    let unready: Vec<String> = containers(pod).into_iter().map(|(name, _)| name).collect();
    let status = &mut pod["status"];
    status["podIP"] = json!(ip);
    status["podIPs"] = json!([{"ip": ip}]);
    status["hostIP"] = json!(host_ip);
    if status.get("startTime").is_none() {
        status["startTime"] = json!(now);
    }
    status["containerStatuses"] = statuses;
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    if !conditions.iter().any(|c| c["type"] == "ContainersReady") {
        let message = format!("containers with unready status: [{}]", unready.join(" "));
        conditions.extend([
            json!({"type": "Initialized", "status": "True", "lastTransitionTime": now}),
            json!({"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady", "message": message, "lastTransitionTime": now}),
            json!({"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": message, "lastTransitionTime": now}),
        ]);
        status["conditions"] = json!(conditions);
    }
}

/// The `initContainerStatuses` and `containerStatuses` of a pod whose containers the kubelet
/// does not start ([`processes::Processes::refusals`]): each refused one waiting with
/// `CreateContainerConfigError` and the reason, the others waiting to be created (the main
/// containers of a pod with init containers: to be initialized).
fn refused_statuses(pod: &Value, refused: &[processes::Refusal]) -> (Value, Value) {
    let inits = init_containers::init_containers(pod);
    let status = |name: &str, image: &str, otherwise: &str| {
        let waiting = match refused.iter().find(|r| r.container == name) {
            Some(r) => json!({"reason": "CreateContainerConfigError", "message": r.message}),
            None => json!({"reason": otherwise}),
        };
        json!({"name": name, "image": image, "imageID": "", "ready": false, "started": false, "restartCount": 0,
               "state": {"waiting": waiting}})
    };
    let otherwise = if inits.is_empty() { "ContainerCreating" } else { "PodInitializing" };
    let init_statuses: Vec<Value> =
        inits.iter().map(|(name, image, _)| status(name, image, "PodInitializing")).collect();
    let mains: Vec<Value> = containers(pod).iter().map(|(name, image)| status(name, image, otherwise)).collect();
    (json!(init_statuses), json!(mains))
}

/// The pod's IP: the one it has, else the next free one from its node's CIDR (`None`: the
/// node's CIDR is full, and the pod waits).
fn ip_for(pod: &Value, node: &str, timers: &mut Timers) -> Option<String> {
    if let Some(ip) = pod.pointer("/status/podIP").and_then(Value::as_str).filter(|ip| !ip.is_empty()) {
        return Some(ip.to_string());
    }
    timers.ips.allocate(node_index(node)).map(|ip| ip.to_string())
}

/// Starts each container of a pod with IP `ip` (or only those named): a real process for a
/// runnable image, else a new simulated log instance with its first lines.
fn start_containers(cluster: &Cluster, pod: &Value, node: &str, ip: &str, only: Option<&[String]>) {
    for (name, image) in containers(pod) {
        if only.is_some_and(|names| !names.contains(&name)) {
            continue;
        }
        if cluster.processes.runnable(&image) {
            // One after the other, each once the previous one's postStart hook returned: the
            // ones after a hook that runs are started by a later sync.
            if container_processes::held_by_hook(cluster, pod, &name) {
                break;
            }
            container_processes::start(cluster, pod, &name, ip);
            continue;
        }
        let log = cluster.logs.start(object::uid(pod), &name);
        log.write(format!(
            "[sim] container {name} ({image}) of pod {}/{} starting on {node}",
            object::namespace(pod),
            object::name(pod)
        ));
        log.write("[sim] started; waiting for readiness");
    }
}

/// The pod's IP as its status shows it.
fn pod_ip(pod: &Value) -> &str {
    pod.pointer("/status/podIP").and_then(Value::as_str).unwrap_or("")
}

/// Whether the pod's Ready condition is True.
pub fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

fn kubelet(cluster: &Cluster, pods_rt: &ResourceType, pod: &Value, node: &str, timers: &mut Timers, wake: &Wake) {
    let uid = object::uid(pod).to_string();
    let cfg = &cluster.config;
    let now = Instant::now();
    let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("Pending");
    if object::is_deleting(pod) {
        // Graceful termination: the kubelet stops the containers, then deletes the object.
        let grace = pod.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_u64).unwrap_or(0);
        let since = match timers.since.get(&uid) {
            Some((Stage::Terminating, since)) => *since,
            _ => {
                timers.since.insert(uid.clone(), (Stage::Terminating, now));
                if phase == "Running" {
                    timers.events.killing(cluster, pod, node);
                    for (name, image) in containers(pod) {
                        if cluster.processes.runnable(&image) {
                            continue;
                        }
                        if let Some(log) = cluster.logs.get(&uid, &name, false) {
                            log.write(format!("[sim] received SIGTERM (grace period {grace}s); shutting down"));
                        }
                    }
                }
                // Real processes get SIGTERM now and SIGKILL at the end of the grace period, in
                // real time: a real program needs real time to shut down (hand its role over,
                // flush its files), whatever the cluster's time factor. Sidecars wait for the
                // others (below).
                let sidecars = init_containers::sidecars(pod);
                cluster.processes.terminate(
                    &uid,
                    |c| !sidecars.iter().any(|s| s == c),
                    now + Duration::from_secs(grace),
                );
                now
            }
        };
        // Sidecars are stopped once every other container has exited, one at a time in the
        // reverse of their order in the spec, within the same grace period ("Sidecar
        // Containers", kubernetes.io).
        let sidecars = init_containers::sidecars(pod);
        let is_sidecar = |c: &str| sidecars.iter().any(|s| s == c);
        if !cluster.processes.running_of(&uid, |c| !is_sidecar(c))
            && let Some(last) = sidecars.iter().rev().find(|s| cluster.processes.running_of(&uid, |c| c == s.as_str()))
        {
            cluster.processes.terminate(&uid, |c| c == last, since + Duration::from_secs(grace));
        }
        // The containers exit after their shutdown time, or are killed at the grace period.
        let shutdown = pod
            .pointer(&format!("/metadata/annotations/{}", SHUTDOWN_ANNOTATION.replace('/', "~1")))
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64)
            .unwrap_or(cfg.container_shutdown);
        // A pod whose containers all run real processes is done when they are; simulated ones
        // take their shutdown time.
        let simulated = containers(pod).iter().any(|(_, image)| !cluster.processes.runnable(image));
        let processes_done = !cluster.processes.running(&uid);
        if !processes_done {
            cluster.processes.enforce(now);
            wake.at(now + container_processes::POLL);
        }
        let simulated_done = !simulated || wake.due(since, cfg.real(shutdown.min(Duration::from_secs(grace))), now);
        if processes_done && simulated_done {
            let res = (String::new(), "pods".to_string());
            let removed = cluster.storage.remove(pods_rt, &res, object::namespace(pod), object::name(pod), |cur| {
                if object::uid(cur) == uid {
                    Ok(())
                } else {
                    Err(crate::store::error::ApiError::conflict(pods_rt, object::name(cur)))
                }
            });
            if let Ok(last) = &removed {
                cluster.account.record(pods_rt, &Component::Kubelet.into(), Verb::Removed, last);
                for (name, image) in containers(pod) {
                    if cluster.processes.runnable(&image) {
                        continue;
                    }
                    if let Some(log) = cluster.logs.get(&uid, &name, false) {
                        log.write("[sim] exited with code 0");
                        log.exit();
                    }
                }
                cluster.processes.forget_pod(&uid);
                cluster.logs.forget_pod(&uid);
                cluster.ledger.stopped(&cfg.name, &uid, jiff::Timestamp::now());
                cluster.gc_wake.notify_one();
            }
        }
        return;
    }
    // The pod's sandbox ended under it (its shared PID namespace's holder, and every
    // container with it): recreated, the init containers first.
    if cluster.processes.sandbox_ended(&uid) {
        cluster.processes.recreate_sandbox(&uid);
        if write_status(cluster, pods_rt, pod, pod_sandbox::reset_status) {
            timers.events.sandbox_changed(cluster, pod, node);
        }
        cluster.ledger.stopped(&cfg.name, &uid, jiff::Timestamp::now());
        timers.since.insert(uid, (Stage::Scheduled, now));
        wake.at(now + container_processes::POLL);
        return;
    }
    match phase {
        "Pending" => {
            let (_, since) = *timers.since.entry(uid.clone()).or_insert((Stage::Scheduled, now));
            if wake.due(since, cfg.real(cfg.pod_start_delay), now) {
                // Every image first; a pod starts none of its containers until it has them all.
                let names: Vec<String> = containers(pod).into_iter().map(|(name, _)| name).collect();
                let found = sync_pulls(cluster, pod, &names, &mut timers.pulls, now);
                if found.iter().any(|(_, _, p)| *p != Pull::Ready) {
                    let statuses = pending_statuses(pod, &timers.pulls);
                    if pod.pointer("/status/containerStatuses") != Some(&statuses) {
                        let Some(ip) = ip_for(pod, node, timers) else { return };
                        let host = host_ip(node);
                        if write_status(cluster, pods_rt, pod, |p| set_pending(p, statuses, &ip, &host)) {
                            record_pull_failures(cluster, pod, node, &found, timers);
                        }
                    } else {
                        record_pull_failures(cluster, pod, node, &found, timers);
                    }
                    return;
                }
                let Some(ip) = ip_for(pod, node, timers) else { return };
                let host = host_ip(node);
                // A pod the sandbox cannot run whole starts none of its containers.
                let refused = cluster.processes.refusals(pod, processes::launch::running_as_root());
                if !refused.is_empty() {
                    let (inits, mains) = refused_statuses(pod, &refused);
                    let shown = |list: &str| pod.pointer(&format!("/status/{list}")).cloned().unwrap_or(Value::Null);
                    let changed = shown("containerStatuses") != mains
                        || (!inits.as_array().is_some_and(Vec::is_empty) && shown("initContainerStatuses") != inits);
                    if changed
                        && write_status(cluster, pods_rt, pod, |p| {
                            if inits.as_array().is_some_and(|i| !i.is_empty()) {
                                p["status"]["initContainerStatuses"] = inits.clone();
                            }
                            set_pending(p, mains.clone(), &ip, &host);
                        })
                    {
                        for r in &refused {
                            timers.events.config_refused(cluster, pod, node, &r.container, &r.message);
                        }
                    }
                    return;
                }
                // Runnable init containers first: the main containers start once they are done.
                let mut inits = None;
                if init_containers::has_runnable(cluster, pod) {
                    match init_containers::stage(cluster, pods_rt, pod, &ip, &host, wake) {
                        Some(done) => inits = Some(done),
                        None => return,
                    }
                }
                if write_status(cluster, pods_rt, pod, |p| {
                    if let Some(inits) = inits {
                        p["status"]["initContainerStatuses"] = json!(inits);
                    }
                    set_running(p, &ip, &host)
                }) {
                    timers.since.insert(uid.clone(), (Stage::Running, now));
                    timers.events.containers_started(cluster, pod, node);
                    start_containers(cluster, pod, node, &ip, None);
                    // A pod of real processes is recorded from what its processes do
                    // ([`container_processes::follow_workload`]).
                    if !container_processes::any_kept(cluster, pod) {
                        cluster.ledger.started(Incarnation {
                            cluster: cfg.name.clone(),
                            namespace: object::namespace(pod).to_string(),
                            pod: object::name(pod).to_string(),
                            uid,
                            node: node.to_string(),
                            identity: ledger::identity_of(pod),
                            running_from: jiff::Timestamp::now(),
                            running_until: None,
                            images: containers(pod).into_iter().map(|(_, image)| image).collect(),
                            ready_periods: vec![],
                            image_changes: vec![],
                        });
                    }
                }
            }
        }
        "Running" => {
            // A container whose image the spec changed (an in-place update) is restarted with
            // it; the pod keeps its uid and node, and is Ready again after the usual delay.
            // The old instance stops first; a new image that cannot be pulled leaves its
            // container waiting.
            let changed = changed_containers(pod);
            if !changed.is_empty() {
                let found = sync_pulls(cluster, pod, &changed, &mut timers.pulls, now);
                let pulled: Vec<String> =
                    found.iter().filter(|(_, _, p)| *p == Pull::Ready).map(|(n, _, _)| n.clone()).collect();
                let waiting: BTreeMap<String, Value> = changed
                    .iter()
                    .filter(|n| !pulled.contains(n))
                    .map(|n| (n.clone(), waiting_state(&timers.pulls, &uid, n)))
                    .collect();
                if write_status(cluster, pods_rt, pod, |p| restart_containers(p, &changed, &waiting, cluster.clock())) {
                    let at = jiff::Timestamp::now();
                    cluster.ledger.readiness(&cfg.name, &uid, false, at);
                    let images = containers(pod).into_iter().map(|(_, image)| image).collect();
                    cluster.ledger.images_changed(&cfg.name, &uid, images, at);
                    timers.since.insert(uid.clone(), (Stage::Running, now));
                    for name in &changed {
                        if let Some(old) = cluster.logs.get(&uid, name, false)
                            && !old.snapshot().exited
                        {
                            old.write("[sim] container definition changed; stopping for a restart");
                            old.write("[sim] exited with code 0");
                            old.exit();
                        }
                        timers.events.container_restarted(cluster, pod, node, name, pulled.contains(name));
                    }
                    record_pull_failures(cluster, pod, node, &found, timers);
                    start_containers(cluster, pod, node, pod_ip(pod), Some(&pulled));
                }
                return;
            }
            // Containers waiting for their image: retried on the back-off.
            let stuck = waiting_containers(pod);
            if !stuck.is_empty() {
                let found = sync_pulls(cluster, pod, &stuck, &mut timers.pulls, now);
                if found.iter().any(|(_, _, p)| *p != Pull::Waiting) {
                    let started: Vec<String> =
                        found.iter().filter(|(_, _, p)| *p == Pull::Ready).map(|(n, _, _)| n.clone()).collect();
                    let waiting: BTreeMap<String, Value> = stuck
                        .iter()
                        .filter(|n| !started.contains(n))
                        .map(|n| (n.clone(), waiting_state(&timers.pulls, &uid, n)))
                        .collect();
                    if write_status(cluster, pods_rt, pod, |p| resume_containers(p, &started, &waiting)) {
                        record_pull_failures(cluster, pod, node, &found, timers);
                        for name in &started {
                            timers.events.container_started_after_pull(cluster, pod, node, name);
                        }
                        if !started.is_empty() {
                            timers.since.insert(uid.clone(), (Stage::Running, now));
                            start_containers(cluster, pod, node, pod_ip(pod), Some(&started));
                        }
                    }
                    return;
                }
            }
            let (_, since) = *timers.since.entry(uid.clone()).or_insert((Stage::Running, now));
            let forced = cluster.faults.pod_ready(object::namespace(pod), object::name(pod));
            // Real processes are ready when their probes say so; simulated containers after the
            // cluster's delay.
            let probed = container_processes::any_kept(cluster, pod);
            let real_ready = !probed || container_processes::sync(cluster, pods_rt, pod, wake);
            let simulated = containers(pod).iter().any(|(_, image)| !cluster.processes.runnable(image));
            let natural = || real_ready && (!simulated || wake.due(since, cfg.real(cfg.pod_ready_delay), now));
            // A container waiting for its image is not ready, whatever its probe would say.
            let containers_want = stuck.is_empty() && forced.unwrap_or_else(natural);
            // Ready needs every readiness gate's condition too, and follows it both ways.
            let gates = gates_pass(pod);
            let want = containers_want && gates;
            let containers_now = condition_true(pod, "ContainersReady");
            // Simulated containers, once ready, stay so unless a fault says otherwise; real ones
            // follow their probes both ways.
            let follows = forced.is_some() || probed;
            let change = (want != is_ready(pod) && (follows || want || !gates))
                || (containers_want != containers_now && (follows || containers_want));
            let written =
                change && write_status(cluster, pods_rt, pod, |p| set_ready(p, containers_want, want, cluster.clock()));
            if written {
                cluster.ledger.readiness(&cfg.name, &uid, want, jiff::Timestamp::now());
            }
            if written && containers_want != containers_now {
                // The containers' own readiness is what they log; a gate is not theirs.
                let line = if containers_want {
                    "[sim] ready: accepting connections"
                } else {
                    "[sim] not ready: failing readiness"
                };
                for (name, image) in containers(pod) {
                    if !cluster.processes.runnable(&image)
                        && let Some(log) = cluster.logs.get(&uid, &name, false)
                    {
                        log.write(line);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The machines under the kubelets, as the ledger must see them: a powered-off node's runs end
/// at the instant it went off; a node that powers on restarts the containers of its pods still
/// Running and not being deleted (new runs; a pod with init containers runs those first, in a
/// new sandbox), while one whose network or kubelet returns just
/// goes on with its running containers; and a live kubelet kills the containers of every pod
/// whose object is gone (a force delete, maybe while it was away).
fn machines(cluster: &Cluster, pods_rt: &ResourceType, pods: &[Arc<Value>], timers: &mut Timers) -> Vec<String> {
    let cfg = &cluster.config;
    let mut renewed = Vec::new();
    for (node, outage) in cluster.faults.outages() {
        if outage.kind == NodeOutage::PoweredOff {
            cluster.ledger.stop_on_node(&cfg.name, &node, outage.at);
            cluster.processes.kill_node(&node);
        }
    }
    let now = Instant::now();
    for (node, outage) in cluster.faults.take_returned() {
        if outage.kind != NodeOutage::PoweredOff {
            continue;
        }
        let back = jiff::Timestamp::now();
        let bound = pods.iter().filter(|p| p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node.as_str()));
        for p in bound {
            // A pod being deleted meanwhile (evicted, or a shrink) is only finished off; the
            // others start again, unready until their probes pass.
            if p.pointer("/status/phase").and_then(Value::as_str) != Some("Running") || object::is_deleting(p) {
                continue;
            }
            // The machine restarted: every pod sandbox on it is new, so a pod with init
            // containers runs them again before its containers, as after its sandbox ended
            // (its run in the ledger begins when they start).
            if p.pointer("/spec/initContainers").and_then(Value::as_array).is_some_and(|i| !i.is_empty()) {
                cluster.processes.recreate_sandbox(object::uid(p));
                if write_status(cluster, pods_rt, p, pod_sandbox::reset_status) {
                    timers.events.sandbox_changed(cluster, p, &node);
                }
                timers.since.insert(object::uid(p).to_string(), (Stage::Scheduled, now));
                renewed.push(object::uid(p).to_string());
                continue;
            }
            if !container_processes::any_kept(cluster, p) {
                cluster.ledger.started(Incarnation {
                    cluster: cfg.name.clone(),
                    namespace: object::namespace(p).to_string(),
                    pod: object::name(p).to_string(),
                    uid: object::uid(p).to_string(),
                    node: node.clone(),
                    identity: ledger::identity_of(p),
                    running_from: back,
                    running_until: None,
                    images: containers(p).into_iter().map(|(_, image)| image).collect(),
                    ready_periods: vec![],
                    image_changes: vec![],
                });
            }
            write_status(cluster, pods_rt, p, |p| set_ready(p, false, false, cluster.clock()));
            timers.since.insert(object::uid(p).to_string(), (Stage::Running, now));
            // The containers died with the machine; new instances start (the old logs become
            // `--previous`).
            start_containers(cluster, p, &node, pod_ip(p), None);
        }
    }
    let live: std::collections::HashSet<&str> = pods.iter().map(|p| object::uid(p)).collect();
    let gone = jiff::Timestamp::now();
    for (uid, node) in cluster.ledger.open_in(&cfg.name) {
        if !live.contains(uid.as_str()) && cluster.faults.node_down_since(&node).is_none() {
            cluster.ledger.stopped(&cfg.name, &uid, gone);
        }
    }
    // The processes of a pod whose object is gone (force-deleted, maybe while its node was
    // away) are killed by a live kubelet.
    for (uid, node) in cluster.processes.pods() {
        if !live.contains(uid.as_str()) && cluster.faults.node_down_since(&node).is_none() {
            cluster.processes.forget_pod(&uid);
        }
    }
    renewed
}

/// How long a pod tolerates its node's unreachable taint before it is evicted: its own
/// `NoExecute` toleration of `node.kubernetes.io/unreachable` (no `tolerationSeconds`: for
/// ever, `None`), else the default the apiserver's DefaultTolerationSeconds plugin adds.
fn unreachable_toleration(pod: &Value, default: Duration) -> Option<Duration> {
    let tolerations = pod.pointer("/spec/tolerations").and_then(Value::as_array);
    let own = tolerations.into_iter().flatten().find(|t| {
        let key = t.get("key").and_then(Value::as_str);
        let effect = t.get("effect").and_then(Value::as_str);
        let exists = t.get("operator").and_then(Value::as_str) == Some("Exists");
        (key == Some(UNREACHABLE_TAINT) || (key.is_none() && exists)) && effect.is_none_or(|e| e == "NoExecute")
    });
    match own {
        Some(t) => t.get("tolerationSeconds").and_then(Value::as_u64).map(Duration::from_secs),
        None => Some(default),
    }
}

/// Marks nodes out of reach Unknown and taints them, evicts after the toleration, and restores
/// nodes whose kubelet is back.
fn node_lifecycle(
    cluster: &Cluster,
    nodes_rt: &ResourceType,
    pods_rt: &ResourceType,
    nodes: &[Arc<Value>],
    pods: &[Arc<Value>],
    timers: &mut Timers,
    wake: &Wake,
) {
    let cfg = &cluster.config;
    let now = Instant::now();
    for node in nodes {
        let name = object::name(node);
        let on_node = || pods.iter().filter(move |p| p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(name));
        match cluster.faults.node_down_since(name) {
            Some(since) => {
                if node_ready(node) != Some("Unknown") && wake.due(since, cfg.real(cfg.node_monitor_grace), now) {
                    let marked = cluster.update_with(nodes_rt, "", name, Subresource::Main, &WriteOptions::by(Component::NodeLifecycle), |cur| {
                        let mut next = cur.clone();
                        next["spec"]["taints"] = json!([{"key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": object::now_rfc3339()}]);
                        Ok(next)
                    });
                    let statused = cluster.update_with(
                        nodes_rt,
                        "",
                        name,
                        Subresource::Status,
                        &WriteOptions::by(Component::NodeLifecycle),
                        |cur| {
                            let mut next = cur.clone();
                            next["status"]["conditions"] = json!([ready_condition(
                                "Unknown",
                                "NodeStatusUnknown",
                                "Kubelet stopped posting node status."
                            )]);
                            Ok(next)
                        },
                    );
                    if marked.is_ok() && statused.is_ok() {
                        timers.tainted.insert(name.to_string(), now);
                        timers.events.node_not_ready(cluster, node, on_node().map(|p| &**p));
                        // The node controller marks its pods NotReady; whether their containers
                        // still run is the machine's business (see `machines`).
                        for p in on_node() {
                            if write_status(cluster, pods_rt, p, |p| set_ready(p, false, false, cluster.clock())) {
                                cluster.ledger.readiness(&cfg.name, object::uid(p), false, jiff::Timestamp::now());
                            }
                        }
                    }
                }
                if let Some(tainted) = timers.tainted.get(name) {
                    let due = |p: &&Arc<Value>| {
                        unreachable_toleration(p, cfg.unreachable_toleration)
                            .is_some_and(|t| wake.due(*tainted, cfg.real(t), now))
                    };
                    for p in on_node().filter(|p| !object::is_deleting(p)).filter(due) {
                        // Taint-based eviction: a graceful delete nobody on the node can finish.
                        timers.events.evicting(cluster, p);
                        let _ = cluster.delete(
                            pods_rt,
                            object::namespace(p),
                            object::name(p),
                            &DeleteOptions::by(Component::NodeLifecycle),
                        );
                    }
                }
            }
            None if node_ready(node) == Some("Unknown") || has_unreachable_taint(node) => {
                // The kubelet is back: it reports Ready again and its pods resume.
                let _ = cluster.update_with(
                    nodes_rt,
                    "",
                    name,
                    Subresource::Main,
                    &WriteOptions::by(Component::NodeLifecycle),
                    |cur| {
                        let mut next = cur.clone();
                        if let Some(spec) = next.get_mut("spec").and_then(Value::as_object_mut) {
                            spec.remove("taints");
                        }
                        Ok(next)
                    },
                );
                let _ = cluster.update_with(
                    nodes_rt,
                    "",
                    name,
                    Subresource::Status,
                    &WriteOptions::by(Component::NodeLifecycle),
                    |cur| {
                        let mut next = cur.clone();
                        next["status"]["conditions"] =
                            json!([ready_condition("True", "KubeletReady", "kubelet is posting ready status")]);
                        Ok(next)
                    },
                );
                timers.tainted.remove(name);
                timers.events.node_ready(cluster, node);
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_own_unreachable_toleration_decides_its_eviction() {
        let default = Duration::from_secs(300);
        let pod = |tolerations: Value| json!({"spec": {"tolerations": tolerations}});
        assert_eq!(unreachable_toleration(&json!({"spec": {}}), default), Some(default), "the admission default");
        let forever = pod(json!([{"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute"}]));
        assert_eq!(unreachable_toleration(&forever, default), None, "no tolerationSeconds: never evicted");
        let short = pod(
            json!([{"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]),
        );
        assert_eq!(unreachable_toleration(&short, default), Some(Duration::from_secs(5)));
        let everything = pod(json!([{"operator": "Exists"}]));
        assert_eq!(
            unreachable_toleration(&everything, default),
            None,
            "an empty key with Exists tolerates every taint"
        );
        let other = pod(json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]));
        assert_eq!(unreachable_toleration(&other, default), Some(default), "another taint's toleration does not count");
    }
}
