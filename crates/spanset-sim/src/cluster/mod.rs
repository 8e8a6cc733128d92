//! The simulated cluster: its state ([`Cluster`]: settings, served resources, storage, faults,
//! and the sandbox-wide ledger and disks), and the components that act on it as a real
//! cluster's do — the StatefulSet controller, the kubelets and node lifecycle (on the pod
//! [`network`]), the EndpointSlice controller, the PersistentVolume controller, the disruption
//! controller, the garbage collector and the CRD finalizer. Every
//! component holds an `Arc<Cluster>` and writes through [`crate::store::registry`], as
//! real controllers write through the API server.

pub mod adoption;
pub mod components;
pub mod container_processes;
pub mod controller_loop;
pub mod crd_finalizer;
pub mod disks;
pub mod disruption;
pub mod endpointslices;
pub mod events;
pub mod faults;
pub mod furniture;
pub mod gc;
pub mod images;
pub mod init_containers;
pub mod inplace;
pub mod kubelet;
pub mod ledger;
pub mod logs;
pub mod network;
pub mod node_events;
pub mod pod_sandbox;
pub mod processes;
pub mod release;
pub mod service_accounts;
pub mod statefulset;
pub mod volumes;

use std::{sync::Arc, time::Duration};

use tokio::sync::Notify;

use self::{disks::VolumeStore, faults::Faults, ledger::Ledger, logs::LogStore, processes::Processes};
use crate::store::{
    account::Account,
    audit::AuditLog,
    resources::ResourceTable,
    service_ips::ServiceIps,
    storage::{Storage, StorageLimits},
    tokens::TokenStore,
};

/// Settings of one simulated cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The cluster's name (kubeconfig context, cluster and user).
    pub name: String,
    /// The Kubernetes release the cluster answers as: its `/version`, what discovery lists and
    /// what behaviour it keeps (`spanset sim --cluster-version`).
    pub release: release::Release,
    /// History and watcher buffer sizes.
    pub limits: StorageLimits,
    /// How often a watch that asked for bookmarks gets one (kube-apiserver: a minute,
    /// `defaultBookmarkFrequency` of its watch cache; each watch also gets one just before its
    /// deadline).
    pub bookmark_interval: Duration,
    /// Watch duration when the client sets no `timeoutSeconds` (a real server picks 30–60 min).
    pub default_watch_timeout: Duration,
    /// Largest request body accepted (the apiserver's 3 MiB).
    pub max_body_bytes: usize,
    /// Seed of every random choice the cluster makes (injected errors, generated names, uids):
    /// the sandbox's seed, shared by its clusters; each cluster's generator is keyed by its
    /// name as well, so they draw apart.
    pub seed: u64,
    /// Real time per simulated time: every simulated delay (pod start, grace periods, node
    /// timeouts) is multiplied by it, so tests run the same story in a fraction of the time.
    pub time_factor: f64,
    /// Number of worker nodes, named `node-1`, `node-2`, ...
    pub nodes: usize,
    /// Simulated time from scheduling to Running.
    pub pod_start_delay: Duration,
    /// Simulated time from Running to Ready.
    pub pod_ready_delay: Duration,
    /// Simulated time without heartbeats before a node is marked Unknown (`node-monitor-grace-period`).
    pub node_monitor_grace: Duration,
    /// Simulated toleration of the unreachable taint before pods are evicted (`DefaultTolerationSeconds`).
    pub unreachable_toleration: Duration,
    /// Simulated time a container takes to exit on SIGTERM (real servers exit within a second
    /// or two); a pod's annotation [`SHUTDOWN_ANNOTATION`] overrides it, and the grace period
    /// always caps it.
    pub container_shutdown: Duration,
    /// Whether requests must carry a valid bearer token and pass RBAC (`spanset sim --auth`);
    /// otherwise every caller may do everything, as before. Implies [`ClusterConfig::tls`].
    pub auth: bool,
    /// Whether the API server serves HTTPS (HTTP/2 or HTTP/1.1 by ALPN) with the sandbox's CA
    /// (`spanset sim --tls`), without enforcing authentication.
    pub tls: bool,
    /// Whether OpenKruise is installed: its Advanced StatefulSet CRD
    /// (`statefulsets.apps.kruise.io`, short name `asts`), run by the StatefulSet controller
    /// with Kruise's ordinal rules (`reserveOrdinals`).
    pub kruise: bool,
    /// Whether the Multi-Cluster Services API (KEP-1645) is installed: the `ServiceExport` and
    /// `ServiceImport` CRDs of `multicluster.x-k8s.io/v1alpha1` (no controller acts on them).
    pub mcs: bool,
    /// The `/16` the nodes' pod CIDRs are carved from; `None`: [`network::DEFAULT_POD_NETWORK`]
    /// for a cluster made alone, or its own per index in a sandbox (set by `Fleet::start`), so
    /// that pod IPs are unique across the clusters of a sandbox as a flat network needs.
    pub pod_network: Option<std::net::Ipv4Addr>,
    /// Images whose containers run real processes (`--run-images`, by bare name: `redis`);
    /// empty: every container is simulated.
    pub run_images: Vec<String>,
    /// Whether the kubelet's restart back-off for real processes (10 s doubling to 5 min) is
    /// kept in real seconds whatever the time factor (`--real-back-off`), so that a crashing
    /// program is seen in `CrashLoopBackOff` as on a real node; by default it is scaled like
    /// every other delay.
    pub real_back_off: bool,
}

