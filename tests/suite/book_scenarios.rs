//! The StatefulSet behaviour of "Understanding StatefulSet behavior" (Kubernetes in Action,
//! 2nd ed.) played on simulated clusters through kube-rs: stable identity and storage, scale
//! down and up, PVC retention, OrderedReady (and its deadlock), and a node failure that leaves
//! the pod Terminating until an operator force-deletes it.

use std::sync::{Arc, atomic::Ordering};

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{PersistentVolumeClaim, Pod},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use spanset_sim::{
    cluster::{Cluster, ClusterConfig, faults::NodeOutage},
    sandbox::fleet::Fleet,
};
use support::{eventually, timeline};

use crate::support;

struct Sim {
    fleet: Fleet,
    cluster: Arc<Cluster>,
    sets: Api<StatefulSet>,
    pods: Api<Pod>,
    pvcs: Api<PersistentVolumeClaim>,
}

async fn sim() -> Sim {
    let configs = ["source", "destination"].map(|n| ClusterConfig { time_factor: 0.01, ..ClusterConfig::named(n) });
    let fleet = Fleet::start(configs.to_vec(), None).await.expect("sandbox starts");
    let client = Client::try_from(kube::Config::new(fleet.servers[0].url().parse().unwrap())).unwrap();
    let cluster = fleet.servers[0].cluster.clone();
    Sim {
        fleet,
        cluster,
        sets: Api::default_namespaced(client.clone()),
        pods: Api::default_namespaced(client.clone()),
        pvcs: Api::default_namespaced(client),
    }
}

/// Waits until the StatefulSet controller and kubelets have each swept `n` more times (woken
/// by resyncs, as idle components sleep): long enough for anything that was going to happen
/// to have happened.
async fn settle(cluster: &Cluster, n: u64) {
    let sts = cluster.counters.statefulset_sweeps.load(Ordering::SeqCst);
    let kubelet = cluster.counters.kubelet_sweeps.load(Ordering::SeqCst);
    eventually("controllers to sweep", || async {
        cluster.faults.resync();
        cluster.counters.statefulset_sweeps.load(Ordering::SeqCst) >= sts + n
            && cluster.counters.kubelet_sweeps.load(Ordering::SeqCst) >= kubelet + n
    })
    .await;
}

fn quiz(replicas: i32, extra: serde_json::Value) -> StatefulSet {
    let mut spec = json!({
        "replicas": replicas, "serviceName": "quiz",
        "selector": {"matchLabels": {"app": "quiz"}},
        "template": {"metadata": {"labels": {"app": "quiz"}}, "spec": {"terminationGracePeriodSeconds": 10, "containers": [{"name": "quiz", "image": "quiz:1"}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": "quiz"}, "spec": spec})).unwrap()
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn ready_pods(s: &Sim) -> Vec<String> {
    let mut names: Vec<String> = s
        .pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| ready(p) && p.metadata.deletion_timestamp.is_none())
        .map(|p| p.name_any())
        .collect();
    names.sort();
    names
}

async fn pvc_uids(s: &Sim) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = s
        .pvcs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap()))
        .collect();
    v.sort();
    v
}

fn claim_of(p: &Pod) -> Option<String> {
    p.spec
        .as_ref()?
        .volumes
        .as_ref()?
        .iter()
        .find_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()))
}

#[tokio::test]
async fn a_deleted_pod_comes_back_with_the_same_name_and_claim() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &quiz(3, json!({}))).await.unwrap();
    eventually("three ready pods", || async { ready_pods(&s).await == ["quiz-0", "quiz-1", "quiz-2"] }).await;
    let old = s.pods.get("quiz-1").await.unwrap();
    let claims = pvc_uids(&s).await;
    s.pods.delete("quiz-1", &DeleteParams::default()).await.unwrap();
    eventually("a new quiz-1", || async {
        s.pods.get_opt("quiz-1").await.unwrap().is_some_and(|p| p.uid() != old.uid() && ready(&p))
    })
    .await;
    let new = s.pods.get("quiz-1").await.unwrap();
    assert_eq!(claim_of(&new).as_deref(), Some("data-quiz-1"));
    assert_eq!(pvc_uids(&s).await, claims, "the same claims, not new ones");
    assert!(s.fleet.ledger.overlaps().is_empty());
}

