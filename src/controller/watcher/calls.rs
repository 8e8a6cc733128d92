//! Member calls shared by several writes: conditional deletes, and a volume set to Retain.
//! Which outcome counts as done is [`super::decide`]'s to say.

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, Preconditions},
};
use serde::de::DeserializeOwned;

use super::decide::{CallFailure, DeleteOutcome, answer::delete_outcome, claims::retain_patch, teardown::deletable};
use crate::controller::labels::FIELD_MANAGER;

/// Sends a delete; `conflict_is_gone`: it carries a uid precondition (see [`delete_outcome`]).
pub async fn delete<K>(
    api: &Api<K>,
    name: &str,
    dp: &DeleteParams,
    conflict_is_gone: bool,
) -> Result<DeleteOutcome, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, dp).await {
        Ok(_) => Ok(DeleteOutcome::Deleted),
        Err(e) => match delete_outcome(Some(&CallFailure::of(&e)), conflict_is_gone) {
            DeleteOutcome::Failed => Err(e),
            done => Ok(done),
        },
    }
}

/// Deletes the object of this uid; one gone already, or another object by that name by now,
/// leaves nothing of it: done.
pub async fn delete_on_uid<K>(api: &Api<K>, name: &str, uid: String) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let dp = DeleteParams {
        preconditions: Some(Preconditions { uid: Some(uid), resource_version: None }),
        ..Default::default()
    };
    delete(api, name, &dp, true).await.map(|_| ())
}

/// Deletes the object of that name if it is spanset's and not being deleted already.
pub async fn delete_if_ours<K>(api: &Api<K>, name: &str, dp: &DeleteParams) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await? {
        Some(obj) if deletable(&obj) => delete(api, name, dp, false).await.map(|_| ()),
        _ => Ok(()),
    }
}

/// Sets a volume's reclaim policy to Retain, answering the volume as stored.
pub async fn retain(pvs: &Api<PersistentVolume>, name: &str) -> Result<PersistentVolume, kube::Error> {
    let pp = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    pvs.patch(name, &pp, &Patch::Merge(&retain_patch())).await
}
