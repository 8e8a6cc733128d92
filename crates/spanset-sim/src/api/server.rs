//! Loopback listeners: one server per simulated cluster, plain HTTP/1.1 with keep-alive and
//! chunked streaming, as kube-rs and kubectl need; over TLS, HTTP/2 too when
//! the client offers it by ALPN (`h2` before `http/1.1`, as kube-apiserver), so that many
//! watches share one connection, as a controller of 100 members needs. Accepted connections are
//! counted in [`crate::cluster::Counters`]. HTTP/1.1 connections may be upgraded (the
//! WebSocket of `kubectl exec`).

use std::{net::SocketAddr, sync::Arc};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::{net::TcpListener, sync::watch, task::JoinHandle};

use crate::cluster::{Cluster, faults::Partition};

/// A running API server for one cluster; stops when dropped or on [`ServerHandle::stop`].
pub struct ServerHandle {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The cluster it serves.
    pub cluster: Arc<Cluster>,
    stop: watch::Sender<bool>,
    /// The accept loops: the API's listener and the one its own pods use.
    accept: Vec<JoinHandle<()>>,
    /// Tasks that live and die with this server (the cluster's simulated components).
    companions: Vec<JoinHandle<()>>,
    /// Whether it serves HTTPS.
    tls: bool,
}

impl ServerHandle {
    /// `http://127.0.0.1:PORT`, or `https://` for a cluster served over TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Stops accepting and closes every connection.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
        for task in &self.accept {
            task.abort();
        }
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

/// Serves a cluster on an already bound listener (bind first, so callers learn the port),
/// over TLS when `tls` is given, and on `in_cluster` for its own pods (the address of its
/// `kubernetes` Service), which a partition from the outside only leaves open; `companions`
/// are stopped with the server.
pub fn serve(
    cluster: Arc<Cluster>,
    listener: TcpListener,
    in_cluster: Option<TcpListener>,
    companions: Vec<JoinHandle<()>>,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<ServerHandle> {
    let addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let https = tls.is_some();
    let mut accept = vec![tokio::spawn(accept_loop(cluster.clone(), listener, stopped.clone(), tls.clone(), false))];
    if let Some(l) = in_cluster {
        accept.push(tokio::spawn(accept_loop(cluster.clone(), l, stopped, tls, true)));
    }
    Ok(ServerHandle { addr, cluster, stop, accept, companions, tls: https })
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

async fn accept_loop(
    cluster: Arc<Cluster>,
    listener: TcpListener,
    stopped: watch::Receiver<bool>,
    tls: Option<Arc<rustls::ServerConfig>>,
    in_cluster: bool,
) {
    let Ok(addr) = listener.local_addr() else {
        return;
    };
    let server_address = addr.to_string();
    let mut partition = cluster.faults.subscribe();
    let mut listener = Some(listener);
    loop {
        // A refused partition closes the listener, so connects fail with ECONNREFUSED.
        if cluster.faults.partition_for(in_cluster) == Partition::Refuse {
            listener = None;
            let faults = cluster.clone();
            let _ = partition.wait_for(|_| faults.faults.partition_for(in_cluster) != Partition::Refuse).await;
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
        cluster.counters.connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cluster = cluster.clone();
        let server_address = server_address.clone();
        let stopped = stopped.clone();
        let cut = cluster.faults.subscribe();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                Some(cfg) => match tokio_rustls::TlsAcceptor::from(cfg).accept(stream).await {
                    Ok(s) => {
                        let h2 = s.get_ref().1.alpn_protocol() == Some(b"h2");
                        if h2 {
                            cluster.counters.h2_connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        serve_connection(s, h2, cluster, server_address, stopped, cut, in_cluster).await
                    }
                    Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
                },
                None => serve_connection(stream, false, cluster, server_address, stopped, cut, in_cluster).await,
            }
        });
    }
}

/// Serves one connection (plain or TLS; HTTP/2 when `h2` was negotiated) until it ends, the
/// server stops, or a refused partition cuts it.
async fn serve_connection<IO>(
    io: IO,
    h2: bool,
    cluster: Arc<Cluster>,
    server_address: String,
    mut stopped: watch::Receiver<bool>,
    mut cut: watch::Receiver<Partition>,
    in_cluster: bool,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let faults = cluster.clone();
    let svc = service_fn(move |req| {
        let cluster = cluster.clone();
        let server_address = server_address.clone();
        async move { Ok::<_, std::convert::Infallible>(crate::api::handlers::handle(cluster, server_address, req).await) }
    });
    let io = TokioIo::new(io);
    let conn: std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), hyper::Error>> + Send>> = if h2 {
        Box::pin(hyper::server::conn::http2::Builder::new(TokioExecutor::new()).serve_connection(io, svc))
    } else {
        Box::pin(hyper::server::conn::http1::Builder::new().keep_alive(true).serve_connection(io, svc).with_upgrades())
    };
    // The connection ends with the server, or abruptly when a refused partition starts.
    tokio::select! {
        res = conn => {
            if let Err(e) = res {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        }
        _ = stopped.wait_for(|s| *s) => {}
        _ = cut.wait_for(|_| faults.faults.partition_for(in_cluster) == Partition::Refuse) => {}
    }
}
