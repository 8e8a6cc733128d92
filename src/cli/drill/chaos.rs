//! `spanset drill chaos --admin URL [--duration 10m] [--seed N] [--controllers N] [-o json]`: a
//! chaos soak on the sandbox. It runs a seeded random schedule ([`schedule`]) of spec changes
//! (weights, replicas, image), member faults (partitions refused and hung, latency, 5xx, cut and
//! expired watches, node loss and power-off) and, for the controllers it started itself
//! ([`controllers`]), SIGKILLs with restart and pauses past the lease. Each ordinal's volume
//! carries a data marker ([`markers`]) checked after every completed move and at the end. Then
//! it heals everything, waits for the federation to converge and reports faults by kind, spec
//! changes, moves completed, the time to converge, the markers checked and the ledger's verdict;
//! with `--report FILE.html`, also as a picture ([`super::picture`]).
//!
//! The federation: with `--fsts NS/NAME`, that one, which must have `migration.storage: Move`
//! (the markers prove that a moved ordinal's data came with it); without, the drill creates
//! (or reuses) `default/chaos`: the example's 5 replicas over every unfenced member, with
//! `storage: Move`. Faults go only to its members, never to the host. Member pods and claims are
//! read through the kubeconfig's context named after each member (`spanset sandbox` and
//! `spanset sim` write one per cluster).
//!
//! Exit codes: 0 clean, 1 a violation (ledger or marker), no convergence, a failure to set up, or
//! an interruption (SIGINT or SIGTERM, which stops the controllers the drill started); 2 bad
//! flags.

mod controllers;
mod markers;
mod moves;
mod refused;
mod report;
pub mod schedule;
mod soak;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    time::{Duration, Instant},
};

use jiff::Timestamp;
use kube::{Api, Client, ResourceExt, api::PostParams};
use serde_json::json;
use spanset_api::{FederatedStatefulSet, MemberCluster, StorageMode};
use spanset_sim::{cli::ctl::Action as Admin, store::account::report::AccountReport};

pub use self::report::ChaosReport;
use self::{
    controllers::{Controllers, Launch},
    markers::Markers,
    report::{ClusterCost, table, verdict},
    schedule::{Category, Shape, Step},
    soak::Soak,
};
use super::{
    Format, admin, parse_key,
    picture::{self, Mark, MarkKind, Seen},
    print, record,
};

/// Flags of `spanset drill chaos`.
#[derive(Debug, clap::Args)]
pub struct ChaosArgs {
    /// The sandbox admin API (`admin:` line of `spanset sandbox` or `spanset sim`).
    #[arg(long, value_name = "URL")]
    pub admin: String,
    /// How long to inject faults and spec changes (`90s`, `10m`, `1h`).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Seed of the schedule (default: a random one, printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Start N `spanset run` replicas (leader election) that the drill kills and pauses; 0:
    /// only controllers running already, which are never touched.
    #[arg(long, default_value_t = 0)]
    pub controllers: usize,
    /// The federation to soak, `NAMESPACE/NAME`, with `migration.storage: Move` (default: create
    /// or reuse `default/chaos`).
    #[arg(long, value_name = "NS/NAME")]
    pub fsts: Option<String>,
    /// Print the schedule the seed gives and exit, touching nothing.
    #[arg(long)]
    pub plan: bool,
    /// Mean time between two injections.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub pace: Duration,
    /// Lease duration of the controllers the drill starts (a pause outlasts it).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub lease: Duration,
    /// Namespace of their leader Lease.
    #[arg(long, default_value = "default")]
    pub lease_namespace: String,
    /// Kubeconfig of the controllers the drill starts (default: --kubeconfig); its context is
    /// --context.
    #[arg(long, value_name = "FILE")]
    pub controller_kubeconfig: Option<PathBuf>,
    /// Where their logs go (default: a new directory under the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Longest wait for the federation to settle, before the soak and after the heal.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub converge_timeout: Duration,
    /// Report format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// Also write the run as one self-contained HTML page: a lane per ordinal coloured by
    /// the member it ran in, every fault, the heal and convergence, the verdict and figures.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Kubeconfig of the sandbox (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the host cluster (default: the kubeconfig's current context).
    #[arg(long, value_name = "CTX")]
    pub context: Option<String>,
}

