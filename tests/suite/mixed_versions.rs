//! Mixed controller versions during a rolling update: one binary run as two versions
//! (`SPANSET_TEST_WRITER_VERSION`). The newer leads and writes; once it is gone, the older
//! replica must not take over and undo its writes: it meets the newer version's stamps and
//! steps down for good, and nothing it could write changes, judged over the whole window.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicBool, Ordering},
};

use k8s_openapi::api::{apps::v1::StatefulSet, coordination::v1::Lease, core::v1::Event};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
};
use spanset::cli::sandbox::example;
use spanset_api::FederatedStatefulSet;
use spanset_controller::leadership::written_by::{VERSION_OVERRIDE_ENV, WRITTEN_BY};
use support::federation::{Controller, Federation};

use crate::support;

const HALVES: [(&str, i32, i32); 2] = [("east", 0, 3), ("west", 3, 3)];
/// Far above this crate's version, so the override is the newer one whatever the release.
const NEWER: &str = "999.0.0";

/// What the poll reads: each member's StatefulSets, the federations, the leader Lease.
#[derive(Clone)]
struct Watched {
    members: Vec<(String, Api<StatefulSet>)>,
    federations: Api<FederatedStatefulSet>,
    leases: Api<Lease>,
    /// Whether the federation's stamp is judged too (false where the test removed it).
    federation_stamped: bool,
}

impl Watched {
    async fn of(f: &Federation) -> Self {
        let mut members = Vec::new();
        for m in &f.members {
            members.push((m.clone(), Api::namespaced(f.member(m).await, "default")));
        }
        let leases = Api::namespaced(f.host.clone(), f.lease_namespace());
        Self { members, federations: f.api(), leases, federation_stamped: true }
    }
}

