//! The StatefulSet controller of a simulated cluster, following the real one
//! (`pkg/controller/statefulset` of kubernetes/kubernetes): pods `<set>-<ordinal>` for the ordinals
//! `[start, start+replicas)` — or, for OpenKruise's Advanced StatefulSet, the first `replicas`
//! ordinals from `start` not in `reserveOrdinals` —, PVCs from claim templates created before their pod and reused,
//! condemned pods (outside the range) deleted highest ordinal first, OrderedReady waiting for
//! Running+Ready+Available before each step, Parallel not waiting, ControllerRevisions with
//! RollingUpdate (partition) and OnDelete, PVC retention through owner references, and status
//! written through `/status`.
//!
//! Runs as one task per cluster in level-triggered sweeps, woken by changes and by the moment
//! a Ready pod of a set with `minReadySeconds` becomes available.
//! It writes only through the cluster's registry, as the real controller writes through the API.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Weak},
    time::Duration,
};

use serde_json::{Value, json};

use crate::{
    cluster::{
        Cluster, adoption,
        controller_loop::Wake,
        events::{EventType, Occurrence, Recorder, Style},
        inplace::{self, Policy},
        kubelet::is_ready,
    },
    store::{
        actor::Component,
        error::ApiResult,
        object::{self, str_at},
        registry::{DeleteOptions, Subresource, WriteOptions},
        resources::ResourceType,
    },
};

/// Label carrying the pod name.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// Label carrying the ordinal (PodIndexLabel, on from 1.28).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// Label naming the ControllerRevision a pod was made from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// Runs the controller until the cluster is dropped.
pub async fn run(cluster: Weak<Cluster>) {
    let mut events = Recorder::new(
        Component::StatefulSetController,
        Style::Legacy { component: "statefulset-controller", host: None },
    );
    let mut retries = Retries::default();
    crate::cluster::controller_loop::run(
        cluster,
        crate::cluster::controller_loop::UNREAD_BY_WORKLOADS,
        move |c, wake| {
            sweep(c, &mut events, &mut retries, wake);
            available_deadlines(c, wake);
            events.next_due(c, wake);
        },
    )
    .await;
}

struct Kinds {
    /// apps/v1 StatefulSets, or OpenKruise's Advanced StatefulSets (apps.kruise.io).
    sets: Arc<ResourceType>,
    pods: Arc<ResourceType>,
    pvcs: Arc<ResourceType>,
    revisions: Arc<ResourceType>,
    /// Whose writes these are in the resource account: the StatefulSet controller's, or
    /// OpenKruise's.
    by: Component,
}

fn kinds(cluster: &Cluster) -> Kinds {
    let get = |g: &str, p: &str| cluster.resources.by_plural(g, p).expect("built-in resource");
    Kinds {
        sets: get("apps", "statefulsets"),
        pods: get("", "pods"),
        pvcs: get("", "persistentvolumeclaims"),
        revisions: get("apps", "controllerrevisions"),
        by: Component::StatefulSetController,
    }
}

/// Failed syncs in a row, by set uid: the StatefulSet controller's work queue puts a set whose
/// sync failed back after a delay that doubles with each failure (client-go's item rate
/// limiter: 5 ms, doubling, at most 1000 s; simulated time here). Without it a failed create
/// was tried again only when something else it reads changed, so how often it was retried
/// depended on how many such changes a busy machine coalesced into one sweep.
#[derive(Default)]
struct Retries(HashMap<String, u32>);

impl Retries {
    /// Notes a set's sync: a failure asks for the next try after the backoff; a success resets it.
    fn synced(&mut self, cluster: &Cluster, uid: &str, failed: bool, wake: &Wake) {
        if !failed {
            self.0.remove(uid);
            return;
        }
        let n = self.0.entry(uid.to_string()).or_default();
        let delay = Duration::from_millis(5).saturating_mul(1u32 << (*n).min(20)).min(Duration::from_secs(1000));
        *n = n.saturating_add(1);
        wake.after(cluster.config.real(delay));
    }
}

