//! `deploy/` as users apply it: `kubectl kustomize` renders the host base, the member base and
//! the Prometheus Operator extras; the controller's Deployment is what a careful operator ships
//! (2 replicas with leader election, probes on the metrics port, requests and limits, a
//! non-root read-only restricted context); the metrics Service is the one the ServiceMonitor
//! selects; no rule uses a wildcard; the CRDs are not in the controller's base; and the install
//! (`kubectl apply -f deploy/crds/`, then `kubectl apply -k deploy/`) works on a sandbox that
//! enforces RBAC, while `kubectl delete -k deploy/` removes the controller and leaves the CRDs
//! and the federations.

use crate::support;

use serde_json::Value;
use support::{Kubectl, Sandbox};

fn render(k: &Kubectl, dir: &str) -> Vec<Value> {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = k.ok(&["kustomize", &format!("{root}/{dir}")]);
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("rendered YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

fn kubectl(sandbox: &Sandbox) -> Option<Kubectl> {
    Kubectl::new(33, sandbox)
}

#[test]
fn the_bases_render_and_the_controller_is_deployed_as_it_should_be() {
    let sandbox = Sandbox::start("host");
    let Some(k) = kubectl(&sandbox) else { return };
    let host = render(&k, "deploy");
    let kinds: Vec<String> = host
        .iter()
        .map(|d| format!("{}/{}", d["kind"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap()))
        .collect();
    for want in [
        "Namespace/spanset-system",
        "ServiceAccount/spanset",
        "ClusterRole/spanset",
        "ClusterRoleBinding/spanset",
        "Role/spanset-leader",
        "RoleBinding/spanset-leader",
        "Role/spanset-members",
        "RoleBinding/spanset-members",
        "ClusterRole/spanset-carry",
        "Deployment/spanset",
        "Service/spanset-metrics",
    ] {
        assert!(kinds.contains(&want.to_string()), "{want} not in {kinds:?}");
    }
    // The controller reads Secrets in spanset-system only, until an operator binds
    // spanset-carry where federations carry objects: deploy/ binds it nowhere.
    assert!(
        !host
            .iter()
            .any(|d| d["kind"].as_str().is_some_and(|k| k.ends_with("Binding"))
                && d["roleRef"]["name"] == "spanset-carry"),
        "spanset-carry is bound by deploy/: {kinds:?}"
    );
    let members = find(&host, "Role", "spanset-members");
    assert_eq!(members["metadata"]["namespace"], "spanset-system");
    // The CRDs are installed on their own (`kubectl apply -f deploy/crds/`): deleting the
    // controller's base must not delete them, and every federation with them.
    assert!(!host.iter().any(|d| d["kind"] == "CustomResourceDefinition"), "a CRD in deploy/: {kinds:?}");

    let deploy = find(&host, "Deployment", "spanset");
    assert_eq!(deploy["metadata"]["namespace"], "spanset-system");
    assert_eq!(deploy["spec"]["replicas"], 2);
    let pod = &deploy["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "spanset");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    let c = &pod["containers"][0];
    assert_eq!(c["args"][0], "run");
    let metrics_port = c["ports"].as_array().unwrap().iter().find(|p| p["name"] == "metrics").expect("a metrics port");
    assert!(
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == &format!("--metrics-addr=0.0.0.0:{}", metrics_port["containerPort"]))
    );
    assert_eq!(
        (c["readinessProbe"]["httpGet"]["path"].as_str(), c["readinessProbe"]["httpGet"]["port"].as_str()),
        (Some("/readyz"), Some("metrics"))
    );
    assert_eq!(
        (c["livenessProbe"]["httpGet"]["path"].as_str(), c["livenessProbe"]["httpGet"]["port"].as_str()),
        (Some("/healthz"), Some("metrics"))
    );
    for kind in ["requests", "limits"] {
        for r in ["cpu", "memory"] {
            assert!(c["resources"][kind][r].is_string(), "resources.{kind}.{r}");
        }
    }
    let sc = &c["securityContext"];
    assert_eq!(
        (sc["readOnlyRootFilesystem"].as_bool(), sc["allowPrivilegeEscalation"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(sc["capabilities"]["drop"][0], "ALL");
    let env: Vec<&str> = c["env"].as_array().unwrap().iter().filter_map(|e| e["name"].as_str()).collect();
    assert!(env.contains(&"POD_NAMESPACE"), "the Lease's namespace comes from the pod");
    // The Role allows exactly the Lease the Deployment elects with.
    let lease = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|a| a.as_str()?.strip_prefix("--lease-name="))
        .expect("--lease-name");
    let role = find(&host, "Role", "spanset-leader");
    assert!(role["rules"].as_array().unwrap().iter().any(|r| r["resourceNames"][0] == lease));

    // The metrics Service selects the pods, and the ServiceMonitor selects the Service.
    let svc = find(&host, "Service", "spanset-metrics");
    let pod_labels = &deploy["spec"]["template"]["metadata"]["labels"];
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&pod_labels[k], v, "the Service selects the controller's pods ({k})");
    }
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "metrics");
    let prom = render(&k, "deploy/prometheus");
    let monitor = prom.iter().find(|d| d["kind"] == "ServiceMonitor").expect("a ServiceMonitor");
    for (k, v) in monitor["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&svc["metadata"]["labels"][k], v, "the ServiceMonitor selects the Service ({k})");
    }
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], svc["spec"]["ports"][0]["name"]);
    assert!(prom.iter().any(|d| d["kind"] == "PrometheusRule"));

    // No wildcard anywhere.
    let member = render(&k, "deploy/member");
    for doc in host.iter().chain(&member).filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole") {
        for rule in doc["rules"].as_array().unwrap() {
            for field in ["verbs", "resources", "apiGroups"] {
                assert!(
                    !rule[field].as_array().into_iter().flatten().any(|v| v == "*"),
                    "{} {} has a wildcard in {field}",
                    doc["kind"],
                    doc["metadata"]["name"]
                );
            }
        }
    }
    assert!(member.iter().any(|d| d["kind"] == "ServiceAccount" && d["metadata"]["name"] == "spanset-member"));
}

