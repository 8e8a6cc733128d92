//! `spanset drill evacuate CLUSTER --fsts NS/NAME`: a rehearsal of losing a member, done
//! safely on a healthy one. It sets the member's weight (and minReplicas) to 0, waits until
//! the controller has moved every ordinal out, restores the placement, waits until they are
//! back, and reports how long each ordinal was unavailable and the total time.
//!
//! An ordinal counts as unavailable while it is recorded in `status.moves` (from its release
//! in the source until its pod is Ready in the destination), as the controller stores it; the
//! drill polls the status every 100 ms, so figures are exact to about that. Progress goes to
//! stderr; the report to stdout as a table or, with `-o json` or `-o yaml`, as one document. Exit codes: 0
//! done, 1 refused or failed (the placement is restored when it was changed), 2 bad flags.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde::Serialize;
use serde_json::json;
use spanset_api::{FederatedStatefulSet, PlacementCluster};

#[cfg(feature = "sim")]
pub mod chaos;
#[cfg(feature = "sim")]
mod loss;
#[cfg(feature = "sim")]
pub mod picture;
#[cfg(feature = "sim")]
pub use chaos::{ChaosArgs, ChaosReport};
#[cfg(feature = "sim")]
pub use loss::{LossArgs, LossReport, cluster_loss};

/// One call of a sandbox's admin API (the sandbox drills'), off the async threads.
#[cfg(feature = "sim")]
async fn admin(url: &str, action: spanset_sim::cli::ctl::Action) -> Result<String, String> {
    let url = url.to_string();
    let (method, path) = spanset_sim::cli::ctl::route(&action);
    tokio::task::spawn_blocking(move || spanset_sim::cli::ctl::request(&url, method, &path))
        .await
        .map_err(|e| format!("admin request: {e}"))?
}

pub use super::output::Format;

/// Writes a sandbox drill's picture where `--report` asked (nothing without it); answers
/// whether all went well, having named the path on stderr either way.
#[cfg(feature = "sim")]
fn write_picture(drill: &str, path: Option<&std::path::Path>, render: impl FnOnce() -> String) -> bool {
    let Some(path) = path else { return true };
    match picture::write(path, &render()) {
        Ok(()) => {
            eprintln!("report: {}", path.display());
            true
        }
        Err(e) => {
            eprintln!("spanset: drill {drill}: {e}");
            false
        }
    }
}

/// Flags of `spanset drill`.
#[derive(Debug, clap::Args)]
pub struct DrillArgs {
    /// Which drill.
    #[command(subcommand)]
    pub drill: Drill,
}

/// The drills.
#[derive(Debug, clap::Subcommand)]
pub enum Drill {
    /// Move every ordinal out of a healthy member and back, timing each.
    Evacuate(EvacuateArgs),
    /// Sandbox only: kill a member for real (its nodes, then its API), fence it (Manual) or
    /// wait for the automatic fence, re-home, heal, check the shrink on return, unfence.
    #[cfg(feature = "sim")]
    ClusterLoss(LossArgs),
    /// Sandbox only: a seeded chaos soak (spec changes, member faults, controller kills and
    /// pauses), then heal, convergence, data markers and the ledger's verdict.
    #[cfg(feature = "sim")]
    Chaos(ChaosArgs),
}

/// Flags of `spanset drill evacuate`.
#[derive(Debug, clap::Args)]
pub struct EvacuateArgs {
    /// The member cluster to empty.
    pub cluster: String,
    /// The federation, the host and the report.
    #[command(flatten)]
    pub on: DrillOn,
}

/// Flags every drill takes: which federation in which host cluster, and how to report.
#[derive(Debug, clap::Args)]
pub struct DrillOn {
    /// The federation, `NAMESPACE/NAME` (or `NAME` in `default`).
    #[arg(long, value_name = "NS/NAME")]
    pub fsts: String,
    /// Report format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// Longest wait for each stage of the drill, in seconds.
    #[arg(long, default_value_t = 1800)]
    pub timeout: u64,
    /// Kubeconfig of the host cluster (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig (default: its current context).
    #[arg(long, value_name = "CTX")]
    pub context: Option<String>,
}

/// One ordinal's move in the report.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OrdinalReport {
    /// `out` or `back`.
    pub half: &'static str,
    /// The ordinal.
    pub ordinal: i32,
    /// Source member.
    pub from: String,
    /// Destination member.
    pub to: String,
    /// Seconds it was recorded as moving.
    pub unavailable_seconds: f64,
}

