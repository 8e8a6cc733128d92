//! One real cluster: its components started in the order each needs the one before (etcd, then
//! kube-apiserver, then the controller-manager, the scheduler and kwok), each awaited by what it
//! serves rather than by a delay, and stopped in reverse. Each cluster has its own directory
//! (certificates, etcd's data, one log per component, the kubeconfig) and its own ports, so that
//! several run side by side. A component can be killed and started again with the same
//! arguments, ports and data, as a member lost and returning, or a node whose kubelet stops,
//! are to be played.

use std::{
    net::{IpAddr, Ipv4Addr, TcpListener},
    path::{Path, PathBuf},
    process::Child,
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant},
};

use base64::Engine as _;
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::{
    Api, Client, Config,
    api::PostParams,
    config::{KubeConfigOptions, Kubeconfig},
};

use crate::{Binaries, Error, Result, io, pki::Pki, spawn};

/// How long a component may take to become ready on a loaded 2-core machine.
const READY_WITHIN: Duration = Duration::from_secs(180);

/// What a cluster is made with.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Its name: the kubeconfig's context and cluster, and the prefix of its nodes.
    pub name: String,
    /// How many kwok nodes it has.
    pub nodes: usize,
    /// The third octet of its pod network `10.244.N.0/24`, distinct per cluster so that pod IPs
    /// are unique across a sandbox, as a flat network needs.
    pub pod_network: u8,
}

impl ClusterOptions {
    /// A cluster of this name with one node.
    pub fn named(name: &str, pod_network: u8) -> Self {
        Self { name: name.to_string(), nodes: 1, pod_network }
    }
}

/// A running cluster; dropping it kills its processes.
pub struct RealCluster {
    name: String,
    dir: PathBuf,
    server: String,
    kubeconfig: PathBuf,
    binaries: Binaries,
    /// In start order; stopped in reverse.
    components: Vec<Component>,
}

/// One process of a cluster, with what it was started with, so that it can start again alike.
struct Component {
    name: &'static str,
    args: Vec<String>,
    /// `None` while killed.
    child: Option<Child>,
}

