//! The process runtime of a simulated cluster: containers whose image is listed as runnable
//! (`spanset sim --run-images redis,etcd`) run for real on this machine, each in private mount,
//! PID and UTS namespaces where its volume mounts are the directories of its PersistentVolumes
//! ([`launch`], [`spec`]) — or, in a pod with `shareProcessNamespace`, in one PID namespace of
//! the pod's, held by a process of its own as the pause container holds it — with what an
//! in-cluster API client needs ([`in_cluster`]); every other container stays simulated. The kubelet starts them,
//! reads their state (running, probed ready, exited with a code), signals them (SIGTERM at
//! deletion, SIGKILL at the grace period or when their node powers off) and restarts them;
//! `kubectl logs` shows what they print and `kubectl exec` runs commands beside them.
//!
//! Each pod has a network namespace of its own holding its pod IP ([`network`]): `localhost` in
//! it is the pod, and this machine, the pods' node, reaches every pod IP. Its
//! `/etc/resolv.conf` names its cluster's DNS server on port 53 of [`nameserver`].

pub mod in_cluster;
pub mod launch;
pub mod network;
pub mod probes;
pub mod spec;

use std::{
    collections::HashMap,
    io::BufRead,
    net::Ipv4Addr,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use rustix::process::Signal;
use serde_json::Value;

use self::probes::{ProbeState, Probes, Target};
use crate::{
    cluster::{Cluster, logs::ContainerLog},
    store::object,
};

/// Why a command cannot be run in a container (`kubectl exec`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecRefusal {
    /// The container's image is simulated: there is no process to join.
    #[error(
        "container {container} runs the simulated image {image}; only images listed in --run-images run real processes that exec can join"
    )]
    Simulated {
        /// The container asked for.
        container: String,
        /// Its image.
        image: String,
    },
    /// The container's process is not running (starting, exited, or its node is off).
    #[error("container {0} is not running")]
    NotRunning(String),
}

/// How a container's process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code, or 128 + the signal that killed it.
    pub code: i32,
    /// When it started.
    pub started: jiff::Timestamp,
    /// When it ended.
    pub finished: jiff::Timestamp,
    /// Its termination message ([`termination_message`]), or why it could not start.
    pub message: Option<String>,
}

/// The most of a termination message file the kubelet reads.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// The most lines of a log that stand in for an empty message (`FallbackToLogsOnError`).
pub const FALLBACK_LINES: usize = 80;
/// The most bytes of a log that stand in for an empty message.
pub const FALLBACK_BYTES: usize = 2048;

/// The termination message of a container that ended with `code`, as the kubelet makes it:
/// what its process wrote into its termination message file (`file`, at most
/// [`MAX_MESSAGE_BYTES`]), or, with `fallback` (`FallbackToLogsOnError`), an empty file and a
/// failure, the tail of its `log` (the last [`FALLBACK_LINES`] lines, at most [`FALLBACK_BYTES`]).
pub fn termination_message(file: &[u8], code: i32, fallback: bool, log: &[String]) -> Option<String> {
    if !file.is_empty() {
        let head = &file[..file.len().min(MAX_MESSAGE_BYTES)];
        return Some(String::from_utf8_lossy(head).into_owned());
    }
    if !fallback || code == 0 || log.is_empty() {
        return None;
    }
    let tail = log[log.len().saturating_sub(FALLBACK_LINES)..].join("\n") + "\n";
    let bytes = tail.as_bytes();
    let mut from = bytes.len().saturating_sub(FALLBACK_BYTES);
    // Cut at a character's start: the message is text.
    while !tail.is_char_boundary(from) {
        from += 1;
    }
    Some(tail[from..].to_string())
}

impl Exit {
    /// The reason the kubelet gives a terminated container.
    pub fn reason(&self) -> &'static str {
        if self.code == 0 { "Completed" } else { "Error" }
    }
}

/// What the kubelet sees of a container's process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Running since `started`; `started_up` once it runs its command and its startup probe
    /// (if any) passed; `ready` by its readiness probe; `unhealthy` when a startup or liveness
    /// probe failed its threshold.
    Running {
        /// When it started.
        started: jiff::Timestamp,
        /// Whether it runs its command and its startup probe passed: what a container's
        /// `started` status says, and what lets the kubelet start the init container after a
        /// sidecar.
        started_up: bool,
        /// Whether its probes say it is ready.
        ready: bool,
        /// Whether its probes ask for a restart.
        unhealthy: bool,
    },
    /// It ended.
    Exited(Exit),
}

/// Why the kubelet starts no container of a pod: what one of them asks that the sandbox cannot
/// run, shown as that container's `CreateContainerConfigError` (see
/// [`Processes::refusals`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The container (or init container).
    pub container: String,
    /// What the kubelet says.
    pub message: String,
}

