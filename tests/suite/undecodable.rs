//! The controller survives objects it cannot decode: stored under an older CRD without the
//! schema's rules, a FederatedStatefulSet whose `backend` or `weight` the types cannot hold
//! gets `Blocked`/`InvalidSpec` naming the field, once, one log line, and never hides the
//! federations beside it; one edited into such a state freezes (nothing written in any member)
//! and can still be deleted.

use k8s_openapi::{
    api::apps::v1::StatefulSet, apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use spanset_api::FederatedStatefulSet;
use support::federation::{Controller, Federation};

use crate::support;

/// Replaces the FederatedStatefulSet CRD by an older one whose spec has no schema (what a
/// cluster that never got the rules holds), so that objects the types cannot hold are stored.
async fn install_crd_without_rules(host: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(host.clone());
    let mut crd = serde_json::to_value(api.get("federatedstatefulsets.spanset.dev").await.unwrap()).unwrap();
    for version in crd["spec"]["versions"].as_array_mut().unwrap() {
        let schema = &mut version["schema"]["openAPIV3Schema"];
        schema["properties"]["spec"] = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        schema.as_object_mut().unwrap().remove("x-kubernetes-validations");
    }
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    api.replace("federatedstatefulsets.spanset.dev", &PostParams::default(), &crd).await.expect("older CRD stored");
}

fn raw_api(f: &Federation) -> Api<DynamicObject> {
    Api::namespaced_with(f.host.clone(), "default", &kube::api::ApiResource::erase::<FederatedStatefulSet>(&()))
}

/// Stores `name`, placed on `clusters`, with `edit` applied to its JSON.
async fn create_raw(f: &Federation, name: &str, clusters: &[&str], edit: impl FnOnce(&mut Value)) {
    let mut v = serde_json::to_value(f.placing(name, clusters)).unwrap();
    v["metadata"]["namespace"] = json!("default");
    edit(&mut v);
    let obj: DynamicObject = serde_json::from_value(v).unwrap();
    raw_api(f).create(&PostParams::default(), &obj).await.expect("the older CRD stores it");
}

/// The stored conditions of `name`, read without decoding the object.
async fn raw_condition(f: &Federation, name: &str, type_: &str) -> Option<Value> {
    let obj = raw_api(f).get(name).await.ok()?;
    obj.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_).cloned()
}

