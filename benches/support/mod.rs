//! What the benchmarks share: an in-process sandbox (a host plus members, optionally with
//! the simulated OpenKruise), spanset's CRDs and MemberClusters installed, and the controller
//! started in this process with the default lease settings of `spanset run`.
#![allow(dead_code)]

pub mod kubectl;
pub mod resp;

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use kube::{Api, Client};
use spanset::cli::sandbox::{install_crds, join_members};
use spanset_api::FederatedStatefulSet;
use spanset_controller::{
    leadership::leader::LeaseSettings,
    runtime::app::{self, RunOptions},
};
use spanset_sim::{
    cluster::ClusterConfig,
    sandbox::{fleet::Fleet, kubeconfig},
};

/// A running sandbox and a kubeconfig for it.
pub struct Sandbox {
    /// The simulated clusters.
    pub fleet: Fleet,
    dir: tempfile::TempDir,
    /// Contexts `host` and one per member.
    pub kubeconfig: PathBuf,
    /// A client of the host.
    pub host: Client,
}

impl Sandbox {
    /// `host` plus `members` at `time_factor`; with `join`, the CRDs and MemberClusters too.
    pub async fn start(members: &[String], time_factor: f64, join: bool) -> Self {
        Self::start_with(members, time_factor, join, |_| false).await
    }

    /// Like [`Sandbox::start`], with OpenKruise in the members `kruise` names.
    pub async fn start_with(members: &[String], time_factor: f64, join: bool, kruise: impl Fn(&str) -> bool) -> Self {
        Self::start_configured(members, time_factor, join, |c| c.kruise = kruise(&c.name)).await
    }

    /// Like [`Sandbox::start`], each cluster's settings changed by `configure` (real processes:
    /// `run_images`).
    pub async fn start_configured(
        members: &[String],
        time_factor: f64,
        join: bool,
        configure: impl Fn(&mut ClusterConfig),
    ) -> Self {
        let names: Vec<String> = std::iter::once("host".to_string()).chain(members.iter().cloned()).collect();
        let configs = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut config = ClusterConfig { time_factor, seed: 1 + i as u64, ..ClusterConfig::named(n) };
                configure(&mut config);
                config
            })
            .collect();
        let fleet = Fleet::start(configs, None).await.expect("sandbox starts");
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        kubeconfig::write(&kubeconfig, &fleet.access()).expect("kubeconfig written");
        let host = client(&kubeconfig, "host").await;
        if join {
            install_crds(&host).await.expect("CRDs installed");
            join_members(&host, members).await.expect("MemberClusters created");
        }
        Self { fleet, dir, kubeconfig, host }
    }

    /// A scratch directory living as long as the sandbox.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Starts the controller in this process.
    pub async fn controller(&self) -> app::Running {
        let opts = RunOptions {
            kubeconfig: Some(self.kubeconfig.clone()),
            context: Some("host".into()),
            metrics_addr: "127.0.0.1:0".parse().expect("address"),
            lease: Some(LeaseSettings::new("default", "spanset-leader", "bench")),
            bounds: Default::default(),
            shards: 1,
        };
        app::start(opts).await.expect("controller starts")
    }

    /// The FederatedStatefulSets of `default`.
    pub fn fsts(&self) -> Api<FederatedStatefulSet> {
        Api::namespaced(self.host.clone(), "default")
    }

    /// A client of one of the sandbox's clusters.
    pub async fn client(&self, context: &str) -> Client {
        client(&self.kubeconfig, context).await
    }
}

/// A kube client for one context of a kubeconfig.
pub async fn client(kubeconfig: &Path, context: &str) -> Client {
    app::host_client(Some(kubeconfig), Some(context)).await.expect("a client for the context")
}

/// A small pod template of its own labels (no volumes): the federations the controller and
/// scale figures create by the hundred.
pub fn light_template(app: &str) -> serde_json::Value {
    serde_json::json!({
        "selector": {"matchLabels": {"app": app}},
        "serviceName": app,
        "template": {
            "metadata": {"labels": {"app": app}},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]}
        }
    })
}

/// How long a benchmark waits for any one condition before it gives up.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// Whether a federation is settled at `replicas`: its latest generation observed, nothing
/// moving, every replica Ready and the Ready condition True.
pub fn settled(f: &FederatedStatefulSet, replicas: i32) -> bool {
    let Some(s) = &f.status else { return false };
    s.observed_generation == f.metadata.generation
        && s.moves.is_empty()
        && s.ready.as_deref() == Some(format!("{replicas}/{replicas}").as_str())
        && s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Waits until [`settled`], polling every 20 ms.
pub async fn wait_settled(api: &Api<FederatedStatefulSet>, name: &str, replicas: i32, what: &str) {
    let start = Instant::now();
    loop {
        if let Ok(f) = api.get(name).await
            && settled(&f, replicas)
        {
            return;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
