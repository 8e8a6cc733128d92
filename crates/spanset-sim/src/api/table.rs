//! Server-side Table output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), with
//! the columns of the apiserver's printers, so kubectl prints READY, STATUS (Terminating
//! included), RESTARTS and AGE as against a real cluster
//! (<https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables>).

use serde_json::{Value, json};

// A cell's text at a JSON pointer: short, since the column definitions below use it a lot.
use crate::store::object::str_at as s;

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

/// Kubernetes' `HumanDuration`: the AGE cells (shared with `spanset status`).
pub use crate::human::human_duration;

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

/// How long ago a timestamp was, or `<unknown>` for none (printers.go `translateTimestampSince`).
fn since(t: &str, now: jiff::Timestamp) -> String {
    match t.parse::<jiff::Timestamp>() {
        Ok(t) => human_duration(now.duration_since(t)),
        Err(_) => "<unknown>".into(),
    }
}

/// printers.go `printEvent`: the cells of an Event row, for either recorder's Events (the
/// events.k8s.io one sets `eventTime` and `series` instead of the timestamps and count).
fn event_row(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let first = match s(o, "/firstTimestamp") {
        "" => since(s(o, "/eventTime"), now),
        t => since(t, now),
    };
    let mut last = match s(o, "/lastTimestamp") {
        "" => first.clone(),
        t => since(t, now),
    };
    let mut count = o.get("count").and_then(Value::as_i64).unwrap_or(0);
    if let Some(series) = o.get("series").filter(|s| s.is_object()) {
        last = since(s(series, "/lastObservedTime"), now);
        count = series["count"].as_i64().unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = s(o, "/involvedObject/kind").to_lowercase();
    let target = match s(o, "/involvedObject/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = [s(o, "/source/component"), s(o, "/reportingComponent")].into_iter().find(|c| !c.is_empty());
    let instance = [s(o, "/source/host"), s(o, "/reportingInstance")].into_iter().find(|c| !c.is_empty());
    let source = match (component, instance) {
        (None, _) => "<unknown>".to_string(),
        (Some(c), None) => c.to_string(),
        (Some(c), Some(i)) => format!("{c}, {i}"),
    };
    vec![
        json!(last),
        json!(s(o, "/type")),
        json!(s(o, "/reason")),
        json!(target),
        json!(s(o, "/involvedObject/fieldPath")),
        json!(source),
        json!(s(o, "/message").trim()),
        json!(first),
        json!(count),
        json!(s(o, "/metadata/name")),
    ]
}

/// What printers.go `printPod` derives from a pod: the STATUS reason, ready and total
/// container counts, and the RESTARTS cell.
struct PodSummary {
    reason: String,
    ready: usize,
    total: usize,
    restarts: String,
}

/// The latest `lastState.terminated.finishedAt` of some container statuses.
fn last_restart(statuses: &[Value]) -> Option<jiff::Timestamp> {
    statuses
        .iter()
        .filter_map(|c| c.pointer("/lastState/terminated/finishedAt").and_then(Value::as_str))
        .filter_map(|t| t.parse::<jiff::Timestamp>().ok())
        .max()
}

fn has_condition(pod: &Value, ty: &str) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == ty && c["status"] == "True"))
}

