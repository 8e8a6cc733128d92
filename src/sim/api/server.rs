//! Loopback listeners: one HTTP/1.1 server per simulated cluster, plain HTTP with keep-alive
//! and chunked streaming, as kube-rs and kubectl need (k8s-api.md A.1).

use std::{net::SocketAddr, sync::Arc};

use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::{net::TcpListener, sync::watch, task::JoinHandle};

use crate::sim::cluster::{Cluster, faults::Partition};

/// A running API server for one cluster; stops when dropped or on [`ServerHandle::stop`].
pub struct ServerHandle {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The cluster it serves.
    pub cluster: Arc<Cluster>,
    stop: watch::Sender<bool>,
    accept: JoinHandle<()>,
    /// Tasks that live and die with this server (the cluster's simulated components).
    companions: Vec<JoinHandle<()>>,
}

impl ServerHandle {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting and closes every connection.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
        self.accept.abort();
        for task in &self.companions {
            task.abort();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Serves a cluster on an already bound listener (bind first, so callers learn the port);
/// `companions` are stopped with the server.
pub fn serve(
    cluster: Arc<Cluster>,
    listener: TcpListener,
    companions: Vec<JoinHandle<()>>,
) -> std::io::Result<ServerHandle> {
    let addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let accept = tokio::spawn(accept_loop(cluster.clone(), listener, stopped));
    Ok(ServerHandle { addr, cluster, stop, accept, companions })
}

/// Binds `addr` again after a refused partition heals (the port may linger briefly).
async fn rebind(addr: SocketAddr) -> TcpListener {
    let mut pause = std::time::Duration::from_millis(10);
    loop {
        match TcpListener::bind(addr).await {
            Ok(l) => return l,
            Err(e) => {
                tracing::debug!(%addr, error = %e, "rebinding after partition");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_millis(500));
            }
        }
    }
}

async fn accept_loop(cluster: Arc<Cluster>, listener: TcpListener, stopped: watch::Receiver<bool>) {
    let Ok(addr) = listener.local_addr() else {
        return;
    };
    let server_address = addr.to_string();
    let mut partition = cluster.faults.subscribe();
    let mut listener = Some(listener);
    loop {
        // A refused partition closes the listener, so connects fail with ECONNREFUSED.
        if cluster.faults.partition() == Partition::Refuse {
            listener = None;
            let _ = partition.wait_for(|p| *p != Partition::Refuse).await;
            continue;
        }
        let l = match &listener {
            Some(l) => l,
            None => listener.insert(rebind(addr).await),
        };
        let accepted = tokio::select! {
            a = l.accept() => a,
            _ = partition.changed() => continue,
        };
        let (stream, _peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(cluster = %cluster.config.name, error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let cluster = cluster.clone();
        let server_address = server_address.clone();
        let mut stopped = stopped.clone();
        let mut cut = cluster.faults.subscribe();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let cluster = cluster.clone();
                let server_address = server_address.clone();
                async move {
                    Ok::<_, std::convert::Infallible>(
                        crate::sim::api::handlers::handle(cluster, server_address, req).await,
                    )
                }
            });
            let conn =
                hyper::server::conn::http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            // The connection ends with the server, or abruptly when a refused partition starts.
            tokio::select! {
                res = conn.as_mut() => {
                    if let Err(e) = res {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                }
                _ = stopped.wait_for(|s| *s) => {}
                _ = cut.wait_for(|p| *p == Partition::Refuse) => {}
            }
        });
    }
}
