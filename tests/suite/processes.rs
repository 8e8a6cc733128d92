//! The sandbox's process runtime: containers of `--run-images` images run as real processes —
//! real Redis servers in network namespaces of their own, on their pod IPs, their data on their volumes' directories,
//! Ready by their probes, stopped by SIGTERM at deletion, restarted when they exit, killed with
//! a powered-off node and with the sandbox itself.

use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, LogParams, PostParams},
};
use serde_json::json;
use spanset_sim::{
    cluster::{ClusterConfig, faults::NodeOutage},
    sandbox::fleet::Fleet,
};

use crate::support::{DEADLINE, Sandbox, eventually, program, until};

/// A fleet whose clusters run `images` for real.
async fn fleet(names: &[&str], images: &[&str]) -> (Fleet, Vec<Client>) {
    let configs = names
        .iter()
        .map(|n| ClusterConfig {
            time_factor: 0.05,
            run_images: images.iter().map(|i| i.to_string()).collect(),
            ..ClusterConfig::named(n)
        })
        .collect();
    crate::support::fleet_with_clients(configs).await
}

/// The programs these tests run, or `None` (skipped outside CI) when one is missing.
fn redis() -> Option<PathBuf> {
    program("redis-server", "redis-server")?;
    program("redis-cli", "redis-tools")
}

/// `redis-cli -h IP ARGS`, its output trimmed.
fn redis_cli(ip: &str, args: &[&str]) -> String {
    let out = Command::new("redis-cli").args(["-h", ip]).args(args).output().expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A headless Service and a StatefulSet of `replicas` Redis servers with append-only files on
/// their volumes, Ready when they answer PING.
async fn redis_statefulset(client: &Client, replicas: i32, grace: i64) {
    let service = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "redis"},
        "spec": {"clusterIP": "None", "selector": {"app": "redis"}, "ports": [{"name": "redis", "port": 6379}]},
    });
    Api::<k8s_openapi::api::core::v1::Service>::default_namespaced(client.clone())
        .create(&PostParams::default(), &serde_json::from_value(service).unwrap())
        .await
        .unwrap();
    let sts = json!({
        "metadata": {"name": "redis"},
        "spec": {
            "serviceName": "redis", "replicas": replicas,
            "selector": {"matchLabels": {"app": "redis"}},
            "template": {
                "metadata": {"labels": {"app": "redis"}},
                "spec": {
                    "terminationGracePeriodSeconds": grace,
                    "containers": [{
                        "name": "redis", "image": "redis:7.0",
                        "args": ["--bind", "$(POD_IP)", "--protected-mode", "no", "--dir", "/data", "--appendonly", "yes", "--save", ""],
                        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                        "ports": [{"name": "redis", "containerPort": 6379}],
                        "readinessProbe": {"exec": {"command": ["sh", "-c", "redis-cli -h $POD_IP ping | grep -q PONG"]}, "periodSeconds": 2},
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }],
                },
            },
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
        },
    });
    Api::<StatefulSet>::default_namespaced(client.clone())
        .create(&PostParams::default(), &serde_json::from_value(sts).unwrap())
        .await
        .unwrap();
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn ip(p: &Pod) -> String {
    p.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap_or_default()
}

/// Waits until `name` exists, is Ready, and (if given) is not the pod of uid `not`.
async fn ready_pod(pods: &Api<Pod>, name: &str, not: Option<&str>) -> Pod {
    eventually(&format!("{name} Ready"), || async {
        pods.get_opt(name).await.ok().flatten().is_some_and(|p| ready(&p) && p.uid().as_deref() != not)
    })
    .await;
    pods.get(name).await.unwrap()
}

/// Live processes (not zombies) whose command line contains `marker`.
pub(crate) fn live_processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'));
            !zombie && String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(marker)
        })
        .collect()
}

/// A pod whose policy starts its containers no more is done once they all ended, as a
/// kubelet says: `Never` with one that failed is `Failed`, `OnFailure` whose containers all
/// exited 0 is `Succeeded`; neither runs again.
#[tokio::test]
async fn a_pod_whose_containers_ended_for_good_succeeds_or_fails_by_their_exit_codes() {
    if program("sh", "dash").is_none() {
        return;
    }
    let (_fleet, clients) = fleet(&["solo"], &["busybox"]).await;
    let pods: Api<Pod> = Api::default_namespaced(clients[0].clone());
    let c = |name: &str, script: &str| json!({"name": name, "image": "busybox", "command": ["sh", "-c", script]});
    create(
        &pods,
        json!({"metadata": {"name": "never"}, "spec": {"restartPolicy": "Never",
        "containers": [c("ok", "exit 0"), c("bad", "exit 3")]}}),
    )
    .await;
    create(
        &pods,
        json!({"metadata": {"name": "on-failure"}, "spec": {"restartPolicy": "OnFailure",
        "containers": [c("a", "exit 0"), c("b", "sleep 0.2; exit 0")]}}),
    )
    .await;
    for (name, want) in [("never", "Failed"), ("on-failure", "Succeeded")] {
        let p = until(&format!("{name} {want}"), || async {
            let p = pods.get_opt(name).await.ok().flatten()?;
            let phase = p.status.as_ref()?.phase.clone()?;
            matches!(phase.as_str(), "Succeeded" | "Failed").then_some(p)
        })
        .await;
        let status = p.status.unwrap();
        assert_eq!(status.phase.as_deref(), Some(want), "{name}");
        let restarts: i32 = status.container_statuses.unwrap_or_default().iter().map(|c| c.restart_count).sum();
        assert_eq!(restarts, 0, "{name}: nothing ran again");
    }
}

