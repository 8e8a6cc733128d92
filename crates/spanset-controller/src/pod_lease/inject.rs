//! The guard spanset adds to the pod template of a federation with a pod lease, and what a pod
//! spec says of its guard:
//!
//! - `spanset-guard` (the first init container, `spanset guard wait`): copies the containers'
//!   first process into the `spanset-guard-bin` emptyDir, then lets the pod go on only under a
//!   fresh lease naming its ordinal;
//! - `spanset-guard-watch` (a native sidecar, `spanset guard watch`): keeps reading the Lease and
//!   posts what it concludes in the state file (the `spanset-guard` memory emptyDir), with
//!   `spanset-guard-exec ready` as its startup and readiness probes: a pod is Ready only while its
//!   guard reads its Lease, and spanset sees that in the pod's status;
//! - every other container, init containers included: its command is run by
//!   `spanset-guard-exec`, its first process, which ends the container by the posted deadline
//!   (see [`super::exec`]). Both volumes are mounted read-only there.
//!
//! The guard runs first among the init containers, so that nothing of the pod (not even the
//! user's own init containers) runs before the lease is seen, and its watch starts before any
//! of them, so that no `postStart` hook of theirs delays it. The guard's containers run as the
//! image's unprivileged user with nothing more: they signal nothing (each container ends
//! itself), they only read one Lease and write one file.
//!
//! What the pod must offer, checked at the door ([`refusals`]): a `command` in every container
//! (its first process runs it: spanset cannot know an image's entrypoint), a PID namespace per
//! container (no `shareProcessNamespace`, no `hostPID`: a container's first process ends the
//! container only as PID 1 of its own), a ServiceAccount token for the guard, and none of the
//! guard's names taken.

use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ExecAction, ObjectFieldSelector,
    PodTemplateSpec, Probe, SecurityContext, Volume, VolumeMount,
};
use serde_json::Value;
use spanset_plan::SpecError;

use super::{object::lease_name, settings::Settings};

/// The init container's name.
pub const GUARD_INIT: &str = "spanset-guard";
/// The watching sidecar's name.
pub const GUARD_WATCH: &str = "spanset-guard-watch";
/// The memory emptyDir holding the guard's state file.
pub const GUARD_VOLUME: &str = "spanset-guard";
/// Where it is mounted in every container.
pub const GUARD_DIR: &str = "/var/run/spanset-guard";
/// The emptyDir holding the containers' first process.
pub const GUARD_BIN_VOLUME: &str = "spanset-guard-bin";
/// Where it is mounted in every container.
pub const GUARD_BIN_DIR: &str = "/var/run/spanset-guard-bin";
/// The state file.
pub const GUARD_STATE: &str = "/var/run/spanset-guard/state";
/// The containers' first process, as they run it.
pub const GUARD_EXEC: &str = "/var/run/spanset-guard-bin/spanset-guard-exec";
/// `spanset-guard-exec` in spanset's image (beside `/spanset`): the watch's probes run it, a
/// small program, since they run every second.
pub const GUARD_EXEC_IN_IMAGE: &str = "/spanset-guard-exec";
/// The user the guard's containers run as: the image's unprivileged one.
pub const GUARD_USER: i64 = 65532;

/// The arguments of `spanset guard <mode>` for a federation's pods.
pub fn guard_args(
    mode: &str,
    namespace: &str,
    federation: &str,
    uid: &str,
    lease_seconds: i32,
    settings: &Settings,
    grace: i64,
) -> Vec<String> {
    let mut args = vec![
        "guard".into(),
        mode.into(),
        format!("--lease={namespace}/{}", lease_name(federation)),
        format!("--federation-uid={uid}"),
        format!("--lease-seconds={lease_seconds}"),
        format!("--drift={}", settings.drift),
        format!("--grace={grace}"),
        format!("--state={GUARD_STATE}"),
    ];
    if mode == "wait" {
        args.push(format!("--exec-dir={GUARD_BIN_DIR}"));
    }
    args
}

