//! The admin API of a running sandbox (what `spanset sim-ctl` talks to): lists the simulated
//! clusters (with their API server and DNS addresses), injects faults into them, and serves
//! the identity ledger and the resource account of what each cluster was asked to do. Answers are JSON; errors are `{"error": "..."}`
//! with one readable line.
//!
//! Every request must carry the sandbox's admin token, as a bearer token or as the password of
//! HTTP basic authentication (what a URL with credentials, `http://sandbox:TOKEN@…`, makes curl
//! send): the admin API powers nodes off, partitions clusters and overwrites volumes, and any
//! local account can reach a loopback port, so knowing the port must not be enough.

use std::{collections::BTreeMap, net::SocketAddr, sync::Arc};

use http::{Method, Response};
use hyper::{body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;

use crate::{
    api::response::{self, Body},
    cluster::{
        Cluster,
        disks::VolumeStore,
        faults::{ErrorRate, NodeOutage, Partition},
        ledger::Ledger,
        volumes,
    },
    store::account::report::AccountReport,
};

/// Clusters by name, with their API server URLs.
pub type Clusters = Arc<BTreeMap<String, (Arc<Cluster>, String)>>;

/// What the admin API serves: the clusters and the sandbox-wide ledger and volumes.
pub struct Sandbox {
    /// Clusters by name.
    pub clusters: Clusters,
    /// The identity ledger.
    pub ledger: Arc<Ledger>,
    /// The shared volumes.
    pub volumes: Arc<VolumeStore>,
    /// Each cluster's DNS server address, by cluster name.
    pub dns: BTreeMap<String, SocketAddr>,
    /// The token every request must carry ([`authorized`]).
    pub token: String,
}

/// The user name the admin URL carries beside the token (basic authentication needs one; it is
/// not checked).
pub const ADMIN_USER: &str = "sandbox";

/// Whether a request carries the admin token: `Authorization: Bearer TOKEN`, or `Basic` with
/// the token as its password. Compared in constant time.
pub fn authorized(headers: &http::HeaderMap, token: &str) -> bool {
    use base64::Engine;
    let Some(value) = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let given = if let Some(bearer) = value.strip_prefix("Bearer ") {
        bearer.trim().as_bytes().to_vec()
    } else if let Some(basic) = value.strip_prefix("Basic ") {
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(basic.trim()) else { return false };
        match decoded.iter().position(|&b| b == b':') {
            Some(colon) => decoded[colon + 1..].to_vec(),
            None => return false,
        }
    } else {
        return false;
    };
    given.len() == token.len() && given.iter().zip(token.as_bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// A fresh admin token: 32 random bytes, in hex (safe in a URL's userinfo as it is).
pub fn new_token() -> String {
    rand::random::<[u8; 32]>().iter().map(|b| format!("{b:02x}")).collect()
}

/// Serves the admin API until the task is aborted.
pub async fn serve(listener: TcpListener, sandbox: Arc<Sandbox>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let sandbox = sandbox.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let sandbox = sandbox.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(&sandbox, req)) }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
        });
    }
}

