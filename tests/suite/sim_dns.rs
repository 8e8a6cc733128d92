//! Cluster DNS of the sandbox: Services and EndpointSlices written with the real kube client,
//! queried with the real `dig` (Debian's `dnsutils`) over UDP and TCP, and with hickory's
//! client in-process; each cluster answers from its own store, and a write is visible to the
//! next query.

use std::{
    collections::BTreeSet,
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
    process::Command,
    str::FromStr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use hickory_server::{
    net::{
        client::{Client, ClientHandle},
        runtime::TokioRuntimeProvider,
        udp::UdpClientStream,
    },
    proto::{
        op::{DnsResponse, ResponseCode},
        rr::{DNSClass, Name, RData, RecordType},
    },
};
use k8s_openapi::api::{core::v1::Service, discovery::v1::EndpointSlice};
use kube::{
    Api, Client as KubeClient,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use spanset_sim::{cluster::ClusterConfig, sandbox::fleet::Fleet};

use crate::support;

/// One quiet cluster (no nodes: nothing but the test writes), by name.
fn quiet(name: &str) -> ClusterConfig {
    ClusterConfig { nodes: 0, time_factor: 0.01, ..ClusterConfig::named(name) }
}

async fn fleet(names: &[&str]) -> (Fleet, Vec<KubeClient>) {
    crate::support::fleet_with_clients(names.iter().map(|n| quiet(n)).collect()).await
}

fn dns_of(fleet: &Fleet, cluster: &str) -> SocketAddr {
    fleet.dns_endpoints().into_iter().find(|(n, _)| n == cluster).map(|(_, a)| a).expect("a DNS server per cluster")
}

async fn create_service(client: &KubeClient, spec: Value) {
    let svc: Service = serde_json::from_value(spec).expect("a Service");
    Api::<Service>::namespaced(client.clone(), "default").create(&PostParams::default(), &svc).await.expect("created");
}

/// The manager of the slices the tests write by hand. Not the sandbox's EndpointSlice
/// controller (`endpointslice-controller.k8s.io`): it owns slices carrying its name and
/// deletes them for a Service without a selector, as these are.
const OTHER_MANAGER: &str = "hand-written.example.dev";

/// An EndpointSlice of Service `service`, managed by `manager`, with `endpoints`.
fn slice(name: &str, service: &str, manager: &str, endpoints: Value) -> EndpointSlice {
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "labels": {"kubernetes.io/service-name": service,
                                              "endpointslice.kubernetes.io/managed-by": manager}},
        "addressType": "IPv4",
        "ports": [{"name": "client", "port": 6379, "protocol": "TCP"}],
        "endpoints": endpoints,
    }))
    .expect("an EndpointSlice")
}

async fn create_slice(client: &KubeClient, slice: EndpointSlice) {
    Api::<EndpointSlice>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &slice)
        .await
        .expect("slice created");
}