/// Follows `printPod`: init containers first (`Init:0/1`, `Init:<reason>`), then the last
/// container with a waiting or terminated reason, then `Terminating` / `Unknown` for pods being
/// deleted (unless already Succeeded or Failed).
fn pod_summary(pod: &Value, now: jiff::Timestamp) -> PodSummary {
    let arr = |p: &str| pod.pointer(p).and_then(Value::as_array).cloned().unwrap_or_default();
    let phase = s(pod, "/status/phase");
    let mut reason =
        if s(pod, "/status/reason").is_empty() { phase.to_string() } else { s(pod, "/status/reason").to_string() };
    if arr("/status/conditions").iter().any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated") {
        reason = "SchedulingGated".into();
    }
    let init_statuses = arr("/status/initContainerStatuses");
    let statuses = arr("/status/containerStatuses");
    let count_restarts = |cs: &[Value]| cs.iter().map(|c| c["restartCount"].as_i64().unwrap_or(0)).sum::<i64>();
    let mut restarts = count_restarts(&init_statuses);
    let mut last = last_restart(&init_statuses);
    let mut ready = 0;
    let mut initializing = false;
    let init_specs = arr("/spec/initContainers");
    let init_total = init_specs.len();
    // Sidecars (restartable init containers) count among the pod's containers, and their
    // restarts among the pod's once it is initialized.
    let sidecar = |c: &Value| init_specs.iter().any(|s| s["name"] == c["name"] && s["restartPolicy"] == "Always");
    let sidecars: Vec<Value> = init_statuses.iter().filter(|c| sidecar(c)).cloned().collect();
    for (i, c) in init_statuses.iter().enumerate() {
        let terminated = c.pointer("/state/terminated").filter(|t| !t.is_null());
        let waiting = c.pointer("/state/waiting/reason").and_then(Value::as_str).unwrap_or("");
        if terminated.is_none_or(|t| t["exitCode"].as_i64().unwrap_or(0) != 0) && sidecar(c) && c["started"] == true {
            ready += usize::from(c["ready"] == true);
            continue;
        }
        reason = match terminated {
            Some(t) if t["exitCode"].as_i64().unwrap_or(0) == 0 => continue,
            Some(t) if !s(t, "/reason").is_empty() => format!("Init:{}", s(t, "/reason")),
            Some(t) if t["signal"].as_i64().unwrap_or(0) != 0 => format!("Init:Signal:{}", t["signal"]),
            Some(t) => format!("Init:ExitCode:{}", t["exitCode"].as_i64().unwrap_or(0)),
            None if !waiting.is_empty() && waiting != "PodInitializing" => format!("Init:{waiting}"),
            None => format!("Init:{i}/{init_total}"),
        };
        initializing = true;
        break;
    }
    if !initializing || has_condition(pod, "Initialized") {
        restarts = count_restarts(&sidecars);
        last = last_restart(&sidecars);
        let mut has_running = false;
        for c in statuses.iter().rev() {
            restarts += c["restartCount"].as_i64().unwrap_or(0);
            let terminated = c.pointer("/state/terminated").filter(|t| !t.is_null());
            if let Some(w) = c.pointer("/state/waiting/reason").and_then(Value::as_str).filter(|w| !w.is_empty()) {
                reason = w.to_string();
            } else if let Some(t) = terminated {
                reason = match s(t, "/reason") {
                    "" if t["signal"].as_i64().unwrap_or(0) != 0 => format!("Signal:{}", t["signal"]),
                    "" => format!("ExitCode:{}", t["exitCode"].as_i64().unwrap_or(0)),
                    r => r.to_string(),
                };
            } else if c["ready"] == true && c.pointer("/state/running").is_some_and(|r| !r.is_null()) {
                has_running = true;
                ready += 1;
            }
        }
        last = last.max(last_restart(&statuses));
        if reason == "Completed" && has_running {
            reason = if has_condition(pod, "Ready") { "Running".into() } else { "NotReady".into() };
        }
    }
    if pod.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null()) {
        if s(pod, "/status/reason") == "NodeLost" {
            reason = "Unknown".into();
        } else if !matches!(phase, "Succeeded" | "Failed") {
            reason = "Terminating".into();
        }
    }
    let restarts = match last {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now.duration_since(t))),
        _ => restarts.to_string(),
    };
    PodSummary { reason, ready, total: arr("/spec/containers").len() + sidecars.len(), restarts }
}

