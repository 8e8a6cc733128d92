//! Guarantees per member release, said out loud: the same scenario on a member of Kubernetes
//! 1.33 and one of 1.29 (`spanset sim --cluster-version west=1.29.8`). `spanset join` installs
//! the member's admission policies where they are served and skips them where they are not;
//! the MemberCluster's status lists each guard with whether it is in force; a federation placed
//! on the older member says, in `GuardsMissing`, what it loses there. A pod made by hand with a
//! federation's identity is refused by the 1.33 member itself and admitted by the 1.29 one.

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::PostParams};
use serde_json::json;
use spanset_api::MemberCluster;
use support::federation::{Controller, Federation};

use crate::support;

/// `(name, in force)` of each guard a MemberCluster's status lists.
async fn guards_of(mcs: &Api<MemberCluster>, member: &str) -> (Option<String>, Vec<(String, bool)>) {
    let status = mcs.get(member).await.expect("the MemberCluster").status.unwrap_or_default();
    (status.server_version, status.guards.into_iter().map(|g| (g.name, g.in_force)).collect())
}

/// A pod carrying federation `redis`'s identity label and no identity gate, as an
/// administrator would create it by hand (a copied manifest, a restore).
fn hand_made_pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "redis-by-hand", "labels": {"spanset.dev/federation": "redis"}},
        "spec": {"containers": [{"name": "redis", "image": "redis:7"}]}
    }))
    .expect("a literal pod")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_before_1_30_keeps_no_admission_policy_and_the_federation_says_so() {
    let f = Federation::start_secure_with(&["east", "west"], &["--cluster-version", "west=1.29.8"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&f.placing("redis", &["east", "west"])).await;
    f.create(&f.placing("solo", &["east"])).await;

    let mcs: Api<MemberCluster> = Api::all(f.host.clone());
    let all = |policies: bool| {
        vec![("AdmissionPolicies".to_string(), policies), ("IdentityGate".into(), true), ("StartOrdinals".into(), true)]
    };
    support::eventually("each MemberCluster lists its guards", || async {
        guards_of(&mcs, "east").await == (Some("v1.33.1".into()), all(true))
            && guards_of(&mcs, "west").await == (Some("v1.29.8".into()), all(false))
    })
    .await;

    let missing = f.wait_condition("redis", "GuardsMissing", "GuardsMissing").await;
    assert!(missing.starts_with("west (v1.29.8) lacks AdmissionPolicies: "), "{missing}");
    assert!(!missing.contains("east"), "east keeps every guard: {missing}");
    support::eventually("a federation only in east misses no guard", || async {
        let status = f.status("solo").await;
        status.conditions.iter().any(|c| c.type_ == "GuardsMissing" && c.status == "False")
    })
    .await;

    // The same hand-made pod, by an administrator: east refuses it by itself; west has nothing
    // that could, and admits it (only the controller's own checks are left there).
    let pods = |member: &str| {
        let f = &f;
        let member = member.to_string();
        async move { Api::<Pod>::namespaced(f.member(&member).await, "default") }
    };
    match pods("east").await.create(&PostParams::default(), &hand_made_pod()).await {
        Err(kube::Error::Api(e)) => {
            assert!(e.message.contains("without the spanset.dev/identity scheduling gate"), "{e:?}")
        }
        other => panic!("east admitted a pod with redis's identity and no gate: {other:?}"),
    }
    pods("west").await.create(&PostParams::default(), &hand_made_pod()).await.expect("west, 1.29, admits it");
}

/// A federation with a pod lease on members of 1.29 and 1.28: on 1.29 `GuardsMissing` says that
/// nothing protects its pod Lease there (no admission policies before 1.30); 1.28 runs no native
/// sidecars, which the guard's watch is, so it gets no slice, and `Degraded` says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_lease_on_members_before_1_30_says_what_is_unprotected_and_before_1_29_gets_no_slice() {
    let f =
        Federation::start_secure_with(&["east", "west", "south"], &["--cluster-version", "west=1.29.8,south=1.28.9"])
            .await;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut fsts = f.placing("leased", &["east", "west", "south"]);
    fsts.spec.failover.pod_lease = Some(spanset_api::PodLease { seconds: 30 });
    for c in &mut fsts.spec.template.template.spec.as_mut().unwrap().containers {
        c.command = Some(vec!["redis-server".into()]);
    }
    f.create(&fsts).await;
    // Each member's guards are judged on its own status refresh: wait until both are named.
    let mut missing = f.wait_condition("leased", "GuardsMissing", "GuardsMissing").await;
    let start = std::time::Instant::now();
    while !(missing.contains("west (") && missing.contains("south (")) && start.elapsed() < crate::support::DEADLINE {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        missing = f.wait_condition("leased", "GuardsMissing", "GuardsMissing").await;
    }
    assert!(
        missing.contains("west (v1.29.8) lacks AdmissionPolicies")
            && missing.contains("nor writes of the pod Lease leased-pods"),
        "{missing}"
    );
    let degraded = f.wait_condition("leased", "Degraded", "MembersExcluded").await;
    assert!(
        degraded.contains("south (Incompatible: spec.failover.podLease") && degraded.contains("1.29"),
        "{degraded}"
    );
    assert_eq!(f.member_slice_now("south", "leased").await, None, "nothing written in south");
}
