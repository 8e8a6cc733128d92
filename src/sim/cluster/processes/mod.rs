//! The process runtime of a simulated cluster: containers whose image is listed as runnable
//! (`spanset sim --run-images redis,etcd`) run for real on this machine, each in private mount,
//! PID and UTS namespaces where its volume mounts are the directories of its PersistentVolumes;
//! every other container stays simulated. The kubelet starts and stops them; `kubectl logs`
//! shows what they print and `kubectl exec` runs commands beside them.

use std::collections::HashMap;

use parking_lot::Mutex;

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

/// The runnable images of a cluster and its running container processes.
#[derive(Default)]
pub struct Processes {
    /// Image names (the repository's last path element, without tag or digest) that run real
    /// processes.
    run_images: Vec<String>,
    /// (pod uid, container) → the host PID of the container's first process.
    running: Mutex<HashMap<(String, String), u32>>,
}

impl Processes {
    /// A runtime running the listed images for real.
    pub fn new(run_images: Vec<String>) -> Self {
        Self { run_images, running: Mutex::default() }
    }

    /// Whether an image runs real processes: its name (`redis` of `docker.io/library/redis:7`)
    /// is one of `--run-images`.
    pub fn runnable(&self, image: &str) -> bool {
        self.run_images.iter().any(|i| i == image_name(image))
    }

    /// The command line that runs a command inside a running container's namespaces and root
    /// (what `kubectl exec` runs): append the command's own argv to it.
    pub fn exec_prefix(&self, pod_uid: &str, container: &str, image: &str) -> Result<Vec<String>, ExecRefusal> {
        if !self.runnable(image) {
            return Err(ExecRefusal::Simulated { container: container.to_string(), image: image.to_string() });
        }
        let pid = self
            .running
            .lock()
            .get(&(pod_uid.to_string(), container.to_string()))
            .copied()
            .ok_or_else(|| ExecRefusal::NotRunning(container.to_string()))?;
        Ok(["nsenter", "--target", &pid.to_string(), "--mount", "--uts", "--pid", "--root", "--wd", "--"]
            .map(str::to_string)
            .to_vec())
    }
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
}
