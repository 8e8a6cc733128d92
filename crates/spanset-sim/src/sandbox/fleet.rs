//! A fleet of simulated clusters started together (what `spanset sim` runs, and what tests
//! embed): one API server per cluster on 127.0.0.1, plus the admin API, plus one DNS server per
//! cluster.

use std::{
    collections::BTreeMap,
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use tokio::net::TcpListener;

use crate::{
    api::server::{self, ServerHandle},
    cluster::{Cluster, ClusterConfig, components, disks::VolumeStore, ledger::Ledger, network, processes},
    dns::{self, server::DnsServer},
    sandbox::{
        admin, kubeconfig,
        tls::{SandboxTls, TlsError},
    },
};

/// Errors starting a fleet.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A listener could not be bound.
    #[error("cannot listen on {address}:{port} for cluster {cluster}: {source}")]
    Bind {
        /// The address asked for.
        address: IpAddr,
        /// Which cluster (or `admin`).
        cluster: String,
        /// The port asked for (0 = any free port).
        port: u16,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// TLS for clusters that enforce authentication could not be set up.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Real processes (`--run-images`) cannot run on this machine.
    #[error("cannot run real processes: {0}")]
    Processes(String),
}

/// The token the kubeconfig gives the user of a `--tls` cluster that enforces no
/// authentication: some credential keeps kubectl from prompting for a username over HTTPS.
pub const NO_AUTH_TOKEN: &str = "sandbox-tls-no-auth";

/// Running simulated clusters, by name, and the admin listener.
pub struct Fleet {
    /// API servers by cluster name, in the order given.
    pub servers: Vec<ServerHandle>,
    /// Address of the admin API.
    pub admin_addr: SocketAddr,
    /// The token the admin API requires of every request.
    pub admin_token: String,
    admin: tokio::task::JoinHandle<()>,
    /// The identity ledger shared by all clusters.
    pub ledger: Arc<Ledger>,
    /// The CA of the clusters served over TLS (`auth` or `tls`), PEM.
    pub ca_pem: Option<String>,
    /// Each cluster's DNS server, in the order of `servers`.
    pub dns: Vec<DnsServer>,
    /// The DNS servers the containers of real processes query (port 53 of an address of
    /// their cluster's pod network), for the clusters that run any.
    pub container_dns: Vec<DnsServer>,
}

async fn bind(cluster: &str, port: u16) -> Result<TcpListener, FleetError> {
    TcpListener::bind(("127.0.0.1", port)).await.map_err(|source| FleetError::Bind {
        address: LOCALHOST,
        cluster: cluster.to_string(),
        port,
        source,
    })
}

/// The address every API, admin and DNS listener of the sandbox outside pod networks uses.
const LOCALHOST: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// How many `/16`s one cluster tries before it gives up on finding one whose addresses are free.
const CLAIM_ATTEMPTS: usize = 8;

/// What a cluster serves its pods inside its pod network.
struct PodNetworkListeners {
    /// Its DNS server's sockets, on port 53 of the network's nameserver address.
    dns: (tokio::net::UdpSocket, TcpListener),
    /// Its in-cluster API listener, on port 443 of the network's gateway.
    api: TcpListener,
}

/// Claims a pod network for `cluster` and listens on its nameserver and gateway addresses.
///
/// A `/16` whose route is free can still have a socket bound to its addresses: a sandbox that
/// is stopping loses its routes (with its pod network's holder) before it closes its sockets.
/// Such a `/16` is kept claimed (the claim goes with this sandbox's pod network) and another is
/// tried, rather than the sandbox failing on a neighbour's last moments.
async fn claim_and_listen(
    net: &processes::network::PodNetwork,
    cluster: &str,
) -> Result<(std::net::Ipv4Addr, PodNetworkListeners), FleetError> {
    let mut last = None;
    for _ in 0..CLAIM_ATTEMPTS {
        let claimed = net.claim().map_err(|e| FleetError::Processes(e.to_string()))?;
        let (dns_at, api_at) = (processes::nameserver(claimed), processes::network::gateway(claimed));
        let bound = async {
            let dns = dns::server::bind_pair(dns_at, 53).await.map_err(|e| (dns_at, 53, e))?;
            let api = TcpListener::bind((api_at, 443)).await.map_err(|e| (api_at, 443, e))?;
            Ok::<_, (std::net::Ipv4Addr, u16, std::io::Error)>(PodNetworkListeners { dns, api })
        };
        match bound.await {
            Ok(listeners) => return Ok((claimed, listeners)),
            Err((at, port, e)) if e.kind() == std::io::ErrorKind::AddrInUse => {
                tracing::debug!(cluster, address = %at, port, "pod network address still in use; claiming another");
                last = Some((at, port, e));
            }
            Err((at, port, source)) => {
                return Err(FleetError::Bind {
                    address: IpAddr::V4(at),
                    cluster: format!("{cluster} (in its pod network)"),
                    port,
                    source,
                });
            }
        }
    }
    let (at, port, source) = last.expect("at least one attempt");
    Err(FleetError::Bind { address: IpAddr::V4(at), cluster: format!("{cluster} (in its pod network)"), port, source })
}

impl Fleet {
    /// Starts one API server per config, on `port_base + i` (or free ports), the admin API on
    /// `port_base + n`, and each cluster's DNS server (UDP and TCP) on `port_base + n + 1 + i`.
    pub async fn start(configs: Vec<ClusterConfig>, port_base: Option<u16>) -> Result<Self, FleetError> {
        let port_at = |i: usize| port_base.map(|b| b.saturating_add(i as u16)).unwrap_or(0);
        let mut servers = Vec::new();
        let ledger = Arc::new(Ledger::default());
        let volumes = Arc::new(VolumeStore::default());
        // Clusters that enforce authentication serve HTTPS (kubectl sends tokens only over TLS),
        // as do those that ask for it.
        // Pods that run real processes get a network of their own, one for the sandbox, in which
        // each such cluster claims a /16 that no other sandbox on this machine routes.
        let pod_network = match configs.iter().any(|c| !c.run_images.is_empty()) {
            true => {
                processes::launch::preflight().map_err(FleetError::Processes)?;
                let made = processes::network::PodNetwork::new()
                    .map_err(|e| FleetError::Processes(format!("cannot make the pods' network: {e}")))?;
                Some(Arc::new(made))
            }
            false => None,
        };
        let mut configs = configs;
        // What each cluster whose pods run real processes serves them in its pod network, by
        // the cluster's index: its DNS (UDP and TCP) and its in-cluster API listener.
        let mut in_network = BTreeMap::new();
        for (i, config) in configs.iter_mut().enumerate() {
            match (&pod_network, config.run_images.is_empty()) {
                (Some(net), false) => {
                    let (claimed, listeners) = claim_and_listen(net, &config.name).await?;
                    config.pod_network = Some(claimed);
                    in_network.insert(i, listeners);
                }
                // Disjoint pod networks: a flat network across the clusters needs unique pod IPs.
                _ => {
                    config.pod_network.get_or_insert(network::sandbox_pod_network(i));
                }
            }
        }
        // Pods reach their cluster's API at its gateway, which the certificate names too.
        let gateways: Vec<IpAddr> = configs
            .iter()
            .filter(|c| !c.run_images.is_empty())
            .map(|c| IpAddr::V4(processes::network::gateway(c.pod_network())))
            .collect();
        let tls = match configs.iter().any(ClusterConfig::serves_tls) {
            true => Some(SandboxTls::generate(&gateways)?),
            false => None,
        };
        let mut container_sockets = Vec::new();
        for (i, config) in configs.into_iter().enumerate() {
            // A cluster whose pods run real processes serves them on a listener of their own
            // (its `kubernetes` Service, at its gateway on 443), which a partition from the
            // outside only leaves open.
            let in_cluster = in_network.remove(&i).map(|l: PodNetworkListeners| {
                container_sockets.push(l.dns);
                l.api
            });
            let listener = bind(&config.name, port_at(i)).await?;
            let server_tls = tls.as_ref().filter(|_| config.serves_tls()).map(|t| t.server.clone());
            let cluster = Cluster::in_sandbox(config, ledger.clone(), volumes.clone());
            if let (Some(net), true) = (&pod_network, cluster.processes.enabled()) {
                cluster.processes.join_network(net.clone(), cluster.config.pod_network());
            }
            let pods_use = in_cluster.as_ref().unwrap_or(&listener);
            if let Ok(addr) = pods_use.local_addr() {
                let ca_pem = tls.as_ref().filter(|_| server_tls.is_some()).map(|t| t.ca_pem.clone());
                let _ = cluster.api_endpoint.set(crate::cluster::ApiEndpoint { addr, ca_pem });
            }
            servers.push(
                {
                    let components = components::spawn(&cluster);
                    server::serve(cluster, listener, in_cluster, components, server_tls)
                }
                .map_err(|source| FleetError::Bind {
                    address: LOCALHOST,
                    cluster: "?".into(),
                    port: port_at(i),
                    source,
                })?,
            );
        }
        let n = servers.len();
        let admin_listener = bind("admin", port_at(n)).await?;
        let admin_addr = admin_listener.local_addr().map_err(|source| FleetError::Bind {
            address: LOCALHOST,
            cluster: "admin".into(),
            port: port_at(n),
            source,
        })?;
        let clusters: BTreeMap<String, (Arc<Cluster>, String)> =
            servers.iter().map(|s| (s.cluster.config.name.clone(), (s.cluster.clone(), s.url()))).collect();
        let mut dns = Vec::new();
        for (i, s) in servers.iter().enumerate() {
            let port = port_at(n + 1 + i);
            let server = DnsServer::start(s.cluster.clone(), port).await.map_err(|source| FleetError::Bind {
                address: LOCALHOST,
                cluster: format!("{} (DNS)", s.cluster.config.name),
                port,
                source,
            })?;
            dns.push(server);
        }
        let mut container_dns = Vec::new();
        for (s, (udp, tcp)) in servers.iter().filter(|s| s.cluster.processes.enabled()).zip(container_sockets) {
            let server = DnsServer::serve(s.cluster.clone(), udp, tcp).map_err(|source| FleetError::Bind {
                address: IpAddr::V4(processes::nameserver(s.cluster.config.pod_network())),
                cluster: format!("{} (DNS for containers)", s.cluster.config.name),
                port: 53,
                source,
            })?;
            container_dns.push(server);
        }
        let dns_addrs = servers.iter().zip(&dns).map(|(s, d)| (s.cluster.config.name.clone(), d.addr)).collect();
        let sandbox = admin::Sandbox {
            clusters: Arc::new(clusters),
            ledger: ledger.clone(),
            volumes: volumes.clone(),
            dns: dns_addrs,
            token: admin::new_token(),
        };
        let admin_token = sandbox.token.clone();
        let admin = tokio::spawn(admin::serve(admin_listener, Arc::new(sandbox)));
        Ok(Self { servers, admin_addr, admin_token, admin, ledger, ca_pem: tls.map(|t| t.ca_pem), dns, container_dns })
    }

    /// `(name, url)` of each cluster, in order.
    pub fn endpoints(&self) -> Vec<(String, String)> {
        self.servers.iter().map(|s| (s.cluster.config.name.clone(), s.url())).collect()
    }

    /// `(name, address)` of each cluster's DNS server (UDP and TCP), in order: what
    /// `dig @127.0.0.1 -p PORT` queries for that cluster's `cluster.local` names.
    pub fn dns_endpoints(&self) -> Vec<(String, SocketAddr)> {
        self.servers.iter().zip(&self.dns).map(|(s, d)| (s.cluster.config.name.clone(), d.addr)).collect()
    }

    /// How to reach each cluster, in order, with the administrator's token of those that
    /// enforce authentication (for the kubeconfig).
    pub fn access(&self) -> Vec<kubeconfig::Access> {
        self.servers
            .iter()
            .map(|s| kubeconfig::Access {
                name: s.cluster.config.name.clone(),
                url: s.url(),
                // Without credentials kubectl asks for a username over HTTPS; a cluster that
                // enforces nothing ignores this placeholder token.
                token: s
                    .cluster
                    .admin_token
                    .clone()
                    .or_else(|| s.cluster.config.tls.then(|| NO_AUTH_TOKEN.to_string())),
                ca_pem: self.ca_pem.clone().filter(|_| s.cluster.config.serves_tls()),
            })
            .collect()
    }

    /// The server of one cluster.
    pub fn server(&self, name: &str) -> Option<&ServerHandle> {
        self.servers.iter().find(|s| s.cluster.config.name == name)
    }

    /// The admin API's base URL, carrying its token as userinfo (`http://sandbox:TOKEN@ADDR`):
    /// `spanset sim-ctl --admin`, `spanset drill --admin` and curl send it as they are given it.
    pub fn admin_url(&self) -> String {
        format!("http://{}:{}@{}", admin::ADMIN_USER, self.admin_token, self.admin_addr)
    }

    /// Writes [`Self::admin_url`] to `PATH.admin` beside a kubeconfig, owner-only as the
    /// kubeconfig is: where a user who did not keep the banner finds the admin credentials.
    pub fn write_admin_url(&self, kubeconfig: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
        let mut name = kubeconfig.as_os_str().to_os_string();
        name.push(".admin");
        let path = std::path::PathBuf::from(name);
        let mut file = std::fs::OpenOptions::new();
        file.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
        std::io::Write::write_all(&mut file.open(&path)?, format!("{}\n", self.admin_url()).as_bytes())?;
        Ok(path)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.admin.abort();
    }
}
