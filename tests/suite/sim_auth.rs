//! `spanset sim --auth`: a sandbox that authenticates and authorizes as a real apiserver does.
//! kubectl 1.27–1.33 (over HTTPS, since client-go sends tokens only over TLS) creates
//! ServiceAccounts, mints their tokens, binds Roles and is refused with the apiserver's words;
//! kube-rs sees the exact 401 and 403 `Status`es, token expiry and revocation, access reviews,
//! and the audit log names the rule behind each decision.

use std::sync::Arc;

use k8s_openapi::api::{
    authentication::v1::TokenRequest,
    authorization::v1::SelfSubjectAccessReview,
    core::v1::{ConfigMap, Namespace, Pod, ServiceAccount},
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::json;
use spanset_sim::{
    cluster::{Cluster, ClusterConfig},
    sandbox::{
        fleet::Fleet,
        kubeconfig::{self, Access},
    },
    store::audit::RuleRef,
};
use support::{Kubectl, Sandbox, eventually};

use crate::support;

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: spanset, namespace: spanset-system}
spec:
  replicas: 2
  selector: {matchLabels: {app: spanset}}
  template:
    metadata: {labels: {app: spanset}}
    spec:
      containers: [{name: spanset, image: "ghcr.io/spanset/spanset:0.1.0"}]
"#;

