//! The admin API of a running sandbox: lists the simulated clusters and their API servers.
//! Fault injection and the identity ledger extend it (`spanset sim-ctl`).

use std::{collections::BTreeMap, sync::Arc};

use http::{Method, Response};
use hyper::{body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;

use super::{
    cluster::Cluster,
    error::ApiError,
    response::{self, Body},
};

/// Clusters by name, with their API server URLs.
pub type Clusters = Arc<BTreeMap<String, (Arc<Cluster>, String)>>;

/// Serves the admin API until the task is aborted.
pub async fn serve(listener: TcpListener, clusters: Clusters) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let clusters = clusters.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let clusters = clusters.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(&clusters, req)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

fn handle(clusters: &Clusters, req: http::Request<Incoming>) -> Response<Body> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/clusters") => {
            let list: Vec<_> = clusters
                .iter()
                .map(|(name, (c, url))| json!({"name": name, "server": url, "resourceVersion": c.storage.current_rv()}))
                .collect();
            response::json(200, &json!({"clusters": list}))
        }
        (&Method::GET, "/healthz") => response::raw(200, "text/plain; charset=utf-8", "ok"),
        _ => response::error(&ApiError::no_route()),
    }
}
