//! Storage handover end to end on the sandbox's shared storage: with `migration.storage: Move`
//! each moved ordinal's volume arrives with it (the data marker written in the source is read
//! in the destination); `Detached` gives the destination a fresh claim; a volume tied to a node
//! stops its move with a condition naming the PV, and nothing is deleted.

mod support;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use spanset::{api::FederatedStatefulSet, cli::sandbox::example};
use support::federation::{Controller, Federation};

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

/// Polls `get` until it answers something; panics with `what` after the deadline.
async fn until<T, F, Fut>(what: &str, mut get: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = get().await {
            return v;
        }
        assert!(start.elapsed() < support::DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
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
    let _c = Controller::start(&f.sandbox, "controller");
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
    // The refused ordinal (5, the first to leave) is held: east never takes it.
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