fn kubectl_enforces_tokens_and_rbac(minor: u32) {
    let sandbox = Sandbox::start_with("solo", &["--auth"]);
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    let v = format!("kubectl 1.{minor}");
    assert!(sandbox.banner.iter().any(|l| l.starts_with("cluster solo: https://")), "{:?}", sandbox.banner);
    assert_eq!(k.ok(&["auth", "can-i", "*", "*"]), "yes\n", "{v}: the kubeconfig's user is an administrator");
    k.ok(&["create", "namespace", "spanset-system"]);
    k.ok(&["create", "serviceaccount", "spanset", "-n", "spanset-system"]);
    // A day of simulated time: ten minutes would be six real seconds at the sandbox's time
    // factor, which a loaded machine spends before the last request that uses the token.
    let token = k.ok(&["create", "token", "spanset", "-n", "spanset-system", "--duration", "24h"]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "{v}: a JWT-shaped token: {token}");
    let as_sa = |args: &[&str]| {
        let mut all = vec!["--token", token];
        all.extend_from_slice(args);
        k.run(&all)
    };
    let denied = as_sa(&["get", "pods"]);
    assert!(!denied.status.success());
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains(
            r#"Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:spanset-system:spanset" cannot list resource "pods" in API group "" in the namespace "default""#
        ),
        "{v}: {}",
        String::from_utf8_lossy(&denied.stderr)
    );
    let can = as_sa(&["auth", "can-i", "list", "pods"]);
    assert_eq!((can.status.code(), String::from_utf8_lossy(&can.stdout).trim()), (Some(1), "no"), "{v}");

    k.ok(&["create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", "default"]);
    k.ok(&["create", "rolebinding", "sp-read", "--role=pod-reader", "--serviceaccount=spanset-system:spanset"]);
    let can = as_sa(&["auth", "can-i", "list", "pods"]);
    assert_eq!((can.status.code(), String::from_utf8_lossy(&can.stdout).trim()), (Some(0), "yes"), "{v}");
    assert!(as_sa(&["get", "pods"]).status.success(), "{v}: the Role now allows the list");
    // `kubectl auth can-i --list` (SelfSubjectRulesReview) lists the Role's rule and the
    // bootstrap ones every authenticated user has.
    let list = as_sa(&["auth", "can-i", "--list"]);
    let text = String::from_utf8_lossy(&list.stdout).to_string();
    assert!(list.status.success(), "{v}: {}", String::from_utf8_lossy(&list.stderr));
    let row = |resource: &str| text.lines().find(|l| l.split_whitespace().next() == Some(resource)).map(str::trim_end);
    assert!(row("pods").is_some_and(|l| l.ends_with("[get list]")), "{v}:\n{text}");
    let ssar = row("selfsubjectaccessreviews.authorization.k8s.io");
    assert!(ssar.is_some_and(|l| l.ends_with("[create]")), "{v}:\n{text}");
    assert!(text.lines().any(|l| l.contains("[/version]") && l.contains("[get]")), "{v}: non-resource URLs:\n{text}");
    // Impersonation: the administrator may act as anyone; the ServiceAccount may not.
    let sa = "system:serviceaccount:spanset-system:spanset";
    assert_eq!(k.ok(&["auth", "can-i", "list", "pods", "--as", sa]).trim(), "yes", "{v}");
    let alice = k.fails(&["get", "pods", "--as", "alice", "--as-group", "devs"]);
    assert!(
        alice.contains(
            r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default""#
        ),
        "{v}: {alice}"
    );
    let refused = as_sa(&["get", "pods", "--as", "alice"]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains(
            r#"users "alice" is forbidden: User "system:serviceaccount:spanset-system:spanset" cannot impersonate resource "users" in API group "" at the cluster scope"#
        ),
        "{v}: {}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let elsewhere = as_sa(&["auth", "can-i", "--list", "-n", "kube-system"]);
    assert!(row_absent(&String::from_utf8_lossy(&elsewhere.stdout), "pods"), "{v}: the Role is only in default");
    let delete = as_sa(&["delete", "pod", "x"]);
    assert!(
        String::from_utf8_lossy(&delete.stderr).contains(
            r#"pods "x" is forbidden: User "system:serviceaccount:spanset-system:spanset" cannot delete resource "pods" in API group "" in the namespace "default""#
        ),
        "{v}: {}",
        String::from_utf8_lossy(&delete.stderr)
    );
    let bindings = k.ok(&["get", "rolebindings", "-o", "wide"]);
    let row: Vec<&str> = bindings.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!(
        (row.first(), row.get(1), row.last()),
        (Some(&"sp-read"), Some(&"Role/pod-reader"), Some(&"spanset-system/spanset"))
    );
    let roles = k.ok(&["get", "clusterroles", "-o", "name"]);
    for bootstrap in ["cluster-admin", "system:discovery", "system:basic-user"] {
        assert!(roles.contains(&format!("clusterrole.rbac.authorization.k8s.io/{bootstrap}\n")), "{v}: {roles}");
    }

    let garbage = k.fails(&["--token", "not-a-token", "get", "pods"]);
    assert!(garbage.contains("Unauthorized"), "{v}: {garbage}");
    // A token dies with its ServiceAccount.
    k.ok(&["delete", "serviceaccount", "spanset", "-n", "spanset-system"]);
    let revoked = as_sa(&["get", "pods"]);
    assert!(String::from_utf8_lossy(&revoked.stderr).contains("Unauthorized"), "{v}");

    // Deployments are stored, so manifests with one apply.
    k.ok_with_stdin(&["apply", "-f", "-"], DEPLOYMENT);
    let deploy = k.ok(&["get", "deployments", "-n", "spanset-system"]);
    assert_eq!(deploy.lines().nth(1).unwrap_or("").split_whitespace().nth(1), Some("0/2"), "{v}:\n{deploy}");
}

fn row_absent(table: &str, resource: &str) -> bool {
    !table.lines().any(|l| l.split_whitespace().next() == Some(resource))
}

macro_rules! per_version {
    ($($name:ident => $minor:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            kubectl_enforces_tokens_and_rbac($minor);
        }
    )*};
}

per_version! {
    kubectl_auth_1_27 => 27,
    kubectl_auth_1_28 => 28,
    kubectl_auth_1_29 => 29,
    kubectl_auth_1_30 => 30,
    kubectl_auth_1_31 => 31,
    kubectl_auth_1_32 => 32,
    kubectl_auth_1_33 => 33,
}

/// The rows of `kubectl auth whoami`'s table (printed by kubectl from the review's
/// `status.userInfo`), as (ATTRIBUTE, VALUE).
fn whoami_rows(table: &str) -> Vec<(String, String)> {
    table
        .lines()
        .map(|l| match l.split_once("   ") {
            Some((k, v)) => (k.trim().to_string(), v.trim().to_string()),
            None => (l.trim().to_string(), String::new()),
        })
        .collect()
}