/// One running (or ended, not yet forgotten) container process.
struct Instance {
    node: String,
    /// The `unshare` process, our child.
    pid: u32,
    started: jiff::Timestamp,
    exit: Arc<Mutex<Option<Exit>>>,
    env: Vec<(String, String)>,
    /// What its `securityContext` takes from its processes, commands run in it too.
    privileges: launch::Privileges,
    probes: Arc<ProbeState>,
    probe_task: Option<tokio::task::JoinHandle<()>>,
    /// When a SIGTERMed process is killed.
    kill_at: Option<Instant>,
    /// What of it is the pod's workload ([`Workload`]).
    workload: Workload,
}

/// What of a container is the pod's workload, for the ledger: what a StatefulSet fears is its
/// pods' own programs running, not a pod guard's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    /// Its process is (a container of any image but spanset's).
    Process,
    /// Its first process is the pod guard's `spanset-guard-exec`, which runs nothing of the
    /// container's command until it starts it as its child: what it started is.
    Children,
    /// None of it (a container of spanset's image: the guard's own).
    None,
}

impl Instance {
    fn exited(&self) -> bool {
        self.exit.lock().is_some()
    }

    /// The container's first process (PID 1 of its namespace), as this machine numbers it.
    fn inner_pid(&self) -> Option<u32> {
        first_child(self.pid)
    }

    /// The container's first process, once it runs the container's command.
    fn entered(&self) -> Option<u32> {
        entered(self.pid)
    }

    fn signal(&self, signal: Signal) {
        if self.exited() {
            return;
        }
        let pid = |n: u32| rustix::process::Pid::from_raw(n as i32);
        if let Some(inner) = self.inner_pid().and_then(pid) {
            let _ = rustix::process::kill_process(inner, signal);
        }
        if signal == Signal::KILL
            && let Some(own) = pid(self.pid)
        {
            let _ = rustix::process::kill_process(own, signal);
        }
    }

