//! The planner stays pure: no I/O, so that property tests reach all of it. (That it knows no
//! actors, clients or runtime is its dependency list: none of them is in it.)

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
fn the_planner_does_no_io() {
    let found = offenders("src", &["std::fs", "std::net", "std::process", "std::env", "std::io"]);
    assert!(found.is_empty(), "the planner is not pure:\n{}", found.join("\n"));
}
