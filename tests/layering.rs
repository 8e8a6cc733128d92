//! The module boundaries the design sets, checked on the source: the controller never imports
//! the sandbox (it must run unchanged against real clusters), and the planner stays pure (no
//! I/O, actors or clients), so property tests reach all of it.

use std::path::Path;

fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("source directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((path.display().to_string(), std::fs::read_to_string(&path).expect("source file")));
        }
    }
    out
}

fn offenders(dir: &str, forbidden: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut found = Vec::new();
    for (file, text) in sources(&root) {
        for (i, line) in text.lines().enumerate() {
            if forbidden.iter().any(|f| line.contains(f)) {
                found.push(format!("{file}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn the_controller_never_imports_the_sandbox() {
    let found = offenders("src/controller", &["crate::sim", "spanset::sim", "super::sim", "super::super::sim"]);
    assert!(found.is_empty(), "the controller imports the sandbox:\n{}", found.join("\n"));
}

#[test]
fn the_planner_does_no_io_and_knows_no_actors_or_clients() {
    let found =
        offenders("src/plan", &["actix", "kube::", "tokio", "std::fs", "std::net", "crate::controller", "crate::sim"]);
    assert!(found.is_empty(), "the planner is not pure:\n{}", found.join("\n"));
}

/// The sandbox's layers (README, "Code: src/sim/"): the store knows nothing of HTTP or of the
/// sandbox around it; the simulated components write through the store, never through the
/// HTTP layer; and neither the API server nor the cluster reaches up into the sandbox.
#[test]
fn the_sandbox_layers_point_inwards() {
    let store = offenders("src/sim/store", &["crate::sim::api", "crate::sim::sandbox"]);
    assert!(store.is_empty(), "the store reaches outwards:\n{}", store.join("\n"));
    let cluster = offenders("src/sim/cluster", &["crate::sim::api", "crate::sim::sandbox"]);
    assert!(cluster.is_empty(), "the simulated cluster reaches outwards:\n{}", cluster.join("\n"));
    let api = offenders("src/sim/api", &["crate::sim::sandbox", "crate::sim::dns"]);
    assert!(api.is_empty(), "the API server reaches into the sandbox:\n{}", api.join("\n"));
    // Cluster DNS reads the store as a client would see it, never through the HTTP layer.
    let dns = offenders("src/sim/dns", &["crate::sim::api", "crate::sim::sandbox"]);
    assert!(dns.is_empty(), "the cluster DNS reaches outwards:\n{}", dns.join("\n"));
}
