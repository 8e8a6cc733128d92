//! Connections bounded by members, not by work: the client spanset builds for a cluster
//! (`host_client`, the same for the host and every member) keeps a small, bounded pool of idle
//! connections after a burst of concurrent requests, closes them once idle, and, over TLS,
//! speaks HTTP/2 where the server offers it, so that many concurrent requests share one
//! connection. Connections are counted from this process's own sockets (`/proc/self/fd` and
//! `/proc/self/net/tcp`), the way the benchmark counts descriptors, and over TLS by the
//! sandbox's own count of HTTP/2 connections (`spanset sim --tls`).

use std::{collections::HashSet, time::Duration};

use futures::future::join_all;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use spanset_controller::runtime::connection::{POOL_IDLE_TIMEOUT, POOL_MAX_IDLE};
use support::Sandbox;

use crate::support;

/// The port of cluster `name`'s API, from the sandbox's banner (`cluster NAME: URL`).
fn api_port(sandbox: &Sandbox, name: &str) -> u16 {
    let prefix = format!("cluster {name}: ");
    let url = sandbox.banner.iter().find_map(|l| l.strip_prefix(&prefix)).expect("a `cluster` line");
    url.rsplit(':').next().expect("a port").trim_end_matches('/').parse().expect("a port number")
}

/// This process's established TCP connections to local port `port`.
fn connections_to(port: u16) -> usize {
    let mine: HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .expect("fds")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_string))
        .collect();
    let mut n = 0;
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for row in text.lines().skip(1) {
            let cols: Vec<&str> = row.split_whitespace().collect();
            let (Some(remote), Some(state), Some(inode)) = (cols.get(2), cols.get(3), cols.get(9)) else { continue };
            let remote_port = remote.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
            if remote_port == Some(port) && *state == "01" && mine.contains(*inode) {
                n += 1;
            }
        }
    }
    n
}

/// Fifty reads at once, through one client.
async fn burst(api: &Api<ConfigMap>) {
    let lp = kube::api::ListParams::default();
    let reads = (0..50).map(|_| api.list(&lp));
    for r in join_all(reads).await {
        r.expect("a list");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_leaves_a_bounded_pool_that_closes_when_idle() {
    let sandbox = Sandbox::start("host");
    let port = api_port(&sandbox, "host");
    let client =
        spanset_controller::runtime::app::host_client(Some(&sandbox.kubeconfig), Some("host")).await.expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    burst(&api).await;
    // kube's own stack keeps every connection a burst opened (here up to 50) for 90 s.
    support::eventually("the idle connections beyond the pool's bound closed", || async {
        connections_to(port) <= POOL_MAX_IDLE
    })
    .await;
    let after_burst = connections_to(port);
    assert!(after_burst >= 1, "some connection is kept for reuse");
    // Reused: another burst opens no more than it needs, and all idle ones close in time.
    burst(&api).await;
    let deadline = std::time::Instant::now() + POOL_IDLE_TIMEOUT * 4;
    while connections_to(port) > 0 {
        assert!(std::time::Instant::now() < deadline, "idle connections closed after {POOL_IDLE_TIMEOUT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_client_speaks_http2_and_a_burst_shares_one_connection() {
    let sandbox = Sandbox::start_with("host", &["--tls"]);
    let port = api_port(&sandbox, "host");
    let client =
        spanset_controller::runtime::app::host_client(Some(&sandbox.kubeconfig), Some("host")).await.expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // A watch held open, as a watcher's are, and fifty reads at once beside it.
    let watching = Api::<ConfigMap>::namespaced(client, "default");
    let _watch = watching.watch(&kube::api::WatchParams::default().timeout(30), "0").await.expect("a watch opens");
    burst(&api).await;
    assert_eq!(connections_to(port), 1, "one connection carries the watch and every read");
    let doc: serde_json::Value = serde_json::from_slice(
        &std::process::Command::new("curl")
            .args(["-sf", &format!("{}/clusters", sandbox.admin)])
            .output()
            .expect("curl")
            .stdout,
    )
    .expect("the admin API answers JSON");
    let host = doc["clusters"].as_array().and_then(|c| c.iter().find(|c| c["name"] == "host")).expect("host").clone();
    assert_eq!(host["h2Connections"], 1, "the server saw one HTTP/2 connection: {host}");
}
