//! The cost of a migration (`cargo bench --bench migration_cost`, about a minute): the README
//! demo's federation (`redis`, 6 replicas, weights east:west:central 1:1:1, `storage` left at
//! its default, Detached) moved entirely to east (1:0:0) and back (1:1:1), on an in-process
//! sandbox at time factor 0.1 with the controller in this process. For each moved ordinal it
//! prints what the sandbox's resource account saw during its move, over every cluster:
//! spanset's writes (creates, updates, status updates, deletes), the Events written (of every
//! source), volumes provisioned and turned Released, the volumes left Released once it is done,
//! and the move's time (from its first appearance in the federation's status to its end).
//! Then each phase's totals: spanset's writes by resource and the Events by reason.
//!
//! Moves run one at a time (the default `maxConcurrentMoves`), so each move's window holds its
//! own writes; the phase's total also holds what happens between moves.

mod support;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use kube::api::{Patch, PatchParams, PostParams};
use spanset::cli::sandbox::example;
use spanset_api::FederatedStatefulSet;
use spanset_sim::store::account::report::{AccountReport, WriteCounts};

use support::{Sandbox, settled, wait_settled};

const TIME_FACTOR: f64 = 0.1;
const MEMBERS: [&str; 3] = ["east", "west", "central"];
/// How long one phase may take before the bench reports it unfinished.
const PHASE_DEADLINE: Duration = Duration::from_secs(240);

