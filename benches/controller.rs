//! Controller figures on the sandbox. Run with `cargo bench --bench controller [SECTION…]`,
//! SECTION one of `federation` (spec propagation and the idle federation), `migration` (the
//! hand-off per ordinal, and the blog's kubectl procedure against spanset) and `memory` (a
//! separate `spanset run` process with 100 federations); default: all. Prints one line per
//! figure, then a markdown table. `BENCH_LOG=spanset_controller=debug` prints the
//! controller's logs (default: errors only).
//!
//! Everything runs on the simulator (`spanset_sim`) on loopback, with `time_factor` 0.01 (a
//! simulated second is 10 ms), so simulated pod starts and grace periods barely count and what
//! is measured is the controller, the kube client and the simulated API servers, all sharing
//! this machine's cores.

mod support;

use std::{
    alloc::{GlobalAlloc, Layout, System},
    collections::BTreeMap,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{
        Arc, Mutex,
        atomic::{AtomicI64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use serde_json::{Value, json};
use spanset::cli::sandbox::{example, install_crds, join_members};
use spanset_api::{FederatedStatefulSet, labels::FEDERATION};
use spanset_controller::{
    leadership::leader::LeaseSettings,
    member::cache::{FederationCache, MemberCache, PodRecord, StsRecord},
    runtime::app::{self, RunOptions},
};
use spanset_plan::Backend;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tracing_subscriber::{Layer, layer::SubscriberExt, util::SubscriberInitExt};

use support::{
    DEADLINE, Sandbox, client,
    kubectl::{BlogSteps, Kubectl, kubectl_binary, strip},
    light_template, settled, wait_settled,
};

/// Real seconds per simulated second, everywhere in this benchmark.
const TIME_FACTOR: f64 = 0.01;
/// Members of the propagation and memory figures.
const MEMBERS: usize = 10;
/// Spec changes timed for the propagation figure.
const SPEC_CHANGES: usize = 40;
/// The idle window, scaled to a minute in the report.
const IDLE_WINDOW: Duration = Duration::from_secs(30);
/// Federations and replicas of the memory figure.
const FEDERATIONS: usize = 100;
const REPLICAS_EACH: i32 = 10;
/// The idle window of the 100-federation controller's CPU figure.
const IDLE_CPU_WINDOW: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// What the simulated API servers and the coordinators log, counted in-process.

/// Requests seen by the simulated API servers, by (cluster, method, resource, watch), and the
/// hand-offs the coordinators logged.
#[derive(Default)]
struct Seen {
    requests: Mutex<BTreeMap<(String, String, String, bool), u64>>,
    handoffs: Mutex<Vec<f64>>,
}

#[derive(Default)]
struct Fields {
    message: String,
    cluster: String,
    method: String,
    uri: String,
    seconds: Option<f64>,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        match field.name() {
            "message" => self.message = text,
            "cluster" => self.cluster = text,
            "method" => self.method = text,
            "uri" => self.uri = text,
            _ => {}
        }
    }

    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        if field.name() == "seconds" {
            self.seconds = Some(value);
        }
    }
}

struct Counting(Arc<Seen>);

impl<S: tracing::Subscriber> Layer<S> for Counting {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        if f.message == "request" && !f.cluster.is_empty() {
            let (path, query) = f.uri.split_once('?').unwrap_or((f.uri.as_str(), ""));
            let watch = query.split('&').any(|q| q == "watch=true" || q == "watch=1");
            let key = (f.cluster, f.method, resource_of(path), watch);
            *self.0.requests.lock().unwrap().entry(key).or_default() += 1;
        } else if f.message == "ordinal handed off"
            && let Some(s) = f.seconds
        {
            self.0.handoffs.lock().unwrap().push(s);
        }
    }
}

/// `pods`, `statefulsets`, `federatedstatefulsets/status`, `version`… from a request path.
fn resource_of(path: &str) -> String {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segs.first() {
        Some(&"api") => &segs[segs.len().min(2)..],
        Some(&"apis") => &segs[segs.len().min(3)..],
        _ => return segs.first().copied().unwrap_or("").to_string(),
    };
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    match rest {
        [] => "discovery".into(),
        [r] | [r, _] => r.to_string(),
        [r, _, sub, ..] => format!("{r}/{sub}"),
    }
}

