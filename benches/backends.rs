//! The two backends on the same weight change (`cargo bench --bench backends`, under a
//! minute): 30 replicas over central, east and west (placement in that order, weights
//! 1:1:1, `maxConcurrentMoves` 1, the spec's default), then central's weight set to 0. For
//! apps/v1 StatefulSets and for Advanced StatefulSets, each on a fresh in-process sandbox
//! (time factor 0.01), it prints the ordinals that changed cluster, the pods of east and
//! west that were restarted or moved (neighbours), and the time from the spec change to the
//! federation settled again (median of the runs), then a markdown table.
//!
//! apps/v1 must keep each slice contiguous in placement order, so central's 10 ordinals reach
//! west through east, shifting 5 of east's; an Advanced StatefulSet takes each straight to
//! its new cluster and leaves every other pod running.

mod support;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use spanset::cli::sandbox::example;
use spanset_api::Backend;

use support::{Sandbox, wait_settled};

const TIME_FACTOR: f64 = 0.01;
const REPLICAS: i32 = 30;
const RUNS: usize = 3;
const MEMBERS: [&str; 3] = ["central", "east", "west"];

/// Every member's pods of `redis`: ordinal → (cluster, uid).
async fn pods(clients: &[(String, Client)]) -> BTreeMap<u32, (String, String)> {
    let mut out = BTreeMap::new();
    for (cluster, c) in clients {
        let api: Api<Pod> = Api::namespaced(c.clone(), "default");
        let lp = ListParams::default().labels("spanset.dev/federation=redis");
        for p in api.list(&lp).await.expect("pods listed").items {
            let Some(name) = p.metadata.name else { continue };
            let Some(k) = name.strip_prefix("redis-").and_then(|k| k.parse().ok()) else { continue };
            out.insert(k, (cluster.clone(), p.metadata.uid.unwrap_or_default()));
        }
    }
    out
}

/// One run: `(ordinals that changed cluster, neighbour pods restarted or moved, time to settle)`.
async fn run(backend: Backend) -> (usize, usize, Duration) {
    let members: Vec<String> = MEMBERS.iter().map(|m| m.to_string()).collect();
    let sb = Sandbox::start_with(&members, TIME_FACTOR, true, |n| n != "host").await;
    let _controller = sb.controller().await;
    let mut f = example(&members);
    f.spec.replicas = REPLICAS;
    f.spec.backend = backend;
    f.spec.template.volume_claim_templates.clear();
    let api = sb.fsts();
    api.create(&PostParams::default(), &f).await.expect("federation created");
    wait_settled(&api, "redis", REPLICAS, "placed in thirds").await;
    let mut clients = Vec::new();
    for m in &members {
        clients.push((m.clone(), sb.client(m).await));
    }
    let before = pods(&clients).await;

    let weights = json!({"spec": {"placement": {"clusters": [
        {"name": "central", "weight": 0}, {"name": "east", "weight": 1}, {"name": "west", "weight": 1}]}}});
    let t0 = Instant::now();
    api.patch("redis", &PatchParams::default(), &Patch::Merge(&weights)).await.expect("weights patched");
    wait_settled(&api, "redis", REPLICAS, "central emptied").await;
    let took = t0.elapsed();

    let after = pods(&clients).await;
    let moved = after.iter().filter(|(k, (c, _))| before.get(k).is_none_or(|(b, _)| b != c)).count();
    let neighbours = before
        .iter()
        .filter(|(_, (c, _))| c != "central")
        .filter(|(k, (c, uid))| after.get(k) != Some(&(c.clone(), uid.clone())))
        .count();
    (moved, neighbours, took)
}

fn main() {
    actix::System::with_tokio_rt(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime"))
        .block_on(figures());
}

async fn figures() {
    let mut rows = Vec::new();
    for (label, backend) in
        [("apps/v1 StatefulSet", Backend::StatefulSet), ("Advanced StatefulSet", Backend::AdvancedStatefulSet)]
    {
        let mut times = Vec::new();
        let mut counts = None;
        for i in 0..RUNS {
            let (moved, neighbours, took) = run(backend).await;
            println!(
                "{label} run {}: {moved} ordinals changed cluster, {neighbours} neighbour pods restarted or moved, settled in {:.2} s",
                i + 1,
                took.as_secs_f64()
            );
            counts = Some((moved, neighbours));
            times.push(took);
        }
        times.sort();
        let (moved, neighbours) = counts.expect("at least one run");
        rows.push((label, moved, neighbours, times[times.len() / 2]));
    }
    println!();
    println!(
        "central's weight 1 → 0, {REPLICAS} replicas over central, east, west (time factor {TIME_FACTOR}, median of {RUNS}):"
    );
    println!();
    println!("| backend | ordinals moved | neighbour pods restarted | time to settle | in simulated time |");
    println!("|---|---|---|---|---|");
    for (label, moved, neighbours, took) in rows {
        let secs = took.as_secs_f64();
        println!("| {label} | {moved} | {neighbours} | {secs:.2} s | {:.0} s |", secs / TIME_FACTOR);
    }
}
