//! The kubelet's probes of a container that runs a real process: `startupProbe`,
//! `readinessProbe` and `livenessProbe`, each `exec`, `tcpSocket` or `httpGet`, run on their
//! period against the process, their results kept where the kubelet's sweep reads them
//! ([`ProbeState`]): Ready follows the readiness probe (after the startup probe passed), and a
//! startup or liveness probe that fails `failureThreshold` times in a row asks for a restart.
//!
//! Delays and periods are simulated time (scaled by the cluster's time factor, as every other
//! delay of the sandbox); each probe's own timeout is real time, for the process answers in it.

use std::{
    net::{IpAddr, SocketAddr},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use serde_json::Value;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// What a probe does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Runs a command in the container; exit 0 passes.
    Exec(Vec<String>),
    /// Opens a TCP connection to the port.
    Tcp {
        /// The host (`tcpSocket.host`), else the pod IP.
        host: Option<String>,
        /// The port.
        port: u16,
    },
    /// GETs a path; a status from 200 to 399 passes.
    Http {
        /// The host (`httpGet.host`), else the pod IP.
        host: Option<String>,
        /// The port.
        port: u16,
        /// The path.
        path: String,
    },
}

/// One probe of a container, as its spec gives it (with the API's defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// What it does.
    pub action: Action,
    /// `initialDelaySeconds` (0).
    pub initial_delay: Duration,
    /// `periodSeconds` (10).
    pub period: Duration,
    /// `timeoutSeconds` (1).
    pub timeout: Duration,
    /// `successThreshold` (1).
    pub success_threshold: u32,
    /// `failureThreshold` (3).
    pub failure_threshold: u32,
}

/// The probes of one container.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probes {
    /// `startupProbe`.
    pub startup: Option<Probe>,
    /// `readinessProbe`.
    pub readiness: Option<Probe>,
    /// `livenessProbe`.
    pub liveness: Option<Probe>,
}

/// Why a probe in the spec cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ProbeError {
    /// The field, e.g. `readinessProbe.tcpSocket.port`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Probes {
    /// The probes of a container spec; named ports are looked up in its `ports`.
    pub fn of(container: &Value) -> Result<Self, ProbeError> {
        let one = |field: &str| container.get(field).map(|p| Probe::parse(field, p, container)).transpose();
        Ok(Self { startup: one("startupProbe")?, readiness: one("readinessProbe")?, liveness: one("livenessProbe")? })
    }
}

impl Probe {
    fn parse(field: &str, p: &Value, container: &Value) -> Result<Self, ProbeError> {
        let secs = |k: &str, default: u64| Duration::from_secs(p.get(k).and_then(Value::as_u64).unwrap_or(default));
        let count = |k: &str, default: u32| p.get(k).and_then(Value::as_u64).map_or(default, |n| n as u32).max(1);
        let port = |at: &str, v: Option<&Value>| -> Result<u16, ProbeError> {
            let err = |reason: String| ProbeError { field: format!("{field}.{at}.port"), reason };
            match v {
                Some(Value::Number(n)) => {
                    n.as_u64().and_then(|n| u16::try_from(n).ok()).ok_or_else(|| err(format!("{n} is not a port")))
                }
                Some(Value::String(name)) => named_port(container, name)
                    .or_else(|| name.parse().ok())
                    .ok_or_else(|| err(format!("no container port is named {name:?}"))),
                _ => Err(err("required".into())),
            }
        };
        let host = |v: &Value| v.get("host").and_then(Value::as_str).filter(|h| !h.is_empty()).map(str::to_string);
        let action = if let Some(exec) = p.get("exec") {
            let argv: Vec<String> = exec
                .get("command")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default();
            if argv.is_empty() {
                return Err(ProbeError { field: format!("{field}.exec.command"), reason: "required".into() });
            }
            Action::Exec(argv)
        } else if let Some(tcp) = p.get("tcpSocket") {
            Action::Tcp { host: host(tcp), port: port("tcpSocket", tcp.get("port"))? }
        } else if let Some(http) = p.get("httpGet") {
            let path = http.get("path").and_then(Value::as_str).unwrap_or("/").to_string();
            Action::Http { host: host(http), port: port("httpGet", http.get("port"))?, path }
        } else {
            return Err(ProbeError {
                field: field.to_string(),
                reason: "needs one of exec, tcpSocket or httpGet (grpc is not run by the sandbox)".into(),
            });
        };
        Ok(Self {
            action,
            initial_delay: secs("initialDelaySeconds", 0),
            period: secs("periodSeconds", 10),
            timeout: secs("timeoutSeconds", 1),
            success_threshold: count("successThreshold", 1),
            failure_threshold: count("failureThreshold", 3),
        })
    }
}

