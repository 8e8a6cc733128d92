//! Container logs of one simulated cluster: the lines each simulated container writes (start,
//! readiness, shutdown), kept per pod and container for the current and the previous instance,
//! as a node's container runtime keeps them, so that `kubectl logs` (with `--previous` and
//! `-f`) has something true to show. Written by the kubelets, read by the API server's `log`
//! subresource.

use std::{collections::HashMap, sync::Arc};

use parking_lot::Mutex;
use tokio::sync::watch;

/// One log line and when it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// When the container wrote it.
    pub at: jiff::Timestamp,
    /// The text, without its newline.
    pub text: String,
}

/// What one container instance wrote so far, and whether it has exited.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// Every line, oldest first.
    pub lines: Vec<Line>,
    /// True once the container exited (a follower stops there).
    pub exited: bool,
}

/// The log of one container instance; followers subscribe to it.
#[derive(Debug)]
pub struct ContainerLog {
    written: watch::Sender<Written>,
}

impl ContainerLog {
    fn new() -> Arc<Self> {
        Arc::new(Self { written: watch::Sender::new(Written::default()) })
    }

    /// Appends a line.
    pub fn write(&self, text: impl Into<String>) {
        let line = Line { at: jiff::Timestamp::now(), text: text.into() };
        self.written.send_modify(|w| w.lines.push(line));
    }

    /// Marks the container exited, waking followers.
    pub fn exit(&self) {
        self.written.send_modify(|w| w.exited = true);
    }

    /// A receiver that sees every later line.
    pub fn subscribe(&self) -> watch::Receiver<Written> {
        self.written.subscribe()
    }

    /// What was written so far.
    pub fn snapshot(&self) -> Written {
        self.written.borrow().clone()
    }
}

#[derive(Default)]
struct Instances {
    current: Option<Arc<ContainerLog>>,
    previous: Option<Arc<ContainerLog>>,
}

/// Every container log of a cluster, by pod uid and container name.
#[derive(Default)]
pub struct LogStore {
    containers: Mutex<HashMap<(String, String), Instances>>,
}

impl LogStore {
    /// Starts a new instance of a container: its current log, ended, becomes the previous one.
    pub fn start(&self, pod_uid: &str, container: &str) -> Arc<ContainerLog> {
        let log = ContainerLog::new();
        let mut all = self.containers.lock();
        let entry = all.entry((pod_uid.to_string(), container.to_string())).or_default();
        entry.previous = entry.current.replace(log.clone());
        if let Some(old) = &entry.previous {
            old.exit();
        }
        log
    }

    /// The current (or previous) instance's log of a container, if it ever started.
    pub fn get(&self, pod_uid: &str, container: &str, previous: bool) -> Option<Arc<ContainerLog>> {
        let all = self.containers.lock();
        let entry = all.get(&(pod_uid.to_string(), container.to_string()))?;
        if previous { entry.previous.clone() } else { entry.current.clone() }
    }

    /// Every current log of a pod, for the kubelet to write to.
    pub fn of_pod(&self, pod_uid: &str) -> Vec<Arc<ContainerLog>> {
        self.containers
            .lock()
            .iter()
            .filter(|((uid, _), _)| uid == pod_uid)
            .filter_map(|(_, i)| i.current.clone())
            .collect()
    }

    /// Forgets a deleted pod's logs (followers keep what they hold).
    pub fn forget_pod(&self, pod_uid: &str) {
        self.containers.lock().retain(|(uid, _), _| uid != pod_uid);
    }

    /// Forgets the logs of every pod not in `live` (pods removed without the kubelet, e.g.
    /// force-deleted on a dead node).
    pub fn retain_pods(&self, live: &std::collections::HashSet<&str>) {
        self.containers.lock().retain(|(uid, _), _| live.contains(uid.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_keeps_the_previous_instance_and_followers_see_new_lines() {
        let store = LogStore::default();
        let first = store.start("u1", "c");
        first.write("one");
        let mut follower = first.subscribe();
        first.write("two");
        first.exit();
        assert!(follower.has_changed().unwrap());
        assert_eq!(follower.borrow_and_update().lines.len(), 2);
        let second = store.start("u1", "c");
        second.write("three");
        let previous = store.get("u1", "c", true).unwrap().snapshot();
        assert_eq!(previous.lines.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(), ["one", "two"]);
        assert!(previous.exited);
        assert_eq!(store.get("u1", "c", false).unwrap().snapshot().lines[0].text, "three");
        store.forget_pod("u1");
        assert!(store.get("u1", "c", false).is_none());
    }
}
