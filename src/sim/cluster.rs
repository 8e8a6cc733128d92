//! One simulated cluster: its served resources, its storage and its settings. Everything that
//! acts on a cluster (HTTP handlers, garbage collector, simulated controllers) holds an
//! `Arc<Cluster>` and writes through [`super::registry`].

use std::{sync::Arc, time::Duration};

use serde_json::json;
use tokio::sync::Notify;

use super::{
    faults::Faults,
    resources::ResourceTable,
    storage::{Storage, StorageLimits},
};

/// Settings of one simulated cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The cluster's name (kubeconfig context, cluster and user).
    pub name: String,
    /// `gitVersion` reported by `/version`.
    pub git_version: String,
    /// History and watcher buffer sizes.
    pub limits: StorageLimits,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Watch duration when the client sets no `timeoutSeconds` (a real server picks 30–60 min).
    pub default_watch_timeout: Duration,
    /// Largest request body accepted (the apiserver's 3 MiB).
    pub max_body_bytes: usize,
    /// Seed of every random choice the cluster makes (injected errors, generated names).
    pub seed: u64,
}

impl ClusterConfig {
    /// Defaults for a cluster of this name.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_string(),
            git_version: "v1.33.1".into(),
            limits: StorageLimits::default(),
            bookmark_interval: Duration::from_secs(2),
            default_watch_timeout: Duration::from_secs(1800),
            max_body_bytes: 3 * 1024 * 1024,
            seed: 1,
        }
    }
}

/// The state of one simulated cluster.
pub struct Cluster {
    /// Settings.
    pub config: ClusterConfig,
    /// Served resources, built-in and custom.
    pub resources: ResourceTable,
    /// Objects and their history.
    pub storage: Storage,
    /// Wakes the garbage collector after deletions.
    pub gc_wake: Notify,
    /// Injected faults.
    pub faults: Faults,
}

impl Cluster {
    /// A new cluster holding the namespaces every real cluster starts with.
    pub fn new(config: ClusterConfig) -> Arc<Self> {
        let cluster = Arc::new(Self {
            storage: Storage::new(config.limits),
            resources: ResourceTable::default(),
            faults: Faults::new(config.seed),
            config,
            gc_wake: Notify::new(),
        });
        let ns = cluster
            .resources
            .by_plural("", "namespaces")
            .expect("namespaces are built in");
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            cluster
                .create(
                    &ns,
                    None,
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                    &Default::default(),
                )
                .expect("a fresh cluster accepts its own namespaces");
        }
        cluster
    }
}