/// The number of the container port of that name.
fn named_port(container: &Value, name: &str) -> Option<u16> {
    container
        .get("ports")?
        .as_array()?
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(name))?
        .get("containerPort")?
        .as_u64()
        .and_then(|n| u16::try_from(n).ok())
}

/// Which probe failed, as the kubelet names it in its `Unhealthy` Events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `startupProbe`.
    Startup,
    /// `readinessProbe`.
    Readiness,
    /// `livenessProbe`.
    Liveness,
}

impl Kind {
    /// `Startup`, `Readiness` or `Liveness`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Startup => "Startup",
            Kind::Readiness => "Readiness",
            Kind::Liveness => "Liveness",
        }
    }
}

/// The most failures kept between two of the kubelet's sweeps (the oldest go first).
const FAILURES_KEPT: usize = 16;

/// What the probes found so far, read by the kubelet's sweep.
#[derive(Debug, Default)]
pub struct ProbeState {
    /// The startup probe passed (or there is none).
    pub started: AtomicBool,
    /// The readiness probe passes (or there is none and the container started).
    pub ready: AtomicBool,
    /// A startup or liveness probe failed its threshold: the container must be restarted.
    pub unhealthy: AtomicBool,
    /// Failures not yet reported, each with what the probe said (an exec probe's output):
    /// the kubelet's `Unhealthy` Events.
    pub failures: parking_lot::Mutex<Vec<(Kind, String)>>,
}

impl ProbeState {
    fn failed(&self, kind: Kind, why: String) {
        let mut f = self.failures.lock();
        if f.len() >= FAILURES_KEPT {
            f.remove(0);
        }
        f.push((kind, why));
    }

    /// The failures since the last call.
    pub fn take_failures(&self) -> Vec<(Kind, String)> {
        std::mem::take(&mut *self.failures.lock())
    }
}

/// How a probe reaches the container.
#[derive(Debug, Clone)]
pub struct Target {
    /// The pod IP.
    pub ip: IpAddr,
    /// The argv prefix that runs a command inside the container (for `exec`).
    pub exec_prefix: Vec<String>,
    /// The cluster's real time per simulated time.
    pub time_factor: f64,
}

/// The shortest period of an exec probe, whatever the time factor: each run starts a process
/// in the container, and a guarded pod's watch is probed every second, which a time factor of
/// 0.01 would otherwise make twenty processes a second per pod (the 50 ms floor).
const EXEC_PERIOD_FLOOR: Duration = Duration::from_millis(250);

impl Target {
    fn scaled(&self, d: Duration) -> Duration {
        d.mul_f64(self.time_factor.max(0.0)).max(Duration::from_millis(50))
    }

    /// The real time between two runs of the probe.
    fn period(&self, p: &Probe) -> Duration {
        let scaled = self.scaled(p.period);
        match p.action {
            Action::Exec(_) => scaled.max(EXEC_PERIOD_FLOOR),
            _ => scaled,
        }
    }
}