/// One pass over every StatefulSet of the cluster, and every Advanced StatefulSet where
/// the simulated OpenKruise is installed.
fn sweep(cluster: &Cluster, events: &mut Recorder, retries: &mut Retries, wake: &Wake) {
    cluster.counters.statefulset_sweeps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let k = kinds(cluster);
    let kruise = cluster.resources.by_plural(KRUISE_GROUP, "statefulsets").map(|sets| Kinds {
        sets,
        pods: k.pods.clone(),
        pvcs: k.pvcs.clone(),
        revisions: k.revisions.clone(),
        by: Component::Kruise,
    });
    // Read once per sweep, not once per set: a sweep costs O(objects), not O(sets × objects).
    let mut snapshot = Snapshot::read(cluster);
    // Orphans are adopted first, so that a set recreated over running pods syncs with them.
    if !snapshot.orphan_pods.is_empty() || !snapshot.orphan_revisions.is_empty() {
        let mut adopted = 0;
        for k in std::iter::once(&k).chain(kruise.as_ref()) {
            let (sets, _) = cluster.storage.list(&k.sets.storage_key(), None);
            adopted += adoption::adopt(cluster, &k.revisions, &sets, &snapshot.orphan_revisions, k.by);
            adopted += adoption::adopt(cluster, &k.pods, &sets, &snapshot.orphan_pods, k.by);
        }
        if adopted > 0 {
            snapshot = Snapshot::read(cluster);
        }
    }
    let mut seen = std::collections::HashSet::new();
    for k in std::iter::once(&k).chain(kruise.as_ref()) {
        let (sets, _) = cluster.storage.list(&k.sets.storage_key(), None);
        for set in sets {
            let mut failed = false;
            if let Err(e) = sync(cluster, k, &set, &snapshot, events, &mut failed) {
                tracing::debug!(cluster = %cluster.config.name, set = object::name(&set), error = %e, "statefulset sync");
                failed = true;
            }
            retries.synced(cluster, object::uid(&set), failed, wake);
            seen.insert(object::uid(&set).to_string());
        }
    }
    // Sets gone since are forgotten.
    retries.0.retain(|uid, _| seen.contains(uid));
}

/// OpenKruise's API group (Advanced StatefulSet).
pub const KRUISE_GROUP: &str = "apps.kruise.io";
/// Kruise's label asking its controller to delete (and so recreate) a pod.
pub const SPECIFIED_DELETE: &str = "apps.kruise.io/specified-delete";

/// Whether a pod is labelled for Kruise's specified deletion.
fn specified_delete(pod: &Value) -> bool {
    pod.pointer(&format!("/metadata/labels/{}", SPECIFIED_DELETE.replace('/', "~1"))).is_some()
}

/// `scaleStrategy.maxUnavailable` of an Advanced StatefulSet as a count: an integer, or a
/// percentage of the wanted replicas rounded up; `None` when unset (no limit).
fn max_unavailable(set: &Value, replicas: usize) -> Option<usize> {
    match set.pointer("/spec/scaleStrategy/maxUnavailable")? {
        Value::Number(n) => n.as_u64().map(|n| (n as usize).max(1)),
        Value::String(s) => {
            let pct: usize = s.strip_suffix('%')?.parse().ok()?;
            Some((replicas * pct).div_ceil(100).max(1))
        }
        _ => None,
    }
}

/// The ordinals a set wants, ascending: `[start, start+replicas)` for apps/v1; for an Advanced
/// StatefulSet the first `replicas` ordinals from `start` that are not in `reserveOrdinals`.
pub fn desired_ordinals(set: &Value, kruise: bool) -> Vec<i64> {
    let start = i64_at(set, "/spec/ordinals/start", 0);
    let replicas = i64_at(set, "/spec/replicas", 1).max(0);
    if !kruise {
        return (start..start + replicas).collect();
    }
    let reserved: std::collections::BTreeSet<i64> = set
        .pointer("/spec/reserveOrdinals")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    (start..).filter(|o| !reserved.contains(o)).take(replicas as usize).collect()
}

fn i64_at(v: &Value, ptr: &str, default: i64) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(default)
}

/// The uid of the object's controller (the owner reference with `controller: true`).
fn controller_uid(obj: &Value) -> Option<&str> {
    object::owner_refs(obj).iter().find(|r| r["controller"] == true).and_then(|r| r["uid"].as_str())
}

/// What a sweep reads besides the sets, listed once at its start: pods and ControllerRevisions
/// by their controller's uid, claims by namespace and name. Each set's sync writes only its own
/// pods, revisions and claims, so a snapshot taken before the others' syncs is as good as one
/// taken before its own.
struct Snapshot {
    pods: HashMap<String, Vec<Arc<Value>>>,
    revisions: HashMap<String, Vec<Arc<Value>>>,
    /// Pods and ControllerRevisions with no controller, for the sets to adopt.
    orphan_pods: Vec<Arc<Value>>,
    orphan_revisions: Vec<Arc<Value>>,
    pvcs: HashMap<String, HashMap<String, Arc<Value>>>,
    none: HashMap<String, Arc<Value>>,
}

