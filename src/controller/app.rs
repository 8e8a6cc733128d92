//! Wiring only: the host client, the metrics endpoint, leadership, and the supervisor, run
//! until `shutdown` resolves. Must run inside an actix `System` on a tokio runtime.

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use actix::prelude::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use super::{
    host_client,
    http::{self, HttpState},
    leader::{self, Leadership, LeaseSettings},
    messages::Stop,
    metrics::Metrics,
    supervisor::{Supervisor, SupervisorConfig},
    watcher::Synced,
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
    pub bounds: super::bounds::ReplicaBounds,
}

/// A running controller: where its endpoints listen, and how to stop it.
pub struct Running {
    /// The bound metrics address.
    pub metrics_addr: SocketAddr,
    /// Whether and in which term this process leads.
    pub leadership: Leadership,
    supervisor: Addr<Supervisor>,
    server: actix_web::dev::ServerHandle,
    elector: Option<(tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
}

impl Running {
    /// Stops the actors, then releases the Lease (so that a successor need not wait), then
    /// stops the endpoints.
    pub async fn stop(self) {
        let _ = self.supervisor.send(Stop).await;
        if let Some((stop, task)) = self.elector {
            let _ = stop.send(());
            let _ = task.await;
        }
        self.server.stop(true).await;
    }
}

/// A client of the host cluster from the flags (see [`host_client::client`]).
pub async fn host_client(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> anyhow::Result<kube::Client> {
    Ok(host_client::client(kubeconfig, context).await?)
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
    let host = host_client(opts.kubeconfig.as_deref(), opts.context.as_deref()).await?;
    let metrics = Arc::new(Metrics::new());
    let (leadership, elector) = match opts.lease.clone() {
        None => (Leadership::fixed(1), None),
        Some(settings) => {
            settings.validate().map_err(|e| anyhow::anyhow!("leader election: {e}"))?;
            let leadership = Leadership::new();
            // No term before the members' stamps are known: the supervisor says when.
            leadership.set_stamps_known(false);
            let api: Api<Lease> = Api::namespaced(host.clone(), &settings.namespace);
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let task = tokio::spawn(leader::run_elector(api, settings, leadership.clone(), async move {
                let _ = stopped.await;
            }));
            (leadership, Some((stop, task)))
        }
    };
    let mut changes = leadership.subscribe();
    let gauge = metrics.clone();
    gauge.set_leader(leadership.term());
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let term = *changes.borrow();
            gauge.set_leader(term);
            match term {
                Some(term) => tracing::info!(term, "leading"),
                None => tracing::info!("not leading"),
            }
        }
    });
    let synced = Synced::default();
    let (server, metrics_addr) =
        http::serve_on(metrics_listener, HttpState { metrics: metrics.clone(), synced: synced.clone() })
            .map_err(|e| anyhow::anyhow!("--metrics-addr {}: {e}", opts.metrics_addr))?;
    let handle = server.handle();
    actix::spawn(server);
    let config = SupervisorConfig { kubeconfig: opts.kubeconfig.clone(), bounds: opts.bounds };
    let supervisor = Supervisor::new(host, config, leadership.clone(), metrics, synced).start();
    tracing::info!(%metrics_addr, "controller running");
    Ok(Running { metrics_addr, leadership, supervisor, server: handle, elector })
}
