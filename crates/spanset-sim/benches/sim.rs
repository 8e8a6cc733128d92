//! Sandbox throughput figures: GET and LIST (1,000 pods) requests per second through the real
//! kube client, watch fan-out latency to 100 watchers, and memory per stored pod.
//! Run with `cargo bench -p spanset-sim --bench sim`; it prints one line per figure.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::{
    Api, Client,
    api::{ListParams, PostParams, WatchEvent, WatchParams},
};
use serde_json::json;
use spanset_sim::{
    cluster::{Cluster, ClusterConfig},
    sandbox::fleet::Fleet,
    store::registry::WriteOptions,
};

fn client(url: &str) -> Client {
    Client::try_from(kube::Config::new(url.parse().expect("sandbox URL"))).expect("kube client")
}

fn pod(i: usize) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-{i}"), "namespace": "default", "labels": {"app": "web", "statefulset.kubernetes.io/pod-name": format!("web-{i}")}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0", "ports": [{"containerPort": 8080}]}]},
    })
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

async fn requests_per_second<F, Fut>(concurrency: usize, duration: Duration, f: F) -> f64
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let f = f.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                while start.elapsed() < duration {
                    f().await;
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("bench task");
    }
    total as f64 / start.elapsed().as_secs_f64()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; a filter argument other than that is not supported.
    // No worker nodes: the figures are the API server's, without kubelets starting the pods.
    let fleet = Fleet::start(vec![ClusterConfig { nodes: 0, ..ClusterConfig::named("bench") }], None)
        .await
        .expect("sandbox starts");
    let url = fleet.servers[0].url();
    let cluster = fleet.servers[0].cluster.clone();
    let pods = cluster.resources.by_plural("", "pods").expect("pods served");

    // Memory per stored pod: RSS growth while storing 10,000 pods in a separate cluster.
    let scratch = Cluster::new(ClusterConfig { nodes: 0, ..ClusterConfig::named("scratch") });
    let before = rss_bytes();
    for i in 0..10_000 {
        scratch.create(&pods, Some("default"), pod(i), &WriteOptions::default()).expect("pod stored");
    }
    let per_pod = (rss_bytes().saturating_sub(before)) as f64 / 10_000.0;
    drop(scratch);

    for i in 0..1_000 {
        cluster.create(&pods, Some("default"), pod(i), &WriteOptions::default()).expect("pod stored");
    }
    let c = client(&url);
    let api: Api<Pod> = Api::namespaced(c.clone(), "default");
    let secs = Duration::from_secs(3);
    let get_rps = requests_per_second(8, secs, {
        let api = api.clone();
        move || {
            let api = api.clone();
            async move {
                api.get("web-500").await.expect("get");
            }
        }
    })
    .await;
    let list_rps = requests_per_second(2, secs, {
        let api = api.clone();
        move || {
            let api = api.clone();
            async move {
                let l = api.list(&ListParams::default()).await.expect("list");
                assert_eq!(l.items.len(), 1_000);
            }
        }
    })
    .await;

    // Watch fan-out: 100 watchers on configmaps; time from write to the last watcher's event.
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let rv = cms.list(&ListParams::default()).await.expect("list").metadata.resource_version.unwrap_or_default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    for _ in 0..100 {
        let cms = cms.clone();
        let tx = tx.clone();
        let rv = rv.clone();
        tokio::spawn(async move {
            let mut stream = cms.watch(&WatchParams::default().timeout(290), &rv).await.expect("watch").boxed();
            while let Ok(Some(ev)) = stream.try_next().await {
                if let WatchEvent::Added(cm) = ev {
                    let seq: usize =
                        cm.metadata.name.unwrap_or_default().trim_start_matches("fan-").parse().unwrap_or(0);
                    let _ = tx.send((seq, Instant::now()));
                }
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rounds = 50;
    let mut latencies = Vec::with_capacity(rounds);
    for seq in 0..rounds {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("fan-{seq}")}})).expect("configmap");
        let sent = Instant::now();
        cms.create(&PostParams::default(), &cm).await.expect("create");
        let mut seen = 0;
        let mut last = sent;
        while seen < 100 {
            let (s, at) = rx.recv().await.expect("watchers alive");
            if s == seq {
                seen += 1;
                last = last.max(at);
            }
        }
        latencies.push(last - sent);
    }
    latencies.sort();
    println!("sandbox get: {get_rps:.0} requests/s (kube client, 8 concurrent, keep-alive)");
    println!("sandbox list of 1,000 pods: {list_rps:.1} requests/s (kube client, 2 concurrent)");
    println!(
        "sandbox watch fan-out to 100 watchers: p50 {:.2} ms, p99 {:.2} ms (write to last delivery, {rounds} rounds)",
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
    );
    println!("sandbox memory per stored pod: {:.0} bytes (RSS growth over 10,000 pods)", per_pod);
}
