//! `spanset crd`: prints spanset's CRDs as YAML, or writes one file per CRD into a directory
//! (how `deploy/crds/` is generated).

use std::path::PathBuf;

/// Flags of `spanset crd`.
#[derive(Debug, clap::Args)]
pub struct CrdArgs {
    /// Write one file per CRD into this directory instead of printing.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Runs `spanset crd`; returns the exit code.
pub fn run(args: CrdArgs) -> i32 {
    match args.dir {
        None => {
            print!("{}", spanset_api::crds_yaml());
            0
        }
        Some(dir) => {
            for (name, yaml) in spanset_api::crd_files() {
                let path = dir.join(&name);
                if let Err(e) = std::fs::write(&path, yaml) {
                    eprintln!("spanset: cannot write {}: {e}", path.display());
                    return 1;
                }
                println!("wrote {}", path.display());
            }
            0
        }
    }
}
