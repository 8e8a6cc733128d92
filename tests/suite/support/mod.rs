//! Shared helpers for tests that drive the real `spanset` binary and the real `kubectl`.
#![allow(dead_code)]

pub mod account;
pub mod chromium;
pub mod dns;
pub mod docs;
pub mod etcd;
pub mod federation;
pub mod fixtures;
pub mod linearizable;
pub mod member_guards;
pub mod prometheus;
pub mod real_kube;
pub mod redis;
pub mod tally;
pub mod timeline;

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

/// An Advanced StatefulSet of two pods that updates them in place (`InPlaceIfPossible`, with
/// the `InPlaceUpdateReady` readiness gate Kruise requires), for the sandbox's OpenKruise.
pub const KRUISE_IN_PLACE: &str = r#"apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata:
  name: web
spec:
  replicas: 2
  serviceName: web
  podManagementPolicy: Parallel
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      readinessGates:
      - conditionType: InPlaceUpdateReady
      containers:
      - name: main
        image: nginx:1.24
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      podUpdatePolicy: InPlaceIfPossible
"#;

/// Generous deadline for conditions on a loaded 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// Polls `cond` until it holds or `deadline` passes; panics with `what` on timeout.
pub fn wait_until(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    while !cond() {
        assert!(start.elapsed() < deadline, "timed out after {deadline:?} waiting for {what}");
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}

/// Awaits until `cond` holds, polling every 10 ms; panics with `what` after [`DEADLINE`].
pub async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < DEADLINE, "timed out after {DEADLINE:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The directory on this machine behind a pod's own volume (an `emptyDir`) in a sandbox that
/// runs real processes, once the kubelet has made it: how a test reads what a container wrote
/// (a container writes nothing else of this machine's).
pub fn pod_volume_on_machine(pod_uid: &str, volume: &str) -> Option<PathBuf> {
    in_scratch("containers", &Path::new(pod_uid).join("volumes").join(volume))
}

/// The directory on this machine behind a volume of the sandbox whose process is `sandbox` (a
/// PersistentVolume's `spec.csi.volumeHandle`), once a container has mounted it: it outlives
/// the pods that wrote there. Handles are a sandbox's own: sandboxes side by side may each have
/// one of the same name.
pub fn volume_on_machine(sandbox: u32, handle: &str) -> Option<PathBuf> {
    in_scratch(&format!("volumes-{sandbox}"), Path::new(handle))
}

/// `path` in the first of the sandboxes' scratch directories of a kind
/// (`spanset-KIND-PID-XXXXXX` in the temporary directory; a KIND ending in `-PID` names one
/// sandbox's) that holds it as a directory.
fn in_scratch(kind: &str, path: &Path) -> Option<PathBuf> {
    let prefix = format!("spanset-{kind}-");
    std::fs::read_dir(std::env::temp_dir())
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path().join(path))
        .find(|p| p.is_dir())
}

/// Starts in-process clusters with these settings, and a kube client of each, in order.
pub async fn fleet_with_clients(
    configs: Vec<spanset_sim::cluster::ClusterConfig>,
) -> (spanset_sim::sandbox::fleet::Fleet, Vec<kube::Client>) {
    let fleet = spanset_sim::sandbox::fleet::Fleet::start(configs, None).await.expect("sandbox starts");
    let clients = fleet
        .servers
        .iter()
        .map(|s| kube::Client::try_from(kube::Config::new(s.url().parse().unwrap())).expect("client"))
        .collect();
    (fleet, clients)
}

/// Polls `get` every 20 ms until it answers something, which it returns; panics with `what`
/// after [`DEADLINE`].
pub async fn until<T, F, Fut>(what: &str, get: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    until_within(what, DEADLINE, get).await
}

/// [`until`] with another deadline: for what a real program (not the sandbox) settles in its
/// own time, such as a Redis Cluster's gossip.
pub async fn until_within<T, F, Fut>(what: &str, deadline: Duration, mut get: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = get().await {
            return v;
        }
        assert!(start.elapsed() < deadline, "timed out after {deadline:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A port `p` with `p..p+n` free a moment ago for TCP and UDP (bound, then released), below
/// the kernel's ephemeral range (32768 and up by default): another test's outgoing connection
/// can take a released ephemeral port as its local port, but never one of these.
pub fn free_ports(n: u16) -> u16 {
    let mut base = 20_000 + rand::random::<u16>() % 10_000;
    loop {
        let tcp: Vec<_> = (0..n).filter_map(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).ok()).collect();
        let udp: Vec<_> = (0..n).filter_map(|i| std::net::UdpSocket::bind(("127.0.0.1", base + i)).ok()).collect();
        if tcp.len() == usize::from(n) && udp.len() == usize::from(n) {
            return base;
        }
        base = 20_000 + (base - 20_000 + n) % 10_000;
    }
}

/// `program` from `PATH`, which Debian's `package` installs. Missing: under `CI` the test fails
/// loudly (`.ci/run` installs it); otherwise `None`, after printing why the test is skipped.
pub fn program(program: &str, package: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(program))
        .find(|p| p.is_file());
    match &found {
        Some(_) => tally::found(program),
        None => tally::missing(program, &format!("not on PATH: apt-get install {package}")),
    }
    found
}