/// `kubectl auth whoami` (SelfSubjectReview: `authentication.k8s.io/v1beta1` from kubectl
/// 1.27, `v1` from 1.28) names the kubeconfig's administrator, whom it impersonates with
/// `--as`, and a ServiceAccount's token with its uid, groups and credential id.
fn kubectl_whoami(minor: u32) {
    let sandbox = Sandbox::start_with("solo", &["--auth"]);
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    let v = format!("kubectl 1.{minor}");
    let rows = whoami_rows(&k.ok(&["auth", "whoami"]));
    assert_eq!(
        rows,
        [
            ("ATTRIBUTE".to_string(), "VALUE".to_string()),
            ("Username".into(), "kubernetes-admin".into()),
            ("Groups".into(), "[system:masters system:authenticated]".into()),
        ],
        "{v}"
    );
    let sa = "system:serviceaccount:spanset-system:robot";
    let rows = whoami_rows(&k.ok(&["auth", "whoami", "--as", sa, "--as-group", "ops"]));
    assert_eq!(rows[1], ("Username".into(), sa.into()), "{v}");
    assert_eq!(
        rows[2],
        (
            "Groups".into(),
            "[ops system:serviceaccounts system:serviceaccounts:spanset-system system:authenticated]".into()
        ),
        "{v}"
    );
    k.ok(&["create", "namespace", "spanset-system"]);
    k.ok(&["create", "serviceaccount", "robot", "-n", "spanset-system"]);
    let uid = k.ok(&["get", "serviceaccount", "robot", "-n", "spanset-system", "-o", "jsonpath={.metadata.uid}"]);
    let token = k.ok(&["create", "token", "robot", "-n", "spanset-system"]);
    let review: serde_json::Value =
        serde_json::from_str(&k.ok(&["--token", token.trim(), "auth", "whoami", "-o", "json"])).unwrap();
    let api_version = if minor < 28 { "authentication.k8s.io/v1beta1" } else { "authentication.k8s.io/v1" };
    assert_eq!(
        (review["kind"].as_str(), review["apiVersion"].as_str()),
        (Some("SelfSubjectReview"), Some(api_version))
    );
    let user = &review["status"]["userInfo"];
    assert_eq!(user["username"], sa, "{v}: {review}");
    assert_eq!(user["uid"], uid.as_str(), "{v}: {review}");
    assert_eq!(
        user["groups"],
        json!(["system:serviceaccounts", "system:serviceaccounts:spanset-system", "system:authenticated"]),
        "{v}"
    );
    let credential = user["extra"]["authentication.kubernetes.io/credential-id"][0].as_str().unwrap_or("");
    assert!(credential.starts_with("JTI="), "{v}: {review}");
    let table = k.ok(&["--token", token.trim(), "auth", "whoami"]);
    assert!(whoami_rows(&table).contains(&("UID".to_string(), uid.clone())), "{v}:\n{table}");
    // Discovery lists the review with the one verb it has.
    let listed = k.ok(&["api-resources", "--api-group", "authentication.k8s.io", "-o", "wide"]);
    let row = listed.lines().find(|l| l.starts_with("selfsubjectreviews")).unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        ["selfsubjectreviews", "authentication.k8s.io/v1", "false", "SelfSubjectReview", "create"],
        "{v}:\n{listed}"
    );
}

#[test]
fn kubectl_whoami_1_27() {
    kubectl_whoami(27);
}

#[test]
fn kubectl_whoami_1_30() {
    kubectl_whoami(30);
}

#[test]
fn kubectl_whoami_1_33() {
    kubectl_whoami(33);
}

async fn client_for(access: Access) -> Client {
    let yaml = kubeconfig::render(&[access]);
    let kc = Kubeconfig::from_yaml(&yaml).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("config");
    Client::try_from(config).expect("client")
}

async fn sandbox(time_factor: f64) -> (Fleet, Client, Arc<Cluster>) {
    let config = ClusterConfig { auth: true, time_factor, nodes: 0, ..ClusterConfig::named("a") };
    let fleet = Fleet::start(vec![config], None).await.expect("sandbox starts");
    let admin = client_for(fleet.access().remove(0)).await;
    let cluster = fleet.servers[0].cluster.clone();
    (fleet, admin, cluster)
}

fn status(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn mint(admin: &Client, ns: &str, name: &str, seconds: i64) -> String {
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), ns);
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": seconds}})).unwrap();
    let minted: TokenRequest = sas.create_subresource("token", name, &PostParams::default(), &request).await.unwrap();
    minted.status.expect("a token").token
}

