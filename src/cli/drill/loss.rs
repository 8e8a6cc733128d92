//! `spanset drill cluster-loss CLUSTER --admin URL --fsts NS/NAME`: sandbox only (it kills a
//! member's nodes and API through the sandbox's admin API), so it exists only with the cargo
//! feature `sim`. It loses a member for real, fences it (Manual) or waits for the automatic
//! fence, waits for the re-homing, heals it, checks the shrink on return, unfences it, and
//! reports each stage's time and the ledger's verdict; with `--report FILE.html`, also as a
//! picture ([`super::picture`]).

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use jiff::Timestamp;
use kube::{Api, Client};
use serde::Serialize;
use spanset_api::FederatedStatefulSet;
use spanset_sim::cli::ctl::Action as Admin;

use super::{
    DrillOn, admin, parse_key,
    picture::{self, Mark, MarkKind, Seen},
    print, record, settle,
};

/// Flags of `spanset drill cluster-loss`.
#[derive(Debug, clap::Args)]
pub struct LossArgs {
    /// The member cluster to lose.
    pub cluster: String,
    /// The sandbox admin API (`admin:` line of `spanset sandbox` or `spanset sim`).
    #[arg(long, value_name = "URL")]
    pub admin: String,
    /// Also write the run as one self-contained HTML page: a lane per ordinal coloured by
    /// the member it ran in, the fault and phases, the verdict and figures.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// The federation, the host and the report.
    #[command(flatten)]
    pub on: DrillOn,
}

/// The cluster-loss drill's report: each stage's time and the ledger's verdict.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LossReport {
    /// The federation.
    pub federation: String,
    /// The member lost.
    pub cluster: String,
    /// `Manual` or `Automatic`.
    pub policy: String,
    /// From the partition to the federation's `ClusterUnreachable` naming the member.
    pub detection_seconds: f64,
    /// From the partition to the member fenced (by the drill, or automatically).
    pub fenced_seconds: f64,
    /// From the fence to every replica Ready in the other members.
    pub rehome_seconds: f64,
    /// From the heal to the member's StatefulSet shrunk to nothing.
    pub shrink_on_return_seconds: f64,
    /// From the unfence to the federation settled with the member holding its share again.
    pub back_seconds: f64,
    /// The whole drill.
    pub total_seconds: f64,
    /// At-most-one violations the sandbox's ledger recorded over the whole run (must be none).
    pub ledger_violations: Vec<String>,
}

