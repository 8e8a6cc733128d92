//! The controllers the chaos drill starts itself (`--controllers N`): `spanset run` replicas of
//! the running executable, contending for the leader Lease with short timings, each logging to
//! its own file. Only these are ever killed or paused; every one is stopped when the drill ends
//! (also when it fails), so no controller outlives it.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

/// How the drill's controllers run.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The `spanset` executable.
    pub exe: PathBuf,
    /// Their kubeconfig.
    pub kubeconfig: Option<PathBuf>,
    /// Their context of the host.
    pub context: Option<String>,
    /// Namespace of their Lease.
    pub lease_namespace: String,
    /// Their lease duration (renew deadline and retry period follow from it).
    pub lease: Duration,
    /// Where their logs go (`controller-I.log`, appended across restarts).
    pub log_dir: PathBuf,
}

struct Replica {
    child: Option<Child>,
    paused: bool,
}

/// The replicas the drill started.
pub struct Controllers {
    launch: Launch,
    replicas: Vec<Replica>,
}

impl Controllers {
    /// Starts `n` replicas.
    pub fn start(launch: Launch, n: usize) -> Result<Self, String> {
        std::fs::create_dir_all(&launch.log_dir)
            .map_err(|e| format!("cannot create the log directory {}: {e}", launch.log_dir.display()))?;
        let mut all = Self { launch, replicas: (0..n).map(|_| Replica { child: None, paused: false }).collect() };
        for i in 0..n {
            all.restart(i)?;
        }
        Ok(all)
    }

    /// The log file of replica `i`.
    pub fn log(&self, i: usize) -> PathBuf {
        self.launch.log_dir.join(format!("controller-{i}.log"))
    }

    /// Starts replica `i` (again) unless it runs.
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        if self.replicas[i].child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None))) {
            return Ok(());
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(i))
            .map_err(|e| format!("cannot open {}: {e}", self.log(i).display()))?;
        let l = &self.launch;
        let secs = |d: Duration| format!("{:.3}", d.as_secs_f64());
        let mut cmd = Command::new(&l.exe);
        cmd.args(["run", "--exit-with-parent", &std::process::id().to_string(), "--metrics-addr", "127.0.0.1:0"])
            .args(["--identity", &format!("chaos-controller-{i}")])
            .args(["--lease-namespace", &l.lease_namespace])
            .args(["--lease-duration", &secs(l.lease)])
            .args(["--renew-deadline", &secs(l.lease * 2 / 3)])
            .args(["--retry-period", &secs(l.lease / 6)]);
        if let Some(k) = &l.kubeconfig {
            cmd.arg("--kubeconfig").arg(k);
        }
        if let Some(c) = &l.context {
            cmd.args(["--context", c]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {} run: {e}", l.exe.display()))?;
        self.replicas[i] = Replica { child: Some(child), paused: false };
        Ok(())
    }

    /// SIGKILL of replica `i`, as a crash.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.replicas[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.replicas[i].paused = false;
    }

    /// SIGSTOP of replica `i`.
    pub fn pause(&mut self, i: usize) {
        if self.signal(i, "-STOP") {
            self.replicas[i].paused = true;
        }
    }

    /// SIGCONT of replica `i`.
    pub fn resume(&mut self, i: usize) {
        if self.replicas[i].paused {
            self.signal(i, "-CONT");
            self.replicas[i].paused = false;
        }
    }

    /// Every replica running and not paused again; answers how many had to be started.
    pub fn heal(&mut self) -> Result<usize, String> {
        let mut started = 0;
        for i in 0..self.replicas.len() {
            self.resume(i);
            let running = self.replicas[i].child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)));
            if !running {
                self.restart(i)?;
                started += 1;
            }
        }
        Ok(started)
    }

    fn signal(&self, i: usize, signal: &str) -> bool {
        let Some(c) = &self.replicas[i].child else { return false };
        Command::new("kill").args([signal, &c.id().to_string()]).status().is_ok_and(|s| s.success())
    }

    /// The log directory.
    pub fn log_dir(&self) -> &Path {
        &self.launch.log_dir
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        for i in 0..self.replicas.len() {
            self.resume(i);
            self.kill(i);
        }
    }
}