impl RealCluster {
    /// Starts a cluster in `dir` (made if missing) from `binaries`, and returns once its API
    /// answers, its nodes are Ready and its `default` ServiceAccount exists (so that pods can be
    /// created).
    pub async fn start(binaries: &Binaries, options: &ClusterOptions, dir: &Path) -> Result<Self> {
        let name = options.name.clone();
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let ports = free_ports(6)?;
        let [etcd_client, etcd_peer, apiserver, controller_manager, scheduler, kwok] =
            [ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]];
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        // The `kubernetes` Service's address: the first of the service range.
        let service_ip = IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1));
        let pki = Pki::write(dir, &name, &[loopback, service_ip])?;
        let server = format!("https://127.0.0.1:{apiserver}");
        let kubeconfig = dir.join("kubeconfig");
        write_kubeconfig(&kubeconfig, &name, &server, &pki)?;
        let mut cluster = Self {
            name: name.clone(),
            dir: dir.to_path_buf(),
            server,
            kubeconfig: kubeconfig.clone(),
            binaries: binaries.clone(),
            components: vec![],
        };

        let path = |p: &Path| p.display().to_string();
        let etcd_data = dir.join("etcd");
        cluster.run(
            "etcd",
            vec![
                format!("--name={name}"),
                format!("--data-dir={}", path(&etcd_data)),
                format!("--listen-client-urls=http://127.0.0.1:{etcd_client}"),
                format!("--advertise-client-urls=http://127.0.0.1:{etcd_client}"),
                format!("--listen-peer-urls=http://127.0.0.1:{etcd_peer}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}"),
                format!("--initial-cluster={name}=http://127.0.0.1:{etcd_peer}"),
                // A test cluster's data need not survive a power cut; fsyncs would dominate.
                "--unsafe-no-fsync=true".into(),
                "--auto-compaction-retention=1".into(),
            ],
        )?;
        cluster.run(
            "kube-apiserver",
            vec![
                format!("--etcd-servers=http://127.0.0.1:{etcd_client}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={apiserver}"),
                format!("--tls-cert-file={}", path(&pki.serving_cert)),
                format!("--tls-private-key-file={}", path(&pki.serving_key)),
                format!("--client-ca-file={}", path(&pki.ca_cert)),
                "--authorization-mode=Node,RBAC".into(),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", path(&pki.service_account_public)),
                format!("--service-account-signing-key-file={}", path(&pki.service_account_key)),
                "--service-cluster-ip-range=10.96.0.0/16".into(),
                "--allow-privileged=true".into(),
            ],
        )?;
        let client = cluster.client().await?;
        cluster.await_ready("kube-apiserver", || readyz(&client)).await?;

        let kubeconfig_arg = format!("--kubeconfig={}", path(&kubeconfig));
        let probes_open = "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_string();
        cluster.run(
            "kube-controller-manager",
            vec![
                kubeconfig_arg.clone(),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={controller_manager}"),
                probes_open.clone(),
                "--use-service-account-credentials=true".into(),
                format!("--service-account-private-key-file={}", path(&pki.service_account_key)),
                format!("--root-ca-file={}", path(&pki.ca_cert)),
                format!("--cluster-signing-cert-file={}", path(&pki.ca_cert)),
                format!("--cluster-signing-key-file={}", path(&pki.ca_key)),
                "--controllers=*".into(),
            ],
        )?;
        cluster.run(
            "kube-scheduler",
            vec![
                kubeconfig_arg.clone(),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={scheduler}"),
                probes_open,
            ],
        )?;
        cluster.run(
            "kwok",
            vec![
                kubeconfig_arg,
                format!("--config={}", path(&binaries.kwok_stages())),
                "--manage-all-nodes=true".into(),
                format!("--cidr=10.244.{}.0/24", options.pod_network),
                "--node-ip=127.0.0.1".into(),
                format!("--server-address=127.0.0.1:{kwok}"),
                "--node-lease-duration-seconds=40".into(),
            ],
        )?;

        let nodes: Api<Node> = Api::all(client.clone());
        for i in 0..options.nodes {
            let node = node(&name, i);
            match nodes.create(&PostParams::default(), &node).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(source) => return Err(cluster.api_error(format!("creating node {name}-{i}"), source)),
            }
        }
        let wanted = options.nodes;
        cluster.await_ready("kwok", || ready_nodes(&nodes, wanted)).await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
        cluster
            .await_ready("kube-controller-manager", || async {
                matches!(accounts.get_opt("default").await, Ok(Some(_)))
            })
            .await?;
        Ok(cluster)
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The apiserver's URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// A kubeconfig with one context of the cluster's name, as its administrator.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The cluster's directory (certificates, etcd's data, `logs/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A kube-rs client as the administrator.
    pub async fn client(&self) -> Result<Client> {
        let what = || format!("reading {}", self.kubeconfig.display());
        let config = Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| Error::Io { what: what(), source: std::io::Error::other(e) })?;
        let config = Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Io { what: what(), source: std::io::Error::other(e) })?;
        Client::try_from(config).map_err(|source| self.api_error("making a client".into(), source))
    }

    /// Kills `component` at once (SIGKILL), keeping its data: with `kwok`, every node of the
    /// cluster stops heartbeating and nothing plays its kubelet, as when the machines lose power;
    /// with every component, the member is lost whole. `false` if it is not running.
    pub fn kill(&mut self, component: &str) -> bool {
        let Some(c) = self.components.iter_mut().find(|c| c.name == component) else { return false };
        let Some(mut child) = c.child.take() else { return false };
        let _ = child.kill();
        let _ = child.wait();
        true
    }

    /// Kills every component at once, newest first, keeping their data: the member is lost.
    pub fn kill_all(&mut self) {
        let names: Vec<&'static str> = self.components.iter().rev().map(|c| c.name).collect();
        for name in names {
            self.kill(name);
        }
    }

    /// Starts the killed components again, in the order they first started, with the same
    /// arguments, ports and data (etcd's included: the cluster returns with what it held), and
    /// returns once the apiserver answers, if it was among them, and every node is Ready, if kwok
    /// was.
    pub async fn restart(&mut self) -> Result<()> {
        let killed: Vec<&'static str> = self.components.iter().filter(|c| c.child.is_none()).map(|c| c.name).collect();
        self.restart_only(&killed).await
    }

    /// [`Self::restart`] of those of `components` that were killed, the others left as they
    /// are: a member's API back with its machines (kwok) still off.
    pub async fn restart_only(&mut self, components: &[&str]) -> Result<()> {
        let mut started = vec![];
        for i in 0..self.components.len() {
            if self.components[i].child.is_some() || !components.contains(&self.components[i].name) {
                continue;
            }
            let name = self.components[i].name;
            let child = self.spawn(name, &self.components[i].args)?;
            self.components[i].child = Some(child);
            started.push(name);
            if name == "kube-apiserver" {
                let client = self.client().await?;
                self.await_ready("kube-apiserver", || readyz(&client)).await?;
            }
        }
        if started.contains(&"kwok") {
            let nodes: Api<Node> = Api::all(self.client().await?);
            let wanted = nodes.list(&Default::default()).await.map(|l| l.items.len()).unwrap_or(1);
            self.await_ready("kwok", || ready_nodes(&nodes, wanted)).await?;
        }
        Ok(())
    }

    /// Stops every component, newest first: SIGTERM, then SIGKILL after 10 s.
    pub fn stop(&mut self) {
        Self::stop_together(std::slice::from_mut(self));
    }

    /// Stops several clusters at once, newest component first in each, one layer at a time
    /// across all of them (each cluster's kwok, then each scheduler, …, each etcd last): every
    /// component of a layer gets SIGTERM together, and SIGKILL if it is still there after 10 s.
    /// An apiserver takes seconds to shut down; one after another, four clusters took 37 s.
    pub fn stop_together(clusters: &mut [RealCluster]) {
        loop {
            let popped: Vec<Component> = clusters.iter_mut().filter_map(|c| c.components.pop()).collect();
            if popped.is_empty() {
                return;
            }
            let mut layer: Vec<Child> = popped.into_iter().filter_map(|c| c.child).collect();
            terminate_all(&mut layer, Duration::from_secs(10));
        }
    }

    /// Starts a component with its log in `logs/NAME.log`.
    fn run(&mut self, component: &'static str, args: Vec<String>) -> Result<()> {
        let child = self.spawn(component, &args)?;
        self.components.push(Component { name: component, args, child: Some(child) });
        Ok(())
    }

    /// One process of `component`, its output appended to its log.
    fn spawn(&self, component: &'static str, args: &[String]) -> Result<Child> {
        let logs = self.dir.join("logs");
        std::fs::create_dir_all(&logs).map_err(io(format!("creating {}", logs.display())))?;
        spawn::start(&self.binaries.program(component), args, &logs.join(format!("{component}.log")))
            .map_err(io(format!("starting {component}")))
    }

    /// Waits until `ready` says so, failing early (with its log) if a component exits.
    async fn await_ready<F, Fut>(&mut self, component: &'static str, mut ready: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let started = Instant::now();
        loop {
            let exited = self.components.iter_mut().find_map(|c| match c.child.as_mut()?.try_wait() {
                Ok(Some(status)) => Some((c.name, status)),
                _ => None,
            });
            if let Some((name, status)) = exited {
                return Err(self.component_error(name, format!("exited with {status}")));
            }
            if ready().await {
                return Ok(());
            }
            if started.elapsed() > READY_WITHIN {
                return Err(self.component_error(component, format!("was not ready within {READY_WITHIN:?}")));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    fn component_error(&self, component: &'static str, problem: String) -> Error {
        let log = std::fs::read_to_string(self.dir.join("logs").join(format!("{component}.log"))).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        Error::Component {
            cluster: self.name.clone(),
            component,
            problem,
            log: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        }
    }

    fn api_error(&self, what: String, source: kube::Error) -> Error {
        Error::Api { cluster: self.name.clone(), what, source }
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        for child in self.components.iter_mut().filter_map(|c| c.child.as_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// SIGTERM to each of `children`, then SIGKILL to those still running after `grace`.
fn terminate_all(children: &mut [Child], grace: Duration) {
    for child in children.iter() {
        if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
    let started = Instant::now();
    while started.elapsed() < grace {
        if children.iter_mut().all(|c| matches!(c.try_wait(), Ok(Some(_)))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for child in children.iter_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

async fn readyz(client: &Client) -> bool {
    let request = http::Request::get("/readyz").body(Vec::new()).expect("a static request");
    matches!(client.request_text(request).await.as_deref(), Ok("ok"))
}

async fn ready_nodes(nodes: &Api<Node>, wanted: usize) -> bool {
    let Ok(list) = nodes.list(&Default::default()).await else { return false };
    let ready = list
        .items
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    ready >= wanted
}

/// A kwok node: kwok manages every node (`--manage-all-nodes`), and the annotation says so to
/// a reader.
fn node(cluster: &str, i: usize) -> Node {
    let name = format!("{cluster}-{i}");
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "type": "kwok",
                "topology.kubernetes.io/zone": cluster,
            },
        },
    }))
    .expect("a node")
}

/// Where the components' ports are chosen from: below Linux's ephemeral range (32768–60999
/// by default), from which the kernel takes the local port of every outgoing connection and
/// of every listener on port 0. A port taken from there and given to a component seconds later
/// (the controller-manager starts once the apiserver is ready) may meanwhile have become the
/// local end of someone's connection: a controller-manager failed on one so.
const PORTS: std::ops::Range<u16> = 20000..32768;

/// How far this process has gone through [`PORTS`], so that two clusters it starts at once never
/// choose the same port.
static PORTS_TAKEN: AtomicU32 = AtomicU32::new(0);

/// `n` ports free on loopback, from [`PORTS`], each checked free by binding it; each process
/// starts at a place of its own in the range, so that two processes rarely try the same one.
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let span = u32::from(PORTS.end - PORTS.start);
    let start = std::process::id().wrapping_mul(7919) % span;
    let mut ports = Vec::with_capacity(n);
    let mut held = Vec::with_capacity(n);
    for _ in 0..span {
        if ports.len() == n {
            break;
        }
        let k = PORTS_TAKEN.fetch_add(1, Ordering::Relaxed);
        let port = PORTS.start + u16::try_from((start + k) % span).unwrap_or(0);
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            ports.push(port);
            held.push(listener);
        }
    }
    match ports.len() == n {
        true => Ok(ports),
        false => Err(Error::Io {
            what: "choosing free ports".into(),
            source: std::io::Error::other(format!("fewer than {n} free ports in {PORTS:?}")),
        }),
    }
}

fn write_kubeconfig(path: &Path, name: &str, server: &str, pki: &Pki) -> Result<()> {
    let b64 = |p: &Path| -> Result<String> {
        let bytes = std::fs::read(p).map_err(io(format!("reading {}", p.display())))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    };
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: {name}\n\
         clusters:\n- name: {name}\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
         users:\n- name: {name}-admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n\
         contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}-admin\n",
        ca = b64(&pki.ca_cert)?,
        cert = b64(&pki.admin_cert)?,
        key = b64(&pki.admin_key)?,
    );
    std::fs::write(path, text).map_err(io(format!("writing {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_chosen_below_the_ephemeral_range_and_never_twice() {
        let (a, b) = (free_ports(6).unwrap(), free_ports(6).unwrap());
        let all: std::collections::BTreeSet<u16> = a.iter().chain(&b).copied().collect();
        assert_eq!(all.len(), 12, "{a:?} {b:?}");
        assert!(all.iter().all(|p| PORTS.contains(p)), "{all:?}");
    }
}
