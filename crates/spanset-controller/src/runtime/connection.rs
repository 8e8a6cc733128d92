//! The HTTP stack of every kube client spanset builds (the host's and each member's): one
//! connection pool per client, HTTP/2 wherever the API server offers it (ALPN, as
//! kube-apiserver does over TLS), so that all of a member's watches, lists, probes and writes
//! share one connection rather than one each; idle HTTP/1.1 connections are few and closed
//! after [`POOL_IDLE_TIMEOUT`]. kube's own builder offers HTTP/1.1 only and keeps every idle
//! connection it ever opened (the scale benchmark measured 905 descriptors for 10 members).
//!
//! The layers are kube's, in kube's order: the server's base URI, authentication (tokens,
//! exec plugins, refreshed as kube does), extra headers, and kube's retry of throttled
//! requests when the configuration asks for it.

use std::time::Duration;

use hyper_util::{
    client::legacy::{Client as HyperClient, connect::HttpConnector},
    rt::{TokioExecutor, TokioTimer},
};
use kube::{
    Client, Config,
    client::{Body, ConfigExt, retry::RetryPolicy},
};
use tower::{BoxError, ServiceBuilder, retry::RetryLayer};

/// How long an idle connection stays open for reuse.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle HTTP/1.1 connections kept per server (an HTTP/2 connection serves every request).
pub const POOL_MAX_IDLE: usize = 4;
/// How often an HTTP/2 connection is pinged while requests (e.g. watches) are open on it, so
/// that a dead connection is noticed rather than waited on.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before the connection is closed.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The User-Agent of spanset's controller: API servers' audit logs (and the sandbox's
/// resource account) tell its requests by it; kube sends none of its own.
pub const CONTROLLER_AGENT: &str = concat!("spanset/", env!("CARGO_PKG_VERSION"));

/// The User-Agent of spanset's commands (`join`, `status`, `drill`…), so that their writes are
/// not taken for the controller's.
pub const CLI_AGENT: &str = concat!("spanset-cli/", env!("CARGO_PKG_VERSION"));

/// Makes a configuration the controller's: its requests carry [`CONTROLLER_AGENT`].
pub fn as_controller(config: &mut Config) {
    config.headers.retain(|(name, _)| name != http::header::USER_AGENT);
    config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(CONTROLLER_AGENT)));
}

/// A client for `config` on a pooled, HTTP/2-capable connection (see the module's doc). A
/// configuration through a proxy gets kube's own stack, which handles proxies. Its requests
/// carry [`CLI_AGENT`] unless the configuration names another User-Agent.
pub fn client(mut config: Config) -> Result<Client, kube::Error> {
    if !config.headers.iter().any(|(name, _)| name == http::header::USER_AGENT) {
        config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(CLI_AGENT)));
    }
    if config.proxy_url.is_some() {
        return Client::try_from(config);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    http.set_nodelay(true);
    let tls = config.rustls_client_config()?;
    let builder = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http();
    let builder = match &config.tls_server_name {
        Some(name) => builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(
            name.clone()
                .try_into()
                .map_err(|e| kube::Error::Service(format!("tls-server-name {name:?}: {e}").into()))?,
        )),
        None => builder,
    };
    let https = builder.enable_all_versions().wrap_connector(http);
    let pooled: HyperClient<_, Body> = HyperClient::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(POOL_MAX_IDLE)
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .http2_keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .build(https);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.default_retry.then(|| RetryLayer::new(RetryPolicy::server_retry())))
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(pooled);
    Ok(Client::new(service, config.default_namespace))
}