impl Seen {
    fn snapshot(&self) -> BTreeMap<(String, String, String, bool), u64> {
        self.requests.lock().unwrap().clone()
    }
}

fn delta(
    before: &BTreeMap<(String, String, String, bool), u64>,
    after: &BTreeMap<(String, String, String, bool), u64>,
) -> BTreeMap<(String, String, String, bool), u64> {
    after.iter().map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0))).filter(|(_, v)| *v > 0).collect()
}

// ---------------------------------------------------------------------------------------------
// The report.

struct Row {
    figure: String,
    value: String,
    target: String,
    verdict: &'static str,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
}

impl Report {
    fn add(&mut self, figure: &str, value: String, target: &str, met: Option<bool>) {
        let verdict = match met {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "-",
        };
        println!("{figure}: {value} (target: {target}; {verdict})");
        self.rows.push(Row { figure: figure.into(), value, target: target.into(), verdict });
    }

    fn print_table(&self) {
        println!();
        println!("| Figure | Measured | Target | |");
        println!("|---|---|---|---|");
        for r in &self.rows {
            println!("| {} | {} | {} | {} |", r.figure, r.value, r.target, r.verdict);
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Nearest-rank percentile of sorted samples.
fn percentile<T: Copy>(sorted: &[T], p: f64) -> T {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

// ---------------------------------------------------------------------------------------------
// Sandboxes and controllers.

/// An in-process sandbox: `host` plus members, a kubeconfig, CRDs and MemberClusters.
fn member_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("m{i}")).collect()
}

/// One HTTP/1.0 GET on loopback; answers (status, body).
async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.ok()?;
    let (head, body) = buf.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

async fn scrape(addr: SocketAddr) -> String {
    http_get(addr, "/metrics").await.map(|(_, b)| b).unwrap_or_default()
}

/// The sum of every sample of a series (all label sets).
fn series_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' ')))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn federation(name: &str, members: &[String], replicas: i32, template: Value) -> FederatedStatefulSet {
    let mut f = example(members);
    f.metadata.name = Some(name.into());
    f.spec.replicas = replicas;
    f.spec.template = serde_json::from_value(template).expect("a valid template");
    f
}

// ---------------------------------------------------------------------------------------------
// 1 and 3: spec propagation to 10 members, then the idle federation.

