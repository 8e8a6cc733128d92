//! The sandbox serves HTTPS as kube-apiserver does — ALPN offers `h2` and `http/1.1` — with
//! `spanset sim --tls` (no authentication) as with `--auth`. An HTTP/2 client multiplexes many
//! watches over ONE connection (counted by the server, shown by the admin API); the real
//! kubectl (which offers h2) gets, applies, watches and follows logs.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::{Value, json};
use spanset_sim::{cluster::ClusterConfig, sandbox::fleet::Fleet};
use support::{Background, DEADLINE, Kubectl, Sandbox, wait_until};

use crate::support;

/// A TLS connection to the fleet's first cluster that offers `protocols` by ALPN and trusts the
/// sandbox's CA; returns it with the protocol the server chose.
async fn connect(
    fleet: &Fleet,
    protocols: &[&[u8]],
) -> (tokio_rustls::client::TlsStream<tokio::net::TcpStream>, Option<Vec<u8>>) {
    let mut roots = rustls::RootCertStore::empty();
    let pem = fleet.ca_pem.as_ref().expect("a --tls fleet has a CA");
    roots.add(CertificateDer::from_pem_slice(pem.as_bytes()).expect("CA PEM")).unwrap();
    let mut config =
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
    let tcp = tokio::net::TcpStream::connect(fleet.servers[0].addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .expect("TLS handshake with the sandbox's CA");
    let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    (tls, alpn)
}

async fn tls_fleet() -> Fleet {
    let config = ClusterConfig { tls: true, time_factor: 0.01, nodes: 1, ..ClusterConfig::named("secure") };
    Fleet::start(vec![config], None).await.expect("sandbox starts")
}

fn request(method: &str, path: &str, body: Option<Value>) -> http::Request<Full<Bytes>> {
    let body = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
    http::Request::builder()
        .method(method)
        .uri(format!("https://127.0.0.1{path}"))
        .header("content-type", "application/json")
        .body(Full::new(body))
        .unwrap()
}

#[tokio::test]
async fn an_h2_client_negotiates_h2_and_many_watches_stream_over_one_connection() {
    let fleet = tls_fleet().await;
    assert!(fleet.servers[0].url().starts_with("https://"), "--tls serves HTTPS");
    let counters = &fleet.servers[0].cluster.counters;
    let (tls, alpn) = connect(&fleet, &[b"h2", b"http/1.1"]).await;
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]), "the server picks h2 when offered first");
    let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);

    // Ten watches at once on the one connection, each a stream that stays open.
    let mut watches = Vec::new();
    for _ in 0..10 {
        let mut send = send.clone();
        let res = send.send_request(request("GET", "/api/v1/namespaces/default/configmaps?watch=true", None)).await;
        let res = res.expect("a watch over h2");
        assert_eq!(res.status(), 200);
        assert_eq!(res.version(), http::Version::HTTP_2);
        watches.push(res.into_body());
    }
    // A write over the same connection; every watch streams its ADDED event.
    let mut post = send.clone();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "over-h2"}, "data": {"k": "v"}});
    let created = post.send_request(request("POST", "/api/v1/namespaces/default/configmaps", Some(cm))).await.unwrap();
    assert_eq!(created.status(), 201);
    for (i, body) in watches.iter_mut().enumerate() {
        let mut seen = String::new();
        let got = tokio::time::timeout(DEADLINE, async {
            while !seen.contains("over-h2") {
                let frame = body.frame().await.expect("the watch stays open").expect("a data frame");
                if let Some(data) = frame.data_ref() {
                    seen.push_str(&String::from_utf8_lossy(data));
                }
            }
        })
        .await;
        assert!(got.is_ok(), "watch {i} streamed the ADDED event: {seen:?}");
        let event: Value = serde_json::from_str(seen.lines().find(|l| l.contains("over-h2")).unwrap()).unwrap();
        assert_eq!(event["type"], "ADDED");
    }
    assert_eq!(counters.connections.load(Ordering::SeqCst), 1, "ten watches and a write, one connection");
    assert_eq!(counters.h2_connections.load(Ordering::SeqCst), 1);

    // The admin API shows the count.
    let tcp = tokio::net::TcpStream::connect(fleet.admin_addr).await.unwrap();
    let (mut admin, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .uri("/clusters")
        .header("host", "admin")
        .header("authorization", format!("Bearer {}", fleet.admin_token))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let body = admin.send_request(req).await.unwrap().into_body().collect().await.unwrap().to_bytes();
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["clusters"][0]["connections"], 1, "{doc}");
    assert_eq!(doc["clusters"][0]["h2Connections"], 1, "{doc}");
}