/// The drill's report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The federation.
    pub federation: String,
    /// The member emptied and refilled.
    pub cluster: String,
    /// Seconds until every ordinal was out and Ready elsewhere.
    pub out_seconds: f64,
    /// Seconds until every ordinal was back and Ready.
    pub back_seconds: f64,
    /// Total seconds.
    pub total_seconds: f64,
    /// The longest unavailability of one ordinal.
    pub max_unavailable_seconds: f64,
    /// Per ordinal and half.
    pub ordinals: Vec<OrdinalReport>,
}

/// Stores a drill's figures on the federation (annotation `spanset.dev/last-drill`), where the
/// controller exposes them as `spanset_drill_seconds`; a failure to store is only reported.
async fn record(client: &Client, key: &str, drill: &str, cluster: &str, stages: &[(&str, f64)]) {
    let Ok((ns, name)) = parse_key(key) else { return };
    let at = jiff::Timestamp::now();
    let stages: serde_json::Map<String, serde_json::Value> =
        stages.iter().map(|(k, v)| ((*k).to_string(), json!((v * 1000.0).round() / 1000.0))).collect();
    let report = json!({"drill": drill, "cluster": cluster, "at": at.round(jiff::Unit::Second).unwrap_or(at).to_string(), "stages": stages});
    let patch = json!({"metadata": {"annotations": {spanset_api::labels::LAST_DRILL: report.to_string()}}});
    let api: Api<FederatedStatefulSet> = Api::namespaced(client.clone(), &ns);
    if let Err(e) = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        eprintln!("spanset: drill: the figures could not be stored on {ns}/{name}: {e}");
    }
}

fn parse_key(s: &str) -> Result<(String, String), String> {
    match s.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() => Ok((ns.into(), name.into())),
        Some(_) => Err(format!("--fsts {s:?}: expected NAMESPACE/NAME")),
        None if !s.is_empty() => Ok(("default".into(), s.into())),
        None => Err("--fsts must name the federation".into()),
    }
}

fn placement_patch(clusters: &[PlacementCluster]) -> serde_json::Value {
    json!({"spec": {"placement": {"clusters": clusters}}})
}

