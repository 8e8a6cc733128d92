//! What a pod's spec asks of one container that runs a real process, read as the kubelet
//! reads it: the command (`command` replaces the image's entrypoint, `args` follow), the
//! environment (values, `fieldRef`s, ConfigMap and Secret keys, with `$(VAR)` references
//! expanded), and each volume mount's directory: a PersistentVolume's (the sandbox volume the
//! bound PV names), an `emptyDir` of the pod, or the keys of a ConfigMap or Secret written out.

use std::{collections::BTreeMap, path::Path};

use base64::Engine;
use serde_json::Value;

use super::launch::{Launch, Mount, Privileges};
use crate::{
    cluster::{Cluster, volumes},
    store::object,
};

/// The bare name of spanset's own image (`ghcr.io/spanset/spanset:VERSION`), whose containers
/// are the pod guard's.
pub const SPANSET_IMAGE: &str = "spanset";

/// The file name of the second binary of spanset's image, the first process of every guarded
/// container (the `Dockerfile` copies it beside `/spanset`). Named here, not imported, so that the
/// simulator depends on no crate of spanset's.
pub const GUARD_EXEC: &str = "spanset-guard-exec";

/// What the sandbox runs for an image whose container gives no `command`: the program the
/// image's entrypoint would be, else the image's own name. spanset's own image runs `/spanset`
/// ([`image_files`]), as its `Dockerfile` builds it.
pub fn entrypoint(image: &str) -> String {
    match super::image_name(image) {
        "redis" => "redis-server".into(),
        "etcd" => "etcd".into(),
        SPANSET_IMAGE => "/spanset".into(),
        other => other.to_string(),
    }
}

/// The files an image brings beside the machine's own, bound read-only into its containers'
/// roots: spanset's image is `/spanset` and `/spanset-guard-exec` (its `Dockerfile` copies both
/// to `/`), here the sandbox's own binary and the `spanset-guard-exec` built beside it, so that
/// a pod's guard is the build under test and `spanset guard wait` finds the containers' first
/// process beside itself, as in the image. An error says what is missing.
pub fn image_files(image: &str) -> Result<Vec<Mount>, String> {
    if super::image_name(image) != SPANSET_IMAGE {
        return Ok(Vec::new());
    }
    let exe = still_there(
        std::env::current_exe().map_err(|e| format!("spanset's image: cannot find the sandbox's own binary: {e}"))?,
    )?;
    let exec = exe.with_file_name(GUARD_EXEC);
    if !exec.is_file() {
        return Err(format!(
            "spanset's image has /{0} beside /spanset, and there is no {1}: build it with `cargo build` \
             (it is the package's second binary, `--bin {0}`)",
            GUARD_EXEC,
            exec.display()
        ));
    }
    let file = |host: std::path::PathBuf, path: &str| Mount { host, path: path.into(), read_only: true };
    Ok(vec![file(exe, "/spanset"), file(exec, &format!("/{}", GUARD_EXEC))])
}

/// The sandbox's own binary as a file to mount, or why it cannot be: once the file is replaced
/// (a rebuild while the sandbox runs) Linux names the running one `PATH (deleted)`, which no
/// bind mount can take, and spanset's pods would fail to start with `mount`'s own words.
fn still_there(exe: std::path::PathBuf) -> Result<std::path::PathBuf, String> {
    if exe.to_string_lossy().ends_with(" (deleted)") {
        return Err(format!(
            "spanset's image is the sandbox's own binary, and {} was replaced or removed since the sandbox \
             started (rebuilt?): restart the sandbox to run spanset's image",
            exe.display()
        ));
    }
    Ok(exe)
}

/// The user and group an image's process runs as when the pod says nothing: spanset's image
/// runs as its unprivileged user (the `Dockerfile`'s `USER 65532:65532`), every other as root.
fn image_user(image: &str) -> (u32, u32) {
    if super::image_name(image) == SPANSET_IMAGE { (65532, 65532) } else { (0, 0) }
}

