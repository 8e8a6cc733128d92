//! The member guards `spanset join` installs, provoked one by one through kubectl, with the
//! refusals expected word for word: run against a sandbox's member and against a real
//! apiserver's, so that both give the same words (and a real apiserver's are the reference).

use super::Kubectl;

/// spanset's member identity, impersonated by the member's administrator.
pub const MEMBER: &str = "system:serviceaccount:spanset-system:spanset-member";

/// kubectl's stderr for a command that must be refused.
pub fn refused(k: &Kubectl, args: &[&str], stdin: Option<&str>) -> String {
    let out = match stdin {
        Some(input) => k.run_with_stdin(args, input),
        None => k.run(args),
    };
    assert!(!out.status.success(), "kubectl {args:?} was not refused: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

/// Provokes every guard of a member holding federation `default/redis`'s StatefulSet `redis`
/// (stamped with `term`) and its pod `pod`, as the member's administrator (`k`, its context
/// set): each refusal is checked word for word, and what the guards must let through (a pod of
/// another name, made with `generateName`) is let through. Two of the refusals are of spanset's
/// own identity (a stale term, a write in kube-system); every write refused changes nothing.
pub fn provoke(k: &Kubectl, term: &str, pod: &str, version: &str) {
    // The guards, as `kubectl get` lists them.
    let rows = |what: &str| -> Vec<Vec<String>> {
        k.ok(&["get", what]).lines().map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
    };
    let policies = rows("validatingadmissionpolicies");
    assert_eq!(policies[0], ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"], "{version}");
    assert!(policies.iter().any(|r| r[..3] == ["spanset-owner-scale", "1", "apps/v1/StatefulSet"]), "{policies:?}");
    assert!(policies.iter().any(|r| r[..3] == ["spanset-member-scope", "3", "<unset>"]), "{policies:?}");
    let bindings = rows("validatingadmissionpolicybindings");
    assert_eq!(bindings[0], ["NAME", "POLICYNAME", "PARAMREF", "AGE"], "{version}");
    assert!(bindings.iter().any(|r| r[..3] == ["spanset-owner", "spanset-owner", "<unset>"]), "{bindings:?}");

    // The administrator scales or patches spanset's StatefulSet by hand.
    let err = refused(k, &["scale", "sts", "redis", "--replicas", "5"], None);
    assert!(
        err.ends_with(
            "statefulsets.apps \"redis\" is forbidden: ValidatingAdmissionPolicy 'spanset-owner-scale' with binding \
             'spanset-owner-scale' denied request: the replicas of StatefulSet default/redis are owned by spanset \
             (FederatedStatefulSet default/redis in the host cluster): scale the federation there, not the member"
        ),
        "{version} scale: {err}"
    );
    let err = refused(k, &["patch", "sts", "redis", "-p", r#"{"spec":{"replicas":5}}"#], None);
    assert_eq!(
        err,
        "Error from server (Forbidden): statefulsets.apps \"redis\" is forbidden: ValidatingAdmissionPolicy \
         'spanset-owner' with binding 'spanset-owner' denied request: the spec of StatefulSet default/redis is \
         owned by spanset (FederatedStatefulSet default/redis in the host cluster): change the federation there, \
         not the member",
        "{version} patch"
    );

    // A pod's federation label removed, which would hide it from spanset's count.
    let err = refused(k, &["label", "pod", pod, "spanset.dev/federation-"], None);
    assert_eq!(
        err,
        format!(
            "Error from server (Forbidden): pods \"{pod}\" is forbidden: ValidatingAdmissionPolicy \
             'spanset-owner-labels' with binding 'spanset-owner-labels' denied request: the spanset.dev/ labels and \
             annotations of pod default/{pod} are owned by spanset (FederatedStatefulSet default/redis in the host \
             cluster): spanset counts the pods of each identity by them, so that no ordinal runs in two clusters"
        ),
        "{version} label"
    );

    // A bare pod bearing an ordinal's name, as a copied manifest or a restore would make it.
    let bare = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "redis-9"},
        "spec": {"containers": [{"name": "redis", "image": "redis:7"}]}}"#;
    let err = refused(k, &["create", "-f", "-"], Some(bare));
    assert_eq!(
        err,
        "Error from server (Forbidden): error when creating \"STDIN\": pods \"redis-9\" is forbidden: \
         ValidatingAdmissionPolicy 'spanset-identity-gate-names' with binding 'spanset-identity-gate-names' denied \
         request: pod default/redis-9 bears the name of a pod of StatefulSet default/redis (FederatedStatefulSet \
         default/redis in the host cluster) without the spanset.dev/identity scheduling gate: only spanset starts a \
         pod of a federation, once no other cluster runs its ordinal",
        "{version} bare pod"
    );
    // A pod named by the apiserver (`generateName`, as every ReplicaSet's and Job's are) beside
    // the federation's StatefulSet is none of spanset's business.
    let other = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}"#;
    let made = k.ok_with_stdin(&["create", "-f", "-", "-o", "name"], other);
    k.ok(&["delete", made.trim(), "--wait=false"]);

    // spanset's own identity, writing with a term below the stored one (a stale leader's
    // delayed write): `kubectl replace` is the PUT spanset's role allows.
    let mut stale: serde_json::Value = serde_json::from_str(&k.ok(&["get", "sts", "redis", "-o", "json"])).unwrap();
    stale["metadata"]["annotations"]["spanset.dev/term"] = serde_json::json!("0");
    let err = refused(k, &["replace", "--as", MEMBER, "-f", "-"], Some(&stale.to_string()));
    assert!(
        err.contains(&format!(
            "ValidatingAdmissionPolicy 'spanset-member-term' with binding 'spanset-member-term' denied request: \
             statefulsets default/redis is stamped with spanset.dev/term {term} and this write carries term 0: a \
             newer spanset leader has written it, this writer is stale"
        )),
        "{version} replace: {err}"
    );

    // spanset's identity may delete Services (its role says so) but not kube-system's.
    k.ok(&["-n", "kube-system", "create", "service", "clusterip", "kube-dns", "--tcp=53:53"]);
    let err = refused(k, &["-n", "kube-system", "delete", "service", "kube-dns", "--as", MEMBER], None);
    assert_eq!(
        err,
        "Error from server (Forbidden): services \"kube-dns\" is forbidden: ValidatingAdmissionPolicy \
         'spanset-member-scope' with binding 'spanset-member-scope' denied request: spanset's member identity \
         writes nothing in namespace kube-system",
        "{version} delete"
    );
    k.ok(&["-n", "kube-system", "delete", "service", "kube-dns"]);
}
