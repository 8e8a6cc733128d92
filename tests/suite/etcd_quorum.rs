//! A real etcd quorum across three clusters under spanset (`examples/etcd.yaml`, the sandbox
//! running the real `etcd` binary): while clients write and read on every member, spanset
//! rolls a template change over the three clusters and moves one member to another cluster
//! with its volume. Judged through the application's view: at no instant were two members
//! down at once (a prober that asks every member all along), the clients' history is
//! linearizable, the members are the same three (same IDs) and healthy at the end; and through
//! spanset's: the ledger is clean and what it wrote stays within a budget.

use std::{
    collections::BTreeMap,
    net::Ipv4Addr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams},
};
use parking_lot::Mutex;
use spanset_api::FederatedStatefulSet;
use spanset_sim::store::account::report::EventCounts;
use support::{
    etcd::{self, Outcome},
    federation::{Controller, Federation},
    linearizable::{self, Kind, Op},
    program, timeline,
};

use crate::support;

const MEMBERS: [&str; 3] = ["east", "west", "central"];
/// The keys the clients share: few, so that reads often follow other clients' writes.
const KEYS: u64 = 6;
/// How long a client waits for one answer.
const OP_TIMEOUT: Duration = Duration::from_secs(3);

/// The example federation, as shipped.
fn example() -> FederatedStatefulSet {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/etcd.yaml")).unwrap();
    serde_yaml::from_str(&text).expect("examples/etcd.yaml is a FederatedStatefulSet")
}

/// What the test's tasks share: the members' addresses as last listed, the clients' history,
/// the prober's rounds.
#[derive(Default)]
struct Shared {
    /// Ordinal → the pod IP of its live (not terminating) pod, if it has one.
    ips: Mutex<[Option<Ipv4Addr>; 3]>,
    ops: Mutex<Vec<Op>>,
    /// When each write succeeded.
    writes: Mutex<Vec<Instant>>,
    /// Each prober round: when, and the ordinals found down.
    rounds: Mutex<Vec<(Instant, Vec<u32>)>>,
    stop: AtomicBool,
}

