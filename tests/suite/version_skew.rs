//! Simulated clusters of different Kubernetes releases (`spanset sim --cluster-version`), each
//! difference of docs/version-skew.md seen through a kube client as spanset sees a member:
//! `/version`, discovery, ValidatingAdmissionPolicies refused with 404 before 1.30, and the
//! floor's behaviour (scheduling gates, start ordinals) kept on 1.27.

use std::process::Command;

use k8s_openapi::api::{
    admissionregistration::v1::ValidatingAdmissionPolicy,
    apps::v1::StatefulSet,
    core::v1::{Node, Pod},
};
use kube::{Api, Client, api::PostParams};
use serde_json::json;
use spanset_sim::cluster::{ClusterConfig, release::Release};

use crate::support::{self, eventually};

fn at(name: &str, version: &str) -> ClusterConfig {
    ClusterConfig {
        release: Release::parse(version).expect("a supported release"),
        time_factor: 0.05,
        ..ClusterConfig::named(name)
    }
}

fn policy() -> ValidatingAdmissionPolicy {
    serde_json::from_value(json!({
        "metadata": {"name": "only-labelled"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "has(object.metadata.labels)"}]}
    }))
    .expect("a literal policy")
}

#[tokio::test]
async fn each_cluster_reports_its_release_in_version_and_on_its_nodes() {
    let (_fleet, clients) = support::fleet_with_clients(vec![at("east", "1.27.16"), at("west", "1.30.4")]).await;
    for (client, git, minor) in [(&clients[0], "v1.27.16", "27"), (&clients[1], "v1.30.4", "30")] {
        let info = client.apiserver_version().await.expect("/version answers");
        assert_eq!((info.git_version.as_str(), info.major.as_str(), info.minor.as_str()), (git, "1", minor));
        let nodes = Api::<Node>::all(client.clone()).list(&Default::default()).await.expect("nodes");
        assert!(!nodes.items.is_empty());
        for node in nodes.items {
            let kubelet = node.status.and_then(|s| s.node_info).map(|i| i.kubelet_version).unwrap_or_default();
            assert_eq!(kubelet, git, "{:?}", node.metadata.name);
        }
    }
}

#[tokio::test]
async fn admission_policies_are_served_from_1_30_only_and_a_create_before_is_404() {
    let (_fleet, clients) = support::fleet_with_clients(vec![at("old", "1.29.8"), at("new", "1.30.0")]).await;
    let (old, new) = (&clients[0], &clients[1]);
    // Discovery: the group is absent on 1.29 (its v1beta1 is off by default; the sandbox serves
    // no webhook configurations, the group's other resources), listed on 1.30.
    let groups = |c: &Client| {
        let c = c.clone();
        async move { c.list_api_groups().await.expect("/apis").groups.into_iter().map(|g| g.name).collect::<Vec<_>>() }
    };
    assert!(!groups(old).await.iter().any(|g| g == "admissionregistration.k8s.io"));
    assert!(groups(new).await.iter().any(|g| g == "admissionregistration.k8s.io"));
    let served = new.list_api_group_resources("admissionregistration.k8s.io/v1").await.expect("served on 1.30");
    let names: Vec<String> = served.resources.into_iter().map(|r| r.name).collect();
    assert!(names.contains(&"validatingadmissionpolicies".to_string()), "{names:?}");
    match old.list_api_group_resources("admissionregistration.k8s.io/v1").await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 404, "{e:?}"),
        other => panic!("1.29 serves admissionregistration.k8s.io/v1 policies: {other:?}"),
    }
    // A create: 404 on 1.29, as a real apiserver answers a resource it does not serve.
    match Api::<ValidatingAdmissionPolicy>::all(old.clone()).create(&PostParams::default(), &policy()).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 404, "{e:?}"),
        other => panic!("a policy created on 1.29: {other:?}"),
    }
    Api::<ValidatingAdmissionPolicy>::all(new.clone())
        .create(&PostParams::default(), &policy())
        .await
        .expect("a policy is created on 1.30");
}

