//! `spanset fence NAME --reason TEXT` and `spanset unfence NAME`: an operator's statement that a
//! lost member's workloads are dead (or no longer are), recorded on the MemberCluster.
//!
//! Fencing sets `spec.fenced`, which lets the controller re-home the member's ordinals to
//! healthy members; it records who, when and why in annotations and a Warning Event. Fencing a
//! member that the controller still reaches (`Reachable=True`) would declare running pods dead,
//! so it is refused unless `--force`. Unfencing clears `spec.fenced` and records who and when;
//! the controller shrinks a fenced member's StatefulSets when it answers again, whether or not
//! it is unfenced yet. Unfencing a member that was never shrunk since the fence (a federation's
//! status still shows ordinals written there) is refused, naming them, unless `--force`: its
//! own StatefulSet controller would restart those re-homed ordinals when it returns. Both are idempotent. Exit codes: 0 done (or nothing to do), 1 refused or
//! the cluster could not be written (one line on stderr), 2 bad flags.

use std::path::PathBuf;

use kube::Client;
use spanset_controller::host::{
    events::Recorder,
    fencing::{fence, unfence},
};

/// Flags of `spanset fence`.
#[derive(Debug, clap::Args)]
pub struct FenceArgs {
    /// The MemberCluster to fence.
    pub name: String,
    /// Why (recorded in the annotation `spanset.dev/fence-reason` and the Event).
    #[arg(long)]
    pub reason: String,
    /// Fence even though the controller still reaches the member (its pods may be running);
    /// on a fenced member, fence it anew (a new fenced-at: one heard from since its fence, which
    /// holds what it was last seen to run, is declared dead again).
    #[arg(long)]
    pub force: bool,
    /// Kubeconfig of the host cluster (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig (default: its current context).
    #[arg(long, value_name = "CTX")]
    pub context: Option<String>,
}

/// Flags of `spanset unfence`.
#[derive(Debug, clap::Args)]
pub struct UnfenceArgs {
    /// The MemberCluster to unfence.
    pub name: String,
    /// Unfence even though a federation's status says the member's StatefulSets still hold
    /// ordinals (it was never shrunk since the fence): they may run twice when it returns.
    #[arg(long)]
    pub force: bool,
    /// Kubeconfig of the host cluster (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig (default: its current context).
    #[arg(long, value_name = "CTX")]
    pub context: Option<String>,
}

/// Who runs the command, for the record: `$USER@host`.
fn operator() -> String {
    let user = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| "unknown".into());
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{user}@{host}")
}

async fn connect(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> Result<Client, String> {
    spanset_controller::runtime::app::host_client(kubeconfig, context)
        .await
        .map_err(|e| format!("cannot reach the host cluster: {e}"))
}

fn finish(res: Result<String, String>) -> i32 {
    match res {
        Ok(line) => {
            println!("{line}");
            0
        }
        Err(line) => {
            eprintln!("spanset: {line}");
            1
        }
    }
}

/// Runs `spanset fence`.
pub async fn run_fence(args: FenceArgs) -> i32 {
    if args.reason.trim().is_empty() {
        return finish(Err("--reason must say why the member is fenced".into()));
    }
    let res = async {
        let client = connect(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
        let mut events = Recorder::for_component(client.clone(), "spanset.dev/cli", operator());
        fence(&client, &args.name, &args.reason, &operator(), args.force, &mut events).await
    };
    finish(res.await)
}

/// Runs `spanset unfence`.
pub async fn run_unfence(args: UnfenceArgs) -> i32 {
    let res = async {
        let client = connect(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
        let mut events = Recorder::for_component(client.clone(), "spanset.dev/cli", operator());
        unfence(&client, &args.name, &operator(), args.force, &mut events).await
    };
    finish(res.await)
}