/// The command a guarded container runs: its own, by its first process.
pub fn wrapped(command: &[String]) -> Vec<String> {
    let mut out = vec![GUARD_EXEC.to_string(), "--state".into(), GUARD_STATE.into(), "--".into()];
    out.extend(command.iter().cloned());
    out
}

/// Whether a container's command is run by the guard's first process.
pub fn is_wrapped(command: Option<&[String]>) -> bool {
    command.is_some_and(|c| c.first().map(String::as_str) == Some(GUARD_EXEC) && c.iter().any(|a| a == "--"))
}

/// The guard's own containers' security context: the image's unprivileged user, nothing more.
fn unprivileged() -> SecurityContext {
    SecurityContext {
        run_as_user: Some(GUARD_USER),
        run_as_group: Some(GUARD_USER),
        run_as_non_root: Some(true),
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
        ..Default::default()
    }
}

/// An exec probe running `spanset-guard-exec ready`: the watch read its Lease within `fresh`.
fn ready_probe(fresh: std::time::Duration, period: i32, failures: i32) -> Probe {
    let command = vec![
        GUARD_EXEC_IN_IMAGE.to_string(),
        "ready".into(),
        format!("--state={GUARD_STATE}"),
        format!("--within-ms={}", fresh.as_millis()),
    ];
    Probe {
        exec: Some(ExecAction { command: Some(command) }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        timeout_seconds: Some(1),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

/// Adds the guard to `template` (once: a template that has it is left as it is) for the
/// federation `federation` (uid `uid`) in `namespace`. The template must pass [`refusals`].
pub fn inject(
    template: &mut PodTemplateSpec,
    namespace: &str,
    federation: &str,
    uid: &str,
    lease_seconds: i32,
    settings: &Settings,
) {
    let pod = template.spec.get_or_insert_with(Default::default);
    let grace = pod.termination_grace_period_seconds.unwrap_or(30);
    let container = |name: &str, mode: &str| {
        let args = guard_args(mode, namespace, federation, uid, lease_seconds, settings, grace);
        Container {
            name: name.to_string(),
            image: Some(settings.guard_image.clone()),
            // The image's entrypoint is `spanset` (the controller's own image).
            args: Some(args),
            env: Some(vec![EnvVar {
                name: "POD_NAME".into(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector { field_path: "metadata.name".into(), api_version: None }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            volume_mounts: Some(vec![
                mount(GUARD_VOLUME, GUARD_DIR, false),
                mount(GUARD_BIN_VOLUME, GUARD_BIN_DIR, false),
            ]),
            security_context: Some(unprivileged()),
            // Why a guard failed is in its last lines when it wrote no message.
            termination_message_policy: Some("FallbackToLogsOnError".into()),
            ..Default::default()
        }
    };
    let inits = pod.init_containers.get_or_insert_with(Vec::new);
    for c in inits.iter_mut().chain(pod.containers.iter_mut()) {
        if c.name == GUARD_INIT || c.name == GUARD_WATCH {
            continue;
        }
        if !is_wrapped(c.command.as_deref()) {
            c.command = Some(wrapped(c.command.as_deref().unwrap_or_default()));
        }
        let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
        for (name, path) in [(GUARD_VOLUME, GUARD_DIR), (GUARD_BIN_VOLUME, GUARD_BIN_DIR)] {
            if !mounts.iter().any(|m| m.name == name) {
                mounts.push(mount(name, path, true));
            }
        }
    }
    if !inits.iter().any(|c| c.name == GUARD_WATCH) {
        let mut watch = container(GUARD_WATCH, "watch");
        watch.restart_policy = Some("Always".into());
        // Started once it reads its Lease (the next containers wait for that); Ready while it
        // does: its latest read sent within three of its polls (it polls every P, waiting at
        // most P for an answer).
        let lease = lease_seconds.max(1);
        let poll = super::Timing::new(
            std::time::Duration::from_secs(lease as u64),
            settings.drift,
            std::time::Duration::ZERO,
            std::time::Duration::from_secs(grace.max(0) as u64),
        )
        .map(|t| t.poll)
        .unwrap_or(std::time::Duration::from_secs(2));
        watch.startup_probe = Some(ready_probe(poll * 3, 1, lease));
        watch.readiness_probe = Some(ready_probe(poll * 3, 1, 2));
        inits.insert(0, watch);
    }
    if !inits.iter().any(|c| c.name == GUARD_INIT) {
        inits.insert(0, container(GUARD_INIT, "wait"));
    }
    let volumes = pod.volumes.get_or_insert_with(Vec::new);
    for (name, medium) in [(GUARD_VOLUME, Some("Memory")), (GUARD_BIN_VOLUME, None)] {
        if !volumes.iter().any(|v| v.name == name) {
            volumes.push(Volume {
                name: name.into(),
                empty_dir: Some(EmptyDirVolumeSource { medium: medium.map(String::from), size_limit: None }),
                ..Default::default()
            });
        }
    }
}

/// What a template a pod lease is to guard lacks or forbids, each naming its field
/// (`spec.template.template.spec…`).
pub fn refusals(template: &PodTemplateSpec) -> Vec<SpecError> {
    const AT: &str = "spec.template.template.spec";
    let mut out = Vec::new();
    let mut refuse = |field: String, reason: &str| out.push(SpecError { field, reason: reason.into() });
    let Some(pod) = template.spec.as_ref() else { return out };
    if pod.share_process_namespace == Some(true) {
        refuse(
            format!("{AT}.shareProcessNamespace"),
            "a pod lease needs each container in a PID namespace of its own: a container ends itself by \
             its first process's exit, which ends the processes of its own namespace only",
        );
    }
    if pod.host_pid == Some(true) {
        refuse(
            format!("{AT}.hostPID"),
            "a pod lease needs each container in a PID namespace of its own, not the node's",
        );
    }
    if pod.automount_service_account_token == Some(false) {
        refuse(
            format!("{AT}.automountServiceAccountToken"),
            "a pod lease's guard reads its Lease with the pod's ServiceAccount token: it must be mounted",
        );
    }
    let inits = pod.init_containers.iter().flatten().enumerate().map(|(i, c)| (format!("initContainers[{i}]"), c));
    let mains = pod.containers.iter().enumerate().map(|(i, c)| (format!("containers[{i}]"), c));
    for (at, c) in inits.chain(mains) {
        if [GUARD_INIT, GUARD_WATCH].contains(&c.name.as_str()) {
            refuse(format!("{AT}.{at}.name"), "spanset-guard and spanset-guard-watch are the pod lease guard's names");
            continue;
        }
        if c.command.as_ref().is_none_or(|c| c.is_empty()) {
            refuse(
                format!("{AT}.{at}.command"),
                "a pod lease runs each container's command through its guard, so the command must be given: \
                 write the image's entrypoint here (spanset cannot read images)",
            );
        }
        for (j, m) in c.volume_mounts.iter().flatten().enumerate() {
            if m.mount_path.trim_end_matches('/') == GUARD_DIR || m.mount_path.trim_end_matches('/') == GUARD_BIN_DIR {
                refuse(
                    format!("{AT}.{at}.volumeMounts[{j}].mountPath"),
                    "the pod lease guard mounts its volumes there",
                );
            }
        }
    }
    for (i, v) in pod.volumes.iter().flatten().enumerate() {
        if v.name == GUARD_VOLUME || v.name == GUARD_BIN_VOLUME {
            refuse(
                format!("{AT}.volumes[{i}].name"),
                "spanset-guard and spanset-guard-bin are the pod lease guard's volumes",
            );
        }
    }
    out
}

/// What a pod's (or template's) spec says of its guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardSpec {
    /// The lease its guard enforces, in seconds (the longest spanset accepts when its
    /// arguments do not say: nothing takes its pod as stopped early).
    pub lease_seconds: i32,
    /// The federation uid the guard reads the Lease for, if its arguments say.
    pub federation_uid: Option<String>,
    /// What keeps it from guarding the pod whole, if anything: a container whose command its
    /// first process does not run, no watching sidecar, a shared PID namespace.
    pub defect: Option<String>,
}

/// The guard a pod spec (as JSON: a pod's or a template's `spec`) carries, if it carries the
/// guard's init container: a pod without it does not stop itself when its lease lapses.
pub fn guard_of(spec: &Value) -> Option<GuardSpec> {
    let inits = spec["initContainers"].as_array()?;
    let guard = inits.iter().find(|c| c["name"].as_str() == Some(GUARD_INIT))?;
    let args: Vec<&str> =
        guard["args"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let federation_uid = args.iter().find_map(|a| a.strip_prefix("--federation-uid=")).map(str::to_string);
    Some(GuardSpec { lease_seconds: lease_of_args(&args), federation_uid, defect: defect(spec) })
}

/// What keeps a spec's guard from guarding the whole pod, if anything.
fn defect(spec: &Value) -> Option<String> {
    if spec["shareProcessNamespace"].as_bool() == Some(true) || spec["hostPID"].as_bool() == Some(true) {
        return Some("its containers share a PID namespace, so they cannot end themselves".into());
    }
    let inits = spec["initContainers"].as_array().map(Vec::as_slice).unwrap_or_default();
    let watch = inits.iter().find(|c| c["name"].as_str() == Some(GUARD_WATCH));
    if watch.is_none_or(|w| w["restartPolicy"].as_str() != Some("Always")) {
        return Some(format!("no {GUARD_WATCH} sidecar reads its Lease"));
    }
    let mains = spec["containers"].as_array().map(Vec::as_slice).unwrap_or_default();
    for c in inits.iter().chain(mains) {
        let name = c["name"].as_str().unwrap_or_default();
        if name == GUARD_INIT || name == GUARD_WATCH {
            continue;
        }
        let command: Option<Vec<String>> =
            c["command"].as_array().map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect());
        if !is_wrapped(command.as_deref()) {
            return Some(format!("container {name} does not run through {GUARD_EXEC}"));
        }
    }
    None
}

/// The lease length a guard's arguments name (see [`guard_args`]), or the longest accepted.
pub fn lease_of_args(args: &[&str]) -> i32 {
    args.iter()
        .find_map(|a| a.strip_prefix("--lease-seconds=")?.parse::<i32>().ok())
        .filter(|s| *s > 0)
        .unwrap_or(spanset_api::MAX_POD_LEASE_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(spec: Value) -> PodTemplateSpec {
        serde_json::from_value(serde_json::json!({ "spec": spec })).unwrap()
    }

    #[test]
    fn the_guard_runs_first_watches_beside_and_runs_every_other_command_once() {
        let mut t = template(serde_json::json!({
            "initContainers": [{"name": "setup", "image": "busybox", "command": ["sh", "-c", "true"]}],
            "containers": [{"name": "db", "image": "postgres:16", "command": ["docker-entrypoint.sh"], "args": ["postgres"]}],
            "terminationGracePeriodSeconds": 20,
        }));
        assert!(refusals(&t).is_empty());
        let s = Settings::default();
        inject(&mut t, "shop", "db", "u1", 30, &s);
        inject(&mut t, "shop", "db", "u1", 30, &s);
        let spec = serde_json::to_value(t.spec.as_ref().unwrap()).unwrap();
        let names = |k: &str| -> Vec<String> {
            spec[k].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(names("initContainers"), ["spanset-guard", "spanset-guard-watch", "setup"]);
        assert_eq!(names("containers"), ["db"]);
        assert_eq!(spec["shareProcessNamespace"], Value::Null, "each container keeps its own PID namespace");
        assert_eq!(spec["volumes"].as_array().unwrap().len(), 2);
        let db = &spec["containers"][0];
        assert_eq!(
            db["command"],
            serde_json::json!([GUARD_EXEC, "--state", GUARD_STATE, "--", "docker-entrypoint.sh"]),
            "wrapped once"
        );
        assert_eq!(db["args"], serde_json::json!(["postgres"]), "the arguments are the container's own");
        assert!(db["volumeMounts"].as_array().unwrap().iter().all(|m| m["readOnly"] == true));
        assert_eq!(spec["initContainers"][2]["command"][0], GUARD_EXEC, "the user's init containers too");
        let watch = &spec["initContainers"][1];
        assert_eq!(watch["restartPolicy"], "Always");
        assert_eq!(
            watch["readinessProbe"]["exec"]["command"],
            serde_json::json!([GUARD_EXEC_IN_IMAGE, "ready", format!("--state={GUARD_STATE}"), "--within-ms=6000"]),
            "three polls of 2 s (L 30 s)"
        );
        assert_eq!(watch["securityContext"]["runAsUser"], GUARD_USER);
        let args = spec["initContainers"][0]["args"].as_array().unwrap();
        assert!(args.contains(&serde_json::json!("--lease=shop/db-pods")), "{args:?}");
        assert!(args.contains(&serde_json::json!("--federation-uid=u1")), "{args:?}");
        assert!(args.contains(&serde_json::json!("--grace=20")), "{args:?}");
        assert!(args.contains(&serde_json::json!(format!("--exec-dir={GUARD_BIN_DIR}"))), "{args:?}");
        let g = guard_of(&spec).unwrap();
        assert_eq!(g, GuardSpec { lease_seconds: 30, federation_uid: Some("u1".into()), defect: None });
        assert_eq!(guard_of(&serde_json::json!({"containers": []})), None);
        let unreadable = serde_json::json!({"initContainers": [{"name": GUARD_INIT, "args": ["guard", "wait"]}]});
        assert_eq!(
            guard_of(&unreadable).unwrap().lease_seconds,
            spanset_api::MAX_POD_LEASE_SECONDS,
            "the longest, to be safe"
        );
    }

    #[test]
    fn a_pod_whose_guard_cannot_end_every_container_says_why() {
        let mut t = template(
            serde_json::json!({"containers": [{"name": "db", "image": "redis", "command": ["redis-server"]}]}),
        );
        inject(&mut t, "shop", "db", "u1", 30, &Settings::default());
        let mut spec = serde_json::to_value(t.spec.as_ref().unwrap()).unwrap();
        assert_eq!(guard_of(&spec).unwrap().defect, None);
        spec["containers"].as_array_mut().unwrap().push(serde_json::json!({"name": "debug", "image": "busybox"}));
        assert!(guard_of(&spec).unwrap().defect.unwrap().contains("container debug"));
        spec["shareProcessNamespace"] = true.into();
        assert!(guard_of(&spec).unwrap().defect.unwrap().contains("PID namespace"));
        let mut no_watch = serde_json::to_value(t.spec.as_ref().unwrap()).unwrap();
        no_watch["initContainers"].as_array_mut().unwrap().remove(1);
        assert!(guard_of(&no_watch).unwrap().defect.unwrap().contains(GUARD_WATCH));
    }

    #[test]
    fn a_template_the_guard_cannot_hold_is_refused_naming_each_field() {
        let t = template(serde_json::json!({
            "shareProcessNamespace": true, "hostPID": true, "automountServiceAccountToken": false,
            "initContainers": [{"name": "spanset-guard-watch", "image": "x", "command": ["x"]}],
            "containers": [{"name": "db", "image": "postgres", "args": ["postgres"],
                "volumeMounts": [{"name": "v", "mountPath": "/var/run/spanset-guard/"}]}],
            "volumes": [{"name": "spanset-guard-bin", "emptyDir": {}}],
        }));
        let fields: Vec<String> = refusals(&t).into_iter().map(|e| e.field).collect();
        let at = |f: &str| format!("spec.template.template.spec.{f}");
        assert_eq!(
            fields,
            [
                at("shareProcessNamespace"),
                at("hostPID"),
                at("automountServiceAccountToken"),
                at("initContainers[0].name"),
                at("containers[0].command"),
                at("containers[0].volumeMounts[0].mountPath"),
                at("volumes[0].name"),
            ]
        );
    }
}
