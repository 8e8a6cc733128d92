//! Self-fencing pods end to end, on real processes: a federation with `spec.failover.podLease`
//! whose pods carry the guard (the real `spanset guard`, which the sandbox runs for spanset's
//! image) beside a real main process, under the real controller. Judged at every look over
//! the whole timeline: no ordinal's main process runs in two members at once, a cut-off
//! member's processes are gone before their ordinals start elsewhere, the ledger is clean, and
//! nothing but the lease fenced anything (the Automatic policy's own fence is an hour away).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use kube::api::Api;
use serde_json::{Value, json};
use spanset::api::{FederatedStatefulSet, MemberCluster};

use crate::support::{
    self, DEADLINE,
    federation::{Controller, Federation},
    program,
};

const MEMBERS: &[&str] = &["east", "west", "central"];
/// The shortest lease spanset takes, to keep the tests short.
const LEASE_SECONDS: i32 = 10;
/// What the main process's command line carries, with its pod's name and node after it.
const MARKER: &str = "pod-lease-main";

/// Six ordinals in thirds (east 0-1, west 2-3, central 4-5), each pod a real process tagged
/// with its pod's name and node, Automatic failover whose own fence waits an hour, and a pod
/// lease of ten seconds.
fn leased() -> FederatedStatefulSet {
    serde_json::from_value(json!({
        "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {
            "replicas": 6,
            "placement": {"clusters": [{"name": "east", "weight": 1}, {"name": "west", "weight": 1}, {"name": "central", "weight": 1}]},
            "failover": {"policy": "Automatic", "unreachableAfterSeconds": 6, "fenceAfterSeconds": 3600,
                "podLease": {"seconds": LEASE_SECONDS}},
            "template": {"serviceName": "db", "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                    "terminationGracePeriodSeconds": 2,
                    // They tolerate an unreachable node, as databases do: nothing evicts them.
                    "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}],
                    "containers": [{"name": "db", "image": "busybox",
                        "command": ["sh", "-c", "while :; do sleep 0.1; done", "pod-lease-main:$(POD_NAME):$(NODE)"],
                        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}]}}}
        }
    }))
    .expect("the federation parses")
}

/// Every main process alive now, as (ordinal, member) pairs, from the command lines of the
/// machine's processes (the sandbox runs each container as a real process).
fn running(nodes: &BTreeMap<String, String>) -> BTreeSet<(u32, String)> {
    let mut out = BTreeSet::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for entry in dir.flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let text = String::from_utf8_lossy(&cmdline);
        for arg in text.split('\0') {
            let Some(rest) = arg.strip_prefix(&format!("{MARKER}:")) else { continue };
            let Some((pod, node)) = rest.split_once(':') else { continue };
            let ordinal = pod.rsplit_once('-').and_then(|(_, k)| k.parse().ok());
            if let (Some(k), Some(member)) = (ordinal, nodes.get(node)) {
                out.insert((k, member.clone()));
            }
        }
    }
    out
}

/// Each node's member, from the sandbox's list of clusters.
fn node_members(f: &Federation) -> BTreeMap<String, String> {
    let clusters: Value = serde_json::from_str(&f.sandbox.ctl_ok(&["clusters"])).expect("clusters as JSON");
    let mut out = BTreeMap::new();
    for c in clusters["clusters"].as_array().into_iter().flatten() {
        for n in c["nodes"].as_array().into_iter().flatten() {
            let name = n.as_str().map(str::to_string).or_else(|| n["name"].as_str().map(str::to_string));
            if let (Some(node), Some(member)) = (name, c["name"].as_str()) {
                out.insert(node, member.to_string());
            }
        }
    }
    out
}

/// Where each ordinal runs, asserting that none runs in two members at once.
fn homes(seen: &BTreeSet<(u32, String)>, at: &str) -> BTreeMap<u32, String> {
    let mut out: BTreeMap<u32, String> = BTreeMap::new();
    for (k, m) in seen {
        if let Some(other) = out.insert(*k, m.clone()) {
            panic!("{at}: ordinal {k} runs in {other} and {m} at once: {seen:?}");
        }
    }
    out
}

fn programs() -> bool {
    program("sh", "dash").is_some() && program("unshare", "util-linux").is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_member_stops_its_own_pods_before_automatic_failover_re_homes_them() {
    if !programs() {
        return;
    }
    let f = Federation::start_secure_with(MEMBERS, &["--run-images", "busybox,spanset"]).await;
    // The sandbox answers or refuses every request at once: a write it did not answer within
    // five seconds never lands.
    let _c = Controller::start_full(&f.sandbox, "controller", &[], &["--member-write-deadline", "5"]);
    f.create(&leased()).await;
    let thirds = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];
    f.wait_settled("db", &thirds, "thirds").await;
    let nodes = node_members(&f);
    support::until("every ordinal's main process runs where its slice is", || async {
        (homes(&running(&nodes), "placed").len() == 6).then_some(())
    })
    .await;
    let before = f.sandbox.account();

    // Central is cut off from everything outside it; its pods keep running, as they would.
    let partitioned = Instant::now();
    f.sandbox.ctl_ok(&["partition", "central"]);
    let mut stopped: Option<Duration> = None;
    let deadline = Instant::now() + 3 * DEADLINE;
    let elsewhere = loop {
        let now = homes(&running(&nodes), "after the partition");
        let central: Vec<u32> = now.iter().filter(|(_, m)| *m == "central").map(|(k, _)| *k).collect();
        if stopped.is_none() && central.is_empty() {
            stopped = Some(partitioned.elapsed());
        }
        let moved = [4, 5].iter().all(|k| now.get(k).is_some_and(|m| m != "central"));
        if moved {
            assert!(stopped.is_some(), "ordinals 4 and 5 started elsewhere while central still ran one: {now:?}");
        }
        let s = f.status("db").await;
        if moved && s.moves.is_empty() && s.ready.as_deref() == Some("6/6") {
            break partitioned.elapsed();
        }
        assert!(Instant::now() < deadline, "ordinals 4 and 5 Ready elsewhere: {now:?}, {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let stopped = stopped.unwrap();
    println!("partition → central's processes gone: {stopped:?}; → all six Ready elsewhere: {elsewhere:?}");
    let mcs: Api<MemberCluster> = Api::all(f.host.clone());
    assert!(!mcs.get("central").await.unwrap().spec.fenced, "no fence: the lease alone re-homed them");

    // Central returns all at once: its pods' guards see a lease that names nothing new, spanset
    // shrinks it, and none of its main processes runs again.
    f.sandbox.ctl_ok(&["heal", "central"]);
    let central = f.member("central").await;
    let sts: Api<k8s_openapi::api::apps::v1::StatefulSet> = Api::namespaced(central.clone(), "default");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(central, "default");
    support::until("central shrunk with no pod of db left, none of them running meanwhile", || async {
        let now = homes(&running(&nodes), "after the return");
        assert!(now.values().all(|m| m != "central"), "central runs an ordinal again: {now:?}");
        let empty = sts.get_opt("db").await.ok().flatten().and_then(|s| s.spec).and_then(|s| s.replicas) == Some(0);
        let none = pods.list(&Default::default()).await.is_ok_and(|l| l.items.is_empty());
        (empty && none).then_some(())
    })
    .await;
    f.assert_ledger_clean();

    // What it cost: two pods created elsewhere for the two re-homed ordinals; no volume anywhere.
    let cost = f.sandbox.account().since(&before);
    for m in MEMBERS {
        let c = cost.cluster(m);
        assert_eq!((c.provisioned(), c.released()), (0, 0), "{m}: {cost:?}");
    }
}