async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut cond: F) -> Result<f64, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, String>>,
{
    let start = Instant::now();
    eprintln!("waiting: {what}");
    loop {
        if cond().await? {
            let secs = start.elapsed().as_secs_f64();
            eprintln!("done: {what} ({secs:.1}s)");
            return Ok(secs);
        }
        if start.elapsed() > timeout {
            return Err(format!("{what}: not after {}s", timeout.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the cluster-loss drill against a sandbox; answers its report and what it saw over
/// time (for the picture).
pub async fn cluster_loss(client: &Client, args: &LossArgs) -> Result<(LossReport, Seen), String> {
    use kube::api::DynamicObject;

    use spanset_api::{FailoverPolicy, MemberCluster};
    use spanset_controller::{
        actors::supervisor::member_client,
        host::{events::Recorder, fencing},
        member::workload,
    };
    let (ns, name) = parse_key(&args.on.fsts)?;
    let api: Api<FederatedStatefulSet> = Api::namespaced(client.clone(), &ns);
    let f = api.get_opt(&name).await.map_err(|e| format!("cannot read {ns}/{name}: {e}"))?;
    let f = f.ok_or_else(|| format!("no FederatedStatefulSet {ns}/{name}"))?;
    if !f.spec.placement.clusters.iter().any(|c| c.name == args.cluster) {
        return Err(format!("{} is not in the placement of {ns}/{name}", args.cluster));
    }
    let automatic = f.spec.failover.policy == Some(FailoverPolicy::Automatic);
    let replicas = f.spec.replicas;
    let timeout = Duration::from_secs(args.on.timeout.max(1));
    let cluster = args.cluster.as_str();
    let mcs: Api<MemberCluster> = Api::all(client.clone());
    let mc = mcs.get(cluster).await.map_err(|e| format!("cannot read MemberCluster {cluster}: {e}"))?;
    let member = member_client(client, args.on.kubeconfig.as_deref(), &mc.spec).await?;
    settle(&api, &name, "before", cluster, false, timeout).await?;
    let started = Instant::now();
    let started_at = Timestamp::now();
    let mut marks = vec![Mark::new(started_at, MarkKind::Fault, "nodes powered off")];

    // Loss: its nodes die with their pods, then its API goes. The sandbox names the machines
    // (spanset's member identity may not list Nodes, and needs not).
    let clusters: serde_json::Value = serde_json::from_str(&admin(&args.admin, Admin::Clusters).await?)
        .map_err(|e| format!("the admin API's cluster list: {e}"))?;
    let nodes: Vec<String> = clusters["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == cluster)
        .and_then(|c| c["nodes"].as_array())
        .ok_or_else(|| {
            format!("the sandbox at {} has no cluster {cluster}", spanset_sim::cli::ctl::redacted(&args.admin))
        })?
        .iter()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect();
    // A cluster loss: its machines power off (their containers stop at once). A node that only
    // lost its network would keep its containers running, and a fence would then be a lie.
    for n in &nodes {
        admin(&args.admin, Admin::NodeDown { cluster: cluster.to_string(), node: n.clone(), power_off: true }).await?;
    }
    wait_for(&format!("{cluster}'s pods dead with their nodes"), timeout, || async {
        let ledger: serde_json::Value =
            serde_json::from_str(&admin(&args.admin, Admin::Ledger { check: false }).await?)
                .map_err(|e| format!("ledger: {e}"))?;
        let mine = ledger["incarnations"].as_array().cloned().unwrap_or_default();
        Ok(mine.iter().filter(|e| e["cluster"] == cluster).all(|e| !e["runningUntil"].is_null()))
    })
    .await?;
    admin(&args.admin, Admin::Partition { cluster: cluster.to_string(), hang: false, outside_only: false }).await?;
    let lost = Instant::now();
    marks.push(Mark::new(Timestamp::now(), MarkKind::Fault, "API partitioned"));
    wait_for(&format!("{cluster} detected unreachable"), timeout, || async {
        let f = api.get(&name).await.map_err(|e| e.to_string())?;
        Ok(f.status
            .unwrap_or_default()
            .conditions
            .iter()
            .any(|c| c.type_ == "ClusterUnreachable" && c.status == "True" && c.message.contains(cluster)))
    })
    .await?;
    let detection = lost.elapsed().as_secs_f64();
    marks.push(Mark::new(Timestamp::now(), MarkKind::Phase, "detected"));
    if automatic {
        wait_for(&format!("{cluster} fenced automatically"), timeout, || async {
            Ok(mcs.get(cluster).await.map_err(|e| e.to_string())?.spec.fenced)
        })
        .await?;
    } else {
        wait_for(&format!("{cluster}'s MemberCluster Reachable=False"), timeout, || async {
            let mc = mcs.get(cluster).await.map_err(|e| e.to_string())?;
            Ok(mc.status.is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Reachable" && c.status == "False")))
        })
        .await?;
        let mut events = Recorder::for_component(client.clone(), "spanset.dev/drill", "drill".into());
        let line =
            fencing::fence(client, cluster, "spanset drill cluster-loss", "spanset drill", false, &mut events).await?;
        eprintln!("{line}");
    }
    let fenced = lost.elapsed().as_secs_f64();
    marks.push(Mark::new(Timestamp::now(), MarkKind::Phase, "fenced"));
    let rehome = wait_for("every replica Ready in the other members", timeout, || async {
        let f = api.get(&name).await.map_err(|e| e.to_string())?;
        let s = f.status.unwrap_or_default();
        let elsewhere: i32 = s.slices.iter().filter(|x| x.cluster != cluster).map(|x| x.ready_replicas).sum();
        Ok(s.moves.is_empty() && elsewhere == replicas)
    })
    .await?;
    marks.push(Mark::new(Timestamp::now(), MarkKind::Phase, "re-homed"));

    // Return: the API first, so that spanset shrinks the member before its nodes restart.
    admin(&args.admin, Admin::Heal { cluster: cluster.to_string() }).await?;
    marks.push(Mark::new(Timestamp::now(), MarkKind::Fault, "API healed"));
    // The member StatefulSet of the federation's backend (apps/v1 or Advanced StatefulSet).
    let backend = spanset_controller::member::objects::backend(&f);
    let sts: Api<DynamicObject> = Api::namespaced_with(member.clone(), &ns, &workload::api_resource(backend));
    // Shrunk: its StatefulSet holds nothing, and every pod of the federation there is being
    // deleted or gone — only then may its machines power on (a bound pod not being deleted
    // would restart with them, while its ordinal runs elsewhere).
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(member.clone(), &ns);
    // The member's API has only just come back: a connection it refuses or drops now is "not
    // yet", not the end of the drill; the last such error is told if the wait times out.
    let unanswered = std::sync::Mutex::new(None::<String>);
    let what = format!("{cluster}'s StatefulSet shrunk and its pods deleted on return");
    let shrink = wait_for(&what, timeout, || async {
        let empty = sts.get_opt(&name).await.ok().flatten().is_some_and(|s| workload::replicas(&s) == 0);
        let listed = match pods.list(&Default::default()).await {
            Ok(l) => l.items,
            Err(e) => {
                *unanswered.lock().expect("not poisoned") = Some(e.to_string());
                return Ok(false);
            }
        };
        let prefix = format!("{name}-");
        let left = listed.into_iter().any(|p| {
            p.metadata.name.as_deref().is_some_and(|n| n.starts_with(&prefix))
                && p.metadata.deletion_timestamp.is_none()
        });
        Ok(empty && !left)
    })
    .await
    .map_err(|e| match unanswered.lock().expect("not poisoned").take() {
        Some(last) => format!("{e} (the member's API last answered: {last})"),
        None => e,
    })?;
    marks.push(Mark::new(Timestamp::now(), MarkKind::Phase, "shrunk"));
    for n in &nodes {
        admin(&args.admin, Admin::NodeUp { cluster: cluster.to_string(), node: n.clone() }).await?;
    }
    marks.push(Mark::new(Timestamp::now(), MarkKind::Fault, "nodes powered on"));
    let mut events = Recorder::for_component(client.clone(), "spanset.dev/drill", "drill".into());
    // Unfencing waits for the federation's status to show the member holding nothing too
    // (`unfence` refuses a member whose StatefulSets the status still shows holding ordinals).
    wait_for(&format!("the federation's status showing {cluster} shrunk"), timeout, || async {
        let (all, undecodable) = spanset_api::decode::all_federations(client).await?;
        Ok(fencing::still_written(&all, &undecodable, cluster).is_empty())
    })
    .await?;
    eprintln!("{}", fencing::unfence(client, cluster, "spanset drill", false, &mut events).await?);
    let back = Instant::now();
    marks.push(Mark::new(Timestamp::now(), MarkKind::Phase, "unfenced"));
    settle(&api, &name, "back", cluster, false, timeout).await?;
    let back = back.elapsed().as_secs_f64();
    let until = Timestamp::now();
    marks.push(Mark::new(until, MarkKind::Phase, "back"));
    let ledger: serde_json::Value = serde_json::from_str(&admin(&args.admin, Admin::Ledger { check: false }).await?)
        .map_err(|e| format!("ledger: {e}"))?;
    let violations = ledger["violations"]
        .as_array()
        .map(|v| v.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let report = LossReport {
        federation: format!("{ns}/{name}"),
        cluster: cluster.to_string(),
        policy: if automatic { "Automatic" } else { "Manual" }.into(),
        detection_seconds: detection,
        fenced_seconds: fenced,
        rehome_seconds: rehome,
        shrink_on_return_seconds: shrink,
        back_seconds: back,
        total_seconds: started.elapsed().as_secs_f64(),
        ledger_violations: violations,
    };
    let seen = Seen {
        from: Seen::lead_in(started_at, until),
        until,
        marks,
        ledger,
        namespace: ns,
        name,
        members: f.spec.placement.clusters.iter().map(|c| c.name.clone()).collect(),
        replicas: replicas.max(0) as u32,
    };
    Ok((report, seen))
}

/// The drill's picture: its figures and verdict beside where each ordinal ran.
fn loss_picture(r: &LossReport, seen: &Seen) -> picture::Picture {
    let clean = r.ledger_violations.is_empty();
    let verdict =
        if clean { "clean".to_string() } else { format!("{} ledger violation(s)", r.ledger_violations.len()) };
    let figures = vec![
        ("policy".to_string(), r.policy.clone()),
        ("detected unreachable".into(), picture::seconds(r.detection_seconds)),
        ("fenced".into(), picture::seconds(r.fenced_seconds)),
        ("re-homed (after the fence)".into(), picture::seconds(r.rehome_seconds)),
        ("shrunk on return (after the heal)".into(), picture::seconds(r.shrink_on_return_seconds)),
        ("back (after the unfence)".into(), picture::seconds(r.back_seconds)),
        ("total".into(), picture::seconds(r.total_seconds)),
        ("ledger violations".into(), r.ledger_violations.len().to_string()),
    ];
    let title = format!("cluster-loss {} in {}", r.cluster, r.federation);
    picture::Picture { problems: r.ledger_violations.clone(), ..seen.picture(title, verdict, clean, figures) }
}

fn loss_table(r: &LossReport) -> String {
    let mut out = format!(
        "DRILL cluster-loss {} in {} (policy {})

",
        r.cluster, r.federation, r.policy
    );
    for (what, secs) in [
        ("detected unreachable", r.detection_seconds),
        ("fenced", r.fenced_seconds),
        ("re-homed (after the fence)", r.rehome_seconds),
        ("shrunk on return (after the heal)", r.shrink_on_return_seconds),
        ("back (after the unfence)", r.back_seconds),
        ("total", r.total_seconds),
    ] {
        out.push_str(&format!(
            "{what:<36} {secs:>7.1}s
"
        ));
    }
    if r.ledger_violations.is_empty() {
        out.push_str(
            "ledger: at most one incarnation of every identity at any time
",
        );
    } else {
        out.push_str(&format!(
            "ledger: {} VIOLATION(S)
",
            r.ledger_violations.len()
        ));
        for v in &r.ledger_violations {
            out.push_str(&format!("  {v}\n"));
        }
    }
    out
}

/// Runs `spanset drill cluster-loss` and prints its report; a ledger violation exits 1.
pub(super) async fn run(client: &Client, a: &LossArgs) -> i32 {
    match cluster_loss(client, a).await {
        Ok((report, seen)) => {
            let stages = [
                ("detection", report.detection_seconds),
                ("fenced", report.fenced_seconds),
                ("rehome", report.rehome_seconds),
                ("shrink_on_return", report.shrink_on_return_seconds),
                ("back", report.back_seconds),
                ("total", report.total_seconds),
            ];
            record(client, &a.on.fsts, "cluster-loss", &a.cluster, &stages).await;
            print(a.on.output, &report, loss_table);
            let written = super::write_picture("cluster-loss", a.report.as_deref(), || {
                picture::html::render(&loss_picture(&report, &seen))
            });
            i32::from(!report.ledger_violations.is_empty() || !written)
        }
        Err(e) => {
            eprintln!("spanset: drill cluster-loss: {e}");
            1
        }
    }
}
