//! What kube-controller-manager's EndpointSlice controller wants for one Service: which pods
//! it selects, the endpoint each of them makes, and the ports (`podToEndpoint` and
//! `getEndpointPorts` in `pkg/controller/endpointslice`, and `ShouldPodBeInEndpoints`).

use serde_json::{Map, Value, json};

use crate::{cluster::kubelet, store::object};

/// Label naming who manages an EndpointSlice; the controller touches only its own.
pub const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY`].
pub const CONTROLLER: &str = "endpointslice-controller.k8s.io";
/// Label naming the Service an EndpointSlice belongs to (what CoreDNS and kube-proxy read).
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";
/// Label the controller puts on the slices of a headless Service.
pub const HEADLESS: &str = "service.kubernetes.io/headless";
/// Most endpoints in one slice (`--max-endpoints-per-slice`, default 100).
pub const MAX_ENDPOINTS: usize = 100;

/// The selector of a Service the controller keeps slices for: a `spec.selector` on any type
/// but ExternalName; `None` otherwise (its slices are then someone else's business). An empty
/// selector is none: the apiserver stores `{}` as no selector.
pub fn selector(service: &Value) -> Option<&Map<String, Value>> {
    if service.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return None;
    }
    service.pointer("/spec/selector").and_then(Value::as_object).filter(|s| !s.is_empty())
}

/// Whether a pod carries every label of the selector (a Service selector is equality only).
pub fn selects(selector: &Map<String, Value>, pod: &Value) -> bool {
    let labels = object::labels(pod);
    selector.iter().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The labels of the Service's slices: the Service's own, plus who manages them and for which
/// Service (and the headless mark), as the controller sets them.
pub fn labels(service: &Value) -> Value {
    let mut labels = object::labels(service).cloned().unwrap_or_default();
    labels.insert(SERVICE_NAME.into(), json!(object::name(service)));
    labels.insert(MANAGED_BY.into(), json!(CONTROLLER));
    if service.pointer("/spec/clusterIP").and_then(Value::as_str) == Some("None") {
        labels.insert(HEADLESS.into(), json!(""));
    } else {
        labels.remove(HEADLESS);
    }
    Value::Object(labels)
}

/// The endpoint a selected pod makes, or `None` when it has none: no IP yet, or finished
/// (Succeeded or Failed). `zone` is its node's `topology.kubernetes.io/zone`.
pub fn endpoint(service: &Value, pod: &Value, zone: Option<&str>) -> Option<Value> {
    let ip = pod.pointer("/status/podIP").and_then(Value::as_str).filter(|ip| !ip.is_empty())?;
    if matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed")) {
        return None;
    }
    let publish_unready = service.pointer("/spec/publishNotReadyAddresses").and_then(Value::as_bool) == Some(true);
    let terminating = object::is_deleting(pod);
    let serving = publish_unready || kubelet::is_ready(pod);
    // "ready" is never true for a terminating pod, unless unready addresses are published.
    let ready = publish_unready || (serving && !terminating);
    let mut ep = json!({
        "addresses": [ip],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "targetRef": {"kind": "Pod", "namespace": object::namespace(pod), "name": object::name(pod), "uid": object::uid(pod)},
    });
    let spec = |field: &str| pod.pointer(&format!("/spec/{field}")).and_then(Value::as_str).filter(|s| !s.is_empty());
    if let Some(hostname) = spec("hostname")
        && spec("subdomain") == Some(object::name(service))
    {
        ep["hostname"] = json!(hostname);
    }
    if let Some(node) = spec("nodeName") {
        ep["nodeName"] = json!(node);
    }
    if let Some(zone) = zone {
        ep["zone"] = json!(zone);
    }
    Some(ep)
}

/// The slice ports for one pod: each Service port with its target port resolved against the
/// pod (a named `targetPort` is the container port of that name and protocol; a port the pod
/// does not have is left out, as the controller does).
pub fn ports(service: &Value, pod: &Value) -> Vec<Value> {
    let declared = service.pointer("/spec/ports").and_then(Value::as_array);
    declared
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            let number = match p.get("targetPort") {
                Some(Value::Number(n)) => n.as_i64(),
                Some(Value::String(name)) => match name.parse::<i64>() {
                    Ok(n) => Some(n),
                    Err(_) => container_port(pod, name, protocol),
                },
                _ => p.get("port").and_then(Value::as_i64),
            }?;
            let mut port = json!({"name": p.get("name").and_then(Value::as_str).unwrap_or(""), "protocol": protocol, "port": number});
            if let Some(app) = p.get("appProtocol") {
                port["appProtocol"] = app.clone();
            }
            Some(port)
        })
        .collect()
}

/// The number of the pod's container port named `name` with this protocol.
fn container_port(pod: &Value, name: &str, protocol: &str) -> Option<i64> {
    let containers = pod.pointer("/spec/containers").and_then(Value::as_array)?;
    containers
        .iter()
        .flat_map(|c| c.get("ports").and_then(Value::as_array).into_iter().flatten())
        .find(|p| p["name"] == name && p.get("protocol").and_then(Value::as_str).unwrap_or("TCP") == protocol)
        .and_then(|p| p.get("containerPort").and_then(Value::as_i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default", "uid": "s1", "labels": {"app": "web"}}, "spec": spec})
    }

    fn pod(name: &str, ready: bool, deleting: bool) -> Value {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("u-{name}"), "labels": {"app": "web"}},
            "spec": {"hostname": name, "subdomain": "web", "nodeName": "node-1",
                     "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"phase": "Running", "podIP": "10.100.1.2",
                       "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        });
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        p
    }

    fn conditions(ep: &Value) -> (bool, bool, bool) {
        let c = &ep["conditions"];
        (c["ready"].as_bool().unwrap(), c["serving"].as_bool().unwrap(), c["terminating"].as_bool().unwrap())
    }

    #[test]
    fn conditions_follow_readiness_and_deletion_as_the_controller_sets_them() {
        let s = svc(json!({"clusterIP": "None", "selector": {"app": "web"}}));
        let ep = |p: &Value| endpoint(&s, p, Some("east-a")).unwrap();
        assert_eq!(conditions(&ep(&pod("web-0", true, false))), (true, true, false));
        assert_eq!(conditions(&ep(&pod("web-0", false, false))), (false, false, false));
        assert_eq!(conditions(&ep(&pod("web-0", true, true))), (false, true, true), "terminating is never ready");
        let e = ep(&pod("web-0", true, false));
        assert_eq!(e["hostname"], "web-0");
        assert_eq!(e["nodeName"], "node-1");
        assert_eq!(e["zone"], "east-a");
        assert_eq!(e["addresses"], json!(["10.100.1.2"]));
        assert_eq!(e["targetRef"], json!({"kind": "Pod", "namespace": "default", "name": "web-0", "uid": "u-web-0"}));

        let publish = svc(json!({"clusterIP": "None", "selector": {"app": "web"}, "publishNotReadyAddresses": true}));
        let e = endpoint(&publish, &pod("web-1", false, true), None).unwrap();
        assert_eq!(conditions(&e), (true, true, true), "publishNotReadyAddresses: every pod with an IP is ready");
        assert!(e.get("zone").is_none());
    }

    #[test]
    fn a_pod_without_ip_or_finished_makes_no_endpoint_and_hostname_needs_the_subdomain() {
        let s = svc(json!({"selector": {"app": "web"}}));
        let mut p = pod("web-0", true, false);
        p["spec"]["subdomain"] = json!("other");
        assert!(endpoint(&s, &p, None).unwrap().get("hostname").is_none());
        p["status"]["phase"] = json!("Failed");
        assert!(endpoint(&s, &p, None).is_none());
        let mut pending = pod("web-1", false, false);
        pending["status"] = json!({"phase": "Pending"});
        assert!(endpoint(&s, &pending, None).is_none());
    }

    #[test]
    fn named_target_ports_resolve_against_the_pods_containers() {
        let s = svc(json!({"selector": {"app": "web"}, "ports": [
            {"name": "http", "port": 80, "targetPort": "http"},
            {"name": "metrics", "port": 9090, "protocol": "TCP", "targetPort": 9091, "appProtocol": "http"},
            {"name": "grpc", "port": 50051, "targetPort": "grpc"},
            {"port": 7000},
        ]}));
        assert_eq!(
            ports(&s, &pod("web-0", true, false)),
            vec![
                json!({"name": "http", "protocol": "TCP", "port": 8080}),
                json!({"name": "metrics", "protocol": "TCP", "port": 9091, "appProtocol": "http"}),
                json!({"name": "", "protocol": "TCP", "port": 7000}),
            ],
            "grpc has no container port of that name: left out"
        );
    }

    #[test]
    fn only_services_with_a_selector_get_slices_and_labels_mark_them() {
        assert!(selector(&svc(json!({"clusterIP": "None"}))).is_none());
        assert!(selector(&svc(json!({"selector": {}}))).is_none());
        assert!(selector(&svc(json!({"type": "ExternalName", "selector": {"app": "web"}}))).is_none());
        let sel = selector(&svc(json!({"selector": {"app": "web"}}))).unwrap().clone();
        assert!(selects(&sel, &pod("web-0", true, false)));
        let mut other = pod("db-0", true, false);
        other["metadata"]["labels"] = json!({"app": "db"});
        assert!(!selects(&sel, &other));
        let l = labels(&svc(json!({"clusterIP": "None"})));
        assert_eq!(
            l,
            json!({"app": "web", SERVICE_NAME: "web", MANAGED_BY: CONTROLLER, HEADLESS: ""}),
            "the Service's labels, plus the controller's"
        );
    }
}
