//! `spanset version` end to end: the built binary names its version, the commit checked out
//! when it was built (the build script rebuilds on every commit) and the features compiled in.

use std::process::Command;

use crate::support;

fn version(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_spanset")).arg("version").args(args).output().expect("spanset runs");
    support::succeeded("spanset version", out)
}

/// The features this test crate was compiled with, which are the binary's.
fn compiled_features() -> Vec<&'static str> {
    [("failpoints", cfg!(feature = "failpoints")), ("sim", cfg!(feature = "sim"))]
        .into_iter()
        .filter_map(|(name, on)| on.then_some(name))
        .collect()
}

/// What git says HEAD is, if git is here and this is a checkout.
fn head() -> Option<String> {
    let git = support::program("git", "git")?;
    let out = Command::new(git)
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn version_prints_the_version_the_commit_and_the_features_as_text_and_json() {
    let doc: serde_json::Value = serde_json::from_str(&version(&["-o", "json"])).expect("JSON");
    assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"), "{doc}");
    assert_eq!(doc["features"], serde_json::json!(compiled_features()), "{doc}");
    let commit = doc["commit"].as_str().expect("a commit string");
    match head() {
        Some(head) => assert_eq!(commit, head, "the binary's commit is not HEAD's"),
        None => assert_eq!(commit, "unknown"),
    }

    let text = version(&[]);
    let features = compiled_features().join(", ");
    assert_eq!(text, format!("version:  {}\ncommit:   {commit}\nfeatures: {features}\n", env!("CARGO_PKG_VERSION")));
}