/// A field of the container's `securityContext`, else of the pod's (for the fields a pod's
/// `securityContext` has too), as the kubelet merges them.
fn security<'a>(pod: &'a Value, c: &'a Value, field: &str) -> Option<&'a Value> {
    c.pointer(&format!("/securityContext/{field}"))
        .filter(|v| !v.is_null())
        .or_else(|| pod.pointer(&format!("/spec/securityContext/{field}")).filter(|v| !v.is_null()))
}

/// The user and group a container's process runs as: `runAsUser` and `runAsGroup` of its
/// `securityContext`, else of the pod's, else the image's.
pub fn run_as(pod: &Value, c: &Value) -> (u32, u32) {
    let (uid, gid) = image_user(c["image"].as_str().unwrap_or(""));
    let id = |field: &str, default: u32| {
        security(pod, c, field).and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()).unwrap_or(default)
    };
    (id("runAsUser", uid), id("runAsGroup", gid))
}

/// What in a container's `securityContext` the sandbox cannot honour for its process, if
/// anything (the kubelet shows it as `CreateContainerConfigError`): `runAsNonRoot` with root to
/// run as, and, when the sandbox is not root (`root` false: its containers' user namespace maps
/// only its own user, as their root), any other user or group.
pub fn security_refusal(pod: &Value, c: &Value, root: bool) -> Option<String> {
    let (uid, gid) = run_as(pod, c);
    if security(pod, c, "runAsNonRoot").and_then(Value::as_bool) == Some(true) && uid == 0 {
        return Some("container has runAsNonRoot and image will run as root".into());
    }
    if root && (uid >= super::launch::ID_COUNT || gid >= super::launch::ID_COUNT) {
        return Some(format!(
            "the container runs as user {uid}, group {gid} (securityContext): its pod's user namespace maps \
             users and groups 0 to {} only",
            super::launch::ID_COUNT - 1
        ));
    }
    if !root && (uid, gid) != (0, 0) {
        return Some(format!(
            "the container runs as user {uid}, group {gid} (securityContext), and the sandbox does not run as \
             root: its containers' user namespace maps only the sandbox's own user (as root); run the sandbox as \
             root to run containers as other users"
        ));
    }
    None
}

/// What a container's `securityContext` takes from its process.
fn privileges(pod: &Value, c: &Value) -> Privileges {
    let user = Some(run_as(pod, c)).filter(|ids| *ids != (0, 0));
    let drops = c.pointer("/securityContext/capabilities/drop").and_then(Value::as_array);
    Privileges {
        user,
        no_new_privs: c.pointer("/securityContext/allowPrivilegeEscalation") == Some(&Value::Bool(false)),
        drop_all_capabilities: drops.into_iter().flatten().any(|d| d == "ALL"),
    }
}

/// A container's `terminationMessagePath` (default `/dev/termination-log`).
pub fn termination_path(c: &Value) -> String {
    c.get("terminationMessagePath").and_then(Value::as_str).filter(|p| !p.is_empty()).unwrap_or(TERMINATION_PATH).into()
}

/// Where a container's termination message is when its spec says nothing.
pub const TERMINATION_PATH: &str = "/dev/termination-log";

/// Whether a container's log stands in for an empty termination message after a failure
/// (`terminationMessagePolicy: FallbackToLogsOnError`).
pub fn falls_back_to_logs(c: &Value) -> bool {
    c["terminationMessagePolicy"] == "FallbackToLogsOnError"
}

/// Expands `$(VAR)` from `env` as the kubelet does: `$$` is a literal `$`, and a reference to
/// an unknown variable stays as written.
pub fn expand(text: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out += &rest[..at];
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
            && let Some((_, v)) = env.iter().rev().find(|(k, _)| *k == inner[..end])
        {
            out += v;
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out + rest
}

/// The container (or init container) of that name in the pod's spec.
pub fn container<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    ["/spec/containers", "/spec/initContainers"]
        .into_iter()
        .filter_map(|list| pod.pointer(list)?.as_array())
        .flatten()
        .find(|c| c["name"] == name)
}