#[test]
fn the_install_is_two_applies_and_deleting_the_controller_leaves_crds_and_federations() {
    let sandbox = Sandbox::start_with("host,east", &["--auth"]);
    let Some(mut k) = kubectl(&sandbox) else { return };
    let root = env!("CARGO_MANIFEST_DIR");
    k.context = Some("host".into());
    let out = k.ok(&["apply", "-f", &format!("{root}/deploy/crds/")]);
    assert!(out.contains("federatedstatefulsets.spanset.dev created"), "{out}");
    let out = k.ok(&["apply", "-k", &format!("{root}/deploy")]);
    assert!(out.contains("deployment.apps/spanset created"), "{out}");
    assert!(out.contains("clusterrole.rbac.authorization.k8s.io/spanset created"), "{out}");
    // Applied again, nothing changes.
    assert!(!k.ok(&["apply", "-k", &format!("{root}/deploy")]).contains(" created"));
    // What the controller's ServiceAccount may do, asked as itself.
    let token = k.ok(&["create", "token", "spanset", "-n", "spanset-system"]);
    let as_sa = |args: &[&str]| {
        let mut all = vec!["--token", token.trim()];
        all.extend_from_slice(args);
        String::from_utf8_lossy(&k.run(&all).stdout).trim().to_string()
    };
    assert_eq!(as_sa(&["auth", "can-i", "list", "federatedstatefulsets.spanset.dev", "-A"]), "yes");
    assert_eq!(as_sa(&["auth", "can-i", "delete", "federatedstatefulsets.spanset.dev", "-A"]), "no");
    assert_eq!(as_sa(&["auth", "can-i", "update", "leases/spanset-leader", "-n", "spanset-system"]), "yes");
    assert_eq!(as_sa(&["auth", "can-i", "update", "leases/other", "-n", "spanset-system"]), "no");
    // spanset's two CRDs are read by name (are they complete? is one being deleted?), and
    // nothing else of CRDs.
    let crd = "customresourcedefinitions.apiextensions.k8s.io";
    assert_eq!(as_sa(&["auth", "can-i", "get", &format!("{crd}/federatedstatefulsets.spanset.dev")]), "yes");
    assert_eq!(as_sa(&["auth", "can-i", "get", &format!("{crd}/memberclusters.spanset.dev")]), "yes");
    assert_eq!(as_sa(&["auth", "can-i", "get", &format!("{crd}/other.example.com")]), "no");
    assert_eq!(as_sa(&["auth", "can-i", "delete", &format!("{crd}/federatedstatefulsets.spanset.dev")]), "no");

    // A federation exists; the controller is uninstalled: the CRDs and the federation stay.
    let fsts = serde_json::to_string(&spanset::cli::sandbox::example(&["east".to_string()])).unwrap();
    k.ok_with_stdin(&["apply", "-f", "-"], &fsts);
    let out = k.ok(&["delete", "-k", &format!("{root}/deploy"), "--ignore-not-found", "--wait=false"]);
    assert!(out.contains("clusterrole.rbac.authorization.k8s.io \"spanset\" deleted"), "{out}");
    support::wait_until("the controller's Deployment is gone", support::DEADLINE, || {
        !k.run(&["get", "deployment", "spanset", "-n", "spanset-system"]).status.success()
    });
    assert!(!out.contains("customresourcedefinition"), "{out}");
    k.ok(&["get", "crd", "federatedstatefulsets.spanset.dev", "memberclusters.spanset.dev"]);
    let left = k.ok(&[
        "get",
        "federatedstatefulsets.spanset.dev",
        "redis",
        "-o",
        "jsonpath={.metadata.name} {.metadata.deletionTimestamp}",
    ]);
    assert_eq!(left.trim(), "redis", "the federation stays, not being deleted");

    k.context = Some("east".into());
    let out = k.ok(&["apply", "-k", &format!("{root}/deploy/member")]);
    assert!(out.contains("clusterrole.rbac.authorization.k8s.io/spanset-member created"), "{out}");
}
