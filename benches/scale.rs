//! Scale figures: one controller over M members × F federations of 10 replicas. Run with
//! `cargo bench --bench scale`; `SCALE_MEMBERS=10,30` and `SCALE_FEDERATIONS=100,300` pick
//! cells of the grid (default: members 10, 30, 100 × federations 100, 300, 1000),
//! `SCALE_IDLE_SECS` sets the idle window (default 20), `SCALE_CHANGES` the spec changes
//! timed (default 30), `SCALE_KEEP_LOGS` keeps every cell's logs (a failed cell's always) and
//! `SCALE_RUST_LOG` sets the controllers' `RUST_LOG` (default `warn`), `SCALE_CTL_WRAP` a command to run
//! them under (`heaptrack -o FILE`: a heap profile; the process figures are then the wrapper's).
//!
//! Each cell runs the sandbox as a `spanset sim` process (`--time-factor 0.01 --nodes 1`) and
//! the controller as a `spanset run` process, so that their CPU, memory and descriptors are
//! measured apart and apart from this process's watches. Per cell, in order: converge from
//! nothing, the idle controller (CPU, reconciles/s, member writes), its RSS and open
//! descriptors (TCP sockets by member), spec change → every member written (p50/p99), a hung
//! member's detection (and its return), and fence → every re-homing write issued. One line per
//! figure as it comes (progress on stderr), then a markdown table and the targets spanset is
//! held to at 100 × 1000 (idle CPU, memory, write latency, detection, re-homing). A phase that
//! times out ends its cell, which says what it waited for; the grid goes on.
//!
//! `SCALE_REPLICAS=1,2,4` measures sharding instead: for each count, that many `spanset run
//! --shards 4` replicas over the first cell of the grid (set `SCALE_MEMBERS` and
//! `SCALE_FEDERATIONS` to one value each), with converge from nothing and a burst of every
//! federation's template changed at once → every member written, as throughput.

mod support;

#[path = "scale/phases.rs"]
mod phases;
#[path = "scale/processes.rs"]
mod processes;
#[path = "scale/procfs.rs"]
mod procfs;
#[path = "scale/watches.rs"]
mod watches;

use std::time::{Duration, Instant};

use phases::{Fenced, Idle, Resources};
use processes::{SimProcess, TIME_FACTOR, start_controllers, start_sharded, wait_leader, wait_shards_led};
use support::{DEADLINE, client};
use watches::MemberWatches;

const MIB: f64 = 1048576.0;

/// One cell of the grid.
#[derive(Debug, Clone, Copy)]
struct Cell {
    members: usize,
    federations: usize,
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}×{}", self.members, self.federations)
    }
}

/// A comma-separated list of numbers from the environment, or `default`.
fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(v) => {
            v.split(',').map(|x| x.trim().parse().unwrap_or_else(|_| panic!("{name}: not a number: {x:?}"))).collect()
        }
        Err(_) => default.to_vec(),
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The cells asked for, smallest first.
fn grid() -> Vec<Cell> {
    let members = env_list("SCALE_MEMBERS", &[10, 30, 100]);
    let federations = env_list("SCALE_FEDERATIONS", &[100, 300, 1000]);
    let mut cells: Vec<Cell> =
        members.iter().flat_map(|&m| federations.iter().map(move |&f| Cell { members: m, federations: f })).collect();
    cells.sort_by_key(|c| (c.members * c.federations, c.members));
    cells
}

/// What one cell measured; a phase that did not finish leaves its figure and those after it
/// empty, and says why in `problem`.
#[derive(Default)]
struct Figures {
    converge: Option<Duration>,
    rss_empty: Option<u64>,
    idle: Option<Idle>,
    resources: Option<Resources>,
    spec: Option<Vec<Duration>>,
    detection: Option<(Duration, Duration)>,
    fence: Option<Fenced>,
    problem: Option<String>,
    took: Duration,
}

/// Runs one cell; never panics on a timeout.
async fn run_cell(cell: Cell) -> Figures {
    let mut fig = Figures::default();
    let start = Instant::now();
    eprintln!("== cell {cell}: {} members, {} federations of {}", cell.members, cell.federations, phases::REPLICAS);
    if let Err(what) = measure(cell, &mut fig).await {
        println!("{cell}: TIMED OUT or failed waiting for: {what}");
        fig.problem = Some(what);
    }
    fig.took = start.elapsed();
    eprintln!("== cell {cell} done in {:.0} s", fig.took.as_secs_f64());
    fig
}

