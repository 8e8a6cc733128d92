//! Names that follow ordinals (`spec.network`), end to end: the real controller against a
//! sandbox whose clusters each serve DNS as CoreDNS does, asked in process (UDP) and with the
//! real `dig`. In every member, `redis-k.redis.default.svc.cluster.local` answers the IP of
//! the pod of ordinal k wherever it runs; a poller asking every member's DNS every few
//! milliseconds through a move never sees one name answer with two addresses; a fenced
//! member's pods leave the other members' records; deleting the federation deletes every
//! slice spanset published; `None` publishes nothing; and a member whose records spanset
//! cannot update holds the ordinal's start there (the rule, shown by its failure).

use crate::support;

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{Ipv4Addr, SocketAddr},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::{core::v1::Pod, discovery::v1::EndpointSlice};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use support::{
    dns::{Answer, dig_short, query_a},
    eventually,
    federation::{Controller, Federation},
};

const MEMBERS: [&str; 3] = ["east", "west", "south"];

fn name_of(k: u32) -> String {
    format!("redis-{k}.redis.default.svc.cluster.local")
}

/// `ordinal → (member, pod IP)` of every running pod with an IP.
async fn pod_ips(f: &Federation) -> BTreeMap<u32, (String, Ipv4Addr)> {
    let mut out = BTreeMap::new();
    for m in MEMBERS {
        let pods: Api<Pod> = Api::namespaced(f.member(m).await, "default");
        let lp = ListParams::default().labels("spanset.dev/federation=redis");
        for p in pods.list(&lp).await.map(|l| l.items).unwrap_or_default() {
            let k: u32 = p.metadata.name.as_deref().and_then(|n| n.strip_prefix("redis-")?.parse().ok()).unwrap_or(0);
            let ip = p.status.as_ref().and_then(|s| s.pod_ip.as_deref()).and_then(|ip| ip.parse().ok());
            if let Some(ip) = ip.filter(|_| p.metadata.deletion_timestamp.is_none()) {
                out.insert(k, (m.to_string(), ip));
            }
        }
    }
    out
}

/// Whether every member's DNS answers every ordinal of `0..n` with exactly its pod's IP.
async fn every_name_answers_everywhere(f: &Federation, n: u32) -> bool {
    let ips = pod_ips(f).await;
    if ips.len() != n as usize {
        return false;
    }
    MEMBERS.iter().all(|m| {
        let dns = f.sandbox.dns(m);
        (0..n).all(|k| query_a(dns, &name_of(k)) == Answer::Addresses(vec![ips[&k].1]))
    })
}

/// spanset's EndpointSlices of the federation in a member.
async fn published(f: &Federation, member: &str) -> Vec<EndpointSlice> {
    let api: Api<EndpointSlice> = Api::namespaced(f.member(member).await, "default");
    let lp =
        ListParams::default().labels("spanset.dev/federation=redis,endpointslice.kubernetes.io/managed-by=spanset.dev");
    api.list(&lp).await.expect("slices listed").items
}

/// One answer with an address: when, which member's DNS, which ordinal, the addresses.
type Sample = (Instant, String, u32, Vec<Ipv4Addr>);

/// Asks every member's DNS for every name of `0..n` in a loop until stopped, keeping every
/// answer that named an address; `violations` collects any answer with two addresses.
struct Poller {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Sample>>>,
    rounds: Arc<Mutex<u64>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Poller {
    fn start(servers: Vec<(String, SocketAddr)>, n: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let rounds = Arc::new(Mutex::new(0));
        let (s, v, r) = (stop.clone(), seen.clone(), rounds.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                for (member, dns) in &servers {
                    for k in 0..n {
                        let ips = query_a(*dns, &name_of(k)).addresses();
                        if !ips.is_empty() {
                            v.lock().unwrap().push((Instant::now(), member.clone(), k, ips));
                        }
                    }
                }
                *r.lock().unwrap() += 1;
            }
        });
        Self { stop, seen, rounds, thread: Some(thread) }
    }

    fn rounds(&self) -> u64 {
        *self.rounds.lock().unwrap()
    }

    /// Stops it; answers every answer with more than one address, and the answers.
    fn finish(mut self) -> (Vec<String>, Vec<Sample>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().expect("the poller ran");
        let seen = std::mem::take(&mut *self.seen.lock().unwrap());
        let twice = seen
            .iter()
            .filter(|(.., ips)| ips.len() > 1)
            .map(|(_, m, k, ips)| format!("{m}: redis-{k} answered {ips:?}"))
            .collect();
        (twice, seen)
    }
}

