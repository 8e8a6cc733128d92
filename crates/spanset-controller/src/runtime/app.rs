//! Wiring only: the host client, the metrics endpoint, leadership, and the supervisor, run
//! until `shutdown` resolves. Must run inside an actix `System` on a tokio runtime.

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use actix::prelude::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use crate::{
    actors::{
        messages::Stop,
        supervisor::{Supervisor, SupervisorConfig},
        watcher::Synced,
    },
    leadership::{
        leader::{self, Leadership, LeaseSettings, Quota},
        shards::{MAX_SHARDS, Shards, lease_name},
        share::{FairShare, run_presence},
    },
    runtime::{
        host_client,
        http::{self, HttpState},
    },
    telemetry::metrics::Metrics,
};

/// The controller's settings (`spanset run` flags).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Kubeconfig of the host (and of members named by context); `None`: `KUBECONFIG`, then
    /// in-cluster.
    pub kubeconfig: Option<PathBuf>,
    /// Context of the host cluster.
    pub context: Option<String>,
    /// Where `/metrics`, `/healthz` and `/readyz` listen.
    pub metrics_addr: SocketAddr,
    /// The leader Lease; `None` runs without election, leading in a fixed term (tests only).
    pub lease: Option<LeaseSettings>,
    /// Bounds on each federation's replicas.
    pub bounds: crate::decisions::bounds::ReplicaBounds,
    /// How many shards federations are divided into, each with its own Lease (`--shards`; 1:
    /// one leader for all, on the Lease named in `lease`).
    pub shards: u32,
}

/// A running controller: where its endpoints listen, and how to stop it.
pub struct Running {
    /// The bound metrics address.
    pub metrics_addr: SocketAddr,
    /// Whether and in which term this process leads shard 0 (with one shard: leads at all).
    pub leadership: Leadership,
    /// Whether and in which term this process leads each shard.
    pub shards: Shards,
    supervisor: Addr<Supervisor>,
    server: actix_web::dev::ServerHandle,
    /// Stops the electors (and the presence keeper), and their tasks.
    elector: Option<(tokio::sync::watch::Sender<bool>, Vec<tokio::task::JoinHandle<()>>)>,
}

impl Running {
    /// Stops the actors, then releases the Lease (so that a successor need not wait), then
    /// stops the endpoints.
    pub async fn stop(self) {
        let _ = self.supervisor.send(Stop).await;
        if let Some((stop, tasks)) = self.elector {
            let _ = stop.send(true);
            for task in tasks {
                let _ = task.await;
            }
        }
        self.server.stop(true).await;
    }
}