async fn federation_figures(seen: &Seen, report: &mut Report) {
    let members = member_names(MEMBERS);
    let sb = Sandbox::start(&members, TIME_FACTOR, true).await;
    let running = sb.controller().await;
    let api = sb.fsts();
    let replicas = MEMBERS as i32;
    api.create(&PostParams::default(), &federation("web", &members, replicas, light_template("web")))
        .await
        .expect("federation created");
    wait_settled(&api, "web", replicas, "the first settle").await;

    // Every member's StatefulSet `web`, watched: (member, bench/rev annotation, when seen).
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Option<String>, Instant)>();
    let mut watches = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let sts: Api<StatefulSet> = Api::namespaced(client(&sb.kubeconfig, m).await, "default");
        let tx = tx.clone();
        watches.push(tokio::spawn(async move {
            let mut events = watcher(sts, watcher::Config::default()).boxed();
            while let Some(ev) = events.next().await {
                if let Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) = ev
                    && s.metadata.name.as_deref() == Some("web")
                {
                    let rev = s
                        .spec
                        .and_then(|sp| sp.template.metadata)
                        .and_then(|m| m.annotations)
                        .and_then(|a| a.get("bench/rev").cloned());
                    let _ = tx.send((i, rev, Instant::now()));
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    while rx.try_recv().is_ok() {}

    let mut latencies = Vec::new();
    for n in 0..SPEC_CHANGES {
        let rev = format!("r{n}");
        let patch = json!({"spec": {"template": {"template": {"metadata": {"annotations": {"bench/rev": rev}}}}}});
        let t0 = Instant::now();
        api.patch("web", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("spec changed");
        let mut seen_at: BTreeMap<usize, Instant> = BTreeMap::new();
        while seen_at.len() < MEMBERS {
            let left = DEADLINE.checked_sub(t0.elapsed()).expect("every member written in time");
            let (i, r, at) = tokio::time::timeout(left, rx.recv()).await.expect("in time").expect("watches run");
            if r.as_deref() == Some(rev.as_str()) {
                seen_at.entry(i).or_insert(at);
            }
        }
        latencies.push(seen_at.values().max().expect("members").duration_since(t0));
        // Leave the rollouts a moment, as successive edits by a person or a pipeline would.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    for w in &watches {
        w.abort();
    }
    let text = scrape(running.metrics_addr).await;
    let failed: f64 = text
        .lines()
        .filter(|l| l.starts_with("spanset_reconciles_total{") && l.contains("result=\"error\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    println!(
        "    ({failed:.0} of {:.0} reconciles so far did not finish (a 409 on a member write retries after 250 ms))",
        series_sum(&text, "spanset_reconciles_total")
    );
    let slowest = latencies.iter().enumerate().max_by_key(|(_, d)| **d).map(|(i, _)| i + 1).unwrap_or(0);
    println!(
        "    (slowest: change #{slowest} of {SPEC_CHANGES}; each change also re-checks every member's namespace and Service and dry-runs the template there)"
    );
    latencies.sort();
    let p99 = percentile(&latencies, 0.99);
    report.add(
        "1. Spec change → all 10 member StatefulSets written (p50 / p99 / max)",
        format!(
            "{} / {} / {} over {} template changes",
            ms(percentile(&latencies, 0.5)),
            ms(p99),
            ms(*latencies.last().expect("samples")),
            latencies.len()
        ),
        "p99 ≤ 300 ms",
        Some(p99 <= Duration::from_millis(300)),
    );

    // 3. Idle: the federation settled (rollouts done), nothing changes for IDLE_WINDOW.
    wait_settled(&api, "web", replicas, "the rollouts to end").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let m0 = scrape(running.metrics_addr).await;
    let r0 = seen.snapshot();
    let t0 = Instant::now();
    tokio::time::sleep(IDLE_WINDOW).await;
    let window = t0.elapsed();
    let m1 = scrape(running.metrics_addr).await;
    let r1 = seen.snapshot();
    let d = |name: &str| series_sum(&m1, name) - series_sum(&m0, name);
    let reconciles = d("spanset_reconciles_total");
    let member_writes = d("spanset_member_writes_total");
    let requests = delta(&r0, &r1);
    let per_minute = |n: u64| n as f64 * 60.0 / window.as_secs_f64();
    let is_write = |m: &str| matches!(m, "POST" | "PUT" | "PATCH" | "DELETE");
    let fsts_writes: u64 = requests
        .iter()
        .filter(|((c, m, r, _), _)| c == "host" && is_write(m) && r.starts_with("federatedstatefulsets"))
        .map(|(_, v)| v)
        .sum();
    let member_write_requests: u64 =
        requests.iter().filter(|((c, m, _, _), _)| c != "host" && is_write(m)).map(|(_, v)| v).sum();
    // Dry runs count: they are requests a no-op reconcile must not make either.
    let writes = member_write_requests + fsts_writes;
    let writes_per = if reconciles > 0.0 { writes as f64 / reconciles } else { f64::NAN };
    report.add(
        "3a. Writes per no-op reconcile",
        format!(
            "{writes_per:.2} ({writes} writes in {reconciles:.0} reconciles over {:.0} s: member write requests \
             {member_write_requests} (spanset_member_writes_total +{member_writes:.0}), FederatedStatefulSet writes \
             {fsts_writes})",
            window.as_secs_f64()
        ),
        "0",
        Some(writes == 0 && member_writes == 0.0),
    );
    let total =
        |host: bool| -> u64 { requests.iter().filter(|((c, _, _, _), _)| (c == "host") == host).map(|(_, v)| v).sum() };
    let breakdown = |host: bool| -> String {
        let mut by: BTreeMap<String, u64> = BTreeMap::new();
        for ((c, m, r, w), v) in &requests {
            if (c == "host") == host {
                *by.entry(format!("{m} {r}{}", if *w { " (watch)" } else { "" })).or_default() += v;
            }
        }
        by.iter().map(|(k, v)| format!("{k} {:.0}", per_minute(*v))).collect::<Vec<_>>().join(", ")
    };
    report.add(
        "3b. Member requests per idle minute (10 members, 1 federation)",
        format!(
            "{:.0} ({:.1} per member; {}); controller's spanset_api_requests_total: {:.0}/min",
            per_minute(total(false)),
            per_minute(total(false)) / MEMBERS as f64,
            breakdown(false),
            d("spanset_api_requests_total") * 60.0 / window.as_secs_f64()
        ),
        "-",
        None,
    );
    report.add(
        "3c. Host requests per idle minute",
        format!("{:.0} ({})", per_minute(total(true)), breakdown(true)),
        "-",
        None,
    );
    println!(
        "    (idle window {:.1} s scaled to a minute; {reconciles:.0} reconciles, {:.0} member watch events in it)",
        window.as_secs_f64(),
        d("spanset_watch_events_total")
    );
    running.stop().await;
    drop(sb);
}

// ---------------------------------------------------------------------------------------------
// 2 and 5: the blog's migration by kubectl, then by spanset; the hand-off per ordinal.

const BLOG_STS: &str = include_str!("../examples/blog-statefulset.yaml");

/// The same StatefulSet as a FederatedStatefulSet template.
fn blog_template() -> Value {
    json!({
        "serviceName": "redis-redis-cluster-headless",
        "selector": {"matchLabels": {"app": "redis"}},
        "template": {
            "metadata": {"labels": {"app": "redis"}},
            "spec": {
                "terminationGracePeriodSeconds": 10,
                "containers": [{"name": "redis", "image": "redis:7",
                    "volumeMounts": [{"name": "redis-data", "mountPath": "/bitnami/redis/data"}]}]
            }
        },
        "volumeClaimTemplates": [{"metadata": {"name": "redis-data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    })
}

fn blog_sts(start: u32, replicas: u32) -> String {
    BLOG_STS.replace("REPLICAS", &replicas.to_string()).replace("START", &start.to_string())
}

/// The blog's procedure with kubectl in a fresh sandbox; answers (time, kubectl calls) of the
/// per-ordinal loop (the source's 6 Ready pods and the destination's empty StatefulSet and
/// Secret are set up before the clock starts). `move_storage`: the blog's PV/PVC hand-over.
async fn blog_by_kubectl(bin: &Path, move_storage: bool) -> (Duration, u64, bool) {
    let sb = Sandbox::start(&["source".to_string(), "destination".to_string()], TIME_FACTOR, false).await;
    let k = |ctx: &str| Kubectl::new(bin, &sb.kubeconfig, sb.dir().join("kubectl-cache"), ctx);
    let (src, dst) = (k("source"), k("destination"));
    src.ok_with(&["apply", "-f", "-"], Some(&blog_sts(0, 6))).await;
    src.ok(&["create", "secret", "generic", "redis-redis-cluster", "--from-literal=password=s3cret"]).await;
    for i in 0..6 {
        src.until("6 ready pods in source", &format!("redis-redis-cluster-{i}"), true).await;
    }
    let mut pv_of = Vec::new();
    for i in 0..6 {
        let pvc = format!("redis-data-redis-redis-cluster-{i}");
        let start = Instant::now();
        loop {
            let pv = src.ok(&["get", "pvc", &pvc, "-o", "jsonpath={.spec.volumeName}"]).await;
            if !pv.is_empty() {
                pv_of.push(pv);
                break;
            }
            assert!(start.elapsed() < DEADLINE, "the claim to bind");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    dst.ok_with(&["apply", "-f", "-"], Some(&blog_sts(6, 0))).await;
    let secret = strip(src.json(&["get", "secret", "redis-redis-cluster"]).await);
    dst.ok_with(&["create", "-f", "-"], Some(&secret.to_string())).await;

    let calls_before = src.count() + dst.count();
    let t0 = Instant::now();
    let blog = BlogSteps { src: &src, dst: &dst, sts: "redis-redis-cluster", claim_template: "redis-data", total: 6 };
    for k in (0..6u32).rev() {
        blog.scale_down(k).await;
        if move_storage {
            blog.hand_over(k, &pv_of[k as usize]).await;
        }
        blog.grow(k).await;
    }
    let took = t0.elapsed();
    let calls = src.count() + dst.count() - calls_before;
    (took, calls, sb.fleet.ledger.overlaps().is_empty())
}

/// The same migration by spanset in a fresh sandbox: weights 1:0 settled, then 0:1; answers
/// the time until every ordinal is Ready in the destination and nothing moves, and whether
/// the ledger stayed clean. The move back (1:0 again) gives the hand-off more samples.
async fn blog_by_spanset(seen: &Seen) -> (Duration, Duration, SocketAddr, bool, app::Running, Sandbox) {
    let members = vec!["source".to_string(), "destination".to_string()];
    let sb = Sandbox::start(&members, TIME_FACTOR, true).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(sb.host.clone(), "default");
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "redis-redis-cluster"}, "stringData": {"password": "s3cret"}
    }))
    .expect("a secret");
    secrets.create(&PostParams::default(), &secret).await.expect("secret created");
    let running = sb.controller().await;
    let api = sb.fsts();
    let mut f = federation("redis-redis-cluster", &members, 6, blog_template());
    f.spec.placement.clusters[0].weight = Some(1);
    f.spec.placement.clusters[1].weight = Some(0);
    f.spec.migration = serde_json::from_value(json!({
        "maxConcurrentMoves": 1, "storage": "Detached",
        "carry": [{"kind": "Secret", "name": "redis-redis-cluster"}]
    }))
    .expect("migration");
    api.create(&PostParams::default(), &f).await.expect("federation created");
    wait_settled(&api, "redis-redis-cluster", 6, "6 ready in source").await;
    seen.handoffs.lock().unwrap().clear();

    let weights = |a: i32, b: i32| {
        json!({"spec": {"placement": {"clusters": [
        {"name": "source", "weight": a}, {"name": "destination", "weight": b}]}}})
    };
    let mut times = Vec::new();
    for (a, b, to) in [(0, 1, "destination"), (1, 0, "source")] {
        let t0 = Instant::now();
        api.patch("redis-redis-cluster", &PatchParams::default(), &Patch::Merge(&weights(a, b)))
            .await
            .expect("weights");
        loop {
            if let Ok(f) = api.get("redis-redis-cluster").await
                && settled(&f, 6)
                && f.status.as_ref().is_some_and(|s| {
                    s.slices
                        .iter()
                        .any(|sl| sl.cluster == to && sl.start == 0 && sl.replicas == 6 && sl.ready_replicas == 6)
                })
            {
                break;
            }
            assert!(t0.elapsed() < DEADLINE, "timed out waiting for the migration to {to}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        times.push(t0.elapsed());
    }
    let clean = sb.fleet.ledger.overlaps().is_empty();
    let addr = running.metrics_addr;
    (times[0], times[1], addr, clean, running, sb)
}

async fn migration_figures(seen: &Seen, report: &mut Report) {
    let (there, back, addr, clean, running, sb) = blog_by_spanset(seen).await;
    let text = scrape(addr).await;
    let mut handoffs = seen.handoffs.lock().unwrap().clone();
    handoffs.sort_by(f64::total_cmp);
    let count = series_sum(&text, "spanset_move_handoff_seconds_count");
    let sum = series_sum(&text, "spanset_move_handoff_seconds_sum");
    if handoffs.is_empty() {
        report.add("2. Controller's hand-off per ordinal", "no samples".into(), "≤ 100 ms", Some(false));
    } else {
        let max = *handoffs.last().expect("samples");
        report.add(
            "2. Controller's hand-off per ordinal (release observed → destination grow written; p50 / max)",
            format!(
                "{:.1} ms / {:.1} ms over {} moves (spanset_move_handoff_seconds: count {count:.0}, mean {:.1} ms)",
                percentile(&handoffs, 0.5) * 1e3,
                max * 1e3,
                handoffs.len(),
                if count > 0.0 { sum / count * 1e3 } else { f64::NAN }
            ),
            "≤ 100 ms",
            Some(max <= 0.1),
        );
    }
    // spanset_move_duration_seconds is not used: a move's `since` is stored to the second,
    // and these moves take a fraction of one.
    println!(
        "    (spanset: {:.0} ms per ordinal there, {:.0} ms back, from the weight change to Ready in the status)",
        there.as_secs_f64() * 1e3 / 6.0,
        back.as_secs_f64() * 1e3 / 6.0
    );
    running.stop().await;
    drop(sb);

    let Some(bin) = kubectl_binary() else {
        report.add("5. Blog migration, kubectl vs spanset", "not measured: no kubectl on PATH".into(), "-", None);
        return;
    };
    let (manual, calls, manual_clean) = blog_by_kubectl(&bin, true).await;
    let (scale_only, calls_scale, scale_clean) = blog_by_kubectl(&bin, false).await;
    report.add(
        "5. Blog migration of 6 ordinals source → destination: kubectl script (blog, PV/PVC handed over) vs spanset",
        format!(
            "{:.2} s ({calls} kubectl calls) vs {:.2} s: spanset takes {:.2}x the script's time",
            manual.as_secs_f64(),
            there.as_secs_f64(),
            there.as_secs_f64() / manual.as_secs_f64()
        ),
        "-",
        None,
    );
    report.add(
        "5b. Same, kubectl script without the storage steps (like spanset's `storage: Detached`) vs spanset",
        format!(
            "{:.2} s ({calls_scale} kubectl calls) vs {:.2} s ({:.2}x); spanset back again 0:1 → 1:0: {:.2} s",
            scale_only.as_secs_f64(),
            there.as_secs_f64(),
            there.as_secs_f64() / scale_only.as_secs_f64(),
            back.as_secs_f64()
        ),
        "-",
        None,
    );
    println!(
        "    (kubectl: {}; time_factor {TIME_FACTOR} for both; at-most-one ledger clean: kubectl {}, {}, spanset {})",
        bin.display(),
        manual_clean,
        scale_clean,
        clean
    );
}

// ---------------------------------------------------------------------------------------------
// 4: memory of a separate `spanset run` with 100 federations over 10 members.

fn rss_of(pid: u32) -> u64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// User plus system CPU seconds of a process so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

/// Bytes allocated and not yet freed in this process (the benchmark's global allocator).
static LIVE: AtomicI64 = AtomicI64::new(0);

struct LiveBytes;

// A counting allocator can only be written as an `unsafe impl` (the workspace denies `unsafe`
// elsewhere).
#[allow(unsafe_code)]
// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for LiveBytes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: LiveBytes = LiveBytes;

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// A `spanset sim` process with `host` and the members; killed on drop.
struct SimProcess {
    _child: tokio::process::Child,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    host: Client,
}

async fn sim_process(members: &[String]) -> SimProcess {
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    let clusters = std::iter::once("host".to_string()).chain(members.iter().cloned()).collect::<Vec<_>>().join(",");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["sim", "--time-factor", &TIME_FACTOR.to_string(), "--clusters", &clusters, "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spanset sim starts");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    loop {
        let line = tokio::time::timeout(DEADLINE, lines.next_line()).await.expect("in time").expect("read");
        if line.as_deref().expect("spanset sim printed `ready`") == "ready" {
            break;
        }
    }
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let host = client(&kubeconfig, "host").await;
    install_crds(&host).await.expect("CRDs");
    join_members(&host, members).await.expect("members");
    SimProcess { _child: child, dir, kubeconfig, host }
}

/// Waits until the controller at `addr` is ready (every member listed) and leads.
async fn wait_leading(addr: SocketAddr) {
    let start = Instant::now();
    loop {
        let ready = matches!(http_get(addr, "/readyz").await, Some((200, _)));
        if ready && series_sum(&scrape(addr).await, "spanset_leader") == 1.0 {
            return;
        }
        assert!(start.elapsed() < DEADLINE, "the controller ready and leading");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates the 100 federations and waits until all are settled; answers how long that took.
async fn create_federations(host: &Client, members: &[String]) -> Duration {
    let api: Api<FederatedStatefulSet> = Api::namespaced(host.clone(), "default");
    let t0 = Instant::now();
    for i in 0..FEDERATIONS {
        let name = format!("fed-{i:03}");
        api.create(&PostParams::default(), &federation(&name, members, REPLICAS_EACH, light_template(&name)))
            .await
            .expect("federation created");
    }
    loop {
        let list = api.list(&ListParams::default()).await.expect("list");
        let done = list.items.iter().filter(|f| settled(f, REPLICAS_EACH)).count();
        if done == FEDERATIONS {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < DEADLINE * 2, "timed out: {done}/{FEDERATIONS} federations settled");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

const MIB: f64 = 1048576.0;

async fn memory_figures(report: &mut Report) {
    let members = member_names(MEMBERS);
    report.add(
        "4a. size_of PodRecord / StsRecord (inline, before heap strings)",
        format!("{} B / {} B", std::mem::size_of::<PodRecord>(), std::mem::size_of::<StsRecord>()),
        "-",
        None,
    );

    // Pass 1: `spanset run` as its own process; its resident set before and after.
    let sim = sim_process(&members).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let log = std::fs::File::create(sim.dir.path().join("run.log")).expect("log");
    let mut run = tokio::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["run", "--context", "host", "--metrics-addr", &addr.to_string(), "--identity", "bench"])
        .args(["--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5", "--kubeconfig"])
        .arg(&sim.kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("spanset run starts");
    let pid = run.id().expect("pid");
    wait_leading(addr).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rss_of(pid);
    let settle = create_federations(&sim.host, &members).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = rss_of(pid);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
    // Idle cost of the settled 100 federations: CPU and reconciles over a short window.
    let (cpu0, m0, t0) = (cpu_seconds(pid), scrape(addr).await, Instant::now());
    tokio::time::sleep(IDLE_CPU_WINDOW).await;
    let (cpu1, m1, window) = (cpu_seconds(pid), scrape(addr).await, t0.elapsed().as_secs_f64());
    let reconciles = series_sum(&m1, "spanset_reconciles_total") - series_sum(&m0, "spanset_reconciles_total");
    let writes = series_sum(&m1, "spanset_member_writes_total") - series_sum(&m0, "spanset_member_writes_total");
    let _ = run.kill().await;
    drop(sim);

    // Pass 2: the same with the controller in this process, whose live heap is counted.
    let sim = sim_process(&members).await;
    let opts = RunOptions {
        kubeconfig: Some(sim.kubeconfig.clone()),
        context: Some("host".into()),
        metrics_addr: "127.0.0.1:0".parse().expect("address"),
        lease: Some(LeaseSettings::new("default", "spanset-leader", "bench")),
        bounds: Default::default(),
        shards: 1,
    };
    let running = app::start(opts).await.expect("controller starts");
    wait_leading(running.metrics_addr).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let heap_before = live();
    create_federations(&sim.host, &members).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let heap_after = live();

    // The watchers' caches alone: the members' real objects filed into fresh caches.
    let mut pods = Vec::new();
    let mut sets = Vec::new();
    for m in &members {
        let c = client(&sim.kubeconfig, m).await;
        let lp = ListParams::default().labels(FEDERATION);
        pods.push(Api::<Pod>::all(c.clone()).list(&lp).await.expect("pods").items);
        let apps_v1 = spanset_controller::member::workload::api_resource(Backend::StatefulSet);
        sets.push(Api::<DynamicObject>::all_with(c, &apps_v1).list(&lp).await.expect("sts").items);
    }
    let objects: usize = pods.iter().map(Vec::len).sum::<usize>() + sets.iter().map(Vec::len).sum::<usize>();
    let pod_count: usize = pods.iter().map(Vec::len).sum();
    let cache_before = live();
    let mut caches: Vec<MemberCache> = Vec::new();
    for (p, s) in pods.iter().zip(&sets) {
        let mut cache = MemberCache::default();
        for sts in s {
            cache.sts_applied(sts, Backend::StatefulSet);
        }
        for pod in p {
            cache.pod_applied(pod);
        }
        caches.push(cache);
    }
    let cache_bytes = live() - cache_before;
    // What the coordinators hold besides: each federation's record per member, shared with the
    // watcher (a copy is made only when the watcher changes a record a report still holds).
    let copies: Vec<Vec<std::sync::Arc<FederationCache>>> =
        caches.iter().map(|c| c.federations.values().cloned().collect()).collect();
    let copy_bytes = live() - cache_before - cache_bytes;
    drop(copies);
    drop(caches);
    let per = cache_bytes as f64 / objects as f64;
    report.add(
        "4b. Memory per cached member object (watcher cache, live heap)",
        format!(
            "{per:.0} B ({:.2} MiB for {objects} objects: {pod_count} pods, {} StatefulSets; {:.0} B with the \
             coordinators' copies)",
            cache_bytes as f64 / MIB,
            objects - pod_count,
            (cache_bytes + copy_bytes) as f64 / objects as f64
        ),
        "≤ 2 KiB",
        Some(per <= 2048.0),
    );
    let heap_grown = heap_after - heap_before;
    report.add(
        "4c. Controller live heap growth for 100 federations × 10 replicas over 10 members",
        format!(
            "{:.1} MiB, {:.0} B per member object (everything: caches, coordinators, federations, connections)",
            heap_grown as f64 / MIB,
            heap_grown as f64 / objects as f64
        ),
        "-",
        None,
    );
    let grown = after.saturating_sub(before);
    report.add(
        "4d. `spanset run` RSS, 100 federations × 10 replicas over 10 members",
        format!(
            "{:.1} MiB (idle, 10 members, no federation: {:.1} MiB; growth {:.1} MiB = {:.0} B per member object; \
             settled {:.1} s after creation; {fds} open file descriptors then)",
            after as f64 / MIB,
            before as f64 / MIB,
            grown as f64 / MIB,
            grown as f64 / objects as f64,
            settle.as_secs_f64()
        ),
        "-",
        None,
    );
    report.add(
        "4e. `spanset run` idle with those 100 federations settled",
        format!(
            "{:.1}% of one core, {:.0} reconciles/s, {writes:.0} member writes (over {window:.0} s)",
            (cpu1 - cpu0) / window * 100.0,
            reconciles / window
        ),
        "-",
        None,
    );
    running.stop().await;
    drop(sim);
}

fn main() {
    // `cargo bench` passes `--bench`; other arguments name sections.
    let wanted: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let run = |s: &str| wanted.is_empty() || wanted.iter().any(|w| w == s);
    let seen = Arc::new(Seen::default());
    let counted = tracing_subscriber::filter::Targets::new()
        .with_target("spanset_sim::api::handlers", tracing::Level::DEBUG)
        .with_target("spanset_controller::actors::coordinator", tracing::Level::INFO);
    // What is printed to stderr: errors, or `BENCH_LOG` (e.g. `spanset_controller=debug`).
    let printed: tracing_subscriber::filter::Targets = std::env::var("BENCH_LOG")
        .ok()
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| tracing_subscriber::filter::Targets::new().with_default(tracing::Level::ERROR));
    tracing_subscriber::registry()
        .with(Counting(seen.clone()).with_filter(counted))
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(printed))
        .init();
    let started = Instant::now();
    actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
    })
    .block_on(async move {
        let mut report = Report::default();
        if run("federation") {
            federation_figures(&seen, &mut report).await;
        }
        if run("migration") {
            migration_figures(&seen, &mut report).await;
        }
        if run("memory") {
            memory_figures(&mut report).await;
        }
        report.print_table();
        println!("\n(benchmark ran {:.0} s; time_factor {TIME_FACTOR})", started.elapsed().as_secs_f64());
    });
}
