//! Volumes for the claims of a cluster that has no storage driver: kwok runs no kubelet and no
//! CSI driver, so without this every claim of a StatefulSet stays Pending and its pods are never
//! scheduled. The provisioner answers each Pending claim with a PersistentVolume pre-bound to it
//! (a `claimRef` naming its uid), a directory of its own on this machine behind it, and leaves
//! the binding itself to the controller-manager's PV binder, so that what a claim and a volume
//! go through (Bound, Released, the protection finalizers) is Kubernetes' doing.
//!
//! Its volumes are `hostPath` directories under one root shared by every cluster of a fleet: a
//! volume handed from one cluster to another names the same directory in both, as a network
//! disk would, so that data written under one cluster's claim is read under the other's.
//! Retained, never deleted: what a claim leaves behind is the volume, Released, as on a cluster
//! whose storage class retains.

use std::path::PathBuf;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::{
    Api, Client, ResourceExt,
    api::PostParams,
    runtime::{WatchStreamExt, watcher},
};

/// The annotation on each volume it made, naming it, as external provisioners do.
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";

/// Its name in [`PROVISIONED_BY`].
pub const NAME: &str = "spanset-control-plane/hostpath";

/// A running provisioner; dropping it stops it.
pub struct Provisioner {
    task: tokio::task::JoinHandle<()>,
}

impl Provisioner {
    /// Starts answering the Pending claims of `client`'s cluster, each with a directory under
    /// `root`.
    pub fn start(cluster: &str, client: Client, root: PathBuf) -> Self {
        let cluster = cluster.to_string();
        let task = tokio::spawn(async move {
            let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
            let volumes: Api<PersistentVolume> = Api::all(client);
            // A watch that fails (the apiserver restarting, a member cut off) is retried with
            // back-off; a claim missed meanwhile is met again on the re-list.
            let mut events = watcher(claims, watcher::Config::default()).default_backoff().applied_objects().boxed();
            loop {
                match events.try_next().await {
                    Ok(Some(claim)) => {
                        if let Err(e) = provide(&volumes, &claim, &root).await {
                            tracing::warn!(%cluster, claim = %claim.name_any(), error = %e, "cannot provide a volume");
                        }
                    }
                    Ok(None) => return,
                    Err(e) => tracing::debug!(%cluster, error = %e, "the claims watch failed; retrying"),
                }
            }
        });
        Self { task }
    }
}

impl Drop for Provisioner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Makes the volume a Pending, unbound claim needs, once: its name is derived from the claim's
/// uid, so a second event of the same claim finds it made (409) and does nothing.
async fn provide(
    volumes: &Api<PersistentVolume>,
    claim: &PersistentVolumeClaim,
    root: &std::path::Path,
) -> kube::Result<()> {
    let Some(volume) = volume_for(claim, root) else { return Ok(()) };
    if let Some(path) = volume.spec.as_ref().and_then(|s| s.host_path.as_ref()).map(|h| PathBuf::from(&h.path)) {
        // 0777: the pods of a real node would write it as whatever user they run as.
        if std::fs::create_dir_all(&path).is_ok() {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777));
        }
    }
    match volumes.create(&PostParams::default(), &volume).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// The volume that answers `claim`, or `None` when it needs none: bound or binding already
/// (`spec.volumeName`), not Pending, being deleted, or naming a class other than none (a class
/// is some other provisioner's business).
pub fn volume_for(claim: &PersistentVolumeClaim, root: &std::path::Path) -> Option<PersistentVolume> {
    let spec = claim.spec.as_ref()?;
    let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    if phase != "Pending" || spec.volume_name.is_some() || claim.metadata.deletion_timestamp.is_some() {
        return None;
    }
    if spec.storage_class_name.as_deref().is_some_and(|c| !c.is_empty()) {
        return None;
    }
    let uid = claim.uid()?;
    let namespace = claim.namespace()?;
    let name = format!("pvc-{uid}");
    let storage = spec.resources.as_ref()?.requests.as_ref()?.get("storage")?.clone();
    let path = root.join(&name);
    let volume = serde_json::json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {PROVISIONED_BY: NAME}},
        "spec": {
            "capacity": {"storage": storage},
            "accessModes": spec.access_modes.clone().unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "volumeMode": spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".into()),
            "hostPath": {"path": path.display().to_string(), "type": "DirectoryOrCreate"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "namespace": namespace, "name": claim.name_any(), "uid": uid},
        },
    });
    serde_json::from_value(volume).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(json: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_pending_claim_gets_a_retained_volume_pre_bound_to_its_uid() {
        let c = claim(serde_json::json!({
            "metadata": {"name": "data-redis-0", "namespace": "default", "uid": "u-1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"},
        }));
        let v = volume_for(&c, std::path::Path::new("/vols")).expect("a volume");
        let v = serde_json::to_value(v).unwrap();
        assert_eq!(v["metadata"]["name"], "pvc-u-1");
        assert_eq!(v["spec"]["claimRef"]["uid"], "u-1");
        assert_eq!(v["spec"]["claimRef"]["name"], "data-redis-0");
        assert_eq!(v["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(v["spec"]["capacity"]["storage"], "1Gi");
        assert_eq!(v["spec"]["hostPath"]["path"], "/vols/pvc-u-1");
    }

    #[test]
    fn a_bound_classed_or_deleted_claim_gets_none() {
        let base = serde_json::json!({
            "metadata": {"name": "c", "namespace": "default", "uid": "u"},
            "spec": {"resources": {"requests": {"storage": "1Gi"}}},
        });
        let with = |path: &[&str], value: serde_json::Value| {
            let mut v = base.clone();
            let mut at = &mut v;
            for p in &path[..path.len() - 1] {
                at = &mut at[*p];
            }
            at[path[path.len() - 1]] = value;
            claim(v)
        };
        let root = std::path::Path::new("/vols");
        assert!(volume_for(&claim(base.clone()), root).is_some(), "the unchanged claim needs one");
        assert!(volume_for(&with(&["spec", "volumeName"], "pv-1".into()), root).is_none());
        assert!(volume_for(&with(&["spec", "storageClassName"], "fast".into()), root).is_none());
        assert!(volume_for(&with(&["status", "phase"], "Bound".into()), root).is_none());
        assert!(volume_for(&with(&["metadata", "deletionTimestamp"], "2026-01-01T00:00:00Z".into()), root).is_none());
    }
}
