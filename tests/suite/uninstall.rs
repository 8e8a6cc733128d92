//! Uninstalling never deletes workloads: a federation runs in three members, and its CRD is
//! deleted (`kubectl delete crd federatedstatefulsets.spanset.dev`). The sandbox deletes the
//! CRD as kube-apiserver does — it goes Terminating and the federation gets a deletionTimestamp,
//! held by spanset's finalizer — and spanset lets go: its finalizer removed, a Warning Event
//! and a log line naming the CRD, the CRD gone at the end. Polled over the whole run, not only
//! at the end: every member StatefulSet, Service, pod and claim stays (same uid, never marked
//! for deletion), and the sandbox's ledger shows no incarnation of the federation ended.

use crate::support;

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::{
    api::{
        apps::v1::StatefulSet,
        core::v1::{PersistentVolumeClaim, Pod, Service},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, WatchEvent, WatchParams},
};
use spanset::api::FederatedStatefulSet;
use support::{
    Kubectl, eventually,
    federation::{Controller, Federation},
};

const CRD: &str = "federatedstatefulsets.spanset.dev";

/// What a member holds of the federation: kind/name → uid, for every object not being deleted
/// (one being deleted shows as `kind/name (deleting)`).
async fn holdings(member: &Client) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let selector = ListParams::default().labels("spanset.dev/federation=redis");
    fn note<K: kube::Resource>(out: &mut BTreeMap<String, String>, kind: &str, items: Vec<K>) {
        for o in items {
            let deleting = if o.meta().deletion_timestamp.is_some() { " (deleting)" } else { "" };
            out.insert(
                format!("{kind}/{}{deleting}", o.meta().name.clone().unwrap_or_default()),
                o.meta().uid.clone().unwrap_or_default(),
            );
        }
    }
    let sts = Api::<StatefulSet>::namespaced(member.clone(), "default").list(&selector).await;
    let pods = Api::<Pod>::namespaced(member.clone(), "default").list(&selector).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(member.clone(), "default").list(&Default::default()).await;
    let svc = Api::<Service>::namespaced(member.clone(), "default").get_opt("redis").await;
    match (sts, pods, claims, svc) {
        (Ok(sts), Ok(pods), Ok(claims), Ok(svc)) => {
            note(&mut out, "StatefulSet", sts.items);
            note(&mut out, "Pod", pods.items);
            note(&mut out, "PersistentVolumeClaim", claims.items);
            note(&mut out, "Service", svc.into_iter().collect());
        }
        // An unanswered read judges nothing.
        _ => return BTreeMap::new(),
    }
    out
}