/// The first `/16` of `100.64.0.0/10` that no route of this machine covers: the one the next
/// sandbox claims, unless another claims it first.
fn next_unclaimed_pod_network() -> u8 {
    let out = Command::new("ip").args(["-4", "route", "show", "root", "100.64.0.0/10"]).output().expect("ip runs");
    let routes = String::from_utf8_lossy(&out.stdout).to_string();
    (64..128).find(|k| !routes.lines().any(|l| l.starts_with(&format!("100.{k}.0.0/16 ")))).expect("a free /16")
}

/// A sandbox that is stopping loses its pod network's routes (with the network's holder)
/// before it closes its sockets there: a `/16` whose route is free can still have its DNS
/// address held. A sandbox starting meanwhile passes it over, rather than failing on its
/// neighbour's last moments.
#[tokio::test]
async fn a_sandbox_passes_over_a_pod_network_whose_dns_address_is_still_held() {
    use rustix::net::{AddressFamily, SocketType, bind, socket, sockopt::set_ip_freebind};
    if program("sh", "dash").is_none() {
        return;
    }
    let k = next_unclaimed_pod_network();
    let held = std::net::SocketAddrV4::new(std::net::Ipv4Addr::new(100, k, 0, 53), 53);
    // Bound as a stopping sandbox's DNS server still is: to an address no interface has now.
    let stale = socket(AddressFamily::INET, SocketType::DGRAM, None).expect("a UDP socket");
    set_ip_freebind(&stale, true).expect("IP_FREEBIND");
    bind(&stale, &held).expect("bound to the unclaimed network's DNS address");
    let (fleet, clients) = fleet(&["solo"], &["busybox"]).await;
    let cluster = &fleet.servers[0].cluster;
    let network = cluster.config.pod_network();
    assert_ne!(network, std::net::Ipv4Addr::new(100, k, 0, 0), "the held network is not this sandbox's");
    // Its pods resolve names through their own network's DNS server.
    let pods: Api<Pod> = Api::default_namespaced(clients[0].clone());
    create(
        &pods,
        json!({"metadata": {"name": "resolver"}, "spec": {"restartPolicy": "Never", "containers": [{
            "name": "c", "image": "busybox", "command": ["sh", "-c", "cat /etc/resolv.conf && getent hosts kubernetes.default.svc.cluster.local"],
        }]}}),
    )
    .await;
    let code = until("the resolver's container ends", || async {
        let p = pods.get_opt("resolver").await.ok().flatten()?;
        let statuses = p.status?.container_statuses?;
        Some(statuses.first()?.state.as_ref()?.terminated.as_ref()?.exit_code)
    })
    .await;
    let logs = pods.logs("resolver", &LogParams::default()).await.unwrap_or_default();
    assert_eq!(code, 0, "the pod resolved the API's name: {logs}");
    until("the resolver pod Succeeded", || async {
        let phase = pods.get_opt("resolver").await.ok().flatten()?.status?.phase?;
        (phase == "Succeeded").then_some(())
    })
    .await;
    assert!(logs.contains(&format!("nameserver {}", nameserver_of(network))), "through its network's DNS: {logs}");
    drop(fleet);
}

/// `a.b.0.53`, the DNS address of pod network `a.b.0.0/16`, as text.
fn nameserver_of(network: std::net::Ipv4Addr) -> String {
    let [a, b, ..] = network.octets();
    format!("{a}.{b}.0.53")
}

