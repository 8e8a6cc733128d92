//! The garbage collector and namespace controller of a simulated cluster: deletes dependents
//! whose owners are gone (Background), strips owner references for Orphan deletions, releases
//! `foregroundDeletion` owners once their blocking dependents are gone, and empties
//! terminating namespaces before removing them
//! (<https://kubernetes.io/docs/concepts/architecture/garbage-collection/>).
//!
//! It works by sweeps over a snapshot of the cluster, woken after deletions and (a little
//! later) after other changes; asleep while nothing changes.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use serde_json::{Value, json};

use crate::{
    cluster::{
        Cluster,
        controller_loop::{self, SAFETY_TICK},
    },
    store::{
        account::Verb,
        actor::Component,
        object,
        registry::{DeleteOptions, Propagation, Subresource, WriteOptions},
        resources::ResourceType,
        storage::WatchStart,
    },
};

/// How long after a change other than a deletion the collector sweeps (a dependent created
/// with an owner already gone): changes come in bursts, and a full sweep per change would cost
/// as much as all the other components together.
const CHANGE_DELAY: Duration = Duration::from_secs(1);

/// Whose writes the collector's are, in the resource account.
const BY: Component = Component::GarbageCollector;

/// Runs the collector until the cluster is dropped: a sweep at once after a deletion (the
/// registry's and kubelet's [`Cluster::gc_wake`]), [`CHANGE_DELAY`] after any other change,
/// and otherwise asleep (see [`crate::cluster::controller_loop`]).
pub async fn run(cluster: std::sync::Weak<Cluster>) {
    let mut changes = None;
    loop {
        let Some(c) = cluster.upgrade() else { return };
        if changes.is_none() {
            changes = c.storage.watch(None, WatchStart::After(c.storage.current_rv())).ok().map(|s| s.live);
        }
        c.counters.gc_sweeps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        sweep(&c);
        // The ServiceAccount controller rides on the collector's wake-ups (any change, a new
        // namespace among them): it has nothing else to wait for.
        super::service_accounts::sweep(&c);
        let deleted = c.gc_wake.clone();
        drop(c);
        let Some(rx) = changes.as_mut() else {
            // No watch (the storage refused one): the old slow tick until it takes one again.
            let _ = tokio::time::timeout(CHANGE_DELAY, deleted.notified()).await;
            continue;
        };
        let sleep = tokio::time::sleep(SAFETY_TICK);
        tokio::pin!(sleep);
        let closed = loop {
            tokio::select! {
                _ = deleted.notified() => break false,
                ev = rx.recv() => match ev {
                    // Events own nothing and nothing is owned by one: their changes leave the
                    // collector asleep.
                    Some(ev) if !controller_loop::wakes(&ev.resource, controller_loop::UNREAD_BUT_EVENTS) => {}
                    Some(_) => {
                        let _ = tokio::time::timeout(CHANGE_DELAY, deleted.notified()).await;
                        while rx.try_recv().is_ok() {}
                        break false;
                    }
                    None => break true,
                },
                _ = &mut sleep => break false,
            }
        };
        if closed {
            changes = None;
        }
    }
}

struct Item {
    rt: Arc<ResourceType>,
    obj: Arc<Value>,
}