impl Snapshot {
    fn read(cluster: &Cluster) -> Self {
        let by_controller = |res: (String, String)| {
            let mut out: HashMap<String, Vec<Arc<Value>>> = HashMap::new();
            let mut orphans = Vec::new();
            for obj in cluster.storage.list(&res, None).0 {
                match controller_uid(&obj) {
                    Some(uid) => out.entry(uid.to_string()).or_default().push(obj.clone()),
                    None => orphans.push(obj.clone()),
                }
            }
            (out, orphans)
        };
        let mut pvcs: HashMap<String, HashMap<String, Arc<Value>>> = HashMap::new();
        for pvc in cluster.storage.list(&(String::new(), "persistentvolumeclaims".into()), None).0 {
            pvcs.entry(object::namespace(&pvc).to_string()).or_default().insert(object::name(&pvc).to_string(), pvc);
        }
        let (pods, orphan_pods) = by_controller((String::new(), "pods".into()));
        let (revisions, orphan_revisions) = by_controller(("apps".into(), "controllerrevisions".into()));
        Snapshot { pods, revisions, orphan_pods, orphan_revisions, pvcs, none: HashMap::new() }
    }

    fn owned(map: &HashMap<String, Vec<Arc<Value>>>, uid: &str) -> impl Iterator<Item = Arc<Value>> {
        map.get(uid).into_iter().flatten().cloned()
    }
}

/// The ordinal of a pod of `set`, parsed from its name as the real controller does.
pub fn ordinal_of(set: &str, pod: &str) -> Option<i64> {
    pod.strip_prefix(set)?.strip_prefix('-')?.parse().ok().filter(|o: &i64| *o >= 0)
}

fn fnv32a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

/// The revision hash: FNV-32a of the template and collision count, safe-encoded like
/// `rand.SafeEncodeString`.
fn revision_hash(template: &Value, collision_count: i64) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut data = serde_json::to_vec(template).expect("JSON values always serialize");
    data.extend_from_slice(collision_count.to_string().as_bytes());
    fnv32a(&data).to_string().bytes().map(|c| ALPHANUMS[usize::from(c) % ALPHANUMS.len()] as char).collect()
}

fn set_owner_ref(set: &Value) -> Value {
    adoption::controller_ref(set)
}

/// Finds or creates the ControllerRevision for the set's current template; returns its name and
/// the template of every known revision.
fn ensure_revision(
    cluster: &Cluster,
    k: &Kinds,
    set: &Value,
    snapshot: &Snapshot,
) -> ApiResult<(String, BTreeMap<String, Value>)> {
    let ns = object::namespace(set);
    let set_uid = object::uid(set);
    let template = set.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let data = json!({"spec": {"template": template, "$patch": "replace"}});
    let revs: Vec<Arc<Value>> =
        Snapshot::owned(&snapshot.revisions, set_uid).filter(|r| object::namespace(r) == ns).collect();
    let mine: Vec<&Arc<Value>> = revs.iter().collect();
    let templates: BTreeMap<String, Value> = mine
        .iter()
        .map(|r| (object::name(r).to_string(), r.pointer("/data/spec/template").cloned().unwrap_or(json!({}))))
        .collect();
    if let Some(existing) = mine.iter().find(|r| r.get("data") == Some(&data)) {
        return Ok((object::name(existing).to_string(), templates));
    }
    let collision = i64_at(set, "/status/collisionCount", 0);
    let hash = revision_hash(&template, collision);
    let name = format!("{}-{hash}", object::name(set));
    let revision = mine.iter().map(|r| i64_at(r, "/revision", 0)).max().unwrap_or(0) + 1;
    let mut labels = set.pointer("/spec/template/metadata/labels").cloned().unwrap_or(json!({}));
    labels["controller.kubernetes.io/hash"] = json!(hash);
    let cr = json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [set_owner_ref(set)]},
        "data": data,
        "revision": revision,
    });
    match cluster.create(&k.revisions, Some(ns), cr, &WriteOptions::by(k.by)) {
        Ok(_) => {}
        Err(e) if e.code == 409 => {}
        Err(e) => return Err(e),
    }
    let mut templates = templates;
    templates.insert(name.clone(), template);
    Ok((name, templates))
}

/// The verb of the controller's Events about a pod or claim of a StatefulSet, as the
/// cluster's release words it: `create Pod web-0 in StatefulSet web successful` until 1.34,
/// `Create Pod …` from 1.35 (the verb is title-cased as the reason's is).
fn event_verb(cluster: &Cluster, verb: &str) -> String {
    match cluster.config.release.titles_statefulset_event_verbs() {
        true => verb[..1].to_uppercase() + &verb[1..],
        false => verb.to_string(),
    }
}

fn claim_name(claim: &Value, set: &str, ordinal: i64) -> String {
    format!("{}-{set}-{ordinal}", str_at(claim, "/metadata/name"))
}

