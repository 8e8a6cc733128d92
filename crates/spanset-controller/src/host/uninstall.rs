//! Uninstalling never deletes workloads. Deleting the FederatedStatefulSet CRD (an uninstall,
//! `kubectl delete crd federatedstatefulsets.spanset.dev`) makes the API server delete every
//! federation, each of which then waits for spanset's finalizer; tearing the members down then
//! would delete every member StatefulSet, its pods, and its claims with them
//! (`persistentVolumeClaimRetentionPolicy.whenDeleted: Delete`). So before a deleted federation
//! is torn down, its CRD is read by name: while the CRD itself is being deleted, spanset lets
//! go — removes its finalizer and writes nothing in any member — and says so (a Warning Event
//! on the federation and a log line naming the CRD and what stays in the members).
//!
//! The CRD is read afresh at that moment, not taken from a watch: the API server marks the CRD
//! before it deletes any of its objects, so a read made after the federation was seen deleted
//! always sees the CRD's mark, whatever order two watches would deliver the two changes in.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, CustomResourceExt, ResourceExt,
    api::{Patch, PatchParams},
};
use spanset_api::FederatedStatefulSet;
use spanset_api::labels::FINALIZER;

use crate::{
    host::events::{Note, Recorder},
    member::objects::FederationKey,
};

/// What becomes of a deleted federation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deletion {
    /// An ordinary deletion: its member objects are removed, then its finalizer.
    TearDown,
    /// Its CRD is being deleted (or is gone): only its finalizer is removed.
    LetGo,
}

/// Decides from the federations' CRD as read now (`None`: not found).
pub fn deletion(crd: Option<&CustomResourceDefinition>) -> Deletion {
    match crd {
        Some(crd) if crd.metadata.deletion_timestamp.is_none() => Deletion::TearDown,
        // A CRD being deleted, or already gone (the federation read is older than the read of
        // its CRD): nothing may be torn down on its account.
        _ => Deletion::LetGo,
    }
}

/// Reads the federations' CRD and decides. An error (the read was refused or failed) decides
/// nothing: the caller tears nothing down and tries again.
pub async fn decide(host: &Client) -> Result<Deletion, String> {
    let name = FederatedStatefulSet::crd_name();
    let crd = Api::<CustomResourceDefinition>::all(host.clone())
        .get_opt(name)
        .await
        .map_err(|e| format!("CustomResourceDefinition {name} cannot be read, so nothing is torn down yet: {e}"))?;
    Ok(deletion(crd.as_ref()))
}

/// Lets go of a federation whose CRD is being deleted: says so, then removes spanset's
/// finalizer (conditional on the resourceVersion read) and nothing else. Said first: the
/// federation goes with the finalizer, and with it the coordinator that would say it after.
pub async fn let_go(host: &Client, fsts: &FederatedStatefulSet) -> Result<(), String> {
    let key = FederationKey::of(fsts);
    let crd = FederatedStatefulSet::crd_name();
    let members = members_of(fsts);
    tracing::warn!(
        federation = %key, crd, members = %members,
        "the CustomResourceDefinition {crd} is being deleted: spanset lets go of the federation and deletes \
         nothing in the members; its StatefulSets, pods, claims, Services and carried objects stay in {members}"
    );
    let message = format!(
        "the CustomResourceDefinition {crd} is being deleted: spanset releases this federation without deleting \
         anything in the members; its StatefulSets, pods, claims, Services and carried objects stay in {members} \
         (delete them there to remove them)"
    );
    Recorder::new(host.clone(), "spanset".into()).record(fsts, &Note::warning("CRDDeleted", message)).await;
    let api: Api<FederatedStatefulSet> = Api::namespaced(host.clone(), &key.namespace);
    let finalizers: Vec<String> = fsts.finalizers().iter().filter(|f| *f != FINALIZER).cloned().collect();
    let patch = serde_json::json!({"metadata": {"finalizers": finalizers, "resourceVersion": fsts.resource_version()}});
    api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|e| e.to_string())?;
    Ok(())
}

/// The members the federation's status places slices in, for messages.
fn members_of(fsts: &FederatedStatefulSet) -> String {
    let names: Vec<&str> = fsts.status.iter().flat_map(|s| &s.slices).map(|s| s.cluster.as_str()).collect();
    if names.is_empty() { "every member".into() } else { names.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn a_federation_is_torn_down_only_while_its_crd_stands() {
        let mut crd = CustomResourceDefinition::default();
        assert_eq!(deletion(Some(&crd)), Deletion::TearDown);
        crd.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        assert_eq!(deletion(Some(&crd)), Deletion::LetGo);
        assert_eq!(deletion(None), Deletion::LetGo);
    }

    #[test]
    fn the_message_names_the_members_holding_slices() {
        let mut fsts = spanset_api::example(&["east".to_string(), "west".to_string()]);
        assert_eq!(members_of(&fsts), "every member");
        fsts.status = Some(
            serde_json::from_value(serde_json::json!({"slices": [
                {"cluster": "east", "start": 0, "replicas": 3}, {"cluster": "west", "start": 3, "replicas": 3}]}))
            .unwrap(),
        );
        assert_eq!(members_of(&fsts), "east, west");
    }
}
