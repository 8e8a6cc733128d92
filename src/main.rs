//! The `spanset` binary: parses the command line and runs the chosen subcommand.

mod allocator;

use spanset::cli::{self, Command};

/// mimalloc rather than glibc's malloc: the controller's allocations come in bursts (1,000
/// federations converging decode and build thousands of objects at once), and glibc kept what
/// a burst freed: at 100 members × 1,000 federations `malloc_trim` alone gave back 300 MiB of
/// the idle controller's 1.1 GiB. It purges freed memory at once (see [`allocator`]).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    allocator::return_freed_memory_at_once();
    let cli = cli::parse();
    let (default_level, json) = match &cli.command {
        Command::Run(args) => ("info", args.log_format == cli::run::LogFormat::Json),
        // A guard logs each change of what it waits for or does: the pod's logs say why.
        Command::Guard(_) => ("info", false),
        _ => ("warn", false),
    };
    // kube's client logs every failed connection and cut stream itself, hundreds a minute for a
    // member that is down; spanset logs the member's state changes instead (RUST_LOG brings
    // them back).
    let default_filter = format!("{default_level},kube_client::client=off,kube_client::client::builder=off");
    // An empty RUST_LOG counts as unset.
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| tracing_subscriber::EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| default_filter.into());
    // Colour only for a person at a terminal: a log file or a collector gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    if json {
        logs.json().init();
    } else {
        logs.init();
    }
    let code = match cli.command {
        #[cfg(feature = "sim")]
        Command::SimCtl(args) => spanset_sim::cli::ctl::run(args),
        Command::Plan(args) => cli::plan::run(args),
        Command::Crd(args) => cli::crd::run(args),
        Command::Run(args) => cli::run::run(args),
        #[cfg(feature = "sim")]
        Command::Sandbox(args) => cli::sandbox::run(args),
        #[cfg(feature = "sim")]
        Command::Sim(args) => runtime().block_on(spanset_sim::cli::serve::run(args, cli::wait_for_signal())),
        Command::Status(args) => runtime().block_on(cli::status::run(args)),
        Command::Rollout(args) => runtime().block_on(cli::rollout::run(args)),
        Command::Fence(args) => runtime().block_on(cli::fence::run_fence(args)),
        Command::Unfence(args) => runtime().block_on(cli::fence::run_unfence(args)),
        Command::Drill(args) => runtime().block_on(cli::drill::run(args)),
        Command::Join(args) => runtime().block_on(cli::join::run_join(args)),
        Command::Unjoin(args) => runtime().block_on(cli::join::run_unjoin(args)),
        Command::Audit(args) => runtime().block_on(cli::audit::run(args)),
        Command::Version(args) => cli::version::run(args),
        Command::Completion(args) => cli::completion::run(args),
        Command::Guard(args) => cli::guard::run(args),
    };
    std::process::exit(code);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
}
