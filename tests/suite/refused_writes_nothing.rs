//! A federation a member refuses writes nothing in any member, at any moment: no namespace, no
//! Service, no carried object, no StatefulSet. Every member is polled over the whole time the
//! controller has to act wrongly (several reconciles), not only at the end, every poll a
//! successful read, and the resource account must show no write of spanset's identity in any
//! member over that time; then the fixed federation writes everything and settles. An update of
//! a running federation to a refused template changes nothing already written.

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{ConfigMap, Namespace, Service},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DynamicObject, ListParams, Patch, PatchParams, PostParams},
};
use spanset_api::FederatedStatefulSet;
use support::federation::{Controller, Federation};

use crate::support;

/// The namespace of the federations here: absent from the members until spanset creates it.
const NS: &str = "shop";

/// Waits for condition `type_`=True with `reason` on `name` in `api`; returns its message.
async fn condition(api: &Api<FederatedStatefulSet>, name: &str, type_: &str, reason: &str) -> String {
    let start = std::time::Instant::now();
    loop {
        let status = api.get(name).await.ok().and_then(|f| f.status).unwrap_or_default();
        if let Some(c) = status.conditions.iter().find(|c| c.type_ == type_ && c.status == "True" && c.reason == reason)
        {
            return c.message.clone();
        }
        assert!(start.elapsed() < support::DEADLINE, "timed out waiting for {type_}={reason}: {status:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// What spanset could have written for a federation in one member, as `kind namespace/name`:
/// the namespace [`NS`], and anything labelled as spanset's in any namespace. A read that fails
/// fails the test: an error is never taken for "nothing there".
async fn written(member: &Client) -> BTreeSet<String> {
    let ours = ListParams::default().labels("spanset.dev/federation");
    let mut seen = BTreeSet::new();
    let ns = Api::<Namespace>::all(member.clone()).get_opt(NS).await;
    if ns.unwrap_or_else(|e| panic!("reading Namespace {NS}: {e}")).is_some() {
        seen.insert(format!("Namespace {NS}"));
    }
    let services = Api::<Service>::all(member.clone()).list(&ours).await;
    for s in services.unwrap_or_else(|e| panic!("listing Services: {e}")).items {
        seen.insert(format!("Service {}/{}", s.namespace().unwrap_or_default(), s.name_any()));
    }
    let maps = Api::<ConfigMap>::all(member.clone()).list(&ours).await;
    for m in maps.unwrap_or_else(|e| panic!("listing ConfigMaps: {e}")).items {
        seen.insert(format!("ConfigMap {}/{}", m.namespace().unwrap_or_default(), m.name_any()));
    }
    let sets = Api::<StatefulSet>::all(member.clone()).list(&ours).await;
    for s in sets.unwrap_or_else(|e| panic!("listing StatefulSets: {e}")).items {
        seen.insert(format!("StatefulSet {}/{}", s.namespace().unwrap_or_default(), s.name_any()));
    }
    seen
}

/// Polls every member over and over until stopped; answers everything ever seen, by member.
struct Poller {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(u32, BTreeSet<String>)>,
}

impl Poller {
    async fn start(f: &Federation) -> Self {
        let mut clients = Vec::new();
        for m in &f.members {
            clients.push((m.clone(), f.member(m).await));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let (mut rounds, mut seen) = (0, BTreeSet::new());
            while !flag.load(Ordering::SeqCst) {
                for (m, c) in &clients {
                    seen.extend(written(c).await.into_iter().map(|w| format!("{m}: {w}")));
                }
                rounds += 1;
                tokio::task::yield_now().await;
            }
            (rounds, seen)
        });
        Self { stop, task }
    }

    async fn finish(self) -> (u32, BTreeSet<String>) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("the poller ran")
    }
}

/// The host namespace [`NS`] with a ConfigMap `redis-conf` to carry, which spanset may read.
async fn host_namespace(f: &Federation) -> Api<FederatedStatefulSet> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    Api::<Namespace>::all(f.host.clone()).create(&PostParams::default(), &ns).await.expect("host namespace");
    let mut conf = ConfigMap::default();
    conf.metadata.name = Some("redis-conf".into());
    conf.data = Some([("redis.conf".to_string(), "appendonly yes".to_string())].into());
    Api::<ConfigMap>::namespaced(f.host.clone(), NS).create(&PostParams::default(), &conf).await.expect("config");
    // Its operator lets spanset read what federations there carry (`deploy/rbac.yaml`).
    spanset::cli::sandbox::allow_carry(&f.host, NS).await.expect("carry allowed");
    Api::namespaced(f.host.clone(), NS)
}

