//! The `spanset` command line: one subcommand per job, each in its own module. The sandbox's
//! commands (`sim`, `sim-ctl`, `sandbox`, `drill cluster-loss`, `drill chaos`) exist only with
//! the cargo feature `sim`, which the production image leaves out.

use clap::{Parser, Subcommand};

pub mod audit;
pub mod completion;
pub mod crd;
pub mod drill;
pub mod fence;
pub mod guard;
pub mod join;
pub mod output;
pub mod plan;
pub mod rollout;
pub mod run;
#[cfg(feature = "sim")]
pub mod sandbox;
pub mod status;
pub mod version;

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
    /// Run simulated Kubernetes API servers on loopback (the sandbox), each with its cluster DNS
    /// (printed as `dns NAME: 127.0.0.1:PORT`; `dig @127.0.0.1 -p PORT SVC.NS.svc.cluster.local`).
    /// Idle clusters cost almost nothing (their components sleep until a change or a deadline),
    /// so a hundred fit on a small machine; `--tls` serves HTTPS with HTTP/2.
    #[cfg(feature = "sim")]
    Sim(spanset_sim::cli::serve::SimArgs),
    /// Inject faults into a running sandbox through its admin API.
    #[cfg(feature = "sim")]
    SimCtl(spanset_sim::cli::ctl::SimCtlArgs),
    /// Print the target slices and the steps to reach them, without touching any cluster.
    Plan(plan::PlanArgs),
    /// Print spanset's CRDs as YAML (or write them into a directory).
    Crd(crd::CrdArgs),
    /// Run the controller against a host cluster and its members.
    Run(run::RunArgs),
    /// Run the whole product on simulated clusters: host, members, controller and an example
    /// (each cluster's DNS printed as `dns NAME: 127.0.0.1:PORT`).
    #[cfg(feature = "sim")]
    Sandbox(sandbox::SandboxArgs),
    /// Show FederatedStatefulSets' readiness, conditions, slices and moves from the host cluster.
    Status(status::StatusArgs),
    /// Follow a federation's rolling update across its members (`rollout status`, as kubectl's).
    Rollout(rollout::RolloutArgs),
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
    /// Guard a pod of a federation with pod leases from inside it: `wait` (init container) and
    /// `watch` (sidecar) stop it before its member's pod Lease can lapse.
    Guard(guard::GuardArgs),
    /// Watch a federation's pods in its members and report any identity that ran in two at
    /// once (or judge a recording of such a watch).
    Audit(audit::AuditArgs),
    /// Print a shell completion script (bash, zsh or fish).
    Completion(completion::CompletionArgs),
    /// Print the version, the commit it was built from and the cargo features compiled in.
    Version(version::VersionArgs),
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

/// Why a cluster or member name is refused, if it is (they must be DNS labels).
pub fn bad_cluster_name(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 63 {
        return Some("must be 1 to 63 characters");
    }
    let ok_chars = name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ok_ends = !name.starts_with('-') && !name.ends_with('-');
    (!ok_chars || !ok_ends).then_some(
        "must be a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit)",
    )
}

/// Resolves on SIGINT or SIGTERM.
pub async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_sandbox_commands_exist_exactly_with_the_sim_feature() {
        let cli = Cli::command();
        let names: Vec<&str> = cli.get_subcommands().map(|c| c.get_name()).collect();
        for sandbox in ["sim", "sim-ctl", "sandbox"] {
            assert_eq!(names.contains(&sandbox), cfg!(feature = "sim"), "{sandbox} in {names:?}");
        }
        for always in [
            "run",
            "status",
            "rollout",
            "fence",
            "unfence",
            "drill",
            "join",
            "unjoin",
            "plan",
            "crd",
            "version",
            "completion",
            "audit",
        ] {
            assert!(names.contains(&always), "{always} missing from {names:?}");
        }
        let drill = cli.find_subcommand("drill").expect("drill");
        let drills: Vec<&str> = drill.get_subcommands().map(|c| c.get_name()).collect();
        assert_eq!(drills.contains(&"cluster-loss"), cfg!(feature = "sim"), "{drills:?}");
        assert_eq!(drills.contains(&"chaos"), cfg!(feature = "sim"), "{drills:?}");
        assert!(drills.contains(&"evacuate"), "{drills:?}");
    }

    #[test]
    fn every_command_printing_a_report_takes_the_same_output_formats() {
        let mut commands = vec![
            vec!["status"],
            vec!["plan", "-f", "fsts.yaml"],
            vec!["drill", "evacuate", "east", "--fsts", "default/redis"],
            vec!["audit", "redis", "--from", "audit.jsonl"],
        ];
        if cfg!(feature = "sim") {
            commands.push(vec!["drill", "cluster-loss", "east", "--fsts", "default/redis", "--admin", "http://x"]);
            commands.push(vec!["drill", "chaos", "--admin", "http://x"]);
        }
        for command in &commands {
            for format in ["table", "wide", "json", "yaml"] {
                let argv = [&["spanset"][..], command, &["-o", format]].concat();
                if let Err(e) = Cli::try_parse_from(&argv) {
                    panic!("{argv:?} is refused: {e}");
                }
            }
        }
    }
}