#[tokio::test]
async fn kube_rs_sees_the_apiservers_401_and_403_and_tokens_that_expire_or_die() {
    let (fleet, admin, cluster) = sandbox(0.001).await;
    let access = fleet.access().remove(0);
    assert!(access.url.starts_with("https://") && access.ca_pem.is_some());

    let anonymous = client_for(Access { token: None, ..access.clone() }).await;
    let e = status(Api::<Pod>::default_namespaced(anonymous).list(&ListParams::default()).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str(), e.message.as_str()), (401, "Unauthorized", "Unauthorized"));

    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "spanset-system"}})).unwrap(),
        )
        .await
        .unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "spanset-system");
    sas.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "spanset"}})).unwrap())
        .await
        .unwrap();
    let short = status(
        sas.create_subresource::<_, TokenRequest>(
            "token",
            "spanset",
            &PostParams::default(),
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 60}}),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(short.code, 422);
    assert!(short.message.contains("may not specify a duration less than 10 minutes"), "{}", short.message);

    let token = mint(&admin, "spanset-system", "spanset", 3600).await;
    let sa = client_for(Access { token: Some(token), ..access.clone() }).await;
    let e = status(Api::<ConfigMap>::namespaced(sa.clone(), "default").get("x").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        r#"configmaps "x" is forbidden: User "system:serviceaccount:spanset-system:spanset" cannot get resource "configmaps" in API group "" in the namespace "default""#
    );

    // A Role and binding later, the same client may read, and the audit log names the rule.
    let role: Role = serde_json::from_value(json!({"metadata": {"name": "reader", "namespace": "default"},
        "rules": [{"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["list"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), "default").create(&PostParams::default(), &role).await.unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "reader", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "spanset", "namespace": "spanset-system"}]}))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "default").create(&PostParams::default(), &binding).await.unwrap();
    Api::<ConfigMap>::namespaced(sa.clone(), "default").list(&ListParams::default()).await.unwrap();
    let audit = cluster.audit.all();
    let listed = audit
        .iter()
        .rev()
        .find(|r| {
            r.user == "system:serviceaccount:spanset-system:spanset"
                && r.request.verb == "list"
                && r.request.resource == "configmaps"
        })
        .expect("the list is audited");
    assert!(listed.allowed);
    assert_eq!(
        listed.rule,
        Some(RuleRef { kind: "Role".into(), namespace: "default".into(), name: "reader".into(), index: 1 })
    );
    assert!(
        audit
            .iter()
            .any(|r| r.request.resource == "configmaps" && r.request.verb == "get" && !r.allowed && r.rule.is_none())
    );

    // Access reviews answer for the caller.
    let review = |verb: &str, resource: &str| -> SelfSubjectAccessReview {
        serde_json::from_value(
            json!({"spec": {"resourceAttributes": {"namespace": "default", "verb": verb, "resource": resource}}}),
        )
        .unwrap()
    };
    let reviews: Api<SelfSubjectAccessReview> = Api::all(sa.clone());
    let yes = reviews.create(&PostParams::default(), &review("list", "configmaps")).await.unwrap();
    assert!(yes.status.unwrap().allowed);
    let no = reviews.create(&PostParams::default(), &review("delete", "configmaps")).await.unwrap();
    assert!(!no.status.unwrap().allowed);

    // Expiry: 600 simulated seconds are 0.6 s here.
    let brief = mint(&admin, "spanset-system", "spanset", 600).await;
    let brief = client_for(Access { token: Some(brief), ..access.clone() }).await;
    Api::<ConfigMap>::namespaced(brief.clone(), "default").list(&ListParams::default()).await.unwrap();
    eventually("the short token expires", || async {
        matches!(Api::<ConfigMap>::namespaced(brief.clone(), "default").list(&ListParams::default()).await,
            Err(kube::Error::Api(s)) if s.code == 401)
    })
    .await;
    // Revocation: the long token dies with its ServiceAccount.
    sas.delete("spanset", &Default::default()).await.unwrap();
    let e = status(Api::<ConfigMap>::namespaced(sa, "default").list(&ListParams::default()).await.unwrap_err());
    assert_eq!(e.code, 401);
}
