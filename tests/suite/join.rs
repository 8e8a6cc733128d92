//! `spanset join` and `spanset unjoin`, the real binary against a sandbox that enforces RBAC:
//! join sets up the member-side identity, mints its token and registers the member in the
//! host with a kubeconfig that can do what spanset needs there and nothing else; joining again
//! rotates the token; unjoin is refused while a federation places ordinals in the member, then
//! removes what join made; bad input is named.

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{Secret, ServiceAccount},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use spanset::cli::sandbox::example;
use spanset_api::MemberCluster;
use support::{
    Sandbox,
    federation::{Federation, client_for},
};

use crate::support;

fn spanset(sandbox: &Sandbox, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(args)
        .env("KUBECONFIG", &sandbox.kubeconfig)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

async fn member_kubeconfig_client(host: &kube::Client) -> (kube::Client, String) {
    let secret = Api::<Secret>::namespaced(host.clone(), "spanset-system").get("spanset-member-east").await.unwrap();
    let yaml = String::from_utf8(secret.data.unwrap()["kubeconfig"].0.clone()).unwrap();
    let kc = Kubeconfig::from_yaml(&yaml).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.unwrap();
    (kube::Client::try_from(config).unwrap(), yaml)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_registers_a_least_privilege_identity_and_unjoin_waits_for_the_federations() {
    let sandbox = Sandbox::start_with("host,east", &["--auth"]);
    let host = client_for(&sandbox.kubeconfig, "host").await;
    spanset::cli::sandbox::install_crds(&host).await.unwrap();
    let kubeconfig = sandbox.kubeconfig.to_str().unwrap().to_string();
    let join = ["join", "east", "--kubeconfig", &kubeconfig, "--context", "east", "--host-context", "host"];

    let out = spanset(&sandbox, &join);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line = text(&out.stdout);
    assert!(
        line.starts_with(
            "membercluster/east joined: spanset-system/spanset-member in context east, token valid until "
        ) && line.trim_end().ends_with("kubeconfig in Secret spanset-system/spanset-member-east"),
        "{line}"
    );
    let mc = Api::<MemberCluster>::all(host.clone()).get("east").await.unwrap();
    let secret_ref = mc.spec.kubeconfig_secret.expect("the MemberCluster points at the Secret");
    assert_eq!((secret_ref.namespace.as_str(), secret_ref.name.as_str()), ("spanset-system", "spanset-member-east"));
    assert_eq!(mc.spec.context, None);

    // The Secret's identity can do spanset's work in east, and nothing else.
    let (member, first) = member_kubeconfig_client(&host).await;
    Api::<StatefulSet>::all(member.clone()).list(&ListParams::default()).await.expect("statefulsets listed");
    let refused =
        Api::<Secret>::namespaced(member.clone(), "kube-system").list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403
            && s.message.contains(r#"User "system:serviceaccount:spanset-system:spanset-member" cannot list resource "secrets""#)),
        "{refused:?}"
    );
    // Joining again rotates the token in place.
    assert!(spanset(&sandbox, &join).status.success());
    let (_, second) = member_kubeconfig_client(&host).await;
    assert_ne!(first, second, "a new token");

    // Unjoin is refused while a federation places ordinals in east.
    let f = Federation { sandbox, host: host.clone(), members: vec!["east".into()], refusals_expected: false };
    f.create(&example(&f.members)).await;
    let unjoin = ["unjoin", "east", "--host-context", "host", "--kubeconfig", &kubeconfig, "--context", "east"];
    let out = spanset(&f.sandbox, &unjoin);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("membercluster/east still holds ordinals of default/redis"),
        "{}",
        text(&out.stderr)
    );
    assert!(Api::<MemberCluster>::all(host.clone()).get_opt("east").await.unwrap().is_some(), "nothing removed");

    f.api().delete("redis", &DeleteParams::default()).await.unwrap();
    let out = spanset(&f.sandbox, &unjoin);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(Api::<MemberCluster>::all(host.clone()).get_opt("east").await.unwrap().is_none());
    assert!(
        Api::<Secret>::namespaced(host.clone(), "spanset-system")
            .get_opt("spanset-member-east")
            .await
            .unwrap()
            .is_none()
    );
    let east_admin = client_for(&f.sandbox.kubeconfig, "east").await;
    let sas: Api<ServiceAccount> = Api::namespaced(east_admin, "spanset-system");
    assert!(sas.get_opt("spanset-member").await.unwrap().is_none(), "the member-side identity is removed");
    // Unjoining again is a no-op.
    assert!(spanset(&f.sandbox, &unjoin).status.success());
}

/// Joining again (to rotate a token) leaves what the operator stated since: a fence, and the
/// region when none is given. Server-side apply would clear a `spec.fenced: false` it applied
/// (or, on a real apiserver, refuse it as a conflict with the fence's writer), and would remove
/// a region its manager stopped stating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joining_a_fenced_member_again_leaves_it_fenced_and_keeps_its_region() {
    let sandbox = Sandbox::start_with("host,east", &["--auth"]);
    let host = client_for(&sandbox.kubeconfig, "host").await;
    spanset::cli::sandbox::install_crds(&host).await.unwrap();
    let kubeconfig = sandbox.kubeconfig.to_str().unwrap().to_string();
    let join = ["join", "east", "--kubeconfig", &kubeconfig, "--context", "east", "--host-context", "host"];
    let with_region = [&join[..], &["--region", "eu-west"]].concat();
    let out = spanset(&sandbox, &with_region);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let fence = ["fence", "east", "--reason", "drill", "--force", "--kubeconfig", &kubeconfig, "--context", "host"];
    let out = spanset(&sandbox, &fence);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = spanset(&sandbox, &join);
    assert!(out.status.success(), "joining a fenced member again: {}", text(&out.stderr));
    let mc = Api::<MemberCluster>::all(host.clone()).get("east").await.unwrap();
    assert!(mc.spec.fenced, "joining again unfenced the member: {:?}", mc.spec);
    assert_eq!(mc.spec.region.as_deref(), Some("eu-west"), "the region given at the first join is kept");
    let annotations = mc.metadata.annotations.unwrap_or_default();
    assert!(annotations.contains_key("spanset.dev/fenced-at"), "the fence's record is kept: {annotations:?}");
}