/// `web` (ClusterIP 10.96.5.5, port `http`), headless `redis` (port `client`) whose pods are
/// spread over two slices of two managers — one (redis-0 ready, redis-1 not) and spanset's
/// (redis-3, `ready` unset) — and ExternalName `db`.
async fn seed(client: &KubeClient) {
    create_service(
        client,
        json!({"metadata": {"name": "web"},
               "spec": {"clusterIP": "10.96.5.5", "clusterIPs": ["10.96.5.5"],
                        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}),
    )
    .await;
    create_service(
        client,
        json!({"metadata": {"name": "redis"},
               "spec": {"clusterIP": "None", "ports": [{"name": "client", "port": 6379}]}}),
    )
    .await;
    create_service(
        client,
        json!({"metadata": {"name": "db"}, "spec": {"type": "ExternalName", "externalName": "db.example.com"}}),
    )
    .await;
    create_slice(
        client,
        slice(
            "redis-abcde",
            "redis",
            OTHER_MANAGER,
            json!([
                {"addresses": ["10.1.0.10"], "hostname": "redis-0", "conditions": {"ready": true}},
                {"addresses": ["10.1.0.11"], "hostname": "redis-1", "conditions": {"ready": false}},
            ]),
        ),
    )
    .await;
    create_slice(
        client,
        slice("redis-remote", "redis", "spanset.dev", json!([{"addresses": ["10.2.0.13"], "hostname": "redis-3"}])),
    )
    .await;
}

/// `dig` from `PATH` (Debian's `dnsutils`); see `support::program`.
fn dig_binary() -> Option<PathBuf> {
    support::program("dig", "dnsutils")
}

/// Runs `dig @127.0.0.1 -p PORT ARGS` and returns its stdout.
fn dig(dig: &Path, server: SocketAddr, args: &[&str]) -> String {
    let out = Command::new(dig)
        .args([
            format!("@{}", server.ip()),
            "-p".into(),
            server.port().to_string(),
            "+time=5".into(),
            "+tries=2".into(),
        ])
        .args(args)
        .output()
        .expect("dig runs");
    support::succeeded(&format!("dig {args:?}"), out)
}

/// dig's output with every run of spaces and tabs made one space.
fn words(text: &str) -> String {
    text.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect::<Vec<_>>().join("\n")
}

/// The lines of a `+short` answer, sorted.
fn short(dig_path: &Path, server: SocketAddr, args: &[&str]) -> Vec<String> {
    let mut all = vec!["+short"];
    all.extend_from_slice(args);
    let mut lines: Vec<String> = dig(dig_path, server, &all).lines().map(str::to_string).collect();
    lines.sort();
    lines
}

/// The `status:` of the answer (`NOERROR`, `NXDOMAIN`, `REFUSED`…) and the ANSWER count.
fn status(dig_path: &Path, server: SocketAddr, args: &[&str]) -> (String, usize) {
    let mut all = vec!["+noall", "+comments"];
    all.extend_from_slice(args);
    let out = dig(dig_path, server, &all);
    let field = |key: &str| {
        out.split(key).nth(1).and_then(|rest| rest.split([',', ';', '\n']).next()).map(|v| v.trim().to_string())
    };
    let code = field("status: ").unwrap_or_else(|| panic!("no status in {out}"));
    let answers = field("ANSWER: ").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no ANSWER count in {out}"));
    (code, answers)
}

const WEB: &str = "web.default.svc.cluster.local";
const REDIS: &str = "redis.default.svc.cluster.local";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dig_resolves_cluster_ip_headless_endpoint_and_srv_names_over_udp_and_tcp() {
    let Some(d) = dig_binary() else { return };
    let (fleet, clients) = fleet(&["east"]).await;
    seed(&clients[0]).await;
    let dns = dns_of(&fleet, "east");
    tokio::task::spawn_blocking({
        move || {
            let d = d.as_path();
            for transport in ["+notcp", "+tcp"] {
                assert_eq!(short(d, dns, &[transport, WEB]), ["10.96.5.5"], "{transport}");
                // Every ready endpoint of every slice of the Service, whoever manages the slice.
                assert_eq!(short(d, dns, &[transport, REDIS]), ["10.1.0.10", "10.2.0.13"], "{transport}");
                assert_eq!(
                    short(d, dns, &[transport, "redis-3.redis.default.svc.cluster.local"]),
                    ["10.2.0.13"],
                    "{transport}"
                );
            }
            assert_eq!(
                short(d, dns, &["-t", "SRV", "_client._tcp.redis.default.svc.cluster.local"]),
                [
                    "0 50 6379 redis-0.redis.default.svc.cluster.local.",
                    "0 50 6379 redis-3.redis.default.svc.cluster.local."
                ]
            );
            // The targets' addresses come in the additional section, as CoreDNS sends them.
            let srv = ["+noall", "+additional", "-t", "SRV", "_client._tcp.redis.default.svc.cluster.local"];
            let additional = words(&dig(d, dns, &srv));
            assert!(additional.contains("redis-0.redis.default.svc.cluster.local. 5 IN A 10.1.0.10"), "{additional}");
            assert!(additional.contains("redis-3.redis.default.svc.cluster.local. 5 IN A 10.2.0.13"), "{additional}");
            assert_eq!(
                short(d, dns, &["+tcp", "-t", "SRV", "_http._tcp.web.default.svc.cluster.local"]),
                ["0 100 80 web.default.svc.cluster.local."]
            );
            assert_eq!(short(d, dns, &["-t", "CNAME", "db.default.svc.cluster.local"]), ["db.example.com."]);
        }
    })
    .await
    .expect("dig checks pass");
    drop(fleet);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dig_sees_nxdomain_for_missing_or_unready_names_nodata_for_other_types_and_refused_outside_the_zone() {
    let Some(d) = dig_binary() else { return };
    let (fleet, clients) = fleet(&["east"]).await;
    seed(&clients[0]).await;
    let dns = dns_of(&fleet, "east");
    tokio::task::spawn_blocking(move || {
        let d = d.as_path();
        let nx = ("NXDOMAIN".to_string(), 0);
        assert_eq!(status(d, dns, &["nope.default.svc.cluster.local"]), nx);
        assert_eq!(status(d, dns, &["web.nowhere.svc.cluster.local"]), nx, "a namespace that does not exist");
        assert_eq!(status(d, dns, &["redis-1.redis.default.svc.cluster.local"]), nx, "redis-1 is not ready");
        assert_eq!(status(d, dns, &["-t", "SRV", "_nope._tcp.web.default.svc.cluster.local"]), nx);
        assert_eq!(status(d, dns, &["+tcp", "nope.default.svc.cluster.local"]), nx);
        let nodata = ("NOERROR".to_string(), 0);
        assert_eq!(status(d, dns, &["-t", "AAAA", WEB]), nodata);
        assert_eq!(status(d, dns, &["-t", "AAAA", "redis-0.redis.default.svc.cluster.local"]), nodata);
        assert_eq!(status(d, dns, &["default.svc.cluster.local"]), nodata);
        assert_eq!(status(d, dns, &["example.com"]), ("REFUSED".to_string(), 0));
        // Negative answers carry the zone's SOA, TTL 5, as CoreDNS's do.
        let authority = words(&dig(d, dns, &["+noall", "+authority", "nope.default.svc.cluster.local"]));
        assert!(
            authority.contains("cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local."),
            "{authority}"
        );
    })
    .await
    .expect("dig checks pass");
    drop(fleet);
}

/// An answer too large for a UDP datagram comes truncated (`tc`), and dig's retry over TCP
/// gets all of it: 200 ready endpoints of one headless Service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_too_large_for_udp_is_truncated_and_whole_over_tcp() {
    let Some(d) = dig_binary() else { return };
    let (fleet, clients) = fleet(&["east"]).await;
    create_service(&clients[0], json!({"metadata": {"name": "big"}, "spec": {"clusterIP": "None"}})).await;
    let endpoints: Vec<Value> =
        (0..200).map(|i| json!({"addresses": [format!("10.1.{}.{}", i / 100, i % 100 + 1)]})).collect();
    create_slice(&clients[0], slice("big-1", "big", OTHER_MANAGER, json!(endpoints))).await;
    let dns = dns_of(&fleet, "east");
    tokio::task::spawn_blocking(move || {
        let d = d.as_path();
        let name = "big.default.svc.cluster.local";
        let udp_only = dig(d, dns, &["+ignore", "+noedns", "+noall", "+comments", name]);
        assert!(udp_only.contains(" tc"), "truncated over UDP: {udp_only}");
        // dig retries a truncated answer over TCP by itself.
        assert_eq!(short(d, dns, &["+noedns", name]).len(), 200);
        assert_eq!(short(d, dns, &["+tcp", name]).len(), 200);
    })
    .await
    .expect("dig checks pass");
    drop(fleet);
}

/// The `spanset sim` binary prints one `dns NAME:` line per cluster before `ready`, on the
/// ports after the admin API with `--port-base`, `sim-ctl clusters` lists them, and dig
/// reaches each.
#[test]
fn spanset_sim_prints_each_clusters_dns_address_and_it_answers() {
    let Some(d) = dig_binary() else { return };
    // Two API servers, the admin API, two DNS servers.
    let base = support::free_ports(5);
    let sandbox = support::Sandbox::start_with("east,west", &["--port-base", &base.to_string()]);
    let dns: Vec<(String, SocketAddr)> = sandbox
        .banner
        .iter()
        .filter_map(|l| l.strip_prefix("dns ")?.split_once(": "))
        .map(|(name, addr)| (name.to_string(), addr.parse().expect("an address")))
        .collect();
    let expected: Vec<(String, SocketAddr)> = vec![
        ("east".into(), SocketAddr::from(([127, 0, 0, 1], base + 3))),
        ("west".into(), SocketAddr::from(([127, 0, 0, 1], base + 4))),
    ];
    assert_eq!(dns, expected, "banner: {:?}", sandbox.banner);
    // `sim-ctl clusters` (the admin API) lists them too.
    let listed: Value = serde_json::from_str(&sandbox.ctl_ok(&["clusters"])).expect("JSON");
    let listed: Vec<(String, SocketAddr)> = listed["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["dns"].as_str().unwrap().parse().unwrap()))
        .collect();
    assert_eq!(listed, expected);
    for (_, addr) in &dns {
        // Every cluster has the `kubernetes` Service in `default`.
        assert_eq!(short(&d, *addr, &["kubernetes.default.svc.cluster.local"]), ["10.96.0.1"]);
        assert_eq!(short(&d, *addr, &["+tcp", "kubernetes.default.svc.cluster.local"]), ["10.96.0.1"]);
    }
    assert!(sandbox.stop().success());
}

/// A hickory client on UDP to one DNS server.
async fn client(server: SocketAddr) -> Client<TokioRuntimeProvider> {
    let stream = UdpClientStream::builder(server, TokioRuntimeProvider::default()).build();
    let (client, background) = Client::<TokioRuntimeProvider>::from_sender(stream);
    tokio::spawn(background);
    client
}

async fn ask(client: &mut Client<TokioRuntimeProvider>, name: &str, qtype: RecordType) -> DnsResponse {
    let name = Name::from_str(&format!("{name}.")).expect("a name");
    client.query(name, DNSClass::IN, qtype).await.expect("an answer")
}

/// The IPv4 addresses in the answer section.
fn addresses(response: &DnsResponse) -> BTreeSet<IpAddr> {
    response
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hickory_client_gets_authoritative_answers_with_ttl_5_and_srv_additionals() {
    let (fleet, clients) = fleet(&["east"]).await;
    seed(&clients[0]).await;
    let mut dns = client(dns_of(&fleet, "east")).await;

    let web = ask(&mut dns, WEB, RecordType::A).await;
    assert_eq!(web.metadata.response_code, ResponseCode::NoError);
    assert!(web.metadata.authoritative, "cluster DNS is authoritative for its zone");
    assert_eq!(addresses(&web), BTreeSet::from(["10.96.5.5".parse().unwrap()]));
    assert!(web.answers.iter().all(|r| r.ttl == 5));

    let srv = ask(&mut dns, "_client._tcp.redis.default.svc.cluster.local", RecordType::SRV).await;
    let targets: BTreeSet<String> = srv
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::SRV(s) => Some(format!("{} {}", s.port, s.target)),
            _ => None,
        })
        .collect();
    assert_eq!(
        targets,
        BTreeSet::from([
            "6379 redis-0.redis.default.svc.cluster.local.".to_string(),
            "6379 redis-3.redis.default.svc.cluster.local.".to_string()
        ])
    );
    let extra: BTreeSet<String> = srv
        .additionals
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(format!("{} {}", r.name, a.0)),
            _ => None,
        })
        .collect();
    assert_eq!(
        extra,
        BTreeSet::from([
            "redis-0.redis.default.svc.cluster.local. 10.1.0.10".to_string(),
            "redis-3.redis.default.svc.cluster.local. 10.2.0.13".to_string()
        ])
    );

    let missing = ask(&mut dns, "nope.default.svc.cluster.local", RecordType::A).await;
    assert_eq!(missing.metadata.response_code, ResponseCode::NXDomain);
    assert!(missing.authorities.iter().any(|r| r.record_type() == RecordType::SOA));
    drop(fleet);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_clusters_dns_answers_from_its_own_store_only() {
    let (fleet, clients) = fleet(&["east", "west"]).await;
    for (client, ip) in clients.iter().zip(["10.1.0.3", "10.2.0.3"]) {
        create_service(client, json!({"metadata": {"name": "redis"}, "spec": {"clusterIP": "None"}})).await;
        create_slice(
            client,
            slice("redis-own", "redis", OTHER_MANAGER, json!([{"addresses": [ip], "hostname": "redis-3"}])),
        )
        .await;
    }
    // Only east has `web`.
    create_service(
        &clients[0],
        json!({"metadata": {"name": "web"}, "spec": {"clusterIP": "10.96.5.5", "ports": [{"port": 80}]}}),
    )
    .await;
    let mut east = client(dns_of(&fleet, "east")).await;
    let mut west = client(dns_of(&fleet, "west")).await;
    let pod = "redis-3.redis.default.svc.cluster.local";
    assert_eq!(addresses(&ask(&mut east, pod, RecordType::A).await), BTreeSet::from(["10.1.0.3".parse().unwrap()]));
    assert_eq!(addresses(&ask(&mut west, pod, RecordType::A).await), BTreeSet::from(["10.2.0.3".parse().unwrap()]));
    assert_eq!(ask(&mut east, WEB, RecordType::A).await.metadata.response_code, ResponseCode::NoError);
    assert_eq!(ask(&mut west, WEB, RecordType::A).await.metadata.response_code, ResponseCode::NXDomain);
    drop(fleet);
}

