//! How one container's process is started: `unshare` makes private mount, PID and UTS
//! namespaces inside its pod's user and network namespaces ([`PodNamespaces`]), a short shell
//! script builds
//! the container's root there — the machine's own directories seen through a writable layer of
//! the container's own (an overlay whose upper directory is in the container's directory, so
//! that nothing it writes lands on the machine), a fresh `/proc`, `/tmp`
//! and `/run`, a `/dev` of its own holding the usual devices and the container's termination
//! message file, the pod's `/etc/hosts` and `/etc/resolv.conf`, its image's own files (spanset's
//! image: `/spanset`, `/spanset-guard-exec`), each volume mount bound to its directory — and
//! `chroot` runs the command as the namespace's first process, through `setpriv` as the
//! container's user and group (`securityContext`) when it asks for other than root. Nothing of
//! that is visible outside, and when that first process ends the kernel ends every process of
//! the namespace.
//!
//! A container is never root on the machine. Real processes need a sandbox run as root (a pod's
//! network is joined to the machine by a veth pair, see [`super::network`]), which gives each
//! pod a user namespace of its own ([`PodNamespaces`]) that maps the container's users 0–65535
//! to [`ID_BASE`] and up, IDs no account of the machine has: root inside, an unprivileged
//! stranger outside, which may write only where the sandbox gave it ([`give_to_containers`]).
//!
//! Processes are started from one thread that lives as long as the sandbox, through `setpriv
//! --pdeathsig KILL`: if the sandbox is killed (even by SIGKILL) `unshare` gets SIGKILL, and its
//! `--kill-child` passes it on to the container, so nothing is left behind.

use std::{
    io,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{OnceLock, mpsc},
};

/// A volume of the container: a directory (or, for an image's own files, a file) of this
/// machine seen at `path` inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The directory or file on this machine.
    pub host: PathBuf,
    /// Where the container sees it (`volumeMounts[].mountPath`).
    pub path: String,
    /// `volumeMounts[].readOnly`.
    pub read_only: bool,
}

/// Everything needed to start one container's process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The pod's hostname (its `spec.hostname`, else its name).
    pub hostname: String,
    /// The command and its arguments, `$(VAR)` references already expanded.
    pub argv: Vec<String>,
    /// The container's environment, in order.
    pub env: Vec<(String, String)>,
    /// `workingDir`, or `/`.
    pub working_dir: String,
    /// Volume mounts.
    pub mounts: Vec<Mount>,
    /// Files put over the machine's own in the container's `/etc`: `hosts`, `resolv.conf`,
    /// `hostname`, with their contents.
    pub etc: Vec<(String, String)>,
    /// Where the container finds its termination message file (`terminationMessagePath`), a
    /// writable file of its own ([`TERMINATION_LOG`] in its directory) that the kubelet reads
    /// when the process ends.
    pub termination_path: String,
    /// How the command's process is stripped of privileges (`securityContext`).
    pub privileges: Privileges,
    /// `securityContext.readOnlyRootFilesystem`: everything of the root but its volumes, `/dev`,
    /// `/proc`, `/sys` and its `/etc` files is mounted read-only.
    pub read_only_root: bool,
}

/// What a container's `securityContext` takes from its process, applied by `setpriv` between
/// `chroot` and the command (and to every command `kubectl exec` and exec probes run in it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Privileges {
    /// The user and group it runs as (`runAsUser`, `runAsGroup`), supplementary groups
    /// cleared; `None`: root, the namespace's own.
    pub user: Option<(u32, u32)>,
    /// `allowPrivilegeEscalation: false`: no setuid program gives it more (`no_new_privs`).
    pub no_new_privs: bool,
    /// `capabilities.drop: [ALL]`: no capability, even as root.
    pub drop_all_capabilities: bool,
}

impl Privileges {
    /// The `setpriv` arguments, or none when it keeps everything.
    pub fn setpriv(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some((uid, gid)) = self.user {
            args.extend([format!("--reuid={uid}"), format!("--regid={gid}"), "--clear-groups".into()]);
        }
        if self.no_new_privs {
            args.push("--no-new-privs".into());
        }
        if self.drop_all_capabilities {
            args.extend(["--bounding-set=-all".into(), "--inh-caps=-all".into()]);
        }
        if !args.is_empty() {
            args.insert(0, "setpriv".into());
        }
        args
    }
}