async fn start(weights: &[(&str, i32)]) -> (Federation, Controller) {
    let f = Federation::start(&MEMBERS).await;
    let c = Controller::start(&f.sandbox, "a");
    let mut fsts = f.placing("redis", &MEMBERS);
    for p in fsts.spec.placement.clusters.iter_mut() {
        p.weight = weights.iter().find(|(n, _)| *n == p.name).map(|(_, w)| *w);
    }
    f.create(&fsts).await;
    (f, c)
}

async fn set_weights(f: &Federation, weights: &[(&str, i32)]) {
    let clusters: Vec<_> = weights.iter().map(|(n, w)| json!({"name": n, "weight": w})).collect();
    let body = json!({"spec": {"placement": {"clusters": clusters}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("weights patched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ordinal_resolves_in_every_member_to_its_pod_wherever_it_runs() {
    let (f, _c) = start(&[("east", 1), ("west", 1), ("south", 1)]).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("south", 4, 2)], "spread 2/2/2").await;
    eventually("redis-0 … redis-5 answer in every member's DNS with their pod IPs", || {
        every_name_answers_everywhere(&f, 6)
    })
    .await;
    // Pod IPs are unique across the sandbox's clusters, as a flat network needs.
    let ips = pod_ips(&f).await;
    let distinct: BTreeSet<_> = ips.values().map(|(_, ip)| *ip).collect();
    assert_eq!(distinct.len(), 6, "{ips:?}");
    // The real dig agrees, for a name that runs elsewhere.
    let (west_member, ip4) = ips[&4].clone();
    assert_eq!(west_member, "south");
    if let Some(lines) = dig_short(f.sandbox.dns("east"), &name_of(4)) {
        assert_eq!(lines, vec![ip4.to_string()], "dig in east for redis-4 (south)");
    }
    // In each member, spanset's slices list exactly the pods of the other members.
    for m in MEMBERS {
        let hosts: BTreeSet<String> =
            published(&f, m).await.iter().flat_map(|s| s.endpoints.iter().filter_map(|e| e.hostname.clone())).collect();
        let want: BTreeSet<String> =
            ips.iter().filter(|(_, (at, _))| at != m).map(|(k, _)| format!("redis-{k}")).collect();
        assert_eq!(hosts, want, "{m}'s published records");
    }
    assert!(f.refused_requests().is_empty(), "refused: {:?}", f.refused_requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moving_ordinal_never_answers_with_two_addresses_and_its_new_address_reaches_every_member() {
    let (f, _c) = start(&[("east", 1), ("west", 1), ("south", 1)]).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("south", 4, 2)], "spread 2/2/2").await;
    eventually("every name answers everywhere", || every_name_answers_everywhere(&f, 6)).await;
    let before = pod_ips(&f).await;
    let servers: Vec<(String, SocketAddr)> = MEMBERS.iter().map(|m| (m.to_string(), f.sandbox.dns(m))).collect();
    let poller = Poller::start(servers, 6);
    eventually("the poller to go round", || {
        let r = poller.rounds();
        async move { r >= 3 }
    })
    .await;
    // Weights 2:1:1 give east [0,3), west [3,5), south [5,6): redis-2 moves west → east, redis-4 south → west.
    set_weights(&f, &[("east", 2), ("west", 1), ("south", 1)]).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 2), ("south", 5, 1)], "redis-2 moved to east").await;
    eventually("every name answers everywhere after the move", || every_name_answers_everywhere(&f, 6)).await;
    let after = pod_ips(&f).await;
    let rounds = poller.rounds();
    eventually("the poller to go round after the move", || {
        let r = poller.rounds();
        async move { r >= rounds + 3 }
    })
    .await;
    let (twice, seen) = poller.finish();
    assert!(twice.is_empty(), "a name answered with two addresses:\n{}", twice.join("\n"));
    let (old, new) = (before[&2].1, after[&2].1);
    assert_ne!(old, new, "redis-2 runs as a new pod with a new address");
    assert_eq!(after[&2].0, "east");
    // Over the timeline: every member answered the old address, then only the new one.
    for m in MEMBERS {
        let answers: Vec<(Instant, Ipv4Addr)> =
            seen.iter().filter(|(_, at, k, _)| at == m && *k == 2).map(|(t, _, _, ips)| (*t, ips[0])).collect();
        let first_new =
            answers.iter().position(|(_, ip)| *ip == new).unwrap_or_else(|| panic!("{m} never answered {new}"));
        assert!(
            answers[first_new..].iter().all(|(_, ip)| *ip == new),
            "{m} answered the old address after the new one"
        );
        assert!(answers[..first_new].iter().all(|(_, ip)| *ip == old), "{m} answered a third address: {answers:?}");
    }
    f.assert_ledger_clean();
    assert!(f.refused_requests().is_empty(), "refused: {:?}", f.refused_requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_member_s_pods_leave_the_other_members_records() {
    let (f, _c) = start(&[("east", 1), ("west", 1), ("south", 1)]).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("south", 4, 2)], "spread 2/2/2").await;
    eventually("every name answers everywhere", || every_name_answers_everywhere(&f, 6)).await;
    let south: BTreeSet<Ipv4Addr> =
        pod_ips(&f).await.values().filter(|(m, _)| m == "south").map(|(_, ip)| *ip).collect();
    // South is lost (refuses connections) and fenced: its pods may still run there, and their
    // addresses must leave east's and west's records.
    f.sandbox.ctl_ok(&["partition", "south"]);
    let out = f.spanset(&["fence", "south", "--reason", "test", "--force"]).await;
    assert!(out.status.success(), "fence: {}", String::from_utf8_lossy(&out.stderr));
    eventually("south's addresses to leave east's and west's DNS", || {
        let f = &f;
        let south = south.clone();
        async move {
            ["east", "west"].iter().all(|m| {
                let dns = f.sandbox.dns(m);
                (0..6).all(|k| query_a(dns, &name_of(k)).addresses().iter().all(|ip| !south.contains(ip)))
            })
        }
    })
    .await;
    // The re-homed ordinals answer from their new members, once each.
    eventually("redis-4 and redis-5 re-homed: east and west answer one new address each", || {
        let f = &f;
        let south = south.clone();
        async move {
            ["east", "west"].iter().all(|m| {
                let dns = f.sandbox.dns(m);
                (4..6).all(|k| {
                    let ips = query_a(dns, &name_of(k)).addresses();
                    ips.len() == 1 && !south.contains(&ips[0])
                })
            })
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_federation_deletes_every_published_slice() {
    let (f, _c) = start(&[("east", 1), ("west", 1), ("south", 1)]).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("south", 4, 2)], "spread 2/2/2").await;
    eventually("every member holds spanset's slice", || async {
        let mut all = true;
        for m in MEMBERS {
            all &= published(&f, m).await.len() == 1;
        }
        all
    })
    .await;
    f.api().delete("redis", &DeleteParams::default()).await.expect("deleted");
    eventually("no slice of spanset's left in any member", || async {
        let mut none = true;
        for m in MEMBERS {
            none &= published(&f, m).await.is_empty();
        }
        none
    })
    .await;
    let dns = f.sandbox.dns("east");
    eventually("names of the deleted federation stop answering", || async move {
        (0..6).all(|k| query_a(dns, &name_of(k)) == Answer::NoSuchName)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_none_publishes_nothing_and_a_name_answers_only_where_its_pod_runs() {
    let f = Federation::start(&MEMBERS).await;
    let c = Controller::start(&f.sandbox, "a");
    let mut fsts = f.placing("redis", &MEMBERS);
    fsts.spec.network = Some(spanset_api::Network { mode: Some(spanset_api::NetworkMode::None) });
    f.create(&fsts).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("south", 4, 2)], "spread 2/2/2").await;
    let ips = pod_ips(&f).await;
    eventually("redis-0 answers in east, where it runs", || {
        let dns = f.sandbox.dns("east");
        let want = Answer::Addresses(vec![ips[&0].1]);
        async move { query_a(dns, &name_of(0)) == want }
    })
    .await;
    c.wait_reconciles("redis", 3);
    for m in MEMBERS {
        assert!(published(&f, m).await.is_empty(), "{m} holds spanset slices with mode None");
    }
    assert_eq!(query_a(f.sandbox.dns("east"), &name_of(2)), Answer::NoSuchName, "redis-2 runs in west only");
    // Switching to the default publishes; switching back deletes.
    let body = json!({"spec": {"network": {"mode": "EndpointSlices"}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("patched");
    eventually("every name answers everywhere once published", || every_name_answers_everywhere(&f, 6)).await;
    let body = json!({"spec": {"network": {"mode": "None"}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("patched");
    eventually("spanset's slices deleted again", || async {
        let mut none = true;
        for m in MEMBERS {
            none &= published(&f, m).await.is_empty();
        }
        none
    })
    .await;
}

/// A member whose spanset records cannot be updated (an admission policy refuses spanset's
/// writes of them) keeps the moved ordinal's old address there; the ordinal's new pod there
/// must then wait, gated, or its name would answer twice. Once the policy is lifted the record
/// drops the old address and the pod starts. With the rule removed from `decide` (a pod
/// released while its member's records still name it), the poller sees two addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_records_still_name_an_ordinal_holds_its_start_there() {
    let (mut f, c) = start(&[("east", 1), ("west", 1), ("south", 1)]).await;
    // The test's own policy refuses spanset's updates there: refusals by design.
    f.refusals_expected = true;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("south", 4, 2)], "spread 2/2/2").await;
    eventually("every name answers everywhere", || every_name_answers_everywhere(&f, 6)).await;
    let east = f.member("east").await;
    freeze_published_slices(&east).await;
    let servers: Vec<(String, SocketAddr)> = MEMBERS.iter().map(|m| (m.to_string(), f.sandbox.dns(m))).collect();
    let poller = Poller::start(servers, 6);
    set_weights(&f, &[("east", 2), ("west", 1), ("south", 1)]).await;
    // West gives redis-2 up; east's pod of it is created and stays gated while east's records
    // name west's old address.
    eventually("east's redis-2 created, gated", || {
        let east = east.clone();
        async move {
            let pods: Api<Pod> = Api::namespaced(east, "default");
            pods.get_opt("redis-2").await.ok().flatten().is_some_and(|p| {
                p.spec
                    .and_then(|s| s.scheduling_gates)
                    .is_some_and(|g| g.iter().any(|g| g.name == "spanset.dev/identity"))
            })
        }
    })
    .await;
    c.wait_reconciles("redis", 4);
    let pods: Api<Pod> = Api::namespaced(east.clone(), "default");
    let gated = |p: &Pod| p.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty());
    let started = !gated(&pods.get("redis-2").await.expect("east's redis-2"));
    if started {
        // The rule did not hold: let the pod run, and the poller see what east's DNS answers.
        eventually("east's redis-2 Ready", || {
            let pods = pods.clone();
            async move {
                pods.get("redis-2")
                    .await
                    .ok()
                    .and_then(|p| p.status?.conditions)
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            }
        })
        .await;
        let rounds = poller.rounds();
        eventually("the poller to go round", || {
            let r = poller.rounds();
            async move { r >= rounds + 3 }
        })
        .await;
        let (twice, _) = poller.finish();
        assert!(twice.is_empty(), "a name answered with two addresses:\n{}", twice.join("\n"));
        panic!("east's redis-2 started while east's records named west's redis-2");
    }
    thaw_published_slices(&east).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 2), ("south", 5, 1)], "redis-2 moved to east").await;
    eventually("every name answers everywhere after the move", || every_name_answers_everywhere(&f, 6)).await;
    let (twice, _) = poller.finish();
    assert!(twice.is_empty(), "a name answered with two addresses:\n{}", twice.join("\n"));
    f.assert_ledger_clean();
}

const FREEZE: &str = "spanset-test-freeze-published-slices";

/// A ValidatingAdmissionPolicy refusing every update of spanset's EndpointSlices.
async fn freeze_published_slices(member: &Client) {
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": FREEZE},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["discovery.k8s.io"], "apiVersions": ["*"],
                "operations": ["UPDATE", "DELETE"], "resources": ["endpointslices"]}]},
            "matchConditions": [{"name": "spansets", "expression":
                "has(oldObject.metadata.labels) && 'spanset.dev/federation' in oldObject.metadata.labels"}],
            "validations": [{"expression": "false", "message": "frozen by the test"}]
        }
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": FREEZE},
        "spec": {"policyName": FREEZE, "validationActions": ["Deny"]}
    });
    for (plural, body) in [("validatingadmissionpolicies", policy), ("validatingadmissionpolicybindings", binding)] {
        let api: Api<kube::api::DynamicObject> = Api::all_with(member.clone(), &vap_resource(plural));
        let obj: kube::api::DynamicObject = serde_json::from_value(body).expect("an object");
        api.create(&PostParams::default(), &obj).await.expect("policy installed");
    }
}

