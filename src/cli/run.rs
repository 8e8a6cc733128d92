//! `spanset run`: the controller process. Runs until SIGINT or SIGTERM; a stop never leaves a
//! half-written move, because every move's phase is stored before it is acted on.

use std::{net::SocketAddr, path::PathBuf};

use spanset_controller::{
    decisions::bounds::ReplicaBounds,
    leadership::leader::LeaseSettings,
    runtime::app::{self, RunOptions},
};

/// A process identity unique enough for the Lease: host name, process id, random suffix.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "spanset".into());
    format!("{host}-{}-{:08x}", std::process::id(), rand::random::<u32>())
}

/// The Lease settings from the flags; the error names the flag.
pub fn lease_settings(args: &RunArgs) -> Result<LeaseSettings, String> {
    let secs = |flag: &str, v: f64| {
        if v.is_finite() && v > 0.0 && v < 86_400.0 {
            Ok(std::time::Duration::from_secs_f64(v))
        } else {
            Err(format!("{flag}: must be a number of seconds above 0, not {v}"))
        }
    };
    let mut s = LeaseSettings::new(
        args.lease_namespace.clone(),
        args.lease_name.clone(),
        args.identity.clone().unwrap_or_else(default_identity),
    );
    s.lease_duration = secs("--lease-duration", args.lease_duration)?;
    s.renew_deadline = secs("--renew-deadline", args.renew_deadline)?;
    s.retry_period = secs("--retry-period", args.retry_period)?;
    s.validate()?;
    Ok(s)
}

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
    /// Namespace of the leader Lease in the host (default: $POD_NAMESPACE, else `default`).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,
    /// Name of the leader Lease (with --shards above 1: the prefix of each shard's Lease,
    /// NAME-shard-S-of-N, and of each replica's presence Lease, NAME-replica-HASH).
    #[arg(long, default_value = "spanset-leader")]
    pub lease_name: String,
    /// Divide federations into this many shards, each led through its own Lease, so that
    /// several replicas share the work: each replica leads at most its fair share of the shards
    /// (shards / live replicas, rounded up). Every replica must run with the same number.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=spanset_controller::leadership::shards::MAX_SHARDS as i64))]
    pub shards: u32,
    /// This process's identity in the Lease (default: host name, process id and a random suffix).
    #[arg(long)]
    pub identity: Option<String>,
    /// Seconds a candidate waits after the Lease last changed before taking over.
    #[arg(long, default_value_t = 15.0)]
    pub lease_duration: f64,
    /// Seconds the leader leads after its last successful renewal began (below --lease-duration).
    #[arg(long, default_value_t = 10.0)]
    pub renew_deadline: f64,
    /// Seconds between renewals and between a candidate's reads of the Lease.
    #[arg(long, default_value_t = 2.0)]
    pub retry_period: f64,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Most replicas one federation may have; a larger spec.replicas is held at the replicas
    /// accepted before (a new federation above it is Blocked). 0: no ceiling.
    #[arg(long, default_value_t = ReplicaBounds::default().ceiling)]
    pub max_federation_replicas: u32,
    /// Largest change of a federation's spec.replicas at once, up or down; a larger one is held
    /// until changed in steps or approved with the annotation spanset.dev/approve-replicas=N.
    /// 0: no limit.
    #[arg(long, default_value_t = ReplicaBounds::default().step)]
    pub max_replica_step: u32,
    /// Stop when the process with this id is no longer the parent (for a drill's own
    /// controllers, so that a drill killed with SIGKILL leaves none behind; the id is given, not
    /// read, since the parent may die before this process reads it).
    #[arg(long, hide = true, value_name = "PID")]
    pub exit_with_parent: Option<u32>,
    /// Test only: the controller version this process stamps on what it writes and compares
    /// with the versions it reads (default: this binary's), so that one binary can play two
    /// versions of a rolling update. Never set it in production: a wrong version makes replicas
    /// step down for good, or undo a newer one's writes.
    #[arg(long, hide = true, env = spanset_controller::leadership::written_by::VERSION_OVERRIDE_ENV, value_name = "X.Y.Z")]
    pub written_by_version: Option<String>,
    /// Lead even over objects a newer controller version wrote (`spanset.dev/written-by`),
    /// which otherwise make this process stand aside for good: for a deliberate rollback only
    /// (docs/operations/upgrade.md). Remove it before the next upgrade: while it is set, this
    /// version undoes what a newer one writes.
    #[arg(long)]
    pub accept_downgrade: bool,
    /// Self-fencing pods (spec.failover.podLease): the bound on any clock's rate error, as a
    /// fraction (0.01: a clock may run 1 % fast or slow). spanset and the guards each stretch
    /// their spans by it, so a larger bound re-homes later and stops pods sooner.
    #[arg(long, default_value_t = 0.01, value_name = "FRACTION")]
    pub pod_lease_drift: f64,
    /// Self-fencing pods: how late a member write spanset gave up on may still land there, in
    /// seconds (a kube-apiserver finishes or drops a request within its --request-timeout, one
    /// minute by default). An extension without an answer delays the lapse by this much.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub member_write_deadline: u64,
    /// Self-fencing pods: the image of the guard containers added to the pods (spanset's own;
    /// its entrypoint is `spanset`, given `guard wait|watch` and their flags as arguments).
    #[arg(long, default_value_t = spanset_controller::pod_lease::settings::default_guard_image())]
    pub guard_image: String,
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
    // Failpoints for crash tests (`FAILPOINTS=name=return`); nothing happens when unset, and
    // the production build (no `failpoints` feature) has neither the points nor this setup.
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
    })
    .block_on(async move {
        let lease = match lease_settings(&args) {
            Ok(l) => l,
            Err(e) => super::usage_error(&e),
        };
        if let Some(version) = &args.written_by_version
            && let Err(e) = spanset_controller::leadership::written_by::set_version(version)
        {
            super::usage_error(&format!("--written-by-version: {e}"));
        }
        if args.accept_downgrade {
            tracing::warn!("--accept-downgrade: leading over objects written by newer controller versions");
            spanset_controller::leadership::written_by::accept_downgrade();
        }
        let pod_leases = spanset_controller::pod_lease::settings::Settings {
            drift: args.pod_lease_drift,
            write_deadline: std::time::Duration::from_secs(args.member_write_deadline),
            guard_image: args.guard_image.clone(),
        };
        if let Err(e) = spanset_controller::pod_lease::settings::configure(pod_leases) {
            super::usage_error(&e);
        }
        // The CRDs first: a CRD older than this binary would prune what it writes.
        match app::host_client(args.kubeconfig.as_deref(), args.context.as_deref()).await {
            Ok(host) => {
                if let Err(e) = spanset_controller::runtime::crd_check::check(&host).await {
                    eprintln!("spanset: {e}");
                    return 1;
                }
            }
            Err(e) => {
                eprintln!("spanset: {e:#}");
                return 1;
            }
        }
        let opts = RunOptions {
            kubeconfig: args.kubeconfig,
            context: args.context,
            metrics_addr: args.metrics_addr,
            lease: Some(lease),
            bounds: ReplicaBounds { ceiling: args.max_federation_replicas, step: args.max_replica_step },
            shards: args.shards,
        };
        let running = match app::start(opts).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("spanset: {e:#}");
                return 1;
            }
        };
        if let Some(parent) = args.exit_with_parent {
            tokio::select! {
                _ = super::wait_for_signal() => tracing::info!("signal received, stopping"),
                _ = parent_exit(parent) => {
                    tracing::warn!("parent process gone, stopping");
                    // Nobody waits for this process: a stop that hangs must not keep it.
                    let stopped = tokio::time::timeout(std::time::Duration::from_secs(5), running.stop()).await;
                    return i32::from(stopped.is_err());
                }
            }
        } else {
            super::wait_for_signal().await;
            tracing::info!("signal received, stopping");
        }
        running.stop().await;
        0
    })
}

/// Resolves once `parent` is not (or no longer) this process's parent.
async fn parent_exit(parent: u32) {
    while std::os::unix::process::parent_id() == parent {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}
