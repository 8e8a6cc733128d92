//! Upgrade fixtures: what a past spanset wrote (and what the members' own controllers made of
//! it), captured from that commit's own sandbox by `tests/fixtures/upgrade/capture.sh`, loaded
//! into a current sandbox as an administrator would restore it: the objects as they were, each
//! with a uid of this sandbox. A uid cannot be chosen on create, so every uid of the fixture
//! that another object names (the federation's, in its members' labels; a claim's, in its
//! volume's `claimRef`) is replaced by the new one; owner references to a StatefulSet are
//! dropped, and the StatefulSet, created last, adopts its pods and revisions back as a real
//! controller does after a restore.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

/// A fixture set: `tests/fixtures/upgrade/<commit>/<cluster>.json`.
pub struct Fixture {
    /// The commit that wrote it.
    pub commit: String,
    /// Each cluster's objects, as listed.
    pub clusters: BTreeMap<String, Vec<Value>>,
}

impl Fixture {
    /// Reads the fixture set of `commit`.
    pub fn read(commit: &str) -> Self {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upgrade").join(commit);
        let mut clusters = BTreeMap::new();
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "json") {
                let list: Value = serde_json::from_slice(&std::fs::read(&path).expect("readable")).expect("JSON");
                let name = path.file_stem().expect("a file name").to_string_lossy().to_string();
                clusters.insert(name, list["items"].as_array().cloned().unwrap_or_default());
            }
        }
        assert!(clusters.contains_key("host"), "{}: no host.json", dir.display());
        Self { commit: commit.to_string(), clusters }
    }

    /// The objects of one cluster of kind `kind`.
    pub fn of<'a>(&'a self, cluster: &str, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.clusters.get(cluster).into_iter().flatten().filter(move |o| o["kind"] == kind)
    }

    /// The member clusters of the fixture.
    pub fn members(&self) -> Vec<String> {
        self.clusters.keys().filter(|c| *c != "host").cloned().collect()
    }
}

/// The API resource of an object, from its `apiVersion` and `kind` (kube's own plural of the
/// kind, right for every kind a fixture holds).
fn resource(obj: &Value) -> ApiResource {
    let api_version = obj["apiVersion"].as_str().unwrap_or("v1");
    let kind = obj["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

/// The API of an object's kind, in its namespace if it has one.
fn api_of(client: &Client, obj: &Value) -> Api<DynamicObject> {
    let ar = resource(obj);
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// The object as a create sends it: what the server assigns (uid, resourceVersion, creation
/// time, generation) and status left out, owner references to a StatefulSet dropped.
fn for_create(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(meta) = o["metadata"].as_object_mut() {
        for field in ["uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp"] {
            meta.remove(field);
        }
        if let Some(refs) = meta.get_mut("ownerReferences").and_then(Value::as_array_mut) {
            refs.retain(|r| r["kind"] != "StatefulSet");
            if refs.is_empty() {
                meta.remove("ownerReferences");
            }
        }
    }
    if let Some(o) = o.as_object_mut() {
        o.remove("status");
    }
    o
}

/// Replaces every uid of `renamed` found anywhere in `obj` (labels, annotations, references).
fn renamed_uids(obj: &Value, renamed: &BTreeMap<String, String>) -> Value {
    let mut text = obj.to_string();
    for (old, new) in renamed {
        text = text.replace(old.as_str(), new.as_str());
    }
    serde_json::from_str(&text).expect("still JSON")
}

/// Creates `obj` (renamed) and answers its new uid.
async fn create(client: &Client, obj: &Value, renamed: &BTreeMap<String, String>) -> String {
    let body: DynamicObject = serde_json::from_value(renamed_uids(&for_create(obj), renamed)).expect("an object");
    let created = api_of(client, obj)
        .create(&PostParams::default(), &body)
        .await
        .unwrap_or_else(|e| panic!("restoring {} {}: {e}", obj["kind"], obj["metadata"]["name"]));
    created.metadata.uid.expect("a uid")
}

/// Writes the fixture's status of `obj` onto the object of that name.
async fn restore_status(client: &Client, obj: &Value, renamed: &BTreeMap<String, String>) {
    let Some(status) = obj.get("status") else { return };
    let name = obj["metadata"]["name"].as_str().expect("a name");
    let body = renamed_uids(&json!({"status": status}), renamed);
    api_of(client, obj)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(body))
        .await
        .unwrap_or_else(|e| panic!("restoring the status of {} {name}: {e}", obj["kind"]));
}

/// The federations of the fixture created in the host with their status: answers the uids
/// renamed (the fixture's to the host's).
pub async fn restore_federations(fixture: &Fixture, host: &Client) -> BTreeMap<String, String> {
    let mut renamed = BTreeMap::new();
    for fsts in fixture.of("host", "FederatedStatefulSet") {
        let old = fsts["metadata"]["uid"].as_str().expect("a uid").to_string();
        let new = create(host, fsts, &renamed).await;
        renamed.insert(old, new);
        restore_status(host, fsts, &renamed).await;
    }
    renamed
}

/// Each member's objects, created in the order a restore needs: volumes and claims, the
/// revisions and pods (orphans), the Services, EndpointSlices and budgets spanset wrote, and the
/// StatefulSets last, which adopt the pods. Objects the cluster makes for itself (the
/// `kubernetes` Service, slices of the EndpointSlice controller) are left to it.
pub async fn restore_members(
    fixture: &Fixture,
    clients: &BTreeMap<String, Client>,
    renamed: &mut BTreeMap<String, String>,
) {
    for member in fixture.members() {
        let client = &clients[&member];
        for claim in fixture.of(&member, "PersistentVolumeClaim") {
            let old = claim["metadata"]["uid"].as_str().expect("a uid").to_string();
            let new = create(client, claim, renamed).await;
            renamed.insert(old, new);
        }
        for kind in ["PersistentVolume", "ControllerRevision", "Pod", "Service", "EndpointSlice", "PodDisruptionBudget"]
        {
            for obj in fixture.of(&member, kind) {
                let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                let labels = &obj["metadata"]["labels"];
                let own = match kind {
                    "Service" => name != "kubernetes",
                    "EndpointSlice" => labels["endpointslice.kubernetes.io/managed-by"] == "spanset.dev",
                    _ => true,
                };
                if own {
                    create(client, obj, renamed).await;
                }
            }
        }
        for sts in fixture.of(&member, "StatefulSet") {
            create(client, sts, renamed).await;
        }
    }
}

/// The MemberClusters' status and the leader Leases of the fixture, once the MemberClusters
/// exist: the Leases in `lease_namespace`, where this controller looks for them.
pub async fn restore_host_rest(
    fixture: &Fixture,
    host: &Client,
    lease_namespace: &str,
    renamed: &BTreeMap<String, String>,
) {
    for member in fixture.of("host", "MemberCluster") {
        restore_status(host, member, renamed).await;
    }
    for lease in fixture.of("host", "Lease") {
        let mut lease = lease.clone();
        lease["metadata"]["namespace"] = json!(lease_namespace);
        let api = api_of(host, &lease);
        let name = lease["metadata"]["name"].as_str().expect("a name").to_string();
        let _ = api.delete(&name, &Default::default()).await;
        create(host, &lease, renamed).await;
    }
}

/// Generous: a restore on a loaded machine.
pub const RESTORED_WITHIN: Duration = Duration::from_secs(120);