#[tokio::test]
async fn scale_down_keeps_claims_and_scale_up_reattaches_them() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &quiz(3, json!({}))).await.unwrap();
    eventually("three ready pods", || async { ready_pods(&s).await.len() == 3 }).await;
    let claims = pvc_uids(&s).await;
    assert_eq!(claims.len(), 3);
    s.sets.patch_scale("quiz", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 1}}))).await.unwrap();
    eventually("one pod left", || async { s.pods.list(&ListParams::default()).await.unwrap().items.len() == 1 }).await;
    assert_eq!(pvc_uids(&s).await, claims, "whenScaled: Retain keeps every claim");
    s.sets.patch_scale("quiz", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}}))).await.unwrap();
    eventually("three ready pods again", || async { ready_pods(&s).await.len() == 3 }).await;
    assert_eq!(pvc_uids(&s).await, claims, "scale-up reattaches the same claims");
}

#[tokio::test]
async fn when_scaled_delete_removes_the_claims_of_removed_pods() {
    let s = sim().await;
    let policy = json!({"persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete", "whenDeleted": "Retain"}});
    s.sets.create(&PostParams::default(), &quiz(3, policy)).await.unwrap();
    eventually("three ready pods", || async { ready_pods(&s).await.len() == 3 }).await;
    s.sets.patch_scale("quiz", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 1}}))).await.unwrap();
    eventually("only data-quiz-0 left", || async {
        pvc_uids(&s).await.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>() == ["data-quiz-0"]
    })
    .await;
}

#[tokio::test]
async fn ordered_ready_creates_in_order_and_deadlocks_while_pod_0_is_never_ready() {
    let s = sim().await;
    // Pod 0's readiness probe fails from the start.
    s.cluster.faults.set_pod_ready("default", "quiz-0", Some(false));
    s.sets.create(&PostParams::default(), &quiz(3, json!({}))).await.unwrap();
    eventually("quiz-0 running", || async {
        s.pods
            .get_opt("quiz-0")
            .await
            .unwrap()
            .is_some_and(|p| p.status.and_then(|st| st.phase).as_deref() == Some("Running"))
    })
    .await;
    settle(&s.cluster, 20).await;
    let names: Vec<String> =
        s.pods.list(&ListParams::default()).await.unwrap().items.iter().map(|p| p.name_any()).collect();
    assert_eq!(names, ["quiz-0"], "OrderedReady waits for quiz-0 to be Ready before quiz-1");
    // The probe recovers: the set proceeds, one pod at a time, in order.
    s.cluster.faults.set_pod_ready("default", "quiz-0", None);
    eventually("all three ready", || async { ready_pods(&s).await.len() == 3 }).await;
    let pods = s.pods.list(&ListParams::default()).await.unwrap().items;
    let created =
        |n: &str| pods.iter().find(|p| p.name_any() == n).unwrap().metadata.creation_timestamp.clone().unwrap().0;
    assert!(created("quiz-0") <= created("quiz-1") && created("quiz-1") <= created("quiz-2"));
}

#[tokio::test]
async fn parallel_creates_every_pod_without_waiting() {
    let s = sim().await;
    s.cluster.faults.set_pod_ready("default", "quiz-0", Some(false));
    s.sets.create(&PostParams::default(), &quiz(3, json!({"podManagementPolicy": "Parallel"}))).await.unwrap();
    eventually("all three pods", || async { s.pods.list(&ListParams::default()).await.unwrap().items.len() == 3 })
        .await;
}