fn main() {
    actix::System::with_tokio_rt(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime"))
        .block_on(figures());
}

/// Every cluster's account now, read straight from the in-process clusters.
fn snapshot(sb: &Sandbox) -> AccountReport {
    AccountReport {
        clusters: sb
            .fleet
            .servers
            .iter()
            .map(|s| (s.cluster.config.name.clone(), s.cluster.account_report()))
            .collect(),
    }
}

/// What one window cost, summed over the clusters.
#[derive(Default)]
struct Cost {
    spanset: WriteCounts,
    events: u64,
    provisioned: u64,
    released: u64,
    left_released: u64,
    by_resource: BTreeMap<String, WriteCounts>,
    by_reason: BTreeMap<String, u64>,
}

fn cost(before: &AccountReport, after: &AccountReport) -> Cost {
    let mut c = Cost::default();
    for a in after.since(before).clusters.values() {
        let s = a.by_actor("spanset");
        c.spanset.created += s.created;
        c.spanset.updated += s.updated;
        c.spanset.status_updated += s.status_updated;
        c.spanset.deleted += s.deleted;
        c.events += a.events_created();
        c.provisioned += a.provisioned();
        c.released += a.released();
        c.left_released += a.left("Released");
        for (resource, w) in a.writes.get("spanset").into_iter().flatten() {
            let into = c.by_resource.entry(resource.clone()).or_default();
            into.created += w.created;
            into.updated += w.updated;
            into.status_updated += w.status_updated;
            into.deleted += w.deleted;
        }
        for (reason, e) in &a.events {
            *c.by_reason.entry(reason.clone()).or_default() += e.created;
        }
    }
    c
}

fn row(label: &str, seconds: f64, c: &Cost) -> String {
    let s = &c.spanset;
    format!(
        "{label:<26} {seconds:>7.1}s {:>7} {:>4}/{:>4}/{:>4}/{:>4} {:>7} {:>12} {:>9} {:>14}",
        s.writes(),
        s.created,
        s.updated,
        s.status_updated,
        s.deleted,
        c.events,
        c.provisioned,
        c.released,
        c.left_released
    )
}

const HEADER: &str =
    "MOVE                          TIME  SPANSET  C/U/S/D writes      EVENTS  PROVISIONED  RELEASED  LEFT RELEASED";

/// The move under way, as the status shows it: `ordinal from→to`.
fn current_move(f: &FederatedStatefulSet) -> Option<String> {
    let m = f.status.as_ref()?.moves.first()?;
    Some(format!("ordinal {} {}→{}", m.ordinal, m.from, m.to))
}

/// Applies `weights` and follows the moves until the federation settles; prints a row per move
/// and the phase's totals.
async fn phase(sb: &Sandbox, title: &str, weights: [i64; 3]) {
    let api = sb.fsts();
    let clusters: Vec<serde_json::Value> =
        MEMBERS.iter().zip(weights).map(|(m, w)| serde_json::json!({"name": m, "weight": w})).collect();
    let start_account = snapshot(sb);
    let start = Instant::now();
    let body = serde_json::json!({"spec": {"placement": {"clusters": clusters}}});
    api.patch("redis", &PatchParams::default(), &Patch::Merge(body)).await.expect("weights patched");
    println!("\n{title} (weights {}):", weights.map(|w| w.to_string()).join(":"));
    println!("{HEADER}");
    let mut open: Option<(String, Instant, AccountReport)> = None;
    let mut moves = 0;
    let finished = loop {
        let f = api.get("redis").await.ok();
        let now_move = f.as_ref().and_then(current_move);
        if open.as_ref().map(|o| &o.0) != now_move.as_ref() {
            let now = snapshot(sb);
            if let Some((label, since, before)) = open.take() {
                println!("{}", row(&label, since.elapsed().as_secs_f64(), &cost(&before, &now)));
                moves += 1;
            }
            open = now_move.map(|m| (m, Instant::now(), now));
        }
        if open.is_none() && f.as_ref().is_some_and(|f| settled(f, 6)) {
            break true;
        }
        if start.elapsed() > PHASE_DEADLINE {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    if let Some((label, since, before)) = open {
        println!("{} (unfinished)", row(&label, since.elapsed().as_secs_f64(), &cost(&before, &snapshot(sb))));
    }
    let total = cost(&start_account, &snapshot(sb));
    let verdict = if finished { "settled" } else { "NOT SETTLED within the deadline" };
    println!("{}", row(&format!("phase: {moves} moves, {verdict}"), start.elapsed().as_secs_f64(), &total));
    if moves > 0 {
        let per = |n: u64| n as f64 / f64::from(moves);
        println!(
            "per moved ordinal: {:.1} spanset writes, {:.1} Events, {:.1} volumes provisioned, {:.1} released",
            per(total.spanset.writes()),
            per(total.events),
            per(total.provisioned),
            per(total.released)
        );
    }
    println!("spanset's writes by resource (created/updated/status/deleted):");
    for (resource, w) in total.by_resource.iter().filter(|(_, w)| w.writes() > 0) {
        println!("  {resource:<44} {}/{}/{}/{}", w.created, w.updated, w.status_updated, w.deleted);
    }
    println!("Events by reason:");
    for (reason, n) in total.by_reason.iter().filter(|(_, n)| **n > 0) {
        println!("  {reason:<44} {n}");
    }
}

async fn figures() {
    let members: Vec<String> = MEMBERS.iter().map(|s| s.to_string()).collect();
    let sb = Sandbox::start(&members, TIME_FACTOR, true).await;
    let running = sb.controller().await;
    let api = sb.fsts();
    api.create(&PostParams::default(), &example(&members)).await.expect("federation created");
    wait_settled(&api, "redis", 6, "redis settled over east, west and central").await;
    let settled_at = snapshot(&sb);
    let both = Instant::now();
    println!("migration cost: redis, 6 replicas over {MEMBERS:?}, storage Detached, time factor {TIME_FACTOR}");
    println!("(per move, over every cluster: spanset's writes C/U/S/D = created/updated/status/deleted;");
    println!(" Events of every source; volumes provisioned and turned Released; volumes Released at its end)");
    phase(&sb, "everything to east", [1, 0, 0]).await;
    phase(&sb, "back to 1:1:1", [1, 1, 1]).await;
    let end = snapshot(&sb);
    let whole = cost(&settled_at, &end);
    println!("\n{}", row("both phases", both.elapsed().as_secs_f64(), &whole));
    for (name, a) in &end.clusters {
        let phases: Vec<String> = a.volumes.by_phase.iter().map(|(p, n)| format!("{p} {n}")).collect();
        println!("  {name:<8} volumes now: {}", if phases.is_empty() { "none".into() } else { phases.join(", ") });
    }
    running.stop().await;
}