fn new_pod(set: &Value, template: &Value, revision: &str, ordinal: i64) -> Value {
    let set_name = object::name(set);
    let name = format!("{set_name}-{ordinal}");
    // Shapes are checked on write; fall back to empty objects rather than trust them here.
    let mut meta = template.get("metadata").filter(|m| m.is_object()).cloned().unwrap_or(json!({}));
    let mut labels = meta.get("labels").filter(|l| l.is_object()).cloned().unwrap_or(json!({}));
    labels[POD_NAME_LABEL] = json!(name);
    labels[POD_INDEX_LABEL] = json!(ordinal.to_string());
    labels[REVISION_LABEL] = json!(revision);
    meta["labels"] = labels;
    meta["name"] = json!(name);
    meta["namespace"] = json!(object::namespace(set));
    meta["ownerReferences"] = json!([set_owner_ref(set)]);
    let mut spec = template.get("spec").filter(|s| s.is_object()).cloned().unwrap_or(json!({}));
    spec["hostname"] = json!(name);
    if let Some(svc) = set.pointer("/spec/serviceName").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        spec["subdomain"] = json!(svc);
    }
    if let Some(claims) = set.pointer("/spec/volumeClaimTemplates").and_then(Value::as_array) {
        let mut volumes: Vec<Value> = spec.get("volumes").and_then(Value::as_array).cloned().unwrap_or_default();
        for c in claims {
            let vname = str_at(c, "/metadata/name");
            volumes.retain(|v| v["name"] != vname);
            volumes
                .push(json!({"name": vname, "persistentVolumeClaim": {"claimName": claim_name(c, set_name, ordinal)}}));
        }
        spec["volumes"] = json!(volumes);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

/// Creates the missing PVCs of an ordinal; returns false when one is being deleted (the pod
/// must wait, as the real controller does: `pvc X is being deleted`).
fn ensure_claims(
    cluster: &Cluster,
    k: &Kinds,
    set: &Value,
    ordinal: i64,
    pvcs: &HashMap<String, Arc<Value>>,
    events: &mut Recorder,
) -> ApiResult<bool> {
    let Some(claims) = set.pointer("/spec/volumeClaimTemplates").and_then(Value::as_array) else { return Ok(true) };
    let ns = object::namespace(set);
    let mut ready = true;
    for c in claims {
        let name = claim_name(c, object::name(set), ordinal);
        match pvcs.get(&name) {
            Some(existing) if object::is_deleting(existing) => ready = false,
            Some(_) => {}
            None => {
                let mut labels = c.pointer("/metadata/labels").cloned().unwrap_or(json!({}));
                if let Some(ml) = set.pointer("/spec/selector/matchLabels").and_then(Value::as_object) {
                    for (key, v) in ml {
                        labels[key] = v.clone();
                    }
                }
                let pvc = json!({
                    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": name, "namespace": ns, "labels": labels},
                    "spec": c.get("spec").cloned().unwrap_or(json!({})),
                });
                let pod = format!("{}-{ordinal}", object::name(set));
                let create = event_verb(cluster, "create");
                match cluster.create(&k.pvcs, Some(ns), pvc, &WriteOptions::by(k.by)) {
                    Ok(_) => events.record(
                        cluster,
                        about_set(
                            set,
                            EventType::Normal,
                            "SuccessfulCreate",
                            format!("{create} Claim {name} Pod {pod} in StatefulSet {} success", object::name(set)),
                        ),
                    ),
                    Err(e) if e.code == 409 => {}
                    Err(e) => {
                        events.record(
                            cluster,
                            about_set(
                                set,
                                EventType::Warning,
                                "FailedCreate",
                                format!(
                                    "{create} Claim {name} for Pod {pod} in StatefulSet {} failed error: {}",
                                    object::name(set),
                                    e.message
                                ),
                            ),
                        );
                        return Err(e);
                    }
                }
            }
        }
    }
    Ok(ready)
}

fn phase(pod: &Value) -> &str {
    str_at(pod, "/status/phase")
}

/// Running, Ready and not going away — nor being updated in place (Ready lags the gate until
/// the kubelet's next sync; the update already took the pod out).
fn is_running_ready(pod: &Value) -> bool {
    phase(pod) == "Running" && is_ready(pod) && !object::is_deleting(pod) && !inplace::in_progress(pod)
}

/// Ready for at least `minReadySeconds` (scaled by the time factor).
fn is_available(cluster: &Cluster, pod: &Value, min_ready: i64) -> bool {
    if !is_running_ready(pod) {
        return false;
    }
    if min_ready <= 0 {
        return true;
    }
    let Some(since) = ready_since(pod) else { return false };
    let needed = cluster.config.real(Duration::from_secs(min_ready as u64));
    // The member's own controller reads its kubelets' times on its own clock.
    let elapsed = cluster.clock().duration_since(since);
    elapsed.as_secs_f64() >= needed.as_secs_f64()
}

/// Asks `wake` for the moments Ready pods of sets with `minReadySeconds` become available:
/// nothing else changes then, and the set's status (and an OrderedReady step) waits on it.
fn available_deadlines(cluster: &Cluster, wake: &Wake) {
    let k = kinds(cluster);
    let kruise = cluster.resources.by_plural(KRUISE_GROUP, "statefulsets");
    let sets = std::iter::once(k.sets).chain(kruise).flat_map(|rt| cluster.storage.list(&rt.storage_key(), None).0);
    let min_ready: HashMap<String, i64> = sets
        .map(|set| (object::uid(&set).to_string(), i64_at(&set, "/spec/minReadySeconds", 0)))
        .filter(|(_, m)| *m > 0)
        .collect();
    if min_ready.is_empty() {
        return;
    }
    for pod in cluster.storage.list(&(String::new(), "pods".into()), None).0 {
        let owner = object::owner_refs(&pod).iter().find(|r| r["controller"] == true).and_then(|r| r["uid"].as_str());
        if let Some(m) = owner.and_then(|uid| min_ready.get(uid))
            && let Some(left) = available_in(cluster, &pod, *m)
        {
            wake.after(left);
        }
    }
}

/// How long until a Running+Ready pod is available, if it is not yet.
fn available_in(cluster: &Cluster, pod: &Value, min_ready: i64) -> Option<Duration> {
    if !is_running_ready(pod) || min_ready <= 0 {
        return None;
    }
    let since = ready_since(pod)?;
    let needed = cluster.config.real(Duration::from_secs(min_ready as u64));
    // A transition ahead of this clock (it was set back since) is further away, not nearer.
    let elapsed = cluster.clock().duration_since(since);
    let left = jiff::SignedDuration::try_from(needed).ok()?.checked_sub(elapsed)?;
    Duration::try_from(left).ok().filter(|d| !d.is_zero())
}

/// When the pod's Ready condition last turned.
fn ready_since(pod: &Value) -> Option<jiff::Timestamp> {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["lastTransitionTime"].as_str())
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
}

