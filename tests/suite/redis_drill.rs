//! The cluster-loss drill on real Redis: the Redis Cluster of `examples/redis-cluster.yaml`
//! spread over three clusters two nodes each (primaries 0, 2, 4; replicas 3, 5, 1 of them, so
//! `east` holds primary 0 and the replica of 4), and `spanset drill cluster-loss east` while a
//! client writes and reads keys. Redis fails over the lost primary by itself (its replica in
//! `west` is promoted), spanset re-homes ordinals 0 and 1 on fresh volumes, where they join as
//! new replicas in place of their former selves; when `east` returns, its old pods are gone
//! before its machines come back, and the ordinals return to it. Judged by Redis (`--cluster
//! check`, `CLUSTER NODES`: six nodes, one per name, none failing), by the client's history
//! (every acknowledged write reads back), by the ledger over the whole run, and by what the
//! drill cost in volumes.

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;
use spanset_api::FederatedStatefulSet;

use crate::support::{
    self,
    federation::{Controller, Federation},
    redis::{History, all_ips, client, cluster_check_passes, diagnose, programs, ready_ips, redis_cli, six_ready},
};

const EXAMPLE: &str = include_str!("../../examples/redis-cluster.yaml");
const NAME: &str = "redis-cluster";
const MEMBERS: &[&str] = &["east", "west", "central"];

