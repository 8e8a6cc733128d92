//! The `spanset` binary: parses the command line and runs the chosen subcommand.

use spanset::cli::{self, Command};

fn main() {
    let cli = cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let code = match cli.command {
        Command::SimCtl(args) => cli::sim_ctl::run(args),
        Command::Plan(args) => cli::plan::run(args),
        Command::Crd(args) => cli::crd::run(args),
        Command::Sim(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio runtime")
            .block_on(cli::sim::run(args)),
    };
    std::process::exit(code);
}
