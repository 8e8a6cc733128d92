//! `spanset plan` end to end: the target and steps as a table, as JSON and as YAML, and the same
//! field-naming errors as the controller for an impossible spec, with exit code 1.

use std::process::Command;

fn spanset(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_spanset"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("spanset runs")
}

#[test]
fn plan_prints_the_blogs_migration_as_json_and_table() {
    let out = spanset(&[
        "plan",
        "-f",
        "examples/federatedstatefulset.yaml",
        "--current",
        "examples/current.yaml",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        doc["slices"],
        serde_json::json!([
            {"cluster": "source", "start": 0, "replicas": 0},
            {"cluster": "destination", "start": 0, "replicas": 6},
        ])
    );
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 12);
    assert_eq!(
        steps[0],
        serde_json::json!({"action": "shrink", "cluster": "source", "to": {"start": 0, "replicas": 5}, "releases": [5]})
    );
    assert_eq!(
        steps[1],
        serde_json::json!({"action": "grow", "cluster": "destination", "to": {"start": 5, "replicas": 1}, "acquires": [5]})
    );
    let table = spanset(&["plan", "-f", "examples/federatedstatefulset.yaml", "--current", "examples/current.yaml"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("destination      0      6"), "{text}");
    assert!(
        text.contains("12 steps:") && text.contains("1. shrink source to start=0 replicas=5 (releases [5])"),
        "{text}"
    );
}

#[test]
fn plan_prints_the_same_document_as_yaml_and_the_table_as_wide() {
    let plan = |format: &str| {
        let out = spanset(&[
            "plan",
            "-f",
            "examples/federatedstatefulset.yaml",
            "--current",
            "examples/current.yaml",
            "-o",
            format,
        ]);
        assert!(out.status.success(), "-o {format}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let json: serde_json::Value = serde_json::from_str(&plan("json")).expect("JSON");
    let yaml_text = plan("yaml");
    // JSON parses as YAML too: the YAML must be block style, not the JSON text.
    assert!(yaml_text.starts_with("slices:") || yaml_text.starts_with("excluded:"), "{yaml_text}");
    let yaml: serde_json::Value = serde_yaml::from_str(&yaml_text).expect("YAML");
    assert_eq!(json["steps"].as_array().map(Vec::len), Some(12), "{json}");
    assert_eq!(yaml, json, "-o yaml is the JSON document");
    let table = plan("table");
    assert!(table.starts_with("CLUSTER "), "{table}");
    assert_eq!(plan("wide"), table, "a plan has no extra columns: -o wide is the table");
}

#[test]
fn without_current_state_the_plan_starts_from_nothing_and_advanced_sets_reserve_ordinals() {
    let dir = tempfile::tempdir().unwrap();
    let spec =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/federatedstatefulset.yaml")).unwrap();
    let adv = spec
        .replace("backend: StatefulSet", "backend: AdvancedStatefulSet")
        .replace("{name: source, weight: 0}", "{name: source, weight: 1}");
    let path = dir.path().join("adv.yaml");
    std::fs::write(&path, adv).unwrap();
    let current = dir.path().join("current.yaml");
    // source owns {0, 2, 3}, destination {1}: nobody has to move, destination grows by {4, 5}.
    std::fs::write(
        &current,
        "clusters:\n  source: {start: 0, replicas: 3, reservedOrdinals: [1]}\n  destination: {start: 1, replicas: 1}\n",
    )
    .unwrap();
    let out = spanset(&["plan", "-f", path.to_str().unwrap(), "--current", current.to_str().unwrap(), "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["slices"],
        serde_json::json!([
            {"cluster": "source", "start": 0, "replicas": 3, "reservedOrdinals": [1]},
            {"cluster": "destination", "start": 1, "replicas": 3, "reservedOrdinals": [2, 3]},
        ])
    );
    assert_eq!(
        doc["steps"],
        serde_json::json!([{"action": "grow", "cluster": "destination", "to": {"start": 1, "replicas": 3, "reservedOrdinals": [2, 3]}, "acquires": [4, 5]}])
    );
    let fresh = spanset(&["plan", "-f", path.to_str().unwrap(), "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&fresh.stdout).unwrap();
    assert!(doc["steps"].as_array().unwrap().iter().all(|s| s["action"] == "grow"), "from nothing only grows: {doc}");
}

#[test]
fn impossible_specs_exit_1_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let spec =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/federatedstatefulset.yaml")).unwrap();
    let cases = [
        (
            spec.replace("{name: source, weight: 0}", "{name: source, weight: 1, minReplicas: 4}")
                .replace("{name: destination, weight: 1}", "{name: destination, weight: 1, minReplicas: 3}"),
            "spec.placement.clusters: the sum of minReplicas (7) exceeds spec.replicas (6)",
        ),
        (
            spec.replace("name: destination", "name: source"),
            "spec.placement.clusters[1].name: cluster \"source\" is listed twice",
        ),
        (
            spec.replace("maxConcurrentMoves: 1", "maxConcurrentMoves: 0"),
            "spec.migration.maxConcurrentMoves: must be at least 1",
        ),
        (spec.replace("replicas: 6", "replicas: -1"), "spec.replicas: must be at least 0, not -1"),
        (
            spec.replace(
                "{name: destination, weight: 1}",
                "{name: destination, weight: 1, minReplicas: 3, maxReplicas: 2}",
            ),
            "spec.placement.clusters[1].minReplicas: minReplicas (3) exceeds maxReplicas (2)",
        ),
        ("not: [valid".to_string(), "is not valid"),
        (spec.replace("replicas: 6", "replicas: six"), "is not valid"),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.yaml"));
        std::fs::write(&path, text).unwrap();
        let out = spanset(&["plan", "-f", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "case {i}: {err}");
        assert!(err.contains(expected), "case {i}: expected {expected:?} in {err}");
        assert!(out.stdout.is_empty(), "nothing printed for an invalid spec");
    }
    let missing = spanset(&["plan", "-f", "/nonexistent.yaml"]);
    assert_eq!(missing.status.code(), Some(1));
    let bad_flag = spanset(&["plan", "-f", "x", "-o", "xml"]);
    assert_eq!(bad_flag.status.code(), Some(2));
}

#[test]
fn a_long_migration_lists_its_first_and_last_steps_unless_asked_for_all() {
    let dir = tempfile::tempdir().unwrap();
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/federatedstatefulset.yaml"))
        .unwrap()
        .replace("replicas: 6\n", "replicas: 1000\n");
    let (fsts, current) = (dir.path().join("fsts.yaml"), dir.path().join("current.yaml"));
    std::fs::write(&fsts, spec).unwrap();
    std::fs::write(&current, "clusters:\n  source: {start: 0, replicas: 1000}\n").unwrap();
    let (fsts, current) = (fsts.to_str().unwrap(), current.to_str().unwrap());
    let out = spanset(&["plan", "-f", fsts, "--current", current, "--max-steps", "6"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let listed: Vec<&str> =
        text.lines().filter(|l| l.trim_start().split('.').next().is_some_and(|n| n.parse::<u32>().is_ok())).collect();
    assert_eq!(listed.len(), 6, "{text}");
    assert!(text.contains("2000 steps:"), "{text}");
    assert!(text.contains("  1. shrink source to start=0 replicas=999 (releases [999])"), "{text}");
    assert!(text.contains("… 1994 more steps"), "{text}");
    assert!(text.contains("2000. grow destination to start=0 replicas=1000 (acquires [0])"), "{text}");
    let all = spanset(&["plan", "-f", fsts, "--current", current, "--max-steps", "0"]);
    let all = String::from_utf8_lossy(&all.stdout);
    assert!(!all.contains("more steps"), "{all}");
    assert!(all.contains("1000. grow destination to start=500 replicas=500 (acquires [500])"), "{all}");
    let json = spanset(&["plan", "-f", fsts, "--current", current, "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(doc["steps"].as_array().unwrap().len(), 2000);
}

#[test]
fn the_advanced_example_sends_each_ordinal_straight_to_its_cluster() {
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/advanced-statefulset.yaml")).unwrap();
    let fsts: spanset_api::FederatedStatefulSet = serde_yaml::from_str(&example).expect("the example parses");
    fsts.validate_cel().expect("the example passes the CRD's rules");
    assert_eq!(fsts.spec.backend, spanset_api::Backend::AdvancedStatefulSet);
    // Central's weight to 0 from thirds: its 0 and 1 go to east and west; nothing else moves.
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("kv.yaml");
    std::fs::write(&spec, example.replace("{name: central, weight: 1}", "{name: central, weight: 0}")).unwrap();
    let current = dir.path().join("current.yaml");
    std::fs::write(
        &current,
        "clusters:\n  central: {start: 0, replicas: 2}\n  east: {start: 2, replicas: 2}\n  west: {start: 4, replicas: 2}\n",
    )
    .unwrap();
    let out = spanset(&["plan", "-f", spec.to_str().unwrap(), "--current", current.to_str().unwrap(), "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        doc["slices"],
        serde_json::json!([
            {"cluster": "central", "start": 0, "replicas": 0},
            {"cluster": "east", "start": 0, "replicas": 3, "reservedOrdinals": [1]},
            {"cluster": "west", "start": 1, "replicas": 3, "reservedOrdinals": [2, 3]},
        ])
    );
    let acquired: Vec<u64> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["action"] == "grow")
        .flat_map(|s| s["acquires"].as_array().unwrap().iter().filter_map(|k| k.as_u64()))
        .collect();
    assert_eq!(acquired.len(), 2, "only central's two ordinals move: {}", doc["steps"]);
}

#[test]
fn a_scale_down_plans_from_the_balanced_placement_in_the_files_status() {
    let dir = tempfile::tempdir().unwrap();
    let spec =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/federatedstatefulset.yaml")).unwrap();
    let scaled = spec
        .replace("replicas: 6\n", "replicas: 2\n")
        .replace("{name: source, weight: 0}", "{name: source, weight: 1}");
    let current = dir.path().join("current.yaml");
    std::fs::write(&current, "clusters:\n  source: {start: 0, replicas: 3}\n  destination: {start: 3, replicas: 3}\n")
        .unwrap();
    let plan = |yaml: &str, extra: &[&str]| {
        let path = dir.path().join("fsts.yaml");
        std::fs::write(&path, yaml).unwrap();
        let mut args = vec!["plan", "-f", path.to_str().unwrap(), "--current", current.to_str().unwrap(), "-o", "json"];
        args.extend(extra);
        let out = spanset(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    // The status says the 3/3 layout was divided for this placement: the scale keeps 0-1 in
    // source (onScale: Keep, the default) and only shrinks.
    let kept = plan(&format!("{scaled}status:\n  balancedPlacement: \"source:1,destination:1\"\n"), &[]);
    assert_eq!(
        kept["slices"],
        serde_json::json!([{"cluster": "source", "start": 0, "replicas": 2}, {"cluster": "destination", "start": 0, "replicas": 0}])
    );
    assert!(kept["steps"].as_array().unwrap().iter().all(|s| s["action"] == "shrink"), "{kept}");
    // Rebalance (or no stored placement) divides by weight: ordinal 1 moves to destination.
    let rebalanced = plan(
        &format!(
            "{}status:\n  balancedPlacement: \"source:1,destination:1\"\n",
            scaled.replace("    clusters:", "    onScale: Rebalance\n    clusters:")
        ),
        &[],
    );
    assert_eq!(rebalanced["slices"][1], serde_json::json!({"cluster": "destination", "start": 1, "replicas": 1}));
    assert_eq!(plan(&scaled, &[])["slices"], rebalanced["slices"]);
}
