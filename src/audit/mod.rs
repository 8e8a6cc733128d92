//! The at-most-one audit: proof, from the members themselves, that no pod identity of a
//! federation ran in two clusters at once. It reads nothing spanset writes about itself (no
//! status, no ledger): only the pods each member reports, so that it judges spanset on a real
//! cluster as the sandbox's ledger does on a simulated one, and an operator can run it beside
//! a migration or a drill (`spanset audit`).
//!
//! | module | one reason to change |
//! |---|---|
//! | [`timeline`] | what counts as running, and when two incarnations overlap |
//! | [`watch`] | how pods are seen in a member and turned into observations |
//! | [`machines`] | what a member's machines being off means for what its stale status says |
//!
//! Its clock is its own: each change is stamped as it arrives. A change that reaches it late
//! (a slow watch) moves that stamp, so an overlap shorter than the auditor's watch latency can
//! be missed or seen where there was none; run it close to the members.

pub mod machines;
pub mod timeline;
pub mod watch;

use std::{
    io::Write,
    path::Path,
    sync::{Arc, Mutex},
};

use kube::{Api, Client};
use tokio::sync::mpsc;

use spanset_api::labels::FEDERATION;
use timeline::{Observation, Timeline};

/// A running audit of one federation's pods in its members; dropping it stops it.
pub struct Audit {
    judge: Arc<Mutex<Judge>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Where every observation goes, the watches' and those the power makes, in one order: through
/// what the machines mean for it, into the recording and the timeline.
struct Judge {
    machines: machines::Machines,
    record: Option<std::io::BufWriter<std::fs::File>>,
    timeline: Timeline,
}

impl Judge {
    fn take(&mut self, observations: Vec<Observation>) {
        for o in observations {
            if let Some(file) = self.record.as_mut() {
                let line = serde_json::to_string(&o).expect("an observation serializes");
                if writeln!(file, "{line}").and_then(|()| file.flush()).is_err() {
                    tracing::warn!("cannot write the audit's record; going on without it");
                    self.record = None;
                }
            }
            self.timeline.observe(&o);
        }
    }
}

impl Audit {
    /// Starts watching the pods of federation `namespace/name` in each of `members` (a name and
    /// a client each). With `record`, every observation is also appended to that file, one JSON
    /// object a line, for [`replay`].
    pub fn start(members: Vec<(String, Client)>, namespace: &str, name: &str, record: Option<std::fs::File>) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Observation>();
        let selector = format!("{FEDERATION}={name}");
        let mut tasks: Vec<_> = members
            .into_iter()
            .map(|(member, client)| {
                let pods = Api::namespaced(client, namespace);
                tokio::spawn(watch::watch_member(member, pods, selector.clone(), tx.clone()))
            })
            .collect();
        drop(tx);
        let judge = Arc::new(Mutex::new(Judge {
            machines: machines::Machines::default(),
            record: record.map(std::io::BufWriter::new),
            timeline: Timeline::default(),
        }));
        let shared = judge.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(o) = rx.recv().await {
                let mut judge = shared.lock().unwrap_or_else(|e| e.into_inner());
                let o = judge.machines.seen(o);
                judge.take(vec![o]);
            }
        }));
        Self { judge, tasks }
    }

    /// `member`'s machines are off from now: what its API still says of its pods (the stale
    /// Running its kubelets last wrote) runs nothing until [`Self::machines_on`]. For whoever
    /// cut the power and knows it; see [`machines`].
    pub fn machines_off(&self, member: &str) {
        let mut judge = self.judge();
        let stopped = judge.machines.power_off(member, jiff::Timestamp::now());
        judge.take(stopped);
    }

    /// `member`'s machines are on again from now: each of its pods that is still there and not
    /// being deleted runs again, as its returning kubelet restarts it.
    pub fn machines_on(&self, member: &str) {
        let mut judge = self.judge();
        let restarted = judge.machines.power_on(member, jiff::Timestamp::now());
        judge.take(restarted);
    }

    /// What has been seen so far.
    pub fn timeline(&self) -> Timeline {
        self.judge().timeline.clone()
    }

    fn judge(&self) -> std::sync::MutexGuard<'_, Judge> {
        self.judge.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The timeline of a recording [`Audit::start`] wrote; the error names the line that is not
/// an observation.
pub fn replay(path: &Path) -> Result<Timeline, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut timeline = Timeline::default();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let o: Observation =
            serde_json::from_str(line).map_err(|e| format!("{}:{}: not an observation: {e}", path.display(), n + 1))?;
        timeline.observe(&o);
    }
    Ok(timeline)
}
