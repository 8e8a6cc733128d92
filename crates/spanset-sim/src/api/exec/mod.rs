//! The pods' `exec` subresource (`kubectl exec`): what the apiserver checks itself (the pod,
//! the container, the options) with its own wording, then the WebSocket upgrade to the
//! remotecommand protocol ([`channel`]) and the [`session`] that runs the command inside the
//! container through the cluster's process runtime.
//!
//! Only WebSocket is served, as kubectl 1.30 and newer speak it by default. kubectl 1.29 and
//! older speak SPDY/3.1, a deprecated protocol with no maintained Rust implementation; they
//! get a `Status` saying so instead of a connection.

pub mod channel;
pub mod session;

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header, request::Parts};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio_tungstenite::{
    WebSocketStream,
    tungstenite::{handshake::derive_accept_key, protocol::Role},
};

use self::{channel::Protocol, session::Streams};
use super::{
    logs,
    response::{self, Body},
};
use crate::{
    cluster::{Cluster, faults::Partition},
    store::{
        error::{ApiError, ApiResult},
        object,
    },
};

/// The parameters of an exec request (`PodExecOptions`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExecOptions {
    /// `command`, repeated: the command line, program first.
    pub command: Vec<String>,
    /// `container`.
    pub container: Option<String>,
    /// `stdin`, `stdout`, `stderr`, `tty`.
    pub streams: Streams,
}

impl ExecOptions {
    /// Parses the query string; a request without a command or without any stream is a 400,
    /// as the apiserver and kubelet answer it.
    pub fn parse(raw: Option<&str>) -> ApiResult<Self> {
        let mut o = ExecOptions::default();
        let flag = |v: &str| matches!(v, "true" | "1" | "True");
        for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match k.as_ref() {
                "command" => o.command.push(v.into_owned()),
                "container" => o.container = Some(v.into_owned()).filter(|c| !c.is_empty()),
                "stdin" => o.streams.stdin = flag(&v),
                "stdout" => o.streams.stdout = flag(&v),
                "stderr" => o.streams.stderr = flag(&v),
                "tty" => o.streams.tty = flag(&v),
                _ => {}
            }
        }
        if o.command.is_empty() {
            return Err(ApiError::bad_request("you must specify at least 1 command"));
        }
        let s = o.streams;
        if !(s.stdin || s.stdout || s.stderr) {
            return Err(ApiError::bad_request("you must specify at least 1 of stdin, stdout, stderr"));
        }
        Ok(o)
    }
}

/// The refusal an SPDY client (kubectl 1.29 and older) gets: kubectl prints its message.
pub fn spdy_refused() -> ApiError {
    ApiError::bad_request(
        "this sandbox serves exec over WebSocket only (the v5.channel.k8s.io remotecommand protocol), not SPDY; \
         use kubectl 1.30 or newer, which speaks WebSocket by default",
    )
}

fn header_has(parts: &Parts, name: header::HeaderName, token: &str) -> bool {
    parts
        .headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Answers `GET|POST .../pods/NAME/exec`.
pub fn serve(cluster: &Arc<Cluster>, ns: &str, name: &str, parts: &Parts) -> ApiResult<Response<Body>> {
    let opts = ExecOptions::parse(parts.uri.query())?;
    let pods = cluster.resources.by_plural("", "pods").ok_or_else(ApiError::no_route)?;
    let pod = cluster.get(&pods, ns, name)?;
    let container = logs::container_of(&pod, opts.container.as_deref())?;
    if pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("").is_empty() {
        return Err(ApiError::bad_request(format!("pod {name} does not have a host assigned")));
    }
    if !header_has(parts, header::UPGRADE, "websocket") {
        return Err(if header_has(parts, header::UPGRADE, "SPDY/3.1") {
            spdy_refused()
        } else {
            ApiError::bad_request("Upgrade request required")
        });
    }
    // What the kubelet would refuse (a simulated container, one not running) is told on the
    // error stream of an accepted connection, as a kubelet's refusal reaches kubectl: a refused
    // upgrade would send kubectl 1.30+ on to retry over SPDY, and it would print that refusal.
    let argv =
        cluster.processes.exec_prefix(object::uid(&pod), &container, image_of(&pod, &container)).map(|mut prefix| {
            prefix.extend(opts.command.iter().cloned());
            prefix
        });
    // A refused partition cuts every connection of the cluster, this one too.
    let mut partition = cluster.faults.subscribe();
    let cut = async move {
        let _ = partition.wait_for(|p| *p == Partition::Refuse).await;
    };
    accept(parts, argv.map_err(|refusal| ApiError::bad_request(refusal.to_string())), opts.streams, cut)
}

/// The image of a pod's container (or init container).
fn image_of<'a>(pod: &'a Value, container: &str) -> &'a str {
    ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .filter_map(|f| pod["spec"][*f].as_array())
        .flatten()
        .find(|c| c["name"] == container)
        .and_then(|c| c["image"].as_str())
        .unwrap_or("")
}

/// Accepts a WebSocket upgrade request for the remotecommand protocol: answers `101` with the
/// chosen subprotocol and, once hyper hands over the connection, runs a [`session`] of `argv`
/// (or reports its refusal on the error stream) until it ends or `cut` completes (the
/// connection is then dropped and the command killed). The pod checks are the caller's; tests
/// call this directly to run ordinary programs.
pub fn accept(
    parts: &Parts,
    argv: Result<Vec<String>, ApiError>,
    streams: Streams,
    cut: impl Future<Output = ()> + Send + 'static,
) -> ApiResult<Response<Body>> {
    let offers = parts.headers.get_all(header::SEC_WEBSOCKET_PROTOCOL).iter().filter_map(|v| v.to_str().ok());
    let protocol = Protocol::choose(offers).ok_or_else(|| {
        ApiError::bad_request(format!(
            "requested protocol(s) are not supported: {:?}; supports [{} {}]",
            parts.headers.get(header::SEC_WEBSOCKET_PROTOCOL).and_then(|v| v.to_str().ok()).unwrap_or(""),
            Protocol::V5.name(),
            Protocol::V4.name()
        ))
    })?;
    let key = parts
        .headers
        .get(header::SEC_WEBSOCKET_KEY)
        .ok_or_else(|| ApiError::bad_request("missing Sec-WebSocket-Key in a WebSocket upgrade request"))?;
    let on_upgrade = parts
        .extensions
        .get::<hyper::upgrade::OnUpgrade>()
        .cloned()
        .ok_or_else(|| ApiError::bad_request("this connection cannot be upgraded (WebSocket needs HTTP/1.1)"))?;
    let accept_key = derive_accept_key(key.as_bytes());
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
                tokio::select! {
                    _ = session::run(ws, protocol, argv, streams) => {}
                    _ = cut => tracing::debug!("exec session cut"),
                }
            }
            Err(e) => tracing::debug!(error = %e, "exec upgrade failed"),
        }
    });
    let mut resp = Response::new(response::full(Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(protocol.name()));
    if let Ok(v) = HeaderValue::from_str(&accept_key) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    Ok(resp)
}

#[cfg(test)]
mod tests;