#[tokio::test]
async fn a_pod_on_a_failed_node_stays_terminating_until_force_deleted_then_returns() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &quiz(3, json!({}))).await.unwrap();
    eventually("three ready pods", || async { ready_pods(&s).await.len() == 3 }).await;
    let victim = s.pods.get("quiz-1").await.unwrap();
    let node = victim.spec.as_ref().unwrap().node_name.clone().unwrap();
    // The machine is really dead (powered off): what the operator's force delete asserts.
    s.cluster.faults.node_out(&node, NodeOutage::PoweredOff);
    eventually("quiz-1 evicted", || async {
        s.pods.get("quiz-1").await.unwrap().metadata.deletion_timestamp.is_some()
    })
    .await;
    settle(&s.cluster, 30).await;
    let still = s.pods.get("quiz-1").await.unwrap();
    assert_eq!(still.uid(), victim.uid(), "not replaced: the pod object stays, Terminating");
    assert!(still.metadata.deletion_timestamp.is_some());
    // The operator confirms the node is dead: force delete.
    s.pods.delete("quiz-1", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.unwrap();
    eventually("a new quiz-1 running elsewhere", || async {
        s.pods.get_opt("quiz-1").await.unwrap().is_some_and(|p| {
            p.uid() != victim.uid() && ready(&p) && p.spec.as_ref().unwrap().node_name.as_deref() != Some(node.as_str())
        })
    })
    .await;
    assert!(s.fleet.ledger.overlaps().is_empty(), "{:?}", s.fleet.ledger.overlaps());
}

/// The book's warning made visible: a node that only lost its network keeps running its
/// containers, so force-deleting its pod starts a second incarnation of the identity while the
/// first still runs; the ledger records the overlap until the node's kubelet returns and kills
/// the orphaned containers.
#[tokio::test]
async fn force_deleting_a_pod_whose_node_only_lost_its_network_runs_its_identity_twice() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &quiz(3, json!({}))).await.unwrap();
    eventually("three ready pods", || async { ready_pods(&s).await.len() == 3 }).await;
    let victim = s.pods.get("quiz-1").await.unwrap();
    let node = victim.spec.as_ref().unwrap().node_name.clone().unwrap();
    s.cluster.faults.node_out(&node, NodeOutage::Unreachable);
    eventually("quiz-1 evicted", || async {
        s.pods.get("quiz-1").await.unwrap().metadata.deletion_timestamp.is_some()
    })
    .await;
    assert!(s.fleet.ledger.overlaps().is_empty(), "nothing ran twice before the force delete");
    let open = |uid: &str| s.fleet.ledger.entries().iter().any(|e| e.uid == uid && e.running_until.is_none());
    assert!(open(&victim.uid().unwrap()), "an eviction stops nothing on a node out of reach");
    s.pods.delete("quiz-1", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.unwrap();
    eventually("a new quiz-1 running elsewhere", || async {
        s.pods.get_opt("quiz-1").await.unwrap().is_some_and(|p| p.uid() != victim.uid() && ready(&p))
    })
    .await;
    let overlaps = s.fleet.ledger.overlaps();
    assert_eq!(overlaps.len(), 1, "{overlaps:?}");
    assert_eq!(overlaps[0].first.uid, victim.uid().unwrap());
    assert!(overlaps[0].first.running_until.is_none(), "the old containers still run: {:?}", overlaps[0]);
    // The kubelet returns: it finds no pod object for its containers and kills them.
    s.cluster.faults.node_back(&node);
    eventually("the orphaned containers killed by the returning kubelet", || async { !open(&victim.uid().unwrap()) })
        .await;
    assert_eq!(s.fleet.ledger.overlaps().len(), 1, "the overlap stays on the record");
}

