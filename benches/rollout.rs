//! One rollout across three clusters, timed (`cargo bench --bench rollout`, under a minute):
//! for N in {3, 6, 12} replicas at weights 1:1:1 over east, west and central (fresh in-process
//! sandbox per N, time factor 0.01 as every bench, `maxUnavailable` 1, the controller in this
//! process), three template changes in a row, each timed from the patch to `Updating=False` at
//! the new revision. Against it:
//!
//! - the **floor**: N × one pod's replacement by the sandbox alone — graceful shutdown, the
//!   member StatefulSet controller's recreation, scheduling and start, Ready — measured (p50)
//!   from the ledger's runs and watches of the members; what any controller replacing one pod
//!   at a time must wait (the configured delays are 10 ms each; the kubelets act in sweeps);
//! - **spanset's share per step**, in its two parts: from pod k+1's successor becoming Ready
//!   (ledger) to pod k's deletion (seen on a watch of its member) — noticing the Ready pod,
//!   storing the rollout's cursor, writing the member's partition, and the member's StatefulSet
//!   controller acting on it — and the release of the successor's identity gate (created →
//!   ungated, on the watch). The first part is also given as the ledger alone sees it (to the
//!   end of pod k's old run, which adds its graceful shutdown).
//!
//! Prints one block per N, then a markdown table (p50 and max over the steps of all runs), and
//! asserts the ledger clean.

mod support;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;
use spanset::cli::sandbox::example;
use spanset_api::FederatedStatefulSet;
use spanset_sim::cluster::ClusterConfig;

use support::{DEADLINE, Sandbox, wait_settled};

const TIME_FACTOR: f64 = 0.01;
const SIZES: [i32; 3] = [3, 6, 12];
/// Template changes per size.
const RUNS: usize = 3;
const MEMBERS: [&str; 3] = ["east", "west", "central"];
/// The images the runs alternate between.
const IMAGES: [&str; 2] = ["redis:8", "redis:7"];

/// What the watches of the members saw of one pod (by uid), each the first moment seen.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    created: Option<Timestamp>,
    released: Option<Timestamp>,
    deleted: Option<Timestamp>,
}

/// Every pod of the federation seen, by uid.
type Pods = Arc<Mutex<BTreeMap<String, Seen>>>;

