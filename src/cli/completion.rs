//! `spanset completion bash|zsh|fish`: prints a shell completion script generated from the
//! command line's own definition, so that completions never drift from the flags.

use clap::CommandFactory;

/// The shells a script is generated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// Bash (`source <(spanset completion bash)`).
    Bash,
    /// Zsh (a `_spanset` file on `$fpath`).
    Zsh,
    /// Fish (`spanset completion fish > ~/.config/fish/completions/spanset.fish`).
    Fish,
}

/// Flags of `spanset completion`.
#[derive(Debug, clap::Args)]
pub struct CompletionArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    let generator = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut command = super::Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(generator, &mut command, "spanset", &mut out);
    String::from_utf8(out).expect("clap_complete writes UTF-8")
}

/// Runs `spanset completion`; returns the exit code.
pub fn run(args: CompletionArgs) -> i32 {
    print!("{}", script(args.shell));
    0
}