/// A powered-off machine that powers on again restarts the containers of its pods that are
/// still bound to it and not being deleted: a new run of the same pod (same uid), recorded
/// from the power-on; its run before ended at the power-off.
#[tokio::test]
async fn a_node_that_powers_on_again_restarts_its_bound_pods_as_new_runs() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &quiz(1, json!({}))).await.unwrap();
    eventually("quiz-0 ready", || async { ready_pods(&s).await == ["quiz-0"] }).await;
    let pod = s.pods.get("quiz-0").await.unwrap();
    let (uid, node) = (pod.uid().unwrap(), pod.spec.unwrap().node_name.unwrap());
    s.cluster.faults.node_out(&node, NodeOutage::PoweredOff);
    let runs = || s.fleet.ledger.entries().into_iter().filter(|e| e.uid == uid).collect::<Vec<_>>();
    eventually("the run ended at the power-off", || async { runs().iter().all(|e| e.running_until.is_some()) }).await;
    s.cluster.faults.node_back(&node);
    eventually("a second run of the same pod, Ready again", || async {
        runs().len() == 2 && ready_pods(&s).await == ["quiz-0"]
    })
    .await;
    let runs = runs();
    assert!(runs[1].running_until.is_none() && runs[1].running_from >= runs[0].running_until.unwrap(), "{runs:?}");
    assert!(s.fleet.ledger.overlaps().is_empty());
}

#[tokio::test]
async fn a_pod_whose_local_volume_is_on_a_dead_node_stays_pending() {
    let s = sim().await;
    let local = json!({"volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]});
    s.sets.create(&PostParams::default(), &quiz(1, local)).await.unwrap();
    eventually("quiz-0 ready", || async { ready_pods(&s).await == ["quiz-0"] }).await;
    let node = s.pods.get("quiz-0").await.unwrap().spec.unwrap().node_name.unwrap();
    s.cluster.faults.set_node_down(&node, true);
    eventually("quiz-0 evicted", || async {
        s.pods.get("quiz-0").await.unwrap().metadata.deletion_timestamp.is_some()
    })
    .await;
    s.pods.delete("quiz-0", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.unwrap();
    eventually("a new quiz-0", || async { s.pods.get_opt("quiz-0").await.unwrap().is_some() }).await;
    settle(&s.cluster, 20).await;
    let pod = s.pods.get("quiz-0").await.unwrap();
    assert_eq!(pod.status.and_then(|st| st.phase).as_deref(), Some("Pending"));
    assert!(pod.spec.unwrap().node_name.is_none(), "it cannot be scheduled away from its volume");
    s.cluster.faults.set_node_down(&node, false);
    eventually("quiz-0 back on its node", || async { ready_pods(&s).await == ["quiz-0"] }).await;
}

/// Changes the pod template's image: a new revision.
async fn new_image(s: &Sim, image: &str) {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "quiz", "image": image}]}}}});
    s.sets.patch("quiz", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
}

fn revision(p: &Pod) -> String {
    p.labels().get("controller-revision-hash").cloned().unwrap_or_default()
}

#[tokio::test]
async fn rolling_updates_go_from_the_highest_ordinal_down_to_the_partition() {
    let s = sim().await;
    let extra = json!({"ordinals": {"start": 3}, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}});
    s.sets.create(&PostParams::default(), &quiz(3, extra)).await.unwrap();
    eventually("three ready pods", || async { ready_pods(&s).await == ["quiz-3", "quiz-4", "quiz-5"] }).await;
    let pod = s.pods.get("quiz-4").await.unwrap();
    assert_eq!(pod.labels().get("apps.kubernetes.io/pod-index").map(String::as_str), Some("4"));
    assert_eq!(pod.labels().get("statefulset.kubernetes.io/pod-name").map(String::as_str), Some("quiz-4"));
    let old = revision(&pod);
    new_image(&s, "quiz:2").await;
    // The partition is relative to ordinals.start: quiz-4 and quiz-5 update, quiz-3 does not.
    eventually("the update above the partition", || async {
        let pods = s.pods.list(&ListParams::default()).await.unwrap().items;
        let rev = |n: &str| pods.iter().find(|p| p.name_any() == n).map(revision);
        rev("quiz-4").is_some_and(|r| r != old) && rev("quiz-5").is_some_and(|r| r != old) && ready_pods_in(&pods) == 3
    })
    .await;
    settle(&s.cluster, 20).await;
    assert_eq!(revision(&s.pods.get("quiz-3").await.unwrap()), old, "below the partition nothing changes");
    let status = s.sets.get("quiz").await.unwrap().status.unwrap();
    assert_ne!(status.update_revision, status.current_revision);
    assert_eq!((status.updated_replicas, status.current_replicas), (Some(2), Some(1)));
    assert_eq!(s.pods.get("quiz-4").await.unwrap().spec.unwrap().containers[0].image.as_deref(), Some("quiz:2"));
    // Lowering the partition to 0 finishes the rollout; then currentRevision catches up.
    s.sets
        .patch(
            "quiz",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})),
        )
        .await
        .unwrap();
    eventually("the rollout to complete", || async {
        let st = s.sets.get("quiz").await.unwrap().status.unwrap();
        st.current_revision == st.update_revision && st.updated_replicas == Some(3) && st.ready_replicas == Some(3)
    })
    .await;
}

