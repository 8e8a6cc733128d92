//! Cluster DNS throughput: queries per second against one simulated cluster's DNS server
//! holding 100 Services (50 ClusterIP, 50 headless with a 3-endpoint EndpointSlice each),
//! through hickory's UDP client, one at a time and 8 in flight, plus the latency of one query
//! and the cost of a lookup in-process (no sockets).
//! Run with `cargo bench -p spanset-sim --bench dns`; it prints one line per figure.

use std::{
    str::FromStr,
    time::{Duration, Instant},
};

use hickory_server::{
    net::{
        client::{Client, ClientHandle},
        runtime::TokioRuntimeProvider,
        udp::UdpClientStream,
    },
    proto::{
        op::ResponseCode,
        rr::{DNSClass, Name, RecordType},
    },
};
use serde_json::json;
use spanset_sim::{
    cluster::ClusterConfig,
    dns::{answer, lookup, name},
    sandbox::fleet::Fleet,
    store::registry::WriteOptions,
};

const SERVICES: usize = 100;
const RUN: Duration = Duration::from_secs(3);

/// The names asked, round-robin: each kind of record over all Services.
fn queries() -> Vec<(Name, RecordType)> {
    let mut out = vec![];
    for i in 0..SERVICES / 2 {
        let n = |s: String| Name::from_str(&s).expect("a name");
        out.push((n(format!("web-{i}.default.svc.cluster.local.")), RecordType::A));
        out.push((n(format!("db-{i}.default.svc.cluster.local.")), RecordType::A));
        out.push((n(format!("db-{i}-1.db-{i}.default.svc.cluster.local.")), RecordType::A));
        out.push((n(format!("_client._tcp.db-{i}.default.svc.cluster.local.")), RecordType::SRV));
    }
    out
}

async fn client(server: std::net::SocketAddr) -> Client<TokioRuntimeProvider> {
    let stream = UdpClientStream::builder(server, TokioRuntimeProvider::default()).build();
    let (client, background) = Client::<TokioRuntimeProvider>::from_sender(stream);
    tokio::spawn(background);
    client
}

/// Queries per second with `concurrency` clients asking in a loop for [`RUN`].
async fn queries_per_second(server: std::net::SocketAddr, concurrency: usize) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|t| {
            tokio::spawn(async move {
                let mut dns = client(server).await;
                let qs = queries();
                let mut n = 0usize;
                while start.elapsed() < RUN {
                    let (name, qtype) = qs[(n + t * 7) % qs.len()].clone();
                    let r = dns.query(name, DNSClass::IN, qtype).await.expect("an answer");
                    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
                    assert!(!r.answers.is_empty());
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("bench task");
    }
    total as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    // No worker nodes: nothing but the bench writes, and no kubelet competes for the cores.
    let fleet = Fleet::start(vec![ClusterConfig { nodes: 0, ..ClusterConfig::named("bench") }], None)
        .await
        .expect("sandbox starts");
    let cluster = fleet.servers[0].cluster.clone();
    let services = cluster.resources.by_plural("", "services").expect("services served");
    let slices = cluster.resources.by_plural("discovery.k8s.io", "endpointslices").expect("endpointslices served");
    let write = WriteOptions::default();
    for i in 0..SERVICES / 2 {
        let web = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("web-{i}")},
                         "spec": {"clusterIP": format!("10.96.1.{i}"), "ports": [{"name": "http", "port": 80}]}});
        cluster.create(&services, Some("default"), web, &write).expect("service stored");
        let db = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("db-{i}")},
                        "spec": {"clusterIP": "None", "ports": [{"name": "client", "port": 6379}]}});
        cluster.create(&services, Some("default"), db, &write).expect("service stored");
        let endpoints: Vec<_> = (0..3)
            .map(|k| json!({"addresses": [format!("10.244.{i}.{k}")], "hostname": format!("db-{i}-{k}"), "conditions": {"ready": true}}))
            .collect();
        let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                           "metadata": {"name": format!("db-{i}-x"), "labels": {"kubernetes.io/service-name": format!("db-{i}")}},
                           "addressType": "IPv4", "ports": [{"name": "client", "port": 6379, "protocol": "TCP"}],
                           "endpoints": endpoints});
        cluster.create(&slices, Some("default"), slice, &write).expect("slice stored");
    }
    let server = fleet.dns_endpoints()[0].1;

    // In-process: parse, look up in the store and build the records, no sockets.
    let qs = queries();
    let rounds = 20_000;
    let start = Instant::now();
    for i in 0..rounds {
        let (qname, qtype) = &qs[i % qs.len()];
        let found = lookup::lookup(&cluster.storage, &name::parse(&qname.to_ascii()));
        let r = answer::respond(qname, *qtype, &found, 1);
        assert!(!r.answers.is_empty());
    }
    let per = start.elapsed() / rounds as u32;
    println!("dns lookup in-process (parse + store + records), {SERVICES} Services: {per:?} per query");

    // One query at a time: latency percentiles.
    let mut dns = client(server).await;
    let mut times = Vec::with_capacity(2_000);
    for i in 0..2_000 {
        let (name, qtype) = qs[i % qs.len()].clone();
        let t = Instant::now();
        dns.query(name, DNSClass::IN, qtype).await.expect("an answer");
        times.push(t.elapsed());
    }
    times.sort();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    println!("dns query latency over UDP, one at a time: p50 {:?}, p99 {:?}", pct(0.5), pct(0.99));

    for concurrency in [1, 8] {
        let qps = queries_per_second(server, concurrency).await;
        println!("dns queries/s over UDP, {concurrency} in flight, {SERVICES} Services: {qps:.0}");
    }
}