async fn thaw_published_slices(member: &Client) {
    for plural in ["validatingadmissionpolicybindings", "validatingadmissionpolicies"] {
        let api: Api<kube::api::DynamicObject> = Api::all_with(member.clone(), &vap_resource(plural));
        api.delete(FREEZE, &DeleteParams::default()).await.expect("policy removed");
    }
}

fn vap_resource(plural: &str) -> kube::api::ApiResource {
    let kind =
        if plural.ends_with("bindings") { "ValidatingAdmissionPolicyBinding" } else { "ValidatingAdmissionPolicy" };
    kube::api::ApiResource {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// How long the whole suite may wait on one condition here (documentation of the support
/// deadline these tests rely on).
#[allow(dead_code)]
const _DEADLINE: Duration = support::DEADLINE;

/// spanset's ServiceExport of the headless Service in a member, if any.
async fn service_export(f: &Federation, member: &str) -> Option<kube::api::DynamicObject> {
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        f.member(member).await,
        "default",
        &spanset_controller::member::supporting::service_export_resource(),
    );
    api.get_opt("redis").await.ok().flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_cluster_services_exports_the_service_everywhere_and_publishes_no_slice() {
    // East and west run the multi-cluster Services API; south does not.
    let f = Federation::start_flags(&MEMBERS, &["--mcs", "east,west"]).await;
    if f.sandbox.controller_kubeconfig.is_some() {
        for m in MEMBERS {
            let admin = f.member(m).await;
            let rbac = include_str!("../../deploy/member/rbac-multicluster-services.yaml");
            spanset::cli::join::apply_manifest(&admin, rbac, "rbac-multicluster-services.yaml").await.expect("applied");
        }
    }
    let c = Controller::start(&f.sandbox, "a");
    // Created at once, while the members' watchers start: nothing may be written in east or
    // west before south, the last to report, has been asked too.
    let mut fsts = f.placing("redis", &MEMBERS);
    fsts.spec.network = Some(spanset_api::Network { mode: Some(spanset_api::NetworkMode::MultiClusterServices) });
    f.create(&fsts).await;
    // South cannot take it: nothing is written anywhere, and the condition names the field.
    let message = f.wait_condition("redis", "Blocked", "TemplateRefused").await;
    assert!(
        message.contains("spec.network.mode") && message.contains("south") && message.contains("serviceexports"),
        "{message}"
    );
    for m in MEMBERS {
        assert!(
            service_export(&f, m).await.is_none(),
            "{m} got a ServiceExport while south refused the mode: {}",
            c.log_text()
        );
    }
    // Placed on east and west only, both export the Service, and no slice is published.
    let body =
        json!({"spec": {"placement": {"clusters": [{"name": "east", "weight": 1}, {"name": "west", "weight": 1}]}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.expect("patched");
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "3/3 over east and west").await;
    for m in ["east", "west"] {
        let export = service_export(&f, m).await.unwrap_or_else(|| panic!("no ServiceExport in {m}"));
        let labels = export.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get("spanset.dev/federation").map(String::as_str), Some("redis"), "{m}");
        assert!(published(&f, m).await.is_empty(), "{m} holds spanset slices under MultiClusterServices");
    }
    // A name answers only where its pod runs (the MCS API's own names are the network's job).
    assert_eq!(query_a(f.sandbox.dns("east"), &name_of(4)), Answer::NoSuchName);
    f.api().delete("redis", &DeleteParams::default()).await.expect("deleted");
    eventually("the ServiceExports deleted with the federation", || async {
        service_export(&f, "east").await.is_none() && service_export(&f, "west").await.is_none()
    })
    .await;
}