/// What a poll saw that the newer version's objects must never show: another writer's
/// version on a member StatefulSet or on the federation, or the older replica holding the Lease.
async fn violations(w: &Watched) -> Vec<String> {
    let mut seen = Vec::new();
    for (m, api) in &w.members {
        if let Ok(Some(sts)) = api.get_opt("redis").await {
            let by = sts.annotations().get(WRITTEN_BY).cloned();
            if by.as_deref() != Some(NEWER) {
                seen.push(format!("{m}: StatefulSet redis written by {by:?}"));
            }
        }
    }
    if let Ok(fsts) = w.federations.get("redis").await
        && w.federation_stamped
    {
        let by = fsts.annotations().get(WRITTEN_BY).cloned();
        if by.as_deref() != Some(NEWER) {
            seen.push(format!("the federation's owner token raised by {by:?}"));
        }
    }
    if let Ok(lease) = w.leases.get("spanset-leader").await {
        let holder = lease.spec.and_then(|s| s.holder_identity);
        if holder.as_deref() == Some("older") {
            seen.push("the older replica holds the Lease".into());
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_replica_steps_down_on_a_newer_version_s_objects_and_writes_nothing() {
    older_stands_aside(false).await;
}

/// The member StatefulSets alone must stop the older replica: the federation's stamp is
/// removed (as if written before stamps existed), so its coordinator sees nothing newer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_member_statefulsets_alone_make_an_older_replica_step_down() {
    older_stands_aside(true).await;
}

/// A newer version leads and writes; an older replica, on standby, meets its objects; the
/// newer one is killed; the older must never take the Lease or write (`unstamp`: the
/// federation's own stamp is removed first).
async fn older_stands_aside(unstamp: bool) {
    let f = Federation::start(&["east", "west"]).await;
    let mut newer = Controller::start_with(&f.sandbox, "newer", &[(VERSION_OVERRIDE_ENV, NEWER)]);
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &HALVES, "the newer version's slices").await;
    let mut watched = Watched::of(&f).await;
    support::eventually("every object the newer version wrote carries its version", || async {
        violations(&watched).await.is_empty()
    })
    .await;
    if unstamp {
        let body = serde_json::json!({"metadata": {"annotations": {WRITTEN_BY: null}}});
        f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("stamp removed");
        watched.federation_stamped = false;
    }

    // The rolling update's other replica: this binary's own, older version, on standby.
    let older = Controller::start(&f.sandbox, "older");
    // From here to the end, the objects are polled: one moment of an older write fails.
    let (stop, log) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::<String>::new())));
    let poller = {
        let (stop, log, watched) = (stop.clone(), log.clone(), watched.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let seen = violations(&watched).await;
                // Each kind of violation once, in the order first seen.
                {
                    let mut log = log.lock().expect("poll log");
                    for v in seen {
                        if !log.contains(&v) {
                            log.push(v);
                        }
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
    };
    // It has read the members (they answered its probes), the newer version's objects with them.
    support::wait_until("the older replica to hear from every member", support::DEADLINE, || {
        older.log_text().contains("metrics_addr")
            && f.members.iter().all(|m| {
                older.sample(&format!("spanset_member_last_contact_timestamp_seconds{{cluster=\"{m}\"}}")).is_some()
            })
    });
    let marks: Vec<usize> = f.members.iter().map(|m| f.audit(m).len()).collect();
    let account = f.sandbox.account();
    newer.kill();

    // The newer leader is gone and its Lease lapses after 3 s: a quiet spell of six seconds of
    // member probes gives the older replica every chance to take it and write.
    older.wait_quiet("default/redis");
    older.wait_quiet("default/redis");
    stop.store(true, Ordering::SeqCst);
    poller.await.expect("the poller ran");

    let seen = log.lock().expect("poll log").clone();
    assert!(seen.is_empty(), "the older replica undid the newer version's writes: {seen:?}");
    for (m, since) in f.members.iter().zip(marks) {
        let sent = f.spanset_write_requests(m, since);
        assert!(sent.is_empty(), "{m} received writes after the newer version stopped: {sent:?}");
    }
    let changed = f.sandbox.spanset_changes_since(&account, &f.members);
    assert!(changed.is_empty(), "spanset changed member objects after the newer version stopped: {changed:?}");
    let said = older.log_text();
    assert!(
        said.contains(&format!("newer than this process's {}", env!("CARGO_PKG_VERSION"))),
        "the older replica names both versions: {said}"
    );
    let gauge = format!("spanset_superseded_by_newer_version{{version=\"{NEWER}\"}}");
    assert_eq!(older.sample(&gauge), Some(1.0), "the metric says why it stepped down");
    assert_eq!(older.sample("spanset_leader"), Some(0.0), "it does not lead");
    let events: Api<Event> = Api::namespaced(f.host.clone(), "default");
    support::eventually("an Event on the federation names both versions", || async {
        events.list(&Default::default()).await.is_ok_and(|l| {
            l.items.iter().any(|e| {
                e.reason.as_deref() == Some("NewerControllerVersion")
                    && e.message.as_deref().is_some_and(|m| m.contains(NEWER) && m.contains(env!("CARGO_PKG_VERSION")))
            })
        })
    })
    .await;
    f.assert_ledger_clean();
}

/// The version on every member StatefulSet and on the federation (`None` where absent).
async fn versions(w: &Watched) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for (_, api) in &w.members {
        let sts = api.get_opt("redis").await.ok().flatten();
        out.push(sts.and_then(|s| s.annotations().get(WRITTEN_BY).cloned()));
    }
    let fsts = w.federations.get("redis").await.ok();
    out.push(fsts.and_then(|s| s.annotations().get(WRITTEN_BY).cloned()));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deliberate_rollback_with_accept_downgrade_leads_and_restamps() {
    let f = Federation::start(&["east", "west"]).await;
    let mut newer = Controller::start_with(&f.sandbox, "newer", &[(VERSION_OVERRIDE_ENV, NEWER)]);
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &HALVES, "the newer version's slices").await;
    let watched = Watched::of(&f).await;
    support::eventually("the newer version's stamps", || async {
        versions(&watched).await.iter().all(|v| v.as_deref() == Some(NEWER))
    })
    .await;
    newer.kill();
    let older = Controller::start_full(&f.sandbox, "rolled-back", &[], &["--accept-downgrade"]);
    support::eventually("the older version leads and stamps its own version everywhere", || async {
        versions(&watched).await.iter().all(|v| v.as_deref() == Some(env!("CARGO_PKG_VERSION")))
    })
    .await;
    assert!(older.log_text().contains("--accept-downgrade"), "it warns that it leads over newer stamps");
    assert_eq!(older.sample("spanset_leader"), Some(1.0));
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_replica_leaves_the_count_so_the_newer_one_leads_every_shard() {
    let f = Federation::start(&["east", "west"]).await;
    if f.sandbox.controller_kubeconfig.is_some() {
        use spanset::cli::join;
        join::apply_manifest(&f.host, join::SHARDS_RBAC, "deploy/rbac-shards.yaml").await.expect("shard permissions");
    }
    let shards = crate::shards::SHARDS.to_string();
    let _newer = Controller::start_full(&f.sandbox, "newer", &[(VERSION_OVERRIDE_ENV, NEWER)], &["--shards", &shards]);
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &HALVES, "the newer version's slices").await;
    let older = Controller::start_full(&f.sandbox, "older", &[], &["--shards", &shards]);
    support::wait_until("the older replica to stand aside", support::DEADLINE, || {
        older.log_text().contains("newer than this process's")
    });
    // Counted as a live replica, it would keep the newer one at half the shards, the other
    // half led by nobody.
    let all = std::collections::BTreeMap::from([("newer".to_string(), crate::shards::SHARDS as usize)]);
    let leases: Api<Lease> = Api::namespaced(f.host.clone(), f.lease_namespace());
    support::eventually("the older replica's presence gone and the newer one leading every shard", || async {
        let held = leases.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
        let present = held.iter().any(|l| l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some("older"));
        !present && crate::shards::shares(&f).await.as_ref() == Some(&all)
    })
    .await;
    f.assert_ledger_clean();
}