/// A client of the host cluster from the flags (see [`host_client::client`]).
pub async fn host_client(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> anyhow::Result<kube::Client> {
    Ok(host_client::client(kubeconfig, context).await?)
}

/// A client of the host cluster for the controller itself: the flags' cluster, with the
/// controller's User-Agent (see [`crate::runtime::connection::as_controller`]).
async fn controller_host_client(opts: &RunOptions) -> anyhow::Result<kube::Client> {
    let tune = crate::runtime::connection::as_controller;
    Ok(host_client::client_tuned(opts.kubeconfig.as_deref(), opts.context.as_deref(), tune).await?)
}

/// Starts the controller: endpoints, leader election, supervisor.
pub async fn start(opts: RunOptions) -> anyhow::Result<Running> {
    let listener = std::net::TcpListener::bind(opts.metrics_addr)
        .map_err(|e| anyhow::anyhow!("--metrics-addr {}: {e}", opts.metrics_addr))?;
    start_on(opts, listener).await
}

/// [`start`], with the metrics endpoints on a listener bound beforehand (`opts.metrics_addr`
/// is then ignored): `spanset sandbox` binds every listener before it writes its kubeconfig.
pub async fn start_on(opts: RunOptions, metrics_listener: std::net::TcpListener) -> anyhow::Result<Running> {
    let host = controller_host_client(&opts).await?;
    let metrics = Arc::new(Metrics::new());
    let count = opts.shards.max(1);
    if count > MAX_SHARDS {
        anyhow::bail!("--shards {count}: at most {MAX_SHARDS}");
    }
    let (shards, elector) = match opts.lease.clone() {
        None => (Shards::from(Leadership::fixed(1)), None),
        Some(settings) => {
            settings.validate().map_err(|e| anyhow::anyhow!("leader election: {e}"))?;
            let shards = Shards::new(count);
            // No term before the members' stamps are known: the supervisor says when.
            shards.set_stamps_known(false);
            // The Leases get a connection of their own: on the shared one a renewal queues
            // behind every coordinator's host requests (the client's buffer and the server's
            // stream limit), and a thousand federations converging delayed it past the renew
            // deadline, term after term. The API server's Priority and Fairness gives leader
            // election its own priority level for the same reason.
            let elections = controller_host_client(&opts).await?;
            let api: Api<Lease> = Api::namespaced(elections, &settings.namespace);
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let until_stopped = move || {
                let mut stopped = stopped.clone();
                async move {
                    let _ = stopped.wait_for(|s| *s).await;
                }
            };
            let share = (count > 1).then(|| Arc::new(FairShare::new(shards.clone(), &settings.name)));
            let mut tasks = Vec::new();
            for (index, leadership) in shards.iter().enumerate() {
                let mut lease = settings.clone();
                lease.name = lease_name(&settings.name, index as u32, count);
                leadership.describe_owner(if count > 1 {
                    format!("{}, shard {index} of {count}", settings.identity)
                } else {
                    settings.identity.clone()
                });
                let quota = share.clone().map(|s| s as Arc<dyn Quota>);
                let task = leader::run_shard_elector(api.clone(), lease, leadership.clone(), quota, until_stopped());
                tasks.push(tokio::spawn(task));
            }
            if let Some(share) = share {
                // A replica superseded by a newer version leads nothing more: it leaves the
                // count, or the others would keep shards for it that nobody leads.
                let superseded = shards.cluster_duties().clone();
                let stopped = until_stopped();
                let gone = async move {
                    tokio::select! {
                        () = stopped => {}
                        () = superseded.until_superseded() => {}
                    }
                };
                tasks.push(tokio::spawn(run_presence(api.clone(), settings.clone(), share, gone)));
            }
            (shards, Some((stop, tasks)))
        }
    };
    metrics.set_shards(count);
    report_leadership(&shards, &metrics);
    for leadership in shards.iter() {
        let mut changes = leadership.subscribe();
        let (shards, gauge) = (shards.clone(), metrics.clone());
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let term = *changes.borrow();
                report_leadership(&shards, &gauge);
                match term {
                    Some(term) => tracing::info!(term, shards = shards.held(), "leading"),
                    None => tracing::info!(shards = shards.held(), "not leading"),
                }
            }
        });
    }
    let synced = Synced::default();
    let (server, metrics_addr) =
        http::serve_on(metrics_listener, HttpState { metrics: metrics.clone(), synced: synced.clone() })
            .map_err(|e| anyhow::anyhow!("--metrics-addr {}: {e}", opts.metrics_addr))?;
    let handle = server.handle();
    actix::spawn(server);
    let config = SupervisorConfig { kubeconfig: opts.kubeconfig.clone(), bounds: opts.bounds };
    let supervisor = Supervisor::new(host, config, shards.clone(), metrics, synced).start();
    tracing::info!(%metrics_addr, shards = count, "controller running");
    let leadership = shards.cluster_duties().clone();
    Ok(Running { metrics_addr, leadership, shards, supervisor, server: handle, elector })
}

/// `spanset_leader` counts the shards this process leads; `spanset_leader_term` is shard 0's
/// term (with one shard: the term).
fn report_leadership(shards: &Shards, metrics: &Metrics) {
    metrics.set_leader(shards.held(), shards.cluster_duties().term());
}