/// Pod annotation: simulated seconds its containers take to exit on SIGTERM (to model a slow
/// server; capped by the grace period).
pub const SHUTDOWN_ANNOTATION: &str = "sim.spanset.dev/shutdown-seconds";

impl ClusterConfig {
    /// Defaults for a cluster of this name.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_string(),
            release: release::Release::default(),
            limits: StorageLimits::default(),
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            max_body_bytes: 3 * 1024 * 1024,
            seed: 1,
            time_factor: 1.0,
            nodes: 3,
            pod_start_delay: Duration::from_secs(1),
            pod_ready_delay: Duration::from_secs(1),
            node_monitor_grace: Duration::from_secs(40),
            unreachable_toleration: Duration::from_secs(300),
            container_shutdown: Duration::from_secs(1),
            auth: false,
            tls: false,
            kruise: false,
            mcs: false,
            pod_network: None,
            run_images: Vec::new(),
            real_back_off: false,
        }
    }

    /// Whether the API server serves HTTPS: asked for, or implied by authentication (kubectl
    /// sends tokens only over TLS).
    pub fn serves_tls(&self) -> bool {
        self.tls || self.auth
    }

    /// The `/16` the nodes' pod CIDRs are carved from.
    pub fn pod_network(&self) -> std::net::Ipv4Addr {
        self.pod_network.unwrap_or(network::DEFAULT_POD_NETWORK)
    }

    /// The real duration of a simulated one.
    pub fn real(&self, simulated: Duration) -> Duration {
        simulated.mul_f64(self.time_factor.max(0.0))
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
    /// Wakes the garbage collector after deletions (shared with its loop, which waits on it
    /// without keeping the cluster alive).
    pub gc_wake: Arc<Notify>,
    /// Injected faults.
    pub faults: Faults,
    /// The identity ledger, shared with the other clusters of the sandbox.
    pub ledger: Arc<Ledger>,
    /// Volumes, shared with the other clusters of the sandbox.
    pub volumes: Arc<VolumeStore>,
    /// Bearer tokens accepted when the cluster enforces authentication.
    pub tokens: TokenStore,
    /// The administrator's token (full rights), when the cluster enforces authentication.
    pub admin_token: Option<String>,
    /// Who asked what, and what the authorizer answered, when the cluster enforces it.
    pub audit: AuditLog,
    /// What was created, updated and deleted, by whom; volumes and Events (the resource
    /// account, beside the identity ledger).
    pub account: Account,
    /// What the simulated containers wrote, for `kubectl logs`.
    pub logs: LogStore,
    /// The containers that run real processes, and how to join them.
    pub processes: Processes,
    /// The ClusterIP allocator's lock (see [`crate::store::service_ips`]).
    pub service_ips: ServiceIps,
    /// Counts of requests served and controller sweeps made (tests read them to see client
    /// behaviour, and to wait for "N more sweeps" instead of sleeping).
    pub counters: Counters,
    /// Where the cluster's API listens, once its sandbox has bound it: what the kubelet tells
    /// the containers of real processes (`KUBERNETES_SERVICE_HOST`, the service-account CA),
    /// so that in-cluster clients reach their own member.
    pub api_endpoint: std::sync::OnceLock<ApiEndpoint>,
}

