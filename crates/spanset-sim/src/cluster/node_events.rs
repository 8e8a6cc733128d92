//! The Events of the node side of a cluster, worded as the real components word them: the
//! scheduler (`Scheduled`, `FailedScheduling`), each kubelet (`Pulling`, `Pulled`, `Created`,
//! `Started`, `Killing`, `NodeReady`, and for an image it cannot pull `Failed` and `BackOff`) and the node-lifecycle and taint-eviction controllers
//! (`NodeNotReady`, `TaintManagerEviction`). Apart from [`super::kubelet`] so that the
//! simulation's timing and its story for people change for different reasons.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::{Duration, Instant},
};

use serde_json::Value;

use super::{
    Cluster,
    controller_loop::Wake,
    events::{EventType, Occurrence, Recorder, Style},
    images,
};
use crate::store::{actor::Component, object};

/// Simulated time between two `FailedScheduling` attempts for one pod (the scheduler's
/// maximum backoff).
const SCHEDULING_RETRY: Duration = Duration::from_secs(10);

/// Simulated pull time reported in `Pulled`.
const PULL_SECONDS: f64 = 1.2;

/// Why a node cannot take a pod, as the scheduler's filter plugins say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unfit {
    /// Cordoned (`spec.unschedulable`), and the pod does not tolerate it.
    Unschedulable,
    /// Tainted `node.kubernetes.io/unreachable` (its kubelet stopped posting status).
    Unreachable,
    /// Not Ready (tainted `node.kubernetes.io/not-ready`).
    NotReady,
    /// The pod's volume is local to another node.
    VolumeAffinity,
}

impl Unfit {
    fn text(self) -> &'static str {
        match self {
            Unfit::Unschedulable => "node(s) were unschedulable",
            Unfit::Unreachable => "node(s) had untolerated taint {node.kubernetes.io/unreachable: }",
            Unfit::NotReady => "node(s) had untolerated taint {node.kubernetes.io/not-ready: }",
            Unfit::VolumeAffinity => "node(s) had volume node affinity conflict",
        }
    }
}

/// The scheduler's message when no node fits: each reason with its count, sorted, then the
/// preemption verdict.
pub fn unschedulable_message(unfit: &[Unfit]) -> String {
    if unfit.is_empty() {
        return "no nodes available to schedule pods".into();
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for u in unfit {
        *counts.entry(u.text()).or_default() += 1;
    }
    let reasons: Vec<String> = counts.iter().map(|(text, n)| format!("{n} {text}")).collect();
    let n = unfit.len();
    format!(
        "0/{n} nodes are available: {}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.",
        reasons.join(", ")
    )
}

/// The recorders of the node side and what they remember (images pulled, pods found
/// unschedulable).
pub struct NodeEvents {
    scheduler: Recorder,
    node_controller: Recorder,
    taint_eviction: Recorder,
    kubelets: HashMap<String, Recorder>,
    images: HashMap<String, HashSet<String>>,
    unschedulable: HashMap<String, Instant>,
}

fn containers(pod: &Value) -> Vec<(&str, &str, &str)> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or(""),
                        c["image"].as_str().unwrap_or(""),
                        c["imagePullPolicy"].as_str().unwrap_or(""),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A pull policy as the API defaults it: `Always` for `:latest` or an untagged image.
fn pulls_always(image: &str, policy: &str) -> bool {
    match policy {
        "Always" => true,
        "IfNotPresent" | "Never" => false,
        _ => {
            let name = image.rsplit('/').next().unwrap_or(image);
            !name.contains(':') && !name.contains('@') || name.ends_with(":latest")
        }
    }
}

/// A stable made-up image size, so `Pulled` reads like the real thing.
fn image_size(image: &str) -> u64 {
    image.bytes().fold(40_000_000u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)) % 90_000_000 + 10_000_000)
}

fn container_path(name: &str) -> Option<String> {
    Some(format!("spec.containers{{{name}}}"))
}

