//! End to end: the real `spanset run` against a simulated host and members. Each test ends
//! with `ledger --check` over its whole run: no ordinal ever ran in two clusters at once.

use crate::support;

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    coordination::v1::Lease,
    core::v1::{Secret, Service},
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use spanset::cli::sandbox::example;
use support::federation::{Controller, Federation};

fn weights(f: &Federation, w: &[i32]) -> serde_json::Value {
    let clusters: Vec<serde_json::Value> =
        f.members.iter().zip(w).map(|(m, w)| serde_json::json!({"name": m, "weight": w})).collect();
    serde_json::json!({"spec": {"placement": {"clusters": clusters}}})
}

async fn patch(f: &Federation, name: &str, body: serde_json::Value) {
    f.api().patch(name, &PatchParams::default(), &Patch::Merge(&body)).await.expect("federation patched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_federation_is_sliced_across_members_and_scales_up_and_down() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut secret = Secret::default();
    secret.metadata.name = Some("redis-auth".into());
    // Its owner lets federations carry it.
    secret.metadata.labels = Some([("spanset.dev/carry".to_string(), "true".to_string())].into());
    secret.string_data = Some([("password".to_string(), "s3cret".to_string())].into());
    Api::<Secret>::namespaced(f.host.clone(), "default").create(&PostParams::default(), &secret).await.unwrap();
    let mut fsts = example(&f.members);
    fsts.spec.migration.carry = vec![spanset_api::CarriedObject { kind: "Secret".into(), name: "redis-auth".into() }];
    f.create(&fsts).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "slices 0-1, 2-3, 4-5").await;
    for m in ["east", "west", "central"] {
        let member = f.member(m).await;
        let svc = Api::<Service>::namespaced(member.clone(), "default").get("redis").await.expect("headless Service");
        assert_eq!(svc.spec.unwrap().cluster_ip.as_deref(), Some("None"), "{m}: headless");
        let copy = Api::<Secret>::namespaced(member, "default").get("redis-auth").await.expect("carried Secret");
        assert_eq!(copy.data.unwrap()["password"].0, b"s3cret", "{m}: the carried Secret's data");
        let sts: Api<StatefulSet> = Api::namespaced(f.member(m).await, "default");
        let labels = sts.get("redis").await.unwrap().metadata.labels.unwrap();
        assert_eq!(labels["spanset.dev/federation-namespace"], "default");
        assert!(labels.contains_key("spanset.dev/federation-uid"), "{m}: ownership labels");
    }
    // An edit of the carried Secret reaches every member, though nothing else changed.
    let edit = serde_json::json!({"stringData": {"password": "rotated"}});
    Api::<Secret>::namespaced(f.host.clone(), "default")
        .patch("redis-auth", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&edit))
        .await
        .unwrap();
    for m in ["east", "west", "central"] {
        let secrets: Api<Secret> = Api::namespaced(f.member(m).await, "default");
        support::eventually(&format!("the rotated password in {m}"), || async {
            secrets.get("redis-auth").await.is_ok_and(|s| s.data.is_some_and(|d| d["password"].0 == b"rotated"))
        })
        .await;
    }
    patch(&f, "redis", serde_json::json!({"spec": {"replicas": 9}})).await;
    // onScale: Keep (the default): the new ordinals go to central, whose slice borders them,
    // and the scale-down removes the highest where they run; nothing moves (tests/suite/scaling.rs).
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 5)], "scaled to 9").await;
    patch(&f, "redis", serde_json::json!({"spec": {"replicas": 4}})).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2)], "scaled to 4").await;
    // A template change is written to every member, slices unchanged.
    let image = serde_json::json!({"spec": {"template": {"template": {"spec": {"containers": [
        {"name": "redis", "image": "redis:8", "ports": [{"name": "redis", "containerPort": 6379}]}]}}}}});
    patch(&f, "redis", image).await;
    for m in ["east", "west", "central"] {
        let sts: Api<StatefulSet> = Api::namespaced(f.member(m).await, "default");
        support::eventually(&format!("redis:8 in {m}"), || async {
            let s = sts.get("redis").await.unwrap();
            s.spec.unwrap().template.spec.unwrap().containers[0].image.as_deref() == Some("redis:8")
        })
        .await;
    }
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2)], "slices kept").await;
    support::eventually("the status describes generation 4, Ready", || async {
        let status = f.status("redis").await;
        status.observed_generation == Some(4)
            && status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
    })
    .await;
    f.assert_ledger_clean();
}