/// One write replaces redis-3's address in its slice, again and again, while a poller asks
/// for redis-3 as fast as it can: no answer ever holds two addresses (or none), and the query
/// right after each write sees the new address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpointslice_update_is_visible_to_the_next_query_and_never_answers_two_addresses() {
    let (fleet, clients) = fleet(&["east"]).await;
    let kube = clients[0].clone();
    create_service(&kube, json!({"metadata": {"name": "redis"}, "spec": {"clusterIP": "None"}})).await;
    let endpoints = |ip: &str| json!([{"addresses": [ip], "hostname": "redis-3", "conditions": {"ready": true}}]);
    create_slice(&kube, slice("redis-3", "redis", "spanset.dev", endpoints("10.1.0.3"))).await;
    let server = dns_of(&fleet, "east");
    let pod = "redis-3.redis.default.svc.cluster.local";

    let stop = Arc::new(AtomicBool::new(false));
    let polls = Arc::new(AtomicUsize::new(0));
    let poller = tokio::spawn({
        let (stop, polls) = (stop.clone(), polls.clone());
        async move {
            let mut dns = client(server).await;
            let mut seen = BTreeSet::new();
            while !stop.load(Ordering::Relaxed) {
                let answer = addresses(&ask(&mut dns, pod, RecordType::A).await);
                assert_eq!(answer.len(), 1, "redis-3 answered {answer:?}");
                seen.extend(answer);
                polls.fetch_add(1, Ordering::Relaxed);
            }
            seen
        }
    });
    let api: Api<EndpointSlice> = Api::namespaced(kube, "default");
    let mut check = client(server).await;
    let moves = 20;
    for i in 0..moves {
        // Wait until the poller has asked at least once more, so the writes interleave with it.
        let before = polls.load(Ordering::Relaxed);
        support::eventually("the poller asks again", || {
            let polls = polls.clone();
            async move { polls.load(Ordering::Relaxed) > before }
        })
        .await;
        let ip = if i % 2 == 0 { "10.2.0.3" } else { "10.1.0.3" };
        let patch = json!({"endpoints": endpoints(ip)});
        api.patch("redis-3", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("slice updated");
        let next = addresses(&ask(&mut check, pod, RecordType::A).await);
        assert_eq!(next, BTreeSet::from([ip.parse().unwrap()]), "the query right after write {i}");
    }
    stop.store(true, Ordering::Relaxed);
    let seen = poller.await.expect("the poller never saw two addresses");
    assert_eq!(seen.len(), 2, "the poller saw both addresses over time: {seen:?}");
    eprintln!("{} polls over {moves} writes", polls.load(Ordering::Relaxed));
    drop(fleet);
}
