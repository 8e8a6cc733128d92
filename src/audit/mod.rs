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
    timeline: Arc<Mutex<Timeline>>,
    power: mpsc::UnboundedSender<Input>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// What reaches the audit's judge, in the order it happened.
enum Input {
    Seen(Observation),
    Power { member: String, on: bool, at: jiff::Timestamp },
}

impl Audit {
    /// Starts watching the pods of federation `namespace/name` in each of `members` (a name and
    /// a client each). With `record`, every observation is also appended to that file, one JSON
    /// object a line, for [`replay`].
    pub fn start(members: Vec<(String, Client)>, namespace: &str, name: &str, record: Option<std::fs::File>) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Observation>();
        let (power, mut power_rx) = mpsc::unbounded_channel::<Input>();
        let selector = format!("{FEDERATION}={name}");
        let mut tasks: Vec<_> = members
            .into_iter()
            .map(|(member, client)| {
                let pods = Api::namespaced(client, namespace);
                tokio::spawn(watch::watch_member(member, pods, selector.clone(), tx.clone()))
            })
            .collect();
        drop(tx);
        let timeline = Arc::new(Mutex::new(Timeline::default()));
        let shared = timeline.clone();
        tasks.push(tokio::spawn(async move {
            let mut record = record.map(std::io::BufWriter::new);
            let mut machines = machines::Machines::default();
            let mut powered = true;
            loop {
                let input = tokio::select! {
                    biased;
                    p = power_rx.recv(), if powered => match p {
                        Some(p) => p,
                        None => {
                            powered = false;
                            continue;
                        }
                    },
                    o = rx.recv() => match o { Some(o) => Input::Seen(o), None => return },
                };
                let judged = match input {
                    Input::Seen(o) => vec![machines.seen(o)],
                    Input::Power { member, on: false, at } => machines.power_off(&member, at),
                    Input::Power { member, on: true, at } => machines.power_on(&member, at),
                };
                for o in judged {
                    if let Some(file) = record.as_mut() {
                        let line = serde_json::to_string(&o).expect("an observation serializes");
                        if writeln!(file, "{line}").and_then(|()| file.flush()).is_err() {
                            tracing::warn!("cannot write the audit's record; going on without it");
                            record = None;
                        }
                    }
                    shared.lock().unwrap_or_else(|e| e.into_inner()).observe(&o);
                }
            }
        }));
        Self { timeline, power, tasks }
    }

    /// `member`'s machines are off from now: what its API still says of its pods (the stale
    /// Running its kubelets last wrote) runs nothing until [`Self::machines_on`]. For whoever
    /// cut the power and knows it; see [`machines`].
    pub fn machines_off(&self, member: &str) {
        let _ = self.power.send(Input::Power { member: member.to_string(), on: false, at: jiff::Timestamp::now() });
    }

    /// `member`'s machines are on again from now: each of its pods that is still there and not
    /// being deleted runs again, as its returning kubelet restarts it.
    pub fn machines_on(&self, member: &str) {
        let _ = self.power.send(Input::Power { member: member.to_string(), on: true, at: jiff::Timestamp::now() });
    }

    /// What has been seen so far.
    pub fn timeline(&self) -> Timeline {
        self.timeline.lock().unwrap_or_else(|e| e.into_inner()).clone()
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