fn ready_pods_in(pods: &[Pod]) -> usize {
    pods.iter().filter(|p| ready(p) && p.metadata.deletion_timestamp.is_none()).count()
}

/// kube-controller-manager's rolling update (`updateStatefulSet`) takes one pod down at a time
/// and waits for it to be healthy again before the next, under `Parallel` too (without
/// `maxUnavailable`): judged from the ledger's Ready spans over the whole rollout (every
/// instant, not polled), never two of three ordinals down at once.
#[tokio::test]
async fn a_parallel_rolling_update_takes_one_pod_down_at_a_time() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &quiz(3, json!({"podManagementPolicy": "Parallel"}))).await.unwrap();
    eventually("three ready pods", || async { ready_pods(&s).await.len() == 3 }).await;
    let old = revision(&s.pods.get("quiz-0").await.unwrap());
    let t0 = jiff::Timestamp::now();
    new_image(&s, "quiz:2").await;
    eventually("the rollout to finish: three pods Ready at the new revision", || async {
        let pods = s.pods.list(&ListParams::default()).await.unwrap().items;
        pods.iter().filter(|p| revision(p) != old && ready(p) && p.metadata.deletion_timestamp.is_none()).count() == 3
    })
    .await;
    let runs = timeline::runs_of(&s.fleet.ledger, "quiz");
    let (most, at, which) = timeline::most_unavailable(&runs, 0..3, t0, jiff::Timestamp::now());
    assert_eq!(most, 1, "the rollout took pods down one at a time: {which:?} down at once at {at}");
}

#[tokio::test]
async fn on_delete_updates_a_pod_only_when_it_is_deleted() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &quiz(2, json!({"updateStrategy": {"type": "OnDelete"}}))).await.unwrap();
    eventually("two ready pods", || async { ready_pods(&s).await.len() == 2 }).await;
    let old = revision(&s.pods.get("quiz-1").await.unwrap());
    new_image(&s, "quiz:2").await;
    settle(&s.cluster, 20).await;
    assert_eq!(revision(&s.pods.get("quiz-1").await.unwrap()), old, "OnDelete leaves running pods alone");
    s.pods.delete("quiz-1", &DeleteParams::default()).await.unwrap();
    eventually("quiz-1 recreated at the new revision", || async {
        s.pods.get_opt("quiz-1").await.unwrap().is_some_and(|p| revision(&p) != old && ready(&p))
    })
    .await;
    assert_eq!(revision(&s.pods.get("quiz-0").await.unwrap()), old);
}

#[tokio::test]
async fn scale_down_waits_while_a_pod_is_unready() {
    let s = sim().await;
    // With minReadySeconds, status counts a pod available once Ready for that long.
    s.sets.create(&PostParams::default(), &quiz(3, json!({"minReadySeconds": 30}))).await.unwrap();
    eventually("three available pods", || async {
        s.sets.get("quiz").await.unwrap().status.and_then(|st| st.available_replicas) == Some(3)
    })
    .await;
    // quiz-0 becomes unready; scaling down to 1 must not remove quiz-2 while it is.
    s.cluster.faults.set_pod_ready("default", "quiz-0", Some(false));
    eventually("quiz-0 unready", || async { !ready(&s.pods.get("quiz-0").await.unwrap()) }).await;
    s.sets.patch_scale("quiz", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 1}}))).await.unwrap();
    settle(&s.cluster, 20).await;
    assert_eq!(
        s.pods.list(&ListParams::default()).await.unwrap().items.len(),
        3,
        "scale-down is blocked by an unready pod"
    );
    s.cluster.faults.set_pod_ready("default", "quiz-0", None);
    eventually("the scale-down to finish", || async {
        s.pods.list(&ListParams::default()).await.unwrap().items.len() == 1
    })
    .await;
}

