//! The cargo features that keep the sandbox and the failpoints out of the production image
//! (docs/development.md, "Cargo features"): the production build (`--no-default-features`, as the
//! `Dockerfile` builds it) compiles, has neither, and every test or bench that needs the
//! sandbox says so in `Cargo.toml`, so that cargo skips it in that build (the test suite is
//! one binary, so its `[[test]]` entry requires what any of its modules needs).

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A cargo command in the repository, without the variables cargo sets for a running test:
/// build scripts track some (ring's reads `CARGO_MANIFEST_DIR`), so passing them on would make
/// this check and the next plain `cargo check` rebuild each other's dependencies.
fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root());
    let set_for_tests = ["CARGO_MANIFEST_DIR", "CARGO_MANIFEST_PATH", "CARGO_CRATE_NAME", "CARGO_PRIMARY_PACKAGE"];
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if set_for_tests.contains(&name.as_ref())
            || ["CARGO_PKG_", "CARGO_BIN_", "CARGO_TARGET_TMPDIR", "CARGO_RUSTC_"].iter().any(|p| name.starts_with(p))
        {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd
}

/// `required-features` of each `[[test]]` or `[[bench]]` entry of Cargo.toml, by name.
fn required_features(kind: &str) -> Vec<(String, Vec<String>)> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let header = format!("[[{kind}]]");
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == header;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let value = value.trim();
        match key.trim() {
            "name" if inside => out.push((value.trim_matches('"').to_string(), Vec::new())),
            "required-features" if inside => {
                let features = value.trim_matches(['[', ']']).split(',').map(|f| f.trim().trim_matches('"'));
                let entry = out.last_mut().expect("required-features after name in a Cargo.toml entry");
                entry.1 = features.filter(|f| !f.is_empty()).map(str::to_string).collect();
            }
            _ => {}
        }
    }
    out
}

/// The features a target's source shows it needs: the sandbox (the test harness, the `sim`
/// module, the sandbox's commands) and the failpoints (`FAILPOINTS`).
fn needed(source: &str) -> Vec<&'static str> {
    let sandbox =
        ["mod support;", "use crate::support;", "spanset::sim::", "cli::sandbox::", "sim_ctl::", "cluster_loss"];
    let mut out = Vec::new();
    if sandbox.iter().any(|s| source.contains(s)) {
        out.push("sim");
    }
    if source.contains("FAILPOINTS") {
        out.push("failpoints");
    }
    out
}

/// What the targets of `dir` lack of the features their sources need: each file is its own
/// target (`[[bench]]`s), or all are modules of the one target `one` (the test suite).
fn missing_requirements(dir: &str, kind: &str, one: Option<&str>) -> Vec<String> {
    let declared = required_features(kind);
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root().join(dir)).expect("target directory") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let name = path.file_stem().expect("file name").to_string_lossy().to_string();
        if name == "features" {
            continue; // this file names the markers without using them
        }
        let source = std::fs::read_to_string(&path).expect("source");
        let target = one.unwrap_or(&name);
        let has = declared.iter().find(|(n, _)| n == target).map(|(_, f)| f.clone()).unwrap_or_default();
        for feature in needed(&source) {
            if !has.iter().any(|f| f == feature) {
                missing.push(format!(
                    "{dir}/{name}.rs needs `required-features = [.., \"{feature}\"]` in [[{kind}]] {target}"
                ));
            }
        }
    }
    missing
}

#[test]
fn every_test_and_bench_on_the_sandbox_requires_its_features() {
    let mut missing = missing_requirements("tests/suite", "test", Some("suite"));
    missing.extend(missing_requirements("benches", "bench", None));
    assert!(missing.is_empty(), "add to Cargo.toml:\n{}", missing.join("\n"));
    // The check sees what it must: the suite is listed with both (its sandbox tests need `sim`,
    // its crash tests `failpoints`), a sandbox bench with `sim`, the planner's bench with nothing.
    let of = |kind: &str, name: &str| required_features(kind).into_iter().find(|(n, _)| n == name).map(|(_, f)| f);
    assert_eq!(of("test", "suite"), Some(vec!["sim".to_string(), "failpoints".to_string()]));
    assert_eq!(of("bench", "failover"), Some(vec!["sim".to_string()]));
    assert_eq!(of("bench", "plan"), Some(vec![]));
    assert!(needed(&std::fs::read_to_string(root().join("tests/suite/storage.rs")).unwrap()).contains(&"failpoints"));
}

/// `(package, enabled features)` of every normal dependency of the production build.
fn production_tree() -> Vec<(String, String)> {
    let out = cargo()
        .args(["tree", "--no-default-features", "--locked", "--offline", "-e", "normal", "--prefix", "none"])
        .args(["--format", "{p}|{f}"])
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(p, f)| (p.split_whitespace().next().unwrap_or_default().to_string(), f.trim().to_string()))
        .collect()
}

#[test]
fn the_production_build_has_no_sandbox_and_no_failpoints() {
    let tree = production_tree();
    let features_of =
        |package: &str| -> Vec<String> { tree.iter().filter(|(p, _)| p == package).map(|(_, f)| f.clone()).collect() };
    assert_eq!(features_of("spanset"), [""], "the production build enables no feature of spanset");
    let fail = features_of("fail");
    assert!(!fail.is_empty(), "fail is a dependency (its macros compile to nothing): {tree:?}");
    assert!(fail.iter().all(|f| !f.contains("failpoints")), "fail's failpoints are on: {fail:?}");
    // rcgen mints the sandbox's certificates; nothing else in the tree needs it.
    assert!(features_of("rcgen").is_empty(), "the sandbox's certificate minting is in the build");
}

/// Runs `cargo check` of the production build with `target` as target directory; `None` if it
/// had to wait for another cargo holding that directory (it is stopped then).
fn check_production(target: &Path) -> Option<std::process::Output> {
    let mut child = cargo()
        .args(["check", "--no-default-features", "--locked", "--offline", "--all-targets"])
        .env("CARGO_TARGET_DIR", target)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cargo check runs");
    let stderr = child.stderr.take().expect("piped stderr");
    let (lines, waiting) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            // (A wait for the package cache, e.g. on the `cargo tree` beside, ends by itself.)
            if line.contains("file lock on build directory") || line.contains("file lock on artifact directory") {
                let _ = lines.send(());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    // Either the check ends (the reader sees the end of its stderr) or it says it waits.
    loop {
        if waiting.recv_timeout(std::time::Duration::from_millis(200)).is_ok() {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        if reader.is_finished() {
            break;
        }
    }
    let stderr = reader.join().expect("stderr reader");
    let mut out = child.wait_with_output().expect("cargo check ends");
    out.stderr = stderr.into_bytes();
    Some(out)
}

/// The production build compiles (without the sandbox, the failpoints and their code), and so
/// do, without them, the unit tests and every test and bench that does not require them (a
/// unit test of the controller reaching into the sandbox fails here, not only in the image). It
/// shares the target directory of the build running this test, whose lock cargo has released
/// while tests run, so that dependencies `cargo clippy` already checked are reused (CI runs it
/// first); should another cargo hold that directory, it checks in `target/production` instead.
#[test]
fn the_production_build_compiles() {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
    let started = Instant::now();
    let out = check_production(&target).unwrap_or_else(|| {
        eprintln!("the target directory is busy; checking in {}", target.join("production").display());
        check_production(&target.join("production")).expect("target/production is this test's own")
    });
    eprintln!("cargo check --no-default-features: {:.0}s", started.elapsed().as_secs_f64());
    assert!(out.status.success(), "the production build does not compile:\n{}", String::from_utf8_lossy(&out.stderr));
}