/// Runs the probes of one container until the task is aborted (the container stopped).
pub async fn run(probes: Probes, target: Target, state: Arc<ProbeState>) {
    if let Some(startup) = &probes.startup
        && !until_threshold(startup, &target, true, Kind::Startup, &state).await
    {
        state.unhealthy.store(true, Ordering::SeqCst);
        return;
    }
    state.started.store(true, Ordering::SeqCst);
    let readiness = async {
        match &probes.readiness {
            None => {
                state.ready.store(true, Ordering::SeqCst);
                std::future::pending::<()>().await
            }
            Some(p) => {
                tokio::time::sleep(target.scaled(p.initial_delay)).await;
                let (mut ok, mut bad) = (0u32, 0u32);
                loop {
                    if let Err(why) = once(&p.action, &target, p.timeout).await {
                        state.failed(Kind::Readiness, why);
                        (ok, bad) = (0, bad + 1);
                        if bad >= p.failure_threshold {
                            state.ready.store(false, Ordering::SeqCst);
                        }
                    } else {
                        (ok, bad) = (ok + 1, 0);
                        if ok >= p.success_threshold {
                            state.ready.store(true, Ordering::SeqCst);
                        }
                    }
                    tokio::time::sleep(target.period(p)).await;
                }
            }
        }
    };
    let liveness = async {
        match &probes.liveness {
            None => std::future::pending::<()>().await,
            Some(p) => {
                if !until_threshold(p, &target, false, Kind::Liveness, &state).await {
                    state.unhealthy.store(true, Ordering::SeqCst);
                }
            }
        }
    };
    tokio::select! {
        () = readiness => {}
        () = liveness => {}
    }
}

/// Probes on the period until the failure threshold is reached (false), or — when
/// `stop_on_success` — until the first success (true); each failure noted in `state`.
async fn until_threshold(p: &Probe, target: &Target, stop_on_success: bool, kind: Kind, state: &ProbeState) -> bool {
    tokio::time::sleep(target.scaled(p.initial_delay)).await;
    let mut bad = 0;
    loop {
        if let Err(why) = once(&p.action, target, p.timeout).await {
            state.failed(kind, why);
            bad += 1;
            if bad >= p.failure_threshold {
                return false;
            }
        } else {
            bad = 0;
            if stop_on_success {
                return true;
            }
        }
        tokio::time::sleep(target.period(p)).await;
    }
}

/// The most of an exec probe's output an Event repeats (the kubelet keeps 10 KiB).
const OUTPUT_KEPT: usize = 1024;

