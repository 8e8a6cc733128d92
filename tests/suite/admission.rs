//! The member's own guards (`deploy/member/admission.yaml`, installed by `spanset join`) seen
//! from the real kubectl, 1.27 and 1.33, against a sandbox that enforces RBAC and evaluates
//! ValidatingAdmissionPolicies: an administrator's `kubectl scale` and `kubectl patch` of a
//! spanset StatefulSet are refused with the policy's message, naming spanset as the owner; an
//! update by spanset's own identity carrying a lower `spanset.dev/term` is refused; spanset's
//! identity cannot delete a Service in `kube-system` (RBAC would let it); and nothing changed.

use crate::support;

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::Api;
use support::{
    Kubectl,
    federation::{Controller, Federation},
};

const MEMBER: &str = "system:serviceaccount:spanset-system:spanset-member";

fn refused(k: &Kubectl, args: &[&str], stdin: Option<&str>) -> String {
    let out = match stdin {
        Some(input) => k.run_with_stdin(args, input),
        None => k.run(args),
    };
    assert!(!out.status.success(), "kubectl {args:?} was not refused: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

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

        // The guards, as `kubectl get` lists them.
        let rows = |what: &str| -> Vec<Vec<String>> {
            k.ok(&["get", what]).lines().map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
        };
        let policies = rows("validatingadmissionpolicies");
        assert_eq!(policies[0], ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"], "kubectl 1.{minor}");
        assert!(policies.iter().any(|r| r[..3] == ["spanset-owner-scale", "1", "apps/v1/StatefulSet"]), "{policies:?}");
        assert!(policies.iter().any(|r| r[..3] == ["spanset-member-scope", "3", "<unset>"]), "{policies:?}");
        let bindings = rows("validatingadmissionpolicybindings");
        assert_eq!(bindings[0], ["NAME", "POLICYNAME", "PARAMREF", "AGE"], "kubectl 1.{minor}");
        assert!(bindings.iter().any(|r| r[..3] == ["spanset-owner", "spanset-owner", "<unset>"]), "{bindings:?}");

        // (a) The administrator scales or patches spanset's StatefulSet by hand.
        let err = refused(&k, &["scale", "sts", "redis", "--replicas", "5"], None);
        assert!(
            err.ends_with(
                "statefulsets.apps \"redis\" is forbidden: ValidatingAdmissionPolicy 'spanset-owner-scale' with binding \
                 'spanset-owner-scale' denied request: the replicas of StatefulSet default/redis are owned by spanset \
                 (FederatedStatefulSet default/redis in the host cluster): scale the federation there, not the member"
            ),
            "kubectl 1.{minor} scale: {err}"
        );
        let err = refused(&k, &["patch", "sts", "redis", "-p", r#"{"spec":{"replicas":5}}"#], None);
        assert_eq!(
            err,
            "Error from server (Forbidden): statefulsets.apps \"redis\" is forbidden: ValidatingAdmissionPolicy \
             'spanset-owner' with binding 'spanset-owner' denied request: the spec of StatefulSet default/redis is \
             owned by spanset (FederatedStatefulSet default/redis in the host cluster): change the federation there, \
             not the member",
            "kubectl 1.{minor} patch"
        );

        // (b) spanset's own identity, writing with a term below the stored one (a stale
        // leader's delayed write): `kubectl replace` is the PUT spanset's role allows.
        let mut stale: serde_json::Value = serde_json::from_str(&k.ok(&["get", "sts", "redis", "-o", "json"])).unwrap();
        stale["metadata"]["annotations"]["spanset.dev/term"] = serde_json::json!("0");
        let err = refused(&k, &["replace", "--as", MEMBER, "-f", "-"], Some(&stale.to_string()));
        assert!(
            err.contains(&format!(
                "ValidatingAdmissionPolicy 'spanset-member-term' with binding 'spanset-member-term' denied request: \
                 statefulsets default/redis is stamped with spanset.dev/term {term} and this write carries term 0: a \
                 newer spanset leader has written it, this writer is stale"
            )),
            "kubectl 1.{minor} replace: {err}"
        );

        // (c) spanset's identity may delete Services (its role says so) but not kube-system's.
        k.ok(&["-n", "kube-system", "create", "service", "clusterip", "kube-dns", "--tcp=53:53"]);
        let err = refused(&k, &["-n", "kube-system", "delete", "service", "kube-dns", "--as", MEMBER], None);
        assert_eq!(
            err,
            "Error from server (Forbidden): services \"kube-dns\" is forbidden: ValidatingAdmissionPolicy \
             'spanset-member-scope' with binding 'spanset-member-scope' denied request: spanset's member identity \
             writes nothing in namespace kube-system",
            "kubectl 1.{minor} delete"
        );
        k.ok(&["-n", "kube-system", "delete", "service", "kube-dns"]);
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