#[tokio::test]
async fn reclaim_delete_removes_the_volume_and_retain_keeps_it_released() {
    let s = sim().await;
    let client = Client::try_from(kube::Config::new(s.fleet.servers[0].url().parse().unwrap())).unwrap();
    let pvs: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(client);
    for name in ["gone", "kept"] {
        let pvc: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})).unwrap();
        s.pvcs.create(&PostParams::default(), &pvc).await.unwrap();
    }
    let volume_of = |name: &'static str| {
        let pvcs = s.pvcs.clone();
        async move { pvcs.get(name).await.unwrap().spec.unwrap().volume_name.unwrap_or_default() }
    };
    eventually("both claims bound", || async {
        !volume_of("gone").await.is_empty() && !volume_of("kept").await.is_empty()
    })
    .await;
    let (gone_pv, kept_pv) = (volume_of("gone").await, volume_of("kept").await);
    pvs.patch(
        &kept_pv,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}})),
    )
    .await
    .unwrap();
    s.pvcs.delete("gone", &DeleteParams::default()).await.unwrap();
    s.pvcs.delete("kept", &DeleteParams::default()).await.unwrap();
    eventually("the Delete volume gone", || async { pvs.get_opt(&gone_pv).await.unwrap().is_none() }).await;
    eventually("the Retain volume released", || async {
        pvs.get(&kept_pv).await.unwrap().status.and_then(|st| st.phase).as_deref() == Some("Released")
    })
    .await;
}

#[tokio::test]
async fn the_same_seed_gives_the_same_uids() {
    let uids = |fleet: &Fleet| {
        let c = fleet.servers[0].cluster.clone();
        let cms = c.resources.by_plural("", "configmaps").unwrap();
        (0..3)
            .map(|i| {
                let obj = c
                    .create(&cms, Some("default"), json!({"metadata": {"name": format!("c{i}")}}), &Default::default())
                    .unwrap();
                obj["metadata"]["uid"].as_str().unwrap().to_string()
            })
            .collect::<Vec<_>>()
    };
    let quiet = || ClusterConfig { nodes: 0, ..ClusterConfig::named("a") };
    let a = Fleet::start(vec![quiet()], None).await.unwrap();
    let b = Fleet::start(vec![quiet()], None).await.unwrap();
    let other = Fleet::start(vec![ClusterConfig { seed: 2, ..quiet() }], None).await.unwrap();
    let (ua, ub, uo) = (uids(&a), uids(&b), uids(&other));
    assert_eq!(ua, ub);
    assert_ne!(ua, uo);
}

