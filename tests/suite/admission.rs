//! The member's own guards (`deploy/member/admission.yaml`, installed by `spanset join`) seen
//! from the real kubectl, 1.27 and 1.33, against a sandbox that enforces RBAC and evaluates
//! ValidatingAdmissionPolicies ([`member_guards::provoke`], which `real_members` runs against
//! a real apiserver too): an administrator's `kubectl scale` and `kubectl patch` of a spanset
//! StatefulSet, a pod's federation label removed and a bare pod of an ordinal's name are
//! refused with the policy's message, naming spanset as the owner; an update by spanset's own
//! identity carrying a lower `spanset.dev/term` is refused; spanset's identity cannot delete a
//! Service in `kube-system` (RBAC would let it); and nothing changed.

use crate::support;

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::Api;
use support::{
    Kubectl,
    federation::{Controller, Federation},
    member_guards,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_meets_the_members_guards() {
    let mut f = Federation::start_secure(&["west"]).await;
    // This test provokes refusals of spanset's identity on purpose; it checks them itself.
    f.refusals_expected = true;
    let _c = Controller::start(&f.sandbox, "controller");
    let mut redis = f.placing("redis", &["west"]);
    redis.spec.replicas = 2;
    f.create(&redis).await;
    f.wait_settled("redis", &[("west", 0, 2)], "placed").await;
    let west: Api<StatefulSet> = Api::namespaced(f.member("west").await, "default");
    let before = west.get("redis").await.unwrap();
    let term = before.metadata.annotations.as_ref().unwrap()["spanset.dev/term"].clone();

    let mut ran = 0;
    for minor in [27, 33] {
        let Some(mut k) = Kubectl::new(minor, &f.sandbox) else { continue };
        ran += 1;
        k.context = Some("west".into());
        member_guards::provoke(&k, &term, "redis-0", &format!("kubectl 1.{minor}"));
    }
    assert!(ran > 0 || std::env::var_os("CI").is_none(), "no kubectl ran");

    // Nothing of it landed, and the only refusals of spanset's identity are the ones above.
    let after = west.get("redis").await.unwrap();
    assert_eq!(after.spec.as_ref().unwrap().replicas, Some(2));
    assert_eq!(after.metadata.annotations.as_ref().unwrap()["spanset.dev/term"], term);
    let refusals = f.refused_requests();
    assert_eq!(refusals.len(), 2 * ran, "only the provoked refusals: {refusals:#?}");
    f.assert_ledger_clean();
}