#[test]
fn bad_input_is_named() {
    let sandbox = Sandbox::start_with("host,east", &["--auth"]);
    let kubeconfig = sandbox.kubeconfig.to_str().unwrap().to_string();
    let out = spanset(
        &sandbox,
        &["join", "Bad_Name", "--kubeconfig", &kubeconfig, "--context", "east", "--host-context", "host"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains(r#"NAME: "Bad_Name" is not a DNS label"#), "{}", text(&out.stderr));
    let out = spanset(
        &sandbox,
        &["join", "east", "--kubeconfig", &kubeconfig, "--context", "nowhere", "--host-context", "host"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("nowhere"), "{}", text(&out.stderr));
    let out = spanset(&sandbox, &["join", "east", "--kubeconfig", &kubeconfig]);
    assert_eq!(out.status.code(), Some(2), "a missing --context is a usage error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_installs_the_admission_policies_a_member_serves_and_names_those_it_cannot() {
    let sandbox = Sandbox::start_with("host,east,west", &["--auth", "--cluster-version", "west=1.29.8"]);
    let host = client_for(&sandbox.kubeconfig, "host").await;
    spanset::cli::sandbox::install_crds(&host).await.unwrap();
    let kubeconfig = sandbox.kubeconfig.to_str().unwrap().to_string();
    let policies = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy"),
        "validatingadmissionpolicies",
    );
    for (member, release) in [("east", "v1.33.1"), ("west", "v1.29.8")] {
        let join = ["join", member, "--kubeconfig", &kubeconfig, "--context", member, "--host-context", "host"];
        let out = spanset(&sandbox, &join);
        assert!(out.status.success(), "{member}: {}", text(&out.stderr));
        assert!(text(&out.stdout).starts_with(&format!("membercluster/{member} joined: ")), "{}", text(&out.stdout));
        let admin = client_for(&sandbox.kubeconfig, member).await;
        let installed = Api::<kube::api::DynamicObject>::all_with(admin, &policies).list(&ListParams::default()).await;
        let err = text(&out.stderr);
        if member == "east" {
            assert_eq!(err, "", "east serves every guard");
            assert!(installed.expect("east serves policies").items.len() >= 8, "east has spanset's policies");
        } else {
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.starts_with(&format!(
                    "spanset: join west: not installed: the member's admission policies (deploy/member/admission.yaml): \
                     Kubernetes {release} does not serve validatingadmissionpolicies in admissionregistration.k8s.io/v1"
                )),
                "{err}"
            );
            assert!(matches!(installed, Err(kube::Error::Api(e)) if e.code == 404), "west serves no policies");
        }
    }
}
