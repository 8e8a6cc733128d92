//! What only the controller can judge ends in a condition naming the problem, and nothing
//! changes in any member: an unknown cluster, a template a member refuses (422), a member that
//! drops `.spec.ordinals`, a kubeconfig Secret missing or unparsable. "Nothing changes" is
//! judged from what the members received from spanset's identity (the sandbox's resource
//! account since a mark), and every read in an assertion fails the test when it fails.

use k8s_openapi::{
    ByteString,
    api::{apps::v1::StatefulSet, core::v1::Secret},
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use spanset::cli::sandbox::example;
use spanset_api::{MemberCluster, MemberClusterSpec, SecretKeyRef};
use support::{
    account::AccountReport,
    federation::{Controller, Federation},
};

use crate::support;

/// Asserts that no member holds a StatefulSet `name` (each read must succeed), and that
/// spanset's identity changed nothing in any member since `mark`: not a StatefulSet, nor a
/// namespace, Service or carried object, not even one written and taken back.
async fn nothing_written(f: &Federation, mark: &AccountReport, name: &str) {
    let changed = f.sandbox.spanset_changes_since(mark, &f.members);
    assert!(changed.is_empty(), "spanset wrote in the members while {name} was refused: {changed:?}");
    for m in &f.members {
        assert_eq!(f.member_slice_now(m, name).await, None, "{m} must hold no StatefulSet {name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_cluster_is_named_and_nothing_is_written() {
    let f = Federation::start(&["east", "west"]).await;
    let mark = f.sandbox.account();
    let c = Controller::start(&f.sandbox, "controller");
    f.create(&f.placing("lost", &["east", "nowhere"])).await;
    let msg = f.wait_condition("lost", "Blocked", "UnknownCluster").await;
    assert!(msg.contains("spec.placement.clusters[1].name") && msg.contains("nowhere"), "{msg}");
    c.wait_reconciles("default/lost", 3);
    nothing_written(&f, &mark, "lost").await;
    support::eventually("a Warning Event naming the field", || async {
        f.events("lost").await.iter().any(|e| e.0 == "Warning" && e.1 == "UnknownCluster" && e.2 == msg)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_a_member_refuses_changes_nothing_in_any_member() {
    let f = Federation::start(&["east", "west"]).await;
    let mark = f.sandbox.account();
    let c = Controller::start(&f.sandbox, "controller");
    let mut bad = example(&f.members);
    bad.metadata.name = Some("bad".into());
    bad.spec.template.template.spec.as_mut().unwrap().containers[0].image = None;
    f.create(&bad).await;
    let msg = f.wait_condition("bad", "Blocked", "TemplateRefused").await;
    assert!(msg.contains("image") && msg.contains("422"), "{msg}");
    c.wait_reconciles("default/bad", 3);
    nothing_written(&f, &mark, "bad").await;

    // A running federation whose template becomes unacceptable keeps what it runs.
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "initial slices").await;
    c.wait_quiet("default/redis");
    let mark = f.sandbox.account();
    let edit = serde_json::json!({"spec": {"template": {"template": {"spec": {"containers": [{"name": "redis"}]}}}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&edit)).await.unwrap();
    let msg = f.wait_condition("redis", "Blocked", "TemplateRefused").await;
    assert!(msg.contains("image"), "{msg}");
    c.wait_reconciles("default/redis", 3);
    let changed = f.sandbox.spanset_changes_since(&mark, &f.members);
    assert!(changed.is_empty(), "spanset wrote in the members after the template became unacceptable: {changed:?}");
    for m in ["east", "west"] {
        let sts: Api<StatefulSet> = Api::namespaced(f.member(m).await, "default");
        let image = sts.get("redis").await.unwrap().spec.unwrap().template.spec.unwrap().containers[0].image.clone();
        assert_eq!(image.as_deref(), Some("redis:7"), "{m} keeps its template");
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_drops_ordinals_gets_no_slice_and_says_why() {
    let f = Federation::start(&["east", "west"]).await;
    f.sandbox.ctl_ok(&["drop-ordinals", "west", "true"]);
    let mark = f.sandbox.account();
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &[("east", 0, 6)], "every ordinal in east").await;
    let msg = f.wait_condition("redis", "Degraded", "MembersExcluded").await;
    assert!(msg.contains("west") && msg.contains("Incompatible"), "{msg}");
    assert!(msg.contains("Kubernetes v1.33.1"), "the member's version is named: {msg}");
    let mcs: Api<MemberCluster> = Api::all(f.host.clone());
    support::eventually("west's MemberCluster says it drops ordinals, and lacks that guard", || async {
        let status = mcs.get("west").await.unwrap().status.unwrap_or_default();
        let lacks = status.guards.iter().any(|g| g.name == "StartOrdinals" && !g.in_force);
        status.keeps_ordinals == Some(false) && lacks
    })
    .await;
    let missing = f.wait_condition("redis", "GuardsMissing", "GuardsMissing").await;
    assert!(missing.contains("west (v1.33.1) lacks StartOrdinals"), "{missing}");
    assert!(!missing.contains("east"), "east keeps every guard: {missing}");
    let written: Vec<_> = f
        .sandbox
        .spanset_changes_since(&mark, &f.members)
        .into_iter()
        .filter(|(m, resource, _)| m == "west" && resource == "statefulsets.apps")
        .collect();
    assert!(written.is_empty(), "no StatefulSet was ever written in west: {written:?}");
    assert_eq!(f.member_slice_now("west", "redis").await, None, "west holds no StatefulSet");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_unparsable_kubeconfig_secret_is_named_and_nothing_is_written() {
    let f = Federation::start(&["east"]).await;
    let mcs: Api<MemberCluster> = Api::all(f.host.clone());
    let secret_ref = |name: &str| MemberClusterSpec {
        kubeconfig_secret: Some(SecretKeyRef { namespace: "default".into(), name: name.into(), key: None }),
        context: None,
        region: None,
        fenced: false,
    };
    mcs.create(&PostParams::default(), &MemberCluster::new("far", secret_ref("far-kubeconfig"))).await.unwrap();
    mcs.create(&PostParams::default(), &MemberCluster::new("garbled", secret_ref("garbled-kubeconfig"))).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(f.host.clone(), "default");
    let mut garbage = Secret::default();
    garbage.metadata.name = Some("garbled-kubeconfig".into());
    garbage.data = Some([("kubeconfig".to_string(), ByteString(b"{not: [a kubeconfig".to_vec()))].into());
    secrets.create(&PostParams::default(), &garbage).await.unwrap();
    let mark = f.sandbox.account();
    let c = Controller::start(&f.sandbox, "controller");
    f.create(&f.placing("far", &["east", "far"])).await;
    let msg = f.wait_condition("far", "Blocked", "MemberUnusable").await;
    assert!(msg.contains("default/far-kubeconfig") && msg.contains("does not exist"), "{msg}");
    f.create(&f.placing("garbled", &["east", "garbled"])).await;
    let msg = f.wait_condition("garbled", "Blocked", "MemberUnusable").await;
    assert!(msg.contains("default/garbled-kubeconfig") && msg.contains("cannot be parsed"), "{msg}");
    assert!(!msg.contains("not: [a kubeconfig"), "the Secret's content is never shown: {msg}");
    c.wait_reconciles("default/far", 3);
    c.wait_reconciles("default/garbled", 3);
    nothing_written(&f, &mark, "far").await;
    nothing_written(&f, &mark, "garbled").await;
}
