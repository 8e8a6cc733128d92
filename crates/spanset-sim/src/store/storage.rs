//! Versioned object storage of one simulated cluster: an etcd-like map with one monotonic
//! resourceVersion counter shared by every kind, a bounded event history for watch replay,
//! and non-blocking fan-out to watchers.
//!
//! Owned by the cluster's [`crate::cluster::Cluster`]; every write from HTTP handlers and from
//! the simulated controllers goes through one mutex, so events reach each watcher in
//! resourceVersion order. A watcher whose buffer is full is dropped (its stream ends, as a real
//! server closes a watch that falls behind) instead of ever blocking a writer.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::{Arc, OnceLock},
};

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::store::{
    error::{ApiError, ApiResult},
    object::{self, ObjectKey},
    resources::{ResourceKey, ResourceType},
};

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The object was created.
    Added,
    /// The object changed (including getting a deletionTimestamp).
    Modified,
    /// The object was removed; the event carries its last state at a new resourceVersion.
    Deleted,
}

impl EventKind {
    /// The watch event type on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// One change, kept in the history and sent to watchers.
#[derive(Debug)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The resourceVersion the change was written at.
    pub rv: u64,
    /// Which resource the object belongs to.
    pub resource: ResourceKey,
    /// Namespace and name of the object.
    pub key: ObjectKey,
    /// The object after the change (for Deleted: its last state).
    pub object: Arc<Value>,
    /// The object before the change, if it existed (lets selector watchers see transitions and
    /// lets paginated lists rebuild the state at their snapshot).
    pub prev: Option<Arc<Value>>,
    /// The compact JSON line `{"type":..,"object":..}\n`, built once for every plain-JSON watcher.
    line: OnceLock<Bytes>,
}

impl Event {
    /// The wire line for plain JSON watchers, serialized once and shared.
    pub fn json_line(&self) -> Bytes {
        self.line
            .get_or_init(|| {
                let mut out = Vec::with_capacity(256);
                out.extend_from_slice(b"{\"type\":\"");
                out.extend_from_slice(self.kind.as_str().as_bytes());
                out.extend_from_slice(b"\",\"object\":");
                serde_json::to_writer(&mut out, &*self.object).expect("JSON values always serialize");
                out.extend_from_slice(b"}\n");
                Bytes::from(out)
            })
            .clone()
    }
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// From now, first replaying every current object as ADDED (resourceVersion unset or 0).
    Now,
    /// Only changes after this resourceVersion (exact start); 410 if it left the history.
    After(u64),
}

/// A registered watch: the initial events to send, then the live channel.
pub struct Subscription {
    /// Events to deliver before the live ones (synthetic ADDEDs, or replayed history).
    pub initial: Vec<Arc<Event>>,
    /// The resourceVersion the initial events bring the watcher up to.
    pub start_rv: u64,
    /// Live events after `start_rv`.
    pub live: mpsc::Receiver<Arc<Event>>,
}

struct Watcher {
    resource: Option<ResourceKey>,
    tx: mpsc::Sender<Arc<Event>>,
}

#[derive(Default)]
struct Inner {
    rv: u64,
    buckets: HashMap<ResourceKey, BTreeMap<ObjectKey, Arc<Value>>>,
    history: VecDeque<Arc<Event>>,
    /// Every event at or below this resourceVersion has left the history.
    compacted_rv: u64,
    watchers: Vec<Watcher>,
}

/// Sizes that bound memory and define when clients get 410 Gone.
#[derive(Debug, Clone, Copy)]
pub struct StorageLimits {
    /// Events kept for watch replay and paginated snapshots.
    pub history: usize,
    /// Events buffered per watcher before it is dropped as too slow.
    pub watcher_buffer: usize,
}

impl Default for StorageLimits {
    fn default() -> Self {
        Self { history: 20_000, watcher_buffer: 4_096 }
    }
}

/// The versioned store of one simulated cluster.
pub struct Storage {
    inner: Mutex<Inner>,
    limits: StorageLimits,
}

/// Result of a conditional update: the new object, or the unchanged one when nothing changed.
pub enum Updated {
    /// Written at a new resourceVersion.
    Changed(Arc<Value>),
    /// The update was a no-op; no new resourceVersion, no event (as a real apiserver).
    Unchanged(Arc<Value>),
    /// The update left the object with nothing to wait for (its last finalizer removed while
    /// deleting), so it was removed instead: one DELETED event carrying this last state.
    Removed(Arc<Value>),
}

