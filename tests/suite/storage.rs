//! Storage handover end to end on the sandbox's shared storage: with `migration.storage: Move`
//! each moved ordinal's volume arrives with it (the data marker written in the source is read
//! in the destination); `Detached` gives the destination a fresh claim; a volume tied to a node
//! stops its move with a condition naming the PV, and nothing is deleted.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use spanset::cli::sandbox::example;
use spanset_api::FederatedStatefulSet;
use support::{
    federation::{Controller, Federation},
    timeline, until,
};

use crate::support;

fn federation(members: &[String], storage: &str, class: Option<&str>) -> FederatedStatefulSet {
    let mut f = serde_json::to_value(example(members)).unwrap();
    f["spec"]["migration"]["storage"] = storage.into();
    if let Some(class) = class {
        f["spec"]["template"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] = class.into();
    }
    serde_json::from_value(f).unwrap()
}

async fn volume_of(f: &Federation, member: &str, k: u32) -> Option<String> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(f.member(member).await, "default");
    pvcs.get_opt(&format!("data-redis-{k}")).await.ok().flatten()?.spec?.volume_name
}

fn marker(f: &Federation, member: &str, pv: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(&f.sandbox.ctl_ok(&["volume", member, pv])).unwrap();
    v["volume"]["data"].as_str().unwrap_or_default().to_string()
}

