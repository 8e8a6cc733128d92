//! One rollout across clusters: a template change replaces the federation's pods in decreasing
//! ordinal order wherever they run, at most `maxUnavailable` of the whole federation
//! unavailable at once, `partition` counted on global ordinals, `OnDelete` honoured.
//! Availability is judged from the sandbox ledger's Ready spans at every instant, never by
//! polling.

use kube::api::{Api, Patch, PatchParams};
use spanset_api::FederatedStatefulSet;
use support::{
    eventually,
    federation::{Controller, Federation},
    timeline,
};

use crate::support;

const MEMBERS: [&str; 3] = ["east", "west", "central"];

async fn patch(f: &Federation, name: &str, body: serde_json::Value) {
    f.api().patch(name, &PatchParams::default(), &Patch::Merge(&body)).await.expect("federation patched");
}

fn image(tag: &str) -> serde_json::Value {
    serde_json::json!({"spec": {"template": {"template": {"spec": {"containers": [
        {"name": "redis", "image": format!("redis:{tag}"), "ports": [{"name": "redis", "containerPort": 6379}]}]}}}}})
}

/// Starts three members and a controller, and a federation of `replicas` at weights 1:1:1,
/// settled.
async fn settled(replicas: i32, edit: impl FnOnce(&mut FederatedStatefulSet)) -> (Federation, Controller) {
    settled_with(&[], replicas, edit).await
}

/// [`settled`] on a sandbox started with `flags` (`--kruise`).
async fn settled_with(
    flags: &[&str],
    replicas: i32,
    edit: impl FnOnce(&mut FederatedStatefulSet),
) -> (Federation, Controller) {
    let f = Federation::start_flags(&MEMBERS, flags).await;
    let c = Controller::start(&f.sandbox, "controller");
    let mut fsts = spanset_api::example(&f.members);
    fsts.spec.replicas = replicas;
    edit(&mut fsts);
    let advanced = fsts.spec.backend == spanset_api::Backend::AdvancedStatefulSet;
    f.create(&fsts).await;
    let per = replicas / 3;
    if advanced {
        // Its slices are sets: the status says where they are.
        eventually("settled", || async {
            let s = f.status("redis").await;
            s.ready == Some(format!("{replicas}/{replicas}"))
                && s.moves.is_empty()
                && s.slices.iter().filter(|sl| sl.replicas == per).count() == 3
        })
        .await;
    } else {
        f.wait_settled("redis", &[("east", 0, per), ("west", per, per), ("central", 2 * per, per)], "settled").await;
    }
    (f, c)
}

/// Waits until every pod from `partition` up runs the spec's template and is available.
async fn wait_rolled(f: &Federation, replicas: i32, partition: i32) {
    eventually("the rollout to finish", || async {
        let fsts = f.api().get("redis").await.expect("federation read");
        let s = fsts.status.unwrap_or_default();
        s.observed_generation == fsts.metadata.generation
            && s.updated_replicas == Some(replicas - partition)
            && s.available_replicas == Some(replicas)
            && s.conditions.iter().any(|c| c.type_ == "Updating" && c.status == "False")
    })
    .await;
}

/// Applies `body` and waits for its rollout to finish (from `partition` up); then checks the
/// ledger from the instant of the change: the ordinals first ran `image` in `order`, and never
/// were more than `most` of the federation's pods down at once. Answers the ledger's runs and
/// that instant.
async fn roll(
    f: &Federation,
    body: serde_json::Value,
    image: &str,
    (replicas, partition): (i32, i32),
    order: &[u32],
    most: usize,
) -> (Vec<timeline::Run>, jiff::Timestamp) {
    let t0 = jiff::Timestamp::now();
    patch(f, "redis", body).await;
    wait_rolled(f, replicas, partition).await;
    let t1 = jiff::Timestamp::now();
    let runs = timeline::runs(&f.sandbox, "redis");
    assert_eq!(timeline::update_order(&runs, image, t0), order, "the order {image} was rolled in");
    let (down, at, which) = timeline::most_unavailable(&runs, 0..replicas as u32, t0, t1);
    assert!(down <= most, "{down} pods down at once at {at} (at most {most}): ordinals {which:?}");
    (runs, t0)
}

