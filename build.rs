//! Build script: records which commit and which cargo features the binary was built from, for
//! `spanset version`. A build without git (a source tarball, an image build without `.git`)
//! still succeeds and says `unknown`; `SPANSET_GIT_COMMIT` set at build time overrides it.

use std::{path::Path, process::Command};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-env-changed=SPANSET_GIT_COMMIT");
    let commit = std::env::var("SPANSET_GIT_COMMIT").ok().filter(|c| !c.trim().is_empty()).or_else(git_commit);
    println!("cargo:rustc-env=SPANSET_GIT_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
    println!("cargo:rustc-env=SPANSET_FEATURES={}", features().join(","));
}

/// `git rev-parse --short HEAD`, and a rerun whenever HEAD or the branch it names moves (so a
/// commit rebuilds with the new hash); `None` without git or outside a repository.
fn git_commit() -> Option<String> {
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    // `--git-path` resolves through worktrees: HEAD is the worktree's, the refs the common ones.
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])?];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &branch])?);
    }
    watched.push(git(&["rev-parse", "--git-path", "packed-refs"])?);
    // A missing file would rerun this script (and rebuild the crate) on every build.
    for path in watched.iter().filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
    Some(commit)
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The features of `[features]` in Cargo.toml that this build enables, by their own names
/// (cargo tells a build script only the upper-cased `CARGO_FEATURE_*` form).
fn features() -> Vec<String> {
    let manifest = std::fs::read_to_string("Cargo.toml").unwrap_or_default();
    let mut in_features = false;
    let mut enabled = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_features = line == "[features]";
            continue;
        }
        let Some((name, _)) = line.split_once('=').filter(|_| in_features && !line.starts_with('#')) else {
            continue;
        };
        let name = name.trim();
        let var = format!("CARGO_FEATURE_{}", name.to_uppercase().replace('-', "_"));
        if name != "default" && std::env::var_os(var).is_some() {
            enabled.push(name.to_string());
        }
    }
    enabled.sort();
    enabled
}
