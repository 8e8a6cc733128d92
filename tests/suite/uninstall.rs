//! Uninstalling never deletes workloads: a federation runs in three members, and its CRD is
//! deleted (`kubectl delete crd federatedstatefulsets.spanset.dev`). The sandbox deletes the
//! CRD as kube-apiserver does — it goes Terminating and the federation gets a deletionTimestamp,
//! held by spanset's finalizer — and spanset lets go: its finalizer removed, a Warning Event
//! and a log line naming the CRD, the CRD gone at the end. Polled over the whole run, not only
//! at the end: every member StatefulSet, Service, pod and claim stays (same uid, never marked
//! for deletion), and the sandbox's ledger shows no incarnation of the federation ended. The
//! same when both CRDs go at once (the MemberClusters wait for the federation to be let go).

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
use spanset_api::FederatedStatefulSet;
use support::{
    Kubectl, eventually,
    federation::{Controller, Federation},
};

use crate::support;

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

/// Watches `api` from now on (and its current objects, as ADDED), keeping `summary` of each
/// event: what the host's watchers saw, for judging a timeline afterwards.
fn record<K, T>(
    api: Api<K>,
    wp: WatchParams,
    summary: impl Fn(&str, &K) -> T + Send + 'static,
) -> (Arc<Mutex<Vec<T>>>, tokio::task::JoinHandle<()>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    T: Send + 'static,
{
    let seen: Arc<Mutex<Vec<T>>> = Arc::default();
    let sink = seen.clone();
    let handle = tokio::spawn(async move {
        let mut stream = api.watch(&wp, "0").await.expect("a watch").boxed();
        while let Some(Ok(ev)) = stream.next().await {
            let (kind, o) = match ev {
                WatchEvent::Added(o) => ("ADDED", o),
                WatchEvent::Modified(o) => ("MODIFIED", o),
                WatchEvent::Deleted(o) => ("DELETED", o),
                _ => continue,
            };
            sink.lock().unwrap().push(summary(kind, &o));
        }
    });
    (seen, handle)
}

/// A federation placed over three members with what each holds; the members' holdings and
/// the ledger polled until [`Placed::judge`].
struct Placed {
    members: BTreeMap<String, Client>,
    before: BTreeMap<String, BTreeMap<String, String>>,
    stop: Arc<AtomicBool>,
    violations: Arc<Mutex<Vec<String>>>,
    rounds: Arc<std::sync::atomic::AtomicU64>,
    poller: Option<tokio::task::JoinHandle<()>>,
}

impl Placed {
    /// Places `redis` (two pods with a claim each in every member; were a member StatefulSet
    /// deleted, its claims would go with it) and starts polling.
    async fn start(f: &Federation) -> Self {
        let mut fsts = f.placing("redis", &["east", "west", "south"]);
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
        let mut placed = Placed {
            members,
            before,
            stop: Arc::default(),
            violations: Arc::default(),
            rounds: Arc::default(),
            poller: None,
        };
        let (stop, violations, rounds, admin) =
            (placed.stop.clone(), placed.violations.clone(), placed.rounds.clone(), f.sandbox.admin.clone());
        let (members, before) = (placed.members.clone(), placed.before.clone());
        placed.poller = Some(tokio::spawn(async move {
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
        }));
        placed
    }

    /// Stops polling and judges the whole run: no member lost or marked anything, no
    /// incarnation ended; and each member holds at the end what it held at the start.
    async fn judge(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.poller.take().expect("polling").await.unwrap();
        let violations = self.violations.lock().unwrap().clone();
        assert!(violations.is_empty(), "the members lost workloads:\n{}", violations.join("\n"));
        assert!(self.rounds.load(Ordering::Relaxed) >= 3, "the members were polled through the run");
        for (m, client) in &self.members {
            assert_eq!(holdings(client).await, self.before[m], "{m} holds what it held");
        }
    }
}

/// `(event, deleting, Terminating condition True)` of a CRD.
fn crd_summary(kind: &str, crd: &CustomResourceDefinition) -> (String, bool, bool) {
    let terminating = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Terminating" && c.status == "True"));
    (kind.to_string(), crd.metadata.deletion_timestamp.is_some(), terminating)
}

/// Whether a CRD was seen Terminating (marked and said so) before it went.
fn went_terminating_then_gone(seen: &[(String, bool, bool)]) -> bool {
    let terminating = seen.iter().position(|(k, deleting, t)| k == "MODIFIED" && *deleting && *t);
    let gone = seen.iter().position(|(k, _, _)| k == "DELETED");
    matches!((terminating, gone), (Some(a), Some(b)) if a < b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_federation_crd_lets_go_and_every_member_workload_stays() {
    let f = Federation::start(&["east", "west", "south"]).await;
    let Some(k) = Kubectl::new(33, &f.sandbox) else { return };
    let c = Controller::start(&f.sandbox, "controller");
    let placed = Placed::start(&f).await;
    // What the host's watchers see: the federation (event, being deleted, spanset's finalizer)
    // and its CRD.
    let (seen, watching) = record(f.api(), WatchParams::default(), |kind, o: &FederatedStatefulSet| {
        let ours = o.finalizers().iter().any(|x| x == "spanset.dev/cleanup");
        (kind.to_string(), o.metadata.deletion_timestamp.is_some(), ours)
    });
    let crds: Api<CustomResourceDefinition> = Api::all(f.host.clone());
    let (crd_seen, crd_watching) =
        record(crds.clone(), WatchParams::default().fields(&format!("metadata.name={CRD}")), crd_summary);
    eventually("both watches run", || async {
        !seen.lock().unwrap().is_empty() && !crd_seen.lock().unwrap().is_empty()
    })
    .await;

    k.ok(&["delete", "crd", CRD, "--wait=false"]);
    eventually("the CRD is gone", || async { crds.get_opt(CRD).await.is_ok_and(|c| c.is_none()) }).await;
    // Every chance to act wrongly afterwards: a quiet spell while the members are probed.
    c.wait_reconciles("redis", 3);
    placed.judge().await;
    watching.abort();
    crd_watching.abort();

    // The timeline on the host: the CRD went Terminating; the federation was marked for
    // deletion while spanset's finalizer held it, then released by spanset (never torn down:
    // the members above), then gone; then the CRD went.
    let crd_seen = crd_seen.lock().unwrap().clone();
    assert!(went_terminating_then_gone(&crd_seen), "{crd_seen:?}");
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

/// Both CRDs deleted together (`kubectl delete -f deploy/crds/`): the MemberClusters are held
/// by spanset's member finalizer while the federation holds pods there, the federation is let
/// go, then the members are released too; both CRDs go, and nothing in the members does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_both_crds_leaves_every_member_workload_running() {
    let f = Federation::start(&["east", "west", "south"]).await;
    let Some(k) = Kubectl::new(33, &f.sandbox) else { return };
    let c = Controller::start(&f.sandbox, "controller");
    let placed = Placed::start(&f).await;
    // The leader has put its finalizer on every MemberCluster (one without goes at once).
    let mcs: Api<spanset_api::MemberCluster> = Api::all(f.host.clone());
    eventually("every MemberCluster carries spanset's finalizer", || async {
        let list = mcs.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
        list.len() == 3 && list.iter().all(|m| m.finalizers().iter().any(|x| x == "spanset.dev/member-in-use"))
    })
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(f.host.clone());
    let member_crd = "memberclusters.spanset.dev";
    let (crd_seen, crd_watching) =
        record(crds.clone(), WatchParams::default().fields(&format!("metadata.name={member_crd}")), crd_summary);
    eventually("the watch runs", || async { !crd_seen.lock().unwrap().is_empty() }).await;

    k.ok(&["delete", "-f", concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/crds/"), "--wait=false"]);
    eventually("both CRDs are gone", || async {
        crds.get_opt(CRD).await.is_ok_and(|c| c.is_none()) && crds.get_opt(member_crd).await.is_ok_and(|c| c.is_none())
    })
    .await;
    // Every chance to act wrongly afterwards: until no member is watched any more (nothing is
    // left that could write there).
    support::wait_until("every member's watcher stopped", support::DEADLINE, || {
        let log = c.log_text();
        ["east", "west", "south"]
            .iter()
            .all(|m| log.lines().any(|l| l.contains("stopped watching member") && l.contains(&format!("cluster={m}"))))
    });
    placed.judge().await;
    crd_watching.abort();
    let crd_seen = crd_seen.lock().unwrap().clone();
    assert!(went_terminating_then_gone(&crd_seen), "{crd_seen:?}");
    f.assert_ledger_clean();
}