fn get(cluster: &Cluster, plural: &str, ns: &str, name: &str) -> Option<std::sync::Arc<Value>> {
    cluster.storage.get(&(String::new(), plural.to_string()), ns, name)
}

/// A key of a ConfigMap (`data`, or `binaryData` decoded) or Secret (`data` decoded, or
/// `stringData`).
fn key_of(cluster: &Cluster, kind: &str, ns: &str, name: &str, key: &str) -> Option<Vec<u8>> {
    let obj = get(cluster, kind, ns, name)?;
    let b64 = |v: &Value| v.as_str().and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok());
    match kind {
        "configmaps" => obj
            .pointer("/data")
            .and_then(|d| d.get(key))
            .and_then(Value::as_str)
            .map(|s| s.as_bytes().to_vec())
            .or_else(|| obj.pointer("/binaryData").and_then(|d| d.get(key)).and_then(b64)),
        _ => obj.pointer("/data").and_then(|d| d.get(key)).and_then(b64),
    }
}

/// Every key of a ConfigMap or Secret, decoded.
fn keys_of(cluster: &Cluster, kind: &str, ns: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
    let obj = get(cluster, kind, ns, name)?;
    let mut keys = BTreeMap::new();
    for field in ["data", "binaryData"] {
        for (k, _) in obj.get(field).and_then(Value::as_object).into_iter().flatten() {
            if let Some(v) = key_of(cluster, kind, ns, name, k) {
                keys.insert(k.clone(), v);
            }
        }
    }
    Some(keys)
}

/// The value of a `fieldRef` the kubelet fills in.
fn field(pod: &Value, path: &str, ip: &str) -> Result<String, String> {
    let s = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    Ok(match path {
        "metadata.name" => s("/metadata/name"),
        "metadata.namespace" => s("/metadata/namespace"),
        "metadata.uid" => s("/metadata/uid"),
        "spec.nodeName" => s("/spec/nodeName"),
        "spec.serviceAccountName" => s("/spec/serviceAccountName"),
        "status.podIP" => ip.to_string(),
        "status.hostIP" => s("/status/hostIP"),
        other => {
            if let Some(label) = other.strip_prefix("metadata.labels['").and_then(|l| l.strip_suffix("']")) {
                return Ok(object::labels(pod).and_then(|l| l.get(label)).and_then(Value::as_str).unwrap_or("").into());
            }
            return Err(format!("fieldRef.fieldPath {other} is not filled in by the sandbox"));
        }
    })
}

/// The container's environment, in order, each value's `$(VAR)`s expanded from those before it:
/// the kubelet's own variables (the `kubernetes` Service's), then the container's, which win.
fn environment(cluster: &Cluster, pod: &Value, c: &Value, ip: &str) -> Result<Vec<(String, String)>, String> {
    let ns = object::namespace(pod);
    let mut env: Vec<(String, String)> = super::in_cluster::environment(cluster);
    for (i, e) in c.get("env").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let name = e["name"].as_str().unwrap_or("").to_string();
        let at = format!("env[{i}] ({name})");
        let value = if let Some(v) = e.get("value").and_then(Value::as_str) {
            expand(v, &env)
        } else if let Some(from) = e.get("valueFrom") {
            if let Some(path) = from.pointer("/fieldRef/fieldPath").and_then(Value::as_str) {
                field(pod, path, ip).map_err(|why| format!("{at}: {why}"))?
            } else if let Some(r) = from.get("configMapKeyRef").or_else(|| from.get("secretKeyRef")) {
                let kind = if from.get("configMapKeyRef").is_some() { "configmaps" } else { "secrets" };
                let (obj, key) = (r["name"].as_str().unwrap_or(""), r["key"].as_str().unwrap_or(""));
                match key_of(cluster, kind, ns, obj, key) {
                    Some(v) => String::from_utf8_lossy(&v).into_owned(),
                    None if r["optional"] == true => continue,
                    None => return Err(format!("{at}: key {key} of {kind} {ns}/{obj} not found")),
                }
            } else {
                return Err(format!("{at}: valueFrom is not filled in by the sandbox"));
            }
        } else {
            String::new()
        };
        env.push((name, value));
    }
    Ok(env)
}

