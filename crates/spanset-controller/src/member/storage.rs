//! Storage handover (`migration.storage: Move`), the start-ordinal blog's step 6 done by the
//! controller: a released ordinal's PersistentVolume is kept (reclaim policy Retain) and its
//! PV and PVC objects are copied to the destination — without uid, resourceVersion and status,
//! the PV's claimRef pointing at the claim by name only — so that the destination's pod binds
//! the same volume. Nothing is deleted in the source. A volume tied to one node (a `local`
//! volume, or node affinity) cannot follow its ordinal and is refused, naming the PV.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::ResourceExt;

/// Why a PV cannot be handed over, if it cannot.
pub fn refusal(pv: &PersistentVolume) -> Option<String> {
    let spec = pv.spec.as_ref()?;
    if spec.local.is_some() {
        return Some(format!("PersistentVolume {} is a local volume: it cannot leave its node", pv.name_any()));
    }
    if spec.node_affinity.as_ref().is_some_and(|a| a.required.is_some()) {
        return Some(format!(
            "PersistentVolume {} is bound to nodes by its nodeAffinity: it cannot leave them",
            pv.name_any()
        ));
    }
    None
}

fn clean_meta(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    meta.uid = None;
    meta.resource_version = None;
    meta.creation_timestamp = None;
    meta.managed_fields = None;
    meta.generation = None;
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.owner_references = None;
    meta.finalizers = None;
    // Controllers' bookkeeping (bind-completed and the like) belongs to the source cluster.
    meta.annotations = None;
}

/// The PV as it is created in the destination: Retain, pre-bound to the claim by name.
pub fn pv_for_destination(pv: &PersistentVolume) -> PersistentVolume {
    let mut out = pv.clone();
    clean_meta(&mut out.metadata);
    out.status = None;
    if let Some(spec) = out.spec.as_mut() {
        spec.persistent_volume_reclaim_policy = Some("Retain".into());
        if let Some(claim) = spec.claim_ref.as_mut() {
            claim.uid = None;
            claim.resource_version = None;
        }
    }
    out
}

/// A handed-over copy labelled as the federation's (beside the labels it came with), so that
/// the destination's guard (`spanset-member-scope`) lets spanset's identity create it, and
/// later hand it back.
pub fn owned_by<K: kube::Resource>(mut k: K, labels: &BTreeMap<String, String>) -> K {
    let mine = k.meta_mut().labels.get_or_insert_with(BTreeMap::new);
    mine.extend(labels.iter().map(|(a, b)| (a.clone(), b.clone())));
    k
}

/// The PVC as it is created in the destination: naming the same volume.
pub fn pvc_for_destination(pvc: &PersistentVolumeClaim) -> PersistentVolumeClaim {
    let mut out = pvc.clone();
    clean_meta(&mut out.metadata);
    out.status = None;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(spec: serde_json::Value) -> PersistentVolume {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv-1", "uid": "u", "resourceVersion": "7", "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
            "spec": spec,
            "status": {"phase": "Bound"},
        }))
        .unwrap()
    }

    #[test]
    fn a_copied_volume_is_retained_pre_bound_by_name_and_carries_no_source_identity() {
        let source = pv(serde_json::json!({
            "persistentVolumeReclaimPolicy": "Delete",
            "csi": {"driver": "volumes.sim.spanset.dev", "volumeHandle": "vol-1"},
            "claimRef": {"namespace": "default", "name": "data-web-3", "uid": "c", "resourceVersion": "5"},
        }));
        assert_eq!(refusal(&source), None);
        let copy = pv_for_destination(&source);
        assert_eq!(copy.metadata.uid, None);
        assert_eq!(copy.metadata.resource_version, None);
        assert!(copy.status.is_none() && copy.metadata.annotations.is_none());
        let spec = copy.spec.unwrap();
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
        let claim = spec.claim_ref.unwrap();
        assert_eq!((claim.name.as_deref(), claim.uid, claim.resource_version), (Some("data-web-3"), None, None));
        assert_eq!(spec.csi.unwrap().volume_handle, "vol-1");
    }

    #[test]
    fn a_handed_over_copy_carries_the_federations_labels_beside_its_own() {
        let mut source = pv(serde_json::json!({"csi": {"driver": "d", "volumeHandle": "vol-1"}}));
        source.metadata.labels = Some(BTreeMap::from([("tier".to_string(), "db".to_string())]));
        let labels = BTreeMap::from([("spanset.dev/federation".to_string(), "web".to_string())]);
        let copy = owned_by(pv_for_destination(&source), &labels);
        let got = copy.metadata.labels.unwrap();
        assert_eq!(got.get("spanset.dev/federation").map(String::as_str), Some("web"));
        assert_eq!(got.get("tier").map(String::as_str), Some("db"));
    }

    #[test]
    fn volumes_tied_to_a_node_are_refused_naming_the_pv() {
        let local = pv(serde_json::json!({"local": {"path": "/mnt/disk"}}));
        assert!(refusal(&local).unwrap().contains("PersistentVolume pv-1 is a local volume"));
        let pinned = pv(serde_json::json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}]}}}));
        assert!(refusal(&pinned).unwrap().contains("nodeAffinity"));
    }
}