fn main() {
    actix::System::with_tokio_rt(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime"))
        .block_on(figures());
}

/// One size's figures, in milliseconds.
#[derive(Default)]
struct Figures {
    rollouts: Vec<f64>,
    replacements: Vec<f64>,
    shares: Vec<f64>,
    shares_to_run_end: Vec<f64>,
    first_deletions: Vec<f64>,
    /// spanset's time per step: Ready → next deletion, plus the successor's identity gate.
    spanset: Vec<f64>,
    /// One replacement's phases: shutdown, recreation, identity gate, start, ready.
    phases: [Vec<f64>; 5],
}

/// The phases of one pod's replacement, and who acts in each.
const PHASES: [&str; 5] = [
    "graceful shutdown (member kubelet)",
    "old pod gone → successor created (member StatefulSet controller)",
    "identity gate released (spanset)",
    "gate released → running (member scheduler, kubelet)",
    "running → Ready (member kubelet)",
];

async fn figures() {
    let config = ClusterConfig::named("any");
    let configured = (config.container_shutdown + config.pod_start_delay + config.pod_ready_delay).mul_f64(TIME_FACTOR);
    let mut rows = Vec::new();
    for n in SIZES {
        let f = size(n).await;
        println!("N = {n} over {MEMBERS:?} (time factor {TIME_FACTOR}, {RUNS} rollouts):");
        println!("  rollout (patch → Updating=False): {}", summary(&f.rollouts));
        println!("  replacement per pod (deletion → successor Ready): {}", summary(&f.replacements));
        for (name, samples) in PHASES.iter().zip(&f.phases) {
            println!("    {name}: {}", summary(samples));
        }
        println!("  sandbox's own part of a replacement (all but the gate): {:.1} ms p50", sandbox_part(&f));
        println!("  spanset per step (Ready → next deletion, + its gate): {}", summary(&f.spanset));
        println!("  controller share per step (pod Ready → next deletion): {}", summary(&f.shares));
        println!("  same, ledger only (pod Ready → next old run's end): {}", summary(&f.shares_to_run_end));
        println!("  patch → first deletion: {}", summary(&f.first_deletions));
        rows.push((n, f));
    }
    println!();
    println!("Floor: N × the sandbox's own replacement time (its shutdown, recreation, start and ready, measured;");
    println!("configured: {:.0} ms; its kubelets act in sweeps 20 ms apart).", ms(configured));
    println!(
        "| N | rollout p50 | floor | rollout − floor | spanset per step p50 / max | of which Ready → next deletion p50 / max | of which identity gate p50 / max |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (n, f) in &rows {
        let floor = *n as f64 * sandbox_part(f);
        let rollout = p(&f.rollouts, 0.5);
        println!(
            "| {n} | {rollout:.0} ms | {floor:.0} ms | {:.0} ms | {:.0} / {:.0} ms | {:.0} / {:.0} ms | {:.0} / {:.0} ms |",
            rollout - floor,
            p(&f.spanset, 0.5),
            p(&f.spanset, 1.0),
            p(&f.shares, 0.5),
            p(&f.shares, 1.0),
            p(&f.phases[2], 0.5),
            p(&f.phases[2], 1.0),
        );
    }
    let p50 = rows.iter().map(|(_, f)| p(&f.shares, 0.5)).fold(0.0, f64::max);
    let max = rows.iter().map(|(_, f)| p(&f.shares, 1.0)).fold(0.0, f64::max);
    let verdict = match (p50 <= 100.0, max <= 100.0) {
        (true, true) => "met",
        (true, false) => "met at p50, not at max",
        _ => "MISSED",
    };
    println!(
        "\ncontroller share per step (Ready → next deletion): p50 ≤ {p50:.0} ms, max {max:.0} ms (target ≤ 100 ms: {verdict})"
    );
}

/// The p50 of the phases of a replacement the sandbox spends by itself (all but the gate).
fn sandbox_part(f: &Figures) -> f64 {
    [0, 1, 3, 4].iter().map(|i| p(&f.phases[*i], 0.5)).sum()
}

/// A fresh sandbox with N replicas settled, then [`RUNS`] template changes.
async fn size(n: i32) -> Figures {
    let members: Vec<String> = MEMBERS.iter().map(|m| m.to_string()).collect();
    let sb = Sandbox::start(&members, TIME_FACTOR, true).await;
    let _controller = sb.controller().await;
    let mut fsts = example(&members);
    fsts.spec.replicas = n;
    fsts.spec.template.volume_claim_templates.clear();
    let api = sb.fsts();
    api.create(&PostParams::default(), &fsts).await.expect("federation created");
    wait_settled(&api, "redis", n, "placed in thirds").await;
    let seen: Pods = Arc::default();
    let mut watches = Vec::new();
    for m in &members {
        watches.push(watch_pods(Api::namespaced(sb.client(m).await, "default"), seen.clone()));
    }
    let mut out = Figures::default();
    for run in 0..RUNS {
        let image = IMAGES[run % IMAGES.len()];
        let t0 = Timestamp::now();
        let took = roll(&api, image).await;
        out.rollouts.push(took.as_secs_f64() * 1e3);
        steps(&sb, &seen, n as u32, image, t0, &mut out);
    }
    // Before the sandbox goes: a watch of a server that is gone would retry for ever.
    watches.iter().for_each(|w| w.abort());
    let overlaps = sb.fleet.ledger.overlaps();
    assert!(overlaps.is_empty(), "the at-most-one rule broke: {overlaps:?}");
    out
}

/// Records, per pod uid, when its member first shows it, without spanset's identity gate, and
/// being deleted.
fn watch_pods(pods: Api<Pod>, into: Pods) -> tokio::task::JoinHandle<()> {
    let config = watcher::Config::default().labels("spanset.dev/federation=redis");
    tokio::spawn(async move {
        let mut events = watcher(pods, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let now = Timestamp::now();
            let (pod, gone) = match event {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => (p, false),
                Ok(watcher::Event::Delete(p)) => (p, true),
                _ => continue,
            };
            let Some(uid) = pod.metadata.uid.clone() else { continue };
            let gated = pod.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty());
            let mut all = into.lock().unwrap();
            let seen = all.entry(uid).or_default();
            seen.created.get_or_insert(now);
            if !gated {
                seen.released.get_or_insert(now);
            }
            if gone || pod.metadata.deletion_timestamp.is_some() {
                seen.deleted.get_or_insert(now);
            }
        }
    })
}