impl Updated {
    /// The object as stored now.
    pub fn object(&self) -> &Arc<Value> {
        match self {
            Updated::Changed(o) | Updated::Unchanged(o) | Updated::Removed(o) => o,
        }
    }
}

impl Storage {
    /// An empty store.
    pub fn new(limits: StorageLimits) -> Self {
        Self { inner: Mutex::new(Inner::default()), limits }
    }

    /// The newest resourceVersion written.
    pub fn current_rv(&self) -> u64 {
        self.inner.lock().rv
    }

    /// The oldest resourceVersion a watch or continue token may still start from.
    pub fn compacted_rv(&self) -> u64 {
        self.inner.lock().compacted_rv
    }

    /// One object.
    pub fn get(&self, res: &ResourceKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        let inner = self.inner.lock();
        inner.buckets.get(res)?.get(&(ns.to_string(), name.to_string())).cloned()
    }

    /// All objects of a resource (in one namespace, if given), sorted by namespace and name,
    /// with the resourceVersion of the snapshot.
    pub fn list(&self, res: &ResourceKey, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let inner = self.inner.lock();
        let items = match inner.buckets.get(res) {
            None => vec![],
            Some(bucket) => match ns {
                None => bucket.values().cloned().collect(),
                Some(ns) => bucket
                    .range((ns.to_string(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(_, v)| v.clone())
                    .collect(),
            },
        };
        (items, inner.rv)
    }

    /// Objects of a resource as they were at `at_rv` (for paginated and exact lists).
    /// Fails with 410 when the history no longer reaches back that far.
    pub fn list_at(&self, res: &ResourceKey, ns: Option<&str>, at_rv: u64) -> ApiResult<Vec<Arc<Value>>> {
        let inner = self.inner.lock();
        if at_rv < inner.compacted_rv {
            return Err(ApiError::expired(format!("too old resource version: {at_rv} ({})", inner.compacted_rv)));
        }
        let mut state: BTreeMap<ObjectKey, Arc<Value>> = match inner.buckets.get(res) {
            None => BTreeMap::new(),
            Some(b) => b.clone(),
        };
        // Roll back: the first event after `at_rv` touching a key tells its state at `at_rv`.
        let mut seen = std::collections::HashSet::new();
        for ev in inner.history.iter().filter(|e| e.rv > at_rv && &e.resource == res) {
            if seen.insert(ev.key.clone()) {
                match &ev.prev {
                    Some(prev) => state.insert(ev.key.clone(), prev.clone()),
                    None => state.remove(&ev.key),
                };
            }
        }
        Ok(state.into_iter().filter(|((n, _), _)| ns.is_none_or(|ns| ns == n)).map(|(_, v)| v).collect())
    }

    /// Stores a new object; fails with AlreadyExists if the name is taken.
    pub fn create(&self, rt: &ResourceType, res: &ResourceKey, mut obj: Value) -> ApiResult<Arc<Value>> {
        let key = object::key_of(&obj);
        let mut inner = self.inner.lock();
        if inner.buckets.get(res).is_some_and(|b| b.contains_key(&key)) {
            return Err(ApiError::already_exists(rt, &key.1));
        }
        let rv = inner.next_rv();
        object::set_resource_version(&mut obj, rv);
        let obj = Arc::new(obj);
        inner.buckets.entry(res.clone()).or_default().insert(key.clone(), obj.clone());
        inner.publish(&self.limits, EventKind::Added, rv, res, key, obj.clone(), None);
        Ok(obj)
    }

    /// Read-modify-write under the store lock: `f` sees the current object and returns the new
    /// one (its resourceVersion is set here), or the same value for a no-op.
    pub fn update(
        &self,
        rt: &ResourceType,
        res: &ResourceKey,
        ns: &str,
        name: &str,
        f: impl FnOnce(&Arc<Value>) -> ApiResult<Value>,
    ) -> ApiResult<Updated> {
        self.update_or_remove(rt, res, ns, name, f, |_| false)
    }

    /// Like [`Storage::update`], but when `remove` accepts the new object it is removed instead,
    /// in the same step (the apiserver's `errEmptiedFinalizers` path: no MODIFIED event, and no
    /// window in which the object exists with nothing left to remove it).
    pub fn update_or_remove(
        &self,
        rt: &ResourceType,
        res: &ResourceKey,
        ns: &str,
        name: &str,
        f: impl FnOnce(&Arc<Value>) -> ApiResult<Value>,
        remove: impl FnOnce(&Value) -> bool,
    ) -> ApiResult<Updated> {
        let key = (ns.to_string(), name.to_string());
        let mut inner = self.inner.lock();
        let current =
            inner.buckets.get(res).and_then(|b| b.get(&key)).cloned().ok_or_else(|| ApiError::not_found(rt, name))?;
        let mut next = f(&current)?;
        // A no-op write keeps the resourceVersion and sends no event.
        object::set_resource_version(&mut next, object::resource_version(&current));
        if next == *current {
            return Ok(Updated::Unchanged(current));
        }
        let rv = inner.next_rv();
        object::set_resource_version(&mut next, rv);
        let next = Arc::new(next);
        if remove(&next) {
            inner.buckets.get_mut(res).map(|b| b.remove(&key));
            inner.publish(&self.limits, EventKind::Deleted, rv, res, key, next.clone(), Some(current));
            return Ok(Updated::Removed(next));
        }
        inner.buckets.entry(res.clone()).or_default().insert(key.clone(), next.clone());
        inner.publish(&self.limits, EventKind::Modified, rv, res, key, next.clone(), Some(current));
        Ok(Updated::Changed(next))
    }

    /// Removes an object after `check` accepted its current state; returns its last state at
    /// the deletion's resourceVersion.
    pub fn remove(
        &self,
        rt: &ResourceType,
        res: &ResourceKey,
        ns: &str,
        name: &str,
        check: impl FnOnce(&Value) -> ApiResult<()>,
    ) -> ApiResult<Arc<Value>> {
        let key = (ns.to_string(), name.to_string());
        let mut inner = self.inner.lock();
        let current =
            inner.buckets.get(res).and_then(|b| b.get(&key)).cloned().ok_or_else(|| ApiError::not_found(rt, name))?;
        check(&current)?;
        inner.buckets.get_mut(res).map(|b| b.remove(&key));
        let rv = inner.next_rv();
        let mut last = (*current).clone();
        object::set_resource_version(&mut last, rv);
        let last = Arc::new(last);
        inner.publish(&self.limits, EventKind::Deleted, rv, res, key, last.clone(), Some(current));
        Ok(last)
    }

    /// Drops every object of a resource (a CRD was deleted), sending DELETED for each.
    pub fn drop_resource(&self, res: &ResourceKey) {
        let mut inner = self.inner.lock();
        let Some(bucket) = inner.buckets.remove(res) else {
            return;
        };
        for (key, current) in bucket {
            let rv = inner.next_rv();
            let mut last = (*current).clone();
            object::set_resource_version(&mut last, rv);
            inner.publish(&self.limits, EventKind::Deleted, rv, res, key, Arc::new(last), Some(current));
        }
    }

    /// Registers a watch on one resource (or every resource, for internal controllers).
    pub fn watch(&self, res: Option<&ResourceKey>, start: WatchStart) -> ApiResult<Subscription> {
        let mut inner = self.inner.lock();
        let initial: Vec<Arc<Event>> = match start {
            WatchStart::Now => {
                let rv = inner.rv;
                let buckets: Vec<(&ResourceKey, &BTreeMap<ObjectKey, Arc<Value>>)> = match res {
                    Some(r) => inner.buckets.get_key_value(r).into_iter().collect(),
                    None => inner.buckets.iter().collect(),
                };
                buckets
                    .into_iter()
                    .flat_map(|(r, b)| {
                        b.iter().map(move |(k, o)| {
                            Arc::new(Event {
                                kind: EventKind::Added,
                                rv,
                                resource: r.clone(),
                                key: k.clone(),
                                object: o.clone(),
                                prev: None,
                                line: OnceLock::new(),
                            })
                        })
                    })
                    .collect()
            }
            WatchStart::After(from) => {
                if from < inner.compacted_rv {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {from} ({})",
                        inner.compacted_rv
                    )));
                }
                inner.history.iter().filter(|e| e.rv > from && res.is_none_or(|r| &e.resource == r)).cloned().collect()
            }
        };
        let (tx, live) = mpsc::channel(self.limits.watcher_buffer);
        inner.watchers.retain(|w| !w.tx.is_closed());
        inner.watchers.push(Watcher { resource: res.cloned(), tx });
        Ok(Subscription { initial, start_rv: inner.rv, live })
    }

    /// Forgets the whole event history, so every watch or continue token from before now gets
    /// 410 Gone (what etcd compaction does; used by fault injection and tests). The
    /// resourceVersion moves on by one, so a client that had seen everything is expired too,
    /// while a fresh list returns a version that can be watched from.
    pub fn compact(&self) {
        let mut inner = self.inner.lock();
        inner.history.clear();
        inner.rv += 1;
        inner.compacted_rv = inner.rv;
    }

    /// Ends every open watch stream (they end cleanly; clients re-watch).
    pub fn close_watches(&self) {
        self.inner.lock().watchers.clear();
    }

    /// Number of open watches (for tests and metrics), including the simulated controllers'.
    pub fn watcher_count(&self) -> usize {
        let mut inner = self.inner.lock();
        inner.watchers.retain(|w| !w.tx.is_closed());
        inner.watchers.len()
    }

    /// Number of open watches on one resource (clients' watches; controllers watch everything).
    pub fn watchers_of(&self, res: &ResourceKey) -> usize {
        let mut inner = self.inner.lock();
        inner.watchers.retain(|w| !w.tx.is_closed());
        inner.watchers.iter().filter(|w| w.resource.as_ref() == Some(res)).count()
    }
}

