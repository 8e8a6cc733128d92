//! The workspace's dependency graph, as the design sets it (docs/development.md, "Crates and
//! features"): the simulator depends on no crate of spanset's (it is the oracle spanset is
//! tested against), the controller never on the simulator, and the production build
//! (`--no-default-features`, as the `Dockerfile` builds it) has neither the simulator nor the
//! failpoints. Whether each target compiles without the default features is CI's
//! `cargo clippy --no-default-features --all-targets`.

use std::{path::Path, process::Command};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `cargo tree` of the workspace, `(package, enabled features)` per line, without the variables
/// cargo sets for a running test (build scripts track some, so passing them on would make the
/// next plain `cargo` rebuild dependencies).
fn tree(args: &[&str]) -> Vec<(String, String)> {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root());
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_") && name != "CARGO_HOME" {
            cmd.env_remove(name.as_ref());
        }
    }
    let out = cmd
        .args(["tree", "--locked", "--offline", "-e", "normal", "--prefix", "none", "--format", "{p}|{f}"])
        .args(args)
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(p, f)| (p.split_whitespace().next().unwrap_or_default().to_string(), f.trim().to_string()))
        .collect()
}

fn features_of<'a>(tree: &'a [(String, String)], package: &str) -> Vec<&'a str> {
    tree.iter().filter(|(p, _)| p == package).map(|(_, f)| f.as_str()).collect()
}

#[test]
fn the_production_build_has_no_sandbox_and_no_failpoints() {
    let tree = tree(&["-p", "spanset", "--no-default-features"]);
    assert_eq!(features_of(&tree, "spanset"), [""], "the production build enables no feature of spanset");
    assert!(features_of(&tree, "spanset-controller").iter().all(|f| f.is_empty()), "{tree:?}");
    assert!(features_of(&tree, "spanset-sim").is_empty(), "the simulator is in the production build");
    assert!(
        features_of(&tree, "spanset-control-plane").is_empty(),
        "the real-cluster harness is in the production build"
    );
    let fail = features_of(&tree, "fail");
    assert!(!fail.is_empty(), "fail is a dependency (its macros compile to nothing): {tree:?}");
    assert!(fail.iter().all(|f| !f.contains("failpoints")), "fail's failpoints are on: {fail:?}");
    // The simulator's own dependencies: certificate minting, DNS, WebSockets. (kube-cel's CRD
    // validation engine stays: kube's `cel` feature, which the CRDs' rules need, requires it.)
    for sim_only in ["rcgen", "hickory-server", "tokio-tungstenite"] {
        assert!(features_of(&tree, sim_only).is_empty(), "{sim_only} (the simulator's) is in the production build");
    }
    // The check sees the tree: the controller and its crates are there.
    for crate_ in ["spanset-controller", "spanset-api", "spanset-plan", "spanset-guard-exec"] {
        assert!(!features_of(&tree, crate_).is_empty(), "{crate_} is missing from {tree:?}");
    }
}

#[test]
fn the_simulator_depends_on_no_crate_of_spanset_and_the_controller_not_on_the_simulator() {
    let sim = tree(&["-p", "spanset-sim"]);
    let ours: Vec<&str> =
        sim.iter().map(|(p, _)| p.as_str()).filter(|p| p.starts_with("spanset") && *p != "spanset-sim").collect();
    assert!(ours.is_empty(), "the simulator depends on {ours:?}");
    let harness = tree(&["-p", "spanset-control-plane"]);
    let ours: Vec<&str> = harness
        .iter()
        .map(|(p, _)| p.as_str())
        .filter(|p| p.starts_with("spanset") && *p != "spanset-control-plane")
        .collect();
    assert!(ours.is_empty(), "the real-cluster harness depends on {ours:?}");
    assert!(!features_of(&sim, "hyper").is_empty(), "the check sees the simulator's tree: {sim:?}");
    let controller = tree(&["-p", "spanset-controller", "--all-features"]);
    assert!(features_of(&controller, "spanset-sim").is_empty(), "the controller depends on the simulator");
    let plan = tree(&["-p", "spanset-plan"]);
    let plan_deps: Vec<&str> = plan.iter().map(|(p, _)| p.as_str()).collect();
    for io in ["tokio", "kube", "actix", "hyper"] {
        assert!(!plan_deps.contains(&io), "the planner depends on {io}: {plan_deps:?}");
    }
}
