//! The start-ordinal blog's migration on real Redis, by hand against spanset
//! (`cargo bench --bench redis_migration`, under a minute): the six-node Redis Cluster of
//! `examples/redis-cluster.yaml` (`redis-server` running for real in the sandbox, each node on
//! its own loopback pod IP, its volume a directory) moves from one cluster to another, once by
//! the blog's kubectl steps, scripted, once by spanset, each in a fresh in-process sandbox,
//! while a client writes and reads keys throughout. For each it prints the time to move the six
//! nodes and what the client saw: requests failed, requests slower than 100 ms, latency
//! percentiles. Both runs must end with `redis-cli --cluster check` passing (three primaries
//! with a replica each, every slot covered) and every acknowledged write reading back, or the
//! benchmark fails: a run that broke the cluster is not a figure.
//!
//! - **By hand** (`source` → `destination`): a plain apps/v1 StatefulSet of the example's pod
//!   template in each cluster (the destination's empty, `ordinals.start: 6`), a headless
//!   Service in each; then per ordinal, highest first, the blog's steps: scale the source down
//!   by one, wait for the pod to go, set its PersistentVolume to `Retain`, re-create the PV and
//!   the claim in the destination (the PV's `claimRef` naming the claim), grow the destination
//!   by one with `ordinals.start`, wait for the pod Ready, then for `redis-cli --cluster check`
//!   to pass before the next step (the blog checks the cluster after each step). No name is
//!   published across the clusters: Redis gossips and redirects by IP (`cluster-announce-ip`),
//!   and the example's script resolves `redis-cluster-N.redis-cluster` only to form the cluster
//!   (all six in `source`) and to join a node arriving on a fresh volume (never here: each
//!   node's volume goes with it); ordinal 0, which polls its peers' names after it starts,
//!   moves last, when all its peers are in `destination` with it. The headless Service
//!   publishes not-Ready addresses, since the nodes resolve each other before any is Ready.
//! - **spanset** (`east` → `west`): the example's FederatedStatefulSet (east 1, west 0), then one
//!   patch to east 0, west 1; spanset sequences the six moves (`maxConcurrentMoves: 1`,
//!   `storage: Move`) and creates the Service itself.
//!
//! The clock runs from the first step (the first scale-down; the weight patch) until the six
//! nodes are Ready in the destination and `redis-cli --cluster check` passes.
//!
//! Time factor 1 (`BENCH_TIME_FACTOR` overrides it): Redis runs in real time (its node timeout,
//! the handoff's failover), so the simulated kubelet does too — its readiness probe every 2 s
//! as the example asks, pod start and Ready delays of a second each; a faster factor would run
//! the probes (a shell and three `redis-cli` each) every few milliseconds on this machine's
//! cores and measure that load instead.
//!
//! The client (`support::resp`) speaks RESP on kept connections and follows `MOVED`/`ASK`
//! redirects (a `redis-cli` spawn per request would add about 5 ms to every latency): it writes
//! `key:i`, then reads back an earlier acknowledged key, pausing 10 ms between requests, each
//! request failed after 2 s without an answer. It does not retry: what a request met (a node
//! away, `CLUSTERDOWN`) is counted. It learns new nodes from redirects and from the Ready pods
//! of both clusters, listed every 250 ms (a cluster client's topology refresh).

mod support;