    /// SIGKILL, then waits (briefly) until the process is reaped.
    fn kill_and_wait(&self) {
        self.signal(Signal::KILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.exited() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(task) = &self.probe_task {
            task.abort();
        }
        self.kill_and_wait();
    }
}

/// The runnable images of a cluster and its container processes.
pub struct Processes {
    /// Image names (the repository's last path element, without tag or digest) that run real
    /// processes.
    run_images: Vec<String>,
    /// (pod uid, container) → its current process.
    instances: Mutex<HashMap<(String, String), Instance>>,
    /// Pod uid → the holder of its shared PID namespace (`shareProcessNamespace`).
    holders: Mutex<HashMap<String, Holder>>,
    /// Pod uid → its node and the holder of its user and network namespaces
    /// ([`launch::PodNamespaces`]).
    pods: Mutex<HashMap<String, (String, launch::PodNamespaces)>>,
    /// The sandbox's pod network, which each pod's network namespace joins, and this cluster's
    /// `/16` in it ([`Processes::join_network`]).
    network: std::sync::OnceLock<(Arc<network::PodNetwork>, Ipv4Addr)>,
    /// The containers' directories (roots, `/etc` files, the pods' own volumes).
    dir: Mutex<Option<tempfile::TempDir>>,
    /// (pod uid, container) → whether its `postStart` hook still runs, for the containers that
    /// have one ([`Processes::post_start`]).
    hooks: Mutex<HashMap<(String, String), Arc<std::sync::atomic::AtomicBool>>>,
    /// Counts starts, so that each instance gets a directory of its own.
    starts: std::sync::atomic::AtomicU64,
}

impl Default for Processes {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

/// The address of a cluster's DNS server for its containers (port 53), in its pod network:
/// `a.b.0.53` of `a.b.0.0/16` (node CIDRs start at `a.b.1.0/24`).
pub fn nameserver(pod_network: Ipv4Addr) -> Ipv4Addr {
    let [a, b, ..] = pod_network.octets();
    Ipv4Addr::new(a, b, 0, 53)
}

impl Processes {
    /// A runtime running the listed images for real.
    pub fn new(run_images: Vec<String>) -> Self {
        Self {
            run_images,
            instances: Mutex::default(),
            holders: Mutex::default(),
            pods: Mutex::default(),
            network: std::sync::OnceLock::new(),
            hooks: Mutex::default(),
            dir: Mutex::default(),
            starts: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Gives the cluster its pods' network: the sandbox's pod network and the cluster's `/16`
    /// in it (claimed by [`network::PodNetwork::claim`]). Pods start only once it has one.
    pub fn join_network(&self, network: Arc<network::PodNetwork>, pod_network: Ipv4Addr) {
        let _ = self.network.set((network, pod_network));
    }

    /// Whether this cluster runs any image for real.
    pub fn enabled(&self) -> bool {
        !self.run_images.is_empty()
    }

    /// Whether an image runs real processes: its name (`redis` of `docker.io/library/redis:7`)
    /// is one of `--run-images`, or it is spanset's own where any is: a pod's guard controls
    /// real processes, so it must be real wherever they run.
    pub fn runnable(&self, image: &str) -> bool {
        let name = image_name(image);
        self.run_images.iter().any(|i| i == name) || (self.enabled() && name == spec::SPANSET_IMAGE)
    }

    /// What keeps the kubelet from starting a pod's containers, one for each container in
    /// question; none: it starts them. A pod runs whole, never half-simulated: in a cluster that
    /// runs processes, a pod with both runnable and simulated containers (init containers and
    /// sidecars counted) starts none of them, each simulated one naming what `--run-images`
    /// lacks; in one that runs none, a pod with spanset's image (a guard, which controls real
    /// processes) starts none either. `root` says whether the sandbox runs as root, which
    /// containers that ask for another user need ([`spec::security_refusal`]).
    pub fn refusals(&self, pod: &Value, root: bool) -> Vec<Refusal> {
        let containers: Vec<&Value> = ["/spec/initContainers", "/spec/containers"]
            .into_iter()
            .filter_map(|list| pod.pointer(list)?.as_array())
            .flatten()
            .collect();
        let name = |c: &Value| c["name"].as_str().unwrap_or("").to_string();
        let image = |c: &Value| c["image"].as_str().unwrap_or("").to_string();
        let mut images: Vec<String> = containers.iter().map(|c| image_name(&image(c)).to_string()).collect();
        images.retain(|i| i != spec::SPANSET_IMAGE);
        images.sort();
        images.dedup();
        if !self.enabled() {
            let message = format!(
                "spanset's guard controls real processes; run the sandbox with --run-images naming the pod's images ({})",
                if images.is_empty() { "spanset".to_string() } else { images.join(",") }
            );
            return containers
                .iter()
                .filter(|c| image_name(&image(c)) == spec::SPANSET_IMAGE)
                .map(|c| Refusal { container: name(c), message: message.clone() })
                .collect();
        }
        let (real, simulated): (Vec<&Value>, Vec<&Value>) = containers.iter().partition(|c| self.runnable(&image(c)));
        if !real.is_empty() && !simulated.is_empty() {
            let mut missing: Vec<&str> =
                simulated.iter().map(|c| c["image"].as_str().unwrap_or("")).map(image_name).collect();
            missing.sort();
            missing.dedup();
            let reals: Vec<String> = real.iter().map(|c| name(c)).collect();
            return simulated
                .iter()
                .map(|c| Refusal {
                    container: name(c),
                    message: format!(
                        "image {} is simulated in this cluster, and the pod's containers {} run real processes: \
                         a pod runs all real or all simulated; add {} to --run-images",
                        image(c),
                        reals.join(", "),
                        missing.join(",")
                    ),
                })
                .collect();
        }
        real.iter()
            .filter_map(|c| spec::security_refusal(pod, c, root).map(|message| Refusal { container: name(c), message }))
            .collect()
    }

    /// The command line that runs a command inside a running container's namespaces and root,
    /// with its environment (what `kubectl exec` and `exec` probes run): append the command's
    /// own argv to it.
    pub fn exec_prefix(&self, pod_uid: &str, container: &str, image: &str) -> Result<Vec<String>, ExecRefusal> {
        if !self.runnable(image) {
            return Err(ExecRefusal::Simulated { container: container.to_string(), image: image.to_string() });
        }
        let instances = self.instances.lock();
        let not_running = || ExecRefusal::NotRunning(container.to_string());
        let i = instances.get(&(pod_uid.to_string(), container.to_string())).ok_or_else(not_running)?;
        let pid = i.entered().filter(|_| !i.exited()).ok_or_else(not_running)?;
        Ok(prefix(pid, &i.env, &i.privileges))
    }

    fn base_dir(&self) -> std::io::Result<PathBuf> {
        let mut dir = self.dir.lock();
        if dir.is_none() {
            let made = crate::scratch::make("containers")?;
            // Its containers' roots must reach their own directories in it; no one else may.
            launch::give_to_containers(made.path())?;
            *dir = Some(made);
        }
        Ok(dir.as_ref().map(|d| d.path().to_path_buf()).unwrap_or_default())
    }

    /// Starts (or restarts) a container of a pod with IP `ip` on `node`, its output going to
    /// `log`; an error says what in the spec or on this machine stopped it.
    pub fn start(
        &self,
        cluster: &Cluster,
        pod: &Value,
        container: &str,
        ip: &str,
        log: Arc<ContainerLog>,
    ) -> Result<(), String> {
        let uid = object::uid(pod).to_string();
        let key = (uid.clone(), container.to_string());
        // The previous instance is gone before the next one starts.
        let previous = self.instances.lock().remove(&key);
        drop(previous);
        let base = self.base_dir().map_err(|e| format!("cannot make the containers' directory: {e}"))?;
        let pod_dir = base.join(&uid);
        let seq = self.starts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = pod_dir.join(format!("{container}-{seq}"));
        let launch = spec::launch(cluster, pod, container, ip, &pod_dir)?;
        let c = spec::container(pod, container).cloned().unwrap_or_default();
        let probes = Probes::of(&c).map_err(|e| e.to_string())?;
        launch::prepare(&launch, &dir).map_err(|e| format!("cannot prepare the container's directory: {e}"))?;
        let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("").to_string();
        launch::give_to_containers(&pod_dir)
            .map_err(|e| format!("cannot give the pod's directory to its containers: {e}"))?;
        let script = launch::script(&launch, &dir);
        let command = match pod.pointer("/spec/shareProcessNamespace").and_then(Value::as_bool) {
            Some(true) => launch::command_in_pod(&script, self.holder(&uid, &node, ip)?),
            _ => launch::command(&script, self.pod_namespaces(&uid, &node, ip)?),
        };
        let mut child = launch::spawn(command).map_err(|e| format!("cannot start the container: {e}"))?;
        let started = jiff::Timestamp::now();
        let exit = Arc::new(Mutex::new(None));
        let readers: Vec<_> = [
            child.stdout.take().map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
            child.stderr.take().map(|e| Box::new(e) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        .map(|out| {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(out).lines() {
                    match line {
                        Ok(line) => log.write(line),
                        Err(_) => break,
                    }
                }
            })
        })
        .collect();
        let pid = child.id();
        {
            let exit = exit.clone();
            let message_file = dir.join(launch::TERMINATION_LOG);
            let fallback = spec::falls_back_to_logs(&c);
            std::thread::spawn(move || {
                let status = child.wait();
                for r in readers {
                    let _ = r.join();
                }
                use std::os::unix::process::ExitStatusExt;
                let code = match status {
                    Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
                    Err(_) => 255,
                };
                let finished = jiff::Timestamp::now();
                // Read once the process is gone, as the kubelet does: the file may be written
                // until the very end.
                let file = read_head(&message_file, MAX_MESSAGE_BYTES);
                let lines: Vec<String> = log.snapshot().lines.into_iter().map(|l| l.text).collect();
                let message = termination_message(&file, code, fallback, &lines);
                *exit.lock() = Some(Exit { code, started, finished, message });
                log.exit();
            });
        }
        let state = Arc::new(ProbeState::default());
        let probe_task = tokio::runtime::Handle::try_current().ok().and_then(|handle| {
            let target =
                Target { ip: ip.parse().ok()?, exec_prefix: Vec::new(), time_factor: cluster.config.time_factor };
            let (state, env, pid_of) = (state.clone(), launch::environment(&launch), pid);
            let (privileges, exit) = (launch.privileges.clone(), exit.clone());
            Some(handle.spawn(async move {
                // An exec probe joins the container's first process, once it runs the
                // container's command (its root changed), however long its setup takes;
                // a container that ended first is probed no more.
                let mut target = target;
                loop {
                    if let Some(inner) = entered(pid_of) {
                        target.exec_prefix = prefix(inner, &env, &privileges);
                        break;
                    }
                    if exit.lock().is_some() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                probes::run(probes, target, state).await;
            }))
        });
        let env = launch::environment(&launch);
        let privileges = launch.privileges.clone();
        let image = c["image"].as_str().unwrap_or("");
        let workload = if image_name(image) == spec::SPANSET_IMAGE {
            Workload::None
        } else if launch.argv.first().is_some_and(|a| a.ends_with(&format!("/{}", spec::GUARD_EXEC))) {
            Workload::Children
        } else {
            Workload::Process
        };
        let instance =
            Instance { node, pid, started, exit, env, privileges, probes: state, probe_task, kill_at: None, workload };
        self.instances.lock().insert(key, instance);
        Ok(())
    }

    /// Records a container whose process could not be started as one that exited at once with
    /// code 128 (what a container runtime's StartError reports), so that it is retried on the
    /// back-off like any other exit.
    pub fn failed(&self, pod_uid: &str, container: &str, why: &str) {
        let now = jiff::Timestamp::now();
        let exit = Exit { code: 128, started: now, finished: now, message: Some(why.to_string()) };
        let exit = Arc::new(Mutex::new(Some(exit)));
        tracing::debug!(pod_uid, container, why, "container start failed");
        let instance = Instance {
            node: String::new(),
            pid: 0,
            started: now,
            exit,
            env: Vec::new(),
            privileges: launch::Privileges::default(),
            probes: Arc::default(),
            probe_task: None,
            kill_at: None,
            workload: Workload::None,
        };
        self.instances.lock().insert((pod_uid.to_string(), container.to_string()), instance);
    }

    /// Runs a container's `postStart` exec hook (`argv`) in it, once its process runs its
    /// command, as the kubelet does right after starting it: until the hook returns the kubelet
    /// starts none of the pod's later containers ([`Processes::hook_running`]); a hook that fails
    /// (or cannot run within its container's first minute) kills the container, which is then
    /// restarted by the pod's policy. Its output goes to the container's log.
    pub fn post_start(&self, pod_uid: &str, container: &str, argv: Vec<String>, log: Arc<ContainerLog>) {
        let key = (pod_uid.to_string(), container.to_string());
        let Some((pid, env, privileges, exit)) =
            self.instances.lock().get(&key).map(|i| (i.pid, i.env.clone(), i.privileges.clone(), i.exit.clone()))
        else {
            return;
        };
        let running = Arc::new(std::sync::atomic::AtomicBool::new(true));
        self.hooks.lock().insert(key, running.clone());
        std::thread::spawn(move || {
            use std::sync::atomic::Ordering::SeqCst;
            let deadline = Instant::now() + Duration::from_secs(60);
            let inner = loop {
                if exit.lock().is_some() {
                    running.store(false, SeqCst);
                    return;
                }
                if let Some(inner) = entered(pid) {
                    break Some(inner);
                }
                if Instant::now() > deadline {
                    break None;
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            let ok = inner.is_some_and(|inner| {
                let mut full = prefix(inner, &env, &privileges);
                full.extend(argv);
                let (program, rest) = full.split_first().expect("a prefix");
                let out = std::process::Command::new(program).args(rest).stdin(std::process::Stdio::null()).output();
                if let Ok(o) = &out {
                    for line in
                        String::from_utf8_lossy(&o.stdout).lines().chain(String::from_utf8_lossy(&o.stderr).lines())
                    {
                        log.write(line.to_string());
                    }
                }
                out.is_ok_and(|o| o.status.success())
            });
            if !ok {
                log.write("[sandbox] postStart hook failed; killing the container");
                if let Some(p) =
                    entered(pid).or_else(|| first_child(pid)).and_then(|p| rustix::process::Pid::from_raw(p as i32))
                {
                    let _ = rustix::process::kill_process(p, Signal::KILL);
                }
            }
            running.store(false, SeqCst);
        });
    }

    /// The probe failures of a pod's containers since the last call, each with the container's
    /// name: what the kubelet reports as `Unhealthy` Events.
    pub fn probe_failures(&self, pod_uid: &str) -> Vec<(String, probes::Kind, String)> {
        let instances = self.instances.lock();
        let mut out = Vec::new();
        for ((_, name), i) in instances.iter().filter(|((uid, _), _)| uid == pod_uid) {
            out.extend(i.probes.take_failures().into_iter().map(|(kind, why)| (name.clone(), kind, why)));
        }
        out
    }

    /// Whether a container's `postStart` hook still runs.
    pub fn hook_running(&self, pod_uid: &str, container: &str) -> bool {
        self.hooks
            .lock()
            .get(&(pod_uid.to_string(), container.to_string()))
            .is_some_and(|r| r.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// When the workload of a pod began to run, if it runs now: the earliest start among the
    /// running processes of its containers that are its workload ([`Workload`]), from the
    /// kernel's record of each process's start. `None` while none runs.
    pub fn workload_since(&self, pod_uid: &str) -> Option<jiff::Timestamp> {
        let instances = self.instances.lock();
        let mut since: Option<jiff::Timestamp> = None;
        for (_, i) in instances.iter().filter(|((uid, _), i)| uid == pod_uid && !i.exited()) {
            let started = match i.workload {
                Workload::None => None,
                Workload::Process => Some(i.started),
                Workload::Children => {
                    i.entered().and_then(|inner| live_children(inner).into_iter().filter_map(process_start).min())
                }
            };
            if let Some(t) = started {
                since = Some(since.map_or(t, |s| s.min(t)));
            }
        }
        since
    }

    /// The state of a container's process, if it has one.
    pub fn state(&self, pod_uid: &str, container: &str) -> Option<State> {
        let instances = self.instances.lock();
        let i = instances.get(&(pod_uid.to_string(), container.to_string()))?;
        if let Some(exit) = i.exit.lock().clone() {
            return Some(State::Exited(exit));
        }
        use std::sync::atomic::Ordering::SeqCst;
        Some(State::Running {
            started: i.started,
            started_up: i.probes.started.load(SeqCst) && i.entered().is_some(),
            ready: i.probes.started.load(SeqCst) && i.probes.ready.load(SeqCst) && i.entered().is_some(),
            unhealthy: i.probes.unhealthy.load(SeqCst),
        })
    }

    /// SIGTERMs the processes of a pod's containers that `which` picks (and that were not
    /// SIGTERMed yet), to be SIGKILLed at `kill_at` ([`Processes::enforce`]).
    pub fn terminate(&self, pod_uid: &str, which: impl Fn(&str) -> bool, kill_at: Instant) {
        let mut instances = self.instances.lock();
        for ((uid, name), i) in instances.iter_mut() {
            if uid == pod_uid && which(name) && i.kill_at.is_none() {
                i.signal(Signal::TERM);
                i.kill_at = Some(kill_at);
            }
        }
    }

    /// Whether the process of one of a pod's containers that `which` picks still runs.
    pub fn running_of(&self, pod_uid: &str, which: impl Fn(&str) -> bool) -> bool {
        self.instances.lock().iter().any(|((uid, name), i)| uid == pod_uid && which(name) && !i.exited())
    }

    /// SIGKILLs the processes whose grace period after SIGTERM is over.
    pub fn enforce(&self, now: Instant) {
        for i in self.instances.lock().values() {
            if i.kill_at.is_some_and(|at| at <= now) {
                i.signal(Signal::KILL);
            }
        }
    }

    /// Kills a container's process at once (a failed liveness probe, a new image).
    pub fn kill(&self, pod_uid: &str, container: &str) {
        if let Some(i) = self.instances.lock().get(&(pod_uid.to_string(), container.to_string())) {
            i.kill_and_wait();
        }
    }

    /// Whether a pod still has a process running.
    pub fn running(&self, pod_uid: &str) -> bool {
        self.instances.lock().iter().any(|((uid, _), i)| uid == pod_uid && !i.exited())
    }

    /// Kills every process on a node at once (it lost power); their pods' directories stay.
    pub fn kill_node(&self, node: &str) {
        let gone: Vec<Instance> = {
            let mut instances = self.instances.lock();
            let keys: Vec<_> = instances.iter().filter(|(_, i)| i.node == node).map(|(k, _)| k.clone()).collect();
            keys.into_iter().filter_map(|k| instances.remove(&k)).collect()
        };
        drop(gone);
        self.holders.lock().retain(|_, h| h.node != node);
        self.pods.lock().retain(|_, (n, _)| n != node);
    }

    /// Kills and forgets a pod's processes and removes its directory (the pod is gone).
    pub fn forget_pod(&self, pod_uid: &str) {
        self.hooks.lock().retain(|(uid, _), _| uid != pod_uid);
        self.recreate_sandbox(pod_uid);
        self.pods.lock().remove(pod_uid);
        if let Some(dir) = self.dir.lock().as_ref() {
            let _ = std::fs::remove_dir_all(dir.path().join(pod_uid));
        }
    }

    /// Whether a pod's sandbox (the holder of its shared PID namespace) has ended, taking
    /// every container of the pod with it.
    pub fn sandbox_ended(&self, pod_uid: &str) -> bool {
        self.holders.lock().get_mut(pod_uid).is_some_and(|h| !matches!(h.child.try_wait(), Ok(None)))
    }

    /// Forgets a pod's ended sandbox and its containers' processes (killing any left), so that
    /// the next start makes a new sandbox and every container counts as not started; the
    /// pod's directories (its `emptyDir`s) stay, as a kubelet keeps them.
    pub fn recreate_sandbox(&self, pod_uid: &str) {
        let gone: Vec<Instance> = {
            let mut instances = self.instances.lock();
            let keys: Vec<_> = instances.keys().filter(|(uid, _)| uid == pod_uid).cloned().collect();
            keys.into_iter().filter_map(|k| instances.remove(&k)).collect()
        };
        drop(gone);
        self.holders.lock().remove(pod_uid);
    }

    /// The pods that have processes, with their nodes.
    pub fn pods(&self) -> Vec<(String, String)> {
        let mut pods: Vec<(String, String)> =
            self.instances.lock().iter().map(|((uid, _), i)| (uid.clone(), i.node.clone())).collect();
        pods.sort();
        pods.dedup();
        pods
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        // Every process ends with its cluster.
        let all: Vec<Instance> = self.instances.lock().drain().map(|(_, i)| i).collect();
        drop(all);
        self.holders.lock().clear();
        self.pods.lock().clear();
    }
}

/// The process holding a pod's shared PID namespace ([`launch::holder_command`]); killed when
/// dropped, which ends every process of the namespace.
struct Holder {
    node: String,
    child: std::process::Child,
    /// The namespace's first process, which containers join.
    first: u32,
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Processes {
    /// The first process of a pod's shared PID namespace, its holder started first if it has
    /// none running (as the pause container is started before a pod's containers).
    fn holder(&self, pod_uid: &str, node: &str, ip: &str) -> Result<u32, String> {
        let mut holders = self.holders.lock();
        if let Some(h) = holders.get_mut(pod_uid) {
            // A sandbox that ended is recreated by the kubelet ([`Processes::recreate_sandbox`]),
            // which runs the init containers again: a container started meanwhile would run
            // in a new sandbox without them.
            return match h.child.try_wait() {
                Ok(None) => Ok(h.first),
                _ => Err("the pod's sandbox ended; the kubelet recreates it".into()),
            };
        }
        let pod = self.pod_namespaces(pod_uid, node, ip)?;
        let child = launch::spawn(launch::holder_command(pod))
            .map_err(|e| format!("cannot start the holder of the pod's PID namespace: {e}"))?;
        let mut holder = Holder { node: node.to_string(), first: 0, child };
        let deadline = Instant::now() + Duration::from_secs(5);
        holder.first = loop {
            if let Some(first) = first_child(holder.child.id()) {
                break first;
            }
            if Instant::now() > deadline || !matches!(holder.child.try_wait(), Ok(None)) {
                return Err("the holder of the pod's PID namespace did not start".into());
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let first = holder.first;
        holders.insert(pod_uid.to_string(), holder);
        Ok(first)
    }
}

impl Processes {
    /// The holder of a pod's user and network namespaces, made on its first container's
    /// start (as the kubelet makes a pod's sandbox first), its network joined to the pod
    /// network with the pod IP `ip`.
    fn pod_namespaces(&self, pod_uid: &str, node: &str, ip: &str) -> Result<u32, String> {
        let mut pods = self.pods.lock();
        if let Some((_, ns)) = pods.get(pod_uid) {
            return Ok(ns.pid());
        }
        let (network, pod_network) =
            self.network.get().ok_or("the cluster has no pod network: real processes run only in a sandbox")?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| format!("the pod IP {ip:?} is not an IPv4 address"))?;
        let ns = launch::PodNamespaces::new().map_err(|e| format!("cannot make the pod's namespaces: {e}"))?;
        network.attach(ns.pid(), ip, *pod_network).map_err(|e| format!("cannot give the pod its network: {e}"))?;
        let pid = ns.pid();
        pods.insert(pod_uid.to_string(), (node.to_string(), ns));
        Ok(pid)
    }
}

/// The first child of a process (`unshare`'s child: the container's first process).
fn first_child(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// The first process of the container `unshare` (`pid`) runs, once it runs the container's
/// command: its root is the container's (the setup script has `chroot`ed), so its hostname and
/// mounts are in place.
fn entered(pid: u32) -> Option<u32> {
    let inner = first_child(pid)?;
    let root = std::fs::read_link(format!("/proc/{inner}/root")).ok()?;
    (root != std::path::Path::new("/")).then_some(inner)
}

/// The live (not zombie) children of a process.
fn live_children(pid: u32) -> Vec<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    children
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .filter(|c| {
            let stat = std::fs::read_to_string(format!("/proc/{c}/stat")).unwrap_or_default();
            stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with(['Z', 'X']))
        })
        .collect()
}

/// When a process started, on the wall clock: its start in clock ticks after boot (`stat`'s
/// field 22) against the boot clock now.
fn process_start(pid: u32) -> Option<jiff::Timestamp> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis: state is field 3, starttime field 22.
    let ticks: u64 = stat.rsplit(')').next()?.split_whitespace().nth(19)?.parse().ok()?;
    let hz = rustix::param::clock_ticks_per_second();
    let since_boot = Duration::from_nanos(ticks.checked_mul(1_000_000_000)? / hz.max(1));
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    let now_boot = Duration::new(u64::try_from(t.tv_sec).ok()?, u32::try_from(t.tv_nsec).ok()?);
    let ago = now_boot.saturating_sub(since_boot);
    jiff::Timestamp::now().checked_sub(jiff::SignedDuration::try_from(ago).ok()?).ok()
}

/// The first `max` bytes of a file (none if it cannot be read).
fn read_head(path: &std::path::Path, max: usize) -> Vec<u8> {
    use std::io::Read;
    let mut head = Vec::new();
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(max as u64).read_to_end(&mut head);
    }
    head
}

/// The argv prefix that joins a container's namespaces and root, with its environment, as its
/// user with its privileges (a command run in a container is run as its process is). The
/// container's namespaces belong to its pod's user namespace, which is entered first (as its
/// root: never the machine's) for the others to be joined at all.
fn prefix(inner_pid: u32, env: &[(String, String)], privileges: &launch::Privileges) -> Vec<String> {
    let mut argv: Vec<String> = vec!["nsenter".into(), "--target".into(), inner_pid.to_string(), "--user".into()];
    argv.extend(["--net", "--mount", "--uts", "--pid", "--root", "--wd", "--"].map(str::to_string));
    argv.extend(privileges.setpriv());
    argv.extend(["/usr/bin/env".to_string(), "-i".to_string()]);
    argv.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    argv
}

/// The name of an image without registry, path, tag or digest: `redis` of
/// `docker.io/library/redis:7.2@sha256:…`.
pub fn image_name(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
    last.split(':').next().unwrap_or(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_is_runnable_by_its_bare_name() {
        let p = Processes::new(vec!["redis".into()]);
        assert!(p.runnable("redis"));
        assert!(p.runnable("docker.io/library/redis:7.2@sha256:abc"));
        assert!(!p.runnable("registry.k8s.io/nginx-slim:0.8"));
        assert!(!p.runnable("redis-exporter:1"));
        assert!(matches!(p.exec_prefix("u", "c", "nginx"), Err(ExecRefusal::Simulated { .. })));
        assert_eq!(p.exec_prefix("u", "c", "redis"), Err(ExecRefusal::NotRunning("c".into())));
    }

    #[test]
    fn spanset_s_image_is_real_wherever_any_image_is() {
        let p = Processes::new(vec!["busybox".into()]);
        assert!(p.runnable("ghcr.io/spanset/spanset:0.1.0"), "without being listed");
        assert!(!Processes::new(vec![]).runnable("ghcr.io/spanset/spanset:0.1.0"), "nothing runs for real");
    }

    #[test]
    fn a_pod_runs_all_real_or_all_simulated_and_a_guard_only_where_processes_run() {
        let pod = serde_json::json!({"spec": {
            "initContainers": [
                {"name": "spanset-guard", "image": "ghcr.io/spanset/spanset:0.1.0"},
                {"name": "helper", "image": "nginx:1.25", "restartPolicy": "Always"}],
            "containers": [{"name": "db", "image": "postgres:16"}, {"name": "tool", "image": "busybox"}]}});
        let real = Processes::new(vec!["busybox".into()]);
        let refused = real.refusals(&pod, true);
        let names: Vec<&str> = refused.iter().map(|r| r.container.as_str()).collect();
        assert_eq!(names, ["helper", "db"], "the simulated ones, init containers and sidecars counted");
        assert!(refused[1].message.contains("add nginx,postgres to --run-images"), "{}", refused[1].message);
        assert!(refused[1].message.contains("image postgres:16 is simulated"), "{}", refused[1].message);
        assert!(refused[1].message.contains("spanset-guard, tool run real processes"), "{}", refused[1].message);
        let all = Processes::new(vec!["busybox".into(), "nginx".into(), "postgres".into()]);
        assert_eq!(all.refusals(&pod, true), [], "all real");

        let none = Processes::new(vec![]);
        let refused = none.refusals(&pod, true);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].container, "spanset-guard");
        assert_eq!(
            refused[0].message,
            "spanset's guard controls real processes; run the sandbox with --run-images naming the pod's images \
             (busybox,nginx,postgres)"
        );
        let plain = serde_json::json!({"spec": {"containers": [{"name": "web", "image": "nginx"}]}});
        assert_eq!(none.refusals(&plain, true), [], "all simulated");
        assert_eq!(real.refusals(&plain, true), [], "all simulated where some images are real");

        let as_user = serde_json::json!({"spec": {"securityContext": {"runAsUser": 1000},
            "containers": [{"name": "tool", "image": "busybox"}]}});
        assert_eq!(real.refusals(&as_user, true), [], "as root the sandbox runs any user");
        let refused = real.refusals(&as_user, false);
        assert_eq!(refused.len(), 1);
        assert!(refused[0].message.contains("run the sandbox as root"), "{}", refused[0].message);
    }

    #[test]
    fn a_termination_message_is_the_file_else_on_failure_the_logs_tail_if_asked() {
        let log: Vec<String> = (1..=100).map(|i| format!("line {i}")).collect();
        assert_eq!(termination_message(b"bye", 1, true, &log).as_deref(), Some("bye"), "the file wins");
        let big = vec![b'x'; 5000];
        assert_eq!(termination_message(&big, 0, false, &[]).map(|m| m.len()), Some(MAX_MESSAGE_BYTES));
        assert_eq!(termination_message(b"", 1, false, &log), None, "File: no fallback");
        assert_eq!(termination_message(b"", 0, true, &log), None, "no failure: no fallback");
        let tail = termination_message(b"", 2, true, &log).unwrap();
        assert!(tail.starts_with("line 21\n") && tail.ends_with("line 100\n"), "the last 80 lines: {tail}");
        let long: Vec<String> = (0..80).map(|i| format!("{i:03}{}", "é".repeat(20))).collect();
        let tail = termination_message(b"", 2, true, &long).unwrap();
        assert!(tail.len() <= FALLBACK_BYTES && tail.len() > FALLBACK_BYTES - 4, "{}", tail.len());
        assert!(tail.ends_with(&format!("079{}\n", "é".repeat(20))), "its end");
    }

    #[test]
    fn a_clusters_nameserver_is_in_its_own_pod_network() {
        assert_eq!(nameserver(Ipv4Addr::new(100, 65, 0, 0)), Ipv4Addr::new(100, 65, 0, 53));
    }
}