#[tokio::test]
async fn a_client_offering_only_http1_is_served_http1_over_tls() {
    let fleet = tls_fleet().await;
    let (tls, alpn) = connect(&fleet, &[b"http/1.1"]).await;
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    let res = send.send_request(request("GET", "/api/v1/namespaces/default/configmaps", None)).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.version(), http::Version::HTTP_11);
    let counters = &fleet.servers[0].cluster.counters;
    assert_eq!(counters.h2_connections.load(Ordering::SeqCst), 0);
}

const WEB: &str = r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  replicas: 1
  serviceName: web
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
"#;

/// The real kubectl (Go's client offers h2) against `spanset sim --tls`: get, apply, a watch
/// ended by `--request-timeout`, logs and `logs -f`; the server saw h2 connections.
#[test]
fn kubectl_works_against_a_tls_sandbox_over_h2() {
    let sandbox = Sandbox::start_with("solo", &["--tls", "--nodes", "1"]);
    let k = Kubectl::on_path(&sandbox);
    let kubeconfig = std::fs::read_to_string(&sandbox.kubeconfig).unwrap();
    assert!(kubeconfig.contains("https://127.0.0.1"), "{kubeconfig}");
    assert!(kubeconfig.contains("certificate-authority-data"), "the kubeconfig carries the CA");
    assert!(k.ok(&["get", "namespaces"]).contains("default"));
    k.ok_with_stdin(&["apply", "-f", "-"], WEB);
    assert!(k.ok(&["get", "statefulsets"]).contains("web"));

    let mut watch = Background::spawn({
        let mut cmd = k.command();
        cmd.args(["get", "configmaps", "--watch", "--request-timeout=5s", "-o", "name"]);
        cmd
    });
    k.ok(&["create", "configmap", "seen-by-watch", "--from-literal=k=v"]);
    watch.wait_for_line("the watch streams the new ConfigMap", |l| l == "configmap/seen-by-watch");
    let ended = watch.wait_exit();
    assert!(ended.success(), "the watch ends cleanly at its request timeout: {:?}", watch.err_lines());

    wait_until("web-0 ready", DEADLINE, || {
        k.run(&["get", "pod", "web-0", "-o", "jsonpath={.status.containerStatuses[0].ready}"]).stdout == b"true"
    });
    let logs = k.ok(&["logs", "web-0"]);
    assert!(logs.contains("ready: accepting connections"), "{logs}");
    let mut follow = Background::spawn({
        let mut cmd = k.command();
        cmd.args(["logs", "-f", "web-0"]);
        cmd
    });
    follow.wait_for_line("logs -f streams what was written", |l| l.contains("ready: accepting connections"));
    // Deleting the pod stops its container: the stream gets the last lines and ends.
    k.ok(&["delete", "pod", "web-0", "--wait=false"]);
    follow.wait_for_line("logs -f streams the shutdown", |l| l.contains("SIGTERM"));
    let _ = follow.wait_exit();

    let doc: Value = serde_json::from_str(&sandbox.ctl_ok(&["clusters"])).unwrap();
    let h2 = doc["clusters"][0]["h2Connections"].as_u64().unwrap();
    assert!(h2 >= 1, "kubectl spoke h2: {doc}");
}
