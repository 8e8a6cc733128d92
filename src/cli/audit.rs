//! `spanset audit FEDERATION --members east,west`: watches a federation's pods in each member
//! and, on Ctrl-C (or after `--for`), reports every identity that ran in two members at once;
//! `--record FILE` keeps what it saw, and `--from FILE` judges such a recording again. It asks
//! the members, not spanset, so that it holds on real clusters what the sandbox's ledger shows
//! on simulated ones. Exit codes: 0 no identity ran twice, 1 one did (or the members could not
//! be reached), 2 bad flags.

use std::{path::PathBuf, time::Duration};

use serde::Serialize;

use super::output::{Format, render};
use crate::audit::{
    self, Audit,
    timeline::{Incarnation, Overlap, Timeline},
};

/// Flags of `spanset audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// The federation (a FederatedStatefulSet's name) whose pods are audited.
    pub federation: String,
    /// Its namespace in every member.
    #[arg(short, long, default_value = "default")]
    pub namespace: String,
    /// The members to watch, comma-separated contexts of the kubeconfig (each member is named
    /// as its context).
    #[arg(long, value_delimiter = ',', required_unless_present = "from")]
    pub members: Vec<String>,
    /// Kubeconfig holding the members' contexts (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE", env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Append every observation to FILE, one JSON object a line, to be judged again with
    /// --from.
    #[arg(long, value_name = "FILE", conflicts_with = "from")]
    pub record: Option<PathBuf>,
    /// Judge a recording instead of watching.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Stop watching after this many seconds (default: at Ctrl-C or SIGTERM).
    #[arg(long = "for", value_name = "SECONDS", conflicts_with = "from")]
    pub duration: Option<f64>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// The report: what was seen and what ran twice.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    /// The federation audited.
    pub federation: String,
    /// Every incarnation seen.
    pub incarnations: Vec<&'a Incarnation>,
    /// Every identity that ran in two members at once, and when.
    pub overlaps: Vec<Overlap>,
}

/// Runs `spanset audit`.
pub async fn run(args: AuditArgs) -> i32 {
    if let Some(d) = args.duration
        && !(d.is_finite() && d > 0.0)
    {
        super::usage_error(&format!("--for: must be a number of seconds above 0, not {d}"));
    }
    let timeline = match &args.from {
        Some(path) => audit::replay(path),
        None => watch(&args).await,
    };
    let timeline = match timeline {
        Ok(t) => t,
        Err(e) => {
            eprintln!("spanset: {e}");
            return 1;
        }
    };
    let report = Report {
        federation: format!("{}/{}", args.namespace, args.federation),
        incarnations: timeline.incarnations().collect(),
        overlaps: timeline.overlaps(),
    };
    print!("{}", render(args.output, &report, |wide| table(&report, wide)));
    if report.overlaps.is_empty() { 0 } else { 1 }
}

async fn watch(args: &AuditArgs) -> Result<Timeline, String> {
    let mut members = vec![];
    for m in &args.members {
        if let Some(why) = super::bad_cluster_name(m) {
            return Err(format!("--members: {m:?} {why}"));
        }
        let client = spanset_controller::runtime::app::host_client(args.kubeconfig.as_deref(), Some(m))
            .await
            .map_err(|e| format!("--members: cannot reach {m}: {e}"))?;
        members.push((m.clone(), client));
    }
    let record = match &args.record {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("--record {}: {e}", path.display()))?,
        ),
        None => None,
    };
    let running = Audit::start(members, &args.namespace, &args.federation, record);
    eprintln!(
        "spanset: auditing {}/{} in {}; Ctrl-C to report",
        args.namespace,
        args.federation,
        args.members.join(", ")
    );
    match args.duration {
        Some(d) => {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs_f64(d)) => {}
                _ = super::wait_for_signal() => {}
            }
        }
        None => super::wait_for_signal().await,
    }
    Ok(running.timeline())
}

fn table(report: &Report, wide: bool) -> String {
    let mut out = String::new();
    let members: std::collections::BTreeSet<&str> = report.incarnations.iter().map(|i| i.member.as_str()).collect();
    let names: std::collections::BTreeSet<&str> = report.incarnations.iter().map(|i| i.name.as_str()).collect();
    out.push_str(&format!(
        "{}: {} incarnations of {} identities in {}\n",
        report.federation,
        report.incarnations.len(),
        names.len(),
        if members.is_empty() { "no member".to_string() } else { members.into_iter().collect::<Vec<_>>().join(", ") }
    ));
    if wide {
        out.push_str(&format!("{:<24} {:<12} {:<38} {:<32} {}\n", "POD", "MEMBER", "UID", "RAN", "GONE"));
        for i in &report.incarnations {
            let ran: Vec<String> = i
                .ran
                .iter()
                .map(|(from, until)| format!("{from}..{}", until.map(|u| u.to_string()).unwrap_or_default()))
                .collect();
            let gone = i.gone.map(|g| g.to_string()).unwrap_or_else(|| "-".into());
            out.push_str(&format!("{:<24} {:<12} {:<38} {:<32} {gone}\n", i.name, i.member, i.uid, ran.join(" ")));
        }
    }
    if report.overlaps.is_empty() {
        out.push_str("no identity ran in two members at once\n");
    }
    for o in &report.overlaps {
        let until = o.until.map(|u| format!("until {u}")).unwrap_or_else(|| "and both still run".into());
        out.push_str(&format!(
            "RAN TWICE {}: in {} (uid {}) and {} (uid {}) from {} {until}\n",
            o.name, o.first.0, o.first.1, o.second.0, o.second.1, o.from
        ));
    }
    out
}
