//! Wiring only: the host client, the metrics endpoint, leadership, and the supervisor, run
//! until `shutdown` resolves. Must run inside an actix `System` on a tokio runtime.

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use actix::prelude::*;

use super::{
    http::{self, HttpState},
    leader::Leadership,
    messages::Stop,
    metrics::Metrics,
    supervisor::{Supervisor, SupervisorConfig, Synced},
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
}

/// A running controller: where its endpoints listen, and how to stop it.
pub struct Running {
    /// The bound metrics address.
    pub metrics_addr: SocketAddr,
    supervisor: Addr<Supervisor>,
    server: actix_web::dev::ServerHandle,
}

impl Running {
    /// Stops the actors and the endpoints.
    pub async fn stop(self) {
        let _ = self.supervisor.send(Stop).await;
        self.server.stop(true).await;
    }
}

/// A client of the host cluster from the flags.
pub async fn host_client(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> anyhow::Result<kube::Client> {
    let opts = kube::config::KubeConfigOptions { context: context.map(str::to_string), ..Default::default() };
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("--kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &opts).await?
        }
        None => kube::Config::from_kubeconfig(&opts).await.or_else(|_| kube::Config::incluster())?,
    };
    Ok(kube::Client::try_from(config)?)
}

/// Starts the controller.
pub async fn start(opts: RunOptions, leadership: Leadership) -> anyhow::Result<Running> {
    let host = host_client(opts.kubeconfig.as_deref(), opts.context.as_deref()).await?;
    let metrics = Arc::new(Metrics::new());
    let synced = Synced::default();
    let (server, metrics_addr) =
        http::serve(opts.metrics_addr, HttpState { metrics: metrics.clone(), synced: synced.clone() })
            .map_err(|e| anyhow::anyhow!("--metrics-addr {}: {e}", opts.metrics_addr))?;
    let handle = server.handle();
    actix::spawn(server);
    let config = SupervisorConfig { kubeconfig: opts.kubeconfig.clone() };
    let supervisor = Supervisor::new(host, config, leadership, metrics, synced).start();
    tracing::info!(%metrics_addr, "controller running");
    Ok(Running { metrics_addr, supervisor, server: handle })
}
