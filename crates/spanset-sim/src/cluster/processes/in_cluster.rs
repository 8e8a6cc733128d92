//! What a kubelet gives a container so that an in-cluster API client works (client-go's
//! `rest.InClusterConfig`, kube-rs's `Config::incluster`, kubectl without a kubeconfig):
//!
//! - the environment of the `kubernetes` Service (`KUBERNETES_SERVICE_HOST`,
//!   `KUBERNETES_SERVICE_PORT`, …), here naming the container's own member's API listener at
//!   its cluster's gateway in the pod network (`a.b.0.1:443`), since the sandbox's Service IPs
//!   are not routed ("Accessing the Kubernetes API from a Pod",
//!   kubernetes.io/docs/tasks/run-application/access-api-from-pod/);
//! - the projected service-account volume at [`MOUNT_PATH`], with `token`, `ca.crt` and
//!   `namespace` ("Configure Service Accounts for Pods",
//!   kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/), unless
//!   `automountServiceAccountToken: false` on the pod or, when the pod says nothing, on its
//!   ServiceAccount (the pod's setting wins).
//!
//! The token is a TokenRequest token bound to the ServiceAccount's uid, as the kubelet asks for
//! one; kube-apiserver extends such tokens to a year (`--service-account-extend-token-expiration`,
//! on by default), so the sandbox does too and never rotates it. RBAC applies to it as to any
//! ServiceAccount's token. The sandbox creates no `default` ServiceAccounts, so a pod whose
//! ServiceAccount does not exist gets no token (a real apiserver's ServiceAccount admission
//! would have refused the pod).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::launch::Mount;
use crate::{
    cluster::Cluster,
    store::{object, tokens::BoundTo},
};

/// Where the service-account volume is mounted in every container.
pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The lifetime of the token: a year, as kube-apiserver extends the kubelet's tokens.
const TOKEN_SECONDS: i64 = 365 * 24 * 3600;

/// The `kubernetes` Service's variables, pointing at the cluster's API listener (none before
/// the sandbox has bound it).
pub fn environment(cluster: &Cluster) -> Vec<(String, String)> {
    let Some(api) = cluster.api_endpoint.get() else { return Vec::new() };
    let (host, port) = (api.addr.ip().to_string(), api.addr.port().to_string());
    let url = format!("tcp://{host}:{port}");
    [
        ("KUBERNETES_SERVICE_HOST", host.clone()),
        ("KUBERNETES_SERVICE_PORT", port.clone()),
        ("KUBERNETES_SERVICE_PORT_HTTPS", port.clone()),
        ("KUBERNETES_PORT", url.clone()),
        (&format!("KUBERNETES_PORT_{port}_TCP"), url),
        (&format!("KUBERNETES_PORT_{port}_TCP_PROTO"), "tcp".into()),
        (&format!("KUBERNETES_PORT_{port}_TCP_PORT"), port.clone()),
        (&format!("KUBERNETES_PORT_{port}_TCP_ADDR"), host),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The pod's ServiceAccount name: `spec.serviceAccountName`, its deprecated alias, else
/// `default` (what the ServiceAccount admission plugin fills in).
pub fn service_account_name(pod: &Value) -> &str {
    ["/spec/serviceAccountName", "/spec/serviceAccount"]
        .into_iter()
        .find_map(|p| pod.pointer(p).and_then(Value::as_str).filter(|s| !s.is_empty()))
        .unwrap_or("default")
}

/// Whether the token is mounted: the pod's `automountServiceAccountToken`, else the
/// ServiceAccount's, else yes.
pub fn automount(pod: &Value, service_account: Option<&Value>) -> bool {
    let own = |v: &Value| v.get("automountServiceAccountToken").and_then(Value::as_bool);
    pod.get("spec").and_then(own).or_else(|| service_account.and_then(own)).unwrap_or(true)
}

/// The service-account volume of a pod whose directory is `pod_dir` (written once per pod, its
/// containers sharing it), or `None` when automounting is off or the ServiceAccount is missing.
pub fn volume(cluster: &Cluster, pod: &Value, pod_dir: &Path) -> Result<Option<Mount>, String> {
    let ns = object::namespace(pod);
    let name = service_account_name(pod);
    let sa = cluster.storage.get(&(String::new(), "serviceaccounts".into()), ns, name);
    if !automount(pod, sa.as_deref()) {
        return Ok(None);
    }
    let Some(sa) = sa else { return Ok(None) };
    let dir: PathBuf = pod_dir.join("serviceaccount");
    if !dir.join("token").exists() {
        let at = |e: std::io::Error| format!("the service-account volume: {e}");
        std::fs::create_dir_all(&dir).map_err(at)?;
        let bound = BoundTo { namespace: ns.into(), name: name.into(), uid: object::uid(&sa).into() };
        let audiences = ["https://kubernetes.default.svc.cluster.local".to_string()];
        let expires = std::time::Instant::now() + std::time::Duration::from_secs(TOKEN_SECONDS as u64);
        let token = cluster.tokens.issue_for(bound, &audiences, TOKEN_SECONDS, expires);
        let ca = cluster.api_endpoint.get().and_then(|a| a.ca_pem.clone()).unwrap_or_default();
        std::fs::write(dir.join("ca.crt"), ca).map_err(at)?;
        std::fs::write(dir.join("namespace"), ns).map_err(at)?;
        // Written last: its presence says the volume is complete.
        std::fs::write(dir.join("token"), token).map_err(at)?;
    }
    Ok(Some(Mount { host: dir, path: MOUNT_PATH.into(), read_only: true }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_pods_automount_setting_wins_over_its_service_accounts() {
        let sa_off = json!({"automountServiceAccountToken": false});
        let pod = |v: Value| json!({"spec": {"automountServiceAccountToken": v}});
        assert!(automount(&json!({"spec": {}}), None));
        assert!(!automount(&json!({"spec": {}}), Some(&sa_off)));
        assert!(automount(&pod(json!(true)), Some(&sa_off)), "the pod's true wins");
        assert!(!automount(&pod(json!(false)), Some(&json!({}))));
    }

    #[test]
    fn a_pod_without_a_service_account_uses_default() {
        assert_eq!(service_account_name(&json!({"spec": {}})), "default");
        assert_eq!(service_account_name(&json!({"spec": {"serviceAccount": "old"}})), "old");
        assert_eq!(
            service_account_name(&json!({"spec": {"serviceAccountName": "guard", "serviceAccount": "old"}})),
            "guard"
        );
    }
}