impl NodeEvents {
    /// Recorders for a cluster's scheduler and controllers (kubelets get theirs on first use).
    pub fn new(cluster: &Cluster) -> Self {
        let legacy = |component| Recorder::new(Component::NodeLifecycle, Style::Legacy { component, host: None });
        Self {
            scheduler: Recorder::new(
                Component::Scheduler,
                Style::Series {
                    controller: "default-scheduler",
                    instance: format!("default-scheduler-{}-control-plane", cluster.config.name),
                },
            ),
            node_controller: legacy("node-controller"),
            taint_eviction: legacy("taint-eviction-controller"),
            kubelets: HashMap::new(),
            images: HashMap::new(),
            unschedulable: HashMap::new(),
        }
    }

    fn kubelet(&mut self, node: &str) -> &mut Recorder {
        self.kubelets.entry(node.to_string()).or_insert_with(|| {
            Recorder::new(Component::Kubelet, Style::Legacy { component: "kubelet", host: Some(node.to_string()) })
        })
    }

    /// Writes the scheduler's series heartbeat; called once per sweep. Asks `wake` for the
    /// next heartbeat due and the next FailedScheduling retry of a pod still unschedulable.
    pub fn tick(&mut self, cluster: &Cluster, live_pods: &HashSet<&str>, wake: &Wake) {
        self.scheduler.heartbeat(cluster);
        self.unschedulable.retain(|uid, _| live_pods.contains(uid.as_str()));
        let now = Instant::now();
        let retry = cluster.config.real(SCHEDULING_RETRY);
        for last in self.unschedulable.values() {
            // Past retries are not asked for again: a pod still pending records anew (and
            // asks again) on the sweep that finds it so.
            if *last + retry > now {
                wake.at(*last + retry);
            }
        }
        for r in
            [&self.scheduler, &self.node_controller, &self.taint_eviction].into_iter().chain(self.kubelets.values())
        {
            r.next_due(cluster, wake);
        }
    }

    /// The scheduler bound a pod.
    pub fn scheduled(&mut self, cluster: &Cluster, pod: &Value, node: &str) {
        self.unschedulable.remove(object::uid(pod));
        let message = format!("Successfully assigned {}/{} to {node}", object::namespace(pod), object::name(pod));
        self.scheduler.record(
            cluster,
            Occurrence {
                about: pod,
                field_path: None,
                event_type: EventType::Normal,
                reason: "Scheduled",
                action: "Binding",
                message,
            },
        );
    }

    /// No node fits a pod; recorded at most once per retry period per pod.
    pub fn failed_scheduling(&mut self, cluster: &Cluster, pod: &Value, unfit: &[Unfit]) {
        let now = Instant::now();
        if let Some(last) = self.unschedulable.get(object::uid(pod))
            && now.duration_since(*last) < cluster.config.real(SCHEDULING_RETRY)
        {
            return;
        }
        self.unschedulable.insert(object::uid(pod).to_string(), now);
        self.scheduler.record(
            cluster,
            Occurrence {
                about: pod,
                field_path: None,
                event_type: EventType::Warning,
                reason: "FailedScheduling",
                action: "Scheduling",
                message: unschedulable_message(unfit),
            },
        );
    }

    /// A kubelet pulled (or found) each image and started each container of a pod.
    pub fn containers_started(&mut self, cluster: &Cluster, pod: &Value, node: &str) {
        for (name, image, policy) in containers(pod) {
            self.container_started(cluster, pod, node, name, image, policy);
        }
    }

    /// A kubelet restarted one container of a pod whose spec changed its image (an in-place
    /// update): `Killing` with the kubelet's "definition changed" wording, then the start —
    /// unless the new image could not be pulled (`started` false: the pull's Events follow).
    pub fn container_restarted(&mut self, cluster: &Cluster, pod: &Value, node: &str, container: &str, started: bool) {
        let Some((name, image, policy)) = containers(pod).into_iter().find(|c| c.0 == container) else { return };
        self.container_killing(
            cluster,
            pod,
            node,
            name,
            format!("Container {name} definition changed, will be restarted"),
        );
        if started {
            self.container_started(cluster, pod, node, name, image, policy);
        }
    }