/// How a container reaches its cluster's API server.
#[derive(Debug, Clone)]
pub struct ApiEndpoint {
    /// The listener's address (loopback).
    pub addr: std::net::SocketAddr,
    /// The CA that signed its certificate, PEM, when it serves HTTPS.
    pub ca_pem: Option<String>,
}

/// Counts of requests and controller sweeps, for tests and diagnostics.
#[derive(Debug, Default)]
pub struct Counters {
    /// LIST requests (each page counts).
    pub lists: std::sync::atomic::AtomicU64,
    /// WATCH requests.
    pub watches: std::sync::atomic::AtomicU64,
    /// Sweeps of the StatefulSet controller.
    pub statefulset_sweeps: std::sync::atomic::AtomicU64,
    /// Sweeps of the kubelets and node lifecycle.
    pub kubelet_sweeps: std::sync::atomic::AtomicU64,
    /// Sweeps of the EndpointSlice controller.
    pub endpointslice_sweeps: std::sync::atomic::AtomicU64,
    /// Connections the API server accepted (TCP, plain or TLS).
    pub connections: std::sync::atomic::AtomicU64,
    /// Of those, the ones that negotiated HTTP/2 (ALPN `h2`).
    pub h2_connections: std::sync::atomic::AtomicU64,
    /// Sweeps of the PersistentVolume controller.
    pub volume_sweeps: std::sync::atomic::AtomicU64,
    /// Sweeps of the disruption controller.
    pub disruption_sweeps: std::sync::atomic::AtomicU64,
    /// Sweeps of the garbage collector.
    pub gc_sweeps: std::sync::atomic::AtomicU64,
}

impl Cluster {
    /// Now on this cluster's clock: the sandbox's, moved by the offset set through the admin
    /// API (`sim-ctl clock`). Its kubelets write pods' readiness times with it and its
    /// StatefulSet controller reads them with it, as a member whose clock is off does; the
    /// ledger keeps the sandbox's own time.
    pub fn clock(&self) -> jiff::Timestamp {
        let offset = jiff::SignedDuration::from_millis(self.faults.clock_offset_ms());
        jiff::Timestamp::now().checked_add(offset).unwrap_or_else(|_| jiff::Timestamp::now())
    }

    /// The bare state of a cluster, holding no objects yet ([`furniture`] fills it).
    fn bare(config: ClusterConfig, ledger: Arc<Ledger>, volumes: Arc<VolumeStore>) -> Self {
        let tokens = TokenStore::default();
        Self {
            ledger,
            volumes,
            counters: Counters::default(),
            service_ips: ServiceIps::default(),
            logs: LogStore::default(),
            processes: Processes::new(config.run_images.clone()),
            admin_token: config.auth.then(|| tokens.issue_admin()),
            tokens,
            audit: AuditLog::default(),
            account: Account::default(),
            storage: Storage::new(config.limits),
            resources: ResourceTable::for_release(config.release),
            // Keyed by the name too, so clusters of one sandbox never draw the same uids.
            faults: Faults::for_cluster(config.seed, &config.name),
            config,
            gc_wake: Arc::new(Notify::new()),
            api_endpoint: std::sync::OnceLock::new(),
        }
    }
}