fn handle(sandbox: &Sandbox, req: http::Request<Incoming>) -> Response<Body> {
    if !authorized(req.headers(), &sandbox.token) {
        let mut res = admin_error(
            401,
            "the sandbox admin API needs the sandbox's admin token: use the admin URL it printed (it carries the token), \
             or the one it wrote beside its kubeconfig (KUBECONFIG.admin)",
        );
        res.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Basic realm=\"spanset sandbox admin\""),
        );
        return res;
    }
    let clusters = &sandbox.clusters;
    let path: Vec<&str> = req.uri().path().split('/').filter(|s| !s.is_empty()).collect();
    let query: BTreeMap<String, String> =
        url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()).into_owned().collect();
    match (req.method(), path.as_slice()) {
        (&Method::GET, ["clusters"]) => {
            let list: Vec<_> = clusters
                .iter()
                .map(|(name, (c, url))| {
                    let load = |n: &std::sync::atomic::AtomicU64| n.load(std::sync::atomic::Ordering::Relaxed);
                    let sweeps = load(&c.counters.statefulset_sweeps);
                    let dns = sandbox.dns.get(name).map(|a| a.to_string());
                    json!({"name": name, "server": url, "dns": dns, "resourceVersion": c.storage.current_rv(), "faults": c.faults.describe(),
                           "nodes": crate::cluster::kubelet::node_names(c), "statefulsetSweeps": sweeps,
                           "connections": load(&c.counters.connections), "h2Connections": load(&c.counters.h2_connections)})
                })
                .collect();
            response::json(200, &json!({"clusters": list}))
        }
        (&Method::GET, ["healthz"]) => response::raw(200, "text/plain; charset=utf-8", "ok"),
        (&Method::GET, ["ledger"]) => {
            let overlaps = sandbox.ledger.overlaps();
            response::json(
                200,
                &json!({
                    "incarnations": sandbox.ledger.entries(),
                    "overlaps": overlaps,
                    "violations": overlaps.iter().map(|o| o.to_string()).collect::<Vec<_>>(),
                }),
            )
        }
        (&Method::GET, ["account"]) => {
            let report = AccountReport {
                clusters: clusters.iter().map(|(name, (c, _))| (name.clone(), c.account_report())).collect(),
            };
            response::json_bytes(200, serde_json::to_vec(&report).expect("the account always serializes"))
        }
        (&Method::GET, ["clusters", name, "audit"]) => match clusters.get(*name) {
            None => admin_error(404, &format!("no simulated cluster named {name:?} (have: {})", names(clusters))),
            Some((cluster, _)) => response::json(200, &json!({"cluster": name, "records": cluster.audit.all()})),
        },
        (&Method::GET, ["volumes"]) => response::json(200, &json!({"volumes": sandbox.volumes.all()})),
        (&Method::GET | &Method::POST, ["clusters", name, "volumes", pv]) => match clusters.get(*name) {
            None => admin_error(404, &format!("no simulated cluster named {name:?} (have: {})", names(clusters))),
            Some((cluster, _)) => volume_data(sandbox, cluster, pv, req.method() == Method::POST, &query),
        },
        (&Method::POST, ["clusters", name, action]) => match clusters.get(*name) {
            None => admin_error(404, &format!("no simulated cluster named {name:?} (have: {})", names(clusters))),
            Some((cluster, _)) => match fault_action(cluster, action, &query) {
                Ok(()) => response::json(200, &json!({"cluster": name, "faults": cluster.faults.describe()})),
                Err(msg) => admin_error(400, &msg),
            },
        },
        _ => admin_error(404, &format!("unknown admin request {} {}", req.method(), req.uri().path())),
    }
}

fn names(clusters: &Clusters) -> String {
    clusters.keys().cloned().collect::<Vec<_>>().join(", ")
}

fn admin_error(code: u16, message: &str) -> Response<Body> {
    response::json(code, &json!({"error": message}))
}

fn param<'a>(query: &'a BTreeMap<String, String>, key: &str) -> Result<&'a str, String> {
    query.get(key).map(String::as_str).ok_or_else(|| format!("missing parameter {key:?}"))
}

/// Reads or writes the data marker of the volume behind a PV of a cluster.
fn volume_data(
    sandbox: &Sandbox,
    cluster: &Cluster,
    pv: &str,
    write: bool,
    query: &BTreeMap<String, String>,
) -> Response<Body> {
    let Some(obj) = cluster.storage.get(&(String::new(), "persistentvolumes".into()), "", pv) else {
        return admin_error(404, &format!("cluster {} has no PersistentVolume {pv:?}", cluster.config.name));
    };
    let Some(id) = volumes::volume_of(&obj) else {
        return admin_error(400, &format!("PersistentVolume {pv:?} is not a sandbox volume"));
    };
    if write {
        let Some(data) = query.get("data") else { return admin_error(400, "missing parameter \"data\"") };
        if !sandbox.volumes.write(id, data) {
            return admin_error(404, &format!("volume {id} of PersistentVolume {pv:?} no longer exists"));
        }
    }
    match sandbox.volumes.get(id) {
        Some(v) => response::json(200, &json!({"persistentVolume": pv, "volume": v})),
        None => admin_error(404, &format!("volume {id} of PersistentVolume {pv:?} no longer exists")),
    }
}

