//! Names that follow ordinals (`spec.network`), measured: `cargo bench --bench network
//! [CHANGES]` (default 20). Weights over east, west, south flip between 1:1:1 (slices
//! [0,2) [2,4) [4,6)) and 2:1:1 ([0,3) [3,5) [5,6)): each change moves two ordinals (redis-2
//! between west and east, redis-4 between south and west) while a poller asks every member's
//! DNS for both names as fast as it answers. For each move: from the new pod Ready (seen by a pod watch
//! in its member) to its name answering the new address in **every** member, and from the new
//! pod's IP assigned to the same; spanset's EndpointSlice writes per move (watch events of its
//! slices in all members); and any answer with two addresses (must be none). Prints one line
//! per figure. Runs on the in-process sandbox at time_factor 0.01, controller in process.

mod support;

use std::{
    collections::BTreeMap,
    net::{Ipv4Addr, SocketAddr, UdpSocket},
    str::FromStr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use hickory_proto::{
    op::{Message, Query},
    rr::{Name, RData, RecordType},
};
use k8s_openapi::api::{core::v1::Pod, discovery::v1::EndpointSlice};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;
use spanset::cli::sandbox::example;
use spanset_api::FederatedStatefulSet;

use support::{Sandbox, wait_settled};

const TIME_FACTOR: f64 = 0.01;
const MOVING: [u32; 2] = [2, 4];

fn main() {
    let moves: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(20);
    actix::System::with_tokio_rt(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime"))
        .block_on(figures(moves));
}

/// When each member's DNS first answered each address for each moving ordinal.
type FirstSeen = BTreeMap<(String, u32, Ipv4Addr), Instant>;

/// When each incarnation (pod uid) of each moving ordinal got its IP and became Ready.
#[derive(Default)]
struct PodTimes {
    ip: BTreeMap<(u32, String), (Instant, Ipv4Addr)>,
    ready: BTreeMap<String, Instant>,
}

fn a_query(server: SocketAddr, socket: &UdpSocket, id: u16, name: &Name) -> Vec<Ipv4Addr> {
    let mut msg = Message::query();
    msg.metadata.id = id;
    msg.add_query(Query::query(name.clone(), RecordType::A));
    let mut buf = [0u8; 2048];
    for _ in 0..5 {
        socket.send_to(&msg.to_vec().expect("encodes"), server).expect("sent");
        let Ok((n, _)) = socket.recv_from(&mut buf) else { continue };
        let Ok(reply) = Message::from_vec(&buf[..n]) else { continue };
        if reply.metadata.id == id {
            return reply
                .answers
                .iter()
                .filter_map(|r| match &r.data {
                    RData::A(a) => Some(a.0),
                    _ => None,
                })
                .collect();
        }
    }
    Vec::new()
}

async fn figures(moves: usize) {
    let members: Vec<String> = ["east", "west", "south"].iter().map(|s| s.to_string()).collect();
    let sb = Sandbox::start(&members, TIME_FACTOR, true).await;
    let running = sb.controller().await;
    let f: FederatedStatefulSet = example(&members);
    let api = sb.fsts();
    api.create(&PostParams::default(), &f).await.expect("federation created");
    wait_settled(&api, "redis", 6, "the federation settled").await;
    let dns: Vec<(String, SocketAddr)> = sb.fleet.dns_endpoints().into_iter().filter(|(n, _)| n != "host").collect();

    // Pod watches: IP and Ready moments of every incarnation of the moving ordinal.
    let times: Arc<Mutex<PodTimes>> = Arc::default();
    let slice_writes = Arc::new(AtomicU64::new(0));
    for m in &members {
        let client = sb.client(m).await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let times = times.clone();
        tokio::spawn(async move {
            let cfg = watcher::Config::default().labels("spanset.dev/federation=redis");
            let mut stream = watcher(pods, cfg).applied_objects().boxed();
            while let Some(Ok(p)) = stream.next().await {
                let k: Option<u32> = p.metadata.name.as_deref().and_then(|n| n.strip_prefix("redis-")?.parse().ok());
                let Some(k) = k.filter(|k| MOVING.contains(k)) else { continue };
                let uid = p.metadata.uid.clone().unwrap_or_default();
                let status = p.status.unwrap_or_default();
                let mut t = times.lock().unwrap();
                if let Some(ip) = status.pod_ip.as_deref().and_then(|ip| ip.parse().ok()) {
                    t.ip.entry((k, uid.clone())).or_insert((Instant::now(), ip));
                }
                let ready =
                    status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True");
                if ready {
                    t.ready.entry(uid).or_insert_with(Instant::now);
                }
            }
        });
        let slices: Api<EndpointSlice> = Api::namespaced(client, "default");
        let writes = slice_writes.clone();
        tokio::spawn(async move {
            let cfg = watcher::Config::default()
                .labels("spanset.dev/federation=redis,endpointslice.kubernetes.io/managed-by=spanset.dev");
            let mut stream = watcher(slices, cfg).boxed();
            let mut listed = false;
            while let Some(Ok(ev)) = stream.next().await {
                match ev {
                    watcher::Event::InitDone => listed = true,
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) if listed => {
                        writes.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
            }
        });
    }

    // The DNS poller: for each member, the first moment each address answered the name.
    let stop = Arc::new(AtomicBool::new(false));
    let first_seen: Arc<Mutex<FirstSeen>> = Arc::default();
    let twice = Arc::new(AtomicU64::new(0));
    let queries = Arc::new(AtomicU64::new(0));
    let poller = {
        let (stop, first_seen, twice, queries) = (stop.clone(), first_seen.clone(), twice.clone(), queries.clone());
        std::thread::spawn(move || {
            let socket = UdpSocket::bind("127.0.0.1:0").expect("socket");
            socket.set_read_timeout(Some(Duration::from_millis(500))).expect("timeout");
            let names: Vec<(u32, Name)> = MOVING
                .iter()
                .map(|k| (*k, Name::from_str(&format!("redis-{k}.redis.default.svc.cluster.local")).expect("name")))
                .collect();
            let mut id: u16 = 0;
            while !stop.load(Ordering::Relaxed) {
                for (member, server) in &dns {
                    for (k, name) in &names {
                        id = id.wrapping_add(1);
                        let ips = a_query(*server, &socket, id, name);
                        queries.fetch_add(1, Ordering::Relaxed);
                        if ips.len() > 1 {
                            twice.fetch_add(1, Ordering::Relaxed);
                        }
                        for ip in ips {
                            first_seen.lock().unwrap().entry((member.clone(), *k, ip)).or_insert_with(Instant::now);
                        }
                    }
                }
            }
        })
    };

    let started = Instant::now();
    let writes_before = slice_writes.load(Ordering::Relaxed);
    let mut from_ready = Vec::new();
    let mut from_ip = Vec::new();
    for i in 0..moves {
        let east = if i % 2 == 0 { 2 } else { 1 };
        let clusters =
            json!([{"name": "east", "weight": east}, {"name": "west", "weight": 1}, {"name": "south", "weight": 1}]);
        api.patch(
            "redis",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"placement": {"clusters": clusters}}})),
        )
        .await
        .expect("weights patched");
        wait_settled(&api, "redis", 6, "the move done").await;
        for k in MOVING {
            // The new incarnation: the latest IP seen for the ordinal.
            let deadline = Instant::now() + support::DEADLINE;
            let (uid, ip_at, ip, ready_at) = loop {
                let found = {
                    let t = times.lock().unwrap();
                    t.ip.iter()
                        .filter(|((o, _), _)| *o == k)
                        .max_by_key(|(_, (at, _))| *at)
                        .and_then(|((_, u), (at, ip))| Some((u.clone(), *at, *ip, *t.ready.get(u)?)))
                };
                if let Some(found) = found {
                    break found;
                }
                assert!(Instant::now() < deadline, "no Ready incarnation of redis-{k} after change {i}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            let everywhere = loop {
                let all: Option<Vec<Instant>> = {
                    let seen = first_seen.lock().unwrap();
                    members.iter().map(|m| seen.get(&(m.clone(), k, ip)).copied()).collect()
                };
                if let Some(all) = all {
                    break all.into_iter().max().expect("members");
                }
                assert!(
                    Instant::now() < deadline,
                    "redis-{k} ({uid}, {ip}) never answered everywhere after change {i}"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            from_ready
                .push(everywhere.saturating_duration_since(ready_at).as_secs_f64() - secs_before(everywhere, ready_at));
            from_ip.push(everywhere.saturating_duration_since(ip_at).as_secs_f64());
        }
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    poller.join().expect("poller");
    let writes = slice_writes.load(Ordering::Relaxed) - writes_before;
    let moved = moves * MOVING.len();
    running.stop().await;

    let p = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 - 1.0) * q).round() as usize] * 1e3
    };
    println!(
        "network: {moved} moves ({moves} weight changes, 2 ordinals each) in {:.1} s, time_factor {TIME_FACTOR}",
        elapsed.as_secs_f64()
    );
    println!(
        "  new pod Ready → its name answers the new address in every member: p50 {:.1} ms, p99 {:.1} ms (negative: before Ready, \
         the headless Service publishes not-ready addresses)",
        p(&mut from_ready, 0.5),
        p(&mut from_ready, 0.99)
    );
    println!(
        "  new pod's IP assigned → its name answers it in every member: p50 {:.1} ms, p99 {:.1} ms",
        p(&mut from_ip, 0.5),
        p(&mut from_ip, 0.99)
    );
    println!(
        "  spanset EndpointSlice writes: {writes} for {moved} moves = {:.1} per move (3 members)",
        writes as f64 / moved as f64
    );
    println!(
        "  DNS answers with two addresses: {} of {} queries",
        twice.load(Ordering::Relaxed),
        queries.load(Ordering::Relaxed)
    );
}

/// `later - earlier` is negative when `later` came first: the amount to subtract.
fn secs_before(a: Instant, b: Instant) -> f64 {
    b.saturating_duration_since(a).as_secs_f64()
}