/// The stdout of a command that must have succeeded; panics with both streams otherwise.
pub fn succeeded(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A `spanset sim` process with its kubeconfig; stopped with SIGTERM on drop.
pub struct Sandbox {
    child: Child,
    /// Scratch directory holding the kubeconfig and kubectl caches.
    pub dir: tempfile::TempDir,
    /// The kubeconfig written by the sandbox.
    pub kubeconfig: PathBuf,
    /// Base URL of the admin API.
    pub admin: String,
    /// Lines printed before `ready`.
    pub banner: Vec<String>,
    /// Under `--auth`, once the shipped identities are set up: the controller's kubeconfig
    /// (its ServiceAccount in the host). Controllers started on this sandbox use it.
    pub controller_kubeconfig: Option<PathBuf>,
}

impl Sandbox {
    /// The DNS server of a cluster, from its `dns NAME: ADDRESS` line.
    pub fn dns(&self, cluster: &str) -> std::net::SocketAddr {
        let prefix = format!("dns {cluster}: ");
        self.banner
            .iter()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line in {:?}", self.banner))
            .parse()
            .expect("a socket address")
    }

    /// Starts `spanset sim --clusters <clusters>` and waits for `ready`.
    pub fn start(clusters: &str) -> Self {
        Self::start_with(clusters, &[])
    }

    /// Like [`Sandbox::start`], with more flags (`--auth`).
    pub fn start_with(clusters: &str, flags: &[&str]) -> Self {
        Self::start_from(Path::new(env!("CARGO_BIN_EXE_spanset")), clusters, flags)
    }

    /// Like [`Sandbox::start_with`], running `spanset` from `binary` (a copy elsewhere, to
    /// see what the sandbox makes of what is beside it). With `--run-images`, `--auth` too: the
    /// sandbox runs real processes only for authenticated requests (the kubeconfig's
    /// administrator has a token, so kubectl and kube clients from it are unchanged).
    pub fn start_from(binary: &Path, clusters: &str, flags: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        let auth = flags.contains(&"--run-images") && !flags.contains(&"--auth");
        let mut child = Command::new(binary)
            .args(["sim", "--time-factor", "0.01", "--clusters", clusters, "--kubeconfig"])
            .arg(&kubeconfig)
            .args(flags)
            .args(auth.then_some("--auth"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spanset sim starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut banner = Vec::new();
        let start = Instant::now();
        loop {
            let left = DEADLINE.checked_sub(start.elapsed()).expect("spanset sim printed `ready` in time");
            let line = rx.recv_timeout(left).expect("spanset sim printed `ready`");
            if line == "ready" {
                break;
            }
            banner.push(line);
        }
        let admin =
            banner.iter().find_map(|l| l.strip_prefix("admin: ")).expect("an `admin:` line before `ready`").to_string();
        Self { child, dir, kubeconfig, admin, banner, controller_kubeconfig: None }
    }

    /// The sandbox's process id (to kill it as a crash would).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Runs `spanset sim-ctl --admin <this sandbox> ARGS`.
    pub fn ctl(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_spanset"))
            .args(["sim-ctl", "--admin", &self.admin])
            .args(args)
            .output()
            .expect("spanset sim-ctl runs")
    }

    /// Runs `sim-ctl` expecting success; returns stdout.
    pub fn ctl_ok(&self, args: &[&str]) -> String {
        succeeded(&format!("sim-ctl {args:?}"), self.ctl(args))
    }

    /// Sends SIGTERM and returns the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.terminate()
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if start.elapsed() > DEADLINE {
                let _ = self.child.kill();
                return self.child.wait().expect("child reaped");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
    }
}

/// The directory holding `kubectl` (resolved through symlinks), where `kubectl.1.NN` live.
fn kubectl_dir() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .and_then(|p| p.parent().map(Path::to_path_buf))
}

/// The `kubectl.1.NN` binary for a minor version. Missing binaries fail loudly under CI and
/// skip (returning `None`) elsewhere, counted either way ([`tally`]).
pub fn kubectl_binary(minor: u32) -> Option<PathBuf> {
    let program = format!("kubectl.1.{minor}");
    let found = kubectl_dir().map(|d| d.join(&program)).filter(|p| p.is_file());
    match &found {
        Some(_) => tally::found(&program),
        None => tally::missing(&program, "not found beside kubectl on PATH"),
    }
    found
}

/// One kubectl version bound to a sandbox, with its own discovery cache.
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
    /// Context to use, if not the current one.
    pub context: Option<String>,
}

impl Kubectl {
    /// kubectl 1.`minor` against `sandbox`, or `None` when that version is not installed.
    pub fn new(minor: u32, sandbox: &Sandbox) -> Option<Self> {
        let bin = kubectl_binary(minor)?;
        let cache = sandbox.dir.path().join(format!("cache-1.{minor}"));
        Some(Self { bin, kubeconfig: sandbox.kubeconfig.clone(), cache, context: None })
    }

    /// The `kubectl` on PATH against `sandbox`, or `None` when there is none (counted, and
    /// failing under CI: [`tally`]).
    pub fn installed(sandbox: &Sandbox) -> Option<Self> {
        match kubectl_dir() {
            Some(_) => tally::found("kubectl"),
            None => tally::missing("kubectl", "not on PATH"),
        }
        kubectl_dir().map(|_| Self::on_path(sandbox))
    }

    /// The kubectl at `bin` against the cluster of `kubeconfig` (a real control plane's own
    /// kubectl), its discovery cache in `cache`.
    pub fn at(bin: PathBuf, kubeconfig: PathBuf, cache: PathBuf) -> Self {
        Self { bin, kubeconfig, cache, context: None }
    }

    /// The `kubectl` on PATH against `sandbox`.
    pub fn on_path(sandbox: &Sandbox) -> Self {
        let cache = sandbox.dir.path().join("cache-path");
        Self { bin: PathBuf::from("kubectl"), kubeconfig: sandbox.kubeconfig.clone(), cache, context: None }
    }

    /// The base command with kubeconfig and cache dir set.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).arg("--cache-dir").arg(&self.cache).arg("--request-timeout=30s");
        if let Some(ctx) = &self.context {
            cmd.args(["--context", ctx]);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs kubectl to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("kubectl runs")
    }

    /// Runs kubectl with a file on stdin (`-f -`).
    pub fn run_with_stdin(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        child.stdin.take().expect("piped stdin").write_all(input.as_bytes()).expect("stdin written");
        child.wait_with_output().expect("kubectl finishes")
    }

    /// Runs kubectl and returns stdout, panicking with both streams if it failed.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Like [`Kubectl::ok`] with stdin.
    pub fn ok_with_stdin(&self, args: &[&str], input: &str) -> String {
        let out = self.run_with_stdin(args, input);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl expecting failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} unexpectedly succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// A background process whose stdout lines are collected (for `kubectl get --watch`).
pub struct Background {
    child: Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    err_lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Background {
    /// Starts `cmd` with stdout captured line by line.
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("background process starts");
        let collect = |stream: Box<dyn std::io::Read + Send>| {
            let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    sink.lock().expect("lines lock").push(line);
                }
            });
            lines
        };
        let lines = collect(Box::new(child.stdout.take().expect("piped stdout")));
        let err_lines = collect(Box::new(child.stderr.take().expect("piped stderr")));
        Self { child, lines, err_lines }
    }

    /// The lines printed on stderr so far.
    pub fn err_lines(&self) -> Vec<String> {
        self.err_lines.lock().expect("lines lock").clone()
    }

    /// The lines printed so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines lock").clone()
    }

    /// Waits until some printed line satisfies `pred`.
    pub fn wait_for_line(&self, what: &str, pred: impl Fn(&str) -> bool) {
        wait_until(what, DEADLINE, || self.lines().iter().any(|l| pred(l)));
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit code if it has exited (`Some(None)`: killed by a signal), without waiting.
    pub fn try_exit(&mut self) -> Option<Option<i32>> {
        self.child.try_wait().ok().flatten().map(|s| s.code())
    }

    /// Waits for the process to exit by itself and returns its status.
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let start = Instant::now();
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s;
            }
            assert!(start.elapsed() < DEADLINE, "background process did not exit in time; output: {:?}", self.lines());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
