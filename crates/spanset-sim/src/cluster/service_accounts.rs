//! The ServiceAccount controller's one duty the sandbox needs: every namespace has its
//! `default` ServiceAccount, made as soon as the namespace is (kube-controller-manager's
//! `serviceaccount` controller does so, and puts it back when deleted). A pod that names no
//! account runs as it, and gets its token only if it exists.

use serde_json::json;

use crate::{
    cluster::Cluster,
    store::{actor::Component, object, registry::WriteOptions},
};

/// Creates the `default` ServiceAccount of every namespace without one (a terminating namespace
/// gets none); returns the writes made.
pub fn sweep(cluster: &Cluster) -> usize {
    let (Some(namespaces), Some(accounts)) =
        (cluster.resources.by_plural("", "namespaces"), cluster.resources.by_plural("", "serviceaccounts"))
    else {
        return 0;
    };
    let (all, _) = cluster.storage.list(&namespaces.storage_key(), None);
    let mut writes = 0;
    for ns in all.iter().filter(|ns| !object::is_deleting(ns)) {
        let name = object::name(ns);
        if cluster.storage.get(&accounts.storage_key(), name, "default").is_some() {
            continue;
        }
        let sa =
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}});
        if cluster.create(&accounts, Some(name), sa, &WriteOptions::by(Component::ServiceAccountController)).is_ok() {
            writes += 1;
        }
    }
    writes
}