/// The container's termination message file on this machine, in its directory.
pub const TERMINATION_LOG: &str = "termination-log";

/// The devices of a container's own `/dev`, bound from the machine's (as a runtime gives them).
const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// The search path a container gets when its environment names none (the OCI default).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Top-level directories the container does not share with the machine: made fresh.
const OWN: [&str; 5] = ["proc", "sys", "dev", "tmp", "run"];

/// Quotes a word for the shell.
pub fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The environment the process starts with: the container's, and `PATH` and `HOSTNAME` where
/// it names none.
pub fn environment(launch: &Launch) -> Vec<(String, String)> {
    let mut env = launch.env.clone();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.insert(0, ("PATH".into(), DEFAULT_PATH.into()));
    }
    if !env.iter().any(|(k, _)| k == "HOSTNAME") {
        env.push(("HOSTNAME".into(), launch.hostname.clone()));
    }
    env
}

/// The script that builds the container's root at `dir/root` and runs its command there
/// (`etc` files and the termination message file are made under `dir` first by [`prepare`]).
pub fn script(launch: &Launch, dir: &Path) -> String {
    let root = dir.join("root");
    let r = sh_quote(&root.to_string_lossy());
    let mut s = String::from("set -e\n");
    s += &format!("R={r}\nmount -t tmpfs -o mode=755 spanset-root \"$R\"\n");
    // The machine's top-level entries: links copied, directories seen through an overlay whose
    // writable upper layer is the container's own (`$D/layer`), files ignored; the container's
    // own ones made fresh below. What the container writes there, mount points for its volumes
    // included, stays in its directory: the machine's directories are never written. Where the
    // kernel refuses an overlay, the directory is bound read-only instead. `$B` lists them, for
    // a read-only root.
    let own = OWN.join("|");
    let d = sh_quote(&dir.to_string_lossy());
    s += &format!(
        "D={d}\nB=\nfor e in /*; do n=${{e#/}}; case \"$n\" in {own}) continue;; esac\n\
         if [ -L \"$e\" ]; then ln -s \"$(readlink \"$e\")\" \"$R/$n\"\n\
         elif [ -d \"$e\" ]; then mkdir \"$R/$n\" \"$D/layer/$n\" \"$D/layer/.work-$n\"\n\
         mount -t overlay -o \"lowerdir=$e,upperdir=$D/layer/$n,workdir=$D/layer/.work-$n,userxattr\" overlay \"$R/$n\" 2>/dev/null \
         || {{ mount --rbind \"$e\" \"$R/$n\" && mount -o remount,bind,ro \"$R/$n\"; }}\n\
         B=\"$B $n\"; fi; done\n"
    );
    s += "mkdir \"$R/proc\" \"$R/sys\" \"$R/dev\" \"$R/tmp\" \"$R/run\"\n";
    s += "mount -t proc proc \"$R/proc\"\nmount --rbind /sys \"$R/sys\"\nmount -o remount,bind,ro \"$R/sys\"\n";
    // A `/dev` of its own, as a runtime makes it: the machine's is not the container's to
    // write (its termination message file is made there).
    let devices = DEVICES.join(" ");
    s += &format!(
        "mount -t tmpfs -o mode=755,nosuid spanset-dev \"$R/dev\"\n\
         for n in {devices}; do touch \"$R/dev/$n\"; mount --bind \"/dev/$n\" \"$R/dev/$n\"; done\n\
         mkdir \"$R/dev/shm\" \"$R/dev/pts\"\nmount -t tmpfs -o mode=1777,nosuid,nodev shm \"$R/dev/shm\"\n\
         if [ -d /dev/pts ]; then mount --rbind /dev/pts \"$R/dev/pts\"; fi\n\
         ln -s /proc/self/fd \"$R/dev/fd\"; ln -s /proc/self/fd/0 \"$R/dev/stdin\"\n\
         ln -s /proc/self/fd/1 \"$R/dev/stdout\"; ln -s /proc/self/fd/2 \"$R/dev/stderr\"; ln -s pts/ptmx \"$R/dev/ptmx\"\n"
    );
    s += "mount -t tmpfs -o mode=1777 tmpfs \"$R/tmp\"\nmount -t tmpfs -o mode=755 tmpfs \"$R/run\"\n";
    for (name, _) in &launch.etc {
        let file = sh_quote(&dir.join("etc").join(name).to_string_lossy());
        let target = sh_quote(&format!("/etc/{name}"));
        s += &format!("[ -e \"$R\"{target} ] || touch \"$R\"{target}\nmount --bind {file} \"$R\"{target}\n");
    }
    let termination =
        Mount { host: dir.join(TERMINATION_LOG), path: launch.termination_path.clone(), read_only: false };
    let mounts = launch.mounts.iter().map(|m| (m, is_file(m))).chain([(&termination, true)]);
    for (m, file) in mounts {
        let host = sh_quote(&m.host.to_string_lossy());
        let path = sh_quote(&m.path);
        // The mount point is made and resolved inside the new root, so that a path through a
        // link (`/var/run` → `/run`) lands where the container will look, not on the machine.
        // A file (an image's own, the termination message) is bound over a file.
        let make = if file {
            "mkdir -p \"$(dirname \"$1\")\" && { [ -e \"$1\" ] || touch \"$1\"; }"
        } else {
            "mkdir -p \"$1\""
        };
        s += &format!(
            "d=$(chroot \"$R\" /bin/sh -c '{make} && readlink -f \"$1\"' - {path})\n\
             mount --bind {host} \"$R$d\"\n"
        );
        if m.read_only {
            s += "mount -o remount,bind,ro \"$R$d\"\n";
        }
    }
    s += &format!("hostname {}\n", sh_quote(&launch.hostname));
    if launch.read_only_root {
        // Last, once every mount point is made: the root's own tmpfs, the machine's directories
        // (their top mounts) and `/tmp` and `/run`; the volumes, `/dev`, `/proc`, `/sys` and the
        // `/etc` files are mounts of their own and keep theirs.
        // Each is made read-only as a mount (`bind`), not as a file system: a user namespace
        // may not remount a file system it made without the flags the kernel locked on it.
        s += "for n in $B; do mount -o remount,bind,ro \"$R/$n\"; done\n\
              mount -o remount,bind,ro \"$R/tmp\"\nmount -o remount,bind,ro \"$R/run\"\nmount -o remount,bind,ro \"$R\"\n";
    }
    let env: Vec<String> = environment(launch).iter().map(|(k, v)| sh_quote(&format!("{k}={v}"))).collect();
    let argv: Vec<String> = launch.argv.iter().map(|a| sh_quote(a)).collect();
    let setpriv: Vec<String> = launch.privileges.setpriv().iter().map(|a| sh_quote(a)).collect();
    let setpriv = if setpriv.is_empty() { String::new() } else { setpriv.join(" ") + " " };
    // `cd` inside the new root, then the command replaces the shell: it is the namespace's
    // first process, which signals reach and whose exit ends the container.
    s += &format!(
        "exec chroot \"$R\" {setpriv}/usr/bin/env -i {} /bin/sh -c 'cd \"$0\" || exit 1; exec \"$@\"' {} {}\n",
        env.join(" "),
        sh_quote(&launch.working_dir),
        argv.join(" ")
    );
    s
}

