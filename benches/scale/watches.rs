//! The benchmark's own view of what spanset wrote in the members: one watch per member on the
//! StatefulSets carrying spanset's federation label, shared by every sample of a cell. Each
//! entry remembers when its template revision and its slice last changed, so that a latency
//! ends when the write was seen, not when a waiter looked.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::{
    Api, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use spanset_api::labels::FEDERATION;

/// The pod-template annotation a spec change sets.
pub const REV: &str = "bench/rev";

/// One member StatefulSet as last seen.
#[derive(Debug, Clone)]
pub struct StsView {
    /// Its template's [`REV`] annotation.
    pub rev: Option<String>,
    /// When `rev` took its current value.
    pub rev_since: Instant,
    /// First ordinal and replicas (`spec.ordinals.start`, `spec.replicas`).
    pub slice: (i32, i32),
    /// When `slice` took its current value.
    pub slice_since: Instant,
}

impl StsView {
    fn of(sts: &StatefulSet, before: Option<&StsView>) -> Self {
        let spec = sts.spec.as_ref();
        let rev = spec
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(REV).cloned());
        let start = spec.and_then(|s| s.ordinals.as_ref()).and_then(|o| o.start).unwrap_or(0);
        let slice = (start, spec.and_then(|s| s.replicas).unwrap_or(1));
        let now = Instant::now();
        Self {
            rev_since: before.filter(|b| b.rev == rev).map_or(now, |b| b.rev_since),
            slice_since: before.filter(|b| b.slice == slice).map_or(now, |b| b.slice_since),
            rev,
            slice,
        }
    }

    /// The ordinals this StatefulSet holds.
    pub fn ordinals(&self) -> std::ops::Range<i32> {
        self.slice.0..self.slice.0 + self.slice.1.max(0)
    }
}

/// Member StatefulSets by (federation, member index).
pub type Seen = BTreeMap<(String, usize), StsView>;

/// The watches of one cell; aborted on drop.
pub struct MemberWatches {
    seen: Arc<Mutex<Seen>>,
    changed: tokio::sync::watch::Receiver<u64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl MemberWatches {
    /// Starts one watch per member (`clients[i]` is member `i`'s).
    pub fn start(clients: Vec<kube::Client>) -> Self {
        let seen = Arc::new(Mutex::new(Seen::new()));
        let (tx, changed) = tokio::sync::watch::channel(0u64);
        let tx = Arc::new(tx);
        let tasks = clients
            .into_iter()
            .enumerate()
            .map(|(i, c)| tokio::spawn(watch_member(i, c, seen.clone(), tx.clone())))
            .collect();
        Self { seen, changed, tasks }
    }

    /// Waits until `ready` answers `Some` on what the watches have seen (checked after every
    /// change, and every second); `None` after `deadline`.
    pub async fn wait_for<T>(&self, deadline: Duration, mut ready: impl FnMut(&Seen) -> Option<T>) -> Option<T> {
        let start = Instant::now();
        let mut changed = self.changed.clone();
        loop {
            if let Some(t) = ready(&self.seen.lock().expect("not poisoned")) {
                return Some(t);
            }
            let left = deadline.checked_sub(start.elapsed())?;
            let _ = tokio::time::timeout(left.min(Duration::from_secs(1)), changed.changed()).await;
        }
    }

    /// A copy of what the watches have seen.
    pub fn snapshot(&self) -> Seen {
        self.seen.lock().expect("not poisoned").clone()
    }
}

impl Drop for MemberWatches {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Follows one member's labelled StatefulSets into `seen` (a relist replaces the member's
/// entries, keeping the times of unchanged ones).
async fn watch_member(
    member: usize,
    client: kube::Client,
    seen: Arc<Mutex<Seen>>,
    tx: Arc<tokio::sync::watch::Sender<u64>>,
) {
    let api: Api<StatefulSet> = Api::namespaced(client, "default");
    let mut events = watcher(api, watcher::Config::default().labels(FEDERATION)).default_backoff().boxed();
    let mut relisted: BTreeSet<String> = BTreeSet::new();
    while let Some(ev) = events.next().await {
        let Ok(ev) = ev else { continue };
        let mut seen = seen.lock().expect("not poisoned");
        match ev {
            watcher::Event::Init => relisted.clear(),
            watcher::Event::InitApply(s) | watcher::Event::Apply(s) => {
                let key = (s.name_any(), member);
                relisted.insert(key.0.clone());
                let view = StsView::of(&s, seen.get(&key));
                seen.insert(key, view);
            }
            watcher::Event::Delete(s) => {
                seen.remove(&(s.name_any(), member));
            }
            watcher::Event::InitDone => seen.retain(|(f, m), _| *m != member || relisted.contains(f)),
        }
        drop(seen);
        tx.send_modify(|n| *n += 1);
    }
}