/// Waits until the federation is settled on `want_empty` holding nothing (or, with `None`, on
/// any placement), timing the moves seen meanwhile.
async fn settle(
    api: &Api<FederatedStatefulSet>,
    name: &str,
    half: &'static str,
    cluster: &str,
    empty: bool,
    timeout: Duration,
) -> Result<(f64, Vec<OrdinalReport>), String> {
    let start = Instant::now();
    let mut open: BTreeMap<i32, (String, String, Instant)> = BTreeMap::new();
    let mut done = Vec::new();
    let mut last_line = String::new();
    loop {
        let f = api.get(name).await.map_err(|e| format!("cannot read the federation: {e}"))?;
        let generation = f.metadata.generation;
        let status = f.status.unwrap_or_default();
        let now = Instant::now();
        for m in &status.moves {
            open.entry(m.ordinal).or_insert_with(|| (m.from.clone(), m.to.clone(), now));
        }
        let still: Vec<i32> = status.moves.iter().map(|m| m.ordinal).collect();
        for k in open.keys().copied().filter(|k| !still.contains(k)).collect::<Vec<_>>() {
            let (from, to, since) = open.remove(&k).expect("listed above");
            done.push(OrdinalReport {
                half,
                ordinal: k,
                from,
                to,
                unavailable_seconds: now.duration_since(since).as_secs_f64(),
            });
        }
        let held = status.slices.iter().find(|s| s.cluster == cluster).map_or(0, |s| s.replicas);
        let ready = status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        let current = status.observed_generation == generation;
        let line = format!(
            "{half}: {} moving, {cluster} holds {held}, ready {}",
            status.moves.len(),
            status.ready.as_deref().unwrap_or("-")
        );
        if line != last_line {
            eprintln!("{line}");
            last_line = line;
        }
        if current && ready && status.moves.is_empty() && open.is_empty() && (held == 0) == empty {
            return Ok((start.elapsed().as_secs_f64(), done));
        }
        if start.elapsed() > timeout {
            return Err(format!("{half}: not settled after {}s ({last_line})", timeout.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the evacuation drill.
pub async fn evacuate(client: &Client, args: &EvacuateArgs) -> Result<Report, String> {
    let (ns, name) = parse_key(&args.on.fsts)?;
    let api: Api<FederatedStatefulSet> = Api::namespaced(client.clone(), &ns);
    let f = api
        .get_opt(&name)
        .await
        .map_err(|e| format!("cannot read {ns}/{name}: {e}"))?
        .ok_or_else(|| format!("no FederatedStatefulSet {ns}/{name}"))?;
    let original = f.spec.placement.clusters.clone();
    let Some(i) = original.iter().position(|c| c.name == args.cluster) else {
        return Err(format!("{} is not in the placement of {ns}/{name}", args.cluster));
    };
    if original.iter().enumerate().all(|(j, c)| j == i || c.weight == Some(0)) {
        return Err(format!("{} is the only member with weight: nowhere to evacuate to", args.cluster));
    }
    let timeout = Duration::from_secs(args.on.timeout.max(1));
    let pp = PatchParams::default();
    // The drill starts from a settled federation, holding something in the member.
    settle(&api, &name, "before", &args.cluster, false, timeout).await?;
    let mut emptied = original.clone();
    emptied[i].weight = Some(0);
    emptied[i].min_replicas = Some(0);
    let started = Instant::now();
    api.patch(&name, &pp, &Patch::Merge(placement_patch(&emptied)))
        .await
        .map_err(|e| format!("cannot change the placement: {e}"))?;
    let out = settle(&api, &name, "out", &args.cluster, true, timeout).await;
    let restore = api.patch(&name, &pp, &Patch::Merge(placement_patch(&original))).await;
    let (out_seconds, mut ordinals) = out?;
    restore.map_err(|e| format!("cannot restore the placement: {e}"))?;
    let (back_seconds, back) = settle(&api, &name, "back", &args.cluster, false, timeout).await?;
    ordinals.extend(back);
    let max = ordinals.iter().map(|o| o.unavailable_seconds).fold(0.0, f64::max);
    Ok(Report {
        federation: format!("{ns}/{name}"),
        cluster: args.cluster.clone(),
        out_seconds,
        back_seconds,
        total_seconds: started.elapsed().as_secs_f64(),
        max_unavailable_seconds: max,
        ordinals,
    })
}

fn table(r: &Report) -> String {
    let mut out = format!(
        "DRILL evacuate {} in {}\n\nHALF  ORDINAL  FROM         TO           UNAVAILABLE\n",
        r.cluster, r.federation
    );
    for o in &r.ordinals {
        out.push_str(&format!(
            "{:<5} {:<8} {:<12} {:<12} {:.1}s\n",
            o.half, o.ordinal, o.from, o.to, o.unavailable_seconds
        ));
    }
    out.push_str(&format!(
        "\nout {:.1}s, back {:.1}s, total {:.1}s; longest unavailability of one ordinal {:.1}s\n",
        r.out_seconds, r.back_seconds, r.total_seconds, r.max_unavailable_seconds
    ));
    out
}

fn print<T: Serialize>(format: Format, report: &T, table: impl FnOnce(&T) -> String) {
    // No drill has columns beyond its table, so `wide` prints the table.
    print!("{}", super::output::render(format, report, |_wide| table(report)));
}

/// Runs `spanset drill`; a cluster-loss drill whose ledger shows a violation exits 1.
pub async fn run(args: DrillArgs) -> i32 {
    let (kubeconfig, context) = match &args.drill {
        Drill::Evacuate(a) => (&a.on.kubeconfig, &a.on.context),
        #[cfg(feature = "sim")]
        Drill::ClusterLoss(a) => (&a.on.kubeconfig, &a.on.context),
        #[cfg(feature = "sim")]
        Drill::Chaos(a) => (&a.kubeconfig, &a.context),
    };
    // A page that could not be kept is known before a long drill runs for it.
    #[cfg(feature = "sim")]
    {
        let report = match &args.drill {
            Drill::Evacuate(_) => None,
            Drill::ClusterLoss(a) => a.report.as_deref(),
            Drill::Chaos(a) => a.report.as_deref(),
        };
        if let Some(Err(e)) = report.map(picture::check_writable) {
            eprintln!("spanset: drill: {e}");
            return 1;
        }
    }
    let client = match spanset_controller::runtime::app::host_client(kubeconfig.as_deref(), context.as_deref()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("spanset: drill: cannot reach the host cluster: {e}");
            return 1;
        }
    };
    match &args.drill {
        Drill::Evacuate(a) => match evacuate(&client, a).await {
            Ok(report) => {
                let stages = [
                    ("out", report.out_seconds),
                    ("back", report.back_seconds),
                    ("total", report.total_seconds),
                    ("max_unavailable", report.max_unavailable_seconds),
                ];
                record(&client, &a.on.fsts, "evacuate", &a.cluster, &stages).await;
                print(a.on.output, &report, table);
                0
            }
            Err(e) => {
                eprintln!("spanset: drill evacuate: {e}");
                1
            }
        },
        #[cfg(feature = "sim")]
        Drill::ClusterLoss(a) => loss::run(&client, a).await,
        #[cfg(feature = "sim")]
        Drill::Chaos(a) => chaos::run(&client, a).await,
    }
}
