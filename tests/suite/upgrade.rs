//! Upgrading spanset restarts nothing. Each fixture set is what a past commit of this repository
//! wrote, captured from its own sandbox (`tests/fixtures/upgrade/capture.sh`): the federation
//! with its status and Lease, and in each member the StatefulSet as that spanset wrote it, with
//! the pods, claims, volumes and revisions its member's controller made. Loaded into a current
//! sandbox, the current controller takes over: every federation reaches the shape this version
//! writes (its template hash, its version stamp, the claim templates' label, the identity gate),
//! and over the whole take-over no pod is restarted, created or deleted, no volume provisioned,
//! nothing refused, and the ledger shows one incarnation per ordinal.
//!
//! The commits, each the last before a change in what spanset writes:
//! - `fd7ad99`: before claim templates carried the federation label (an immutable field, so
//!   the member StatefulSets are recreated with their pods orphaned and adopted) and before the
//!   identity gate entered the pod template;
//! - `b70f9f4`: before writes carried the controller's version (`spanset.dev/written-by`).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{Event, Pod},
};
use kube::{Api, Client, ResourceExt, api::ListParams};
use spanset_api::{
    FederatedStatefulSet,
    labels::{FEDERATION, IDENTITY_GATE, TEMPLATE_HASH, TERM},
};
use spanset_controller::{
    leadership::written_by::{WRITTEN_BY, version},
    member::objects::template_hash,
};
use support::{
    Sandbox,
    federation::{Controller, Federation, client_for},
    fixtures::{self, Fixture},
    timeline,
};

use crate::support;

/// A sandbox holding what the fixture's spanset left, with this version's identities set up
/// (`--auth`, members joined by this version) and no controller yet.
async fn restored(fixture: &Fixture) -> Federation {
    let members = fixture.members();
    let names = std::iter::once("host".to_string()).chain(members.iter().cloned()).collect::<Vec<_>>().join(",");
    let mut sandbox = Sandbox::start_with(&names, &["--auth"]);
    let host = client_for(&sandbox.kubeconfig, "host").await;
    spanset::cli::sandbox::install_crds(&host).await.expect("CRDs installed");
    let mut renamed = fixtures::restore_federations(fixture, &host).await;
    let mut clients = BTreeMap::new();
    for m in &members {
        clients.insert(m.clone(), client_for(&sandbox.kubeconfig, m).await);
    }
    fixtures::restore_members(fixture, &clients, &mut renamed).await;
    // The members' own controllers take their pods back before spanset's identities exist.
    for (m, client) in &clients {
        let expected = fixture.of(m, "Pod").count();
        support::eventually(&format!("{m}: the restored pods Ready under their StatefulSet"), || async {
            let pods =
                Api::<Pod>::namespaced(client.clone(), "default").list(&ListParams::default()).await.unwrap().items;
            pods.len() == expected && pods.iter().all(|p| ready(p) && !p.owner_references().is_empty())
        })
        .await;
    }
    let controller = spanset::cli::sandbox::secure(&host, &sandbox.kubeconfig, &members).await.expect("identities");
    sandbox.controller_kubeconfig = Some(controller);
    let f = Federation { sandbox, host, members, refusals_expected: false };
    fixtures::restore_host_rest(fixture, &f.host, f.lease_namespace(), &renamed).await;
    f
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether a member's StatefulSet is what this version writes for `fsts`.
fn current_shape(sts: &StatefulSet, fsts: &FederatedStatefulSet) -> bool {
    let annotations = sts.annotations();
    let spec = sts.spec.as_ref();
    let gated = spec
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == IDENTITY_GATE));
    let claims_labelled = spec
        .and_then(|s| s.volume_claim_templates.as_ref())
        .is_some_and(|cs| cs.iter().all(|c| c.metadata.labels.as_ref().is_some_and(|l| l.contains_key(FEDERATION))));
    annotations.get(WRITTEN_BY).map(String::as_str) == Some(version())
        && annotations.get(TEMPLATE_HASH) == Some(&template_hash(fsts))
        && gated
        && claims_labelled
}

/// Every pod's uid in every member, polled until stopped: what the take-over must never change.
#[derive(Default)]
struct Seen {
    /// `(member, pod) -> uids seen`, in order.
    uids: BTreeMap<(String, String), Vec<String>>,
    polls: usize,
}

