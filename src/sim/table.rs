//! Server-side Table output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), with
//! the columns of the apiserver's printers, so kubectl prints READY, STATUS (Terminating
//! included), RESTARTS and AGE as against a real cluster (k8s-api.md A.10).

use serde_json::{Value, json};

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// A `PartialObjectMetadata` (the default; kubectl uses it for `-A`, `-L`, `--show-labels`).
    Metadata,
    /// The whole object (`--sort-by`).
    Object,
}

/// Kubernetes' `HumanDuration`: the AGE cells.
pub fn human_duration(d: jiff::SignedDuration) -> String {
    let secs = d.as_secs();
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

fn age(obj: &Value, now: jiff::Timestamp) -> String {
    match obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    {
        Some(t) => human_duration(now.duration_since(t)),
        None => "<unknown>".into(),
    }
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn or_none(x: &str) -> String {
    if x.is_empty() { "<none>".into() } else { x.to_string() }
}

fn col(name: &str, ty: &str, format: &str, priority: u32, description: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

fn name_col() -> Value {
    col("Name", "string", "name", 0, "Name must be unique within a namespace.")
}

fn age_col() -> Value {
    col(
        "Age",
        "string",
        "",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    )
}

fn pod_status(pod: &Value) -> String {
    let mut reason = s(pod, "/status/phase").to_string();
    if !s(pod, "/status/reason").is_empty() {
        reason = s(pod, "/status/reason").to_string();
    }
    let arr = |p: &str| pod.pointer(p).and_then(Value::as_array).cloned().unwrap_or_default();
    let init_statuses = arr("/status/initContainerStatuses");
    let init_total = arr("/spec/initContainers").len();
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        let terminated = c.pointer("/state/terminated");
        if terminated.is_some_and(|t| t["exitCode"].as_i64() == Some(0)) {
            continue;
        }
        initializing = true;
        reason = match (terminated, c.pointer("/state/waiting/reason").and_then(Value::as_str)) {
            (Some(t), _) if !s(t, "/reason").is_empty() => format!("Init:{}", s(t, "/reason")),
            (Some(t), _) => format!("Init:ExitCode:{}", t["exitCode"].as_i64().unwrap_or(0)),
            (None, Some(w)) if !w.is_empty() && w != "PodInitializing" => format!("Init:{w}"),
            _ => format!("Init:{i}/{init_total}"),
        };
        break;
    }
    if !initializing {
        let mut has_running = false;
        for c in arr("/status/containerStatuses").iter().rev() {
            if let Some(w) = c.pointer("/state/waiting/reason").and_then(Value::as_str).filter(|w| !w.is_empty()) {
                reason = w.to_string();
            } else if let Some(t) = c.pointer("/state/terminated") {
                reason = match s(t, "/reason") {
                    "" if t["signal"].as_i64().unwrap_or(0) != 0 => format!("Signal:{}", t["signal"]),
                    "" => format!("ExitCode:{}", t["exitCode"].as_i64().unwrap_or(0)),
                    r => r.to_string(),
                };
            } else if c["ready"] == true && c.pointer("/state/running").is_some() {
                has_running = true;
            }
        }
        if reason == "Completed" && has_running {
            let ready = arr("/status/conditions").iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
            reason = if ready { "Running".into() } else { "NotReady".into() };
        }
    }
    if pod.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null()) {
        reason = if s(pod, "/status/reason") == "NodeLost" { "Unknown".into() } else { "Terminating".into() };
    }
    reason
}

fn pod_row(pod: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let statuses = pod.pointer("/status/containerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
    let total = pod.pointer("/spec/containers").and_then(Value::as_array).map(Vec::len).unwrap_or(0);
    let ready = statuses.iter().filter(|c| c["ready"] == true).count();
    let restarts: i64 = statuses.iter().map(|c| c["restartCount"].as_i64().unwrap_or(0)).sum();
    let gates = pod.pointer("/spec/readinessGates").and_then(Value::as_array).map(Vec::len).unwrap_or(0);
    vec![
        json!(s(pod, "/metadata/name")),
        json!(format!("{ready}/{total}")),
        json!(pod_status(pod)),
        json!(restarts.to_string()),
        json!(age(pod, now)),
        json!(or_none(s(pod, "/status/podIP"))),
        json!(or_none(s(pod, "/spec/nodeName"))),
        json!(or_none(s(pod, "/status/nominatedNodeName"))),
        json!(if gates == 0 { "<none>".to_string() } else { format!("0/{gates}") }),
    ]
}

fn containers_and_images(spec: Option<&Value>) -> (String, String) {
    let cs = spec.and_then(|s| s.get("containers")).and_then(Value::as_array).cloned().unwrap_or_default();
    let names: Vec<&str> = cs.iter().filter_map(|c| c["name"].as_str()).collect();
    let images: Vec<&str> = cs.iter().filter_map(|c| c["image"].as_str()).collect();
    (names.join(","), images.join(","))
}

fn access_modes(v: Option<&Value>) -> String {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|m| match m.as_str() {
                    Some("ReadWriteOnce") => Some("RWO"),
                    Some("ReadOnlyMany") => Some("ROX"),
                    Some("ReadWriteMany") => Some("RWX"),
                    Some("ReadWriteOncePod") => Some("RWOP"),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

fn node_status(node: &Value) -> String {
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["status"].as_str());
    let mut status = match ready {
        Some("True") => "Ready".to_string(),
        Some("False") => "NotReady".to_string(),
        _ => "Unknown".to_string(),
    };
    if node.pointer("/spec/unschedulable") == Some(&json!(true)) {
        status.push_str(",SchedulingDisabled");
    }
    status
}

fn node_roles(node: &Value) -> String {
    let mut roles: Vec<&str> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys().filter_map(|k| k.strip_prefix("node-role.kubernetes.io/")).filter(|r| !r.is_empty()).collect()
        })
        .unwrap_or_default();
    roles.sort();
    if roles.is_empty() { "<none>".into() } else { roles.join(",") }
}

fn service_ports(svc: &Value) -> String {
    let ports = svc.pointer("/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default();
    if ports.is_empty() {
        return "<none>".into();
    }
    ports
        .iter()
        .map(|p| {
            let proto = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64().filter(|n| *n != 0) {
                Some(n) => format!("{}:{n}/{proto}", p["port"]),
                None => format!("{}/{proto}", p["port"]),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads a simple JSONPath (`.a.b`, `.a[0].b`) for printer columns.
fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in path.trim_start_matches('.').split('.').filter(|s| !s.is_empty()) {
        let (field, index) = match seg.split_once('[') {
            Some((f, rest)) => (f, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (seg, None),
        };
        if !field.is_empty() {
            cur = cur.get(field)?;
        }
        if let Some(i) = index {
            cur = cur.get(i)?;
        }
    }
    Some(cur)
}

fn cell_of(v: Option<&Value>, ty: &str, now: jiff::Timestamp) -> Value {
    match (v, ty) {
        (None | Some(Value::Null), _) => json!("<none>"),
        (Some(Value::String(t)), "date") => match t.parse::<jiff::Timestamp>() {
            Ok(t) => json!(human_duration(now.duration_since(t))),
            Err(_) => json!(t),
        },
        (Some(Value::String(t)), _) => json!(t),
        (Some(other), "string") => json!(other.to_string()),
        (Some(other), _) => other.clone(),
    }
}

/// Computes a row's cells from an object at a time.
type CellsFn = Box<dyn Fn(&Value, jiff::Timestamp) -> Vec<Value>>;

/// Columns and cells for one resource.
fn columns_and_cells(group: &str, resource: &str, printer_columns: Option<&[Value]>) -> (Vec<Value>, CellsFn) {
    let text = |name: &str, priority: u32, d: &str| col(name, "string", "", priority, d);
    match (group, resource, printer_columns) {
        (_, _, Some(pcs)) => {
            let mut cols = vec![name_col()];
            let pcs: Vec<Value> = pcs.to_vec();
            for pc in &pcs {
                cols.push(col(
                    pc["name"].as_str().unwrap_or(""),
                    pc["type"].as_str().unwrap_or("string"),
                    pc["format"].as_str().unwrap_or(""),
                    pc["priority"].as_u64().unwrap_or(0) as u32,
                    pc["description"].as_str().unwrap_or(""),
                ));
            }
            let cells = move |o: &Value, now: jiff::Timestamp| {
                let mut row = vec![json!(s(o, "/metadata/name"))];
                for pc in &pcs {
                    row.push(cell_of(
                        json_path(o, pc["jsonPath"].as_str().unwrap_or("")),
                        pc["type"].as_str().unwrap_or("string"),
                        now,
                    ));
                }
                row
            };
            (cols, Box::new(cells))
        }
        ("", "pods", _) => (
            vec![
                name_col(),
                text("Ready", 0, "The aggregate readiness state of this pod for accepting traffic."),
                text("Status", 0, "The aggregate status of the containers in this pod."),
                text(
                    "Restarts",
                    0,
                    "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                ),
                age_col(),
                text(
                    "IP",
                    1,
                    "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
                ),
                text("Node", 1, "NodeName is a request to schedule this pod onto a specific node."),
                text("Nominated Node", 1, "nominatedNodeName is set when this pod preempts other pods on the node."),
                text("Readiness Gates", 1, "If specified, all readiness gates will be evaluated for pod readiness."),
            ],
            Box::new(pod_row),
        ),
        ("apps", "statefulsets", _) => (
            vec![
                name_col(),
                text("Ready", 0, "Number of the pod with ready state"),
                age_col(),
                text("Containers", 1, "Names of each container in the template."),
                text("Images", 1, "Images referenced by each container in the template."),
            ],
            Box::new(|o, now| {
                let (c, i) = containers_and_images(o.pointer("/spec/template/spec"));
                let ready = o.pointer("/status/readyReplicas").and_then(Value::as_i64).unwrap_or(0);
                let desired = o.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0);
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(format!("{ready}/{desired}")),
                    json!(age(o, now)),
                    json!(c),
                    json!(i),
                ]
            }),
        ),
        ("", "persistentvolumeclaims", _) => (
            vec![
                name_col(),
                text("Status", 0, "The phase of the claim."),
                text("Volume", 0, "The binding reference to the PersistentVolume backing this claim."),
                text("Capacity", 0, "The actual resources of the underlying volume."),
                text("Access Modes", 0, "The actual access modes the volume backing the PVC has."),
                text("StorageClass", 0, "The name of the StorageClass required by the claim."),
                text("VolumeAttributesClass", 0, "The name of the VolumeAttributesClass used by the claim."),
                age_col(),
                text("VolumeMode", 1, "The volume mode required by the claim."),
            ],
            Box::new(|o, now| {
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(s(o, "/status/phase")),
                    json!(s(o, "/spec/volumeName")),
                    json!(s(o, "/status/capacity/storage")),
                    json!(access_modes(o.pointer("/status/accessModes"))),
                    json!(s(o, "/spec/storageClassName")),
                    json!(or_none(s(o, "/spec/volumeAttributesClassName"))),
                    json!(age(o, now)),
                    json!(s(o, "/spec/volumeMode")),
                ]
            }),
        ),
        ("", "persistentvolumes", _) => (
            vec![
                name_col(),
                text("Capacity", 0, "The capacity of the volume."),
                text("Access Modes", 0, "The access modes of the volume."),
                text("Reclaim Policy", 0, "What happens to the volume when its claim is released."),
                text("Status", 0, "The phase of the volume."),
                text("Claim", 0, "The claim bound to the volume."),
                text("StorageClass", 0, "The StorageClass of the volume."),
                text("VolumeAttributesClass", 0, "The VolumeAttributesClass of the volume."),
                text("Reason", 0, "Why the volume is in its phase."),
                age_col(),
                text("VolumeMode", 1, "The volume mode."),
            ],
            Box::new(|o, now| {
                let claim = if s(o, "/spec/claimRef/name").is_empty() {
                    String::new()
                } else {
                    format!("{}/{}", s(o, "/spec/claimRef/namespace"), s(o, "/spec/claimRef/name"))
                };
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(s(o, "/spec/capacity/storage")),
                    json!(access_modes(o.pointer("/spec/accessModes"))),
                    json!(s(o, "/spec/persistentVolumeReclaimPolicy")),
                    json!(s(o, "/status/phase")),
                    json!(claim),
                    json!(s(o, "/spec/storageClassName")),
                    json!(or_none(s(o, "/spec/volumeAttributesClassName"))),
                    json!(s(o, "/status/reason")),
                    json!(age(o, now)),
                    json!(s(o, "/spec/volumeMode")),
                ]
            }),
        ),
        ("", "nodes", _) => (
            vec![
                name_col(),
                text("Status", 0, "The status of the node"),
                text("Roles", 0, "The roles of the node"),
                age_col(),
                text("Version", 0, "Kubelet Version reported by the node."),
                text("Internal-IP", 1, "List of internal IPs."),
                text("External-IP", 1, "List of external IPs."),
                text("OS-Image", 1, "OS image reported by the node."),
                text("Kernel-Version", 1, "Kernel version reported by the node."),
                text("Container-Runtime", 1, "Container runtime reported by the node."),
            ],
            Box::new(|o, now| {
                let ip = |kind: &str| {
                    o.pointer("/status/addresses")
                        .and_then(Value::as_array)
                        .and_then(|a| a.iter().find(|x| x["type"] == kind))
                        .and_then(|x| x["address"].as_str())
                        .unwrap_or("<none>")
                        .to_string()
                };
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(node_status(o)),
                    json!(node_roles(o)),
                    json!(age(o, now)),
                    json!(s(o, "/status/nodeInfo/kubeletVersion")),
                    json!(ip("InternalIP")),
                    json!(ip("ExternalIP")),
                    json!(or_none(s(o, "/status/nodeInfo/osImage"))),
                    json!(or_none(s(o, "/status/nodeInfo/kernelVersion"))),
                    json!(or_none(s(o, "/status/nodeInfo/containerRuntimeVersion"))),
                ]
            }),
        ),
        ("", "namespaces", _) => (
            vec![name_col(), text("Status", 0, "The status of the namespace"), age_col()],
            Box::new(|o, now| vec![json!(s(o, "/metadata/name")), json!(s(o, "/status/phase")), json!(age(o, now))]),
        ),
        ("", "services", _) => (
            vec![
                name_col(),
                text("Type", 0, "The type of service."),
                text("Cluster-IP", 0, "The cluster IP of the service."),
                text("External-IP", 0, "External IPs of the service."),
                text("Port(s)", 0, "The ports of the service."),
                age_col(),
                text("Selector", 1, "The selector of the service."),
            ],
            Box::new(|o, now| {
                let selector = o
                    .pointer("/spec/selector")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect::<Vec<_>>().join(",")
                    })
                    .unwrap_or_default();
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(s(o, "/spec/type")),
                    json!(or_none(s(o, "/spec/clusterIP"))),
                    json!("<none>"),
                    json!(service_ports(o)),
                    json!(age(o, now)),
                    json!(or_none(&selector)),
                ]
            }),
        ),
        ("apps", "controllerrevisions", _) => (
            vec![
                name_col(),
                text("Controller", 0, "Controller of the object."),
                col("Revision", "integer", "", 0, "Revision of the ControllerRevision."),
                age_col(),
            ],
            Box::new(|o, now| {
                let owner = o
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .and_then(|r| r.iter().find(|x| x["controller"] == true))
                    .map(|r| {
                        format!(
                            "{}/{}",
                            r["kind"].as_str().unwrap_or("").to_lowercase(),
                            r["name"].as_str().unwrap_or("")
                        )
                    })
                    .unwrap_or_else(|| "<none>".into());
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(owner),
                    o.get("revision").cloned().unwrap_or(json!(0)),
                    json!(age(o, now)),
                ]
            }),
        ),
        ("coordination.k8s.io", "leases", _) => (
            vec![name_col(), text("Holder", 0, "The holder of the lease."), age_col()],
            Box::new(|o, now| {
                vec![json!(s(o, "/metadata/name")), json!(s(o, "/spec/holderIdentity")), json!(age(o, now))]
            }),
        ),
        _ => (
            vec![
                name_col(),
                col(
                    "Created At",
                    "date",
                    "",
                    0,
                    "CreationTimestamp is a timestamp representing the server time when this object was created.",
                ),
            ],
            Box::new(|o, _| vec![json!(s(o, "/metadata/name")), json!(s(o, "/metadata/creationTimestamp"))]),
        ),
    }
}

