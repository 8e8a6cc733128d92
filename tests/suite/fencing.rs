//! Leadership fences writes: a stale leader's member writes are refused with 409 once a newer
//! term has stamped the object, it steps down when it sees the stamp, and a leader paused past
//! its lease (SIGSTOP) writes nothing after it resumes while its successor moves ordinals.

use crate::support;

use std::sync::Arc;

use actix::Actor;
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use spanset::{
    cli::sandbox::example,
    controller::{
        labels::TERM,
        leader::Leadership,
        member::objects::{FederationKey, statefulset},
        messages::{WriteError, WriteStatefulSet},
        metrics::Metrics,
        watcher::ClusterWatcher,
    },
    plan::Slice,
};
use support::federation::{Controller, Federation};

#[actix::test]
async fn a_stale_leaders_write_is_refused_with_409_and_it_steps_down_on_seeing_the_newer_term() {
    let f = Federation::start(&["east"]).await;
    // Both leaders write as spanset's member identity, as they do in production.
    let east = f.spanset_identity("east").await;
    let stale = Leadership::fixed(1);
    let watcher = ClusterWatcher::new(
        "east".into(),
        "context \"east\"".into(),
        east.clone(),
        f.host.clone(),
        stale.clone(),
        Arc::new(Metrics::new()),
        Default::default(),
    )
    .start();
    let mut fsts = example(&["east".to_string()]);
    fsts.metadata.uid = Some("u".into());
    let key = FederationKey { namespace: "default".into(), name: "redis".into() };
    let write = |slice: Slice, rv: Option<u64>| WriteStatefulSet {
        key: key.clone(),
        object: statefulset(&fsts, &slice, 1),
        kind: spanset::plan::Backend::StatefulSet,
        expected_rv: rv,
        term: 1,
        dry_run: false,
    };
    let created = watcher.send(write(Slice::empty(), None)).await.unwrap().expect("term 1 creates the StatefulSet");
    // A new leader (term 2) stamps the object.
    let api: Api<StatefulSet> = Api::namespaced(east, "default");
    // (Read and write again when the member's StatefulSet controller updated the status in
    // between, as any careful writer does.)
    loop {
        let mut stamped = api.get("redis").await.unwrap();
        stamped.metadata.annotations.get_or_insert_with(Default::default).insert(TERM.into(), "2".into());
        match api.replace("redis", &PostParams::default(), &stamped).await {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("stamping term 2: {e}"),
        }
    }
    // The stale leader's write, conditional on the version it read in its own term: the
    // member refuses it with 409 whatever the writer believes.
    let grow = Slice { start: 0, replicas: 3, ..Slice::empty() };
    let mut raw: StatefulSet = statefulset(&fsts, &grow, 1).try_parse().expect("an apps/v1 StatefulSet");
    raw.metadata.resource_version = Some(created.rv.to_string());
    match api.replace("redis", &PostParams::default(), &raw).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 409),
        other => panic!("a write conditional on the old version must get 409, not {other:?}"),
    }
    let refused = watcher.send(write(grow.clone(), Some(created.rv))).await.unwrap();
    assert!(
        matches!(refused, Err(WriteError::Conflict) | Err(WriteError::NotLeader(1))),
        "the stale write must not land: {refused:?}"
    );
    support::eventually("the stale leader steps down on seeing term 2", || async { stale.term().is_none() }).await;
    let again = watcher.send(write(grow, Some(created.rv))).await.unwrap();
    assert_eq!(again.unwrap_err(), WriteError::NotLeader(1));
    let stored = api.get("redis").await.unwrap();
    assert_eq!(stored.spec.unwrap().replicas, Some(0), "nothing of the stale leader's landed");
    assert_eq!(stored.metadata.annotations.unwrap()[TERM], "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_paused_past_its_lease_writes_nothing_after_it_resumes() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let first = Controller::start(&f.sandbox, "first");
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "initial slices").await;
    first.signal("-STOP");
    let second = Controller::start(&f.sandbox, "second");
    // The successor stamps every member object with its newer term before moving anything.
    support::eventually("the successor's term on every member StatefulSet", || async {
        let mut terms = Vec::new();
        for m in ["east", "west", "central"] {
            let api: Api<StatefulSet> = Api::namespaced(f.member(m).await, "default");
            terms.push(api.get("redis").await.ok().and_then(|s| s.metadata.annotations?.get(TERM).cloned()));
        }
        terms.iter().all(|t| t.as_deref().is_some_and(|t| t != "1"))
    })
    .await;
    let body = serde_json::json!({"spec": {"placement": {"clusters": [
        {"name": "east", "weight": 1}, {"name": "west", "weight": 0}, {"name": "central", "weight": 0}]}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.unwrap();
    support::eventually("a move under way", || async { !f.status("redis").await.moves.is_empty() }).await;
    let paused_log = first.log_text().len();
    first.signal("-CONT");
    f.wait_settled("redis", &[("east", 0, 6)], "the successor completed the migration").await;
    support::eventually("the resumed process noticed it no longer leads", || async {
        let log = first.log_text();
        log[paused_log..].contains("lost leadership") || log[paused_log..].contains("not leading")
    })
    .await;
    let after = &first.log_text()[paused_log..];
    assert!(!after.contains("wrote member StatefulSet"), "the paused leader wrote after resuming:\n{after}");
    assert!(second.log_text().contains("leading"), "the successor led");
    f.assert_ledger_clean();
}