/// Sets the PVC owner references the retention policy asks for.
fn retention_refs(
    cluster: &Cluster,
    k: &Kinds,
    set: &Value,
    ordinal: i64,
    pod: Option<&Value>,
    in_range: bool,
    pvcs: &HashMap<String, Arc<Value>>,
) {
    let Some(claims) = set.pointer("/spec/volumeClaimTemplates").and_then(Value::as_array) else { return };
    let when_deleted = str_at(set, "/spec/persistentVolumeClaimRetentionPolicy/whenDeleted") == "Delete";
    let when_scaled = str_at(set, "/spec/persistentVolumeClaimRetentionPolicy/whenScaled") == "Delete";
    let set_uid = object::uid(set);
    for c in claims {
        let name = claim_name(c, object::name(set), ordinal);
        let Some(pvc) = pvcs.get(&name) else { continue };
        let mut refs: Vec<Value> = object::owner_refs(pvc).to_vec();
        let before = refs.clone();
        refs.retain(|r| {
            r["uid"] != set_uid && !(r["kind"] == "Pod" && r["name"] == format!("{}-{ordinal}", object::name(set)))
        });
        let scaled_away = !in_range && when_scaled;
        if when_deleted && !scaled_away {
            refs.push(set_owner_ref(set));
        }
        if scaled_away && let Some(pod) = pod {
            refs.push(json!({"apiVersion": "v1", "kind": "Pod", "name": object::name(pod), "uid": object::uid(pod), "controller": true, "blockOwnerDeletion": true}));
        }
        if refs != before {
            let _ = cluster.update_with(
                &k.pvcs,
                object::namespace(pvc),
                &name,
                Subresource::Main,
                &WriteOptions::by(k.by),
                |cur| {
                    let mut next = cur.clone();
                    if refs.is_empty() {
                        object::metadata_mut(&mut next).remove("ownerReferences");
                    } else {
                        object::metadata_mut(&mut next).insert("ownerReferences".into(), json!(refs));
                    }
                    Ok(next)
                },
            );
        }
    }
}

/// An event about a StatefulSet, as `stateful_pod_control.go` words them.
fn about_set<'a>(set: &'a Value, event_type: EventType, reason: &'a str, message: String) -> Occurrence<'a> {
    Occurrence { about: set, field_path: None, event_type, reason, action: "", message }
}