#[tokio::test]
async fn redis_servers_run_on_their_pod_ips_resolve_each_other_and_keep_their_data_across_a_replacement() {
    if redis().is_none() {
        return;
    }
    let (fleet, clients) = fleet(&["solo"], &["redis"]).await;
    let client = clients[0].clone();
    // A grace period far beyond any deadline here: a pod gone in time was stopped by SIGTERM.
    redis_statefulset(&client, 2, 100_000).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let r0 = ready_pod(&pods, "redis-0", None).await;
    let r1 = ready_pod(&pods, "redis-1", None).await;
    let (ip0, ip1) = (ip(&r0), ip(&r1));
    assert!(ip0.starts_with("100.") && ip1.starts_with("100.") && ip0 != ip1, "own pod IPs: {ip0} {ip1}");
    // The servers are real and bound to their pod IPs.
    assert_eq!(redis_cli(&ip0, &["set", "greeting", "hello"]), "OK");
    assert_eq!(redis_cli(&ip0, &["get", "greeting"]), "hello");
    assert_eq!(redis_cli(&ip1, &["get", "greeting"]), "", "redis-1 is another server");

    // Inside a container: its hostname, its cluster's DNS through resolv.conf, its volume.
    let cluster = &fleet.servers[0].cluster;
    let prefix = cluster.processes.exec_prefix(&r0.uid().unwrap(), "redis", "redis:7.0").expect("redis-0 runs");
    // Asynchronous: the cluster's DNS server answers on this test's own runtime.
    let inside = |script: &str| {
        let mut cmd = tokio::process::Command::new(&prefix[0]);
        cmd.args(&prefix[1..]).args(["sh", "-c", script]);
        async move { String::from_utf8_lossy(&cmd.output().await.unwrap().stdout).trim().to_string() }
    };
    assert_eq!(inside("hostname").await, "redis-0");
    // The name is published once the EndpointSlice controller lists redis-1 ready.
    let lookup = "getent hosts redis-1.redis | cut -d' ' -f1";
    let start = Instant::now();
    while inside(lookup).await != ip1 {
        assert!(start.elapsed() < DEADLINE, "redis-1.redis resolves through the cluster DNS to {ip1}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(inside("redis-cli -h redis-1.redis.default.svc.cluster.local ping").await, "PONG");
    assert!(inside("ls /data").await.contains("appendonlydir"), "the append-only file is on the volume");
    assert!(
        inside("tr '\\0' ' ' < /proc/1/cmdline").await.starts_with("redis-server"),
        "a PID namespace of its own, the server its first process"
    );

    // Its output is `kubectl logs`.
    let logs = pods.logs("redis-0", &LogParams::default()).await.unwrap();
    assert!(logs.contains("Ready to accept connections"), "{logs}");

    // A replacement (SIGTERM, then a new pod on the same claim) finds the data.
    let old = r0.uid().unwrap();
    pods.delete("redis-0", &DeleteParams::default()).await.unwrap();
    let r0 = ready_pod(&pods, "redis-0", Some(&old)).await;
    assert_eq!(redis_cli(&ip(&r0), &["get", "greeting"]), "hello", "the data came back from the volume");
    assert!(!cluster.processes.running(&old), "the old pod's process is gone (the pod object went only once it was)");
    assert!(cluster.ledger.overlaps().is_empty(), "{:?}", cluster.ledger.overlaps());
    drop(fleet);
}

#[tokio::test]
async fn a_container_that_exits_is_restarted_with_back_off_and_its_previous_log_kept() {
    if program("sh", "dash").is_none() {
        return;
    }
    let (fleet, clients) = fleet(&["solo"], &["busybox"]).await;
    let pods: Api<Pod> = Api::default_namespaced(clients[0].clone());
    let pod = json!({
        "metadata": {"name": "crash"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "echo run $(date +%s%N); exit 3"]}]},
    });
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
    eventually("two restarts", || async {
        let p = pods.get("crash").await.unwrap();
        let s = &p.status.unwrap().container_statuses.unwrap_or_default();
        s.first().is_some_and(|c| c.restart_count >= 2)
    })
    .await;
    let p = pods.get("crash").await.unwrap();
    let c = p.status.unwrap().container_statuses.unwrap().remove(0);
    let last = c.last_state.and_then(|s| s.terminated).expect("the last run's termination");
    assert_eq!((last.exit_code, last.reason.as_deref()), (3, Some("Error")));
    assert!(!c.ready);
    let previous = pods.logs("crash", &LogParams { previous: true, ..LogParams::default() }).await.unwrap();
    assert!(previous.starts_with("run "), "the previous instance's output: {previous:?}");
    drop(fleet);
}

#[tokio::test]
async fn readiness_follows_the_probe_and_a_failed_liveness_probe_restarts_the_container() {
    if program("sh", "dash").is_none() {
        return;
    }
    let (fleet, clients) = fleet(&["solo"], &["busybox"]).await;
    let pods: Api<Pod> = Api::default_namespaced(clients[0].clone());
    let pod = json!({
        "metadata": {"name": "probed"},
        "spec": {"containers": [{
            "name": "c", "image": "busybox",
            "command": ["sh", "-c", "trap 'exit 0' TERM; touch /tmp/ready; while :; do sleep 0.1; done"],
            "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1, "failureThreshold": 1},
            "livenessProbe": {"exec": {"command": ["test", "!", "-f", "/tmp/dead"]}, "periodSeconds": 1, "failureThreshold": 2},
        }]},
    });
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
    let p = ready_pod(&pods, "probed", None).await;
    let cluster = &fleet.servers[0].cluster;
    let uid = p.uid().unwrap();
    let run = |script: &str| {
        let prefix = cluster.processes.exec_prefix(&uid, "c", "busybox").expect("running");
        let ok = Command::new(&prefix[0]).args(&prefix[1..]).args(["sh", "-c", script]).status().unwrap();
        assert!(ok.success(), "{script}");
    };
    run("rm /tmp/ready");
    eventually("not Ready once the readiness probe fails", || async { !ready(&pods.get("probed").await.unwrap()) })
        .await;
    run("touch /tmp/ready");
    let p = ready_pod(&pods, "probed", None).await;
    let restarts = |p: &Pod| p.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0].restart_count;
    assert_eq!(restarts(&p), 0, "readiness alone restarts nothing");
    run("touch /tmp/dead");
    eventually("restarted by the liveness probe", || async { restarts(&pods.get("probed").await.unwrap()) == 1 }).await;
    // The new instance has a fresh /tmp: ready again, and alive.
    let p = ready_pod(&pods, "probed", None).await;
    assert_eq!(p.uid().unwrap(), uid, "the same pod, its container restarted");
    drop(fleet);
}

