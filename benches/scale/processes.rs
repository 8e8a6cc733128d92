//! The processes a scale cell runs: the sandbox (`spanset sim`) and K controllers
//! (`spanset run`), each its own process so that its CPU, memory and descriptors are measured
//! apart from the benchmark's watches and from each other; and the sandbox's admin API.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use kube::Client;
use spanset::cli::sandbox::{install_crds, join_members};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::support::client;

/// Real seconds per simulated second in every cell.
pub const TIME_FACTOR: f64 = 0.01;

/// A `spanset sim` process with `host` and the members (one node each); killed on drop.
pub struct SimProcess {
    child: tokio::process::Child,
    dir: tempfile::TempDir,
    /// Contexts `host` and one per member.
    pub kubeconfig: PathBuf,
    /// A client of the host.
    pub host: Client,
    /// The admin API's address.
    pub admin: SocketAddr,
    /// Each cluster's API server port (`host` and the members), by name: how the controller's
    /// sockets are told apart by cluster.
    pub ports: BTreeMap<u16, String>,
}

impl SimProcess {
    /// Starts `spanset sim` for `host` plus `members` (`nodes` nodes each), waits for `ready`, installs the CRDs and
    /// joins the members.
    pub async fn start(members: &[String], nodes: usize) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let kubeconfig = dir.path().join("kubeconfig");
        let clusters = std::iter::once("host".to_string()).chain(members.iter().cloned()).collect::<Vec<_>>();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
            // HTTPS, so that the controller speaks HTTP/2 to every cluster as it would to real
            // API servers (`SCALE_HTTP1=1`: plain HTTP/1.1, for comparison).
            .args(["sim", "--time-factor", &TIME_FACTOR.to_string(), "--nodes", &nodes.to_string(), "--clusters"])
            .arg(clusters.join(","))
            .args(if std::env::var("SCALE_HTTP1").as_deref() == Ok("1") { &[][..] } else { &["--tls"][..] })
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("sim.log")).map_err(|e| format!("sim log: {e}"))?)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spanset sim did not start: {e}"))?;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let (mut admin, mut ports) = (None, BTreeMap::new());
        loop {
            let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
                .await
                .map_err(|_| "spanset sim printing `ready` within 120 s".to_string())?
                .map_err(|e| format!("spanset sim's output: {e}"))?
                .ok_or("spanset sim exited before `ready`")?;
            if line == "ready" {
                break;
            }
            if let Some(url) = line.strip_prefix("admin: ") {
                admin = port_of(url).map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
            } else if let Some((name, url)) = line.strip_prefix("cluster ").and_then(|l| l.split_once(": "))
                && let Some(p) = port_of(url)
            {
                ports.insert(p, name.to_string());
            }
        }
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let admin = admin.ok_or("spanset sim printed no `admin:` line")?;
        let host = client(&kubeconfig, "host").await;
        install_crds(&host).await.map_err(|e| format!("CRDs: {e}"))?;
        join_members(&host, members).await.map_err(|e| format!("MemberClusters: {e}"))?;
        Ok(Self { child, dir, kubeconfig, host, admin, ports })
    }

    /// The process id (for its CPU and memory).
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// Keeps the sandbox's directory (the kubeconfig and the logs of the sandbox and the
    /// controllers) after the sandbox ends, for a cell that failed; answers its path.
    pub fn keep_logs(&mut self) -> PathBuf {
        self.dir.disable_cleanup(true);
        self.dir.path().to_path_buf()
    }

    /// A scratch directory living as long as the sandbox (the logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `POST /clusters/NAME/ACTION?QUERY` on the admin API; the answer body, or why it failed.
    pub async fn admin(&self, cluster: &str, action: &str, query: &str) -> Result<String, String> {
        let path = format!("/clusters/{cluster}/{action}?{query}");
        match http(self.admin, "POST", &path).await {
            Some((200, body)) => Ok(body),
            Some((code, body)) => Err(format!("admin {path}: {code} {body}")),
            None => Err(format!("admin {path}: no answer")),
        }
    }

    /// The simulated node names of a cluster, from the admin API's cluster list.
    pub async fn nodes(&self, cluster: &str) -> Vec<String> {
        let Some((200, body)) = http(self.admin, "GET", "/clusters").await else { return Vec::new() };
        let list: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        list["clusters"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == cluster)
            .and_then(|c| c["nodes"].as_array())
            .map(|n| n.iter().filter_map(|v| v.as_str().map(String::from)).collect())
            .unwrap_or_default()
    }
}

/// The port of a URL such as `https://127.0.0.1:40123`.
fn port_of(url: &str) -> Option<u16> {
    url::Url::parse(url).ok()?.port_or_known_default()
}