/// The federation's pod incarnations in the ledger that ended, as `cluster/pod`.
fn ended_incarnations(admin: &str) -> Vec<String> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["sim-ctl", "--admin", admin, "ledger"])
        .output()
        .expect("spanset sim-ctl runs");
    let ledger: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ledger JSON");
    ledger["incarnations"]
        .as_array()
        .expect("a list")
        .iter()
        .filter(|e| e["pod"].as_str().is_some_and(|p| p.starts_with("redis-")) && !e["runningUntil"].is_null())
        .map(|e| format!("{}/{}", e["cluster"].as_str().unwrap_or(""), e["pod"].as_str().unwrap_or("")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_federation_crd_lets_go_and_every_member_workload_stays() {
    let f = Federation::start(&["east", "west", "south"]).await;
    let Some(k) = Kubectl::new(33, &f.sandbox) else { return };
    let c = Controller::start(&f.sandbox, "controller");
    let mut fsts = f.placing("redis", &["east", "west", "south"]);
    // Were the member StatefulSets deleted, their claims would go with them.
    fsts.spec.template.persistent_volume_claim_retention_policy =
        Some(serde_json::from_value(serde_json::json!({"whenDeleted": "Delete", "whenScaled": "Retain"})).unwrap());
    f.create(&fsts).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("south", 4, 2)], "redis placed").await;
    let mut members = BTreeMap::new();
    for m in &f.members {
        members.insert(m.clone(), f.member(m).await);
    }
    let mut before = BTreeMap::new();
    for (m, client) in &members {
        let held = holdings(client).await;
        let count = |kind: &str| held.keys().filter(|k| k.starts_with(kind)).count();
        assert_eq!(
            (count("StatefulSet/"), count("Pod/"), count("PersistentVolumeClaim/"), count("Service/")),
            (1, 2, 2, 1),
            "{m}: {held:?}"
        );
        before.insert(m.clone(), held);
    }
    assert!(ended_incarnations(&f.sandbox.admin).is_empty());

    // Polled over the whole run: what each member holds, and the ledger.
    let stop = Arc::new(AtomicBool::new(false));
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let rounds = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let poller = {
        let (stop, violations, rounds, admin) =
            (stop.clone(), violations.clone(), rounds.clone(), f.sandbox.admin.clone());
        let (members, before) = (members.clone(), before.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                for (m, client) in &members {
                    let now = holdings(client).await;
                    if !now.is_empty() && now != before[m] {
                        violations.lock().unwrap().push(format!("{m}: held {:?}, now {now:?}", before[m]));
                    }
                }
                let admin = admin.clone();
                let ended = tokio::task::spawn_blocking(move || ended_incarnations(&admin)).await.unwrap();
                if !ended.is_empty() {
                    violations.lock().unwrap().push(format!("incarnations ended: {ended:?}"));
                }
                rounds.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    // What the host's watchers see of the federation: (event, being deleted, spanset's finalizer).
    let seen: Arc<Mutex<Vec<(String, bool, bool)>>> = Arc::default();
    let watching = {
        let seen = seen.clone();
        let stream = f.api().watch(&WatchParams::default(), "0").await.expect("a watch");
        tokio::spawn(async move {
            let mut stream = stream.boxed();
            while let Some(Ok(ev)) = stream.next().await {
                let (kind, o): (&str, FederatedStatefulSet) = match ev {
                    WatchEvent::Added(o) => ("ADDED", o),
                    WatchEvent::Modified(o) => ("MODIFIED", o),
                    WatchEvent::Deleted(o) => ("DELETED", o),
                    _ => continue,
                };
                let ours = o.finalizers().iter().any(|x| x == "spanset.dev/cleanup");
                seen.lock().unwrap().push((kind.into(), o.metadata.deletion_timestamp.is_some(), ours));
            }
        })
    };

    k.ok(&["delete", "crd", CRD, "--wait=false"]);
    let crds: Api<CustomResourceDefinition> = Api::all(f.host.clone());
    eventually("the CRD is gone", || async { crds.get_opt(CRD).await.is_ok_and(|c| c.is_none()) }).await;
    // Every chance to act wrongly afterwards: a quiet spell while the members are probed.
    c.wait_reconciles("redis", 3);
    stop.store(true, Ordering::Relaxed);
    poller.await.unwrap();
    watching.abort();

    let violations = violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "the members lost workloads:\n{}", violations.join("\n"));
    assert!(rounds.load(Ordering::Relaxed) >= 3, "the members were polled through the run");
    for (m, client) in &members {
        assert_eq!(holdings(client).await, before[m], "{m} holds what it held");
    }
    // The timeline on the host: marked for deletion while spanset's finalizer held it, then
    // released by spanset (never torn down: the members above), then gone.
    let seen = seen.lock().unwrap().clone();
    let marked = seen.iter().position(|(k, deleting, ours)| k == "MODIFIED" && *deleting && *ours);
    let gone = seen.iter().position(|(k, _, _)| k == "DELETED");
    assert!(matches!((marked, gone), (Some(a), Some(b)) if a < b), "{seen:?}");
    let log = c.log_text();
    assert!(
        log.lines().any(|l| l.contains("WARN") && l.contains(CRD) && l.contains("lets go") && l.contains("east")),
        "no warning naming the CRD ({seen:?}):\n{log}"
    );
    let events = f.events("redis").await;
    let said = events.iter().find(|(t, r, _)| t == "Warning" && r == "CRDDeleted").expect("a CRDDeleted Event");
    assert!(said.2.contains(CRD) && said.2.contains("stay in east, west, south"), "{said:?}");
    f.assert_ledger_clean();
}