#[tokio::test]
async fn a_powered_off_node_kills_its_processes_at_once_and_a_lost_network_leaves_them_running() {
    if redis().is_none() {
        return;
    }
    let (fleet, clients) = fleet(&["solo"], &["redis"]).await;
    let client = clients[0].clone();
    redis_statefulset(&client, 2, 30).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let r0 = ready_pod(&pods, "redis-0", None).await;
    let r1 = ready_pod(&pods, "redis-1", None).await;
    let node = |p: &Pod| p.spec.as_ref().unwrap().node_name.clone().unwrap();
    assert_ne!(node(&r0), node(&r1), "spread over nodes");
    let faults = &fleet.servers[0].cluster.faults;

    // Network lost: the node goes Unknown, and the server answers all along.
    faults.node_out(&node(&r1), NodeOutage::Unreachable);
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let start = Instant::now();
    loop {
        assert_eq!(redis_cli(&ip(&r1), &["ping"]), "PONG", "redis-1 runs while its node is out of reach");
        let n = nodes.get(&node(&r1)).await.unwrap();
        let unknown = n.status.unwrap().conditions.unwrap().iter().any(|c| c.type_ == "Ready" && c.status == "Unknown");
        if unknown {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "node marked Unknown");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(redis_cli(&ip(&r1), &["ping"]), "PONG");

    // Power off: the server is gone at once.
    faults.node_out(&node(&r0), NodeOutage::PoweredOff);
    eventually("redis-0 stopped with its machine", || async { redis_cli(&ip(&r0), &["ping"]) != "PONG" }).await;
    assert!(!fleet.servers[0].cluster.processes.running(&r0.uid().unwrap()));
    assert_eq!(redis_cli(&ip(&r1), &["ping"]), "PONG", "the other node's server is untouched");

    // Power on: the pod's container starts again, on its volume.
    faults.node_back(&node(&r0));
    eventually("redis-0 back after power-on", || async { redis_cli(&ip(&r0), &["ping"]) == "PONG" }).await;
    drop(fleet);
}

#[test]
fn nothing_the_sandbox_ran_outlives_it_even_when_it_is_killed() {
    if program("sh", "dash").is_none() || program("kubectl", "kubectl").is_none() {
        return;
    }
    let sandbox = Sandbox::start_with("solo", &["--run-images", "busybox"]);
    let marker = format!("spanset-orphan-check-{}", std::process::id());
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleeper"},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "command": ["sh", "-c", format!("sleep 100000 & sleep 100001; echo {marker}")]}]},
    });
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&sandbox.kubeconfig)
        .args(["create", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(pod.to_string().as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success());
    let start = Instant::now();
    while live_processes_with(&marker).is_empty() {
        assert!(start.elapsed() < DEADLINE, "the container's shell started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sleepers = |n: &str| live_processes_with(&format!("sleep {n}"));
    while sleepers("100000").is_empty() || sleepers("100001").is_empty() {
        assert!(start.elapsed() < DEADLINE, "both of its children started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = sandbox.pid();
    // Its pods' network reaches this machine through one link of its own, named for it.
    let links = || -> Vec<String> {
        let out = Command::new("ip").args(["-o", "link", "show"]).output().expect("ip runs");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split(": ").nth(1).map(|n| n.split('@').next().unwrap_or(n).to_string()))
            .filter(|n| n.starts_with(&format!("spn{pid}x")))
            .collect()
    };
    assert_eq!(links().len(), 1, "one link to the pods' network");
    Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    let start = Instant::now();
    while !(live_processes_with(&marker).is_empty()
        && sleepers("100000").is_empty()
        && sleepers("100001").is_empty()
        && links().is_empty())
    {
        assert!(
            start.elapsed() < DEADLINE,
            "the container's processes and the pods' network ended with the sandbox: {:?}",
            links()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(sandbox);
    // Its scratch directories (the containers' roots) could not be removed by it; the next
    // sandbox that runs a container removes them.
    let left = || -> Vec<String> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with(&format!("spanset-containers-{pid}-")))
            .collect()
    };
    assert!(!left().is_empty(), "a killed sandbox leaves its containers' directory");
    let next = Sandbox::start_with("solo", &["--run-images", "busybox"]);
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&next.kubeconfig)
        .args(["run", "next", "--image", "busybox", "--restart", "Never", "--command", "--", "true"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let start = Instant::now();
    while !left().is_empty() {
        assert!(start.elapsed() < DEADLINE, "the next sandbox removed {:?}", left());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Real processes need root, and a sandbox that is not root says so and starts nothing: each
/// pod's network is joined to this machine by a veth pair. Run as `nobody`, `spanset sim
/// --run-images` fails naming root and the capability, and writes no kubeconfig.
#[test]
fn as_a_normal_user_real_processes_are_refused_naming_what_they_need() {
    if !spanset_sim::cluster::processes::launch::running_as_root() {
        eprintln!("skipped: the test becomes nobody, which needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let out = Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups", "env"])
        .arg(format!("HOME={}", dir.path().display()))
        .arg(env!("CARGO_BIN_EXE_spanset"))
        .args(["sim", "--clusters", "east", "--auth", "--run-images", "redis", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("setpriv runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {stderr}");
    assert!(stderr.contains("need the sandbox to run as root"), "{stderr}");
    assert!(stderr.contains("CAP_NET_ADMIN"), "names the capability: {stderr}");
    assert!(!kubeconfig.exists(), "nothing started, nothing written");
}

/// Each pod has a network of its own, as on a real node: `localhost` in a pod is the pod (an
/// exec probe on it makes the pod Ready, `redis-cli` without `-h` finds the pod's own server,
/// a server of this machine on loopback is out of reach), two pods listen on one port, a pod
/// reaches another by its pod IP from an address of its own (which Redis's protected mode
/// refuses, as it refuses a stranger), and this machine, their node, reaches both. A pod
/// sharing its PID namespace shares its network too: its init container runs first, and one
/// container signals another's process.
#[tokio::test]
async fn each_pod_has_a_network_of_its_own_where_localhost_is_the_pod() {
    if redis().is_none() {
        return;
    }
    let machine = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    machine.set_nonblocking(true).unwrap();
    let machine_port = machine.local_addr().unwrap().port();
    let (fleet, clients) = fleet(&["solo"], &["redis", "busybox"]).await;
    let pods: Api<Pod> = Api::default_namespaced(clients[0].clone());
    for name in ["a", "b"] {
        create(
            &pods,
            json!({"metadata": {"name": name}, "spec": {"containers": [{
                "name": "redis", "image": "redis:7.0",
                "command": ["redis-server", "--port", "6379", "--save", ""],
                "readinessProbe": {"exec": {"command": ["sh", "-c", "redis-cli ping | grep -q PONG"]}, "periodSeconds": 1},
            }]}}),
        )
        .await;
    }
    let a = ready_pod(&pods, "a", None).await;
    let b = ready_pod(&pods, "b", None).await;
    let cluster = &fleet.servers[0].cluster;
    let inside = |pod: &Pod, script: String| {
        let prefix = cluster.processes.exec_prefix(&pod.uid().unwrap(), "redis", "redis:7.0").expect("it runs");
        let mut cmd = tokio::process::Command::new(&prefix[0]);
        cmd.args(&prefix[1..]).args(["sh", "-c", &script]);
        async move {
            let out = cmd.output().await.unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
            text.trim().to_string()
        }
    };
    assert_eq!(inside(&a, "redis-cli set owner a".into()).await, "OK");
    assert_eq!(inside(&a, "redis-cli get owner".into()).await, "a", "localhost in a is a");
    assert_eq!(inside(&b, "redis-cli get owner".into()).await, "", "localhost in b is b, on the same port");
    let to_machine = inside(&a, format!("redis-cli -p {machine_port} ping")).await;
    assert!(to_machine.contains("Connection refused"), "the machine's loopback is not the pod's: {to_machine}");
    assert!(machine.accept().is_err(), "nothing reached the machine's server");
    let a_to_b = inside(&a, format!("redis-cli -h {} ping", ip(&b))).await;
    assert!(a_to_b.starts_with("DENIED"), "b sees a from an address that is not its loopback: {a_to_b}");
    let addresses = inside(&a, "ip -o -4 addr show".into()).await;
    assert!(addresses.contains(&format!("eth0    inet {}/32", ip(&a))), "{addresses}");
    assert!(!addresses.contains(&ip(&b)), "{addresses}");
    let from_node = tokio::net::TcpStream::connect((ip(&a).as_str(), 6379)).await;
    assert!(from_node.is_ok(), "the node reaches a pod IP: {from_node:?}");

    create(
        &pods,
        json!({"metadata": {"name": "shared"}, "spec": {
            "shareProcessNamespace": true, "restartPolicy": "Never",
            "volumes": [{"name": "w", "emptyDir": {}}],
            "initContainers": [{"name": "setup", "image": "busybox",
                "command": ["sh", "-c", "echo set up > /w/setup"], "volumeMounts": [{"name": "w", "mountPath": "/w"}]}],
            "containers": [
                {"name": "target", "image": "busybox",
                 "command": ["sh", "-c", "cat /w/setup; trap 'echo got TERM; exit 0' TERM; while :; do sleep 0.1; done", "shared-target"],
                 "volumeMounts": [{"name": "w", "mountPath": "/w"}]},
                {"name": "tool", "image": "busybox", "command": ["sh", "-c", "while :; do sleep 0.1; done"]}]}}),
    )
    .await;
    let shared = ready_pod(&pods, "shared", None).await;
    let prefix = cluster.processes.exec_prefix(&shared.uid().unwrap(), "tool", "busybox").expect("tool runs");
    // The marker in two quoted halves: the killing shell's own command line does not hold it.
    let kill = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q 'shared-''target' \
                && kill -TERM ${p#/proc/} && echo ${p#/proc/}; done | wc -l; ip -o -4 addr show eth0";
    let out =
        tokio::process::Command::new(&prefix[0]).args(&prefix[1..]).args(["sh", "-c", kill]).output().await.unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.starts_with("1\n"), "one container signals another's process: {out}");
    assert!(out.contains(&format!("inet {}/32", ip(&shared))), "the pod's network: {out}");
    eventually("the target ends on its signal", || async {
        let p = pods.get("shared").await.unwrap();
        state_of(&p, "containerStatuses", "target")["terminated"]["exitCode"] == 0
    })
    .await;
    let logs =
        pods.logs("shared", &LogParams { container: Some("target".into()), ..Default::default() }).await.unwrap();
    assert_eq!(logs, "set up\ngot TERM\n", "after its init container, the target got the signal");
    drop(fleet);
}

/// The `state` of a pod's container (or init container, `list` `initContainerStatuses`).
fn state_of(p: &Pod, list: &str, name: &str) -> serde_json::Value {
    let status = serde_json::to_value(p.status.as_ref().unwrap()).unwrap();
    status[list]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == name)
        .map(|c| c["state"].clone())
        .unwrap_or_default()
}

fn phase(p: &Pod) -> String {
    p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
}

async fn create(pods: &Api<Pod>, pod: serde_json::Value) {
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
}

/// Looks at `judge` (which asserts what must hold at every look) until it says it has seen
/// what it waits for and, after that, the kubelet has swept `n` more times: a ConfigMap
/// written at each look wakes it, as any change does.
async fn through_sweeps(
    cluster: &spanset_sim::cluster::Cluster,
    client: &Client,
    n: u64,
    mut judge: impl AsyncFnMut() -> bool,
) {
    use std::sync::atomic::Ordering::SeqCst;
    let pokes: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::default_namespaced(client.clone());
    let start = Instant::now();
    let mut from = None;
    for look in 0u64.. {
        if judge().await {
            let from = *from.get_or_insert(cluster.counters.kubelet_sweeps.load(SeqCst));
            if cluster.counters.kubelet_sweeps.load(SeqCst) >= from + n {
                return;
            }
            let poke = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "poke"}, "data": {"look": look.to_string()}});
            let poke: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(poke).unwrap();
            let pp = kube::api::PatchParams::apply("test").force();
            pokes.patch("poke", &pp, &kube::api::Patch::Apply(&poke)).await.unwrap();
        }
        assert!(start.elapsed() < DEADLINE, "the kubelet swept {n} times after what was awaited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_pod_mixing_real_and_simulated_containers_starts_none_of_them_and_says_what_to_run() {
    if program("sh", "dash").is_none() {
        return;
    }
    let (fleet, clients) = fleet(&["solo"], &["busybox"]).await;
    let cluster = fleet.servers[0].cluster.clone();
    let pods: Api<Pod> = Api::default_namespaced(clients[0].clone());
    let marker = format!("spanset-half-simulated-{}", std::process::id());
    let busy = |name: &str| json!({"name": name, "image": "busybox", "command": ["sh", "-c", "while :; do sleep 0.1; done", marker]});
    // A simulated main container beside real ones; a simulated init container before a real one.
    create(
        &pods,
        json!({"metadata": {"name": "mixed"}, "spec": {
        "initContainers": [busy("setup")], "containers": [busy("main"), {"name": "web", "image": "nginx:1.25"}]}}),
    )
    .await;
    create(
        &pods,
        json!({"metadata": {"name": "mixed-init"}, "spec": {
        "initContainers": [{"name": "setup", "image": "nginx:1.25"}], "containers": [busy("main")]}}),
    )
    .await;
    // An all-real pod beside them runs (its processes keep the kubelet sweeping).
    create(
        &pods,
        json!({"metadata": {"name": "real"}, "spec": {
        "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "while :; do sleep 0.1; done"]}]}}),
    )
    .await;
    through_sweeps(&cluster, &clients[0], 30, async || {
        assert!(live_processes_with(&marker).is_empty(), "a container of a half-simulated pod started");
        let mut refused = true;
        for name in ["mixed", "mixed-init"] {
            let p = pods.get(name).await.unwrap();
            assert!(!ready(&p) && phase(&p) != "Running", "{name} never runs: {:?}", p.status);
            refused &= state_of(&p, "initContainerStatuses", "setup").get("waiting").is_some();
        }
        refused && ready(&pods.get("real").await.unwrap())
    })
    .await;
    let p = pods.get("mixed").await.unwrap();
    let web = &state_of(&p, "containerStatuses", "web")["waiting"];
    assert_eq!(web["reason"], "CreateContainerConfigError", "{web}");
    let message = web["message"].as_str().unwrap();
    assert!(
        message.contains("add nginx to --run-images") && message.contains("setup, main run real processes"),
        "{message}"
    );
    assert_eq!(state_of(&p, "initContainerStatuses", "setup")["waiting"]["reason"], "PodInitializing");
    assert_eq!(state_of(&p, "containerStatuses", "main")["waiting"]["reason"], "PodInitializing");
    let p = pods.get("mixed-init").await.unwrap();
    let setup = &state_of(&p, "initContainerStatuses", "setup")["waiting"];
    assert_eq!(setup["reason"], "CreateContainerConfigError", "{setup}");
    assert!(!cluster.processes.running(&pods.get("mixed").await.unwrap().uid().unwrap()));
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(clients[0].clone());
    let failed = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|e| e.involved_object.name.as_deref() == Some("mixed") && e.reason.as_deref() == Some("Failed"));
    let failed = failed.expect("a Failed Event for the refused container");
    assert!(failed.message.unwrap_or_default().starts_with("Error: image nginx:1.25 is simulated"));
    drop(fleet);
}

#[tokio::test]
async fn a_guard_in_a_cluster_that_runs_no_processes_is_refused_and_its_pod_never_runs() {
    let (fleet, clients) = fleet(&["solo"], &[]).await;
    let cluster = fleet.servers[0].cluster.clone();
    let pods: Api<Pod> = Api::default_namespaced(clients[0].clone());
    create(&pods, json!({"metadata": {"name": "guarded"}, "spec": {
        "initContainers": [{"name": "spanset-guard", "image": "ghcr.io/spanset/spanset:0.1.0", "args": ["guard", "wait"]}],
        "containers": [{"name": "db", "image": "redis:7", "command": ["redis-server"]}]}}))
    .await;
    create(
        &pods,
        json!({"metadata": {"name": "plain"}, "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}),
    )
    .await;
    let guarded = pods.get("guarded").await.unwrap().uid().unwrap();
    through_sweeps(&cluster, &clients[0], 20, async || {
        let p = pods.get("guarded").await.unwrap();
        assert!(!ready(&p) && phase(&p) != "Running", "the guarded pod never runs: {:?}", p.status);
        assert!(!cluster.ledger.open_in("solo").iter().any(|(uid, _)| *uid == guarded), "nor runs in the ledger");
        let refused = state_of(&p, "initContainerStatuses", "spanset-guard").get("waiting").is_some();
        // A simulated pod without a guard runs as ever.
        refused && ready(&pods.get("plain").await.unwrap())
    })
    .await;
    let p = pods.get("guarded").await.unwrap();
    let waiting = &state_of(&p, "initContainerStatuses", "spanset-guard")["waiting"];
    assert_eq!(waiting["reason"], "CreateContainerConfigError");
    assert_eq!(
        waiting["message"],
        "spanset's guard controls real processes; run the sandbox with --run-images naming the pod's images (redis)"
    );
    assert_eq!(state_of(&p, "containerStatuses", "db")["waiting"]["reason"], "PodInitializing");
    drop(fleet);
}

#[tokio::test]
async fn a_container_s_termination_message_is_its_file_or_on_failure_its_log_s_tail() {
    if program("sh", "dash").is_none() {
        return;
    }
    let (fleet, clients) = fleet(&["solo"], &["busybox"]).await;
    let pods: Api<Pod> = Api::default_namespaced(clients[0].clone());
    let c = |name: &str, script: &str| json!({"name": name, "image": "busybox", "command": ["sh", "-c", script]});
    let mut fallback = c("fallback", "for i in $(seq 1 100); do echo line $i; done; exit 3");
    fallback["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
    let mut written = c("written", "echo from the file > /dev/termination-log; echo not this; exit 4");
    written["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
    let mut elsewhere = c("elsewhere", "echo custom > /tmp/why/message; exit 1");
    elsewhere["terminationMessagePath"] = json!("/tmp/why/message");
    create(
        &pods,
        json!({"metadata": {"name": "messages"}, "spec": {"restartPolicy": "Never",
        "initContainers": [c("init", "printf 'init done' > /dev/termination-log")],
        "containers": [
            c("file", "printf bye > /dev/termination-log"),
            fallback, written, elsewhere,
            c("plain-failure", "echo oops; exit 2"),
            c("big", "head -c 5000 /dev/zero | tr '\\0' x > /dev/termination-log"),
        ]}}),
    )
    .await;
    let names = ["file", "fallback", "written", "elsewhere", "plain-failure", "big"];
    let p = until("every container ended", || async {
        let p = pods.get("messages").await.ok()?;
        names.iter().all(|n| state_of(&p, "containerStatuses", n).get("terminated").is_some()).then_some(p)
    })
    .await;
    let message =
        |list: &str, name: &str| state_of(&p, list, name)["terminated"]["message"].as_str().map(str::to_string);
    assert_eq!(message("initContainerStatuses", "init").as_deref(), Some("init done"), "an init container's too");
    assert_eq!(message("containerStatuses", "file").as_deref(), Some("bye"));
    let tail = message("containerStatuses", "fallback").expect("the log's tail");
    assert_eq!(tail.lines().collect::<Vec<_>>(), (21..=100).map(|i| format!("line {i}")).collect::<Vec<_>>());
    assert_eq!(
        message("containerStatuses", "written").as_deref(),
        Some("from the file\n"),
        "the file wins over the log"
    );
    assert_eq!(message("containerStatuses", "elsewhere").as_deref(), Some("custom\n"), "its terminationMessagePath");
    assert_eq!(message("containerStatuses", "plain-failure"), None, "policy File: no fallback to the log");
    assert_eq!(message("containerStatuses", "big").map(|m| m.len()), Some(4096), "at most 4096 bytes");

    // After a restart the message is the last state's.
    create(&pods, json!({"metadata": {"name": "again"}, "spec": {"volumes": [{"name": "w", "emptyDir": {}}],
        "containers": [{"name": "c", "image": "busybox", "volumeMounts": [{"name": "w", "mountPath": "/w"}],
            "command": ["sh", "-c", "echo x >> /w/runs; echo run $(wc -l < /w/runs) > /dev/termination-log; exit 1"]}]}}))
    .await;
    let last = until("a restart", || async {
        let p = pods.get("again").await.ok()?;
        let s = serde_json::to_value(p.status?.container_statuses?.remove(0)).ok()?;
        (s["restartCount"].as_u64()? >= 1).then(|| s["lastState"]["terminated"]["message"].clone())
    })
    .await;
    assert!(last.as_str().is_some_and(|m| m.starts_with("run ")), "{last}");
    drop(fleet);
}

#[tokio::test]
async fn with_real_back_off_a_crashing_container_waits_ten_then_twenty_real_seconds_in_crash_loop_back_off() {
    if program("sh", "dash").is_none() {
        return;
    }
    let config = ClusterConfig {
        time_factor: 0.01,
        run_images: vec!["busybox".into()],
        real_back_off: true,
        ..ClusterConfig::named("solo")
    };
    let (fleet, clients) = crate::support::fleet_with_clients(vec![config]).await;
    let pods: Api<Pod> = Api::default_namespaced(clients[0].clone());
    // Each run notes its start in the pod's own volume, which outlives its containers.
    let script = "date +%s%N >> /out/starts; exit 1";
    create(
        &pods,
        json!({"metadata": {"name": "crash"}, "spec": {"volumes": [{"name": "out", "emptyDir": {}}],
        "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", script],
                        "volumeMounts": [{"name": "out", "mountPath": "/out"}]}]}}),
    )
    .await;
    let uid = pods.get("crash").await.unwrap().metadata.uid.unwrap();
    // Every state the container shows, in order, with its restart count, until its third run.
    let mut seen: Vec<(String, i32)> = Vec::new();
    let start = Instant::now();
    loop {
        let p = pods.get("crash").await.unwrap();
        if let Some(c) = p.status.and_then(|s| s.container_statuses).and_then(|mut c| c.pop()) {
            let state = serde_json::to_value(c.state.unwrap_or_default()).unwrap();
            let kind = match (state.get("waiting"), state.get("running"), state.get("terminated")) {
                (Some(w), ..) => w["reason"].as_str().unwrap_or("waiting").to_string(),
                (_, Some(_), _) => "running".to_string(),
                (.., Some(_)) => "terminated".to_string(),
                _ => "none".to_string(),
            };
            if seen.last() != Some(&(kind.clone(), c.restart_count)) {
                seen.push((kind, c.restart_count));
            }
            if c.restart_count >= 2 {
                break;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(120), "two restarts in two minutes: {seen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = crate::support::pod_volume_on_machine(&uid, "out").expect("the pod's volume on this machine");
    let runs: Vec<u128> = eventually_lines(&out.join("starts"), 3).await;
    let gap = |i: usize| Duration::from_nanos((runs[i + 1] - runs[i]) as u64);
    assert!(
        gap(0) >= Duration::from_secs(10) && gap(0) < Duration::from_secs(20),
        "10 s before the first restart: {:?}",
        gap(0)
    );
    assert!(
        gap(1) >= Duration::from_secs(20) && gap(1) < Duration::from_secs(40),
        "20 s before the second: {:?}",
        gap(1)
    );
    // Meanwhile it was shown waiting in CrashLoopBackOff before each restart.
    let back_off = |count: i32| seen.iter().position(|s| *s == ("CrashLoopBackOff".to_string(), count));
    let restarted = |count: i32| seen.iter().position(|(_, c)| *c == count);
    assert!(back_off(0).is_some_and(|b| restarted(1).is_some_and(|r| b < r)), "{seen:?}");
    assert!(back_off(1).is_some_and(|b| restarted(2).is_some_and(|r| b < r)), "{seen:?}");
    drop(fleet);
}

/// The first `n` lines of a file, as numbers, once it has them.
async fn eventually_lines(file: &std::path::Path, n: usize) -> Vec<u128> {
    until("the runs' starts", || async {
        let text = std::fs::read_to_string(file).ok()?;
        let lines: Vec<u128> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        (lines.len() >= n).then_some(lines)
    })
    .await
}