/// Writes the keys of a ConfigMap or Secret volume (or its `items`) into `dir`.
fn write_keys(keys: &BTreeMap<String, Vec<u8>>, items: Option<&Value>, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let chosen: Vec<(String, String)> = match items.and_then(Value::as_array) {
        Some(items) => items
            .iter()
            .filter_map(|i| Some((i["key"].as_str()?.to_string(), i["path"].as_str()?.to_string())))
            .collect(),
        None => keys.keys().map(|k| (k.clone(), k.clone())).collect(),
    };
    for (key, path) in chosen {
        if let Some(v) = keys.get(&key) {
            let file = dir.join(path.trim_start_matches('/'));
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(file, v)?;
        }
    }
    Ok(())
}

/// The directory on this machine for one of the pod's volumes (`pod_dir` holds the pod's own:
/// `emptyDir`s and written-out ConfigMaps and Secrets).
fn volume_dir(cluster: &Cluster, pod: &Value, volume: &Value, pod_dir: &Path) -> Result<std::path::PathBuf, String> {
    let ns = object::namespace(pod);
    let name = volume["name"].as_str().unwrap_or("");
    let at = |why: String| format!("volume {name}: {why}");
    if let Some(claim) = volume.pointer("/persistentVolumeClaim/claimName").and_then(Value::as_str) {
        let pvc =
            get(cluster, "persistentvolumeclaims", ns, claim).ok_or_else(|| at(format!("claim {claim} not found")))?;
        let pv_name = pvc
            .pointer("/spec/volumeName")
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| at(format!("claim {claim} is not bound")))?;
        let pv = get(cluster, "persistentvolumes", "", pv_name).ok_or_else(|| at(format!("PV {pv_name} not found")))?;
        let id = volumes::volume_of(&pv).ok_or_else(|| at(format!("PV {pv_name} is not a sandbox volume")))?;
        return cluster.volumes.directory(id).map_err(|e| at(format!("directory of {id}: {e}")));
    }
    let own = pod_dir.join("volumes").join(name);
    if volume.get("emptyDir").is_some() {
        // World-writable, as the kubelet makes it: containers of different users share it.
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&own).map_err(|e| at(e.to_string()))?;
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o777)).map_err(|e| at(e.to_string()))?;
        return Ok(own);
    }
    for (field, kind, key) in [("configMap", "configmaps", "name"), ("secret", "secrets", "secretName")] {
        if let Some(src) = volume.get(field) {
            let obj = src[key].as_str().unwrap_or("");
            let keys = match keys_of(cluster, kind, ns, obj) {
                Some(keys) => keys,
                None if src["optional"] == true => BTreeMap::new(),
                None => return Err(at(format!("{kind} {ns}/{obj} not found"))),
            };
            write_keys(&keys, src.get("items"), &own).map_err(|e| at(e.to_string()))?;
            return Ok(own);
        }
    }
    Err(at("only persistentVolumeClaim, emptyDir, configMap and secret volumes are mounted for real processes".into()))
}