fn pod_row(pod: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let sum = pod_summary(pod, now);
    let gates = pod.pointer("/spec/readinessGates").and_then(Value::as_array).cloned().unwrap_or_default();
    let gates_true = gates.iter().filter(|g| has_condition(pod, s(g, "/conditionType"))).count();
    let ip = pod.pointer("/status/podIPs/0/ip").and_then(Value::as_str).unwrap_or(s(pod, "/status/podIP"));
    vec![
        json!(s(pod, "/metadata/name")),
        json!(format!("{}/{}", sum.ready, sum.total)),
        json!(sum.reason),
        json!(sum.restarts),
        json!(age(pod, now)),
        json!(or_none(ip)),
        json!(or_none(s(pod, "/spec/nodeName"))),
        json!(or_none(s(pod, "/status/nominatedNodeName"))),
        json!(if gates.is_empty() { "<none>".to_string() } else { format!("{gates_true}/{}", gates.len()) }),
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

/// Reads the JSONPath subset printer columns use: fields (`.a.b`), indexes (`.a[0]`) and
/// equality filters (`.conditions[?(@.type=="Ready")].status`, first match).
fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let mut rest = path.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            cur = match inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
                Some(filter) => {
                    let (lhs, rhs) = filter.split_once("==")?;
                    let key = lhs.trim().strip_prefix("@.")?;
                    let want = rhs.trim().trim_matches(|c| c == '"' || c == '\'');
                    cur.as_array()?.iter().find(|e| {
                        json_path(e, key).is_some_and(|v| match v {
                            Value::String(s) => s == want,
                            other => format!("{other}") == want,
                        })
                    })?
                }
                None => cur.get(inner.trim().parse::<usize>().ok()?)?,
            };
        } else {
            let r = rest.strip_prefix('.').unwrap_or(rest);
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let field = &r[..end];
            rest = &r[end..];
            if !field.is_empty() {
                cur = cur.get(field)?;
            }
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

/// The column descriptions the apiserver's printers take from the API's field docs.
const SECRET_TYPE_DOC: &str = "Used to facilitate programmatic handling of secret data. More info: <https://kubernetes.io/docs/concepts/configuration/secret/#secret-types>";
const SECRET_DATA_DOC: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";
const SERVICE_ACCOUNT_SECRETS_DOC: &str = "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: <https://kubernetes.io/docs/concepts/configuration/secret>";

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
        ("policy", "poddisruptionbudgets", _) => (
            vec![
                name_col(),
                text("Min Available", 0, "The minimum number of pods that must be available."),
                text("Max Unavailable", 0, "The maximum number of pods that may be unavailable."),
                col(
                    "Allowed Disruptions",
                    "integer",
                    "",
                    0,
                    "Calculated number of pods that may be disrupted at this time.",
                ),
                age_col(),
            ],
            Box::new(|o, now| {
                // `IntOrString.String()`, or N/A for an unset field.
                let budget = |ptr: &str| match o.pointer(ptr) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    _ => "N/A".to_string(),
                };
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(budget("/spec/minAvailable")),
                    json!(budget("/spec/maxUnavailable")),
                    json!(o.pointer("/status/disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0)),
                    json!(age(o, now)),
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
        ("" | "events.k8s.io", "events", _) => (
            vec![
                text("Last Seen", 0, "The time at which the most recent occurrence of this event was recorded."),
                text("Type", 0, "Type of this event (Normal, Warning), new types could be added in the future"),
                text(
                    "Reason",
                    0,
                    "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
                ),
                text("Object", 0, "The object that this event is about."),
                text(
                    "Subobject",
                    1,
                    "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].",
                ),
                text(
                    "Source",
                    1,
                    "The component reporting this event. Should be a short machine understandable string.",
                ),
                text("Message", 0, "A human-readable description of the status of this operation."),
                text(
                    "First Seen",
                    1,
                    "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
                ),
                text("Count", 1, "The number of times this event has occurred."),
                col("Name", "string", "name", 1, "Name must be unique within a namespace."),
            ],
            Box::new(event_row),
        ),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings", _) => (
            vec![
                name_col(),
                text("Role", 0, "RoleRef is the reference to the role the binding grants."),
                age_col(),
                text("Users", 1, "Users in the binding."),
                text("Groups", 1, "Groups in the binding."),
                text("ServiceAccounts", 1, "ServiceAccounts in the binding."),
            ],
            Box::new(|o, now| {
                let subjects = |kind: &str| -> String {
                    o.get("subjects")
                        .and_then(Value::as_array)
                        .map(|ss| {
                            ss.iter()
                                .filter(|s| s["kind"] == kind)
                                .map(|s| match s["namespace"].as_str() {
                                    Some(ns) if kind == "ServiceAccount" => {
                                        format!("{ns}/{}", s["name"].as_str().unwrap_or(""))
                                    }
                                    _ => s["name"].as_str().unwrap_or("").to_string(),
                                })
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .unwrap_or_default()
                };
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(format!("{}/{}", s(o, "/roleRef/kind"), s(o, "/roleRef/name"))),
                    json!(age(o, now)),
                    json!(subjects("User")),
                    json!(subjects("Group")),
                    json!(subjects("ServiceAccount")),
                ]
            }),
        ),
        ("admissionregistration.k8s.io", "validatingadmissionpolicies", _) => (
            vec![
                name_col(),
                col(
                    "Validations",
                    "integer",
                    "",
                    0,
                    "Validations indicates the number of validation rules defined in this configuration",
                ),
                text("ParamKind", 0, "ParamKind specifies the kind of resources used to parameterize this policy"),
                age_col(),
            ],
            Box::new(|o, now| {
                let validations = o.pointer("/spec/validations").and_then(Value::as_array).map_or(0, Vec::len);
                let param_kind = match o.pointer("/spec/paramKind").filter(|k| !k.is_null()) {
                    Some(k) => format!("{}/{}", s(k, "/apiVersion"), s(k, "/kind")),
                    None => "<unset>".into(),
                };
                vec![json!(s(o, "/metadata/name")), json!(validations), json!(param_kind), json!(age(o, now))]
            }),
        ),
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings", _) => (
            vec![
                name_col(),
                text("PolicyName", 0, "PolicyName indicates the policy definition which the policy binding binded to"),
                text("ParamRef", 0, "ParamRef indicates the param resource which sets the configration param"),
                age_col(),
            ],
            Box::new(|o, now| {
                // As kubectl's printer: namespace/name, `*/name` without a namespace; a selector
                // is shown in its query form (the real printer prints Go's struct).
                let param = match o.pointer("/spec/paramRef").filter(|p| !p.is_null()) {
                    None => "<unset>".to_string(),
                    Some(p) if !s(p, "/name").is_empty() => match s(p, "/namespace") {
                        "" => format!("*/{}", s(p, "/name")),
                        ns => format!("{ns}/{}", s(p, "/name")),
                    },
                    Some(p) => p
                        .get("selector")
                        .and_then(|sel| crate::store::selector::LabelSelector::from_api(sel).ok())
                        .map_or_else(|| "<error>".into(), |sel| sel.to_query_string()),
                };
                vec![json!(s(o, "/metadata/name")), json!(s(o, "/spec/policyName")), json!(param), json!(age(o, now))]
            }),
        ),
        ("apps", "deployments", _) => (
            vec![
                name_col(),
                text("Ready", 0, "Number of the pod with ready state"),
                col(
                    "Up-to-date",
                    "integer",
                    "",
                    0,
                    "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                ),
                col(
                    "Available",
                    "integer",
                    "",
                    0,
                    "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                ),
                age_col(),
                text("Containers", 1, "Names of each container in the template."),
                text("Images", 1, "Images referenced by each container in the template."),
                text(
                    "Selector",
                    1,
                    "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
                ),
            ],
            Box::new(|o, now| {
                let int = |p: &str| o.pointer(p).and_then(Value::as_i64).unwrap_or(0);
                let (containers, images) = containers_and_images(o.pointer("/spec/template/spec"));
                let selector = o
                    .pointer("/spec/selector/matchLabels")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect::<Vec<_>>().join(",")
                    })
                    .unwrap_or_default();
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(format!(
                        "{}/{}",
                        int("/status/readyReplicas"),
                        o.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)
                    )),
                    json!(int("/status/updatedReplicas")),
                    json!(int("/status/availableReplicas")),
                    json!(age(o, now)),
                    json!(containers),
                    json!(images),
                    json!(selector),
                ]
            }),
        ),
        ("discovery.k8s.io", "endpointslices", _) => (
            vec![
                name_col(),
                text("AddressType", 0, "The type of address held in this EndpointSlice."),
                text("Ports", 0, "The ports held in this EndpointSlice."),
                text("Endpoints", 0, "The endpoints held in this EndpointSlice."),
                age_col(),
            ],
            Box::new(|o, now| {
                let list = |ptr: &str, f: &dyn Fn(&Value) -> Vec<String>| {
                    let items: Vec<String> = o
                        .pointer(ptr)
                        .and_then(Value::as_array)
                        .map(|a| a.iter().flat_map(f).collect())
                        .unwrap_or_default();
                    if items.is_empty() { "<unset>".to_string() } else { items.join(",") }
                };
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(s(o, "/addressType")),
                    json!(list("/ports", &|p| vec![p["port"].to_string()])),
                    json!(list("/endpoints", &|e| {
                        e["addresses"]
                            .as_array()
                            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                            .unwrap_or_default()
                    })),
                    json!(age(o, now)),
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
        // printSecret: the count of `data` keys (stringData is merged into data on write).
        ("", "secrets", _) => (
            vec![name_col(), text("Type", 0, SECRET_TYPE_DOC), text("Data", 0, SECRET_DATA_DOC), age_col()],
            Box::new(|o, now| {
                let data = o.get("data").and_then(Value::as_object).map_or(0, |m| m.len());
                vec![json!(s(o, "/metadata/name")), json!(s(o, "/type")), json!(data), json!(age(o, now))]
            }),
        ),
        // printServiceAccount: how many Secrets it lists (0 since token Secrets are no longer
        // made for every ServiceAccount).
        ("", "serviceaccounts", _) => (
            vec![name_col(), text("Secrets", 0, SERVICE_ACCOUNT_SECRETS_DOC), age_col()],
            Box::new(|o, now| {
                let secrets = o.get("secrets").and_then(Value::as_array).map_or(0, Vec::len);
                vec![json!(s(o, "/metadata/name")), json!(secrets), json!(age(o, now))]
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

    #[test]
    fn printer_paths_read_fields_indexes_and_equality_filters() {
        let obj = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "Reachable", "status": "True"}], "n": [7, 8]}});
        assert_eq!(json_path(&obj, ".status.n[1]"), Some(&json!(8)));
        assert_eq!(json_path(&obj, r#".status.conditions[?(@.type=="Reachable")].status"#), Some(&json!("True")));
        assert_eq!(json_path(&obj, r#".status.conditions[?(@.type=="Gone")].status"#), None);
        assert_eq!(json_path(&obj, ".status.missing"), None);
    }

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
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
    fn disruption_budgets_print_their_budget_and_allowance() {
        let now = ts("2024-01-01T00:10:00Z");
        let pdb = json!({"metadata": {"name": "web", "creationTimestamp": "2024-01-01T00:00:00Z"},
                         "spec": {"maxUnavailable": "50%"}, "status": {"disruptionsAllowed": 1}});
        let table = to_table("policy", "poddisruptionbudgets", &[&pdb], IncludeObject::None, now, None);
        let names: Vec<&str> =
            table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"]);
        assert_eq!(table["rows"][0]["cells"], json!(["web", "N/A", "50%", 1, "10m"]));
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

    #[test]
    fn secrets_count_their_data_and_service_accounts_their_secrets() {
        let now = ts("2026-01-01T00:05:00Z");
        let secret = json!({"metadata": {"name": "creds", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "type": "kubernetes.io/basic-auth", "data": {"username": "YQ==", "password": "Yg=="}});
        let t = to_table("", "secrets", &[&secret], IncludeObject::None, now, None);
        let names: Vec<&str> =
            t["columnDefinitions"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(names, ["Name", "Type", "Data", "Age"]);
        assert_eq!(t["rows"][0]["cells"], json!(["creds", "kubernetes.io/basic-auth", 2, "5m"]));
        let sa = json!({"metadata": {"name": "robot", "creationTimestamp": "2026-01-01T00:04:00Z"}, "secrets": [{"name": "creds"}]});
        let t = to_table("", "serviceaccounts", &[&sa], IncludeObject::None, now, None);
        let names: Vec<&str> =
            t["columnDefinitions"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(names, ["Name", "Secrets", "Age"]);
        assert_eq!(t["rows"][0]["cells"], json!(["robot", 1, "60s"]));
    }

    fn pod_cells(pod: Value) -> Value {
        let now = ts("2026-01-01T00:10:00Z");
        to_table("", "pods", &[&pod], IncludeObject::None, now, None)["rows"][0]["cells"].clone()
    }

    #[test]
    fn pod_status_follows_print_pod_for_init_waiting_completed_and_deleting_pods() {
        let base = |status: Value| {
            json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
                   "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}, {"name": "b"}]},
                   "status": status})
        };
        let init = base(
            json!({"phase": "Pending", "initContainerStatuses": [{"state": {"waiting": {"reason": "PodInitializing"}}}]}),
        );
        assert_eq!(pod_cells(init)[2], "Init:0/1");
        let crash = base(
            json!({"phase": "Pending", "initContainerStatuses": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
        );
        assert_eq!(pod_cells(crash)[2], "Init:CrashLoopBackOff");
        let killed = base(
            json!({"phase": "Pending", "initContainerStatuses": [{"state": {"terminated": {"exitCode": 137, "signal": 9}}}]}),
        );
        assert_eq!(pod_cells(killed)[2], "Init:Signal:9");
        let done = json!({"state": {"terminated": {"exitCode": 0}}});
        let running = base(json!({"phase": "Running", "initContainerStatuses": [done],
            "containerStatuses": [
                {"ready": true, "state": {"running": {}}, "restartCount": 1},
                {"ready": false, "state": {"waiting": {"reason": "CrashLoopBackOff"}}, "restartCount": 2,
                 "lastState": {"terminated": {"finishedAt": "2026-01-01T00:08:00Z"}}}]}));
        let cells = pod_cells(running.clone());
        assert_eq!(
            (&cells[1], &cells[2], &cells[3], &cells[4]),
            (&json!("1/2"), &json!("CrashLoopBackOff"), &json!("3 (2m ago)"), &json!("10m"))
        );
        let mut deleting = running.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:09:00Z");
        assert_eq!(pod_cells(deleting.clone())[2], "Terminating");
        deleting["status"]["reason"] = json!("NodeLost");
        assert_eq!(pod_cells(deleting)[2], "Unknown");
        let finished = base(json!({"phase": "Succeeded", "initContainerStatuses": [done],
            "containerStatuses": [{"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}));
        let mut gone = finished.clone();
        gone["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:09:00Z");
        assert_eq!(pod_cells(gone)[2], "Completed", "terminal pods are not shown as Terminating");
        let sidecar_done = base(json!({"phase": "Running", "initContainerStatuses": [done],
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"ready": true, "state": {"running": {}}}, {"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}));
        assert_eq!(pod_cells(sidecar_done)[2], "NotReady");
        let with_sidecar = |status: Value| {
            json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
                   "spec": {"initContainers": [{"name": "s", "restartPolicy": "Always"}, {"name": "i"}],
                            "containers": [{"name": "a"}]},
                   "status": status})
        };
        let sidecar_up =
            json!({"name": "s", "started": true, "ready": true, "restartCount": 2, "state": {"running": {}}});
        let initializing = with_sidecar(json!({"phase": "Pending", "initContainerStatuses": [sidecar_up,
            {"name": "i", "state": {"running": {}}}]}));
        assert_eq!(pod_cells(initializing)[2], "Init:1/2", "a started sidecar lets the count go on");
        let running = with_sidecar(
            json!({"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
            "initContainerStatuses": [sidecar_up, {"name": "i", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
            "containerStatuses": [{"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}}}]}),
        );
        let cells = pod_cells(running);
        assert_eq!(
            (&cells[1], &cells[2], &cells[3]),
            (&json!("2/2"), &json!("Running"), &json!("3")),
            "the sidecar counts"
        );
    }

    #[test]
    fn pod_wide_columns_show_ip_node_and_readiness_gates() {
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}], "nodeName": "n1", "readinessGates": [{"conditionType": "x"}, {"conditionType": "y"}]},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.7"}], "conditions": [{"type": "x", "status": "True"}]}});
        let cells = pod_cells(pod);
        assert_eq!(cells.as_array().unwrap()[5..], [json!("10.0.0.7"), json!("n1"), json!("<none>"), json!("1/2")]);
    }
}