async fn everything_to_east(f: &Federation) {
    let body = serde_json::json!({"spec": {"placement": {"clusters": [
        {"name": "east", "weight": 1}, {"name": "west", "weight": 0}]}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(body)).await.unwrap();
}

/// West's ordinals 3-5 with a data marker on each volume; answers their PV names.
async fn marked_west_volumes(f: &Federation) -> Vec<String> {
    let mut pvs = Vec::new();
    for k in 3..6 {
        let pv = until(&format!("west's claim for {k} bound"), || volume_of(f, "west", k)).await;
        f.sandbox.ctl_ok(&["volume", "west", &pv, "--write", &format!("ordinal-{k}")]);
        pvs.push(pv);
    }
    pvs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_storage_move_each_ordinal_arrives_with_its_volume_and_data() {
    let f = Federation::start(&["east", "west"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f.members, "Move", None)).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "halves").await;
    let pvs = marked_west_volumes(&f).await;
    everything_to_east(&f).await;
    f.wait_settled("redis", &[("east", 0, 6)], "everything in east").await;
    for (k, pv) in (3..6).zip(&pvs) {
        assert_eq!(volume_of(&f, "east", k).await.as_deref(), Some(pv.as_str()), "ordinal {k} kept its volume");
        assert_eq!(marker(&f, "east", pv), format!("ordinal-{k}"), "ordinal {k}'s data arrived with it");
        let west: Api<PersistentVolume> = Api::all(f.member("west").await);
        let policy = west.get(pv).await.unwrap().spec.unwrap().persistent_volume_reclaim_policy;
        assert_eq!(policy.as_deref(), Some("Retain"), "the source keeps the volume");
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_storage_gives_the_destination_a_fresh_claim() {
    let f = Federation::start(&["east", "west"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f.members, "Detached", None)).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "halves").await;
    let pvs = marked_west_volumes(&f).await;
    everything_to_east(&f).await;
    f.wait_settled("redis", &[("east", 0, 6)], "everything in east").await;
    for (k, pv) in (3..6).zip(&pvs) {
        let fresh = volume_of(&f, "east", k).await.expect("a claim in east");
        assert_ne!(&fresh, pv, "ordinal {k} got a new volume");
        assert_eq!(marker(&f, "east", &fresh), "", "with no data");
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_tied_to_a_node_stops_its_move_naming_the_pv_and_nothing_is_deleted() {
    let f = Federation::start(&["east", "west"]).await;
    let c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f.members, "Move", Some("local"))).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "halves").await;
    let pvs = marked_west_volumes(&f).await;
    everything_to_east(&f).await;
    let message = until("a condition naming the PV", || async {
        let status = f.status("redis").await;
        let c = status.conditions.iter().find(|c| c.type_ == "Progressing" && c.reason == "HandoverRefused");
        c.map(|c| c.message.clone())
    })
    .await;
    assert!(pvs.iter().any(|pv| message.contains(pv.as_str())), "{message}");
    assert!(message.contains("nodeAffinity"), "{message}");
    // The refused ordinal (5, the first to leave) is held: east never takes it, however many
    // reconciles the controller gets to act wrongly in; the ledger judges the whole run.
    tokio::task::block_in_place(|| c.wait_reconciles("redis", 3));
    let runs = timeline::runs(&f.sandbox, "redis");
    let in_east: Vec<_> = runs.iter().filter(|r| r.cluster == "east" && r.ordinal == 5).collect();
    assert!(in_east.is_empty(), "ordinal 5 ran in east: {in_east:?}");
    assert!(f.member_slice("east", "redis").await.is_some_and(|(s, r)| s + r <= 5));
    for (k, pv) in (3..6).zip(&pvs) {
        assert_eq!(volume_of(&f, "west", k).await.as_deref(), Some(pv.as_str()), "west keeps claim {k}");
        assert_eq!(marker(&f, "west", pv), format!("ordinal-{k}"));
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_inside_handover_resumes_without_losing_or_duplicating_a_volume() {
    let f = Federation::start(&["east", "west"]).await;
    let mut first = Controller::start(&f.sandbox, "first");
    f.create(&federation(&f.members, "Move", None)).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "halves").await;
    let pvs = marked_west_volumes(&f).await;
    first.terminate();
    let mut crashing =
        Controller::start_with(&f.sandbox, "crashing", &[("FAILPOINTS", "move-handover-released=return")]);
    everything_to_east(&f).await;
    assert_eq!(crashing.wait_exit(), Some(86), "stops inside the handover: {}", crashing.log_text());
    let moves = f.status("redis").await.moves;
    assert!(moves.iter().any(|m| m.phase == "Handover"), "the handover is recorded: {moves:?}");
    let _resumed = Controller::start(&f.sandbox, "resumed");
    f.wait_settled("redis", &[("east", 0, 6)], "everything in east").await;
    for (k, pv) in (3..6).zip(&pvs) {
        assert_eq!(volume_of(&f, "east", k).await.as_deref(), Some(pv.as_str()), "ordinal {k} kept its volume");
        assert_eq!(marker(&f, "east", pv), format!("ordinal-{k}"));
    }
    // One PV object per volume in east: none lost, none duplicated.
    let east: Api<PersistentVolume> = Api::all(f.member("east").await);
    let handles: Vec<String> = east
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|pv| pv.spec.as_ref()?.csi.as_ref().map(|c| c.volume_handle.clone()))
        .collect();
    let unique: std::collections::BTreeSet<&String> = handles.iter().collect();
    assert_eq!(unique.len(), handles.len(), "no volume twice: {handles:?}");
    f.assert_ledger_clean();
}

/// The placement of a, b and c with these weights (c's is 1), b holding at most `b_max`.
fn abc(a: i32, b: i32, b_max: Option<i32>) -> serde_json::Value {
    let mut b = serde_json::json!({"name": "b", "weight": b});
    if let Some(max) = b_max {
        b["maxReplicas"] = max.into();
    }
    serde_json::json!([{"name": "a", "weight": a}, b, {"name": "c", "weight": 1}])
}

/// Four replicas over a, b, c with `storage` (a 0-1, c 2-3, b empty), unreachable after 6 s.
fn four_over_abc(members: &[String], storage: &str, b_max: Option<i32>) -> FederatedStatefulSet {
    let mut f = serde_json::to_value(federation(members, storage, None)).unwrap();
    f["spec"]["replicas"] = 4.into();
    f["spec"]["placement"]["clusters"] = abc(1, 0, b_max);
    f["spec"]["failover"] = serde_json::json!({"policy": "Manual", "unreachableAfterSeconds": 6});
    serde_json::from_value(f).unwrap()
}

/// a's ordinals 0-1 with a data marker on each volume; answers their PV names.
async fn marked(f: &Federation, member: &str, ordinals: std::ops::Range<u32>) -> Vec<String> {
    let mut pvs = Vec::new();
    for k in ordinals {
        let pv = until(&format!("{member}'s claim for {k} bound"), || volume_of(f, member, k)).await;
        f.sandbox.ctl_ok(&["volume", member, &pv, "--write", &format!("ordinal-{k}")]);
        pvs.push(pv);
    }
    pvs
}

async fn weights(f: &Federation, a: i32, b: i32, b_max: Option<i32>) {
    let body = serde_json::json!({"spec": {"placement": {"clusters": abc(a, b, b_max)}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(body)).await.unwrap();
}

/// The federation's condition of `type_`, as `(status, reason, message)`.
async fn condition(f: &Federation, type_: &str) -> Option<(String, String, String)> {
    let status = f.status("redis").await;
    status.conditions.iter().find(|c| c.type_ == type_).map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Whether the status shows `member` holding `[start, start+replicas)`, every pod Ready, and
/// nothing moving (for members that cannot be read directly).
async fn holds(f: &Federation, member: &str, start: i32, replicas: i32) -> bool {
    let status = f.status("redis").await;
    status
        .slices
        .iter()
        .any(|s| s.cluster == member && s.start == start && s.replicas == replicas && s.ready_replicas == replicas)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_move_hands_volumes_over_while_an_unrelated_member_is_unreachable() {
    // With c partitioned, the move of 0-1 from a to b went from Draining straight to Starting
    // and b's pods started on fresh, empty volumes.
    let f = Federation::start(&["a", "b", "c"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&four_over_abc(&f.members, "Move", None)).await;
    f.wait_settled("redis", &[("a", 0, 2), ("c", 2, 2)], "a and c").await;
    let pvs = marked(&f, "a", 0..2).await;
    f.sandbox.ctl_ok(&["partition", "c"]);
    until("c unreachable", || async {
        condition(&f, "ClusterUnreachable").await.filter(|c| c.0 == "True" && c.2.contains("c")).map(|_| ())
    })
    .await;
    weights(&f, 0, 1, None).await;
    // Every claim b ever binds for 0-1 is a's volume: polled over the whole move, not only at its end.
    let start = std::time::Instant::now();
    while !holds(&f, "b", 0, 2).await {
        for (k, pv) in (0..2).zip(&pvs) {
            if let Some(v) = volume_of(&f, "b", k).await {
                assert_eq!(&v, pv, "ordinal {k} in b is bound to a fresh volume, not its own");
            }
        }
        assert!(start.elapsed() < support::DEADLINE * 2, "timed out: {:?}", f.status("redis").await);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for (k, pv) in (0..2).zip(&pvs) {
        assert_eq!(volume_of(&f, "b", k).await.as_deref(), Some(pv.as_str()), "ordinal {k} kept its volume");
        assert_eq!(marker(&f, "b", pv), format!("ordinal-{k}"), "ordinal {k}'s data arrived with it");
    }
    f.sandbox.ctl_ok(&["heal", "c"]);
    weights(&f, 0, 1, Some(2)).await;
    f.wait_settled("redis", &[("b", 0, 2), ("c", 2, 2)], "b and c").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_whose_source_is_lost_holds_only_its_ordinal_until_the_fence() {
    // A handover from a source that stopped answering failed every round and blocked every
    // other write of the federation.
    let f = Federation::start(&["a", "b", "c"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    // Parallel: with OrderedReady, c rightly waits for ordinal 1 to be Ready before it takes 4.
    let mut fsts = four_over_abc(&f.members, "Move", Some(2));
    fsts.spec.template.pod_management_policy = Some("Parallel".into());
    f.create(&fsts).await;
    f.wait_settled("redis", &[("a", 0, 2), ("c", 2, 2)], "a and c").await;
    let pvs = marked(&f, "a", 0..2).await;
    let nodes = f.node_names("a").await;
    // Each request to a takes 1.5 s, so that the handover (three requests per claim) is still
    // running when a is cut off: the test acts inside the risky moment, not after it.
    f.sandbox.ctl_ok(&["latency", "a", "1500"]);
    weights(&f, 0, 1, Some(2)).await;
    until("a handover under way", || async {
        f.status("redis").await.moves.iter().find(|m| m.phase == "Handover").map(|m| m.ordinal)
    })
    .await;
    f.sandbox.ctl_ok(&["partition", "a"]);
    until("a unreachable", || async {
        condition(&f, "ClusterUnreachable").await.filter(|c| c.0 == "True" && c.2.contains("a (")).map(|_| ())
    })
    .await;
    // Another change goes ahead meanwhile: c takes a new ordinal 4.
    f.api()
        .patch("redis", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"replicas": 5}})))
        .await
        .unwrap();
    let start = std::time::Instant::now();
    while !holds(&f, "c", 2, 3).await {
        let b = f.member_slice("b", "redis").await.unwrap_or((0, 0));
        assert_eq!(b.1, 0, "b takes nothing of a's while a is neither reachable nor fenced");
        assert!(start.elapsed() < support::DEADLINE * 2, "c never grew: {:?}", f.status("redis").await);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let waiting = condition(&f, "Progressing").await.unwrap();
    assert_eq!(waiting.1, "HandoverWaiting", "{waiting:?}");
    assert!(waiting.2.contains("a is unreachable"), "{waiting:?}");
    assert_eq!(f.member_slice("b", "redis").await.map(|s| s.1), Some(0), "0-1 still wait for their volumes");
    // a is lost for good: its machines power off, an operator fences it, and its ordinals start in b on
    // fresh claims (failover), which a condition says.
    f.sandbox.ctl_ok(&["latency", "a", "0"]);
    lose_nodes(&f, "a", &nodes).await;
    let out = f.spanset(&["fence", "a", "--reason", "lost", "--force"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = until("a condition naming the volumes left in a", || async {
        let d = condition(&f, "Degraded").await?;
        d.2.contains("left in fenced a").then_some(d.2)
    })
    .await;
    assert!(said.contains("failover: it starts on fresh claims"), "{said}");
    until("b holds 0-1", || async { holds(&f, "b", 0, 2).await.then_some(()) }).await;
    for (k, pv) in (0..2).zip(&pvs) {
        let fresh = volume_of(&f, "b", k).await.expect("a claim in b");
        assert_ne!(&fresh, pv, "ordinal {k} starts on a fresh claim");
    }
    let events = f.events("redis").await;
    assert!(events.iter().any(|e| e.1 == "VolumesLeftBehind" && e.2.contains("fenced a")), "{events:?}");
    f.assert_ledger_clean();
}

/// Powers `nodes` of `member` off (their containers stop: a real loss, not a lost network) and
/// waits until the ledger has its pods stopped.
async fn lose_nodes(f: &Federation, member: &str, nodes: &[String]) {
    for node in nodes {
        f.sandbox.ctl_ok(&["node-down", member, node, "--power-off"]);
    }
    until(&format!("{member}'s pods recorded as stopped"), || async {
        let ledger: serde_json::Value = serde_json::from_str(&f.sandbox.ctl_ok(&["ledger"])).ok()?;
        let mine: Vec<&serde_json::Value> =
            ledger["incarnations"].as_array()?.iter().filter(|e| e["cluster"] == member).collect();
        mine.iter().all(|e| !e["runningUntil"].is_null()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_ordinal_that_returns_never_starts_on_its_older_claim() {
    // Once, redis-1 came back to east on the claim it left there, holding data older than its
    // run in west, and nothing said so.
    let f = Federation::start(&["east", "west"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut fsts = serde_json::to_value(federation(&f.members, "Detached", None)).unwrap();
    fsts["spec"]["replicas"] = 2.into();
    fsts["spec"]["placement"]["clusters"] =
        serde_json::json!([{"name": "east", "weight": 1}, {"name": "west", "weight": 0}]);
    f.create(&serde_json::from_value(fsts).unwrap()).await;
    f.wait_settled("redis", &[("east", 0, 2)], "both in east").await;
    let old = until("east's claim for 1 bound", || volume_of(&f, "east", 1)).await;
    f.sandbox.ctl_ok(&["volume", "east", &old, "--write", "older"]);
    let place = |east: i32, west: i32| {
        serde_json::json!({"spec": {"placement": {"clusters": [
            {"name": "east", "weight": east}, {"name": "west", "weight": west}]}}})
    };
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(place(0, 1))).await.unwrap();
    f.wait_settled("redis", &[("west", 0, 2)], "both in west").await;
    let there = until("west's claim for 1 bound", || volume_of(&f, "west", 1)).await;
    f.sandbox.ctl_ok(&["volume", "west", &there, "--write", "newer"]);
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(place(1, 0))).await.unwrap();
    // Over the whole return, east's claim for 1 is never the older one.
    let start = std::time::Instant::now();
    loop {
        let settled = f.status("redis").await.moves.is_empty()
            && f.member_slice("east", "redis").await == Some((0, 2))
            && f.status("redis").await.ready.as_deref() == Some("2/2");
        let bound = volume_of(&f, "east", 1).await;
        assert_ne!(bound.as_deref(), Some(old.as_str()), "redis-1 is back in east on its older claim");
        if settled && bound.is_some() {
            break;
        }
        assert!(start.elapsed() < support::DEADLINE * 2, "never settled: {:?}", f.status("redis").await);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let fresh = volume_of(&f, "east", 1).await.unwrap();
    assert_eq!(marker(&f, "east", &fresh), "", "a fresh claim (Detached): the application re-replicates");
    // Nothing silent: an Event names the claim retired and the volume kept (staleClaims: Release).
    let events = f.events("redis").await;
    assert!(
        events.iter().any(|e| e.1 == "StaleClaimRetired" && e.2.contains("claim data-redis-1") && e.2.contains(&old)),
        "{events:?}"
    );
    let east: Api<PersistentVolume> = Api::all(f.member("east").await);
    let kept = east.get(&old).await.expect("the older volume is kept");
    assert_eq!(kept.spec.unwrap().persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
    assert_eq!(marker(&f, "east", &old), "older", "its data is there for an operator");
    f.assert_ledger_clean();
}

/// Two replicas of a federation with `storage`, both in east, and an older claim of redis-1
/// left in west (its volume marked `older`): the start of both stale-claim tests. Answers the
/// federation, its controller and the older claim's volume.
async fn both_in_east_with_an_older_claim_in_west(storage: &str) -> (Federation, Controller, String) {
    let f = Federation::start(&["east", "west"]).await;
    let mut first = Controller::start(&f.sandbox, "first");
    let mut fsts = serde_json::to_value(federation(&f.members, storage, None)).unwrap();
    fsts["spec"]["replicas"] = 2.into();
    fsts["spec"]["placement"]["clusters"] =
        serde_json::json!([{"name": "east", "weight": 1}, {"name": "west", "weight": 0}]);
    f.create(&serde_json::from_value(fsts).unwrap()).await;
    f.wait_settled("redis", &[("east", 0, 2)], "both in east").await;
    // The older claim appears while no controller runs (restored from a backup, say): a
    // running one retires a claim of an ordinal left outside its home at once (Detached).
    first.terminate();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(f.member("west").await, "default");
    // As a claim of the federation's StatefulSet carries (its claim template's labels): one
    // that is not spanset's may not be deleted by spanset's identity, and the move would hold.
    let leftover: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "data-redis-1", "labels": {"app": "redis", "spanset.dev/federation": "redis"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
    .unwrap();
    pvcs.create(&Default::default(), &leftover).await.unwrap();
    let stale = until("west's older claim bound", || volume_of(&f, "west", 1)).await;
    f.sandbox.ctl_ok(&["volume", "west", &stale, "--write", "older"]);
    let c = Controller::start(&f.sandbox, "controller");
    (f, c, stale)
}

/// Spreads the federation 1:1 over east and west and polls until redis-1 is settled in west,
/// running `check` on the volume bound to its claim there whenever its pod exists: the whole
/// move, not only its end.
async fn spread_watching_redis_1_in_west(f: &Federation, check: impl Fn(Option<String>)) {
    let body = serde_json::json!({"spec": {"placement": {"clusters": [
        {"name": "east", "weight": 1}, {"name": "west", "weight": 1}]}}});
    f.api().patch("redis", &PatchParams::default(), &Patch::Merge(body)).await.unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(f.member("west").await, "default");
    let start = std::time::Instant::now();
    loop {
        let settled = f.status("redis").await.moves.is_empty()
            && f.member_slice("west", "redis").await == Some((1, 1))
            && f.status("redis").await.ready.as_deref() == Some("2/2");
        if pods.get_opt("redis-1").await.unwrap().is_some() {
            let bound = volume_of(f, "west", 1).await;
            check(bound);
        }
        if settled {
            break;
        }
        assert!(start.elapsed() < support::DEADLINE * 2, "never settled: {:?}", f.status("redis").await);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_storage_move_a_returning_ordinal_gets_its_current_volume_and_the_stale_claim_never_binds() {
    // West holds an older claim for redis-1 (left from an earlier run there); the handover
    // brings east's current volume and the older claim never binds.
    let (f, _c, stale) = both_in_east_with_an_older_claim_in_west("Move").await;
    let current = until("east's claim for 1 bound", || volume_of(&f, "east", 1)).await;
    f.sandbox.ctl_ok(&["volume", "east", &current, "--write", "current"]);
    // Over the whole move: whenever redis-1 has a pod in west, its claim is east's volume.
    spread_watching_redis_1_in_west(&f, |bound| {
        assert_eq!(bound.as_deref(), Some(current.as_str()), "redis-1 runs in west on a claim not its current one");
    })
    .await;
    assert_eq!(marker(&f, "west", &current), "current", "the current data arrived");
    let events = f.events("redis").await;
    assert!(
        events.iter().any(|e| e.1 == "StaleClaimRetired" && e.2.contains("data-redis-1") && e.2.contains(&stale)),
        "{events:?}"
    );
    let west: Api<PersistentVolume> = Api::all(f.member("west").await);
    let kept = west.get(&stale).await.expect("the older volume is kept");
    assert_eq!(kept.spec.unwrap().persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
    assert_eq!(marker(&f, "west", &stale), "older");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_ordinal_arriving_where_an_older_claim_of_it_was_left_never_binds_it() {
    // West holds a claim for redis-1 from a run before (left there by hand here; a member
    // fenced while it ran the ordinal keeps one the same way). redis-1 ran in east since, so
    // that claim must not bind when it arrives: it is retired, once, either as soon as the
    // controller sees it outside the ordinal's home or, if the move starts first, before the
    // ordinal arrives.
    let (f, _c, stale) = both_in_east_with_an_older_claim_in_west("Detached").await;
    // Over the whole move: whenever redis-1 has a pod in west, its claim is not the older one.
    spread_watching_redis_1_in_west(&f, |bound| {
        assert_ne!(bound.as_deref(), Some(stale.as_str()), "redis-1 runs in west on its older claim");
    })
    .await;
    let events = f.events("redis").await;
    let retired: Vec<_> = events
        .iter()
        .filter(|e| e.1 == "StaleClaimRetired" && e.2.contains("data-redis-1") && e.2.contains(&stale))
        .collect();
    assert_eq!(retired.len(), 1, "{events:?}");
    assert!(retired[0].2.contains("arrives in west") || retired[0].2.contains("it left in west"), "{events:?}");
    let west: Api<PersistentVolume> = Api::all(f.member("west").await);
    let kept = west.get(&stale).await.expect("the older volume is kept");
    assert_eq!(kept.spec.unwrap().persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
    assert_eq!(marker(&f, "west", &stale), "older");
    f.assert_ledger_clean();
}