/// The example federation in [`NS`], carrying `redis-conf`, 2 replicas per member.
fn federation(f: &Federation, name: &str) -> FederatedStatefulSet {
    let mut fsts = f.placing(name, &f.members.iter().map(String::as_str).collect::<Vec<_>>());
    fsts.metadata.namespace = Some(NS.into());
    fsts.spec.replicas = 2 * f.members.len() as i32;
    fsts.spec.migration.carry =
        serde_json::from_value(serde_json::json!([{"kind": "ConfigMap", "name": "redis-conf"}])).expect("a carry list");
    fsts
}

/// Waits until every member runs its share of `name` in [`NS`] and the status counts every
/// replica ready; then every member holds the namespace, the Service and the carried object.
async fn wait_running(f: &Federation, api: &Api<FederatedStatefulSet>, name: &str) {
    support::eventually(&format!("{name} running"), || async {
        let Some(fsts) = api.get(name).await.ok() else { return false };
        let status = fsts.status.unwrap_or_default();
        let ready: i32 = status.slices.iter().map(|s| s.ready_replicas).sum();
        ready == fsts.spec.replicas && status.moves.is_empty()
    })
    .await;
    for m in &f.members {
        let have = written(&f.member(m).await).await;
        for want in [
            format!("Namespace {NS}"),
            format!("Service {NS}/redis"),
            format!("ConfigMap {NS}/redis-conf"),
            format!("StatefulSet {NS}/{name}"),
        ] {
            assert!(have.contains(&want), "{m} lacks {want}: {have:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_a_member_refuses_writes_nothing_anywhere_until_fixed() {
    let f = Federation::start(&["east", "west"]).await;
    let c = Controller::start(&f.sandbox, "controller");
    let api = host_namespace(&f).await;
    let mut bad = federation(&f, "badsel");
    // The selector does not select the pods the template makes: the members' apiservers refuse it.
    bad.spec.template.selector.match_labels = Some([("app".to_string(), "other".to_string())].into());
    let mark = f.sandbox.account();
    let poller = Poller::start(&f).await;
    api.create(&PostParams::default(), &bad).await.expect("created");
    let msg = condition(&api, "badsel", "Blocked", "TemplateRefused").await;
    assert!(msg.starts_with("spec.template: "), "{msg}");
    assert!(msg.contains("east") || msg.contains("west"), "the member is named: {msg}");
    assert!(msg.contains("422") && msg.contains("selector"), "the server's message: {msg}");
    tokio::task::block_in_place(|| c.wait_reconciles("badsel", 4));
    let (rounds, seen) = poller.finish().await;
    assert!(rounds >= 2, "the members were polled {rounds} times");
    assert!(seen.is_empty(), "a refused federation wrote in members (seen over {rounds} polls): {seen:?}");
    // Not only what the polls saw: nothing at all reached the members from spanset's identity.
    let changed = f.sandbox.spanset_changes_since(&mark, &f.members);
    assert!(changed.is_empty(), "a refused federation wrote in members: {changed:?}");
    assert!(
        c.log_text().lines().any(|l| l.contains("refused the template; nothing written in any member")),
        "the refusal is logged"
    );

    // Fixed: everything is written and the federation runs.
    // The selector is immutable (the CRD's transition rule): the pod labels follow it instead.
    let fix = serde_json::json!({"spec": {"template": {"template": {"metadata": {"labels": {"app": "other"}}}}}});
    api.patch("badsel", &PatchParams::default(), &Patch::Merge(&fix)).await.expect("fixed");
    wait_running(&f, &api, "badsel").await;
    f.assert_ledger_clean();
}

/// resourceVersions of every object spanset wrote for the federation in `member`.
async fn versions(member: &Client) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let svc = Api::<Service>::namespaced(member.clone(), NS).get("redis").await.expect("Service");
    out.push(("Service".into(), svc.resource_version().unwrap_or_default()));
    let conf = Api::<ConfigMap>::namespaced(member.clone(), NS).get("redis-conf").await.expect("ConfigMap");
    out.push(("ConfigMap".into(), conf.resource_version().unwrap_or_default()));
    let sts = Api::<StatefulSet>::namespaced(member.clone(), NS).get("redis").await.expect("StatefulSet");
    out.push(("StatefulSet generation".into(), sts.metadata.generation.unwrap_or_default().to_string()));
    let ns = Api::<Namespace>::all(member.clone()).get(NS).await.expect("Namespace");
    out.push(("Namespace".into(), ns.resource_version().unwrap_or_default()));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_federation_updated_to_a_refused_template_keeps_everything_as_written() {
    let f = Federation::start(&["east", "west"]).await;
    let c = Controller::start(&f.sandbox, "controller");
    let api = host_namespace(&f).await;
    api.create(&PostParams::default(), &federation(&f, "redis")).await.expect("created");
    wait_running(&f, &api, "redis").await;
    let mut before = Vec::new();
    for m in &f.members {
        before.push(versions(&f.member(m).await).await);
    }
    // Pod labels the selector no longer selects (the selector itself is immutable).
    let edit = serde_json::json!({"spec": {"template": {"template": {"metadata": {"labels": {"app": "other"}}}}}});
    tokio::task::block_in_place(|| c.wait_quiet("redis"));
    let mark = f.sandbox.account();
    let poller = Poller::start(&f).await;
    api.patch("redis", &PatchParams::default(), &Patch::Merge(&edit)).await.expect("edited");
    let msg = condition(&api, "redis", "Blocked", "TemplateRefused").await;
    assert!(msg.contains("selector"), "{msg}");
    tokio::task::block_in_place(|| c.wait_reconciles("redis", 4));
    let (rounds, seen) = poller.finish().await;
    let expected: BTreeSet<String> = f
        .members
        .iter()
        .flat_map(|m| {
            [
                format!("{m}: Namespace {NS}"),
                format!("{m}: Service {NS}/redis"),
                format!("{m}: ConfigMap {NS}/redis-conf"),
                format!("{m}: StatefulSet {NS}/redis"),
            ]
        })
        .collect();
    assert_eq!(seen, expected, "nothing new appeared anywhere over {rounds} polls");
    let changed = f.sandbox.spanset_changes_since(&mark, &f.members);
    assert!(changed.is_empty(), "spanset wrote in members after the template was refused: {changed:?}");
    for (m, was) in f.members.iter().zip(&before) {
        let member = f.member(m).await;
        assert_eq!(&versions(&member).await, was, "{m}: nothing already written changed");
        let svc = Api::<Service>::namespaced(member, NS).get("redis").await.unwrap();
        let selector = svc.spec.and_then(|s| s.selector).unwrap_or_default();
        assert_eq!(selector.get("app").map(String::as_str), Some("redis"), "{m}: the Service still selects the pods");
    }
    f.assert_ledger_clean();
}

/// A member's own admission policy that refuses the carried ConfigMap `redis-conf`.
async fn refuse_carried_config(member: &Client) {
    let policy: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "no-redis-conf"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "object.metadata.name != 'redis-conf'",
                "message": "redis-conf may not be copied into this cluster"}]
        }
    }))
    .unwrap();
    let binding: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "no-redis-conf"},
        "spec": {"policyName": "no-redis-conf", "validationActions": ["Deny"]}
    }))
    .unwrap();
    for (o, plural) in [(policy, "validatingadmissionpolicies"), (binding, "validatingadmissionpolicybindings")] {
        let ar = kube::api::ApiResource {
            group: "admissionregistration.k8s.io".into(),
            version: "v1".into(),
            api_version: "admissionregistration.k8s.io/v1".into(),
            kind: o.types.as_ref().unwrap().kind.clone(),
            plural: plural.into(),
        };
        Api::<DynamicObject>::all_with(member.clone(), &ar).create(&PostParams::default(), &o).await.expect("policy");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_carried_object_a_member_refuses_writes_nothing_anywhere_until_allowed() {
    let mut f = Federation::start(&["east", "west"]).await;
    // West's policy refuses spanset's writes on purpose; the test checks the refusals itself.
    f.refusals_expected = true;
    let west = f.member("west").await;
    refuse_carried_config(&west).await;
    let c = Controller::start(&f.sandbox, "controller");
    let api = host_namespace(&f).await;
    let mark = f.sandbox.account();
    let poller = Poller::start(&f).await;
    api.create(&PostParams::default(), &federation(&f, "carrier")).await.expect("created");
    let msg = condition(&api, "carrier", "Blocked", "CarriedObjectRefused").await;
    assert!(msg.starts_with("spec.migration.carry[0]: west refused it (422): "), "{msg}");
    assert!(msg.contains("redis-conf may not be copied"), "the member's message: {msg}");
    tokio::task::block_in_place(|| c.wait_reconciles("carrier", 4));
    let (rounds, seen) = poller.finish().await;
    assert!(rounds >= 2, "the members were polled {rounds} times");
    assert!(seen.is_empty(), "a refused federation wrote in members (seen over {rounds} polls): {seen:?}");
    let changed = f.sandbox.spanset_changes_since(&mark, &f.members);
    assert!(changed.is_empty(), "a refused federation wrote in members: {changed:?}");

    // West's administrator lifts the policy: everything is written once the refusal is checked
    // again.
    let ar = kube::api::ApiResource {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        kind: "ValidatingAdmissionPolicyBinding".into(),
        plural: "validatingadmissionpolicybindings".into(),
    };
    Api::<DynamicObject>::all_with(west, &ar).delete("no-redis-conf", &Default::default()).await.expect("lifted");
    wait_running(&f, &api, "carrier").await;
    f.assert_ledger_clean();
}