    /// A kubelet started one container of a pod whose image it could not pull before.
    pub fn container_started_after_pull(&mut self, cluster: &Cluster, pod: &Value, node: &str, container: &str) {
        let Some((name, image, policy)) = containers(pod).into_iter().find(|c| c.0 == container) else { return };
        self.container_started(cluster, pod, node, name, image, policy);
    }

    /// A kubelet tried to pull a container's image and failed: `Pulling`, `Failed` with the
    /// runtime's error, and `Failed` "Error: ErrImagePull" (`EnsureImageExists`, then
    /// `startContainer`).
    pub fn pull_failed(&mut self, cluster: &Cluster, pod: &Value, node: &str, container: &str, image: &str) {
        let tagged = images::with_default_tag(image);
        let error = images::not_found(image);
        self.container_event(
            cluster,
            pod,
            node,
            container,
            EventType::Normal,
            "Pulling",
            format!("Pulling image \"{tagged}\""),
        );
        let failed = format!("Failed to pull image \"{tagged}\": {error}");
        self.container_event(cluster, pod, node, container, EventType::Warning, "Failed", failed);
        let error = format!("Error: {}", images::ERR_IMAGE_PULL);
        self.container_event(cluster, pod, node, container, EventType::Warning, "Failed", error);
    }

    /// A kubelet found a container's image pull backing off: `BackOff`, and `Failed`
    /// "Error: ImagePullBackOff".
    pub fn pull_backing_off(&mut self, cluster: &Cluster, pod: &Value, node: &str, container: &str, image: &str) {
        let message = format!("Back-off pulling image \"{}\"", images::with_default_tag(image));
        self.container_event(cluster, pod, node, container, EventType::Normal, "BackOff", message);
        let error = format!("Error: {}", images::IMAGE_PULL_BACK_OFF);
        self.container_event(cluster, pod, node, container, EventType::Warning, "Failed", error);
    }

    /// A probe of a container failed: `Unhealthy` "KIND probe failed: WHAT IT SAID", as the
    /// kubelet's prober records it (folded into one Event with a count when it repeats).
    pub fn unhealthy(&mut self, cluster: &Cluster, pod: &Value, node: &str, container: &str, kind: &str, said: &str) {
        let message = format!("{kind} probe failed: {said}");
        self.container_event(cluster, pod, node, container, EventType::Warning, "Unhealthy", message);
    }

    /// A kubelet would not create a container: `Failed` "Error: WHY"
    /// (`CreateContainerConfigError`).
    pub fn config_refused(&mut self, cluster: &Cluster, pod: &Value, node: &str, container: &str, why: &str) {
        let message = format!("Error: {why}");
        self.container_event(cluster, pod, node, container, EventType::Warning, "Failed", message);
    }

    #[allow(clippy::too_many_arguments)]
    fn container_event(
        &mut self,
        cluster: &Cluster,
        pod: &Value,
        node: &str,
        container: &str,
        event_type: EventType,
        reason: &'static str,
        message: String,
    ) {
        self.kubelet(node).record(
            cluster,
            Occurrence { about: pod, field_path: container_path(container), event_type, reason, action: "", message },
        );
    }

