//! `spanset run`: the controller process. Runs until SIGINT or SIGTERM; a stop never leaves a
//! half-written move, because every move's phase is stored before it is acted on.

use std::{net::SocketAddr, path::PathBuf};

use crate::controller::{
    app::{self, RunOptions},
    leader::Leadership,
};

/// Flags of `spanset run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Kubeconfig of the host cluster (members named by context use it too); default: KUBECONFIG,
    /// then ~/.kube/config, then the in-cluster service account.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the host cluster (default: the kubeconfig's current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Where /metrics, /healthz and /readyz listen.
    #[arg(long, default_value = "0.0.0.0:9464")]
    pub metrics_addr: SocketAddr,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Runs the controller until a signal; returns the exit code.
pub fn run(args: RunArgs) -> i32 {
    // Failpoints for crash tests (`FAILPOINTS=name=return`); nothing happens when unset.
    let _failpoints = fail::FailScenario::setup();
    actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
    })
    .block_on(async move {
        let opts = RunOptions { kubeconfig: args.kubeconfig, context: args.context, metrics_addr: args.metrics_addr };
        let running = match app::start(opts, Leadership::fixed(1)).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("spanset: {e:#}");
                return 1;
            }
        };
        super::sim::wait_for_signal().await;
        tracing::info!("signal received, stopping");
        running.stop().await;
        0
    })
}
