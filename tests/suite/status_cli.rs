//! `spanset status` end to end: a `spanset sim` host cluster with the CRDs, FederatedStatefulSets
//! whose status is set through the status subresource as the controller would, and the real
//! binary reading them with `--kubeconfig` and `--context`, as a table and as JSON; plus the
//! not-found, missing-CRD, unknown-context and bad-flag paths.

use std::process::{Command, Output};

use jiff::SignedDuration;
use k8s_openapi::{
    api::core::v1::Namespace,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
};
use kube::{
    Api, Client, CustomResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use spanset_api::human::human_duration;
use spanset_api::{FederatedStatefulSet, FederatedStatefulSetStatus, MemberCluster, MoveStatus, SliceStatus};
use support::{Sandbox, succeeded};

use crate::support;

/// Runs `spanset status ARGS --kubeconfig <sandbox> --context host`.
fn status(sandbox: &Sandbox, args: &[&str]) -> Output {
    status_in(sandbox, "host", args)
}

fn status_in(sandbox: &Sandbox, context: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spanset"))
        .arg("status")
        .args(args)
        .arg("--kubeconfig")
        .arg(&sandbox.kubeconfig)
        .args(["--context", context])
        .output()
        .expect("spanset status runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Time(jiff::Timestamp::now()),
        observed_generation: Some(1),
    }
}

fn slice(cluster: &str, start: i32, replicas: i32, reserved: &[i32], ready: i32) -> SliceStatus {
    SliceStatus {
        cluster: cluster.into(),
        start,
        replicas,
        reserved_ordinals: reserved.to_vec(),
        ready_replicas: ready,
    }
}

/// The blog's redis, halfway through moving ordinal 5 to `destination`, and an Advanced
/// StatefulSet federation with a hole in one slice, in namespace `prod`.
async fn fleet_with_federations(sandbox: &Sandbox) -> Client {
    let client = spanset_controller::runtime::host_client::client(Some(&sandbox.kubeconfig), Some("host"))
        .await
        .expect("a client for the sandbox's host context");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [FederatedStatefulSet::crd(), MemberCluster::crd()] {
        crds.create(&PostParams::default(), &crd).await.expect("CRD installed");
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let prod: Namespace = serde_json::from_value(json!({"metadata": {"name": "prod"}})).unwrap();
    namespaces.create(&PostParams::default(), &prod).await.expect("namespace prod");

    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/federatedstatefulset.yaml"))
        .expect("the example exists");
    let redis: FederatedStatefulSet = serde_yaml::from_str(&example).expect("the example parses");
    let api: Api<FederatedStatefulSet> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &redis).await.expect("FederatedStatefulSet created");
    let since = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(125);
    let redis_status = FederatedStatefulSetStatus {
        observed_generation: Some(1),
        conditions: vec![
            condition("Ready", "False", "MoveInProgress", "ordinal 5 is moving from source to destination"),
            condition("Progressing", "True", "Moving", "1 of 6 ordinals to move"),
        ],
        slices: vec![slice("source", 0, 5, &[], 5), slice("destination", 5, 1, &[], 0)],
        moves: vec![MoveStatus {
            ordinal: 5,
            from: "source".into(),
            to: "destination".into(),
            phase: "Starting".into(),
            since: since.to_string(),
            stale_claims: None,
        }],
        ready_replicas: Some(5),
        ready: Some("5/6".into()),
        clusters: Some(2),
        moving: Some(1),
        ..FederatedStatefulSetStatus::default()
    };
    api.patch_status("redis-redis-cluster", &PatchParams::default(), &Patch::Merge(json!({"status": redis_status})))
        .await
        .expect("status written through the status subresource");

    let mut kruise = redis.clone();
    kruise.metadata.name = Some("kv".into());
    kruise.metadata.namespace = Some("prod".into());
    kruise.spec.replicas = 4;
    kruise.spec.backend = spanset_api::Backend::AdvancedStatefulSet;
    let prod_api: Api<FederatedStatefulSet> = Api::namespaced(client.clone(), "prod");
    prod_api.create(&PostParams::default(), &kruise).await.expect("second FederatedStatefulSet created");
    let kv_status = FederatedStatefulSetStatus {
        observed_generation: Some(1),
        conditions: vec![condition("Ready", "True", "AllReady", "4/4 replicas ready")],
        slices: vec![slice("source", 0, 3, &[1], 3), slice("destination", 1, 1, &[], 1)],
        ready_replicas: Some(4),
        ready: Some("4/4".into()),
        ..FederatedStatefulSetStatus::default()
    };
    prod_api
        .patch_status("kv", &PatchParams::default(), &Patch::Merge(json!({"status": kv_status})))
        .await
        .expect("status written");
    client
}

/// The whole seconds a phase begun at `since` has lasted at some instant of a run between
/// `asked` and `answered`: what its age may read, however slow the run.
fn ages(since: jiff::Timestamp, asked: jiff::Timestamp, answered: jiff::Timestamp) -> std::ops::RangeInclusive<i64> {
    asked.duration_since(since).as_secs()..=answered.duration_since(since).as_secs()
}

/// When the move in the redis federation's status began its phase.
async fn moving_since(sandbox: &Sandbox) -> jiff::Timestamp {
    let client = spanset_controller::runtime::host_client::client(Some(&sandbox.kubeconfig), Some("host"))
        .await
        .expect("a client for the sandbox's host context");
    let f = Api::<FederatedStatefulSet>::namespaced(client, "default").get("redis-redis-cluster").await.expect("read");
    f.status.expect("a status").moves[0].since.parse().expect("since is a timestamp")
}

/// The line of `table` whose first cell (after the indent) is `first`.
fn row<'a>(table: &'a str, first: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&first))
        .unwrap_or_else(|| panic!("no row starting with {first:?} in:\n{table}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_readiness_conditions_slices_and_moves_as_a_table_and_as_json() {
    let sandbox = Sandbox::start("host,member");
    fleet_with_federations(&sandbox).await;

    let asked = jiff::Timestamp::now();
    let table = succeeded("spanset status", status(&sandbox, &["default/redis-redis-cluster"]));
    let answered = jiff::Timestamp::now();
    assert!(table.starts_with("FEDERATION default/redis-redis-cluster\nREADY      5/6\n"), "{table}");
    assert!(table.contains("OBSERVED   generation 1, up to date"), "{table}");
    assert!(!table.contains("prod/kv"), "only the federation asked for:\n{table}");
    let ready = row(&table, "Ready");
    assert_eq!(ready[..3], ["Ready", "False", "MoveInProgress"]);
    assert!(table.contains("ordinal 5 is moving from source to destination"), "{table}");
    assert_eq!(row(&table, "Progressing")[..3], ["Progressing", "True", "Moving"]);
    assert_eq!(row(&table, "CLUSTER"), ["CLUSTER", "START", "REPLICAS", "RESERVED", "ORDINALS", "READY"]);
    assert_eq!(row(&table, "source"), ["source", "0", "5", "-", "0-4", "5/5"]);
    assert_eq!(row(&table, "destination"), ["destination", "5", "1", "-", "5", "0/1"]);
    let mv = row(&table, "5");
    assert_eq!(mv[..5], ["5", "source", "->", "destination", "Starting"]);
    let since = moving_since(&sandbox).await;
    let shown: Vec<String> =
        ages(since, asked, answered).map(|s| human_duration(SignedDuration::from_secs(s))).collect();
    assert!(shown.iter().any(|a| a == mv[5]), "the phase's age as of the run, one of {shown:?}: {mv:?}");

    let asked = jiff::Timestamp::now();
    let out = succeeded("spanset status -o json", status(&sandbox, &["default/redis-redis-cluster", "-o", "json"]));
    let answered = jiff::Timestamp::now();
    let doc: Value = serde_json::from_str(&out).expect("stdout is JSON");
    let feds = doc["federations"].as_array().expect("a federations list");
    assert_eq!(feds.len(), 1);
    let f = &feds[0];
    assert_eq!((f["namespace"].as_str(), f["name"].as_str()), (Some("default"), Some("redis-redis-cluster")));
    assert_eq!(
        (f["replicas"].as_i64(), f["ready"].as_str(), f["readyReplicas"].as_i64()),
        (Some(6), Some("5/6"), Some(5))
    );
    assert_eq!((f["generation"].as_i64(), f["observedGeneration"].as_i64()), (Some(1), Some(1)));
    assert_eq!(f["conditions"][0]["type"], "Ready");
    assert_eq!(f["conditions"][0]["reason"], "MoveInProgress");
    assert_eq!(f["conditions"][1]["status"], "True");
    assert_eq!(
        f["clusters"],
        json!([
            {"cluster": "source", "start": 0, "replicas": 5, "reservedOrdinals": [], "ordinals": "0-4", "readyReplicas": 5},
            {"cluster": "destination", "start": 5, "replicas": 1, "reservedOrdinals": [], "ordinals": "5", "readyReplicas": 0},
        ])
    );
    let m = &f["moves"][0];
    assert_eq!(
        (m["ordinal"].as_i64(), m["from"].as_str(), m["to"].as_str()),
        (Some(5), Some("source"), Some("destination"))
    );
    assert_eq!(m["phase"], "Starting");
    let age = m["ageSeconds"].as_i64().expect("an age");
    let since = m["since"].as_str().unwrap().parse::<jiff::Timestamp>().expect("since is a timestamp");
    assert!(ages(since, asked, answered).contains(&age), "age {age}: not the phase's age as of the run");
    assert_eq!(f["problems"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_argument_status_lists_every_federation_in_every_namespace() {
    let sandbox = Sandbox::start("host,member");
    fleet_with_federations(&sandbox).await;

    let table = succeeded("spanset status", status(&sandbox, &[]));
    let first = table.find("FEDERATION default/redis-redis-cluster").expect("redis listed");
    let second = table.find("FEDERATION prod/kv").expect("kv listed");
    assert!(first < second, "sorted by namespace and name:\n{table}");
    let kv = &table[second..];
    assert!(kv.contains("READY      4/4"), "{kv}");
    // An Advanced StatefulSet slice with ordinal 1 reserved owns 0, 2 and 3.
    assert_eq!(row(kv, "source"), ["source", "0", "3", "1", "0,2-3", "3/3"]);
    assert!(kv.contains("MOVES\n  (none in flight)"), "{kv}");

    let out = succeeded("spanset status -o json", status(&sandbox, &["-o", "json"]));
    let doc: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<(&str, &str)> = doc["federations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["namespace"].as_str().unwrap(), f["name"].as_str().unwrap()))
        .collect();
    assert_eq!(names, [("default", "redis-redis-cluster"), ("prod", "kv")]);
    assert_eq!(doc["federations"][1]["clusters"][0]["reservedOrdinals"], json!([1]));
    assert_eq!(doc["federations"][1]["moves"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_and_output_formats_work_as_in_kubectl() {
    let sandbox = Sandbox::start("host,member");
    fleet_with_federations(&sandbox).await;
    // -n NS: every federation of that namespace only; with NAME, that one.
    let prod = succeeded("spanset status -n prod", status(&sandbox, &["-n", "prod"]));
    assert!(prod.contains("FEDERATION prod/kv") && !prod.contains("redis-redis-cluster"), "{prod}");
    let one = succeeded("spanset status kv -n prod", status(&sandbox, &["kv", "-n", "prod"]));
    assert!(one.contains("FEDERATION prod/kv"), "{one}");
    // -A: all of them; -o name like kubectl's.
    let names = succeeded("spanset status -A -o name", status(&sandbox, &["-A", "-o", "name"]));
    assert_eq!(names, "federatedstatefulset.spanset.dev/redis-redis-cluster\nfederatedstatefulset.spanset.dev/kv\n");
    // -o yaml: the JSON document as YAML.
    let yaml = succeeded("spanset status -o yaml", status(&sandbox, &["-n", "prod", "-o", "yaml"]));
    let doc: Value = serde_yaml::from_str(&yaml).expect("YAML");
    assert_eq!(doc["federations"][0]["name"], "kv");
    // -o wide: the table and the rollout line.
    let wide = succeeded("spanset status -o wide", status(&sandbox, &["-n", "prod", "-o", "wide"]));
    assert!(wide.contains("ROLLOUT    revision -, - updated, - available"), "{wide}");
    // A namespace given twice must agree; -A with a name is refused; both exit 2.
    for args in [&["prod/kv", "-n", "default"][..], &["kv", "-A"][..], &["-A", "-n", "prod"][..]] {
        let out = status(&sandbox, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // An empty namespace says so.
    let out = status(&sandbox, &["-n", "nowhere"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no FederatedStatefulSets found in namespace nowhere"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_federations_crds_and_contexts_are_one_line_errors_and_bad_flags_exit_2() {
    let sandbox = Sandbox::start("host,member");
    fleet_with_federations(&sandbox).await;

    let out = status(&sandbox, &["default/nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "spanset: federatedstatefulset default/nope not found\n");
    assert!(out.stdout.is_empty());
    // NAME alone: the context's namespace (default).
    let out = status(&sandbox, &["nope"]);
    assert_eq!(stderr(&out), "spanset: federatedstatefulset default/nope not found\n");
    succeeded("spanset status NAME", status(&sandbox, &["redis-redis-cluster"]));

    // The member cluster has no CRDs.
    let out = status_in(&sandbox, "member", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not serve spanset.dev/v1alpha1"), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1);

    let out = status_in(&sandbox, "elsewhere", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "spanset: kubeconfig {} has no context \"elsewhere\" (contexts: host, member)\n",
            sandbox.kubeconfig.display()
        )
    );
    let missing = sandbox.dir.path().join("no-such-kubeconfig");
    let out =
        Command::new(env!("CARGO_BIN_EXE_spanset")).args(["status", "--kubeconfig"]).arg(&missing).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), format!("spanset: kubeconfig {} does not exist\n", missing.display()));

    for bad in [&["-o", "toml"][..], &["a/b/c"], &["--watch"], &["x", "y"]] {
        let out = status(&sandbox, bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.starts_with("spanset: ") && err.ends_with("(see --help)\n") && err.lines().count() == 1, "{err}");
    }
}
