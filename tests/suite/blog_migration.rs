//! The Kubernetes 1.27 start-ordinal blog's migration, by hand, on the sandbox: a 6-replica
//! StatefulSet moves from `source` to `destination` one ordinal at a time with the blog's own
//! commands, each ordinal's data arrives with it, and no identity ever runs in two places.

use crate::support;

use serde_json::Value;
use support::{DEADLINE, Kubectl, Sandbox, wait_until};

const STS: &str = include_str!("../../examples/blog-statefulset.yaml");

fn sts(start: u32, replicas: u32) -> String {
    STS.replace("REPLICAS", &replicas.to_string()).replace("START", &start.to_string())
}

fn json(k: &Kubectl, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&k.ok(&a)).expect("kubectl -o json")
}

fn pod_ready(k: &Kubectl, pod: &str) -> bool {
    let out =
        k.run(&["get", "pod", pod, "-o", "jsonpath={.status.phase} {.status.conditions[?(@.type==\"Ready\")].status}"]);
    out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "Running True"
}

fn pod_gone(k: &Kubectl, pod: &str) -> bool {
    let out = k.run(&["get", "pod", pod, "-o", "name", "--ignore-not-found"]);
    out.status.success() && out.stdout.is_empty()
}

/// Removes what the blog removes before re-creating an object in another cluster.
fn strip(mut obj: Value) -> Value {
    let meta = obj["metadata"].as_object_mut().expect("metadata");
    for k in ["uid", "resourceVersion", "creationTimestamp", "managedFields", "annotations"] {
        meta.remove(k);
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(claim) = spec.get_mut("claimRef").and_then(Value::as_object_mut)
    {
        claim.remove("uid");
        claim.remove("resourceVersion");
    }
    obj.as_object_mut().expect("object").remove("status");
    obj
}

#[test]
fn the_blogs_migration_moves_each_ordinal_with_its_data_and_never_runs_one_twice() {
    let sandbox = Sandbox::start("source,destination");
    let Some(mut src) = Kubectl::new(33, &sandbox) else { return };
    src.context = Some("source".into());
    let mut dst = Kubectl::new(33, &sandbox).expect("same binary");
    dst.context = Some("destination".into());

    // Source: 6 replicas with a data marker on each ordinal's volume; a Secret to carry.
    src.ok_with_stdin(&["apply", "-f", "-"], &sts(0, 6));
    src.ok(&["create", "secret", "generic", "redis-redis-cluster", "--from-literal=password=s3cret"]);
    wait_until("6 ready pods in source", DEADLINE, || {
        (0..6).all(|i| pod_ready(&src, &format!("redis-redis-cluster-{i}")))
    });
    let mut pv_of = Vec::new();
    for i in 0..6 {
        let pvc = format!("redis-data-redis-redis-cluster-{i}");
        wait_until("the claim to bind", DEADLINE, || {
            !src.ok(&["get", "pvc", &pvc, "-o", "jsonpath={.spec.volumeName}"]).is_empty()
        });
        let pv = src.ok(&["get", "pvc", &pvc, "-o", "jsonpath={.spec.volumeName}"]);
        sandbox.ctl_ok(&["volume", "source", &pv, "--write", &format!("ordinal-{i}-data")]);
        pv_of.push(pv);
    }

    // Destination: the same StatefulSet with no replicas, starting past the range.
    dst.ok_with_stdin(&["apply", "-f", "-"], &sts(6, 0));
    let secret = strip(json(&src, &["get", "secret", "redis-redis-cluster"]));
    dst.ok_with_stdin(&["create", "-f", "-"], &secret.to_string());

    for k in (0..6u32).rev() {
        let pod = format!("redis-redis-cluster-{k}");
        // 1. Scale the source down by one; the highest ordinal goes.
        let out =
            src.ok(&["patch", "sts", "redis-redis-cluster", "-p", &format!(r#"{{"spec": {{"replicas": {k}}}}}"#)]);
        assert_eq!(out.trim(), "statefulset.apps/redis-redis-cluster patched");
        wait_until("the source pod to terminate", DEADLINE, || pod_gone(&src, &pod));
        // 2. Keep the volume: reclaim policy Retain, then copy PV and PVC to the destination.
        let pv_name = &pv_of[k as usize];
        src.ok(&["patch", "pv", pv_name, "-p", r#"{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}"#]);
        let pv = strip(json(&src, &["get", "pv", pv_name]));
        dst.ok_with_stdin(&["create", "-f", "-"], &pv.to_string());
        let pvc = strip(json(&src, &["get", "pvc", &format!("redis-data-redis-redis-cluster-{k}")]));
        dst.ok_with_stdin(&["create", "-f", "-"], &pvc.to_string());
        // 3. Grow the destination downwards by one ordinal.
        let out = dst.ok(&[
            "patch",
            "sts",
            "redis-redis-cluster",
            "-p",
            &format!(r#"{{"spec": {{"ordinals": {{"start": {k}}}, "replicas": {}}}}}"#, 6 - k),
        ]);
        assert_eq!(out.trim(), "statefulset.apps/redis-redis-cluster patched");
        // 4. The replica joins, with its own data.
        wait_until("the destination pod to be ready", DEADLINE, || pod_ready(&dst, &pod));
        let bound = dst.ok(&[
            "get",
            "pvc",
            &format!("redis-data-redis-redis-cluster-{k}"),
            "-o",
            "jsonpath={.spec.volumeName}",
        ]);
        assert_eq!(&bound, pv_name, "the copied claim binds to the copied volume");
        let volume: Value = serde_json::from_str(&sandbox.ctl_ok(&["volume", "destination", pv_name])).expect("JSON");
        assert_eq!(volume["volume"]["data"], format!("ordinal-{k}-data"), "ordinal {k}'s data arrived with it");
    }

    assert!(src.ok(&["get", "pods", "-o", "name"]).trim().is_empty(), "source runs nothing");
    let names = dst.ok(&["get", "pods", "-o", "jsonpath={.items[*].metadata.name}"]);
    let mut names: Vec<&str> = names.split_whitespace().collect();
    names.sort();
    assert_eq!(names, (0..6).map(|i| format!("redis-redis-cluster-{i}")).collect::<Vec<_>>());
    assert_eq!(dst.ok(&["get", "sts", "redis-redis-cluster", "-o", "jsonpath={.status.readyReplicas}"]), "6");
    let verdict = sandbox.ctl(&["ledger", "--check"]);
    assert!(verdict.status.success(), "ledger --check: {}", String::from_utf8_lossy(&verdict.stdout));
    let ledger: Value = serde_json::from_str(&sandbox.ctl_ok(&["ledger"])).expect("ledger JSON");
    let incarnations = ledger["incarnations"].as_array().expect("incarnations");
    assert_eq!(incarnations.len(), 12, "each ordinal ran once in each cluster");
}