/// Starts the cell's sandbox and measures; keeps its logs when a phase fails or
/// `SCALE_KEEP_LOGS` is set.
async fn measure(cell: Cell, fig: &mut Figures) -> Result<(), String> {
    let members: Vec<String> = (0..cell.members).map(|i| format!("m{i}")).collect();
    // Enough nodes per member for its pods (a simulated node has a /24 of pod addresses: with
    // one node, 300 federations over 10 members stalled at 253 running pods a member), with
    // room to spare for a fenced member's ordinals.
    let pods_per_member = cell.federations * 10 / cell.members;
    let nodes = (pods_per_member * 2).div_ceil(100).max(1);
    let mut sim = SimProcess::start(&members, nodes).await?;
    eprintln!("    sandbox up (pid {}, logs in {})", sim.pid(), sim.dir().display());
    let result = phases_of(cell, &sim, &members, fig).await;
    if result.is_err() || std::env::var_os("SCALE_KEEP_LOGS").is_some() {
        let dir = sim.keep_logs();
        eprintln!("    logs kept in {}", dir.display());
        return result.map_err(|what| format!("{what} (logs in {})", dir.display()));
    }
    result
}

/// The phases of a cell, filling `fig` as they finish.
async fn phases_of(cell: Cell, sim: &SimProcess, members: &[String], fig: &mut Figures) -> Result<(), String> {
    let controllers = start_controllers(sim, 1)?;
    let ctrl = wait_leader(&controllers, DEADLINE).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    fig.rss_empty = Some(procfs::rss_bytes(ctrl.pid()));
    let mut clients = Vec::with_capacity(members.len());
    for m in members {
        clients.push(client(&sim.kubeconfig, m).await);
    }
    let watches = MemberWatches::start(clients);

    let took = phases::converge(&sim.host, members, cell.federations).await?;
    println!("{cell}: converge {:.1} s", took.as_secs_f64());
    fig.converge = Some(took);

    let window = Duration::from_secs(env_number("SCALE_IDLE_SECS", 20).max(20));
    let idle = phases::idle(ctrl, sim, window).await;
    println!(
        "{cell}: idle {:.1}% of one core, {:.1} reconciles/s, {:.0} member writes over {:.0} s (sandbox {:.1}% of one core)",
        idle.cpu,
        idle.reconciles,
        idle.writes,
        idle.window.as_secs_f64(),
        idle.sim_cpu
    );
    fig.idle = Some(idle);

    let res = phases::resources(ctrl, sim, members);
    println!(
        "{cell}: RSS {:.1} MiB (no federation: {:.1} MiB), {} open fds; TCP sockets per member {:.1} mean, {} max; to the host {}; other sockets {}",
        res.rss as f64 / MIB,
        fig.rss_empty.unwrap_or(0) as f64 / MIB,
        res.fds,
        res.mean_per_member(),
        res.max_per_member(),
        res.host,
        res.other_sockets
    );
    fig.resources = Some(res);

    let samples = env_number("SCALE_CHANGES", 30).max(30) as usize;
    let spec = phases::spec_changes(&sim.host, &watches, cell.federations, samples).await?;
    println!(
        "{cell}: spec change → every member written p50 {} p99 {} max {} over {} changes",
        ms(percentile(&spec, 0.5)),
        ms(percentile(&spec, 0.99)),
        ms(*spec.last().expect("samples")),
        spec.len()
    );
    fig.spec = Some(spec);

    let lost = members.last().expect("members");
    let (detected, back) = phases::detection(sim, &sim.host, lost).await?;
    println!(
        "{cell}: {lost} hung → Reachable=False in {:.1} s; healed → True in {:.1} s",
        detected.as_secs_f64(),
        back.as_secs_f64()
    );
    fig.detection = Some((detected, back));

    let fenced = phases::fence(sim, &sim.host, &watches, members, 0).await?;
    println!(
        "{cell}: m0 powered off and refused → Reachable=False in {:.1} s; fence → every re-homing write seen in {} ({} federations)",
        fenced.detected.as_secs_f64(),
        ms(fenced.writes),
        fenced.federations
    );
    fig.fence = Some(fenced);
    drop(watches);
    drop(controllers);
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

// ---------------------------------------------------------------------------------------------
// The report.

/// A figure, or `-` when its phase did not run.
fn show<T>(v: Option<&T>, f: impl Fn(&T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

fn print_table(results: &[(Cell, Figures)]) {
    println!();
    println!(
        "| members × federations | converge | idle CPU | idle reconciles/s | idle member writes | RSS | open fds | \
         sockets per member (mean / max) | spec change → written p50 / p99 | detection (hang) | fence → re-homing writes | |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (cell, f) in results {
        println!(
            "| {cell} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            show(f.converge.as_ref(), |d| format!("{:.1} s", d.as_secs_f64())),
            show(f.idle.as_ref(), |i| format!("{:.1}%", i.cpu)),
            show(f.idle.as_ref(), |i| format!("{:.1}", i.reconciles)),
            show(f.idle.as_ref(), |i| format!("{:.0} in {:.0} s", i.writes, i.window.as_secs_f64())),
            show(f.resources.as_ref(), |r| format!("{:.0} MiB", r.rss as f64 / MIB)),
            show(f.resources.as_ref(), |r| r.fds.to_string()),
            show(f.resources.as_ref(), |r| format!("{:.1} / {}", r.mean_per_member(), r.max_per_member())),
            show(f.spec.as_ref(), |s| format!("{} / {}", ms(percentile(s, 0.5)), ms(percentile(s, 0.99)))),
            show(f.detection.as_ref(), |d| format!("{:.1} s", d.0.as_secs_f64())),
            show(f.fence.as_ref(), |x| format!("{} ({} feds)", ms(x.writes), x.federations)),
            f.problem.as_deref().map(|p| format!("timed out: {p}")).unwrap_or_default(),
        );
    }
}

/// The targets spanset is held to at 100 members × 1000 federations, PASS/MISS each.
fn print_targets(results: &[(Cell, Figures)]) {
    println!();
    let Some((_, f)) = results.iter().find(|(c, _)| c.members == 100 && c.federations == 1000) else {
        println!("Targets at 100 × 1000: not measured (cell not in this run)");
        return;
    };
    let verdict = |met: Option<bool>| match met {
        Some(true) => "PASS",
        Some(false) => "MISS",
        None => "not measured",
    };
    let targets = [
        ("idle < 2% of one core", f.idle.as_ref().map(|i| i.cpu < 2.0)),
        ("RSS < 512 MiB", f.resources.as_ref().map(|r| (r.rss as f64) < 512.0 * MIB)),
        ("spec change → written p99 ≤ 1 s", f.spec.as_ref().map(|s| percentile(s, 0.99) <= Duration::from_secs(1))),
        ("detection ≤ 15 s", f.detection.as_ref().map(|d| d.0 <= Duration::from_secs(15))),
        ("fence → re-homing writes ≤ 5 s", f.fence.as_ref().map(|x| x.writes <= Duration::from_secs(5))),
    ];
    println!("Targets at 100 members × 1000 federations:");
    for (what, met) in targets {
        println!("- {what}: {}", verdict(met));
    }
}

// ---------------------------------------------------------------------------------------------
// Sharding: throughput with 1, 2, 4 replicas.

/// Shards the replicas divide federations into, whatever their number.
const SHARDS: u32 = 4;

/// Converge and burst with `replicas` sharded controllers over `cell`.
async fn replicas_cell(cell: Cell, replicas: usize) -> Result<(Duration, Duration), String> {
    let members: Vec<String> = (0..cell.members).map(|i| format!("m{i}")).collect();
    let nodes = (cell.federations * 10 / cell.members * 2).div_ceil(100).max(1);
    let sim = SimProcess::start(&members, nodes).await?;
    let controllers = start_sharded(&sim, replicas, SHARDS)?;
    wait_shards_led(&controllers, SHARDS, DEADLINE * 3).await?;
    let mut clients = Vec::with_capacity(members.len());
    for m in &members {
        clients.push(client(&sim.kubeconfig, m).await);
    }
    let watches = MemberWatches::start(clients);
    let converged = phases::converge(&sim.host, &members, cell.federations).await?;
    println!("{cell}, {replicas} replicas: converge {:.1} s", converged.as_secs_f64());
    let burst = phases::burst(&sim.host, &watches, cell.federations).await?;
    println!(
        "{cell}, {replicas} replicas: {} template changes → every member written in {:.1} s",
        cell.federations,
        burst.as_secs_f64()
    );
    drop(watches);
    drop(controllers);
    Ok((converged, burst))
}

async fn run_replicas(counts: &[usize]) {
    let cell = grid()[0];
    let mut rows = Vec::new();
    for &r in counts {
        eprintln!("== {cell} with {r} replicas over {SHARDS} shards");
        let res = replicas_cell(cell, r).await;
        if let Err(e) = &res {
            println!("{cell}, {r} replicas: TIMED OUT or failed waiting for: {e}");
        }
        rows.push((r, res));
    }
    println!();
    println!(
        "| replicas ({SHARDS} shards) | converge {cell} | federations/s | {} changes → all written | changes/s |",
        cell.federations
    );
    println!("|---|---|---|---|---|");
    for (r, res) in rows {
        match res {
            Ok((c, b)) => println!(
                "| {r} | {:.1} s | {:.1} | {:.1} s | {:.1} |",
                c.as_secs_f64(),
                cell.federations as f64 / c.as_secs_f64(),
                b.as_secs_f64(),
                cell.federations as f64 / b.as_secs_f64()
            ),
            Err(e) => println!("| {r} | - | - | - | - ({e}) |"),
        }
    }
}

fn main() {
    let started = Instant::now();
    actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
    })
    .block_on(async move {
        if std::env::var_os("SCALE_REPLICAS").is_some() {
            run_replicas(&env_list("SCALE_REPLICAS", &[1, 2, 4])).await;
            println!("\n(benchmark ran {:.0} s; time_factor {TIME_FACTOR})", started.elapsed().as_secs_f64());
            return;
        }
        let mut results = Vec::new();
        for cell in grid() {
            let figures = run_cell(cell).await;
            results.push((cell, figures));
        }
        print_table(&results);
        print_targets(&results);
        println!(
            "\n(benchmark ran {:.0} s; time_factor {TIME_FACTOR}; one controller process)",
            started.elapsed().as_secs_f64()
        );
    });
}