/// Runs one probe: whether it passed within its timeout, else what it said (an exec probe's
/// output, as the kubelet puts it in its Event).
pub async fn once(action: &Action, target: &Target, timeout: Duration) -> Result<(), String> {
    let attempt = async {
        match action {
            Action::Exec(argv) => {
                let mut cmd = tokio::process::Command::new(&target.exec_prefix[0]);
                cmd.args(&target.exec_prefix[1..]).args(argv);
                cmd.stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .kill_on_drop(true);
                match cmd.output().await {
                    Ok(out) if out.status.success() => Ok(()),
                    Ok(out) => {
                        let mut said = String::from_utf8_lossy(&out.stdout).into_owned();
                        said += &String::from_utf8_lossy(&out.stderr);
                        Err(said.trim().chars().take(OUTPUT_KEPT).collect())
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            Action::Tcp { host, port } => {
                let addr = address(host, target, *port);
                TcpStream::connect(addr).await.map(|_| ()).map_err(|e| format!("dial tcp {addr}: {e}"))
            }
            Action::Http { host, port, path } => {
                let addr = address(host, target, *port);
                if http_ok(addr, path).await { Ok(()) } else { Err(format!("HTTP probe failed: GET {path} on {addr}")) }
            }
        }
    };
    let limit = timeout.max(Duration::from_millis(100));
    tokio::time::timeout(limit, attempt)
        .await
        .unwrap_or_else(|_| Err(format!("command timed out after {}s", limit.as_secs_f64())))
}

fn address(host: &Option<String>, target: &Target, port: u16) -> SocketAddr {
    let ip = host.as_deref().and_then(|h| h.parse().ok()).unwrap_or(target.ip);
    SocketAddr::new(ip, port)
}

/// Whether a GET of the path answers 200–399.
async fn http_ok(addr: SocketAddr, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(addr).await else { return false };
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: kube-probe/1.33\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 32];
    let Ok(n) = stream.read(&mut head).await else { return false };
    let line = String::from_utf8_lossy(&head[..n]);
    line.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok()).is_some_and(|c| (200..400).contains(&c))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn probes_take_the_apis_defaults_and_named_ports() {
        let c = json!({
            "ports": [{"name": "redis", "containerPort": 6379}],
            "readinessProbe": {"tcpSocket": {"port": "redis"}},
            "livenessProbe": {"exec": {"command": ["redis-cli", "ping"]}, "periodSeconds": 5, "failureThreshold": 0},
        });
        let p = Probes::of(&c).unwrap();
        let r = p.readiness.unwrap();
        assert_eq!(r.action, Action::Tcp { host: None, port: 6379 });
        assert_eq!((r.period, r.timeout, r.failure_threshold), (Duration::from_secs(10), Duration::from_secs(1), 3));
        let l = p.liveness.unwrap();
        assert_eq!(l.action, Action::Exec(vec!["redis-cli".into(), "ping".into()]));
        assert_eq!((l.period, l.failure_threshold), (Duration::from_secs(5), 1), "a threshold is at least 1");
        assert!(p.startup.is_none());
    }

    #[test]
    fn a_probe_that_cannot_run_is_named_by_its_field() {
        let e = Probes::of(&json!({"readinessProbe": {"tcpSocket": {"port": "nope"}}})).unwrap_err();
        assert_eq!(e.field, "readinessProbe.tcpSocket.port");
        let e = Probes::of(&json!({"livenessProbe": {"grpc": {"port": 1}}})).unwrap_err();
        assert_eq!(e.field, "livenessProbe");
    }

    #[tokio::test]
    async fn tcp_and_http_probes_pass_only_against_a_listener_that_answers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 256];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let ok = String::from_utf8_lossy(&buf[..n]).starts_with("GET /healthz ");
                let status = if ok { "200 OK" } else { "503 Service Unavailable" };
                let _ = s.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes()).await;
            }
        });
        let target = Target { ip: "127.0.0.1".parse().unwrap(), exec_prefix: vec![], time_factor: 1.0 };
        let t = Duration::from_secs(5);
        assert!(once(&Action::Tcp { host: None, port }, &target, t).await.is_ok());
        assert!(once(&Action::Http { host: None, port, path: "/healthz".into() }, &target, t).await.is_ok());
        assert!(
            once(&Action::Http { host: None, port, path: "/other".into() }, &target, t).await.is_err(),
            "a 503 fails"
        );
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        assert!(once(&Action::Tcp { host: None, port: closed }, &target, t).await.is_err(), "nothing listens");
    }

    #[test]
    fn an_exec_probe_runs_at_most_four_times_a_second_whatever_the_time_factor() {
        let probes = Probes::of(&json!({
            "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
            "livenessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1}}))
        .unwrap();
        let (exec, tcp) = (probes.readiness.unwrap(), probes.liveness.unwrap());
        let fast = Target { ip: "127.0.0.1".parse().unwrap(), exec_prefix: vec![], time_factor: 0.01 };
        assert_eq!(fast.period(&exec), Duration::from_millis(250));
        assert_eq!(fast.period(&tcp), Duration::from_millis(50), "a socket probe starts no process");
        let real = Target { time_factor: 1.0, ..fast };
        assert_eq!(real.period(&exec), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn an_exec_probe_passes_on_exit_zero() {
        let target = Target { ip: "127.0.0.1".parse().unwrap(), exec_prefix: vec!["sh".into()], time_factor: 1.0 };
        let t = Duration::from_secs(5);
        assert!(once(&Action::Exec(vec!["-c".into(), "exit 0".into()]), &target, t).await.is_ok());
        let said = once(&Action::Exec(vec!["-c".into(), "echo no lease; exit 1".into()]), &target, t).await;
        assert_eq!(said, Err("no lease".to_string()), "an exec probe's failure is its output");
    }
}
