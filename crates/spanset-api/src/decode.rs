//! Reading FederatedStatefulSets one object at a time, so that one object the types cannot
//! hold (stored under an older CRD without a rule, edited by hand, or in a cluster whose
//! apiserver does not validate) never hides the others: a typed list fails as a whole on its
//! first bad item, and kube's watcher then retries it every second.

use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject, ListParams},
};

use super::{FederatedStatefulSet, FederatedStatefulSetStatus};

/// A stored FederatedStatefulSet the types cannot hold, with what is wrong with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Undecodable {
    /// The field the decoder stopped at (`spec.placement.clusters[0].weight`), empty when it
    /// is the object itself.
    pub field: String,
    /// The decoder's reason (``unknown variant `Deployment`, expected …``).
    pub reason: String,
    /// Its status, when that part can be read.
    pub status: Option<FederatedStatefulSetStatus>,
    /// The whole object as stored (its name, resourceVersion, generation… are read there).
    pub object: DynamicObject,
}

impl Undecodable {
    /// Its namespace.
    pub fn namespace(&self) -> String {
        self.object.namespace().unwrap_or_default()
    }

    /// Its name.
    pub fn name(&self) -> String {
        self.object.name_any()
    }

    /// `NAMESPACE/NAME`, for messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace(), self.name())
    }

    /// The resourceVersion it was read at.
    pub fn resource_version(&self) -> Option<String> {
        self.object.resource_version()
    }

    /// Its `metadata.generation`.
    pub fn generation(&self) -> Option<i64> {
        self.object.metadata.generation
    }

    /// Whether it is being deleted.
    pub fn deleting(&self) -> bool {
        self.object.metadata.deletion_timestamp.is_some()
    }
}

impl std::fmt::Display for Undecodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() { write!(f, "{}", self.reason) } else { write!(f, "{}: {}", self.field, self.reason) }
    }
}

/// The API resource of FederatedStatefulSets, for untyped lists and watches.
pub fn federation_resource() -> ApiResource {
    ApiResource::erase::<FederatedStatefulSet>(&())
}

/// Decodes one stored object, naming the field and the reason when it cannot.
pub fn federation(obj: &DynamicObject) -> Result<FederatedStatefulSet, Box<Undecodable>> {
    let failed = |field: String, reason: String| {
        let status = obj.data.get("status").and_then(|s| serde_json::from_value(s.clone()).ok());
        Box::new(Undecodable { field, reason, status, object: obj.clone() })
    };
    let value = serde_json::to_value(obj).map_err(|e| failed(String::new(), e.to_string()))?;
    serde_path_to_error::deserialize::<_, FederatedStatefulSet>(value).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { String::new() } else { field };
        failed(field, e.into_inner().to_string())
    })
}

/// Every FederatedStatefulSet in the cluster `client` reaches, split into those that decode
/// and those that do not.
pub async fn all_federations(client: &kube::Client) -> Result<(Vec<FederatedStatefulSet>, Vec<Undecodable>), String> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &federation_resource());
    list_federations(&api).await.map_err(|e| format!("cannot list FederatedStatefulSets: {e}"))
}

/// Every FederatedStatefulSet `api` lists, split into those that decode and those that do not.
pub async fn list_federations(
    api: &Api<DynamicObject>,
) -> Result<(Vec<FederatedStatefulSet>, Vec<Undecodable>), kube::Error> {
    let list = api.list(&ListParams::default()).await?;
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for obj in &list.items {
        match federation(obj) {
            Ok(f) => good.push(f),
            Err(u) => bad.push(*u),
        }
    }
    Ok((good, bad))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stored(edit: impl FnOnce(&mut serde_json::Value)) -> DynamicObject {
        let mut v = serde_json::to_value(super::super::example(&["east".into(), "west".into()])).unwrap();
        v["metadata"]["namespace"] = json!("default");
        v["metadata"]["resourceVersion"] = json!("7");
        edit(&mut v);
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_valid_object_decodes() {
        let f = federation(&stored(|_| {})).unwrap();
        assert_eq!(f.spec.placement.clusters.len(), 2);
    }

    #[test]
    fn an_unknown_backend_names_the_field_and_the_variants() {
        let u = federation(&stored(|v| v["spec"]["backend"] = json!("Deployment"))).unwrap_err();
        assert_eq!(u.field, "spec.backend");
        assert!(u.reason.contains("unknown variant `Deployment`"), "{}", u.reason);
        assert!(u.reason.contains("StatefulSet"), "{}", u.reason);
        assert_eq!(u.name(), "redis");
        assert_eq!(u.resource_version().as_deref(), Some("7"));
    }

    #[test]
    fn a_string_weight_names_the_cluster_entry() {
        let u = federation(&stored(|v| v["spec"]["placement"]["clusters"][0]["weight"] = json!("one"))).unwrap_err();
        assert_eq!(u.field, "spec.placement.clusters[0].weight");
        assert!(u.reason.contains("invalid type: string \"one\""), "{}", u.reason);
        assert_eq!(u.to_string(), format!("spec.placement.clusters[0].weight: {}", u.reason));
    }

    #[test]
    fn a_readable_status_is_kept_beside_an_unreadable_spec() {
        let u = federation(&stored(|v| {
            v["spec"]["replicas"] = json!("three");
            v["status"] = json!({"observedGeneration": 3, "readyReplicas": 2});
        }))
        .unwrap_err();
        assert_eq!(u.field, "spec.replicas");
        assert_eq!(u.status.and_then(|s| s.observed_generation), Some(3));
    }
}