fn poll_pods(
    clients: Vec<(String, Client)>,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.load(Ordering::SeqCst) {
            for (m, client) in &clients {
                let Ok(list) = Api::<Pod>::namespaced(client.clone(), "default").list(&ListParams::default()).await
                else {
                    continue;
                };
                let mut s = seen.lock().unwrap();
                for p in list.items {
                    let uid = p.uid().unwrap_or_default();
                    let uids = s.uids.entry((m.clone(), p.name_any())).or_default();
                    if uids.last() != Some(&uid) {
                        uids.push(uid);
                    }
                }
            }
            seen.lock().unwrap().polls += 1;
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
}

/// Loads `commit`'s fixtures, starts this controller, and judges the take-over; `recreated`:
/// how many member StatefulSets must be recreated (their immutable fields changed).
async fn take_over(commit: &str, recreated: u64) {
    let fixture = Fixture::read(commit);
    let f = restored(&fixture).await;
    let fsts_name = "redis";
    let before_pods: BTreeSet<(String, String)> = {
        let mut out = BTreeSet::new();
        for m in &f.members {
            let pods = Api::<Pod>::namespaced(f.member(m).await, "default").list(&ListParams::default()).await.unwrap();
            out.extend(pods.items.iter().map(|p| (m.clone(), p.uid().unwrap())));
        }
        out
    };
    assert_eq!(before_pods.len(), 6, "the fixture's six pods run before the take-over");
    let mark = f.sandbox.account();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for m in &f.members {
        clients.push((m.clone(), f.member(m).await));
    }
    let poller = poll_pods(clients, seen.clone(), stop.clone());

    let _c = Controller::start(&f.sandbox, "current");
    let fsts = f.api().get(fsts_name).await.unwrap();
    for m in &f.members {
        let api: Api<StatefulSet> = Api::namespaced(f.member(m).await, "default");
        support::eventually(&format!("{m}: the StatefulSet in this version's shape"), || async {
            let fsts = f.api().get(fsts_name).await.unwrap();
            api.get_opt(fsts_name).await.ok().flatten().is_some_and(|s| current_shape(&s, &fsts))
        })
        .await;
    }
    support::eventually("the federation Ready and every pod updated", || async {
        let s = f.status(fsts_name).await;
        s.ready_replicas == Some(6)
            && s.updated_replicas == Some(6)
            && s.observed_generation == fsts.metadata.generation
    })
    .await;
    // A few more polls after convergence, so that a late roll would be seen.
    let polls = seen.lock().unwrap().polls;
    support::eventually("the poller to look again", || async { seen.lock().unwrap().polls >= polls + 20 }).await;
    stop.store(true, Ordering::SeqCst);
    poller.await.unwrap();

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let replaced: Vec<_> = seen.uids.iter().filter(|(_, uids)| uids.len() > 1).collect();
    assert!(replaced.is_empty(), "{commit}: pods replaced during the take-over: {replaced:?}");
    let now: BTreeSet<(String, String)> =
        seen.uids.iter().map(|((m, _), uids)| (m.clone(), uids.last().unwrap().clone())).collect();
    assert_eq!(now, before_pods, "{commit}: the same pods, nothing added or removed");
    let runs = timeline::runs(&f.sandbox, fsts_name);
    let per_ordinal: BTreeMap<u32, usize> = runs.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.ordinal).or_default() += 1;
        m
    });
    assert_eq!(per_ordinal, (0..6).map(|k| (k, 1)).collect(), "{commit}: one incarnation per ordinal: {runs:?}");
    assert!(runs.iter().all(|r| r.until.is_none()), "{commit}: none stopped: {runs:?}");

    let events: Api<Event> = Api::namespaced(f.host.clone(), "default");
    let refused: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|e| e.reason.as_deref().is_some_and(|r| r.ends_with("Refused")))
        .map(|e| format!("{:?}: {:?}", e.reason, e.message))
        .collect();
    assert!(refused.is_empty(), "{commit}: {refused:?}");
    assert!(f.refused_requests().is_empty(), "{commit}: {:?}", f.refused_requests());

    // What the take-over cost in each member.
    let cost = f.sandbox.account().since(&mark);
    for m in &f.members {
        let c = cost.cluster(m);
        let pods = c.by_resource("pods");
        assert_eq!((pods.created, pods.deleted), (0, 0), "{commit}: {m}: pods created or deleted: {c:?}");
        assert_eq!(c.provisioned(), 0, "{commit}: {m}: volumes provisioned");
        assert_eq!(c.by_resource("persistentvolumeclaims").created, 0, "{commit}: {m}: claims created");
        let sets = c.of("spanset", "statefulsets.apps");
        assert_eq!(
            (sets.deleted, sets.created),
            (recreated, recreated),
            "{commit}: {m}: StatefulSets recreated: {c:?}"
        );
    }

    // A pod made after the take-over is made from the gated template and waits for spanset's
    // release, which stamps it with the term: the held pods' old template makes no pod again.
    let east: Api<Pod> = Api::namespaced(f.member("east").await, "default");
    let old = east.get("redis-0").await.unwrap().uid();
    east.delete("redis-0", &Default::default()).await.expect("redis-0 deleted by hand");
    let sts: Api<StatefulSet> = Api::namespaced(f.member("east").await, "default");
    support::eventually("a new redis-0 released and Ready", || async {
        let (Ok(Some(p)), Ok(s)) = (east.get_opt("redis-0").await, sts.get("redis").await) else { return false };
        let term = s.annotations().get(TERM).cloned();
        p.uid() != old && ready(&p) && term.is_some() && p.annotations().get(TERM) == term.as_ref()
    })
    .await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taking_over_from_the_version_before_the_version_stamp_restarts_nothing() {
    take_over("b70f9f4", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taking_over_from_the_version_before_the_claim_label_and_the_gate_restarts_nothing() {
    take_over("fd7ad99", 1).await;
}
