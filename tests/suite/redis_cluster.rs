//! The start-ordinal blog's migration on real Redis: the six-node Redis Cluster of
//! `examples/redis-cluster.yaml` (three primaries, three replicas, `redis-server` running for
//! real in the sandbox) moves from `east` to `west` one ordinal at a time, spanset handing each
//! node's volume over (`storage: Move`), while a client writes and reads keys throughout.
//! Judged by Redis itself: after every move `redis-cli --cluster check` passes and the moved
//! node answers under its own node ID from its new address; at the end every acknowledged
//! write reads back. And by spanset's own books: the identity ledger, and what it wrote.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use kube::api::{Patch, PatchParams};
use parking_lot::Mutex;
use spanset_api::FederatedStatefulSet;

use crate::support::{
    self,
    federation::{Controller, Federation},
    redis::{History, all_ips, client, cluster_check_passes, diagnose, programs, ready_ips, redis_cli, six_ready},
};

const EXAMPLE: &str = include_str!("../../examples/redis-cluster.yaml");
const NAME: &str = "redis-cluster";
const MEMBERS: &[&str] = &["east", "west"];

async fn weights(f: &Federation, east: i32, west: i32) {
    let body = serde_json::json!({"spec": {"placement": {"clusters": [
        {"name": "east", "weight": east}, {"name": "west", "weight": west}]}}});
    f.api().patch(NAME, &PatchParams::default(), &Patch::Merge(body)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_blogs_redis_cluster_moves_node_by_node_to_west_keeping_ids_slots_and_every_acknowledged_write() {
    migrate_to_west("Move").await;
}

/// With `storage: Detached` a node arrives on a fresh volume: a primary hands its slots to its
/// replica before it leaves, and the new node joins as a replica, resyncing from its primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_detached_storage_each_node_rejoins_as_a_fresh_replica_and_every_acknowledged_write_stays() {
    migrate_to_west("Detached").await;
}

/// The blog's migration with `migration.storage` set to `storage`, judged as the module says.
async fn migrate_to_west(storage: &str) {
    if !programs() {
        return;
    }
    let moves = storage == "Move";
    let f = Federation::start_flags(&["east", "west"], &["--run-images", "redis"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut fsts: FederatedStatefulSet = serde_yaml::from_str(EXAMPLE).expect("the example parses");
    fsts.spec.migration.storage = serde_json::from_value(serde_json::json!(storage)).unwrap();
    f.create(&fsts).await;
    f.wait_settled(NAME, &[("east", 0, 6)], "six nodes in east").await;

    // The cluster forms itself once all six answer: three primaries, three replicas.
    let ips = six_ready(&f, &["east"], "six Ready nodes").await;
    let check = cluster_check_passes(&ips[&0]).await;
    assert_eq!(check.matches("M: ").count(), 3, "three primaries:\n{check}");
    assert_eq!(check.matches("S: ").count(), 3, "three replicas:\n{check}");
    let mut ids = BTreeMap::new();
    for (k, ip) in &ips {
        let (id, ok) = redis_cli(&["-h", ip, "cluster", "myid"]).await;
        assert!(ok && id.len() == 40, "node {k}'s ID: {id:?}");
        ids.insert(*k, id);
    }

    // The client runs through every move.
    let seeds = Arc::new(Mutex::new(ips.values().cloned().collect::<Vec<_>>()));
    let history = Arc::new(Mutex::new(History::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(client(seeds.clone(), history.clone(), stop.clone(), 0));
    let before = f.sandbox.account();

    // The blog's steps, by spanset: one more ordinal in west each time, from the highest.
    for in_west in 1..=6 {
        let moved = 6 - in_west as u32;
        weights(&f, 6 - in_west, in_west).await;
        let want: Vec<(&str, i32, i32)> = if in_west < 6 {
            vec![("east", 0, 6 - in_west), ("west", 6 - in_west, in_west)]
        } else {
            vec![("west", 0, 6)]
        };
        let watchdog = {
            let kubeconfig = f.sandbox.kubeconfig.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(60)).await;
                diagnose(&kubeconfig, MEMBERS).await;
            })
        };
        f.wait_settled(NAME, &want, &format!("{in_west} in west")).await;
        watchdog.abort();
        let west = support::until(&format!("node {moved} Ready in west"), || async {
            let west = ready_ips(&f, "west").await;
            west.contains_key(&moved).then_some(west)
        })
        .await;
        let ip = &west[&moved];
        assert!(!ips.values().any(|old| old == ip), "node {moved} answers from a new address, {ip}");
        *seeds.lock() = all_ips(&f, MEMBERS).await.into_values().collect();
        // Redis's own view: every slot served by three primaries with a replica each, no node
        // failing; with Move the moved node is itself, with Detached a new node in its place
        // and its former self forgotten.
        let check = cluster_check_passes(ip).await;
        let (id, _) = redis_cli(&["-h", ip, "cluster", "myid"]).await;
        if moves {
            assert_eq!(id, ids[&moved], "node {moved} rejoined under its own node ID");
        } else {
            assert_ne!(id, ids[&moved], "node {moved} arrived on a fresh volume: a new node");
            assert!(!check.contains(&ids[&moved]), "its former node is forgotten:\n{check}");
        }
        assert!(check.contains(&format!("{}:6379", ip)), "the others know its new address:\n{check}");
        assert_eq!(check.matches("M: ").count() + check.matches("S: ").count(), 6, "six nodes:\n{check}");
        let acked = history.lock().acked.len();
        support::until("the client writes again", || async { (history.lock().acked.len() > acked + 3).then_some(()) })
            .await;
    }
    stop.store(true, Ordering::SeqCst);
    writer.await.unwrap();

    // Every acknowledged write reads back, through the cluster as it is now.
    let seed = all_ips(&f, MEMBERS).await[&0].clone();
    let h = std::mem::take(&mut *history.lock());
    h.assert_every_acknowledged_write_reads_back(&seed).await;
    println!(
        "{storage}: client: {} writes acknowledged, {} refused (while a primary moved); {} reads checked, {} refused",
        h.acked.len(),
        h.failed,
        h.reads,
        h.failed_reads
    );

    // spanset's books: nothing ran twice; each node's volume was handed over, none made anew.
    let cost = f.sandbox.account().since(&before);
    let west = cost.cluster("west");
    let arrivals = if moves { 0 } else { 6 };
    assert_eq!(west.provisioned(), arrivals, "Move hands volumes over, Detached makes one per arrival: {west:?}");
    let spanset_writes = west.by_actor("spanset").writes() + cost.cluster("east").by_actor("spanset").writes();
    assert!(spanset_writes <= 16 * 6, "spanset wrote {spanset_writes} times in the members for six moves");
    f.assert_ledger_clean();
}