fn delete_pod(cluster: &Cluster, k: &Kinds, set: &Value, pod: &Value, events: &mut Recorder) {
    let opts = DeleteOptions { precondition_uid: Some(object::uid(pod).to_string()), ..DeleteOptions::by(k.by) };
    let (pod_name, set_name) = (object::name(pod), object::name(set));
    let verb = event_verb(cluster, "delete");
    let deleted = match cluster.delete(&k.pods, object::namespace(pod), pod_name, &opts) {
        Ok(_) => true,
        // Gone already: from 1.36 the controller counts that as its delete done; before, and
        // for a pod replaced meanwhile, nothing of ours was deleted.
        Err(e) if e.code == 404 => cluster.config.release.counts_a_gone_pod_as_deleted(),
        Err(e) if e.code == 409 => false,
        Err(e) => {
            let message = format!("{verb} Pod {pod_name} in StatefulSet {set_name} failed error: {}", e.message);
            events.record(cluster, about_set(set, EventType::Warning, "FailedDelete", message));
            false
        }
    };
    if deleted {
        let message = format!("{verb} Pod {pod_name} in StatefulSet {set_name} successful");
        events.record(cluster, about_set(set, EventType::Normal, "SuccessfulDelete", message));
    }
}

/// One sync of one StatefulSet (`updateStatefulSet`).
/// Syncs one set; `failed` is set when a create failed though the sync went on (the set is
/// retried, see [`Retries`]).
fn sync(
    cluster: &Cluster,
    k: &Kinds,
    set: &Value,
    snapshot: &Snapshot,
    events: &mut Recorder,
    failed: &mut bool,
) -> ApiResult<()> {
    let ns = object::namespace(set);
    let set_name = object::name(set);
    let set_uid = object::uid(set);
    let (update_revision, templates) = ensure_revision(cluster, k, set, snapshot)?;
    let current_revision = set
        .pointer("/status/currentRevision")
        .and_then(Value::as_str)
        .filter(|r| templates.contains_key(*r))
        .map(str::to_string)
        .unwrap_or_else(|| update_revision.clone());

    let pods: BTreeMap<i64, Arc<Value>> = Snapshot::owned(&snapshot.pods, set_uid)
        .filter(|p| object::namespace(p) == ns)
        .filter_map(|p| ordinal_of(set_name, object::name(&p)).map(|o| (o, p)))
        .collect();
    let pvcs: &HashMap<String, Arc<Value>> = snapshot.pvcs.get(ns).unwrap_or(&snapshot.none);

    let desired = desired_ordinals(set, k.sets.group == KRUISE_GROUP);
    let wanted: std::collections::BTreeSet<i64> = desired.iter().copied().collect();
    let in_range = |o: i64| wanted.contains(&o);
    let monotonic = str_at(set, "/spec/podManagementPolicy") != "Parallel";
    let min_ready = i64_at(set, "/spec/minReadySeconds", 0);
    let on_delete = str_at(set, "/spec/updateStrategy/type") == "OnDelete";
    let partition = i64_at(set, "/spec/updateStrategy/rollingUpdate/partition", 0);
    // Kruise's scaleStrategy.maxUnavailable (Parallel only): at most this many of the wanted
    // pods missing or unavailable at once while scaling; pods labelled specified-delete are
    // deleted (and recreated at their ordinal) within the same budget.
    let kruise = k.sets.group == KRUISE_GROUP;
    let max_unavailable = kruise.then(|| max_unavailable(set, desired.len())).flatten();
    // Wanted pods that exist and are unavailable (starting, not ready, or going away), plus
    // those this sweep creates or deletes.
    let mut busy = desired
        .iter()
        .filter(|o| pods.get(o).is_some_and(|p| object::is_deleting(p) || !is_available(cluster, p, min_ready)))
        .count();
    let room = |busy: usize| max_unavailable.is_none_or(|m| busy < m);
    // Kruise's podUpdatePolicy: pods of an in-place policy carry the InPlaceUpdateReady gate.
    let policy = if kruise { Policy::of(set) } else { Policy::ReCreate };
    for pod in pods.values() {
        inplace::refresh(cluster, &k.pods, pod, k.by)?;
    }

    if !object::is_deleting(set) {
        'work: {
            if kruise && !monotonic {
                for (ordinal, pod) in &pods {
                    if specified_delete(pod) && wanted.contains(ordinal) && !object::is_deleting(pod) {
                        // An unavailable pod is already counted; an available one needs room.
                        let available = is_available(cluster, pod, min_ready);
                        if !available || room(busy) {
                            delete_pod(cluster, k, set, pod, events);
                            busy += usize::from(available);
                        }
                    }
                }
            }
            // Replicas, ascending.
            for (index, &ordinal) in desired.iter().enumerate() {
                match pods.get(&ordinal) {
                    None => {
                        // A new pod is unavailable until Ready: created only within the budget.
                        if !monotonic && !room(busy) {
                            continue;
                        }
                        if !ensure_claims(cluster, k, set, ordinal, pvcs, events)? {
                            if monotonic {
                                break 'work;
                            }
                            continue;
                        }
                        let revision = if (index as i64) < partition { &current_revision } else { &update_revision };
                        let template = templates.get(revision).cloned().unwrap_or(json!({}));
                        let mut pod = new_pod(set, &template, revision, ordinal);
                        if policy.in_place() {
                            inplace::add_gate(&mut pod);
                        }
                        let pod_name = format!("{set_name}-{ordinal}");
                        let created = cluster.create(&k.pods, Some(ns), pod, &WriteOptions::by(k.by));
                        match &created {
                            Ok(_) => events.record(
                                cluster,
                                about_set(
                                    set,
                                    EventType::Normal,
                                    "SuccessfulCreate",
                                    format!(
                                        "{} Pod {pod_name} in StatefulSet {set_name} successful",
                                        event_verb(cluster, "create")
                                    ),
                                ),
                            ),
                            Err(e) => {
                                *failed = true;
                                events.record(
                                    cluster,
                                    about_set(
                                        set,
                                        EventType::Warning,
                                        "FailedCreate",
                                        format!(
                                            "{} Pod {pod_name} in StatefulSet {set_name} failed error: {}",
                                            event_verb(cluster, "create"),
                                            e.message
                                        ),
                                    ),
                                )
                            }
                        }
                        busy += usize::from(created.is_ok());
                        match created {
                            Ok(_) | Err(_) if monotonic => break 'work,
                            _ => continue,
                        }
                    }
                    Some(pod) => {
                        // OrderedReady: a pod marked for deletion goes in its turn, one at a time.
                        let marked = kruise && monotonic && specified_delete(pod);
                        if (marked || matches!(phase(pod), "Failed" | "Succeeded")) && !object::is_deleting(pod) {
                            delete_pod(cluster, k, set, pod, events);
                            if monotonic {
                                break 'work;
                            }
                            continue;
                        }
                        if phase(pod) == "Pending" {
                            ensure_claims(cluster, k, set, ordinal, pvcs, events)?;
                        }
                        if monotonic && (object::is_deleting(pod) || !is_available(cluster, pod, min_ready)) {
                            break 'work;
                        }
                    }
                }
            }
            for (ordinal, pod) in &pods {
                retention_refs(cluster, k, set, *ordinal, Some(pod), in_range(*ordinal), pvcs);
            }
            // Condemned, highest ordinal first.
            let condemned: Vec<&Arc<Value>> =
                pods.iter().rev().filter(|(o, _)| !in_range(**o)).map(|(_, p)| p).collect();
            let first_unhealthy = condemned.iter().find(|p| !is_running_ready(p)).map(|p| object::uid(p).to_string());
            for pod in &condemned {
                if object::is_deleting(pod) {
                    if monotonic {
                        break 'work;
                    }
                    continue;
                }
                if monotonic
                    && !is_available(cluster, pod, min_ready)
                    && first_unhealthy.as_deref() != Some(object::uid(pod))
                {
                    break 'work;
                }
                delete_pod(cluster, k, set, pod, events);
                if monotonic {
                    break 'work;
                }
            }
            if on_delete {
                break 'work;
            }
            // RollingUpdate: highest ordinal down to the partition, one pod at a time, the next
            // only once the last is healthy again — under Parallel too: a pod deleted and not
            // yet recreated is as unhealthy as one starting (kube-controller-manager's
            // updateStatefulSet sees the recreated one, unready, and waits).
            for &ordinal in desired.iter().skip(partition.max(0) as usize).rev() {
                let Some(pod) = pods.get(&ordinal) else { break 'work };
                let revision = str_at(pod, "/metadata/labels/controller-revision-hash");
                if revision != update_revision && !object::is_deleting(pod) {
                    let new = templates.get(&update_revision).cloned().unwrap_or(json!({}));
                    let in_place =
                        policy.in_place() && templates.get(revision).is_some_and(|old| inplace::possible(old, &new));
                    if in_place {
                        inplace::update(cluster, &k.pods, pod, (&new, &update_revision), k.by)?;
                        let pod_name = object::name(pod);
                        events.record(
                            cluster,
                            about_set(
                                set,
                                EventType::Normal,
                                "SuccessfulUpdatePodInPlace",
                                format!("successfully update pod {pod_name} in-place(revision {update_revision})"),
                            ),
                        );
                    } else if policy != Policy::InPlaceOnly {
                        delete_pod(cluster, k, set, pod, events);
                    }
                    break 'work;
                }
                if !is_available(cluster, pod, min_ready) {
                    break 'work;
                }
            }
        }
    }
    write_status(cluster, k, set, &pods, &current_revision, &update_revision, min_ready)
}