/// Applies one fault command to a cluster.
fn fault_action(cluster: &Cluster, action: &str, query: &BTreeMap<String, String>) -> Result<(), String> {
    let faults = &cluster.faults;
    match action {
        "partition" => {
            let mode = match query.get("mode").map(String::as_str).unwrap_or("refuse") {
                "refuse" => Partition::Refuse,
                "hang" => Partition::Hang,
                "outside" => {
                    faults.set_partition_outside();
                    return Ok(());
                }
                other => {
                    return Err(format!("partition mode must be refuse, hang or outside, not {other:?}"));
                }
            };
            faults.set_partition(mode);
        }
        "clock" => {
            let seconds: f64 = param(query, "offset-seconds")?
                .parse()
                .map_err(|_| "the clock offset must be a number of seconds (negative: behind)".to_string())?;
            let offset = std::time::Duration::try_from_secs_f64(seconds.abs())
                .map_err(|_| format!("clock offset {seconds} s is out of range"))?;
            faults.set_clock_offset(offset, seconds < 0.0);
        }
        "heal" => faults.heal(),
        "resync" => faults.resync(),
        "latency" => {
            let ms = param(query, "ms")?;
            faults.set_latency_ms(
                ms.parse().map_err(|_| format!("latency must be a whole number of milliseconds, not {ms:?}"))?,
            );
        }
        "errors" => {
            let rate: f64 =
                param(query, "rate")?.parse().map_err(|_| "error rate must be a number from 0 to 1".to_string())?;
            if !(0.0..=1.0).contains(&rate) {
                return Err(format!("error rate must be from 0 to 1, not {rate}"));
            }
            let code: u16 = query
                .get("code")
                .map(String::as_str)
                .unwrap_or("500")
                .parse()
                .map_err(|_| "error code must be an HTTP status code".to_string())?;
            if !(400..=599).contains(&code) {
                return Err(format!("error code must be from 400 to 599, not {code}"));
            }
            faults.set_errors((rate > 0.0).then_some(ErrorRate::seeded(rate, code)));
        }
        "cut-watches" => cluster.storage.close_watches(),
        "expire-watches" => {
            cluster.storage.compact();
            cluster.storage.close_watches();
        }
        "node-down" | "node-up" => {
            let node = param(query, "node")?;
            if !crate::cluster::kubelet::node_names(cluster).iter().any(|n| n == node) {
                return Err(format!("cluster {} has no simulated node {node:?}", cluster.config.name));
            }
            if action == "node-up" {
                faults.node_back(node);
            } else {
                let kind = match query.get("power-off").map(String::as_str) {
                    None | Some("false") => NodeOutage::Unreachable,
                    Some("true") => NodeOutage::PoweredOff,
                    Some(other) => return Err(format!("node-down: power-off is true or false, not {other:?}")),
                };
                faults.node_out(node, kind);
            }
        }
        "pod-ready" => {
            let pod = param(query, "pod")?;
            let namespace = query.get("namespace").map(String::as_str).unwrap_or("default");
            let ready = match param(query, "ready")? {
                "true" => Some(true),
                "false" => Some(false),
                "auto" => None,
                other => return Err(format!("pod-ready takes true, false or auto, not {other:?}")),
            };
            faults.set_pod_ready(namespace, pod, ready);
        }
        "image-pullable" | "image-unpullable" => {
            let image = param(query, "image")?;
            if image.is_empty() || image.chars().any(char::is_whitespace) {
                return Err(format!("{action}: image must be an image reference, not {image:?}"));
            }
            faults.set_image_pullable(image, action == "image-pullable");
        }
        "drop-ordinals" => {
            let on = match param(query, "on")? {
                "true" => true,
                "false" => false,
                other => return Err(format!("drop-ordinals takes true or false, not {other:?}")),
            };
            match query.get("api").map(String::as_str) {
                None | Some("apps") => faults.set_drop_ordinals(on),
                Some("kruise") => faults.set_kruise_drops_ordinals(on),
                Some(other) => return Err(format!("drop-ordinals: api is apps or kruise, not {other:?}")),
            }
        }
        other => return Err(format!("unknown fault {other:?}")),
    }
    Ok(())
}
