//! Leadership fences writes: a stale leader's member writes are refused with 409 once a newer
//! term has stamped the object, it steps down when it sees the stamp, and a leader paused past
//! its lease (SIGSTOP) with a member write about to leave sends nothing after it resumes while
//! its successor moves ordinals: judged from the requests the members received from spanset's
//! identity, with the members' own term guard taken away so that the controller's rule is
//! what is seen.

use std::sync::Arc;

use actix::Actor;
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use spanset::cli::sandbox::example;
use spanset_api::labels::TERM;
use spanset_controller::{
    actors::{
        messages::{WriteError, WriteStatefulSet},
        watcher::ClusterWatcher,
    },
    leadership::leader::Leadership,
    member::objects::{FederationKey, statefulset},
    telemetry::metrics::Metrics,
};
use spanset_plan::Slice;
use support::federation::{Controller, Federation};

use crate::support;

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
        kind: spanset_plan::Backend::StatefulSet,
        expected_rv: rv,
        term: 1,
        dry_run: false,
        recreate: false,
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

/// A gauge or counter of a controller's `/metrics`, summed over the series whose line starts
/// with `prefix` and mentions `label`.
fn metric(c: &Controller, prefix: &str, label: &str) -> f64 {
    c.metrics_text()
        .lines()
        .filter(|l| l.starts_with(prefix) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The term stamped on `redis` in each member, read strictly: a read that fails fails the test.
async fn stamps(f: &Federation) -> Vec<Option<String>> {
    let mut terms = Vec::new();
    for m in &f.members {
        let api: Api<StatefulSet> = Api::namespaced(f.member(m).await, "default");
        let sts = api.get_opt("redis").await.unwrap_or_else(|e| panic!("{m}: reading StatefulSet redis: {e}"));
        terms.push(sts.and_then(|s| s.metadata.annotations?.get(TERM).cloned()));
    }
    terms
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_paused_past_its_lease_writes_nothing_after_it_resumes() {
    let f = Federation::start(&["east", "west", "central"]).await;
    // The members' own guard against a lower term is taken away: what keeps the resumed
    // leader's held write from being sent is the controller's rule alone.
    for m in &f.members {
        f.delete_bindings(m, &["spanset-member-term"]).await;
    }
    // The first leader holds the member writes of the round that records a move `Starting`
    // until the file exists: it is paused with a write about to leave.
    let go = f.sandbox.dir.path().join("go");
    let failpoint = format!("hold-writes-Starting=return({})", go.display());
    let first = Controller::start_with(&f.sandbox, "first", &[("FAILPOINTS", &failpoint)]);
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "initial slices").await;
    let body = serde_json::json!({"spec": {"placement": {"clusters": [
        {"name": "east", "weight": 1}, {"name": "west", "weight": 0}, {"name": "central", "weight": 0}]}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(&body)).await.unwrap();
    support::eventually("a move recorded Starting, its writes held", || async {
        f.status("redis").await.moves.iter().any(|m| m.phase == "Starting")
    })
    .await;
    support::wait_until("the first leader holding its writes", support::DEADLINE, || {
        first.log_text().contains("failpoint: holding the member writes")
    });
    // The held round is still under way: its end shows in the count once the process resumes.
    let rounds_held = metric(&first, "spanset_reconciles_total{", "default/redis");
    assert_eq!(metric(&first, "spanset_leader ", ""), 1.0, "the first process leads while it holds its writes");
    first.signal("-STOP");

    let second = Controller::start(&f.sandbox, "second");
    // The successor stamps every member StatefulSet with its newer term before moving anything.
    support::eventually("the successor's term on every member StatefulSet", || async {
        stamps(&f).await.iter().all(|t| t.as_deref().is_some_and(|t| t != "1"))
    })
    .await;
    f.wait_settled("redis", &[("east", 0, 6)], "the successor completed the migration").await;
    // Then a quiet spell (no reconcile while the members are probed three times): from here
    // on, nothing the successor has to do is left, so every write request a member receives
    // from spanset's identity is the resumed process's.
    second.wait_quiet("default/redis");
    let marks: Vec<usize> = f.members.iter().map(|m| f.audit(m).len()).collect();
    let account = f.sandbox.account();

    std::fs::write(&go, "").expect("the failpoint's file");
    first.signal("-CONT");
    support::wait_until("the held round to end in the resumed process", support::DEADLINE, || {
        metric(&first, "spanset_reconciles_total{", "default/redis") > rounds_held
    });
    support::wait_until("the resumed process to know it no longer leads", support::DEADLINE, || {
        metric(&first, "spanset_leader ", "") == 0.0
    });
    // Every chance to act wrongly: a quiet spell of the resumed process too.
    first.wait_reconciles("default/redis", 3);
    second.wait_quiet("default/redis");

    for (m, since) in f.members.iter().zip(marks) {
        let sent = f.spanset_write_requests(m, since);
        assert!(
            sent.is_empty(),
            "{m} received writes from spanset's identity after the paused leader resumed: {sent:?}"
        );
    }
    let changed = f.sandbox.spanset_changes_since(&account, &f.members);
    assert!(changed.is_empty(), "spanset changed member objects after the paused leader resumed: {changed:?}");
    assert_eq!(metric(&second, "spanset_leader ", ""), 1.0, "the successor leads throughout");
    assert!(metric(&second, "spanset_leader_term ", "") > 1.0, "in a newer term");
    f.assert_ledger_clean();
}
