//! `spanset version [-o json]`: which build this is (version, commit, cargo features), so that
//! a bug report or an operator comparing two binaries can say exactly what runs; the build
//! script records the commit and the features.

use serde::Serialize;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One `key: value` line each.
    Text,
    /// One JSON object `{"version", "commit", "features"}`.
    Json,
}

/// Flags of `spanset version`.
#[derive(Debug, clap::Args)]
pub struct VersionArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// What `spanset version` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Build {
    /// The crate's version.
    pub version: &'static str,
    /// The short hash of the commit built, or `unknown` when built without git.
    pub commit: &'static str,
    /// The cargo features compiled in, sorted.
    pub features: Vec<&'static str>,
}

/// This binary's build.
pub fn build() -> Build {
    Build {
        version: env!("CARGO_PKG_VERSION"),
        commit: env!("SPANSET_GIT_COMMIT"),
        features: env!("SPANSET_FEATURES").split(',').filter(|f| !f.is_empty()).collect(),
    }
}

/// Runs `spanset version`; returns the exit code.
pub fn run(args: VersionArgs) -> i32 {
    let build = build();
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&build).expect("a build serializes")),
        Format::Text => {
            let features = if build.features.is_empty() { "none".to_string() } else { build.features.join(", ") };
            println!("version:  {}\ncommit:   {}\nfeatures: {features}", build.version, build.commit);
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_features_reported_are_the_ones_compiled_in() {
        let features = build().features;
        assert_eq!(features.contains(&"sim"), cfg!(feature = "sim"), "{features:?}");
        assert_eq!(features.contains(&"failpoints"), cfg!(feature = "failpoints"), "{features:?}");
        assert!(!features.contains(&"default"), "{features:?}");
    }
}
