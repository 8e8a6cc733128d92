//! Storage handovers and retired claims: which volumes may leave (bound, not tied to a node),
//! what a destination does with a claim of the same name, and the order of a retirement (the
//! volume set to Retain before its claim is deleted, the delete conditional on the claim read).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::{WriteRefusal, WriterStanding, admit::admit};
use crate::{
    actors::messages::WriteError,
    decisions::safety::{self, Rules},
    member::{cache::ClaimRecord, storage},
};

/// The gate of a claim operation in `term`.
pub fn plan_claims(standing: &WriterStanding<'_>, term: u64) -> Result<(), WriteRefusal> {
    admit(standing, term)
}

/// The merge patch that keeps a volume when its claim goes.
pub fn retain_patch() -> serde_json::Value {
    serde_json::json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}})
}

/// The volume of a claim to hand over, or why it cannot go yet (not bound).
pub fn volume_to_release(cluster: &str, name: &str, pvc: &PersistentVolumeClaim) -> Result<String, WriteError> {
    pvc.spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .ok_or_else(|| refused(cluster, format!("PersistentVolumeClaim {name} is not bound to a volume yet")))
}

/// Whether a bound volume may leave its member: not one tied to a node.
pub fn release_allowed(cluster: &str, pv: &PersistentVolume) -> Result<(), WriteError> {
    match storage::refusal(pv) {
        Some(why) => Err(refused(cluster, why)),
        None => Ok(()),
    }
}

fn refused(cluster: &str, message: String) -> WriteError {
    WriteError::Refused { cluster: cluster.to_string(), code: 422, message }
}

/// What a destination does with the claim it finds under a handed-over claim's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdoptClaim {
    /// None there: create the handed-over claim.
    Create,
    /// One bound to the handed-over volume already: nothing to do.
    Keep,
    /// One for another volume: stale (the ordinal ran elsewhere since, on a fresh claim, or
    /// left with `storage: Detached`). It must never bind again: it is retired (its volume
    /// kept) unless already being deleted, then the handed-over claim is created.
    ReplaceStale {
        /// Retire it first (it is not being deleted yet).
        retire: bool,
    },
}

/// The destination's step for a claim of the handed-over claim's name bound for `volume`.
pub fn adopt_claim(there: Option<&PersistentVolumeClaim>, volume: &str) -> AdoptClaim {
    match there {
        None => AdoptClaim::Create,
        Some(c) if c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == Some(volume) => AdoptClaim::Keep,
        Some(c) => AdoptClaim::ReplaceStale { retire: c.metadata.deletion_timestamp.is_none() },
    }
}

/// The handed-over claim met the stale one still there (409): it is created once that is gone.
pub fn stale_claim_pending(cluster: &str, name: &str, volume: &str) -> WriteError {
    WriteError::Unavailable {
        cluster: cluster.to_string(),
        message: format!(
            "stale PersistentVolumeClaim {name} is still being deleted; the handed-over claim for volume {volume} \
             is created once it is gone"
        ),
    }
}

/// Whether a claim named for retirement is still to retire: there, and not being deleted.
pub fn retirable(pvc: Option<&PersistentVolumeClaim>) -> bool {
    pvc.is_some_and(|c| c.metadata.deletion_timestamp.is_none())
}

/// One call of a claim's retirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetireCall {
    /// Set this volume to Retain, if it still exists.
    RetainVolume(String),
    /// Delete the claim, conditional on its uid and resourceVersion (exactly the version the
    /// decision saw, [`safety::claim_precondition`]); gone counts as done, changed does not.
    DeleteClaim {
        /// The claim's name.
        name: String,
        /// Its uid and resourceVersion.
        exactly: Option<(String, u64)>,
    },
}

/// The calls that retire `claim`, in order: its volume set to Retain first when `keep_volume`,
/// then the claim deleted.
pub fn retire_calls(claim: &ClaimRecord, keep_volume: bool) -> Vec<RetireCall> {
    let mut out = Vec::new();
    if keep_volume && let Some(v) = &claim.volume {
        out.push(RetireCall::RetainVolume(v.clone()));
    }
    let exactly = safety::claim_precondition(&Rules::ALL, &claim.uid, claim.rv);
    out.push(RetireCall::DeleteClaim { name: claim.name.clone(), exactly });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(volume: Option<&str>, deleting: bool) -> PersistentVolumeClaim {
        let mut c: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data-redis-0", "namespace": "db", "uid": "c-1", "resourceVersion": "42"},
            "spec": {"volumeName": volume},
        }))
        .expect("a claim");
        if deleting {
            c.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().expect("a time"),
            ));
        }
        c
    }

    #[test]
    fn claims_retire_only_with_their_volume_first_set_to_retain_and_exactly_as_observed() {
        let record = ClaimRecord::of(&claim(Some("pv-1"), false)).1;
        let delete = RetireCall::DeleteClaim { name: "data-redis-0".into(), exactly: Some(("c-1".into(), 42)) };
        assert_eq!(retire_calls(&record, true), [RetireCall::RetainVolume("pv-1".into()), delete.clone()]);
        assert_eq!(retire_calls(&record, false), [delete], "the volume goes by its own policy");
        assert_eq!(retain_patch()["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    }

    #[test]
    fn a_claim_gone_or_being_deleted_is_not_retired_again() {
        assert!(retirable(Some(&claim(Some("pv-1"), false))));
        assert!(!retirable(Some(&claim(Some("pv-1"), true))));
        assert!(!retirable(None));
    }

    #[test]
    fn an_unbound_claim_cannot_be_handed_over() {
        assert_eq!(volume_to_release("east", "data-redis-0", &claim(Some("pv-1"), false)), Ok("pv-1".into()));
        assert!(matches!(
            volume_to_release("east", "data-redis-0", &claim(None, false)),
            Err(WriteError::Refused { code: 422, message, .. }) if message.contains("not bound")
        ));
    }

    #[test]
    fn a_local_volume_cannot_leave_its_node() {
        let local: PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv-1"}, "spec": {"local": {"path": "/data"}},
        }))
        .expect("a volume");
        assert!(matches!(release_allowed("east", &local), Err(WriteError::Refused { code: 422, .. })));
        let network: PersistentVolume = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "pv-2"}, "spec": {"csi": {"driver": "x", "volumeHandle": "h"}}}),
        )
        .expect("a volume");
        assert_eq!(release_allowed("east", &network), Ok(()));
    }

    #[test]
    fn a_destination_keeps_its_claim_for_the_volume_and_retires_a_stale_one() {
        assert_eq!(adopt_claim(None, "pv-1"), AdoptClaim::Create);
        assert_eq!(adopt_claim(Some(&claim(Some("pv-1"), false)), "pv-1"), AdoptClaim::Keep);
        assert_eq!(adopt_claim(Some(&claim(Some("pv-0"), false)), "pv-1"), AdoptClaim::ReplaceStale { retire: true });
        assert_eq!(
            adopt_claim(Some(&claim(Some("pv-0"), true)), "pv-1"),
            AdoptClaim::ReplaceStale { retire: false },
            "one being deleted already is waited for"
        );
        assert!(matches!(stale_claim_pending("east", "c", "pv-1"), WriteError::Unavailable { .. }));
    }
}