/// What `CLUSTER NODES` through `ip` says: (node ID, hostname, flags, slot ranges) per node.
async fn cluster_nodes(ip: &str) -> Vec<(String, String, String, usize)> {
    let (out, _) = redis_cli(&["-h", ip, "cluster", "nodes"]).await;
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let host = f.get(1)?.split(',').nth(1).unwrap_or_default().to_string();
            Some((f[0].to_string(), host, f.get(2)?.to_string(), f.len().saturating_sub(8)))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_a_cluster_fails_its_primary_over_inside_redis_and_its_return_leaves_no_duplicate_node() {
    if !programs() {
        return;
    }
    let f = Federation::start_flags(MEMBERS, &["--run-images", "redis"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut fsts: serde_json::Value = serde_yaml::from_str(EXAMPLE).expect("the example parses");
    fsts["spec"]["placement"] = serde_json::json!({"clusters": [
        {"name": "east", "weight": 1}, {"name": "west", "weight": 1}, {"name": "central", "weight": 1}]});
    fsts["spec"]["failover"] = serde_json::json!({"policy": "Manual", "unreachableAfterSeconds": 6});
    let fsts: FederatedStatefulSet = serde_json::from_value(fsts).unwrap();
    f.create(&fsts).await;
    let thirds = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];
    f.wait_settled(NAME, &thirds, "two nodes per cluster").await;

    let ips = six_ready(&f, MEMBERS, "six Ready nodes").await;
    cluster_check_passes(&ips[&2]).await;
    // The example's formation: primaries 0, 2, 4, each replicated from another cluster.
    let mut ids = std::collections::BTreeMap::new();
    for (k, ip) in &ips {
        let (role, _) = redis_cli(&["-h", ip, "role"]).await;
        let want = if k % 2 == 0 { "master" } else { "slave" };
        assert_eq!(role.lines().next(), Some(want), "node {k} is a {want}: {role}");
        let (id, _) = redis_cli(&["-h", ip, "cluster", "myid"]).await;
        ids.insert(*k, id);
    }
    let (role3, _) = redis_cli(&["-h", &ips[&3], "role"]).await;
    assert!(role3.contains(&ips[&0]), "node 3 replicates node 0: {role3}");

    let seeds = Arc::new(Mutex::new(ips.values().cloned().collect::<Vec<_>>()));
    let history = Arc::new(Mutex::new(History::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(client(seeds.clone(), history.clone(), stop.clone(), 1));
    // Five, not more: on a loaded machine a replica's acknowledgement (`WAIT 1 2000`) often
    // comes too late, and the client only has to be seen working before the drill.
    support::until("five writes acknowledged by a primary and its replica", || async {
        (history.lock().acked.len() >= 5).then_some(())
    })
    .await;
    let before = f.sandbox.account();

    // Throughout the drill: whether Redis promoted node 3 in west while node 0 was lost, and
    // the seeds the client uses kept to the Ready nodes.
    let done = Arc::new(AtomicBool::new(false));
    let watch = {
        let (done, seeds) = (done.clone(), seeds.clone());
        let kubeconfig = f.sandbox.kubeconfig.clone();
        let f = &f;
        async move {
            let mut promoted = false;
            let mut polls = 0u32;
            while !done.load(Ordering::SeqCst) {
                // Node 3 wherever it runs: the re-homing moves it from west to central (slices
                // stay contiguous: west 0-2, central 3-5).
                let live = all_ips(f, MEMBERS).await;
                if let Some(ip) = live.get(&3) {
                    let (role, _) = redis_cli(&["-h", ip, "role"]).await;
                    promoted |= role.lines().next() == Some("master");
                }
                if !live.is_empty() {
                    *seeds.lock() = live.into_values().collect();
                }
                polls += 1;
                if polls == 600 {
                    diagnose(&kubeconfig, MEMBERS).await;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            promoted
        }
    };
    let admin = f.sandbox.admin.clone();
    let drill = async {
        let out = f
            .spanset(&[
                "drill",
                "cluster-loss",
                "east",
                "--fsts",
                "default/redis-cluster",
                "--admin",
                &admin,
                "-o",
                "json",
                "--timeout",
                "300",
            ])
            .await;
        done.store(true, Ordering::SeqCst);
        out
    };
    let (out, promoted) = tokio::join!(drill, watch);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the drill: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    println!("drill on real Redis: {report}");
    assert_eq!(report["ledgerViolations"], serde_json::json!([]), "{report}");
    assert!(promoted, "Redis promoted node 3 (node 0's replica) while east was lost");

    // Back in east, thirds again: Redis healthy, six nodes, one per name, none failing.
    f.wait_settled(NAME, &thirds, "thirds again").await;
    let ips = six_ready(&f, MEMBERS, "six Ready nodes again").await;
    assert_eq!(ready_ips(&f, "east").await.len(), 2, "east holds its two nodes again");
    *seeds.lock() = ips.values().cloned().collect();
    let check = cluster_check_passes(&ips[&4]).await;
    for ip in ips.values() {
        // Three minutes: a forgotten node ID leaves every node's view by Redis's own gossip (its
        // `CLUSTER FORGET` ban lasts a minute), slower on a machine running the whole suite.
        let deadline = std::time::Instant::now() + 3 * support::DEADLINE;
        let nodes = loop {
            let nodes = cluster_nodes(ip).await;
            if nodes.len() == 6 && nodes.iter().all(|n| !n.2.contains("fail")) {
                break nodes;
            }
            assert!(std::time::Instant::now() < deadline, "{ip} lists six nodes, none failing; it lists {nodes:?}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let names: BTreeSet<&str> = nodes.iter().map(|n| n.1.as_str()).collect();
        let want: BTreeSet<String> = (0..6).map(|k| format!("{NAME}-{k}")).collect();
        assert_eq!(names, want.iter().map(String::as_str).collect(), "one node per name through {ip}: {nodes:?}");
    }
    // The lost nodes came back as new nodes (their volumes stayed in the lost cluster); their
    // former selves are forgotten, the others are who they were.
    for k in 0..6u32 {
        let (id, _) = redis_cli(&["-h", &ips[&k], "cluster", "myid"]).await;
        if k < 2 {
            assert_ne!(id, ids[&k], "node {k} re-homed on a fresh volume is a new node");
            assert!(!check.contains(&ids[&k]), "node {k}'s former self is forgotten:\n{check}");
        } else {
            assert_eq!(id, ids[&k], "node {k} kept its node ID");
        }
    }

    let acked = history.lock().acked.len();
    support::until("the client writes again, five more", || async {
        (history.lock().acked.len() >= acked + 5).then_some(())
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    writer.await.unwrap();
    let h = std::mem::take(&mut *history.lock());
    h.assert_every_acknowledged_write_reads_back(&ips[&2]).await;
    println!(
        "client: {} writes acknowledged, {} refused; {} reads checked, {} refused",
        h.acked.len(),
        h.failed,
        h.reads,
        h.failed_reads
    );

    // What it cost in volumes: a fresh one for each of the two re-homed ordinals (in west),
    // handed back to east on return; there the lost ordinals' older claims were retired, their
    // volumes kept Released (the data they held when east was lost, which the operator may
    // want). Nothing else provisioned or released anywhere.
    let cost = f.sandbox.account().since(&before);
    for m in MEMBERS {
        let c = cost.cluster(m);
        println!("{m}: provisioned {}, released {}, now {:?}", c.provisioned(), c.released(), c.volumes.by_phase);
    }
    let (east, west, central) = (cost.cluster("east"), cost.cluster("west"), cost.cluster("central"));
    assert_eq!((west.provisioned(), east.provisioned(), central.provisioned()), (2, 0, 0), "{cost:?}");
    assert_eq!((east.released(), west.released(), central.released()), (2, 0, 0), "{cost:?}");
    assert_eq!(east.left("Released"), 2, "east keeps the two older volumes Released: {cost:?}");
    f.assert_ledger_clean();
}
