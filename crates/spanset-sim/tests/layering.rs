//! The sandbox's layers, checked on its source (docs/sandbox.md): each points inwards.

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

/// The sandbox's layers (docs/sandbox.md): the store knows nothing of HTTP or of the
/// sandbox around it; the simulated components write through the store, never through the
/// HTTP layer; and neither the API server nor the cluster reaches up into the sandbox.
#[test]
fn the_sandbox_layers_point_inwards() {
    let store = offenders("src/store", &["crate::api", "crate::sandbox"]);
    assert!(store.is_empty(), "the store reaches outwards:\n{}", store.join("\n"));
    let cluster = offenders("src/cluster", &["crate::api", "crate::sandbox"]);
    assert!(cluster.is_empty(), "the simulated cluster reaches outwards:\n{}", cluster.join("\n"));
    let api = offenders("src/api", &["crate::sandbox", "crate::dns"]);
    assert!(api.is_empty(), "the API server reaches into the sandbox:\n{}", api.join("\n"));
    // Cluster DNS reads the store as a client would see it, never through the HTTP layer.
    let dns = offenders("src/dns", &["crate::api", "crate::sandbox"]);
    assert!(dns.is_empty(), "the cluster DNS reaches outwards:\n{}", dns.join("\n"));
}