impl Inner {
    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    #[allow(clippy::too_many_arguments)]
    fn publish(
        &mut self,
        limits: &StorageLimits,
        kind: EventKind,
        rv: u64,
        res: &ResourceKey,
        key: ObjectKey,
        object: Arc<Value>,
        prev: Option<Arc<Value>>,
    ) {
        let ev = Arc::new(Event { kind, rv, resource: res.clone(), key, object, prev, line: OnceLock::new() });
        self.history.push_back(ev.clone());
        while self.history.len() > limits.history {
            if let Some(old) = self.history.pop_front() {
                self.compacted_rv = old.rv;
            }
        }
        // try_send never blocks: a full or closed watcher is dropped, ending its stream.
        self.watchers.retain(|w| {
            if w.resource.as_ref().is_some_and(|r| r != res) {
                return !w.tx.is_closed();
            }
            w.tx.try_send(ev.clone()).is_ok()
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::resources::builtins;

    fn cm_type() -> (ResourceType, ResourceKey) {
        let rt = builtins().into_iter().find(|t| t.plural == "configmaps").unwrap();
        let key = (rt.group.clone(), rt.plural.clone());
        (rt, key)
    }

    fn cm(name: &str, v: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns"}, "data": {"k": v}})
    }

    fn set_data(v: &'static str) -> impl FnOnce(&Arc<Value>) -> ApiResult<Value> {
        move |cur| {
            let mut next = (**cur).clone();
            next["data"]["k"] = json!(v);
            Ok(next)
        }
    }

    #[test]
    fn every_write_takes_the_next_resource_version_and_no_ops_take_none() {
        let (rt, key) = cm_type();
        let s = Storage::new(StorageLimits::default());
        let a = s.create(&rt, &key, cm("a", "1")).unwrap();
        assert_eq!(object::resource_version(&a), 1);
        let b = s.create(&rt, &key, cm("b", "1")).unwrap();
        assert_eq!(object::resource_version(&b), 2);
        assert!(matches!(s.update(&rt, &key, "ns", "a", set_data("1")).unwrap(), Updated::Unchanged(_)));
        assert_eq!(s.current_rv(), 2, "a no-op write keeps the resourceVersion");
        let a2 = s.update(&rt, &key, "ns", "a", set_data("2")).unwrap();
        assert_eq!(object::resource_version(a2.object()), 3);
        assert_eq!(s.create(&rt, &key, cm("a", "x")).unwrap_err().code, 409);
        let gone = s.remove(&rt, &key, "ns", "a", |_| Ok(())).unwrap();
        assert_eq!(object::resource_version(&gone), 4, "DELETED carries a new resourceVersion");
        assert_eq!(s.remove(&rt, &key, "ns", "a", |_| Ok(())).unwrap_err().code, 404);
    }

    #[test]
    fn an_update_that_empties_a_deleting_object_removes_it_with_one_deleted_event() {
        let (rt, key) = cm_type();
        let s = Storage::new(StorageLimits::default());
        s.create(&rt, &key, cm("a", "1")).unwrap();
        let mut sub = s.watch(Some(&key), WatchStart::After(s.current_rv())).unwrap();
        let removed = s.update_or_remove(&rt, &key, "ns", "a", set_data("2"), |o| o["data"]["k"] == "2").unwrap();
        assert!(matches!(removed, Updated::Removed(_)));
        assert_eq!(object::resource_version(removed.object()), 2);
        assert!(s.get(&key, "ns", "a").is_none(), "removed in the same write");
        let ev = sub.live.try_recv().expect("one event");
        assert_eq!((ev.kind, ev.rv), (EventKind::Deleted, 2));
        assert!(sub.live.try_recv().is_err(), "and no MODIFIED before or after it");
    }

    #[test]
    fn a_watch_from_before_the_history_gets_410_and_one_inside_replays_exactly() {
        let (rt, key) = cm_type();
        let s = Storage::new(StorageLimits { history: 3, watcher_buffer: 16 });
        for i in 0..5 {
            s.create(&rt, &key, cm(&format!("c{i}"), "1")).unwrap();
        }
        // rv 1..=5 written; the history keeps 3..=5, so a watch may start at 2 or later.
        assert_eq!(s.compacted_rv(), 2);
        let err = s.watch(Some(&key), WatchStart::After(1)).err().expect("410");
        assert_eq!((err.code, err.reason), (410, "Expired"));
        assert_eq!(err.message, "too old resource version: 1 (2)");
        let sub = s.watch(Some(&key), WatchStart::After(3)).unwrap();
        let rvs: Vec<u64> = sub.initial.iter().map(|e| e.rv).collect();
        assert_eq!(rvs, [4, 5]);
        s.compact();
        assert_eq!(
            s.watch(Some(&key), WatchStart::After(5)).err().map(|e| e.code),
            Some(410),
            "even an up-to-date client"
        );
        assert!(
            s.watch(Some(&key), WatchStart::After(s.current_rv())).is_ok(),
            "a fresh list's version can be watched"
        );
    }

    #[test]
    fn list_at_rebuilds_the_snapshot_of_an_earlier_resource_version() {
        let (rt, key) = cm_type();
        let s = Storage::new(StorageLimits::default());
        s.create(&rt, &key, cm("a", "1")).unwrap();
        s.create(&rt, &key, cm("b", "1")).unwrap();
        let snapshot = s.current_rv();
        s.update(&rt, &key, "ns", "a", set_data("2")).unwrap();
        s.remove(&rt, &key, "ns", "b", |_| Ok(())).unwrap();
        s.create(&rt, &key, cm("c", "1")).unwrap();
        let then = s.list_at(&key, Some("ns"), snapshot).unwrap();
        let names: Vec<(&str, &str)> =
            then.iter().map(|o| (object::name(o), o["data"]["k"].as_str().unwrap())).collect();
        assert_eq!(names, [("a", "1"), ("b", "1")]);
        let (now, _) = s.list(&key, Some("ns"));
        let names: Vec<&str> = now.iter().map(|o| object::name(o)).collect();
        assert_eq!(names, ["a", "c"]);
    }

    #[tokio::test]
    async fn a_watcher_that_never_reads_is_dropped_without_blocking_writers() {
        let (rt, key) = cm_type();
        let s = Storage::new(StorageLimits { history: 100, watcher_buffer: 4 });
        let stuck = s.watch(Some(&key), WatchStart::After(0)).unwrap();
        let mut reader = s.watch(Some(&key), WatchStart::After(0)).unwrap();
        for i in 0..10 {
            s.create(&rt, &key, cm(&format!("c{i}"), "1")).unwrap();
            // The reader keeps up; the stuck watcher does not.
            let ev = reader.live.recv().await.unwrap();
            assert_eq!(ev.rv, i + 1);
        }
        assert_eq!(s.watcher_count(), 1, "the stuck watcher was dropped");
        drop(stuck);
    }

    #[test]
    fn json_lines_are_compact_single_lines() {
        let (rt, key) = cm_type();
        let s = Storage::new(StorageLimits::default());
        let sub = s.watch(Some(&key), WatchStart::After(0)).unwrap();
        s.create(&rt, &key, json!({"metadata": {"name": "a", "namespace": "ns"}, "data": {"text": "two\nlines"}}))
            .unwrap();
        let mut live = sub.live;
        let ev = live.try_recv().unwrap();
        let line = ev.json_line();
        assert!(line.ends_with(b"\n"));
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        let parsed: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            (parsed["type"].as_str(), parsed["object"]["data"]["text"].as_str()),
            (Some("ADDED"), Some("two\nlines"))
        );
    }
}