/// Whether a mount binds a file (an image's own, the termination message) rather than a
/// directory: what its source on this machine is.
fn is_file(m: &Mount) -> bool {
    std::fs::metadata(&m.host).is_ok_and(|meta| meta.is_file())
}

/// Makes the container's directory: its root mount point, its `/etc` files, the directory of
/// its writable layer (the container's root's to fill) and its empty termination message file,
/// writable by whatever user the container runs as (as the kubelet makes it, mode 0666).
pub fn prepare(launch: &Launch, dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir.join("root"))?;
    std::fs::create_dir_all(dir.join("etc"))?;
    std::fs::create_dir_all(dir.join("layer"))?;
    give_to_containers(&dir.join("layer"))?;
    for (name, content) in &launch.etc {
        std::fs::write(dir.join("etc").join(name), content)?;
    }
    let log = dir.join(TERMINATION_LOG);
    std::fs::write(&log, "")?;
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666))
}

/// The script of the first process of a pod's shared PID namespace, which only holds it: it
/// sleeps, reaps what is left to it, and ends on SIGTERM or SIGINT (`wait` returns on a trapped
/// signal; a foreground `sleep` would hold it off for an hour). Its `sleep` ends with the
/// namespace.
const SLEEPER: &str = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done";

/// What a process that only holds namespaces it is not the first process of runs: `sleep`,
/// itself, with no child that would outlive its SIGKILL and keep the namespaces (and a pod
/// network's routes) alive.
pub(super) const HOLD: [&str; 2] = ["sleep", "infinity"];

