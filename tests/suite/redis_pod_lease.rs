//! The README's Redis example under a pod lease: the Redis Cluster of
//! `examples/redis-cluster.yaml` over three clusters, two nodes each, with `failover: {policy:
//! Automatic, fenceAfterSeconds: 3600, podLease: {seconds: 10}}`, every pod guarded (spanset's
//! guard runs for real beside the real `redis-server`). Central is cut off from spanset only
//! (its pods still reach their own API, as when only the network between spanset and central
//! fails): its nodes stop themselves by their lease, spanset re-homes their ordinals once the
//! lease lapsed (the Automatic policy's own fence is an hour away), Redis fails central's
//! primary over to its replica by itself, and the re-homed nodes join as new replicas. Then
//! central returns, is emptied, and takes ordinals 4 and 5 back (its lapse over, it is a
//! member like the others, weighted as they are). Judged by the ledger over the whole run, by
//! Redis (every slot served, six nodes, one per name, none failing) and by the client's history
//! (every acknowledged write reads back).

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use spanset_api::FederatedStatefulSet;

use crate::support::{
    self, DEADLINE,
    federation::{Controller, Federation},
    redis::{History, all_ips, client, cluster_check_passes, diagnose, programs, redis_cli, six_ready},
};

const EXAMPLE: &str = include_str!("../../examples/redis-cluster.yaml");
const NAME: &str = "redis-cluster";
const MEMBERS: &[&str] = &["east", "west", "central"];

