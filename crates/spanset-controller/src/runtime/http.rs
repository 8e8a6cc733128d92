//! The controller's HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the process
//! answers), `/readyz` (every member watcher has listed once).

use std::{net::SocketAddr, sync::Arc};

use actix_web::{App, HttpResponse, HttpServer, web};

use crate::{actors::watcher::Synced, telemetry::metrics::Metrics};

/// What the endpoints read.
#[derive(Clone)]
pub struct HttpState {
    /// The series.
    pub metrics: Arc<Metrics>,
    /// Which member watchers have listed once.
    pub synced: Synced,
}

async fn metrics(state: web::Data<HttpState>) -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(state.metrics.render())
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().body("ok")
}

async fn readyz(state: web::Data<HttpState>) -> HttpResponse {
    let waiting: Vec<String> = state.synced.iter().filter(|e| !*e.value()).map(|e| e.key().clone()).collect();
    if waiting.is_empty() {
        HttpResponse::Ok().body("ok")
    } else {
        HttpResponse::ServiceUnavailable().body(format!("waiting for the first list of: {}", waiting.join(", ")))
    }
}

/// Serves the endpoints on a listener bound beforehand (so that a taken port fails a start
/// before anything else is done, and the sandbox before it writes its kubeconfig); the server
/// runs until the returned handle is stopped.
pub fn serve_on(
    listener: std::net::TcpListener,
    state: HttpState,
) -> std::io::Result<(actix_web::dev::Server, SocketAddr)> {
    let bound = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(state.clone()))
            .route("/metrics", web::get().to(metrics))
            .route("/healthz", web::get().to(healthz))
            .route("/readyz", web::get().to(readyz))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)?;
    Ok((server.run(), bound))
}