/// The first user ID (and group ID) of the machine a container's user 0 is when the sandbox runs
/// as root: above every range `useradd` hands out for subordinate IDs (at most 600,100,000 by
/// default), so that no account of the machine, nor another user's own containers, owns what a
/// container's users own.
pub const ID_BASE: u32 = 1_000_000_000;
/// How many user and group IDs a container has (0–65535: root, the usual daemons' users,
/// `nobody`, and the guard's 65532), as a Kubernetes pod in a user namespace has.
pub const ID_COUNT: u32 = 65536;

/// Whom the machine sees as a container's root: [`ID_BASE`] when the sandbox runs as root;
/// `None` when it does not (it runs no real processes then, and what it makes is its own).
pub fn containers_root() -> Option<u32> {
    running_as_root().then_some(ID_BASE)
}

/// Gives a directory the sandbox made to its containers' root (`chown` to [`containers_root`]):
/// what the kubelet does for a volume of a pod in a user namespace, so that the container's
/// root may write there and nowhere else of the machine. Nothing to do when the sandbox is not
/// root.
pub fn give_to_containers(path: &Path) -> io::Result<()> {
    match containers_root() {
        Some(id) => std::os::unix::fs::chown(path, Some(id), Some(id)),
        None => Ok(()),
    }
}

/// Makes a directory (and its missing parents) and gives each directory it made to the
/// containers ([`give_to_containers`]).
pub fn make_dir_for_containers(path: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(path);
    while let Some(p) = at.filter(|p| !p.exists()) {
        missing.push(p.to_path_buf());
        at = p.parent();
    }
    std::fs::create_dir_all(path)?;
    missing.iter().rev().try_for_each(|p| give_to_containers(p))
}

/// The user and network namespaces of one pod, held by a process that only sleeps (as the
/// pause container holds a pod's): every container of the pod, every command run in them and
/// the holder of a shared PID namespace join them. The user namespace's map gives the pod's
/// users 0–[`ID_COUNT`] the machine's IDs from [`ID_BASE`], written by the sandbox itself (root
/// in the machine's namespace may, and needs no `newuidmap`); the network namespace is the
/// pod's own, joined to the pod network by [`super::network::PodNetwork::attach`]. Killed when
/// dropped; the namespaces live on while any process is in them.
pub struct PodNamespaces {
    child: Child,
}

impl PodNamespaces {
    /// Starts the holder and maps its user namespace; an error if either fails.
    pub fn new() -> io::Result<Self> {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "KILL", "unshare", "--user", "--net", "--"]);
        cmd.args(HOLD);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let mut ns = Self { child: spawn(cmd)? };
        ns.map()?;
        Ok(ns)
    }

    /// The holder's process ID, which `nsenter --target PID --user --net` joins.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the holder is in a user namespace of its own, then writes its group and
    /// user maps.
    fn map(&mut self) -> io::Result<()> {
        let pid = self.child.id();
        wait_for_own_namespace(&mut self.child, "user")?;
        let line = format!("0 {ID_BASE} {ID_COUNT}\n");
        std::fs::write(format!("/proc/{pid}/gid_map"), &line)?;
        std::fs::write(format!("/proc/{pid}/uid_map"), &line)
    }
}