/// Waits until `name` is `Blocked=True InvalidSpec`; answers its message.
async fn wait_invalid(f: &Federation, c: &Controller, name: &str) -> String {
    let start = std::time::Instant::now();
    loop {
        if let Some(cond) = raw_condition(f, name, "Blocked").await
            && cond["status"] == "True"
            && cond["reason"] == "InvalidSpec"
        {
            return cond["message"].as_str().unwrap_or_default().to_string();
        }
        assert!(
            start.elapsed() < support::DEADLINE,
            "{name} never became Blocked/InvalidSpec; the controller's log is {} bytes",
            c.log_text().len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Waits until all 6 pods of `name` are Ready, naming the log's size if they never are.
async fn wait_ready(f: &Federation, c: &Controller, name: &str) {
    let start = std::time::Instant::now();
    loop {
        let status = f.status(name).await;
        if status.ready_replicas == Some(6) {
            return;
        }
        let log = c.log_text();
        assert!(
            start.elapsed() < support::DEADLINE * 2,
            "{name}, beside undecodable objects, was never reconciled: {status:?}; the controller's log is {} \
             bytes, {} lines about a FederatedStatefulSetList",
            log.len(),
            log.lines().filter(|l| l.contains("FederatedStatefulSetList")).count()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Asserts that no member holds a StatefulSet `name` (each read must succeed) and that no
/// member received a write request naming an object `name` from spanset's identity after the
/// first `since` records of its audit (whether it was served or not). A create names its
/// object in its body only: the caller counts those.
async fn nothing_written(f: &Federation, name: &str, since: &[usize]) {
    for (m, since) in f.members.iter().zip(since) {
        let sent: Vec<String> =
            f.spanset_write_requests(m, *since).into_iter().filter(|r| r.ends_with(&format!("/{name}"))).collect();
        assert!(sent.is_empty(), "{m} received writes of {name} from spanset's identity: {sent:?}");
        assert_eq!(f.member_slice_now(m, name).await, None, "{m} must hold no StatefulSet {name}");
    }
}

/// How many records each member's audit holds now: a mark to judge later requests from.
fn audit_marks(f: &Federation) -> Vec<usize> {
    f.members.iter().map(|m| f.audit(m).len()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_that_cannot_be_decoded_is_named_once_and_hides_no_other() {
    let f = Federation::start(&["east", "west"]).await;
    install_crd_without_rules(&f.host).await;
    create_raw(&f, "bad-backend", &["east", "west"], |v| v["spec"]["backend"] = json!("Deployment")).await;
    create_raw(&f, "bad-weight", &["east", "west"], |v| v["spec"]["placement"]["clusters"][0]["weight"] = json!("one"))
        .await;
    // Started after them (its first list holds them), with the default log filter as a user
    // runs it: kube's own warnings included.
    let mark = f.sandbox.account();
    let c = Controller::start_with(&f.sandbox, "c1", &[("RUST_LOG", "")]);
    f.create(&f.placing("first", &["east", "west"])).await;
    // One created later still: every valid federation is seen and reconciled.
    wait_ready(&f, &c, "first").await;
    f.create(&f.placing("second", &["east", "west"])).await;
    wait_ready(&f, &c, "second").await;

    let backend = wait_invalid(&f, &c, "bad-backend").await;
    assert!(backend.contains("spec.backend: unknown variant `Deployment`"), "{backend}");
    let weight = wait_invalid(&f, &c, "bad-weight").await;
    assert!(weight.contains("spec.placement.clusters[0].weight: invalid type: string \"one\""), "{weight}");
    let ready = raw_condition(&f, "bad-backend", "Ready").await.expect("Ready stored");
    assert_eq!((ready["status"].as_str(), ready["reason"].as_str()), (Some("False"), Some("InvalidSpec")));

    // Time passes: many reconciles of the others, and the status report's own write events.
    let before = c.log_text().len();
    c.wait_reconciles("default/second", 20);
    // Over the whole run. A create carries its name in its body, not in its path, so the
    // StatefulSets each member received are counted: first's and second's, nothing more.
    let changed = f.sandbox.account().since(&mark);
    for m in &f.members {
        let created = changed.cluster(m).created("spanset", "statefulsets.apps");
        let spanset = changed.cluster(m).writes.get("spanset").cloned().unwrap_or_default();
        assert_eq!(created, 2, "{m} received StatefulSets of first and second only: spanset's writes {spanset:?}");
    }
    // And no other write request names them, from the audit's first record on.
    let start = vec![0; f.members.len()];
    nothing_written(&f, "bad-backend", &start).await;
    nothing_written(&f, "bad-weight", &start).await;
    let log = c.log_text();
    let about: Vec<&str> = log.lines().filter(|l| l.contains("bad-backend") || l.contains("bad-weight")).collect();
    let bytes: usize = about.iter().map(|l| l.len() + 1).sum();
    eprintln!(
        "log about the undecodable objects: {} lines, {bytes} bytes; whole log {} bytes ({} since they were reported)",
        about.len(),
        log.len(),
        log.len() - before
    );
    // One line each when first seen; nothing repeats while they stay as they are.
    let decode_lines = about.iter().filter(|l| l.contains("cannot be decoded")).count();
    assert_eq!(decode_lines, 2, "one line per object: {about:#?}");
    assert!(!log.contains("FederatedStatefulSetList"), "no list is ever dumped");
    // One Warning Event each, not one per event or reconcile.
    let events = f.events("bad-backend").await;
    let invalid: Vec<_> = events.iter().filter(|e| e.1 == "InvalidSpec").collect();
    assert_eq!(invalid.len(), 1, "{events:?}");

    // Fixed, it is reconciled like any other.
    let fix = json!({"spec": {"backend": "StatefulSet"}});
    raw_api(&f).patch("bad-backend", &PatchParams::default(), &Patch::Merge(&fix)).await.unwrap();
    f.wait_settled("bad-backend", &[("east", 0, 3), ("west", 3, 3)], "the fixed federation").await;
    assert!(c.log_text().contains("can be read again"), "the fix is logged");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_federation_edited_into_an_undecodable_object_freezes_and_can_still_be_deleted() {
    let f = Federation::start(&["east", "west"]).await;
    install_crd_without_rules(&f.host).await;
    let c = Controller::start(&f.sandbox, "c1");
    f.create(&f.placing("redis", &["east", "west"])).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "settled").await;
    let generations = || async {
        let mut out = Vec::new();
        for m in &f.members {
            let sts = Api::<StatefulSet>::namespaced(f.member(m).await, "default").get("redis").await.unwrap();
            out.push((m.clone(), sts.metadata.generation));
        }
        out
    };
    c.wait_quiet("default/redis");
    let written = generations().await;
    let uids = (f.pod_uids_now("east", "redis").await, f.pod_uids_now("west", "redis").await);
    let marks = audit_marks(&f);

    // Hand-edited into something the types cannot hold, while the controller runs (not
    // `spec.replicas`: the `/scale` subresource's own check refuses a replicas that is no
    // integer even without a schema, on a real apiserver as in the sandbox).
    let edit = json!({"spec": {"placement": {"clusters": [{"name": "east", "weight": "eight"}]}}});
    raw_api(&f).patch("redis", &PatchParams::default(), &Patch::Merge(&edit)).await.unwrap();
    let message = wait_invalid(&f, &c, "redis").await;
    assert!(message.contains("spec.placement.clusters[0].weight: invalid type: string \"eight\""), "{message}");
    // Frozen: nothing written in any member while it cannot be read (the placement edit
    // would otherwise have moved west's ordinals).
    c.wait_reconciles("default/redis", 10);
    for (m, since) in f.members.iter().zip(marks) {
        let sent = f.spanset_write_requests(m, since);
        assert!(sent.is_empty(), "{m} received writes from spanset's identity while redis could not be read: {sent:?}");
    }
    assert_eq!(generations().await, written, "no member StatefulSet was written");
    assert_eq!(
        (f.pod_uids_now("east", "redis").await, f.pod_uids_now("west", "redis").await),
        uids,
        "no pod restarted"
    );

    // Deleted while it cannot be read: the member objects go and the finalizer is released.
    raw_api(&f).delete("redis", &DeleteParams::default()).await.unwrap();
    let start = std::time::Instant::now();
    loop {
        let gone = raw_api(&f).get_opt("redis").await.unwrap().is_none();
        let mut members_clear = true;
        for m in &f.members {
            members_clear &= f.member_slice(m, "redis").await.is_none();
        }
        if gone && members_clear {
            break;
        }
        assert!(start.elapsed() < support::DEADLINE * 2, "deletion did not finish: gone={gone}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_is_not_let_go_while_a_federation_never_read_may_run_there() {
    let f = Federation::start(&["east", "spare"]).await;
    install_crd_without_rules(&f.host).await;
    // Stored while no controller ran (or by one that could read it): nobody knows what it runs.
    create_raw(&f, "unread", &["spare"], |v| v["spec"]["backend"] = json!("Deployment")).await;
    let c = Controller::start(&f.sandbox, "c1");
    wait_invalid(&f, &c, "unread").await;
    let mcs: Api<spanset_api::MemberCluster> = Api::all(f.host.clone());
    support::eventually("the controller put its finalizer on spare", || async {
        mcs.get("spare").await.unwrap().metadata.finalizers.unwrap_or_default().iter().any(|f| f.contains("spanset"))
    })
    .await;
    mcs.delete("spare", &DeleteParams::default()).await.expect("delete accepted");
    support::eventually("the deletion is held, naming the federation that cannot be read", || async {
        assert!(mcs.get_opt("spare").await.unwrap().is_some(), "spare is kept while the federation cannot be read");
        f.events("spare")
            .await
            .iter()
            .any(|e| e.1 == "DeletionHeld" && e.2.contains("default/unread: cannot be decoded"))
    })
    .await;
    // Once the federation is gone, nothing holds the member any more.
    raw_api(&f).delete("unread", &DeleteParams::default()).await.unwrap();
    support::eventually("spare goes once nothing holds it", || async { mcs.get_opt("spare").await.unwrap().is_none() })
        .await;
}
