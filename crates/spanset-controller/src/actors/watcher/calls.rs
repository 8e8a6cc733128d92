//! Member calls shared by several writes: conditional deletes, releases of shared objects, and a
//! volume set to Retain.
//! Which outcome counts as done is [`super::decide`]'s to say.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy},
};
use serde::{Serialize, de::DeserializeOwned};
use spanset_api::labels::FIELD_MANAGER;

use super::decide::{CallFailure, DeleteOutcome, answer::delete_outcome, claims::retain_patch, teardown::deletable};
use crate::member::{
    guard_access::{self as access, Leave},
    sharing::{self, Release},
};

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

/// Deletes the object of that name if it is `federation`'s (the incarnation `uid`, where the
/// object says which) and not being deleted already; conditional on the uid and version read,
/// so that an object changed or replaced since is judged again, never deleted on this read.
pub async fn delete_if_ours<K>(
    api: &Api<K>,
    name: &str,
    federation: &str,
    uid: Option<&str>,
    dp: &DeleteParams,
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await? {
        Some(obj) if deletable(&obj, federation, uid) => {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: obj.meta().uid.clone(),
                    resource_version: obj.meta().resource_version.clone(),
                }),
                ..dp.clone()
            };
            delete(api, name, &dp, false).await.map(|_| ())
        }
        _ => Ok(()),
    }
}

/// Releases federation `leaving`'s hold on a shared object (see [`sharing::release`]): deletes
/// it if no other federation keeps it (`others`: the host's word), or writes it without the
/// leaving federation's name; both conditional on the version read, so that a keeper added
/// meanwhile is never lost (the conflict is retried with the next teardown).
pub async fn release<K>(api: &Api<K>, name: &str, leaving: &str, others: &BTreeSet<String>) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let Some(stored) = api.get_opt(name).await? else { return Ok(()) };
    match sharing::release(stored.meta(), leaving, others) {
        Release::Untouched => Ok(()),
        Release::Delete => {
            let dp = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                preconditions: Some(Preconditions {
                    uid: None,
                    resource_version: stored.meta().resource_version.clone(),
                }),
                ..Default::default()
            };
            delete(api, name, &dp, false).await.map(|_| ())
        }
        Release::Keep(meta) => {
            let mut next = stored;
            *next.meta_mut() = *meta;
            let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
            api.replace(name, &pp, &next).await.map(|_| ())
        }
    }
}

/// Removes federation `leaving`'s entry from the namespace's guard access object `api` names
/// (its Role or its RoleBinding, see [`access`]): deletes it if `leaving` was the last
/// federation served, or writes it for the others; both conditional on the version read, so
/// that an entry added meanwhile is never lost (the conflict is retried with the next
/// teardown). `render` makes the object that serves what is left.
pub async fn release_guard_access<K>(
    api: &Api<K>,
    leaving: &str,
    render: impl Fn(&BTreeMap<String, String>, &str) -> K,
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let Some(stored) = api.get_opt(access::ACCESS_NAME).await? else { return Ok(()) };
    match access::left(stored.meta(), leaving) {
        Leave::Untouched => Ok(()),
        Leave::Delete => {
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: None,
                    resource_version: stored.meta().resource_version.clone(),
                }),
                ..Default::default()
            };
            delete(api, access::ACCESS_NAME, &dp, false).await.map(|_| ())
        }
        Leave::Keep(served, owner) => {
            let mut next = render(&served, &owner);
            next.meta_mut().resource_version = stored.meta().resource_version.clone();
            let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
            api.replace(access::ACCESS_NAME, &pp, &next).await.map(|_| ())
        }
    }
}

/// Sets a volume's reclaim policy to Retain, answering the volume as stored.
pub async fn retain(pvs: &Api<PersistentVolume>, name: &str) -> Result<PersistentVolume, kube::Error> {
    let pp = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    pvs.patch(name, &pp, &Patch::Merge(&retain_patch())).await
}