    fn container_started(&mut self, cluster: &Cluster, pod: &Value, node: &str, name: &str, image: &str, policy: &str) {
        let present = self.images.get(node).is_some_and(|i| i.contains(image));
        let rec = self.kubelet(node);
        let mut record = |reason: &'static str, message: String| {
            rec.record(
                cluster,
                Occurrence {
                    about: pod,
                    field_path: container_path(name),
                    event_type: EventType::Normal,
                    reason,
                    action: "",
                    message,
                },
            )
        };
        if present && !pulls_always(image, policy) {
            record("Pulled", format!("Container image \"{image}\" already present on machine"));
        } else {
            record("Pulling", format!("Pulling image \"{image}\""));
            record(
                "Pulled",
                format!(
                    "Successfully pulled image \"{image}\" in {PULL_SECONDS}s ({PULL_SECONDS}s including waiting). Image size: {} bytes.",
                    image_size(image)
                ),
            );
        }
        record("Created", format!("Created container: {name}"));
        record("Started", format!("Started container {name}"));
        self.images.entry(node.to_string()).or_default().insert(image.to_string());
    }

    /// A kubelet began stopping a pod's containers (graceful termination).
    pub fn killing(&mut self, cluster: &Cluster, pod: &Value, node: &str) {
        for (name, _, _) in containers(pod) {
            self.container_killing(cluster, pod, node, name, format!("Stopping container {name}"));
        }
    }

    /// A kubelet found a pod's sandbox ended and recreates it (`SandboxChanged`).
    pub fn sandbox_changed(&mut self, cluster: &Cluster, pod: &Value, node: &str) {
        self.kubelet(node).record(
            cluster,
            Occurrence {
                about: pod,
                field_path: None,
                event_type: EventType::Normal,
                reason: super::pod_sandbox::REASON,
                action: "",
                message: super::pod_sandbox::MESSAGE.to_string(),
            },
        );
    }

    fn container_killing(&mut self, cluster: &Cluster, pod: &Value, node: &str, name: &str, message: String) {
        self.kubelet(node).record(
            cluster,
            Occurrence {
                about: pod,
                field_path: container_path(name),
                event_type: EventType::Normal,
                reason: "Killing",
                action: "",
                message,
            },
        );
    }

    /// The node-lifecycle controller found a node's kubelet silent: the node and each of its
    /// pods get `NodeNotReady`.
    pub fn node_not_ready<'a>(&mut self, cluster: &Cluster, node: &Value, pods: impl Iterator<Item = &'a Value>) {
        let name = object::name(node);
        self.node_controller.record(
            cluster,
            Occurrence {
                about: node,
                field_path: None,
                event_type: EventType::Normal,
                reason: "NodeNotReady",
                action: "",
                message: format!("Node {name} status is now: NodeNotReady"),
            },
        );
        for pod in pods {
            self.node_controller.record(
                cluster,
                Occurrence {
                    about: pod,
                    field_path: None,
                    event_type: EventType::Warning,
                    reason: "NodeNotReady",
                    action: "",
                    message: "Node is not ready".into(),
                },
            );
        }
    }

    /// The taint-eviction controller deletes a pod from an unreachable node.
    pub fn evicting(&mut self, cluster: &Cluster, pod: &Value) {
        self.taint_eviction.record(
            cluster,
            Occurrence {
                about: pod,
                field_path: None,
                event_type: EventType::Normal,
                reason: "TaintManagerEviction",
                action: "",
                message: format!("Marking for deletion Pod {}/{}", object::namespace(pod), object::name(pod)),
            },
        );
    }

    /// A kubelet is back and reports its node Ready.
    pub fn node_ready(&mut self, cluster: &Cluster, node: &Value) {
        let name = object::name(node).to_string();
        self.kubelet(&name).record(
            cluster,
            Occurrence {
                about: node,
                field_path: None,
                event_type: EventType::Normal,
                reason: "NodeReady",
                action: "",
                message: format!("Node {name} status is now: NodeReady"),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unschedulable_message_counts_each_reason_in_order() {
        assert_eq!(
            unschedulable_message(&[Unfit::VolumeAffinity, Unfit::Unreachable, Unfit::VolumeAffinity]),
            "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, \
             2 node(s) had volume node affinity conflict. preemption: 0/3 nodes are available: 3 Preemption is \
             not helpful for scheduling."
        );
        assert_eq!(unschedulable_message(&[]), "no nodes available to schedule pods");
    }

    #[test]
    fn untagged_and_latest_images_are_pulled_every_time() {
        assert!(pulls_always("nginx", ""));
        assert!(pulls_always("registry.local:5000/nginx", ""));
        assert!(pulls_always("nginx:latest", ""));
        assert!(!pulls_always("nginx:1.25", ""));
        assert!(!pulls_always("nginx", "IfNotPresent"));
    }
}