/// One pass of collection over the whole cluster; returns how many writes it made.
pub fn sweep(cluster: &Cluster) -> usize {
    let mut items = Vec::new();
    // A view shows objects stored under another resource, which is visited by itself.
    for rt in cluster.resources.all().into_iter().filter(|rt| rt.view.is_none()) {
        let (objs, _) = cluster.storage.list(&rt.storage_key(), None);
        items.extend(objs.into_iter().map(|obj| Item { rt: rt.clone(), obj }));
    }
    let by_uid: HashMap<&str, &Item> = items.iter().map(|i| (object::uid(&i.obj), i)).collect();
    let mut writes = 0;
    // Owners that still have dependents (any), and ones that still have blocking dependents.
    let mut referenced: HashSet<String> = HashSet::new();
    let mut blocking: HashSet<String> = HashSet::new();

    for item in &items {
        let refs = object::owner_refs(&item.obj);
        if refs.is_empty() {
            continue;
        }
        let ns = object::namespace(&item.obj);
        let mut live_owner = false;
        let mut orphaned_by: Vec<String> = Vec::new();
        let mut foreground_owner = false;
        for r in refs {
            let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
            referenced.insert(uid.to_string());
            if r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
                blocking.insert(uid.to_string());
            }
            // Owner references are namespace-local (or point at cluster-scoped owners).
            let owner = by_uid.get(uid).filter(|o| {
                let ons = object::namespace(&o.obj);
                ons.is_empty() || ons == ns
            });
            match owner {
                None => {}
                Some(o) => {
                    let fins = object::finalizers(&o.obj);
                    if object::is_deleting(&o.obj) && fins.iter().any(|f| f == "orphan") {
                        orphaned_by.push(uid.to_string());
                    } else if object::is_deleting(&o.obj) && fins.iter().any(|f| f == "foregroundDeletion") {
                        foreground_owner = true;
                        live_owner = true;
                    } else {
                        live_owner = true;
                    }
                }
            }
        }
        if !orphaned_by.is_empty() {
            writes += strip_owner_refs(cluster, item, &orphaned_by);
            continue;
        }
        if (!live_owner || foreground_owner) && !object::is_deleting(&item.obj) {
            let policy = if foreground_owner { Propagation::Foreground } else { Propagation::Background };
            let opts = DeleteOptions { propagation: Some(policy), ..DeleteOptions::by(BY) };
            if cluster.delete(&item.rt, ns, object::name(&item.obj), &opts).is_ok() {
                writes += 1;
            }
        }
    }

    for item in items.iter().filter(|i| object::is_deleting(&i.obj)) {
        let fins = object::finalizers(&item.obj);
        let uid = object::uid(&item.obj);
        let done = |f: &str| match f {
            "orphan" => !referenced.contains(uid),
            "foregroundDeletion" => !blocking.contains(uid),
            _ => false,
        };
        if fins.iter().any(|f| done(f)) {
            writes += remove_finalizers(cluster, item, &done);
        }
    }

    // Terminating namespaces: delete their contents, then the namespace itself.
    for ns in
        items.iter().filter(|i| i.rt.plural == "namespaces" && i.rt.group.is_empty() && object::is_deleting(&i.obj))
    {
        let name = object::name(&ns.obj);
        let contents: Vec<&Item> =
            items.iter().filter(|i| i.rt.namespaced && object::namespace(&i.obj) == name).collect();
        for item in &contents {
            if !object::is_deleting(&item.obj) {
                let _ = cluster.delete(&item.rt, name, object::name(&item.obj), &DeleteOptions::by(BY));
                writes += 1;
            }
        }
        if contents.is_empty() && object::finalizers(&ns.obj).is_empty() {
            let res = (ns.rt.group.clone(), ns.rt.plural.clone());
            if let Ok(last) = cluster.storage.remove(&ns.rt, &res, "", name, |_| Ok(())) {
                cluster.account.record(&ns.rt, &BY.into(), Verb::Removed, &last);
                writes += 1;
            }
        }
    }
    writes
}

/// Rewrites one list of an object's metadata (`ownerReferences`, `finalizers`), keeping the
/// entries `keep` accepts and dropping the key when none is left; returns the writes made.
fn retain_in_metadata(cluster: &Cluster, item: &Item, key: &str, keep: impl Fn(&Value) -> bool) -> usize {
    let ns = object::namespace(&item.obj);
    let res =
        cluster.update_with(&item.rt, ns, object::name(&item.obj), Subresource::Main, &WriteOptions::by(BY), |cur| {
            let mut next = cur.clone();
            let meta = object::metadata_mut(&mut next);
            let kept: Vec<Value> =
                meta.get(key).and_then(Value::as_array).into_iter().flatten().filter(|v| keep(v)).cloned().collect();
            if kept.is_empty() {
                meta.remove(key);
            } else {
                meta.insert(key.into(), json!(kept));
            }
            Ok(next)
        });
    usize::from(res.is_ok())
}

fn strip_owner_refs(cluster: &Cluster, item: &Item, uids: &[String]) -> usize {
    retain_in_metadata(cluster, item, "ownerReferences", |r| {
        !uids.iter().any(|u| r.get("uid").and_then(Value::as_str) == Some(u))
    })
}

fn remove_finalizers(cluster: &Cluster, item: &Item, done: &dyn Fn(&str) -> bool) -> usize {
    retain_in_metadata(cluster, item, "finalizers", |f| !f.as_str().is_some_and(done))
}