fn write_status(
    cluster: &Cluster,
    k: &Kinds,
    set: &Value,
    pods: &BTreeMap<i64, Arc<Value>>,
    current_revision: &str,
    update_revision: &str,
    min_ready: i64,
) -> ApiResult<()> {
    let counted: Vec<&Arc<Value>> = pods.values().filter(|p| !phase(p).is_empty()).collect();
    let live = || counted.iter().filter(|p| !object::is_deleting(p));
    let revision_of = |p: &Value| str_at(p, "/metadata/labels/controller-revision-hash").to_string();
    let ready = counted.iter().filter(|p| is_running_ready(p)).count();
    let available = counted.iter().filter(|p| is_available(cluster, p, min_ready)).count();
    let current = live().filter(|p| revision_of(p) == current_revision).count();
    let updated = live().filter(|p| revision_of(p) == update_revision).count();
    let spec_replicas = i64_at(set, "/spec/replicas", 1) as usize;
    let (current_revision, current) =
        if updated == spec_replicas && ready == spec_replicas && counted.len() == spec_replicas {
            (update_revision, updated)
        } else {
            (current_revision, current)
        };
    let status = json!({
        "observedGeneration": i64_at(set, "/metadata/generation", 1),
        "replicas": counted.len(),
        "readyReplicas": ready,
        "availableReplicas": available,
        "currentReplicas": current,
        "updatedReplicas": updated,
        "currentRevision": current_revision,
        "updateRevision": update_revision,
        "collisionCount": i64_at(set, "/status/collisionCount", 0),
    });
    let mut status = status;
    if k.sets.group == KRUISE_GROUP {
        // What Kruise reports beside the apps/v1 fields (the scale subresource reads the selector).
        let selector = set
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect::<Vec<_>>().join(","))
            .unwrap_or_default();
        status["labelSelector"] = json!(selector);
        status["updatedReadyReplicas"] =
            json!(live().filter(|p| revision_of(p) == update_revision && is_running_ready(p)).count());
        status["updatedAvailableReplicas"] =
            json!(live().filter(|p| revision_of(p) == update_revision && is_available(cluster, p, min_ready)).count());
    }
    if set.get("status") == Some(&status) {
        return Ok(());
    }
    cluster.update_incarnation(&k.sets, set, Subresource::Status, k.by, |next| next["status"] = status)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kruise_skips_reserved_ordinals_and_apps_v1_ignores_them() {
        let set = |replicas: i64, reserve: &[i64]| json!({"spec": {"replicas": replicas, "reserveOrdinals": reserve}});
        assert_eq!(desired_ordinals(&set(4, &[1]), true), [0, 2, 3, 4]);
        assert_eq!(desired_ordinals(&set(4, &[1, 3]), true), [0, 2, 4, 5]);
        assert_eq!(desired_ordinals(&set(3, &[1, 3]), true), [0, 2, 4]);
        assert_eq!(desired_ordinals(&set(3, &[1, 3]), false), [0, 1, 2]);
        let started = json!({"spec": {"replicas": 2, "ordinals": {"start": 5}, "reserveOrdinals": [5]}});
        assert_eq!(desired_ordinals(&started, true), [6, 7]);
    }

    #[test]
    fn ordinals_parse_like_the_real_controller() {
        assert_eq!(ordinal_of("web", "web-0"), Some(0));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        assert_eq!(ordinal_of("web", "webx-1"), None);
        assert_eq!(ordinal_of("web", "web-a"), None);
        assert_eq!(ordinal_of("web-1", "web-1-3"), Some(3));
    }

    #[test]
    fn revision_hashes_are_stable_and_depend_on_the_template() {
        let a = revision_hash(&json!({"spec": {"containers": [{"image": "a"}]}}), 0);
        assert_eq!(a, revision_hash(&json!({"spec": {"containers": [{"image": "a"}]}}), 0));
        assert_ne!(a, revision_hash(&json!({"spec": {"containers": [{"image": "b"}]}}), 0));
        assert_ne!(a, revision_hash(&json!({"spec": {"containers": [{"image": "a"}]}}), 1));
        assert!(a.bytes().all(|c| b"bcdfghjklmnpqrstvwxz2456789".contains(&c)));
    }
}