/// Polls the federation's status until `done` holds, recording every move phase seen and
/// asserting, at every poll, that no more than `limit` ordinals are moving (the status's own
/// `status.moves`): `maxConcurrentMoves` holds at every instant, not only at the end.
async fn moves_within_limit(
    f: &Federation,
    name: &str,
    limit: usize,
    what: &str,
    done: impl Fn(&spanset_api::FederatedStatefulSetStatus) -> bool,
) -> std::collections::BTreeSet<String> {
    let mut phases = std::collections::BTreeSet::new();
    let start = std::time::Instant::now();
    loop {
        let status = f.status(name).await;
        assert!(
            status.moves.len() <= limit,
            "{what}: {} ordinals moving at once with maxConcurrentMoves {limit}: {:?}",
            status.moves.len(),
            status.moves
        );
        phases.extend(status.moves.iter().map(|m| m.phase.clone()));
        if done(&status) && status.moves.is_empty() {
            return phases;
        }
        assert!(start.elapsed() < support::DEADLINE * 2, "{what}: {status:?}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_move_every_ordinal_to_one_member_and_back_one_safe_step_at_a_time() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let fsts = example(&f.members);
    assert_eq!(fsts.spec.migration.max_concurrent_moves.unwrap_or(1), 1, "the example moves one ordinal at a time");
    f.create(&fsts).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "initial slices").await;
    patch(&f, "redis", weights(&f, &[1, 0, 0])).await;
    // The moves are recorded in the status while they happen, one at a time.
    let phases = moves_within_limit(&f, "redis", 1, "everything to east", |s| {
        s.slices.iter().any(|s| s.cluster == "east" && s.replicas == 6 && s.ready_replicas == 6)
    })
    .await;
    assert!(phases.contains("Draining") || phases.contains("Starting"), "moves were recorded: {phases:?}");
    f.wait_settled("redis", &[("east", 0, 6)], "everything in east").await;
    // Events are recorded once the status that ends a move is stored (and after that round's
    // storage steps): the last one may follow the settled status by a moment.
    support::eventually("an Event for the end of every move", || async {
        let events = f.events("redis").await;
        (2..6).all(|k| {
            events.iter().any(|e| e.1 == "MoveFinished" && e.2.starts_with(&format!("ordinal {k} is Ready in east")))
        })
    })
    .await;
    let events = f.events("redis").await;
    for k in 2..6 {
        assert!(
            events.iter().any(|e| e.1 == "MoveStarted" && e.2.starts_with(&format!("ordinal {k}: "))),
            "an Event for ordinal {k}'s move: {events:?}"
        );
        assert!(
            events.iter().any(|e| e.1 == "MoveFinished" && e.2.starts_with(&format!("ordinal {k} is Ready in east"))),
            "an Event for the end of ordinal {k}'s move: {events:?}"
        );
    }
    patch(&f, "redis", weights(&f, &[1, 1, 1])).await;
    let thirds = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];
    moves_within_limit(&f, "redis", 1, "back to thirds", |s| {
        thirds.iter().all(|(c, start, n)| {
            s.slices.iter().any(|x| x.cluster == *c && x.start == *start && x.replicas == *n && x.ready_replicas == *n)
        })
    })
    .await;
    f.wait_settled("redis", &thirds, "back to thirds").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_edited_scaled_or_deleted_by_hand_is_reverted() {
    let f = Federation::start(&["east", "west"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "initial slices").await;
    let west: Api<StatefulSet> = Api::namespaced(f.member("west").await, "default");
    let scale = serde_json::json!({"spec": {"replicas": 1}});
    if f.sandbox.controller_kubeconfig.is_some() {
        // The members' guards (installed by `spanset join`) refuse the hand edit at the door;
        // an administrator who lifts them (deletes their bindings) still sees spanset revert.
        let e = west.patch("redis", &PatchParams::default(), &Patch::Merge(&scale)).await.unwrap_err();
        assert!(
            matches!(&e, kube::Error::Api(s) if s.code == 403 && s.message.contains("ValidatingAdmissionPolicy 'spanset-owner'")),
            "the guard refused the hand scale: {e}"
        );
        let bindings: Api<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding> =
            Api::all(f.member("west").await);
        for b in ["spanset-owner", "spanset-owner-scale"] {
            bindings.delete(b, &DeleteParams::default()).await.expect("guard lifted");
        }
    }
    west.patch("redis", &PatchParams::default(), &Patch::Merge(&scale)).await.expect("scaled by hand");
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "scale reverted").await;
    let east: Api<StatefulSet> = Api::namespaced(f.member("east").await, "default");
    east.delete("redis", &DeleteParams::default()).await.expect("deleted by hand");
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "deletion reverted").await;
    let image = |s: &StatefulSet| s.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0].image.clone();
    let edit =
        serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "redis", "image": "evil:1"}]}}}});
    west.patch("redis", &PatchParams::default(), &Patch::Strategic(edit)).await.expect("template edited by hand");
    support::eventually("the template edit reverted", || async {
        image(&west.get("redis").await.unwrap()).as_deref() == Some("redis:7")
    })
    .await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_federation_removes_its_member_objects_through_the_finalizer() {
    let f = Federation::start(&["east", "west"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &[("east", 0, 3), ("west", 3, 3)], "initial slices").await;
    let fsts = f.api().get("redis").await.unwrap();
    assert!(fsts.metadata.finalizers.unwrap_or_default().contains(&"spanset.dev/cleanup".to_string()));
    f.api().delete("redis", &DeleteParams::default()).await.expect("deleted");
    support::eventually("the federation and its member objects gone", || async {
        let gone = f.api().get_opt("redis").await.unwrap().is_none();
        gone && f.member_slice("east", "redis").await.is_none() && f.member_slice("west", "redis").await.is_none()
    })
    .await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_stopped_with_sigterm_hands_over_to_a_second_one_which_finishes_the_migration() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let first = Controller::start(&f.sandbox, "first");
    let second = Controller::start(&f.sandbox, "second");
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "initial slices").await;
    patch(&f, "redis", weights(&f, &[0, 0, 1])).await;
    support::eventually("a move under way", || async { !f.status("redis").await.moves.is_empty() }).await;
    let leases: Api<Lease> = Api::namespaced(f.host.clone(), f.lease_namespace());
    let holder =
        || async { leases.get("spanset-leader").await.ok().and_then(|l| l.spec?.holder_identity).unwrap_or_default() };
    let leader = holder().await;
    let (mut stopping, other, other_name) =
        if leader == "first" { (first, second, "second") } else { (second, first, "first") };
    assert!(stopping.terminate().success(), "SIGTERM stops the controller cleanly");
    support::eventually("the other controller holds the Lease", || async { holder().await == other_name }).await;
    f.wait_settled("redis", &[("central", 0, 6)], "the migration finished").await;
    assert!(other.log_text().contains("wrote member StatefulSet"), "the new leader wrote (stamps at least)");
    f.assert_ledger_clean();
}