/// The launch of one container of a pod with IP `ip`; `pod_dir` holds the pod's own volumes.
pub fn launch(cluster: &Cluster, pod: &Value, name: &str, ip: &str, pod_dir: &Path) -> Result<Launch, String> {
    let c = container(pod, name).ok_or_else(|| format!("no container {name}"))?;
    let env = environment(cluster, pod, c, ip)?;
    let strings = |k: &str| -> Vec<String> {
        c.get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|s| expand(s, &env))
            .collect()
    };
    let mut argv = strings("command");
    let image = c["image"].as_str().unwrap_or("");
    if argv.is_empty() {
        argv.push(entrypoint(image));
    }
    let termination_path = termination_path(c);
    if !termination_path.starts_with('/') {
        return Err(format!("terminationMessagePath: {termination_path:?} is not absolute"));
    }
    if let Some(why) = security_refusal(pod, c, super::launch::running_as_root()) {
        return Err(why);
    }
    argv.extend(strings("args"));
    let volumes: Vec<&Value> = pod.pointer("/spec/volumes").and_then(Value::as_array).into_iter().flatten().collect();
    let mut mounts = image_files(image)?;
    for (i, m) in c.get("volumeMounts").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let vname = m["name"].as_str().unwrap_or("");
        let volume = volumes
            .iter()
            .find(|v| v["name"] == vname)
            .ok_or_else(|| format!("volumeMounts[{i}]: no volume named {vname}"))?;
        let mut host = volume_dir(cluster, pod, volume, pod_dir)?;
        if let Some(sub) = m.get("subPath").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            host = host.join(sub.trim_start_matches('/'));
            super::launch::make_dir_for_containers(&host).map_err(|e| format!("volumeMounts[{i}].subPath: {e}"))?;
        }
        let path = m["mountPath"].as_str().unwrap_or("").to_string();
        if !path.starts_with('/') {
            return Err(format!("volumeMounts[{i}].mountPath: {path:?} is not absolute"));
        }
        mounts.push(Mount { host, path, read_only: m["readOnly"] == true });
    }
    // The service-account volume, unless the container mounts something there itself (as the
    // ServiceAccount admission plugin leaves such a container alone).
    if !mounts.iter().any(|m| m.path.trim_end_matches('/') == super::in_cluster::MOUNT_PATH)
        && let Some(sa) = super::in_cluster::volume(cluster, pod, pod_dir)?
    {
        mounts.push(sa);
    }
    let pod_name = object::name(pod);
    let hostname = pod.pointer("/spec/hostname").and_then(Value::as_str).unwrap_or(pod_name).to_string();
    let ns = object::namespace(pod);
    let fqdn = pod
        .pointer("/spec/subdomain")
        .and_then(Value::as_str)
        .map(|sub| format!("{hostname}.{sub}.{ns}.svc.cluster.local "))
        .unwrap_or_default();
    let hosts = format!("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{ip}\t{fqdn}{hostname}\n");
    let resolv = format!(
        "nameserver {}\nsearch {ns}.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
        super::nameserver(cluster.config.pod_network())
    );
    Ok(Launch {
        hostname: hostname.clone(),
        argv,
        env,
        working_dir: c.get("workingDir").and_then(Value::as_str).unwrap_or("/").to_string(),
        mounts,
        etc: vec![
            ("hosts".into(), hosts),
            ("resolv.conf".into(), resolv),
            ("hostname".into(), format!("{hostname}\n")),
        ],
        termination_path,
        privileges: privileges(pod, c),
        read_only_root: c.pointer("/securityContext/readOnlyRootFilesystem") == Some(&Value::Bool(true)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_expand_as_the_kubelet_expands_them() {
        let env = vec![("POD_IP".to_string(), "100.64.1.2".to_string()), ("A".to_string(), "x".to_string())];
        assert_eq!(expand("--bind $(POD_IP) --a=$(A)$(A)", &env), "--bind 100.64.1.2 --a=xx");
        assert_eq!(expand("$$(POD_IP) $(NOPE) $ $(", &env), "$(POD_IP) $(NOPE) $ $(");
    }

    #[test]
    fn an_image_without_a_command_runs_its_known_entrypoint() {
        assert_eq!(entrypoint("redis:7.0"), "redis-server");
        assert_eq!(entrypoint("quay.io/coreos/etcd:v3.4"), "etcd");
        assert_eq!(entrypoint("busybox"), "busybox");
        assert_eq!(entrypoint("ghcr.io/spanset/spanset:0.1.0"), "/spanset", "the image's own entrypoint");
    }

    #[test]
    fn a_sandbox_binary_replaced_since_its_start_is_named_not_mounted() {
        let replaced = std::path::PathBuf::from("/work/target/debug/spanset (deleted)");
        let e = still_there(replaced).unwrap_err();
        assert!(
            e.contains("/work/target/debug/spanset (deleted) was replaced") && e.contains("restart the sandbox"),
            "{e}"
        );
        let there = std::path::PathBuf::from("/work/target/debug/spanset");
        assert_eq!(still_there(there.clone()), Ok(there));
    }

    #[test]
    fn spanset_s_image_brings_its_two_binaries_or_says_how_to_build_the_missing_one() {
        assert_eq!(image_files("redis:7"), Ok(vec![]), "other images bring nothing");
        let exe = std::env::current_exe().unwrap();
        match image_files("ghcr.io/spanset/spanset:0.1.0") {
            Ok(files) => {
                let at: Vec<(&str, bool)> = files.iter().map(|m| (m.path.as_str(), m.read_only)).collect();
                assert_eq!(at, [("/spanset", true), ("/spanset-guard-exec", true)]);
                assert_eq!(files[0].host, exe, "the sandbox's own binary");
                assert_eq!(files[1].host, exe.with_file_name("spanset-guard-exec"));
            }
            // A test binary has no spanset-guard-exec beside it (in target/debug/deps).
            Err(why) => {
                assert!(!exe.with_file_name("spanset-guard-exec").exists());
                assert!(why.contains("build it with `cargo build`") && why.contains("/spanset-guard-exec"), "{why}");
            }
        }
    }

    #[test]
    fn the_container_s_security_context_wins_over_the_pod_s_and_the_image_s_user() {
        let pod = serde_json::json!({"spec": {"securityContext": {"runAsUser": 1000, "runAsGroup": 2000}}});
        let c = |sc: Value, image: &str| serde_json::json!({"image": image, "securityContext": sc});
        assert_eq!(run_as(&pod, &c(serde_json::json!({}), "busybox")), (1000, 2000), "the pod's");
        assert_eq!(run_as(&pod, &c(serde_json::json!({"runAsUser": 7}), "busybox")), (7, 2000), "the container's");
        let bare = serde_json::json!({"spec": {}});
        assert_eq!(run_as(&bare, &c(serde_json::json!({}), "busybox")), (0, 0), "an image's root");
        assert_eq!(run_as(&bare, &c(serde_json::json!({}), "ghcr.io/spanset/spanset:1")), (65532, 65532), "USER");
        let guard = c(serde_json::json!({"runAsUser": 65532, "runAsGroup": 65532, "runAsNonRoot": true}), "x");
        assert_eq!(security_refusal(&bare, &guard, true), None, "as root the sandbox runs it as asked");
        let why = security_refusal(&bare, &guard, false).expect("not as root: refused");
        assert!(why.contains("user 65532, group 65532") && why.contains("run the sandbox as root"), "{why}");
        assert_eq!(security_refusal(&bare, &c(serde_json::json!({}), "busybox"), false), None, "root is mapped");
        let non_root = c(serde_json::json!({"runAsNonRoot": true}), "busybox");
        assert_eq!(
            security_refusal(&bare, &non_root, true).as_deref(),
            Some("container has runAsNonRoot and image will run as root")
        );
        let p = privileges(&bare, &guard);
        assert_eq!(p, Privileges { user: Some((65532, 65532)), no_new_privs: false, drop_all_capabilities: false });
    }
}