/// One `spanset run` process; killed on drop.
pub struct ControllerProcess {
    child: tokio::process::Child,
    /// Its metrics and health endpoints.
    pub metrics: SocketAddr,
    /// Run under `SCALE_CTL_WRAP`, in a process group of its own: killing the wrapper alone
    /// would leave the controller running, so the whole group is killed.
    wrapped: bool,
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        if let (true, Some(pid)) = (self.wrapped, self.child.id()) {
            let _ = std::process::Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status();
        }
    }
}

impl ControllerProcess {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }
}

/// Starts `k` controller processes against the sandbox (identities `bench-0`…, one leader by
/// the lease, at `spanset run`'s default lease timings: the 3 s / 2 s of the controller
/// benchmark lose the lease over and over once the host answers slowly, and every lost term
/// restarts the controller's work; logs in the sandbox's directory). One today; the hook for the sharding figure
/// (throughput with 1, 2 and 4 replicas) once federations are sharded over replicas.
pub fn start_controllers(sim: &SimProcess, k: usize) -> Result<Vec<ControllerProcess>, String> {
    (0..k).map(|i| start_controller(sim, &format!("bench-{i}"), &[])).collect()
}

/// `k` controllers sharing the federations over `shards` shards (`--shards`).
pub fn start_sharded(sim: &SimProcess, k: usize, shards: u32) -> Result<Vec<ControllerProcess>, String> {
    let shards = shards.to_string();
    (0..k).map(|i| start_controller(sim, &format!("bench-{i}"), &["--shards", &shards])).collect()
}

fn start_controller(sim: &SimProcess, identity: &str, flags: &[&str]) -> Result<ControllerProcess, String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("a free port: {e}"))?
        .port();
    let metrics = SocketAddr::from(([127, 0, 0, 1], port));
    let log = std::fs::File::create(sim.dir().join(format!("{identity}.log"))).map_err(|e| format!("log: {e}"))?;
    // `SCALE_CTL_WRAP` runs the controller under a profiler (`heaptrack -o FILE`); the
    // figures taken of its process are then the wrapper's.
    let wrap = std::env::var("SCALE_CTL_WRAP").unwrap_or_default();
    let mut wrap = wrap.split_whitespace();
    let (mut command, wrapped) = match wrap.next() {
        Some(program) => {
            let mut c = tokio::process::Command::new(program);
            c.args(wrap).arg(env!("CARGO_BIN_EXE_spanset"));
            (c, true)
        }
        None => (tokio::process::Command::new(env!("CARGO_BIN_EXE_spanset")), false),
    };
    command.args(["run", "--context", "host", "--metrics-addr", &metrics.to_string(), "--identity", identity]);
    if wrapped {
        // The controller's parent is the wrapper: the group is killed on drop.
        command.process_group(0);
    } else {
        command.args(["--exit-with-parent", &std::process::id().to_string()]);
    }
    let child = command
        .arg("--kubeconfig")
        .arg(&sim.kubeconfig)
        .args(flags)
        .env("RUST_LOG", std::env::var("SCALE_RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spanset run did not start: {e}"))?;
    Ok(ControllerProcess { child, metrics, wrapped })
}

/// Waits until every controller is ready and, between them, they lead all `shards` shards.
pub async fn wait_shards_led(controllers: &[ControllerProcess], shards: u32, deadline: Duration) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let mut led = 0.0;
        let mut ready = true;
        for c in controllers {
            ready &= matches!(http(c.metrics, "GET", "/readyz").await, Some((200, _)));
            led += series_sum(&scrape(c.metrics).await, "spanset_leader");
        }
        if ready && led == f64::from(shards) {
            return Ok(());
        }
        if start.elapsed() > deadline {
            return Err(format!("{shards} shards led by the controllers within {deadline:?} ({led} were)"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until one of the controllers is ready (every member listed) and leads; answers it.
pub async fn wait_leader(controllers: &[ControllerProcess], deadline: Duration) -> Result<&ControllerProcess, String> {
    let start = Instant::now();
    loop {
        for c in controllers {
            let ready = matches!(http(c.metrics, "GET", "/readyz").await, Some((200, _)));
            if ready && series_sum(&scrape(c.metrics).await, "spanset_leader") == 1.0 {
                return Ok(c);
            }
        }
        if start.elapsed() > deadline {
            return Err(format!("a controller ready and leading within {deadline:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One HTTP/1.0 request without a body on loopback; answers (status, body).
async fn http(addr: SocketAddr, method: &str, path: &str) -> Option<(u16, String)> {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        let head = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n");
        s.write_all(head.as_bytes()).await.ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.ok()?;
        let (head, body) = buf.split_once("\r\n\r\n")?;
        let code = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, body.to_string()))
    };
    tokio::time::timeout(Duration::from_secs(30), exchange).await.ok().flatten()
}

/// A controller's Prometheus text.
pub async fn scrape(addr: SocketAddr) -> String {
    http(addr, "GET", "/metrics").await.map(|(_, b)| b).unwrap_or_default()
}

/// The sum of every sample of a series (all label sets).
pub fn series_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' ')))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
