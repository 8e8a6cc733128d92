use std::sync::Arc;

use serde_json::{Value, json};

use crate::{
    cluster::{Cluster, ClusterConfig},
    store::{
        actor::{Actor, Component},
        registry::{DeleteOptions, Subresource, WriteOptions},
        resources::ResourceType,
    },
};

fn cluster() -> Arc<Cluster> {
    Cluster::new(ClusterConfig::named("t"))
}

fn rt(c: &Cluster, group: &str, plural: &str) -> Arc<ResourceType> {
    c.resources.by_plural(group, plural).unwrap()
}

fn kubectl() -> Actor {
    Actor::Caller("user:kubectl".into())
}

fn writes(actor: &Actor) -> WriteOptions {
    WriteOptions { actor: actor.clone(), ..Default::default() }
}

fn deletes(actor: &Actor) -> DeleteOptions {
    DeleteOptions { actor: actor.clone(), ..Default::default() }
}

fn config_map(name: &str, finalizers: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "finalizers": finalizers},
           "data": {"k": "v"}})
}

#[test]
fn counts_creates_and_deletes_by_actor_and_resource() {
    let c = cluster();
    let cms = rt(&c, "", "configmaps");
    let before = c.account_report();
    for name in ["a", "b"] {
        c.create(&cms, Some("default"), config_map(name, &[]), &writes(&kubectl())).unwrap();
    }
    c.delete(&cms, "default", "a", &deletes(&kubectl())).unwrap();
    // Neither a dry run nor a refused write costs anything.
    let dry = WriteOptions { dry_run: true, ..writes(&kubectl()) };
    c.create(&cms, Some("default"), config_map("c", &[]), &dry).unwrap();
    c.create(&cms, Some("default"), config_map("b", &[]), &writes(&kubectl())).unwrap_err();
    c.delete(&cms, "default", "b", &DeleteOptions { dry_run: true, ..deletes(&kubectl()) }).unwrap();
    c.delete(&cms, "default", "nope", &deletes(&kubectl())).unwrap_err();

    let now = c.account_report().since(&before);
    let counts = now.of("user:kubectl", "configmaps");
    assert_eq!((counts.created, counts.deleted, counts.removed), (2, 1, 1), "{now:?}");
    assert_eq!(counts.updated + counts.status_updated + counts.unchanged, 0);
    assert_eq!(now.writes.len(), 1, "only kubectl wrote: {now:?}");
}

#[test]
fn a_delete_held_by_a_finalizer_is_one_delete_and_one_removal() {
    let c = cluster();
    let cms = rt(&c, "", "configmaps");
    c.create(&cms, Some("default"), config_map("held", &["example.com/hold"]), &writes(&kubectl())).unwrap();
    // Marked, then asked again while marked: two requests, nothing removed yet.
    c.delete(&cms, "default", "held", &deletes(&kubectl())).unwrap();
    c.delete(&cms, "default", "held", &deletes(&kubectl())).unwrap();
    let marked = c.account_report();
    assert_eq!(marked.of("user:kubectl", "configmaps").deleted, 2);
    assert_eq!(marked.by_resource("configmaps").removed, 0);
    // Whoever drops the last finalizer removes it: an update, and a removal, of theirs.
    let gc = Actor::from(Component::GarbageCollector);
    c.update_with(&cms, "default", "held", Subresource::Main, &writes(&gc), |cur| {
        let mut next = cur.clone();
        next["metadata"]["finalizers"] = json!([]);
        Ok(next)
    })
    .unwrap();
    let done = c.account_report();
    assert_eq!(done.of("garbage-collector", "configmaps").removed, 1, "{done:?}");
    assert_eq!(done.of("garbage-collector", "configmaps").updated, 1);
    assert_eq!(done.of("garbage-collector", "configmaps").deleted, 0);
    assert_eq!(done.of("user:kubectl", "configmaps").removed, 0);
}

#[test]
fn updates_are_told_from_status_updates_and_from_writes_that_change_nothing() {
    let c = cluster();
    let pvcs = rt(&c, "", "persistentvolumeclaims");
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": "data", "namespace": "default"},
                       "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    let sts = Actor::from(Component::StatefulSetController);
    c.create(&pvcs, Some("default"), claim, &writes(&sts)).unwrap();
    let set = |sub, f: fn(&mut Value)| {
        c.update_with(&pvcs, "default", "data", sub, &writes(&sts), |cur| {
            let mut next = cur.clone();
            f(&mut next);
            Ok(next)
        })
        .unwrap();
    };
    set(Subresource::Main, |v| v["metadata"]["labels"] = json!({"a": "b"}));
    set(Subresource::Status, |v| v["status"]["phase"] = json!("Bound"));
    set(Subresource::Status, |v| v["status"]["phase"] = json!("Bound"));
    let counts = c.account_report().of("statefulset-controller", "persistentvolumeclaims");
    assert_eq!((counts.created, counts.updated, counts.status_updated, counts.unchanged), (1, 1, 1, 1));
    assert_eq!(counts.writes(), 3);
}

#[test]
fn events_are_counted_by_reason_and_their_repeats_apart() {
    let c = cluster();
    let events = rt(&c, "", "events");
    let event = |name: &str, reason: &str| {
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
               "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
               "reason": reason, "message": "m", "type": "Normal", "count": 1})
    };
    let spanset = Actor::Caller("spanset".into());
    c.create(&events, Some("default"), event("e1", "StaleClaimRetired"), &writes(&spanset)).unwrap();
    c.create(&events, Some("default"), event("e2", "StaleClaimRetired"), &writes(&spanset)).unwrap();
    c.create(&events, Some("default"), event("e3", "Moved"), &writes(&spanset)).unwrap();
    c.update_with(&events, "default", "e1", Subresource::Main, &writes(&spanset), |cur| {
        let mut next = cur.clone();
        next["count"] = json!(2);
        Ok(next)
    })
    .unwrap();
    let report = c.account_report();
    assert_eq!(report.events_of("StaleClaimRetired"), 2);
    assert_eq!(report.events["StaleClaimRetired"].updated, 1);
    assert_eq!(report.events_of("Moved"), 1);
    assert_eq!(report.events_created(), 3);
    assert_eq!(report.events_of("Other"), 0);
    assert_eq!(report.of("spanset", "events").created, 3);
}

#[test]
fn volumes_are_counted_as_provisioned_released_and_left_by_phase() {
    let c = cluster();
    let pvs = rt(&c, "", "persistentvolumes");
    let pv = |name: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/x"}}})
    };
    let by = writes(&Component::PersistentVolumeController.into());
    for name in ["a", "b", "c"] {
        c.create(&pvs, None, pv(name), &by).unwrap();
    }
    for (name, phase) in [("a", "Released"), ("b", "Bound")] {
        c.update_with(&pvs, "", name, Subresource::Status, &by, |cur| {
            let mut next = cur.clone();
            next["status"]["phase"] = json!(phase);
            Ok(next)
        })
        .unwrap();
    }
    c.account.provisioned();
    c.account.released();
    let report = c.account_report();
    assert_eq!((report.provisioned(), report.released()), (1, 1));
    assert_eq!((report.left("Released"), report.left("Bound")), (1, 1));
    // A volume with no phase yet is Pending, as kubectl shows it.
    assert_eq!(report.left("Pending"), 1, "{:?}", report.volumes);
}