fn condition(s: &spanset_api::FederatedStatefulSetStatus, type_: &str) -> Option<(String, String, String)> {
    s.conditions.iter().find(|c| c.type_ == type_).map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_replica_rollout_over_three_clusters_never_has_two_pods_down() {
    let (f, _c) = settled(3, |_| {}).await;
    // Never two of a 3-pod quorum down; highest ordinal first.
    roll(&f, image("8"), "redis:8", (3, 0), &[2, 1, 0], 1).await;
    let s = f.status("redis").await;
    assert_eq!(s.current_revision, s.update_revision, "the completed rollout's revision is current");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_replicas_update_five_down_to_zero_one_at_a_time_across_clusters() {
    let (f, _c) = settled(6, |_| {}).await;
    let before = f.status("redis").await;
    let (runs, t0) = roll(&f, image("8"), "redis:8", (6, 0), &[5, 4, 3, 2, 1, 0], 1).await;
    // The next pod goes only once the updated one is Ready.
    for k in 0..5u32 {
        let next_ready = timeline::ready_with(&runs, k + 1, "redis:8").expect("updated and Ready");
        let started = runs.iter().find(|r| r.ordinal == k && r.from >= t0).expect("ordinal replaced").from;
        assert!(
            started >= next_ready,
            "redis-{k} started at {started}, before redis-{} was Ready ({next_ready})",
            k + 1
        );
    }
    let after = f.status("redis").await;
    assert_ne!(after.update_revision, before.update_revision);
    assert_eq!(after.current_revision, after.update_revision);
    assert_eq!((after.current_replicas, after.updated_replicas), (Some(6), Some(6)));
    // A rollback is applying the previous template: it rolls the same way, to the old revision.
    roll(&f, image("7"), "redis:7", (6, 0), &[5, 4, 3, 2, 1, 0], 1).await;
    assert_eq!(f.status("redis").await.update_revision, before.update_revision, "the same template, the same revision");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_partition_of_four_updates_exactly_ordinals_four_and_five() {
    let (f, _c) = settled(6, |_| {}).await;
    let t0 = jiff::Timestamp::now();
    let mut body = image("8");
    body["spec"]["template"]["updateStrategy"] = serde_json::json!({"rollingUpdate": {"partition": 4}});
    patch(&f, "redis", body).await;
    wait_rolled(&f, 6, 4).await;
    let runs = timeline::runs(&f.sandbox, "redis");
    assert_eq!(timeline::update_order(&runs, "redis:8", t0), vec![5, 4], "exactly 4 and 5, highest first");
    for k in 0..4u32 {
        assert_eq!(
            runs.iter().filter(|r| r.ordinal == k).count(),
            1,
            "redis-{k} (below the partition) never restarted"
        );
    }
    let s = f.status("redis").await;
    assert_ne!(s.current_revision, s.update_revision, "a partitioned rollout keeps the old revision current");
    assert_eq!((s.updated_replicas, s.current_replicas), (Some(2), Some(4)));
    // A canary of one ordinal: partition 3 updates exactly 3 (in west, not ordinal 1 of it).
    patch(
        &f,
        "redis",
        serde_json::json!({"spec": {"template": {"updateStrategy": {"rollingUpdate": {"partition": 3}}}}}),
    )
    .await;
    wait_rolled(&f, 6, 3).await;
    let runs = timeline::runs(&f.sandbox, "redis");
    assert_eq!(timeline::update_order(&runs, "redis:8", t0), vec![5, 4, 3]);
    for k in 0..3u32 {
        assert_eq!(runs.iter().filter(|r| r.ordinal == k).count(), 1, "redis-{k} never restarted");
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_rollout_names_its_pod_cluster_and_container_state_and_goes_no_further() {
    // Parallel, so that a fixed template replaces the broken pod without a hand delete (with
    // OrderedReady a StatefulSet waits on it forever, kubernetes/kubernetes#67250).
    let (f, c) = settled(6, |fsts| fsts.spec.template.pod_management_policy = Some("Parallel".into())).await;
    let t0 = jiff::Timestamp::now();
    // The sandbox's kubelets cannot pull an image whose tag says it does not exist.
    patch(&f, "redis", image("8-doesnotexist")).await;
    eventually("Updating=True RolloutStuck naming redis-5 in central", || async {
        let s = f.status("redis").await;
        condition(&s, "Updating").is_some_and(|(st, reason, msg)| {
            st == "True"
                && reason == "RolloutStuck"
                && msg.contains("redis-5 in central")
                && (msg.contains("ImagePullBackOff") || msg.contains("ErrImagePull"))
        })
    })
    .await;
    let stuck_events = |events: Vec<(String, String, String)>| {
        events.into_iter().filter(|(t, r, m)| t == "Warning" && r == "RolloutStuck" && m.contains("redis-5")).count()
    };
    eventually("a RolloutStuck Event", || async { stuck_events(f.events("redis").await) >= 1 }).await;
    // Give the controller every chance to go on wrongly: five more reconciles of the federation.
    c.wait_reconciles("redis", 5);
    assert_eq!(f.status("redis").await.update_partition, Some(5), "the cursor stays at 5 while redis-5 is not Ready");
    let runs = timeline::runs(&f.sandbox, "redis");
    for k in 0..5u32 {
        assert_eq!(runs.iter().filter(|r| r.ordinal == k).count(), 1, "redis-{k} was not touched");
    }
    // The Event is not repeated at every reconcile (an Event's count may grow, not their number).
    assert_eq!(stuck_events(f.events("redis").await), 1, "one RolloutStuck Event");
    // A fixed template rolls on from there.
    patch(&f, "redis", image("8")).await;
    wait_rolled(&f, 6, 0).await;
    let t1 = jiff::Timestamp::now();
    let runs = timeline::runs(&f.sandbox, "redis");
    assert_eq!(timeline::update_order(&runs, "redis:8", t0), vec![5, 4, 3, 2, 1, 0]);
    let (most, at, which) = timeline::most_unavailable(&runs, 0..6, t0, t1);
    assert!(most <= 1, "{most} pods down at once at {at}: ordinals {which:?}");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_delete_replaces_a_pod_only_when_it_is_deleted() {
    let (f, _c) = settled(6, |fsts| {
        fsts.spec.template.update_strategy =
            Some(serde_json::from_value(serde_json::json!({"type": "OnDelete"})).unwrap());
    })
    .await;
    let t0 = jiff::Timestamp::now();
    patch(&f, "redis", image("8")).await;
    // Every member has the new template and has observed it.
    for m in MEMBERS {
        let sts: Api<k8s_openapi::api::apps::v1::StatefulSet> = Api::namespaced(f.member(m).await, "default");
        eventually(&format!("redis:8 observed in {m}"), || async {
            let s = sts.get("redis").await.unwrap();
            let image = s.spec.as_ref().and_then(|s| s.template.spec.as_ref()).map(|p| p.containers[0].image.clone());
            image == Some(Some("redis:8".into()))
                && s.status.as_ref().and_then(|st| st.observed_generation) == s.metadata.generation
        })
        .await;
    }
    eventually("Updating says OnDelete", || async {
        let s = f.status("redis").await;
        condition(&s, "Updating").is_some_and(|(_, r, m)| r == "OnDelete" && m.starts_with("6 pod(s)"))
    })
    .await;
    let runs = timeline::runs(&f.sandbox, "redis");
    assert!(timeline::update_order(&runs, "redis:8", t0).is_empty(), "OnDelete: nothing replaced by itself");
    // Deleting redis-2 (in west) replaces it with the new template.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(f.member("west").await, "default");
    pods.delete("redis-2", &Default::default()).await.expect("pod deleted");
    eventually("redis-2 updated and available", || async {
        let s = f.status("redis").await;
        s.updated_replicas == Some(1) && s.available_replicas == Some(6)
    })
    .await;
    let runs = timeline::runs(&f.sandbox, "redis");
    assert_eq!(timeline::update_order(&runs, "redis:8", t0), vec![2], "only the deleted pod was replaced");
    f.assert_ledger_clean();
}

/// The Advanced StatefulSet backend with in-place updates: the same order and budget, each pod
/// keeping its uid.
fn kruise_in_place(fsts: &mut FederatedStatefulSet) {
    fsts.spec.backend = spanset_api::Backend::AdvancedStatefulSet;
    fsts.spec.template.update_strategy = Some(
        serde_json::from_value(serde_json::json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}})).unwrap(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advanced_statefulsets_update_in_place_five_down_to_zero_one_at_a_time() {
    let (f, _c) = settled_with(&["--kruise"], 6, kruise_in_place).await;
    let (runs, _) = roll(&f, image("8"), "redis:8", (6, 0), &[5, 4, 3, 2, 1, 0], 1).await;
    for k in 0..6u32 {
        assert_eq!(runs.iter().filter(|r| r.ordinal == k).count(), 1, "redis-{k} was updated in place");
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advanced_statefulsets_take_the_partition_on_global_ordinals() {
    let (f, _c) = settled_with(&["--kruise"], 6, kruise_in_place).await;
    let t0 = jiff::Timestamp::now();
    let mut body = image("8");
    body["spec"]["template"]["updateStrategy"] =
        serde_json::json!({"rollingUpdate": {"partition": 3, "podUpdatePolicy": "InPlaceIfPossible"}});
    patch(&f, "redis", body).await;
    wait_rolled(&f, 6, 3).await;
    let runs = timeline::runs(&f.sandbox, "redis");
    assert_eq!(timeline::update_order(&runs, "redis:8", t0), vec![5, 4, 3], "exactly 3 to 5, highest first");
    f.assert_ledger_clean();
}

/// minReadySeconds is judged on the controller's clock alone: with east's clock a minute ahead
/// and west's a minute behind (the times their kubelets write on pods' Ready conditions), the
/// rollout (2 in central, 1 in west, 0 in east) still replaces each pod only once the one
/// above it has been Ready for 10 s, by the ledger's own times. Read against the member's
/// timestamp, west's redis-1 looked Ready for a minute already and 0 went down at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_ready_seconds_holds_whatever_a_members_clock_says() {
    let min_ready = 10;
    let (f, _c) = settled(3, |fsts| fsts.spec.template.min_ready_seconds = Some(min_ready)).await;
    f.sandbox.ctl_ok(&["clock", "east", "60"]);
    f.sandbox.ctl_ok(&["clock", "west", "-60"]);
    let t0 = jiff::Timestamp::now();
    patch(&f, "redis", image("8")).await;
    // Three steps of minReadySeconds each: longer than the usual deadline.
    let start = std::time::Instant::now();
    loop {
        let fsts = f.api().get("redis").await.expect("federation read");
        let s = fsts.status.unwrap_or_default();
        if s.observed_generation == fsts.metadata.generation
            && s.updated_replicas == Some(3)
            && s.available_replicas == Some(3)
            && s.conditions.iter().any(|c| c.type_ == "Updating" && c.status == "False")
        {
            break;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(180), "the rollout did not finish: {s:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let runs = timeline::runs(&f.sandbox, "redis");
    assert_eq!(timeline::update_order(&runs, "redis:8", t0), vec![2, 1, 0]);
    for k in 0..2u32 {
        let above_ready = timeline::ready_with(&runs, k + 1, "redis:8").expect("updated and Ready");
        let old_end = runs.iter().find(|r| r.ordinal == k && r.from < t0).and_then(|r| r.until).expect("replaced");
        let waited = old_end.duration_since(above_ready);
        println!("redis-{k} went down {waited:?} after redis-{} was Ready", k + 1);
        assert!(
            waited >= jiff::SignedDuration::from_secs(min_ready.into()),
            "redis-{k} went down {waited:?} after redis-{} was Ready (minReadySeconds {min_ready})",
            k + 1
        );
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_pod_waits_for_the_updated_one_to_be_ready_for_min_ready_seconds() {
    let (f, _c) = settled(3, |fsts| fsts.spec.template.min_ready_seconds = Some(1)).await;
    let t0 = jiff::Timestamp::now();
    patch(&f, "redis", image("8")).await;
    wait_rolled(&f, 3, 0).await;
    let runs = timeline::runs(&f.sandbox, "redis");
    assert_eq!(timeline::update_order(&runs, "redis:8", t0), vec![2, 1, 0]);
    for k in 0..2u32 {
        let above_ready = timeline::ready_with(&runs, k + 1, "redis:8").expect("updated and Ready");
        // The old pod of k stops only once redis-(k+1) has been Ready for a second.
        let old_end = runs.iter().find(|r| r.ordinal == k && r.from < t0).and_then(|r| r.until).expect("replaced");
        let waited = old_end.duration_since(above_ready);
        assert!(
            waited >= jiff::SignedDuration::from_secs(1),
            "redis-{k} went down {waited:?} after redis-{} was Ready (minReadySeconds 1)",
            k + 1
        );
    }
    f.assert_ledger_clean();
}