/// What `CLUSTER NODES` through `ip` says: (node ID, hostname, flags) per node.
async fn cluster_nodes(ip: &str) -> Vec<(String, String, String)> {
    let (out, _) = redis_cli(&["-h", ip, "cluster", "nodes"]).await;
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let host = f.get(1)?.split(',').nth(1).unwrap_or_default().to_string();
            Some((f[0].to_string(), host, f.get(2)?.to_string()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_redis_cluster_with_a_pod_lease_cut_off_from_spanset_runs_nothing_twice_and_heals() {
    if !programs() {
        return;
    }
    // As deployed: authentication on (the guards read their Lease as their pods' ServiceAccount).
    let f = Federation::start_secure_with(MEMBERS, &["--run-images", "redis"]).await;
    let _c = Controller::start_full(&f.sandbox, "controller", &[], &["--member-write-deadline", "20"]);
    let mut fsts: serde_json::Value = serde_yaml::from_str(EXAMPLE).expect("the example parses");
    fsts["spec"]["placement"] = serde_json::json!({"clusters": [
        {"name": "east", "weight": 1}, {"name": "west", "weight": 1}, {"name": "central", "weight": 1}]});
    fsts["spec"]["failover"] = serde_json::json!({"policy": "Automatic", "unreachableAfterSeconds": 6,
        "fenceAfterSeconds": 3600, "podLease": {"seconds": 10}});
    let fsts: FederatedStatefulSet = serde_json::from_value(fsts).unwrap();
    f.create(&fsts).await;
    let thirds = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];
    f.wait_settled(NAME, &thirds, "two nodes per cluster").await;
    let ips = six_ready(&f, MEMBERS, "six Ready nodes").await;
    cluster_check_passes(&ips[&0]).await;

    let seeds = Arc::new(Mutex::new(ips.values().cloned().collect::<Vec<_>>()));
    let history = Arc::new(Mutex::new(History::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(client(seeds.clone(), history.clone(), stop.clone(), 1));
    support::until("five writes acknowledged by a primary and its replica", || async {
        (history.lock().acked.len() >= 5).then_some(())
    })
    .await;

    // Central is cut off from spanset only.
    let partitioned = Instant::now();
    f.sandbox.ctl_ok(&["partition", "central", "--outside-only"]);
    let deadline = Instant::now() + 3 * DEADLINE;
    let mut polls = 0u32;
    let rehomed = loop {
        let live = all_ips(&f, &["east", "west"]).await;
        if !live.is_empty() {
            *seeds.lock() = live.values().cloned().collect();
        }
        let s = f.status(NAME).await;
        let homed_elsewhere = s.homes.iter().all(|h| h.cluster != "central");
        if homed_elsewhere && s.moves.is_empty() && s.ready.as_deref() == Some("6/6") {
            break partitioned.elapsed();
        }
        polls += 1;
        if polls == 600 {
            diagnose(&f.sandbox.kubeconfig, MEMBERS).await;
        }
        assert!(Instant::now() < deadline, "central's ordinals re-homed, six Ready: {s:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!("central cut off: its ordinals Ready elsewhere {rehomed:?} later");
    let mcs: kube::Api<spanset_api::MemberCluster> = kube::Api::all(f.host.clone());
    assert!(!mcs.get("central").await.unwrap().spec.fenced, "no fence: the lease alone re-homed them");

    // Central returns, and is emptied: its old nodes never run again.
    f.sandbox.ctl_ok(&["heal", "central"]);
    let deadline = Instant::now() + 2 * DEADLINE;
    while f.member_slice("central", NAME).await.is_some_and(|(_, r)| r > 0) || !central_has_no_pod(&f).await {
        assert!(Instant::now() < deadline, "central shrunk and emptied");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Emptied, central holds nothing of the federation, and is a member like the others again:
    // spanset moves ordinals 4 and 5 back, one at a time, each a new Redis node joining as a
    // replica (its readiness asks Redis: `cluster_state:ok`, its link up). Judged once both
    // have: a node checked while a move runs would vanish under the check.
    f.wait_settled_within(NAME, &thirds, "ordinals 4 and 5 moved back to central", 5 * DEADLINE).await;

    // Redis: every slot served, six nodes, one per name, none failing, through every node.
    let ips = six_ready(&f, MEMBERS, "six Ready nodes after the return").await;
    *seeds.lock() = ips.values().cloned().collect();
    cluster_check_passes(&ips[&0]).await;
    for ip in ips.values() {
        // Three minutes: each node learns by Redis's own gossip that the cluster is whole again
        // and forgets a node ID no longer in it; until then one may say `cluster_state:fail`.
        let deadline = Instant::now() + 3 * DEADLINE;
        let nodes = loop {
            let (info, _) = redis_cli(&["-h", ip, "cluster", "info"]).await;
            let whole = info.contains("cluster_slots_assigned:16384") && info.contains("cluster_state:ok");
            let nodes = cluster_nodes(ip).await;
            if whole && nodes.len() == 6 && nodes.iter().all(|n| !n.2.contains("fail")) {
                break nodes;
            }
            if Instant::now() >= deadline {
                diagnose(&f.sandbox.kubeconfig, MEMBERS).await;
                let ledger = f.sandbox.ctl(&["ledger"]);
                eprintln!("ledger:\n{}", String::from_utf8_lossy(&ledger.stdout));
                panic!("{ip} serves every slot and lists six nodes, none failing; it says {info} and lists {nodes:?}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let names: BTreeSet<&str> = nodes.iter().map(|n| n.1.as_str()).collect();
        let want: BTreeSet<String> = (0..6).map(|k| format!("{NAME}-{k}")).collect();
        assert_eq!(names, want.iter().map(String::as_str).collect(), "one node per name through {ip}: {nodes:?}");
    }
    let acked = history.lock().acked.len();
    support::until("the client writes again, five more", || async {
        (history.lock().acked.len() >= acked + 5).then_some(())
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    writer.await.unwrap();
    let h = std::mem::take(&mut *history.lock());
    h.assert_every_acknowledged_write_reads_back(&ips[&0]).await;
    println!("client: {} writes acknowledged, {} refused; {} reads checked", h.acked.len(), h.failed, h.reads);
    f.assert_ledger_clean();
}

/// Whether central holds no pod of the federation (read from central itself).
async fn central_has_no_pod(f: &Federation) -> bool {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(f.member("central").await, "default");
    pods.list(&kube::api::ListParams::default().labels("app=redis-cluster")).await.is_ok_and(|l| l.items.is_empty())
}