/// Builds a meta.k8s.io/v1 Table for items of one resource; the caller fills
/// `metadata.resourceVersion` and `metadata.continue`. Custom resources pass their version's
/// `additionalPrinterColumns`, or an empty slice when they have none (they then get `Name, Age`);
/// built-in kinds pass `None`.
pub fn to_table(
    group: &str,
    resource: &str,
    items: &[&Value],
    include: IncludeObject,
    now: jiff::Timestamp,
    printer_columns: Option<&[Value]>,
) -> Value {
    // A custom resource without printer columns shows Name and Age, as the apiserver does.
    let age_only = [json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})];
    let printer_columns = match printer_columns {
        Some([]) => Some(&age_only[..]),
        other => other,
    };
    let (columns, cells) = columns_and_cells(group, resource, printer_columns);
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(o, now)});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o.get("metadata").cloned().unwrap_or(json!({}))});
                }
                IncludeObject::Object => row["object"] = (*o).clone(),
            }
            row
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "columnDefinitions": columns, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn human_durations_follow_kubernetes_boundaries() {
        let cases = [
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (123, "2m3s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 600, "3h10m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (53 * 3600, "2d5h"),
            (8 * 86400, "8d"),
            (730 * 86400, "2y"),
            (731 * 86400, "2y1d"),
            (3000 * 86400, "8y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(jiff::SignedDuration::from_secs(secs)), want, "{secs}s");
        }
        assert_eq!(human_duration(jiff::SignedDuration::from_secs(-1)), "0s");
        assert_eq!(human_duration(jiff::SignedDuration::from_secs(-5)), "<invalid>");
    }

    #[test]
    fn pod_rows_show_ready_status_restarts_and_terminating() {
        let now = ts("2026-01-01T00:10:00Z");
        let mut pod = json!({
            "metadata": {"name": "quiz-0", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5",
                       "containerStatuses": [{"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}}},
                                             {"name": "b", "ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]},
        });
        let t = to_table("", "pods", &[&pod], IncludeObject::Metadata, now, None);
        let names: Vec<&str> =
            t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(&names[..5], ["Name", "Ready", "Status", "Restarts", "Age"]);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["quiz-0", "1/2", "CrashLoopBackOff", "3", "10m", "10.0.0.5", "node-1", "<none>", "<none>"])
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        pod["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:11:00Z");
        assert_eq!(to_table("", "pods", &[&pod], IncludeObject::None, now, None)["rows"][0]["cells"][2], "Terminating");
        pod["status"]["reason"] = json!("NodeLost");
        assert_eq!(to_table("", "pods", &[&pod], IncludeObject::None, now, None)["rows"][0]["cells"][2], "Unknown");
    }

    #[test]
    fn statefulsets_nodes_and_pvcs_have_their_columns() {
        let now = ts("2026-01-01T01:00:00Z");
        let sts = json!({"metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}, "status": {"readyReplicas": 2}});
        assert_eq!(
            to_table("apps", "statefulsets", &[&sts], IncludeObject::None, now, None)["rows"][0]["cells"],
            json!(["web", "2/3", "60m", "c", "nginx"])
        );
        let node = json!({"metadata": {"name": "n1", "creationTimestamp": "2026-01-01T00:59:00Z", "labels": {"node-role.kubernetes.io/control-plane": ""}},
                          "spec": {"unschedulable": true}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}], "nodeInfo": {"kubeletVersion": "v1.33.1"}}});
        let cells = &to_table("", "nodes", &[&node], IncludeObject::None, now, None)["rows"][0]["cells"];
        assert_eq!(
            cells.as_array().unwrap()[..5],
            [json!("n1"), json!("Unknown,SchedulingDisabled"), json!("control-plane"), json!("60s"), json!("v1.33.1")]
        );
        let pvc = json!({"metadata": {"name": "data-web-0", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"volumeName": "pv1", "storageClassName": "standard", "volumeMode": "Filesystem"},
                         "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}});
        let cells =
            &to_table("", "persistentvolumeclaims", &[&pvc], IncludeObject::None, now, None)["rows"][0]["cells"];
        assert_eq!(
            cells.as_array().unwrap()[..8],
            [
                json!("data-web-0"),
                json!("Bound"),
                json!("pv1"),
                json!("1Gi"),
                json!("RWO"),
                json!("standard"),
                json!("<none>"),
                json!("60m")
            ]
        );
    }

    #[test]
    fn custom_resources_use_printer_columns_and_others_the_default_table() {
        let now = ts("2026-01-01T00:05:00Z");
        let pcs = vec![
            json!({"name": "Ready", "type": "string", "jsonPath": ".status.ready"}),
            json!({"name": "Clusters", "type": "integer", "jsonPath": ".status.clusters"}),
            json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
        ];
        let obj = json!({"metadata": {"name": "db", "creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {"ready": "3/6", "clusters": 2}});
        let t = to_table("spanset.dev", "federatedstatefulsets", &[&obj], IncludeObject::None, now, Some(&pcs));
        assert_eq!(t["rows"][0]["cells"], json!(["db", "3/6", 2, "5m"]));
        let t = to_table("example.com", "widgets", &[&obj], IncludeObject::None, now, Some(&[]));
        assert_eq!(t["rows"][0]["cells"], json!(["db", "5m"]));
        let t = to_table("", "configmaps", &[&obj], IncludeObject::None, now, None);
        assert_eq!(t["rows"][0]["cells"], json!(["db", "2026-01-01T00:00:00Z"]));
    }
}
