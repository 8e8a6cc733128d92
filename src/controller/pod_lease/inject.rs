//! The guard containers spanset adds to the pod template of a federation with a pod lease: an
//! init container that lets the pod start only under a fresh lease naming its ordinal
//! (`spanset guard wait`), and a container that stops the pod's other processes before the
//! lease can have lapsed (`spanset guard watch`), which sees them through a shared process
//! namespace. The two hand over through a memory-backed emptyDir (the first valid instant, on
//! the node's boot clock).
//!
//! The guard runs first among the init containers, so that nothing of the pod (not even the
//! user's own init containers) runs before the lease is seen.

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector, PodTemplateSpec, Volume, VolumeMount,
};

use super::{object::lease_name, settings::Settings};

/// The init container's name.
pub const GUARD_INIT: &str = "spanset-guard";
/// The watching container's name.
pub const GUARD_WATCH: &str = "spanset-guard-watch";
/// The emptyDir the two hand over through.
pub const GUARD_VOLUME: &str = "spanset-guard";
/// Where it is mounted in both.
pub const GUARD_DIR: &str = "/var/run/spanset-guard";

/// The arguments of `spanset guard <mode>` for a federation's pods.
pub fn guard_args(
    mode: &str,
    namespace: &str,
    federation: &str,
    lease_seconds: i32,
    settings: &Settings,
    grace: i64,
) -> Vec<String> {
    vec![
        "guard".into(),
        mode.into(),
        format!("--lease={namespace}/{}", lease_name(federation)),
        format!("--lease-seconds={lease_seconds}"),
        format!("--drift={}", settings.drift),
        format!("--grace={grace}"),
        format!("--state={GUARD_DIR}/state"),
    ]
}

/// Adds the guard to `template` (once: a template that has it is left as it is).
pub fn inject(
    template: &mut PodTemplateSpec,
    namespace: &str,
    federation: &str,
    lease_seconds: i32,
    settings: &Settings,
) {
    let pod = template.spec.get_or_insert_with(Default::default);
    let grace = pod.termination_grace_period_seconds.unwrap_or(30);
    let container = |name: &str, mode: &str| Container {
        name: name.to_string(),
        image: Some(settings.guard_image.clone()),
        // The image's entrypoint is `spanset` (the controller's own image).
        args: Some(guard_args(mode, namespace, federation, lease_seconds, settings, grace)),
        env: Some(vec![EnvVar {
            name: "POD_NAME".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: "metadata.name".into(), api_version: None }),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        volume_mounts: Some(vec![VolumeMount {
            name: GUARD_VOLUME.into(),
            mount_path: GUARD_DIR.into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let inits = pod.init_containers.get_or_insert_with(Vec::new);
    if !inits.iter().any(|c| c.name == GUARD_INIT) {
        inits.insert(0, container(GUARD_INIT, "wait"));
    }
    if !pod.containers.iter().any(|c| c.name == GUARD_WATCH) {
        pod.containers.push(container(GUARD_WATCH, "watch"));
    }
    let volumes = pod.volumes.get_or_insert_with(Vec::new);
    if !volumes.iter().any(|v| v.name == GUARD_VOLUME) {
        volumes.push(Volume {
            name: GUARD_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource { medium: Some("Memory".into()), size_limit: None }),
            ..Default::default()
        });
    }
    pod.share_process_namespace = Some(true);
}

/// The lease a pod spec's guard enforces, in seconds, if the spec (as JSON: a pod's or a
/// template's `spec`) carries the guard's init container: a pod without it does not stop itself
/// when its lease lapses. A guard whose length cannot be read counts as holding the longest
/// lease spanset accepts, so that nothing takes its pod as stopped early.
pub fn guard_lease(spec: &serde_json::Value) -> Option<i32> {
    let guard = spec["initContainers"].as_array()?.iter().find(|c| c["name"].as_str() == Some(GUARD_INIT))?;
    let args = guard["args"].as_array().map(|a| a.iter().filter_map(|v| v.as_str()).collect::<Vec<_>>());
    Some(lease_of_args(args.as_deref().unwrap_or_default()))
}

/// The lease length a guard's arguments name (see [`guard_args`]), or the longest accepted.
pub fn lease_of_args(args: &[&str]) -> i32 {
    args.iter()
        .find_map(|a| a.strip_prefix("--lease-seconds=")?.parse::<i32>().ok())
        .filter(|s| *s > 0)
        .unwrap_or(crate::api::MAX_POD_LEASE_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_runs_first_watches_beside_and_shares_the_process_namespace_once() {
        let mut t: PodTemplateSpec = serde_json::from_value(serde_json::json!({"spec": {
            "initContainers": [{"name": "setup", "image": "busybox"}],
            "containers": [{"name": "db", "image": "postgres:16"}],
            "terminationGracePeriodSeconds": 20,
        }}))
        .unwrap();
        let s = Settings::default();
        inject(&mut t, "shop", "db", 30, &s);
        inject(&mut t, "shop", "db", 30, &s);
        let spec = serde_json::to_value(t.spec.as_ref().unwrap()).unwrap();
        let names = |k: &str| -> Vec<String> {
            spec[k].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(names("initContainers"), ["spanset-guard", "setup"]);
        assert_eq!(names("containers"), ["db", "spanset-guard-watch"]);
        assert_eq!(spec["shareProcessNamespace"], true);
        assert_eq!(spec["volumes"].as_array().unwrap().len(), 1);
        let args = spec["initContainers"][0]["args"].as_array().unwrap();
        assert!(args.contains(&serde_json::json!("--lease=shop/db-pods")), "{args:?}");
        assert!(args.contains(&serde_json::json!("--grace=20")), "{args:?}");
        assert_eq!(guard_lease(&spec), Some(30));
        assert_eq!(guard_lease(&serde_json::json!({"containers": []})), None);
        let unreadable = serde_json::json!({"initContainers": [{"name": GUARD_INIT, "args": ["guard", "wait"]}]});
        assert_eq!(guard_lease(&unreadable), Some(crate::api::MAX_POD_LEASE_SECONDS), "the longest, to be safe");
    }
}