/// Patches the template's image and waits for `Updating=False` at the new revision; answers
/// the time it took.
async fn roll(api: &Api<FederatedStatefulSet>, image: &str) -> Duration {
    let mut fsts = api.get("redis").await.expect("federation read");
    let before = fsts.status.as_ref().and_then(|s| s.update_revision.clone());
    let pod = fsts.spec.template.template.spec.as_mut().expect("a pod spec");
    pod.containers[0].image = Some(image.into());
    let body = json!({"spec": {"template": fsts.spec.template}});
    let start = Instant::now();
    api.patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("template patched");
    loop {
        let f = api.get("redis").await.expect("federation read");
        let s = f.status.clone().unwrap_or_default();
        let updated = s.observed_generation == f.metadata.generation
            && s.update_revision.is_some()
            && s.update_revision != before
            && s.current_revision == s.update_revision
            && s.conditions.iter().any(|c| c.type_ == "Updating" && c.status == "False");
        if updated {
            return start.elapsed();
        }
        assert!(start.elapsed() < DEADLINE, "rollout to {image} did not finish: {s:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The per-pod and per-step figures of the rollout to `image` that started at `t0`, from the
/// ledger and what the watches saw.
fn steps(sb: &Sandbox, seen: &Pods, n: u32, image: &str, t0: Timestamp, out: &mut Figures) {
    let seen = seen.lock().unwrap().clone();
    // Per ordinal: the old run (uid, end) and the successor (uid, run start, first Ready).
    let mut old: BTreeMap<u32, (String, Timestamp)> = BTreeMap::new();
    let mut new: BTreeMap<u32, (String, Timestamp, Timestamp)> = BTreeMap::new();
    for i in sb.fleet.ledger.entries() {
        let Some(k) = i.identity.as_ref().filter(|id| id.statefulset == "redis").map(|id| id.ordinal) else { continue };
        if let Some(end) = i.running_until.filter(|u| i.running_from < t0 && *u >= t0) {
            old.insert(k, (i.uid.clone(), end));
        }
        if i.running_from >= t0 && i.images.iter().any(|im| im.ends_with(image)) && !new.contains_key(&k) {
            let ready = i.ready_periods.first().map(|p| p.from).expect("the successor became Ready");
            new.insert(k, (i.uid.clone(), i.running_from, ready));
        }
    }
    let gap = |a: Timestamp, b: Timestamp| b.duration_since(a).as_secs_f64() * 1e3;
    for k in 0..n {
        let ((old_uid, old_end), (new_uid, started, ready)) = match (old.get(&k), new.get(&k)) {
            (Some(o), Some(n)) => (o.clone(), n.clone()),
            _ => panic!("ordinal {k}: no replaced run and successor in the ledger for {image}"),
        };
        let deleted = seen.get(&old_uid).and_then(|s| s.deleted).expect("the old pod's deletion seen");
        let successor = seen.get(&new_uid).copied().unwrap_or_default();
        let (created, released) = (successor.created.expect("successor seen"), successor.released.expect("released"));
        out.replacements.push(gap(deleted, ready));
        out.phases[0].push(gap(deleted, old_end));
        out.phases[1].push(gap(old_end, created));
        out.phases[2].push(gap(created, released));
        out.phases[3].push(gap(released, started));
        out.phases[4].push(gap(started, ready));
        if k + 1 == n {
            out.first_deletions.push(gap(t0, deleted));
        } else {
            let next_ready = new[&(k + 1)].2;
            out.shares.push(gap(next_ready, deleted));
            out.spanset.push(gap(next_ready, deleted) + gap(created, released));
            out.shares_to_run_end.push(gap(next_ready, old_end));
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Nearest-rank percentile (`q` in 0..=1) of unsorted samples.
fn p(samples: &[f64], q: f64) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

fn summary(samples: &[f64]) -> String {
    format!("p50 {:.1} ms, max {:.1} ms ({} samples)", p(samples, 0.5), p(samples, 1.0), samples.len())
}