/// Shutdown time: a container exits a moment after SIGTERM (default 1 s simulated), not at the
/// end of its 30 s grace period; a slow server (annotation) takes longer, and the grace period
/// still caps it.
#[tokio::test]
async fn containers_exit_promptly_on_sigterm_unless_annotated_slow_and_never_past_the_grace_period() {
    let config = ClusterConfig { time_factor: 0.05, ..ClusterConfig::named("c") };
    let fleet = Fleet::start(vec![config], None).await.expect("sandbox starts");
    let client = Client::try_from(kube::Config::new(fleet.servers[0].url().parse().unwrap())).unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod = |name: &str, shutdown: Option<&str>| -> Pod {
        let annotations = shutdown.map(|s| json!({"sim.spanset.dev/shutdown-seconds": s})).unwrap_or(json!({}));
        serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations},
            "spec": {"terminationGracePeriodSeconds": 30, "containers": [{"name": "c", "image": "i"}]}}))
        .unwrap()
    };
    for (name, shutdown) in [("fast", None), ("slow", Some("20")), ("stubborn", Some("5000"))] {
        pods.create(&Default::default(), &pod(name, shutdown)).await.unwrap();
    }
    eventually("all three running", || async {
        let list = pods.list(&ListParams::default()).await.unwrap();
        list.items.iter().filter(|p| ready(p)).count() == 3
    })
    .await;
    for name in ["fast", "slow", "stubborn"] {
        pods.delete(name, &Default::default()).await.unwrap();
    }
    eventually("the fast pod gone", || async { pods.get_opt("fast").await.unwrap().is_none() }).await;
    assert!(pods.get_opt("slow").await.unwrap().is_some(), "a server annotated slow is still shutting down");
    eventually("the slow pod gone", || async { pods.get_opt("slow").await.unwrap().is_none() }).await;
    eventually("the stubborn pod killed at its grace period", || async {
        pods.get_opt("stubborn").await.unwrap().is_none()
    })
    .await;
}

/// A StatefulSet deleted with its pods orphaned and created again with a field the apiserver
/// refuses to update (here a claim template's label) takes its running pods and revisions back:
/// the same pod uids, owned by the new set, no pod restarted (judged on the ledger), and no pod
/// rolled, as the template is the same.
#[tokio::test]
async fn a_set_recreated_over_its_orphaned_pods_adopts_them_and_restarts_none() {
    let s = sim().await;
    s.sets.create(&PostParams::default(), &quiz(3, json!({}))).await.unwrap();
    eventually("three ready pods", || async { ready_pods(&s).await == ["quiz-0", "quiz-1", "quiz-2"] }).await;
    let uids =
        |pods: Vec<Pod>| -> Vec<(String, String)> { pods.iter().map(|p| (p.name_any(), p.uid().unwrap())).collect() };
    let before = uids(s.pods.list(&ListParams::default()).await.unwrap().items);
    let refused = s
        .sets
        .patch(
            "quiz",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {"team": "a"}}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}})),
        )
        .await
        .expect_err("claim templates cannot be updated");
    assert!(refused.to_string().contains("Forbidden"), "{refused}");
    s.sets
        .delete(
            "quiz",
            &DeleteParams { propagation_policy: Some(kube::api::PropagationPolicy::Orphan), ..DeleteParams::default() },
        )
        .await
        .unwrap();
    eventually("the set gone and its pods orphaned", || async {
        s.sets.get_opt("quiz").await.unwrap().is_none()
            && s.pods.list(&ListParams::default()).await.unwrap().items.iter().all(|p| p.owner_references().is_empty())
    })
    .await;
    let mut recreated = quiz(3, json!({}));
    recreated.spec.as_mut().unwrap().volume_claim_templates.as_mut().unwrap()[0].metadata.labels =
        Some([("team".to_string(), "a".to_string())].into());
    let new = s.sets.create(&PostParams::default(), &recreated).await.unwrap();
    let new_uid = new.uid().unwrap();
    eventually("every pod owned by the new set", || async {
        let pods = s.pods.list(&ListParams::default()).await.unwrap().items;
        pods.len() == 3
            && pods.iter().all(|p| p.owner_references().iter().any(|r| r.uid == new_uid && r.controller == Some(true)))
    })
    .await;
    settle(&s.cluster, 3).await;
    assert_eq!(uids(s.pods.list(&ListParams::default()).await.unwrap().items), before, "the same pods, adopted");
    let runs = timeline::runs_of(&s.fleet.ledger, "quiz");
    assert_eq!(runs.len(), 3, "one incarnation per ordinal over the whole run: {runs:?}");
    assert!(runs.iter().all(|r| r.until.is_none()), "none stopped: {runs:?}");
    let status = s.sets.get("quiz").await.unwrap().status.unwrap();
    assert_eq!(status.ready_replicas, Some(3));
    assert_eq!(status.current_revision, status.update_revision, "the adopted revision is the set's");
}