/// Waits (at most 5 s) until the process `holder` runs in a namespace of kind `kind` (`user`,
/// `net`) other than this process's: until `unshare` has made it.
pub(super) fn wait_for_own_namespace(holder: &mut Child, kind: &str) -> io::Result<()> {
    let pid = holder.id();
    let own = std::fs::read_link(format!("/proc/self/ns/{kind}"))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).is_ok_and(|ns| ns != own) {
        if holder.try_wait()?.is_some() || std::time::Instant::now() > deadline {
            return Err(io::Error::other(format!("the holder of a {kind} namespace did not start")));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Ok(())
}

impl Drop for PodNamespaces {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The start of every command of a container: join the pod's user namespace as its root and
/// its network namespace (`nsenter` sets the IDs inside it, which clears a parent-death signal,
/// so `setpriv` sets it again for what follows).
fn enter_pod(cmd: &mut Command, pod: u32) {
    cmd.args(["nsenter", "--target", &pod.to_string(), "--user", "--net", "--", "setpriv", "--pdeathsig", "KILL"]);
}

/// The `unshare` command that runs `script`: private mount, UTS and PID namespaces in the pod's
/// user and network namespaces (those of `pod`, the holder of its [`PodNamespaces`]), the child
/// killed with `unshare`.
pub fn command(script: &str, pod: u32) -> Command {
    // The parent-death signal is set by `setpriv` and kept across its exec of `unshare`.
    let mut cmd = Command::new("setpriv");
    cmd.args(["--pdeathsig", "KILL"]);
    enter_pod(&mut cmd, pod);
    cmd.args(["unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--propagation", "private"]);
    cmd.args(["--", "/bin/sh", "-c", script]);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// The command that holds a pod's shared PID namespace (`shareProcessNamespace`), as the pause
/// container does: `unshare` makes the namespace in the pod's namespaces (those of `pod`), and
/// a shell that only sleeps is its first process, reaping the orphans the containers leave and
/// ending on SIGTERM or SIGINT as pause does (the first process of a namespace gets only the
/// signals it handles), so that a container of the pod can end its sandbox. When the sandbox
/// dies `unshare` gets SIGKILL, `--kill-child` passes it to that first process, and the kernel
/// then ends every process of the namespace: every container of the pod.
pub fn holder_command(pod: u32) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--pdeathsig", "KILL"]);
    enter_pod(&mut cmd, pod);
    cmd.args(["unshare", "--pid", "--fork", "--kill-child"]);
    cmd.args(["--", "/bin/sh", "-c", SLEEPER]);
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    cmd
}

/// The command that runs `script` as a container of a pod sharing one PID namespace, held by
/// the first process `holder` of [`holder_command`]: `nsenter` joins that namespace and the
/// pod's network through its user namespace, as its root, and forks into it, and `unshare`
/// gives the container its own mount and UTS namespaces, then becomes its shell (no fork: the
/// container's first process is `nsenter`'s child, as [`command`]'s is `unshare`'s).
pub fn command_in_pod(script: &str, holder: u32) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--pdeathsig", "KILL", "nsenter", "--target", &holder.to_string(), "--user", "--net"]);
    cmd.args([
        "--pid",
        "--",
        "setpriv",
        "--pdeathsig",
        "KILL",
        "unshare",
        "--mount",
        "--uts",
        "--propagation",
        "private",
    ]);
    cmd.args(["--", "/bin/sh", "-c", script]);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Whether the sandbox runs as root, which real processes need.
pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

type Request = (Command, mpsc::Sender<io::Result<Child>>);

/// Starts a command from the sandbox's spawning thread (the parent-death signal [`command`] sets
/// fires when the thread that forked ends).
pub fn spawn(cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        // The parent-death signal fires when the thread that forked ends, so one thread that
        // never ends does every fork.
        std::thread::Builder::new()
            .name("sim-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("a thread can be started");
        tx
    });
    let (tx, rx) = mpsc::channel();
    spawner.send((cmd, tx)).map_err(|_| io::Error::other("the spawning thread is gone"))?;
    rx.recv().map_err(|_| io::Error::other("the spawning thread is gone"))?
}

/// What is refused to a sandbox that is not root: each pod's network namespace is joined to
/// this machine by a veth pair, an interface of the machine's that only root may make.
pub const REAL_PROCESSES_NEED_ROOT: &str = "real processes (--run-images) need the sandbox to run as root: \
     each pod gets a network namespace of its own, joined to this machine by a veth pair, which \
     needs CAP_NET_ADMIN in the machine's network namespace (the containers themselves are never \
     root on the machine: each pod's user namespace maps its users to unused IDs)";

/// What is missing for running real processes on this machine, if anything: root, `unshare`,
/// `nsenter`, `chroot` and `ip`, and the namespaces the kernel lets it make.
pub fn preflight() -> Result<(), String> {
    if !running_as_root() {
        return Err(REAL_PROCESSES_NEED_ROOT.to_string());
    }
    for (program, package) in [
        ("setpriv", "util-linux"),
        ("unshare", "util-linux"),
        ("nsenter", "util-linux"),
        ("chroot", "coreutils"),
        ("mount", "mount"),
        ("ip", "iproute2"),
    ] {
        let found = std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()));
        if !found {
            return Err(format!("--run-images needs `{program}` ({package}) on PATH"));
        }
    }
    let pod = PodNamespaces::new().map_err(|e| format!("cannot make a pod's user and network namespaces: {e}"))?;
    let mut probe = command("mount -t tmpfs none /mnt 2>/dev/null || mount -t tmpfs none /tmp", pod.pid());
    probe.stdout(Stdio::null()).stderr(Stdio::piped());
    let out = spawn(probe).and_then(Child::wait_with_output).map_err(|e| format!("cannot run unshare: {e}"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(format!(
            "--run-images needs user, network, private mount, PID and UTS namespaces, which the kernel refuses: {why}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_for_the_shell() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn the_script_mounts_each_volume_and_runs_the_quoted_command() {
        let launch = Launch {
            hostname: "redis-0".into(),
            argv: vec!["redis-server".into(), "--save".into(), "it's".into()],
            env: vec![("A".into(), "1 2".into())],
            working_dir: "/data".into(),
            mounts: vec![Mount { host: "/v/vol-1".into(), path: "/data".into(), read_only: true }],
            etc: vec![("hosts".into(), "127.0.0.1 localhost\n".into())],
            termination_path: "/dev/termination-log".into(),
            privileges: Privileges::default(),
            read_only_root: false,
        };
        let s = script(&launch, Path::new("/c"));
        assert!(s.contains("readlink -f \"$1\"' - '/data')\nmount --bind '/v/vol-1' \"$R$d\""), "{s}");
        assert!(s.contains("remount,bind,ro"), "{s}");
        assert!(s.contains("mount --bind '/c/etc/hosts' \"$R\"'/etc/hosts'"), "{s}");
        assert!(s.contains("'PATH=/usr/local/sbin"), "a default PATH: {s}");
        assert!(s.contains("'A=1 2'") && s.contains("'HOSTNAME=redis-0'"), "{s}");
        assert!(s.trim_end().ends_with(r"'/data' 'redis-server' '--save' 'it'\''s'"), "{s}");
        assert!(s.contains("exec chroot \"$R\" /usr/bin/env -i"), "root keeps its privileges: {s}");
        assert!(
            s.contains(
                "touch \"$1\"; } && readlink -f \"$1\"' - '/dev/termination-log')\nmount --bind '/c/termination-log'"
            ),
            "the termination message file is bound over a file of its own: {s}"
        );
        assert!(!s.contains("remount,bind,ro \"$R\"\n"), "a writable root: {s}");
        assert!(
            s.contains("D='/c'\n") && s.contains("mount -t overlay -o \"lowerdir=$e,upperdir=$D/layer/$n,"),
            "the machine's directories under a layer of the container's own: {s}"
        );
        assert!(!s.contains("mount --rbind \"$e\" \"$R/$n\" &&") || s.contains("remount,bind,ro \"$R/$n\"; }"), "{s}");
        assert!(s.contains("mount -o remount,bind,ro \"$R/sys\""), "/sys read-only: {s}");
    }

    #[test]
    fn a_security_context_strips_the_command_and_can_make_the_root_read_only() {
        let launch = Launch {
            hostname: "g".into(),
            argv: vec!["/spanset".into()],
            env: vec![],
            working_dir: "/".into(),
            mounts: vec![],
            etc: vec![],
            termination_path: "/dev/termination-log".into(),
            privileges: Privileges { user: Some((65532, 65533)), no_new_privs: true, drop_all_capabilities: true },
            read_only_root: true,
        };
        let s = script(&launch, Path::new("/c"));
        assert!(
            s.contains(
                "exec chroot \"$R\" 'setpriv' '--reuid=65532' '--regid=65533' '--clear-groups' '--no-new-privs' \
                 '--bounding-set=-all' '--inh-caps=-all' /usr/bin/env -i"
            ),
            "{s}"
        );
        let (mounts, ro) = s.split_once("for n in $B; do mount -o remount,bind,ro").expect("a read-only root");
        assert!(ro.contains("mount -o remount,bind,ro \"$R\"\n"), "{s}");
        assert!(mounts.contains("/dev/termination-log"), "every mount point is made before: {s}");
        assert!(Privileges::default().setpriv().is_empty(), "root as it is: no setpriv");
    }
}