/// The `apiVersion` of the aggregated discovery a client offering v2 first, then v2beta1
/// (kubectl 1.33's Accept header), gets.
async fn aggregated_version(client: &Client) -> String {
    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    let req = http::Request::get("/apis").header("Accept", accept).body(Vec::new()).expect("a request");
    let text = client.request_text(req).await.expect("/apis answers");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("a JSON discovery document");
    doc["apiVersion"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn aggregated_discovery_v2_is_served_from_1_30_and_v2beta1_before() {
    let (_fleet, clients) = support::fleet_with_clients(vec![at("old", "1.29.8"), at("new", "1.30.0")]).await;
    assert_eq!(aggregated_version(&clients[0]).await, "apidiscovery.k8s.io/v2beta1");
    assert_eq!(aggregated_version(&clients[1]).await, "apidiscovery.k8s.io/v2");
}

#[tokio::test]
async fn the_oldest_release_holds_gated_pods_and_keeps_start_ordinals() {
    let (_fleet, clients) = support::fleet_with_clients(vec![at("east", "1.27.16")]).await;
    let client = &clients[0];
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let gated: Pod = serde_json::from_value(json!({
        "metadata": {"name": "gated"},
        "spec": {"schedulingGates": [{"name": "example.com/hold"}], "containers": [{"name": "c", "image": "i"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &gated).await.expect("a gated pod is created");
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "ordinals": {"start": 5}, "serviceName": "web",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    }))
    .unwrap();
    let stored = sets.create(&PostParams::default(), &set).await.expect("the set is created");
    assert_eq!(stored.spec.and_then(|s| s.ordinals).and_then(|o| o.start), Some(5), "1.27 keeps .spec.ordinals");
    // The set's pod is web-5 and gets scheduled; all the while, the gated pod never does.
    eventually("web-5 scheduled on 1.27", || async {
        let gated = pods.get("gated").await.expect("the gated pod");
        assert_eq!(gated.spec.and_then(|s| s.node_name), None, "a gated pod was scheduled on 1.27");
        pods.get_opt("web-5").await.ok().flatten().and_then(|p| p.spec).and_then(|s| s.node_name).is_some()
    })
    .await;
    assert!(pods.get_opt("web-0").await.expect("a get").is_none(), "ordinals started at 0 on 1.27");
}

#[test]
fn a_release_outside_1_27_to_1_37_is_refused_naming_the_flag() {
    for (command, version) in [("sim", "a=1.26.15"), ("sim", "a=1.38.0"), ("sandbox", "a=1.26.0")] {
        let mut args = vec![command, "--clusters", "a", "--kubeconfig", "unused.kubeconfig"];
        args.extend(["--cluster-version", version]);
        let out = Command::new(env!("CARGO_BIN_EXE_spanset")).args(&args).output().expect("spanset runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--cluster-version a:") && err.contains("only releases 1.27 to 1.37"), "{args:?}: {err}");
    }
}

/// The StatefulSet controller's Events say `create Pod web-0 in StatefulSet web successful`
/// through 1.34 and `Create Pod …` from 1.35, as the real controllers of 1.34 and 1.37 do
/// (`real_members`' tour checks the same words on real members).
#[tokio::test]
async fn the_statefulset_controller_titles_its_event_verbs_from_1_35() {
    let (_fleet, clients) = support::fleet_with_clients(vec![at("old", "1.34.4"), at("new", "1.37.2")]).await;
    for (client, verb) in [(&clients[0], "create"), (&clients[1], "Create")] {
        let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
        let set: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"replicas": 1, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        }))
        .unwrap();
        sets.create(&PostParams::default(), &set).await.expect("the set is created");
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
        let want = format!("{verb} Pod web-0 in StatefulSet web successful");
        eventually(&format!("the event {want:?}"), || async {
            let listed = events.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
            listed
                .iter()
                .any(|e| e.reason.as_deref() == Some("SuccessfulCreate") && e.message.as_deref() == Some(&want))
        })
        .await;
    }
}
