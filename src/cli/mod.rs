//! The `spanset` command line: one subcommand per job, each in its own module.

use clap::{Parser, Subcommand};

pub mod crd;
pub mod drill;
pub mod fence;
pub mod join;
pub mod plan;
pub mod run;
pub mod sandbox;
pub mod sim;
pub mod sim_ctl;
pub mod status;

/// spanset runs one StatefulSet across several Kubernetes clusters.
#[derive(Debug, Parser)]
#[command(name = "spanset", version, about)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run simulated Kubernetes API servers on loopback (the sandbox).
    Sim(sim::SimArgs),
    /// Inject faults into a running sandbox through its admin API.
    SimCtl(sim_ctl::SimCtlArgs),
    /// Print the target slices and the steps to reach them, without touching any cluster.
    Plan(plan::PlanArgs),
    /// Print spanset's CRDs as YAML (or write them into a directory).
    Crd(crd::CrdArgs),
    /// Run the controller against a host cluster and its members.
    Run(run::RunArgs),
    /// Run the whole product on simulated clusters: host, members, controller and an example.
    Sandbox(sandbox::SandboxArgs),
    /// Show FederatedStatefulSets' readiness, conditions, slices and moves from the host cluster.
    Status(status::StatusArgs),
    /// Declare a lost member cluster's workloads dead, so that its ordinals are re-homed.
    Fence(fence::FenceArgs),
    /// Let a fenced member cluster take ordinals again.
    Unfence(fence::UnfenceArgs),
    /// Rehearse failover: `evacuate` moves every ordinal out of a member and back, timed.
    Drill(drill::DrillArgs),
    /// Register a member cluster under a least-privilege identity (RBAC, token, Secret, MemberCluster).
    Join(join::JoinArgs),
    /// Remove a member cluster that no federation places ordinals in.
    Unjoin(join::UnjoinArgs),
}

/// Parses the command line; a bad flag prints one line and exits 2 (help and version exit 0).
pub fn parse() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp
            | clap::error::ErrorKind::DisplayVersion
            | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
            _ => usage_error(&e.to_string()),
        },
    }
}

/// Prints a usage error on one line (the error's text without clap's usage and tips) and
/// exits 2.
pub fn usage_error(message: &str) -> ! {
    let parts: Vec<&str> = message
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
        .collect();
    let line = parts.join(" ");
    let line = line.trim_start_matches("error: ");
    eprintln!("spanset: {} (see --help)", if line.is_empty() { "invalid arguments" } else { line });
    std::process::exit(2)
}