/// One client: writes (two ops in three) and linearizable reads on the shared keys, each to
/// the next member in turn; records every operation that may have happened.
async fn client(id: u64, shared: Arc<Shared>) {
    let mut thread = id << 32;
    for i in 0u64.. {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let ordinal = ((id + i) % 3) as usize;
        let Some(ip) = shared.ips.lock()[ordinal] else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let key = format!("k{}", (i * 7 + id) % KEYS);
        let invoked = Instant::now();
        if i % 3 == 2 {
            if let Outcome::Ok(answer) = etcd::get(ip, &key, OP_TIMEOUT).await {
                let value = etcd::value_of(&answer).unwrap_or_else(|e| panic!("a read of {key}: {e}"));
                let value = value.map(|v| v.parse::<u64>().unwrap_or_else(|e| panic!("{key} = {v:?}: {e}")));
                let completed = Some(Instant::now());
                shared.ops.lock().push(Op { thread, key, kind: Kind::Read(value.unwrap_or(0)), invoked, completed });
            }
            // A read that failed did nothing.
        } else {
            // Unique, never 0 (what an absent key reads as).
            let value = ((id + 1) << 40) | (i + 1);
            let outcome = etcd::put(ip, &key, &value.to_string(), OP_TIMEOUT).await;
            let completed = matches!(outcome, Outcome::Ok(_)).then(Instant::now);
            if outcome != Outcome::NotSent {
                shared.ops.lock().push(Op { thread, key, kind: Kind::Write(value), invoked, completed });
            }
            match completed {
                Some(at) => shared.writes.lock().push(at),
                // Unknown: this thread's write stays in flight; the client goes on as another.
                None if outcome != Outcome::NotSent => thread += 1,
                None => {}
            }
        }
        // Pacing, so that the history stays a size the checker searches in seconds.
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
}

/// The federation's pods now: ordinal → (IP, terminating) of each pod that has an IP; `None`
/// when a member could not be read.
async fn pods(members: &[Client]) -> Option<Vec<(u32, Ipv4Addr, bool)>> {
    let lp = ListParams::default().labels("spanset.dev/federation=etcd");
    let lists = futures::future::join_all(
        members.iter().map(|c| async { Api::<Pod>::namespaced(c.clone(), "default").list(&lp).await }),
    )
    .await;
    let mut out = Vec::new();
    for list in lists {
        let list = list.ok()?;
        for p in list.items {
            let ordinal = p.metadata.name.as_deref().and_then(|n| n.strip_prefix("etcd-")).and_then(|k| k.parse().ok());
            let ip = p.status.as_ref().and_then(|s| s.pod_ip.as_deref()).and_then(|ip| ip.parse().ok());
            if let (Some(k), Some(ip)) = (ordinal, ip) {
                out.push((k, ip, p.metadata.deletion_timestamp.is_some()));
            }
        }
    }
    Some(out)
}

/// The prober: every round lists the pods and connects to each member's client port at once;
/// a member is down in that round when it has no pod with an IP or every pod of it refuses
/// the connection (nothing listens: the process is not running). A connection that neither
/// succeeds nor is refused in time says nothing and counts as up; a round whose pods could not be
/// listed is not counted. It keeps the clients'
/// address table current.
async fn prober(members: Vec<Client>, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let at = Instant::now();
        // A round whose lists failed judges nothing.
        let Some(listed) = pods(&members).await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let mut ips = [None; 3];
        for (k, ip, terminating) in &listed {
            if !terminating && let Some(slot) = ips.get_mut(*k as usize) {
                *slot = Some(*ip);
            }
        }
        *shared.ips.lock() = ips;
        let answers = futures::future::join_all(listed.iter().map(|(k, ip, _)| async move {
            let c = tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect((*ip, 2379))).await;
            (*k, !matches!(c, Ok(Err(_))))
        }))
        .await;
        let down: Vec<u32> = (0..3).filter(|k| !answers.iter().any(|(o, up)| o == k && *up)).collect();
        shared.rounds.lock().push((at, down));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `etcdctl ARGS` against `endpoints`; its stdout, or the failure with both streams.
async fn etcdctl(endpoints: &[Ipv4Addr], args: &[&str]) -> Result<String, String> {
    let list: Vec<String> = endpoints.iter().map(|ip| format!("http://{ip}:2379")).collect();
    let mut cmd = std::process::Command::new("etcdctl");
    cmd.env("ETCDCTL_API", "3").arg(format!("--endpoints={}", list.join(","))).args(args);
    let out = tokio::task::spawn_blocking(move || cmd.output()).await.expect("etcdctl's thread");
    let out = out.map_err(|e| format!("etcdctl: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() { Ok(text) } else { Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr))) }
}

/// The cluster's members as one of them lists them: (ID, name), by name.
async fn member_list(ip: Ipv4Addr) -> Result<Vec<(u64, String)>, String> {
    let text = etcdctl(&[ip], &["member", "list", "-w", "json"]).await?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("member list {text:?}: {e}"))?;
    let mut out: Vec<(u64, String)> = doc["members"]
        .as_array()
        .ok_or_else(|| format!("member list without members: {text}"))?
        .iter()
        .map(|m| (m["ID"].as_u64().unwrap_or(0), m["name"].as_str().unwrap_or("").to_string()))
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

/// Waits until every member is healthy by etcdctl (a quorum read through each), and answers
/// their addresses.
async fn healthy(shared: &Shared, what: &str) -> [Ipv4Addr; 3] {
    let mut last = String::new();
    let start = Instant::now();
    loop {
        let ips = *shared.ips.lock();
        if let [Some(a), Some(b), Some(c)] = ips {
            match etcdctl(&[a, b, c], &["endpoint", "health", "-w", "json"]).await {
                Ok(out) if all_healthy(&out, 3) => return [a, b, c],
                Ok(out) | Err(out) => last = out,
            }
        }
        assert!(start.elapsed() < support::DEADLINE, "{what}: the three members never all healthy: {last}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether `etcdctl endpoint health -w json` says `n` endpoints are healthy.
fn all_healthy(out: &str, n: usize) -> bool {
    let doc: serde_json::Value = serde_json::from_str(out).unwrap_or_default();
    let list = doc.as_array().cloned().unwrap_or_default();
    list.len() == n && list.iter().all(|e| e["health"] == true)
}

/// Waits until the template's rollout is over: every pod runs it and is available.
async fn rolled(f: &Federation) {
    support::eventually("the rollout to finish", || async {
        let fsts = f.api().get("etcd").await.expect("federation read");
        let s = fsts.status.unwrap_or_default();
        s.observed_generation == fsts.metadata.generation
            && s.updated_replicas == Some(3)
            && s.available_replicas == Some(3)
            && s.conditions.iter().any(|c| c.type_ == "Updating" && c.status == "False")
    })
    .await;
}

/// The longest time without a successful write within `[from, to]`.
fn longest_write_gap(writes: &[Instant], from: Instant, to: Instant) -> Duration {
    let mut times: Vec<Instant> = writes.iter().copied().filter(|t| *t >= from && *t <= to).collect();
    times.sort();
    let mut edges = vec![from];
    edges.extend(times);
    edges.push(to);
    edges.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_quorum_across_three_clusters_keeps_serving_through_a_rollout_and_a_move() {
    if program("etcd", "etcd-server").is_none() || program("etcdctl", "etcd-client").is_none() {
        return;
    }
    let test_start = Instant::now();
    let f = Federation::start_flags(&MEMBERS, &["--run-images", "etcd"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&example()).await;
    f.wait_settled("etcd", &[("east", 0, 1), ("west", 1, 1), ("central", 2, 1)], "one member per cluster").await;

    let shared = Arc::new(Shared::default());
    let mut members = Vec::new();
    for m in MEMBERS {
        members.push(f.member(m).await);
    }
    let prober = tokio::spawn(prober(members, shared.clone()));
    let ips = healthy(&shared, "bootstrapped").await;
    let ids = member_list(ips[0]).await.expect("the members listed");
    assert_eq!(ids.iter().map(|(_, n)| n.as_str()).collect::<Vec<_>>(), ["etcd-0", "etcd-1", "etcd-2"], "{ids:?}");
    let clients: Vec<_> = (0..3).map(|id| tokio::spawn(client(id, shared.clone()))).collect();
    support::eventually("the clients writing", || async { shared.writes.lock().len() >= 30 }).await;
    let before = f.sandbox.account();
    let t_start = Instant::now();
    let ledger_start = jiff::Timestamp::now();

    // a. A template change (a longer heartbeat), rolled over the three clusters by spanset.
    let mut container = serde_json::to_value(&example().spec.template.template.spec.unwrap().containers[0]).unwrap();
    container["args"].as_array_mut().expect("args").push("--heartbeat-interval=120".into());
    let body = serde_json::json!({"spec": {"template": {"template": {"spec": {"containers": [container]}}}}});
    f.api().patch("etcd", &PatchParams::default(), &Patch::Merge(&body)).await.expect("template patched");
    rolled(&f).await;
    let t_rolled = Instant::now();
    let mid = f.sandbox.account();
    for m in MEMBERS {
        let pods: Api<Pod> = Api::namespaced(f.member(m).await, "default");
        for p in pods.list(&ListParams::default().labels("spanset.dev/federation=etcd")).await.expect("pods").items {
            let args = p.spec.map(|s| s.containers[0].args.clone().unwrap_or_default()).unwrap_or_default();
            assert!(args.iter().any(|a| a == "--heartbeat-interval=120"), "{m}: {:?} runs {args:?}", p.metadata.name);
        }
    }
    let ledger_rolled = jiff::Timestamp::now();
    healthy(&shared, "after the rollout").await;

    // b. Central's member (etcd-2) moves to west, with its volume (storage: Move).
    let weights = serde_json::json!({"spec": {"placement": {"clusters": [
        {"name": "east", "weight": 1}, {"name": "west", "weight": 2}, {"name": "central", "weight": 0}]}}});
    f.api().patch("etcd", &PatchParams::default(), &Patch::Merge(&weights)).await.expect("placement patched");
    f.wait_settled("etcd", &[("east", 0, 1), ("west", 1, 2)], "etcd-2 in west").await;
    let ips = healthy(&shared, "after the move").await;
    let t_end = Instant::now();
    support::eventually("the clients writing after the move", || async {
        shared.writes.lock().iter().filter(|t| **t > t_end).count() >= 30
    })
    .await;
    shared.stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.await.expect("a client");
    }
    prober.await.expect("the prober");

    // The same three members, by ID: the moved one rejoined from its own data.
    let after = member_list(ips[2]).await.expect("the members listed");
    assert_eq!(after, ids, "the same members after the rollout and the move");
    assert!(f.pod_uids_now("west", "etcd").await.contains_key(&2), "etcd-2 runs in west");

    // Never two members down at once, by the prober; and it did see each member go down
    // (its judgement is not blind): in the rollout every ordinal, in the move ordinal 2.
    let rounds = shared.rounds.lock().clone();
    let during = |from: Instant, to: Instant| rounds.iter().filter(move |(at, _)| *at >= from && *at <= to);
    let lost: Vec<_> = during(t_start, t_end).filter(|(_, down)| down.len() >= 2).collect();
    let seen_down = |from, to, k: u32| during(from, to).any(|(_, down)| down.contains(&k));
    let probes = during(t_start, t_end).count();
    assert!(
        lost.is_empty(),
        "{} of {probes} prober rounds found two members down at once: {:?}",
        lost.len(),
        lost.first()
    );
    for k in 0..3 {
        assert!(seen_down(t_start, t_rolled, k), "the prober never saw etcd-{k} restart in the rollout");
    }
    assert!(seen_down(t_rolled, t_end, 2), "the prober never saw etcd-2 stop for its move");
    // The sandbox's own timeline agrees: never a second member stopped before the first was
    // back (Ready once). Not Ready alone is not down: etcd's `/health`, the readiness probe,
    // fails on every member while they elect a leader, which a member's restart can cause.
    let runs = timeline::runs(&f.sandbox, "etcd");
    let now = jiff::Timestamp::now();
    let (down, at, which) = timeline::most_taken_down(&runs, 0..3, ledger_start, now);
    let (not_ready, _, _) = timeline::most_unavailable(&runs, 0..3, ledger_start, now);
    assert!(
        down <= 1,
        "{down} members taken down at once at {at}: {which:?} (rolled at {ledger_rolled}; at most {not_ready} not Ready at once)"
    );
    let stopped = |k: u32| runs.iter().any(|r| r.ordinal == k && r.until.is_some_and(|u| u > ledger_start));
    assert!((0..3).all(stopped), "the timeline saw every member stop in the rollout: {runs:?}");

    // The writes: the longest time without one that succeeded. One member's restart costs at
    // most a leader election (etcd hands leadership over when its leader is stopped; a crashed
    // leader costs its 1 s election timeout and a campaign), and a lost quorum stops writes
    // until two members are back. The bound is generous for a loaded machine; the safety
    // judgement is the prober's above.
    let writes = shared.writes.lock().clone();
    let gap = longest_write_gap(&writes, t_start, t_end);
    let ops = shared.ops.lock().clone();
    let unknown = ops.iter().filter(|o| o.completed.is_none()).count();
    eprintln!(
        "etcd quorum: {} writes, {} operations ({unknown} of unknown outcome), {probes} prober rounds; \
         longest write gap {gap:?}; rollout {:?}, move {:?}",
        writes.len(),
        ops.len(),
        t_rolled - t_start,
        t_end - t_rolled
    );
    assert!(gap < Duration::from_secs(15), "no write succeeded for {gap:?}");

    // The history is linearizable.
    let checked = Instant::now();
    linearizable::check(&ops).unwrap_or_else(|why| panic!("the clients' history: {why}"));
    eprintln!("etcd quorum: history of {} operations checked in {:?}", ops.len(), checked.elapsed());

    // What spanset did for it: three pods replaced, then one moved.
    let end = f.sandbox.account();
    let phase = |from: &support::account::AccountReport, to: &support::account::AccountReport| {
        let cost = to.since(from);
        let members: u64 = MEMBERS.iter().map(|m| cost.cluster(m).by_actor("spanset").writes()).sum();
        let host = cost.cluster("host");
        // Its leader Lease is renewed on a clock, whatever happens: not what the change cost.
        let lease = host.of("spanset", "leases.coordination.k8s.io").writes();
        (members, host.by_actor("spanset").writes() - lease, host.events.clone())
    };
    let (roll_members, roll_host, roll_events) = phase(&before, &mid);
    let (move_members, move_host, move_events) = phase(&mid, &end);
    eprintln!(
        "etcd quorum: spanset's writes: rollout {roll_members} in the members, {roll_host} in the host, Events {roll_events:?}; \
         move {move_members} in the members, {move_host} in the host, Events {move_events:?}; test time {:?}",
        test_start.elapsed()
    );
    // The budget: docs/failover.md's 16 writes per moved ordinal in the members and in the
    // host, and the same per replaced pod of the rollout (measured: about 10 and 5 per
    // replaced pod, 14 and 10 for the move, the same on a machine loaded by three runs at
    // once); one `RollingUpdate` Event per replaced pod and a
    // `MoveStarted` and `MoveFinished` for the move (its claim handed over, none retired).
    assert!(roll_members <= 3 * 16 && roll_host <= 3 * 16, "the rollout cost {roll_members} / {roll_host} writes");
    assert!(move_members <= 16 && move_host <= 16, "the move cost {move_members} / {move_host} writes");
    let created = |events: &BTreeMap<String, EventCounts>| -> Vec<(String, u64)> {
        events.iter().filter(|(_, e)| e.created > 0).map(|(r, e)| (r.clone(), e.created)).collect()
    };
    assert_eq!(created(&roll_events), [("RollingUpdate".to_string(), 3)], "the rollout's Events");
    assert_eq!(
        created(&move_events),
        [("MoveFinished".to_string(), 1), ("MoveStarted".to_string(), 1)],
        "the move's Events"
    );
    f.assert_ledger_clean();
}