use std::{
    collections::BTreeMap,
    future::Future,
    net::SocketAddr,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use parking_lot::Mutex;
use serde_json::{Value, json};
use spanset_api::FederatedStatefulSet;

use support::{
    DEADLINE, Sandbox,
    kubectl::{BlogSteps, Kubectl, kubectl_binary},
    resp::{ClusterClient, Failure, Reply},
    settled, wait_settled,
};

const EXAMPLE: &str = include_str!("../examples/redis-cluster.yaml");
const NAME: &str = "redis-cluster";
/// A request slower than this counts as slow.
const SLOW: Duration = Duration::from_millis(100);
/// The client's pause between requests.
const PAUSE: Duration = Duration::from_millis(10);
/// A request without an answer for this long fails.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

fn time_factor() -> f64 {
    std::env::var("BENCH_TIME_FACTOR").ok().and_then(|v| v.parse().ok()).unwrap_or(1.0)
}

fn pod(k: u32) -> String {
    format!("{NAME}-{k}")
}

// ---------------------------------------------------------------------------------------------
// Redis's own view.

/// `redis-cli ARGS`: stdout and whether it exited 0; a call that hangs fails after 5 s.
async fn redis_cli(args: &[&str]) -> (String, bool) {
    let mut cmd = tokio::process::Command::new("redis-cli");
    cmd.args(args).kill_on_drop(true).stdin(std::process::Stdio::null());
    match tokio::time::timeout(Duration::from_secs(5), cmd.output()).await {
        Ok(Ok(out)) => (String::from_utf8_lossy(&out.stdout).trim().to_string(), out.status.success()),
        _ => (String::new(), false),
    }
}

/// Waits until `redis-cli --cluster check` through `ip` passes: every slot covered, no error,
/// three primaries with a replica each. Answers its output.
async fn cluster_check_passes(ip: &str) -> String {
    let start = Instant::now();
    loop {
        let (out, ok) = redis_cli(&["--cluster", "check", &format!("{ip}:6379")]).await;
        let pairs = out.lines().filter(|l| l.contains(" slots | 1 slaves.")).count();
        if ok && pairs == 3 && out.contains("[OK] All 16384 slots covered.") && !out.contains("[ERR]") {
            return out;
        }
        assert!(start.elapsed() < DEADLINE, "redis-cli --cluster check through {ip} never passed:\n{out}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Ordinal → pod IP of the Redis pods Ready in one cluster.
async fn ready_ips(client: &Client) -> BTreeMap<u32, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let list = pods.list(&ListParams::default().labels("app=redis-cluster")).await.map(|l| l.items).unwrap_or_default();
    list.into_iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|p| {
            let ordinal = p.name_any().rsplit('-').next()?.parse().ok()?;
            Some((ordinal, p.status?.pod_ip?))
        })
        .collect()
}

/// Waits until the six nodes are Ready in `cluster`; answers their IPs.
async fn six_ready(client: &Client, cluster: &str) -> BTreeMap<u32, String> {
    let start = Instant::now();
    loop {
        let ips = ready_ips(client).await;
        if ips.len() == 6 {
            return ips;
        }
        assert!(start.elapsed() < DEADLINE, "six Ready nodes in {cluster}: only {ips:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The client.

/// What the client saw.
#[derive(Default)]
struct Load {
    /// Every request's time to its answer (or failure), writes and reads.
    latencies: Vec<Duration>,
    /// Failed requests by kind.
    failed: BTreeMap<String, u64>,
    /// Keys whose write was acknowledged.
    acked: Vec<u64>,
    /// Reads that answered another value, or nil, for an acknowledged key.
    wrong: Vec<String>,
    /// The longest time between two successful answers: how long the data was out of reach.
    longest_gap: Duration,
    last_success: Option<Instant>,
}

impl Load {
    fn failed_total(&self) -> u64 {
        self.failed.values().sum()
    }

    fn record(&mut self, took: Duration, failure: Option<Failure>) {
        self.latencies.push(took);
        if failure.is_none() {
            let now = Instant::now();
            if let Some(last) = self.last_success {
                self.longest_gap = self.longest_gap.max(now - last);
            }
            self.last_success = Some(now);
        }
        if let Some(f) = failure {
            let kind = match f {
                Failure::Connection(_) => "connection lost mid-request".to_string(),
                Failure::Unreachable(_) => "no node reachable".to_string(),
                Failure::Timeout => "no answer in 2 s".to_string(),
                Failure::Refused(e) => e.split_whitespace().next().unwrap_or("error").to_string(),
                Failure::Redirects => "redirect loop".to_string(),
                Failure::NoNode => "no node known".to_string(),
            };
            *self.failed.entry(kind).or_default() += 1;
        }
    }
}

/// Keeps `seeds` at the Ready Redis pods of both clusters.
async fn follow_pods(clusters: [Client; 2], seeds: Arc<Mutex<Vec<SocketAddr>>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let mut ips = ready_ips(&clusters[0]).await;
        ips.extend(ready_ips(&clusters[1]).await);
        let found: Vec<SocketAddr> = ips.values().filter_map(|ip| format!("{ip}:6379").parse().ok()).collect();
        if !found.is_empty() {
            *seeds.lock() = found;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Writes `key:i = value-i`, then reads an earlier acknowledged key, until `stop`.
async fn client(seeds: Arc<Mutex<Vec<SocketAddr>>>, stop: Arc<AtomicBool>) -> Load {
    let mut redis = ClusterClient::new(seeds, REQUEST_TIMEOUT);
    let mut load = Load::default();
    let mut i: u64 = 0;
    while !stop.load(Ordering::SeqCst) {
        let (key, value) = (format!("key:{i}"), format!("value-{i}"));
        let t = Instant::now();
        let answer = redis.request(&[b"SET", key.as_bytes(), value.as_bytes()]).await;
        match answer {
            Ok(Reply::Simple(ok)) if ok == "OK" => {
                load.record(t.elapsed(), None);
                load.acked.push(i);
            }
            Ok(other) => load.record(t.elapsed(), Some(Failure::Refused(format!("UNEXPECTED {other:?}")))),
            Err(f) => load.record(t.elapsed(), Some(f)),
        }
        tokio::time::sleep(PAUSE).await;
        if let Some(&k) = load.acked.get(load.acked.len() / 2) {
            let key = format!("key:{k}");
            let t = Instant::now();
            let answer = redis.request(&[b"GET", key.as_bytes()]).await;
            let took = t.elapsed();
            match answer {
                Ok(Reply::Bulk(v)) => {
                    load.record(took, None);
                    if v.as_deref() != Some(format!("value-{k}").as_bytes()) {
                        load.wrong
                            .push(format!("{key} read {:?}", v.map(|b| String::from_utf8_lossy(&b).into_owned())));
                    }
                }
                Ok(other) => load.record(took, Some(Failure::Refused(format!("UNEXPECTED {other:?}")))),
                Err(f) => load.record(took, Some(f)),
            }
            tokio::time::sleep(PAUSE).await;
        }
        i += 1;
    }
    load
}

/// Every acknowledged key reads back its value through the cluster as it is now; panics
/// naming the first that does not.
async fn read_back(seeds: Arc<Mutex<Vec<SocketAddr>>>, acked: &[u64]) {
    let mut redis = ClusterClient::new(seeds, REQUEST_TIMEOUT);
    for k in acked {
        let key = format!("key:{k}");
        let mut tries = 0;
        let got = loop {
            match redis.request(&[b"GET", key.as_bytes()]).await {
                Ok(r) => break r,
                Err(f) if tries < 20 => {
                    tries += 1;
                    eprintln!("reading back {key}: {f:?}, again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(f) => panic!("acknowledged {key} could not be read back: {f:?}"),
            }
        };
        assert_eq!(got, Reply::Bulk(Some(format!("value-{k}").into_bytes())), "acknowledged {key} reads back");
    }
}

/// One side's figures.
struct Side {
    took: Duration,
    load: Load,
    kubectl_calls: Option<u64>,
    /// By hand: where the time went, summed over the six steps.
    phases: Vec<(&'static str, Duration)>,
}

/// Runs `migration` with the client writing and reading throughout; answers its time and what
/// the client saw, once the migration's end is judged: the six nodes Ready in `clusters[1]`,
/// none in `clusters[0]`, `redis-cli --cluster check` passing with only destination addresses,
/// no read wrong, every acknowledged write read back.
async fn measured(clusters: [Client; 2], names: [&str; 2], migration: impl Future<Output = ()>) -> (Duration, Load) {
    let seeds = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let follower = tokio::spawn(follow_pods(clusters.clone(), seeds.clone(), stop.clone()));
    while seeds.lock().is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let writer = tokio::spawn(client(seeds.clone(), stop.clone()));
    // A second of steady load before the first step, so the figures include the client's
    // ordinary latencies, not only the migration's.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let t0 = Instant::now();
    migration.await;
    let took = t0.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::SeqCst);
    let load = writer.await.expect("the client ran");
    follower.await.expect("the pod follower ran");

    assert!(ready_ips(&clusters[0]).await.is_empty(), "no Redis node left Ready in {}", names[0]);
    let ips = six_ready(&clusters[1], names[1]).await;
    let check = cluster_check_passes(&ips[&0]).await;
    for line in check.lines().filter(|l| l.starts_with("M: ") || l.starts_with("S: ")) {
        assert!(ips.values().any(|ip| line.contains(&format!(" {ip}:6379"))), "a node outside {}: {line}", names[1]);
    }
    assert!(load.wrong.is_empty(), "reads answered other values: {:?}", load.wrong);
    assert!(load.acked.len() > 10, "the client wrote only {} keys", load.acked.len());
    *seeds.lock() = ips.values().filter_map(|ip| format!("{ip}:6379").parse().ok()).collect();
    read_back(seeds, &load.acked).await;
    (took, load)
}

// ---------------------------------------------------------------------------------------------
// The two sides.

/// The example's pod, claim and policy (its `spec.template`) as a plain StatefulSet.
fn statefulset(start: u32, replicas: u32) -> Value {
    let example: Value = serde_yaml::from_str(EXAMPLE).expect("the example parses");
    let mut spec = example["spec"]["template"].clone();
    spec["replicas"] = json!(replicas);
    spec["ordinals"] = json!({"start": start});
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": NAME, "namespace": "default"}, "spec": spec})
}

/// The headless Service giving the pods their names; the nodes must resolve each other before
/// they are Ready (the cluster forms only once all six answer).
fn headless_service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": NAME, "namespace": "default"},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": true, "selector": {"app": NAME},
            "ports": [{"name": "redis", "port": 6379}, {"name": "bus", "port": 16379}]}})
}

fn real_redis(c: &mut spanset_sim::cluster::ClusterConfig) {
    c.run_images = vec!["redis".into()];
}

/// The blog's procedure, scripted with kubectl, in `source` and `destination`.
async fn by_hand(bin: &Path) -> Side {
    let members = ["source".to_string(), "destination".to_string()];
    let sb = Sandbox::start_configured(&members, time_factor(), false, real_redis).await;
    let k = |ctx: &str| Kubectl::new(bin, &sb.kubeconfig, sb.dir().join("kubectl-cache"), ctx);
    let (src, dst) = (k("source"), k("destination"));
    for kubectl in [&src, &dst] {
        kubectl.ok_with(&["apply", "-f", "-"], Some(&headless_service().to_string())).await;
    }
    src.ok_with(&["apply", "-f", "-"], Some(&statefulset(0, 6).to_string())).await;
    dst.ok_with(&["apply", "-f", "-"], Some(&statefulset(6, 0).to_string())).await;
    let (source, destination) = (sb.client("source").await, sb.client("destination").await);
    let ips = six_ready(&source, "source").await;
    cluster_check_passes(&ips[&0]).await;
    let mut pv_of = Vec::new();
    for i in 0..6 {
        let claim = format!("data-{NAME}-{i}");
        pv_of.push(src.ok(&["get", "pvc", &claim, "-o", "jsonpath={.spec.volumeName}"]).await);
        assert!(!pv_of[i].is_empty(), "{claim} is bound");
    }

    let calls_before = src.count() + dst.count();
    let phases = Mutex::new(vec![
        ("scale-down until the pod is gone", Duration::ZERO),
        ("PV and claim handed over", Duration::ZERO),
        ("grow until the pod is Ready", Duration::ZERO),
        ("until the cluster check passes", Duration::ZERO),
    ]);
    let blog = BlogSteps { src: &src, dst: &dst, sts: NAME, claim_template: "data", total: 6 };
    let steps = async {
        for k in (0..6u32).rev() {
            let pod = pod(k);
            let mut t = Instant::now();
            let mut lap = |phase: usize| {
                phases.lock()[phase].1 += t.elapsed();
                t = Instant::now();
            };
            blog.scale_down(k).await;
            lap(0);
            blog.hand_over(k, &pv_of[k as usize]).await;
            lap(1);
            blog.grow(k).await;
            lap(2);
            let ip = dst.ok(&["get", "pod", &pod, "-o", "jsonpath={.status.podIP}"]).await;
            cluster_check_passes(ip.trim()).await;
            lap(3);
        }
    };
    let (took, load) = measured([source, destination], ["source", "destination"], steps).await;
    let calls = src.count() + dst.count() - calls_before;
    assert!(sb.fleet.ledger.overlaps().is_empty(), "by hand: no ordinal ran twice at once");
    Side { took, load, kubectl_calls: Some(calls), phases: phases.into_inner() }
}

/// The example's FederatedStatefulSet in `east`, then one patch moving it to `west`.
async fn by_spanset() -> Side {
    let members = ["east".to_string(), "west".to_string()];
    let sb = Sandbox::start_configured(&members, time_factor(), true, real_redis).await;
    let running = sb.controller().await;
    let api = sb.fsts();
    let fsts: FederatedStatefulSet = serde_yaml::from_str(EXAMPLE).expect("the example parses");
    api.create(&PostParams::default(), &fsts).await.expect("federation created");
    wait_settled(&api, NAME, 6, "six nodes Ready in east").await;
    let (east, west) = (sb.client("east").await, sb.client("west").await);
    let ips = six_ready(&east, "east").await;
    cluster_check_passes(&ips[&0]).await;

    let migration = async {
        let body = json!({"spec": {"placement": {"clusters": [
            {"name": "east", "weight": 0}, {"name": "west", "weight": 1}]}}});
        api.patch(NAME, &PatchParams::default(), &Patch::Merge(&body)).await.expect("weights patched");
        let start = Instant::now();
        loop {
            if let Ok(f) = api.get(NAME).await
                && settled(&f, 6)
                && f.status.as_ref().is_some_and(|s| {
                    s.slices
                        .iter()
                        .any(|sl| sl.cluster == "west" && sl.start == 0 && sl.replicas == 6 && sl.ready_replicas == 6)
                })
            {
                break;
            }
            assert!(start.elapsed() < 6 * DEADLINE, "timed out waiting for the six moves to west");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let ips = six_ready(&west, "west").await;
        cluster_check_passes(&ips[&0]).await;
    };
    let (took, load) = measured([east, west.clone()], ["east", "west"], migration).await;
    assert!(sb.fleet.ledger.overlaps().is_empty(), "spanset: no ordinal ran twice at once");
    running.stop().await;
    Side { took, load, kubectl_calls: None, phases: Vec::new() }
}

// ---------------------------------------------------------------------------------------------
// The report.

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn print(label: &str, side: &Side) {
    let l = &side.load;
    let slow = l.latencies.iter().filter(|d| **d > SLOW).count();
    println!(
        "{label}: six nodes moved in {:.1} s{}; client: {} requests, {} failed {:?}, {slow} slower than {}, longest without a success {}; {} writes acknowledged, all read back",
        side.took.as_secs_f64(),
        side.kubectl_calls.map(|c| format!(" ({c} kubectl calls)")).unwrap_or_default(),
        l.latencies.len(),
        l.failed_total(),
        l.failed,
        ms(SLOW),
        ms(l.longest_gap),
        l.acked.len(),
    );
    if !side.phases.is_empty() {
        let phases: Vec<String> = side.phases.iter().map(|(p, d)| format!("{p} {:.1} s", d.as_secs_f64())).collect();
        println!("    (the six steps' time by phase: {})", phases.join("; "));
    }
}

fn row(figure: &str, by_hand: String, spanset: String) {
    println!("| {figure} | {by_hand} | {spanset} |");
}

fn main() {
    let missing: Vec<&str> = ["redis-server", "redis-cli"]
        .into_iter()
        .filter(|p| std::process::Command::new(p).arg("--version").output().is_err())
        .collect();
    let bin = kubectl_binary();
    if !missing.is_empty() || bin.is_none() {
        let mut gone: Vec<&str> = missing;
        if bin.is_none() {
            gone.push("kubectl");
        }
        let msg = format!("redis_migration not measured: {} not on PATH", gone.join(", "));
        assert!(std::env::var_os("CI").is_none(), "{msg}");
        println!("{msg}");
        return;
    }
    let bin = bin.expect("checked above");
    assert_eq!(support::resp::slot(b"123456789"), 12739, "the client's hash slots are Redis's");
    let started = Instant::now();
    actix::System::with_tokio_rt(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime"))
        .block_on(async move {
            let hand = by_hand(&bin).await;
            print("By hand (the blog's kubectl steps)", &hand);
            let spanset = by_spanset().await;
            print("spanset (one weight patch)", &spanset);

            let sorted = |s: &Side| {
                let mut l = s.load.latencies.clone();
                l.sort();
                l
            };
            let (h, s) = (sorted(&hand), sorted(&spanset));
            let slow = |l: &[Duration]| l.iter().filter(|d| **d > SLOW).count();
            println!();
            println!("| Six Redis nodes, one cluster to another | blog by hand (kubectl) | spanset |");
            println!("|---|---|---|");
            row(
                "time to move six nodes",
                format!("{:.1} s", hand.took.as_secs_f64()),
                format!("{:.1} s", spanset.took.as_secs_f64()),
            );
            row("client requests (writes and reads)", h.len().to_string(), s.len().to_string());
            row("failed requests", hand.load.failed_total().to_string(), spanset.load.failed_total().to_string());
            row(&format!("requests slower than {}", ms(SLOW)), slow(&h).to_string(), slow(&s).to_string());
            row(
                "latency p50 / p99 / max",
                format!("{} / {} / {}", ms(percentile(&h, 0.5)), ms(percentile(&h, 0.99)), ms(h[h.len() - 1])),
                format!("{} / {} / {}", ms(percentile(&s, 0.5)), ms(percentile(&s, 0.99)), ms(s[s.len() - 1])),
            );
            row("longest time without a successful request", ms(hand.load.longest_gap), ms(spanset.load.longest_gap));
            row(
                "acknowledged writes, all read back",
                hand.load.acked.len().to_string(),
                spanset.load.acked.len().to_string(),
            );
            row("kubectl calls", hand.kubectl_calls.unwrap_or_default().to_string(), "0 (one patch)".into());
            println!(
                "\n(benchmark ran {:.0} s; time factor {}; kubectl: {})",
                started.elapsed().as_secs_f64(),
                time_factor(),
                bin.display()
            );
        });
}