/// `/scale`: `kubectl scale fsts` changes the federation's replicas (an autoscaler would do the
/// same), and the scale subresource reports what runs and the selector as a string.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scale_targets_the_federation_through_its_scale_subresource() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let c = Controller::start(&f.sandbox, "controller");
    f.create(&example(&f.members)).await;
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 2)], "initial slices").await;
    // Its log goes to a file: plain text, no terminal colour codes.
    let log = c.log_text();
    assert!(
        log.contains("INFO") && !log.contains('\u{1b}'),
        "colour codes in a log file:\n{}",
        log.chars().take(500).collect::<String>()
    );
    let Some(mut k) = support::Kubectl::new(33, &f.sandbox) else { return };
    k.context = Some("host".into());
    let out = k.ok(&["scale", "fsts", "redis", "--replicas", "9"]);
    assert!(out.contains("federatedstatefulset.spanset.dev/redis scaled"), "{out}");
    assert_eq!(f.api().get("redis").await.unwrap().spec.replicas, 9);
    // `onScale: Keep`: the three new ordinals go to central, whose slice borders them; nothing moves.
    f.wait_settled("redis", &[("east", 0, 2), ("west", 2, 2), ("central", 4, 5)], "nine replicas").await;
    assert!(f.events("redis").await.iter().all(|e| e.1 != "MoveStarted"), "a scale moves nothing");
    let scale = k.ok(&["get", "fsts", "redis", "--subresource", "scale", "-o", "json"]);
    let scale: serde_json::Value = serde_json::from_str(&scale).expect("a Scale");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 9);
    assert_eq!(scale["status"]["replicas"], 9, "{scale}");
    assert_eq!(scale["status"]["selector"], "app=redis", "{scale}");
    f.assert_ledger_clean();
}