/// Parses `90`, `90s`, `10m`, `1h` or `1.5s` into a duration.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration (like 90s, 10m, 1h)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: the unit is ms, s, m or h")),
    };
    if !(secs > 0.0 && secs < 31.0 * 86_400.0) {
        return Err(format!("{s:?}: must be above 0 and below 31 days"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The member names of a federation's placement, with their sandbox nodes.
async fn shape_of(args: &ChaosArgs, f: &FederatedStatefulSet, seed: u64) -> Result<Shape, String> {
    let clusters: serde_json::Value = serde_json::from_str(&admin(&args.admin, Admin::Clusters).await?)
        .map_err(|e| format!("the admin API's cluster list: {e}"))?;
    let mut members = BTreeMap::new();
    for c in &f.spec.placement.clusters {
        let nodes =
            clusters["clusters"].as_array().into_iter().flatten().find(|x| x["name"] == c.name.as_str()).ok_or_else(
                || format!("the sandbox at {} has no cluster {}", spanset_sim::cli::ctl::redacted(&args.admin), c.name),
            )?["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect();
        members.insert(c.name.clone(), nodes);
    }
    Ok(Shape {
        seed,
        duration: args.duration,
        members,
        controllers: args.controllers,
        lease: args.lease,
        replicas: f.spec.replicas,
        image: first_image(f).unwrap_or_else(|| "redis:7".into()),
        pace: args.pace,
    })
}

fn first_image(f: &FederatedStatefulSet) -> Option<String> {
    let v = serde_json::to_value(f).ok()?;
    v.pointer("/spec/template/template/spec/containers/0/image")?.as_str().map(str::to_string)
}

/// The federation the drill creates: the example's, 5 replicas over `members`, storage Move.
fn chaos_federation(members: &[String]) -> Result<FederatedStatefulSet, String> {
    let mut v = serde_json::to_value(spanset_api::example(members)).map_err(|e| e.to_string())?;
    v["metadata"]["name"] = "chaos".into();
    v["spec"]["replicas"] = 5.into();
    v["spec"]["migration"] = json!({"storage": "Move"});
    v["spec"]["template"]["serviceName"] = "chaos".into();
    v["spec"]["template"]["selector"] = json!({"matchLabels": {"app": "chaos"}});
    v["spec"]["template"]["template"]["metadata"]["labels"] = json!({"app": "chaos"});
    serde_json::from_value(v).map_err(|e| e.to_string())
}

/// The federation to soak: the named one (which must move storage), or `default/chaos`,
/// created when `create` (not for `--plan`) and missing.
async fn federation(client: &Client, args: &ChaosArgs, create: bool) -> Result<FederatedStatefulSet, String> {
    let key = args.fsts.clone().unwrap_or_else(|| "default/chaos".into());
    let (ns, name) = parse_key(&key)?;
    let api: Api<FederatedStatefulSet> = Api::namespaced(client.clone(), &ns);
    if let Some(f) = api.get_opt(&name).await.map_err(|e| format!("cannot read {ns}/{name}: {e}"))? {
        if f.spec.migration.storage != Some(StorageMode::Move) {
            return Err(format!(
                "{ns}/{name} does not set migration.storage: Move; the drill's data markers need it (or omit --fsts)"
            ));
        }
        return Ok(f);
    }
    if args.fsts.is_some() {
        return Err(format!("no FederatedStatefulSet {ns}/{name}"));
    }
    let mcs: Api<MemberCluster> = Api::all(client.clone());
    let list = mcs.list(&Default::default()).await.map_err(|e| format!("cannot list MemberClusters: {e}"))?;
    let mut members: Vec<String> = list.items.iter().filter(|m| !m.spec.fenced).map(|m| m.name_any()).collect();
    members.sort();
    if members.is_empty() {
        return Err("no unfenced MemberCluster to place the chaos federation on".into());
    }
    let f = chaos_federation(&members)?;
    if !create {
        return Ok(f);
    }
    eprintln!("creating {ns}/{name}: {} replicas over {}, storage Move", f.spec.replicas, members.join(", "));
    api.create(&PostParams::default(), &f).await.map_err(|e| format!("cannot create {ns}/{name}: {e}"))
}

/// The schedule a run with these flags would perform, without touching anything.
pub async fn plan(client: &Client, args: &ChaosArgs) -> Result<Vec<Step>, String> {
    let seed = args.seed.unwrap_or_else(rand::random);
    let f = federation(client, args, false).await?;
    println!("seed {seed}");
    Ok(schedule::schedule(&shape_of(args, &f, seed).await?))
}

/// The sandbox's resource account now, if it serves one (a sandbox older than the account does
/// not: the report then goes without its cost).
async fn account(admin_url: &str) -> Option<AccountReport> {
    let all = Admin::Account { output: "json".into(), check: false, max: Vec::new() };
    let body = admin(admin_url, all).await.map_err(|e| eprintln!("account: {e}")).ok()?;
    serde_json::from_str(&body).map_err(|e| eprintln!("account: {e}")).ok()
}

/// Runs the chaos drill; answers its report and what it saw over time (for the picture), or
/// `Err` for a failure to set up or run it.
pub async fn chaos(client: &Client, args: &ChaosArgs) -> Result<(ChaosReport, Seen), String> {
    let seed = args.seed.unwrap_or_else(rand::random);
    eprintln!("seed {seed}");
    let account_before = account(&args.admin).await;
    let controllers = if args.controllers > 0 {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the running executable: {e}"))?;
        let log_dir = args
            .log_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join(format!("spanset-chaos-{seed}-{}", std::process::id())));
        let launch = Launch {
            exe,
            kubeconfig: args.controller_kubeconfig.clone().or_else(|| args.kubeconfig.clone()),
            context: args.context.clone(),
            lease_namespace: args.lease_namespace.clone(),
            lease: args.lease,
            log_dir,
        };
        let c = Controllers::start(launch, args.controllers)?;
        eprintln!("started {} controllers, logging to {}", args.controllers, c.log_dir().display());
        Some(c)
    } else {
        None
    };
    let f = federation(client, args, true).await?;
    let ns = f.namespace().unwrap_or_else(|| "default".into());
    let name = f.name_any();
    let shape = shape_of(args, &f, seed).await?;
    let steps = schedule::schedule(&shape);
    let mut members = BTreeMap::new();
    for m in shape.members.keys() {
        let c = spanset_controller::runtime::app::host_client(args.kubeconfig.as_deref(), Some(m))
            .await
            .map_err(|e| format!("no context {m} in the kubeconfig to read the member with: {e}"))?;
        members.insert(m.clone(), c);
    }
    let claim = serde_json::to_value(&f)
        .ok()
        .and_then(|v| v.pointer("/spec/template/volumeClaimTemplates/0/metadata/name")?.as_str().map(str::to_string))
        .ok_or_else(|| format!("{ns}/{name} has no volume claim template: nothing to mark"))?;
    let log_dir = controllers.as_ref().map(|c| c.log_dir().display().to_string());
    let mut soak = Soak {
        api: Api::namespaced(client.clone(), &ns),
        name: name.clone(),
        admin: args.admin.clone(),
        members,
        markers: Markers::new(&args.admin, &ns, &name, &claim),
        controllers,
        faults: BTreeMap::new(),
        spec: BTreeMap::new(),
        errors: Vec::new(),
        api_faulted: BTreeSet::new(),
        nodes_down: BTreeSet::new(),
        moving: BTreeMap::new(),
        since: None,
        arrived: BTreeSet::new(),
        replicas: f.spec.replicas,
        last_line: String::new(),
    };
    eprintln!("waiting: {ns}/{name} settled, a marker on every ordinal's volume");
    soak.settle(args.converge_timeout).await.ok_or_else(|| {
        format!("{ns}/{name} did not settle within {}s before the soak", args.converge_timeout.as_secs())
    })?;
    eprintln!("markers: written on {} ordinals", soak.markers.marked());
    let mut refused = refused::refused_members(client, shape.members.keys()).await;
    refused::say(&refused, &BTreeMap::new());
    eprintln!("soak: {} steps over {}s", steps.len(), args.duration.as_secs());
    let start = Instant::now();
    let started_at = Timestamp::now();
    soak.since = Some(started_at);
    let mut marks = vec![Mark::new(started_at, MarkKind::Phase, "soak begins")];
    let mut next = 0;
    let mut last_round = Instant::now();
    while next < steps.len() || start.elapsed() < args.duration {
        let elapsed = start.elapsed().as_millis() as u64;
        while next < steps.len() && steps[next].at_ms <= elapsed {
            if let Some((Category::Fault, _)) = steps[next].action.kind() {
                let fault = steps[next].action.to_string();
                marks.push(Mark { minor: true, ..Mark::new(Timestamp::now(), MarkKind::Fault, fault) });
            }
            soak.perform(&steps[next]).await;
            next += 1;
        }
        soak.observe().await;
        if last_round.elapsed() > Duration::from_secs(1) {
            soak.markers_round().await;
            last_round = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let duration = start.elapsed().as_secs_f64();
    eprintln!("heal: every member, node and controller");
    marks.push(Mark::new(Timestamp::now(), MarkKind::Fault, "heal everything"));
    soak.heal_all().await;
    let converge = soak.settle(args.converge_timeout).await;
    if converge.is_some() {
        marks.push(Mark::new(Timestamp::now(), MarkKind::Phase, "converged"));
    }
    // The final round: every ordinal, wherever it runs.
    if converge.is_some() {
        soak.markers.check_all(soak.replicas);
        soak.settle(args.converge_timeout).await;
    }
    // A refusal decided during the soak counts too; the latest words of each are kept.
    let later = refused::refused_members(client, shape.members.keys()).await;
    refused::say(&later, &refused);
    refused.extend(later);
    let ledger: serde_json::Value = serde_json::from_str(&admin(&args.admin, Admin::Ledger { check: false }).await?)
        .map_err(|e| format!("ledger: {e}"))?;
    let ledger_violations: Vec<String> = ledger["violations"]
        .as_array()
        .map(|v| v.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let cost = match (account_before, account(&args.admin).await) {
        (Some(before), Some(after)) => {
            after.since(&before).clusters.iter().map(|(name, a)| (name.clone(), ClusterCost::of(a))).collect()
        }
        _ => BTreeMap::new(),
    };
    let total: u64 = soak.faults.values().sum();
    let mut report = ChaosReport {
        seed,
        federation: format!("{ns}/{name}"),
        members: shape.members.keys().cloned().collect(),
        refused_members: refused.into_iter().map(|(m, why)| format!("{m} ({why})")).collect(),
        duration_seconds: duration,
        controllers: args.controllers,
        faults_per_minute: total as f64 * 60.0 / duration.max(1.0),
        faults: soak.faults.clone(),
        spec_changes: soak.spec.clone(),
        injection_errors: soak.errors.clone(),
        moves_completed: soak.arrived.len() as u64,
        converged: converge.is_some(),
        converge_seconds: converge,
        markers_written: soak.markers.marked(),
        markers_checked: soak.markers.checked,
        marker_violations: soak.markers.violations.clone(),
        ledger_violations,
        verdict: String::new(),
        schedule: steps.iter().map(ToString::to_string).collect(),
        log_dir,
        cost,
    };
    report.verdict = verdict(&report);
    let until = Timestamp::now();
    let seen = Seen {
        from: Seen::lead_in(started_at, until),
        until,
        marks,
        ledger,
        namespace: ns,
        name,
        members: shape.members.keys().cloned().collect(),
        replicas: soak.replicas.max(0) as u32,
    };
    Ok((report, seen))
}

/// The soak's picture: its figures and verdict beside where each ordinal ran.
fn chaos_picture(r: &ChaosReport, seen: &Seen) -> picture::Picture {
    let sum = |m: &BTreeMap<String, u64>| m.values().sum::<u64>().to_string();
    let figures = vec![
        ("seed".to_string(), r.seed.to_string()),
        ("soak".into(), picture::seconds(r.duration_seconds)),
        ("controllers of its own".into(), r.controllers.to_string()),
        ("faults".into(), format!("{} ({:.1} per minute)", sum(&r.faults), r.faults_per_minute)),
        ("spec changes".into(), sum(&r.spec_changes)),
        ("moves completed".into(), r.moves_completed.to_string()),
        ("converged after the heal".into(), r.converge_seconds.map_or("never".into(), picture::seconds)),
        ("markers written".into(), r.markers_written.to_string()),
        ("markers checked".into(), r.markers_checked.to_string()),
        ("steps that failed".into(), r.injection_errors.len().to_string()),
        ("ledger violations".into(), r.ledger_violations.len().to_string()),
        ("marker violations".into(), r.marker_violations.len().to_string()),
    ];
    let title = format!("chaos on {} (seed {})", r.federation, r.seed);
    let problems = (r.ledger_violations.iter().map(|v| format!("ledger violation: {v}")))
        .chain(r.marker_violations.iter().map(|v| format!("marker violation: {v}")))
        .chain(r.refused_members.iter().map(|m| format!("refused member (not soaked): {m}")))
        .collect();
    picture::Picture { problems, ..seen.picture(title, r.verdict.clone(), !r.failed(), figures) }
}

/// Runs `spanset drill chaos` and prints its report: exit 1 on a violation or no convergence.
pub(super) async fn run(client: &Client, a: &ChaosArgs) -> i32 {
    if a.plan {
        return match plan(client, a).await {
            Ok(steps) => {
                steps.iter().for_each(|s| println!("{s}"));
                0
            }
            Err(e) => {
                eprintln!("spanset: drill chaos: {e}");
                1
            }
        };
    }
    // On SIGINT or SIGTERM the soak is dropped, and with it the controllers it started.
    let outcome = tokio::select! {
        r = chaos(client, a) => r,
        _ = crate::cli::wait_for_signal() => Err("interrupted: the controllers it started are stopped, faults in force stay".into()),
    };
    match outcome {
        Ok((report, seen)) => {
            let key = report.federation.clone();
            let mut stages = vec![("total", report.duration_seconds)];
            stages.extend(report.converge_seconds.map(|s| ("converge", s)));
            record(client, &key, "chaos", "", &stages).await;
            print(a.output, &report, table);
            let written = super::write_picture("chaos", a.report.as_deref(), || {
                picture::html::render(&chaos_picture(&report, &seen))
            });
            i32::from(report.failed() || !written)
        }
        Err(e) => {
            eprintln!("spanset: drill chaos: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them_and_nonsense_is_refused() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("3d").unwrap_err().contains("unit"));
    }

    #[test]
    fn the_chaos_federation_moves_storage_and_keeps_to_its_own_pods() {
        let f = chaos_federation(&["east".into(), "west".into()]).unwrap();
        assert_eq!(f.spec.migration.storage, Some(StorageMode::Move));
        assert_eq!(f.name_any(), "chaos");
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["spec"]["template"]["selector"]["matchLabels"]["app"], "chaos");
        assert_eq!(v["spec"]["template"]["template"]["metadata"]["labels"]["app"], "chaos");
    }
}
