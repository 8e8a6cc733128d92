//! The disruption controller, as kube-controller-manager's (`pkg/controller/disruption`) keeps
//! every PodDisruptionBudget's status: the pods its selector picks in its namespace, how many
//! are expected (the pods' controllers' scale — a StatefulSet's or an Advanced StatefulSet's
//! `spec.replicas`, any kind with a `/scale` subresource — or, for an integer `minAvailable`,
//! the number of pods), how many must stay healthy, how many are healthy (Ready and not being
//! deleted, nor just evicted), and so how many disruptions are allowed, with the
//! `DisruptionAllowed` condition. The eviction subresource (the API layer's `eviction` module)
//! spends that allowance; this controller recomputes it.
//!
//! Runs in the cluster's controller loop: woken by any change (pods, budgets, StatefulSets),
//! and at the deadline of an eviction whose pod was never deleted, to forget it. Every write is
//! conditional on the resourceVersion it computed from, so an eviction's decrement is never
//! overwritten by a stale recomputation.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Weak},
    time::Duration,
};

use serde_json::{Map, Value, json};

use crate::{
    cluster::{
        Cluster,
        controller_loop::Wake,
        events::{EventType, Occurrence, Recorder, Style},
        kubelet,
    },
    store::{
        actor::Component,
        object,
        registry::{Subresource, WriteOptions},
        resources::ResourceType,
        selector::LabelSelector,
    },
};

/// Simulated time after which an eviction whose pod was never deleted is forgotten
/// (`DeletionTimeout`).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// `disruptedPods` times have one-second precision, so an entry is never forgotten sooner than
/// this, however fast simulated time runs.
const MIN_DELETION_TIMEOUT: Duration = Duration::from_secs(2);

/// The type, and reasons, of the budget's condition (`policy/v1` constants).
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
const SUFFICIENT_PODS: &str = "SufficientPods";
const INSUFFICIENT_PODS: &str = "InsufficientPods";
const SYNC_FAILED: &str = "SyncFailed";

/// Runs the disruption controller of a cluster until the cluster is dropped.
pub async fn run(cluster: Weak<Cluster>) {
    // kube-controller-manager's disruption controller records as `controllermanager`.
    let mut events =
        Recorder::new(Component::DisruptionController, Style::Legacy { component: "controllermanager", host: None });
    crate::cluster::controller_loop::run(cluster, crate::cluster::controller_loop::UNREAD_BY_WORKLOADS, |c, wake| {
        sweep(c, &mut events, wake)
    })
    .await;
}

fn sweep(cluster: &Cluster, events: &mut Recorder, wake: &Wake) {
    cluster.counters.disruption_sweeps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let Some(pdb_rt) = cluster.resources.by_plural("policy", "poddisruptionbudgets") else { return };
    let (pdbs, _) = cluster.storage.list(&pdb_rt.storage_key(), None);
    if pdbs.is_empty() {
        return;
    }
    let (pods, _) = cluster.storage.list(&(String::new(), "pods".into()), None);
    for pdb in &pdbs {
        if let Some(event) = sync(cluster, &pdb_rt, pdb, &pods) {
            events.record(cluster, event.occurrence(pdb));
        }
    }
    // Evictions whose pods were never deleted are forgotten after the deletion timeout: sweep
    // again then (the budgets read now; a newer write wakes the loop anyway).
    let timeout = cluster.config.real(DELETION_TIMEOUT).max(MIN_DELETION_TIMEOUT);
    let now = jiff::Timestamp::now();
    // A second more than the timeout: the recorded times are truncated to seconds.
    let forget_after = timeout + Duration::from_secs(1);
    for pdb in &pdbs {
        for at in disrupted_pods(pdb).values().filter_map(parse_time) {
            let passed = if now >= at { now.duration_since(at).unsigned_abs() } else { Duration::ZERO };
            if let Some(left) = forget_after.checked_sub(passed).filter(|d| !d.is_zero()) {
                wake.after(left);
            }
        }
    }
}

/// What a sync that changed a budget's status tells in an Event, as kcm's `trySync` does.
enum SyncEvent {
    /// `NoPods`: the selector picks no pod.
    NoPods,
    /// `CalculateExpectedPodCountFailed`: the status could not be computed (why).
    Failed(String),
}

impl SyncEvent {
    fn occurrence<'a>(&'a self, pdb: &'a Value) -> Occurrence<'a> {
        let (event_type, reason, message) = match self {
            SyncEvent::NoPods => (EventType::Normal, "NoPods", "No matching pods found".to_string()),
            SyncEvent::Failed(why) => (
                EventType::Warning,
                "CalculateExpectedPodCountFailed",
                format!("Failed to calculate the number of expected pods: {why}"),
            ),
        };
        Occurrence { about: pdb, field_path: None, event_type, reason, action: "", message }
    }
}

/// Brings one budget's status up to date from the pods read with it (`trySync`); when it
/// wrote a new status, what to tell in an Event, if anything.
fn sync(cluster: &Cluster, pdb_rt: &ResourceType, pdb: &Value, pods: &[Arc<Value>]) -> Option<SyncEvent> {
    let timeout = cluster.config.real(DELETION_TIMEOUT).max(MIN_DELETION_TIMEOUT);
    let ns = object::namespace(pdb);
    let in_ns: Vec<&Value> = pods.iter().filter(|p| object::namespace(p) == ns).map(|p| &**p).collect();
    let now = jiff::Timestamp::now();
    let (status, event) = match desired_status(pdb, &in_ns, |r| controller_scale(cluster, ns, r), now, timeout) {
        Ok(s) => {
            let selector = LabelSelector::from_api(pdb.pointer("/spec/selector").unwrap_or(&Value::Null));
            let none = selector.is_ok_and(|sel| !in_ns.iter().any(|p| sel.matches(object::labels(p))));
            (s, none.then_some(SyncEvent::NoPods))
        }
        Err(e) => (fail_safe(pdb, &e), Some(SyncEvent::Failed(e))),
    };
    if pdb.get("status") == Some(&status) {
        return None;
    }
    // Conditional on the version read (`next` keeps its resourceVersion): an eviction's
    // decrement since then wins, and the next sweep (woken by that write) recomputes from it.
    let mut next = pdb.clone();
    next["status"] = status;
    cluster
        .update_with(
            pdb_rt,
            ns,
            object::name(pdb),
            Subresource::Status,
            &WriteOptions::by(Component::DisruptionController),
            |_| Ok(next),
        )
        .ok()
        .and(event)
}

/// The scale of the controller an owner reference names, as kcm's finders read it: `Ok(None)`
/// when no such controller exists (gone, or another incarnation), an error when its kind is
/// unknown or has no `/scale`.
fn controller_scale(cluster: &Cluster, ns: &str, owner: &Value) -> Result<Option<(String, i64)>, String> {
    let api_version = owner.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let kind = owner.get("kind").and_then(Value::as_str).unwrap_or("");
    let Some(rt) = cluster.resources.by_kind(group, kind) else {
        return Err(format!("no matches for kind \"{kind}\" in version \"{api_version}\""));
    };
    let Some(scale) = &rt.scale else {
        return Err(format!("{} does not implement the scale subresource", rt.group_resource()));
    };
    let name = owner.get("name").and_then(Value::as_str).unwrap_or("");
    let Some(obj) = cluster.storage.get(&rt.storage_key(), ns, name) else { return Ok(None) };
    if object::uid(&obj) != owner.get("uid").and_then(Value::as_str).unwrap_or("") {
        return Ok(None);
    }
    let replicas = object::at_path(&obj, &scale.spec_replicas).and_then(Value::as_i64).unwrap_or(0);
    Ok(Some((object::uid(&obj).to_string(), replicas)))
}

/// `GetScaledValueFromIntOrPercent(v, total, roundUp=true)`.
fn scaled(v: &Value, total: i64) -> Result<i64, String> {
    match v {
        Value::String(s) => {
            let p: i64 = s
                .strip_suffix('%')
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            Ok((p * total + 99) / 100)
        }
        other => other.as_i64().ok_or_else(|| format!("invalid value for IntOrString: {other}")),
    }
}

/// The pods' controllers' total scale (`getExpectedScale`), counting each controller once;
/// pods without a controller are left out (kcm warns of them).
fn expected_scale(
    pods: &[&Value],
    mut scale_of: impl FnMut(&Value) -> Result<Option<(String, i64)>, String>,
) -> Result<i64, String> {
    let mut seen: HashMap<String, i64> = HashMap::new();
    for pod in pods {
        let Some(owner) = object::owner_refs(pod).iter().find(|r| r.get("controller") == Some(&json!(true))) else {
            continue;
        };
        if owner.get("uid").and_then(Value::as_str).is_some_and(|u| seen.contains_key(u)) {
            continue;
        }
        match scale_of(owner)? {
            Some((uid, replicas)) => {
                seen.insert(uid, replicas);
            }
            None => return Err(format!("found no controllers for pod {:?}", object::name(pod))),
        }
    }
    Ok(seen.values().sum())
}

/// `getExpectedPodCount`: (expected pods, desired healthy).
fn expected_and_desired(
    spec: &Value,
    pods: &[&Value],
    scale_of: impl FnMut(&Value) -> Result<Option<(String, i64)>, String>,
) -> Result<(i64, i64), String> {
    let field = |k: &str| spec.get(k).filter(|v| !v.is_null());
    if let Some(max) = field("maxUnavailable") {
        let expected = expected_scale(pods, scale_of)?;
        Ok((expected, (expected - scaled(max, expected)?).max(0)))
    } else if let Some(min) = field("minAvailable") {
        if min.is_string() {
            let expected = expected_scale(pods, scale_of)?;
            Ok((expected, scaled(min, expected)?))
        } else {
            Ok((pods.len() as i64, scaled(min, 0)?))
        }
    } else {
        Ok((0, 0))
    }
}

fn parse_time(v: &Value) -> Option<jiff::Timestamp> {
    v.as_str()?.parse().ok()
}

/// What the budget's status should be now (`trySync` and `updatePdbStatus`). `pods` are the
/// pods of the budget's namespace; `scale_of` reads a controller's scale.
pub fn desired_status(
    pdb: &Value,
    pods: &[&Value],
    scale_of: impl FnMut(&Value) -> Result<Option<(String, i64)>, String>,
    now: jiff::Timestamp,
    deletion_timeout: Duration,
) -> Result<Value, String> {
    let selector = LabelSelector::from_api(pdb.pointer("/spec/selector").unwrap_or(&Value::Null))?;
    let selected: Vec<&Value> = pods.iter().copied().filter(|p| selector.matches(object::labels(p))).collect();
    let (expected, desired) = expected_and_desired(pdb.get("spec").unwrap_or(&Value::Null), &selected, scale_of)?;
    // Evictions answered but not yet seen as deletions (`buildDisruptedPodMap`).
    let recorded = pdb.pointer("/status/disruptedPods").and_then(Value::as_object);
    let timeout = jiff::SignedDuration::try_from(deletion_timeout).unwrap_or(jiff::SignedDuration::MAX);
    let mut disrupted = Map::new();
    for pod in selected.iter().filter(|p| !object::is_deleting(p)) {
        let Some(at) = recorded.and_then(|m| m.get(object::name(pod))) else { continue };
        if parse_time(at).is_some_and(|t| t.checked_add(timeout).is_ok_and(|end| end >= now)) {
            disrupted.insert(object::name(pod).to_string(), at.clone());
        }
    }
    let healthy = selected
        .iter()
        .filter(|p| !object::is_deleting(p) && !disrupted.contains_key(object::name(p)) && kubelet::is_ready(p))
        .count() as i64;
    let allowed = if expected <= 0 { 0 } else { (healthy - desired).max(0) };
    let generation = pdb.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": pdb.pointer("/status/conditions").cloned().unwrap_or(json!([])),
    });
    if !disrupted.is_empty() {
        status["disruptedPods"] = Value::Object(disrupted);
    }
    set_disruption_allowed(&mut status);
    Ok(status)
}

/// `failSafe`: the status as it was, with no disruption allowed and a condition saying why.
fn fail_safe(pdb: &Value, err: &str) -> Value {
    let mut status = pdb.get("status").cloned().filter(Value::is_object).unwrap_or(json!({}));
    status["disruptionsAllowed"] = json!(0);
    let observed = status.get("observedGeneration").and_then(Value::as_i64).unwrap_or(0);
    set_condition(&mut status, "False", SYNC_FAILED, err, observed);
    status
}

/// `UpdateDisruptionAllowedCondition`: True (`SufficientPods`) while a disruption is allowed,
/// else False (`InsufficientPods`); the eviction subresource calls it after a decrement too.
pub fn set_disruption_allowed(status: &mut Value) {
    let allowed = status.get("disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0) > 0;
    let observed = status.get("observedGeneration").and_then(Value::as_i64).unwrap_or(0);
    let (value, reason) = if allowed { ("True", SUFFICIENT_PODS) } else { ("False", INSUFFICIENT_PODS) };
    set_condition(status, value, reason, "", observed);
}

/// `meta.SetStatusCondition`: the transition time moves only when the status changes.
fn set_condition(status: &mut Value, value: &str, reason: &str, message: &str, observed: i64) {
    if !status.get("conditions").is_some_and(Value::is_array) {
        status["conditions"] = json!([]);
    }
    let conditions = status["conditions"].as_array_mut().expect("made an array above");
    let now = object::now_rfc3339();
    match conditions.iter_mut().find(|c| c["type"] == DISRUPTION_ALLOWED) {
        Some(c) => {
            if c["status"] != value {
                c["lastTransitionTime"] = json!(now);
            }
            c["status"] = json!(value);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
            c["observedGeneration"] = json!(observed);
        }
        None => conditions.push(json!({
            "type": DISRUPTION_ALLOWED, "status": value, "reason": reason, "message": message,
            "observedGeneration": observed, "lastTransitionTime": now,
        })),
    }
}

/// Pod names and their eviction times, as `status.disruptedPods` holds them.
pub fn disrupted_pods(pdb: &Value) -> BTreeMap<String, Value> {
    pdb.pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool, owner: Option<&str>) -> Value {
        let mut p = json!({"metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
        if let Some(uid) = owner {
            p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": uid, "controller": true}]);
        }
        p
    }

    fn pdb(spec: Value) -> Value {
        let mut spec = spec;
        spec["selector"] = json!({"matchLabels": {"app": "web"}});
        json!({"metadata": {"name": "web", "namespace": "ns", "generation": 2}, "spec": spec})
    }

    fn status(pdb: &Value, pods: &[Value], replicas: i64) -> Value {
        let refs: Vec<&Value> = pods.iter().collect();
        let scale = |_: &Value| Ok(Some(("sts-uid".to_string(), replicas)));
        desired_status(pdb, &refs, scale, jiff::Timestamp::now(), Duration::from_secs(120)).unwrap()
    }

    fn counts(s: &Value) -> [i64; 4] {
        ["expectedPods", "desiredHealthy", "currentHealthy", "disruptionsAllowed"].map(|k| s[k].as_i64().unwrap())
    }

    #[test]
    fn budgets_count_ready_pods_against_their_controllers_scale() {
        let pods = [
            pod("web-0", true, Some("sts-uid")),
            pod("web-1", true, Some("sts-uid")),
            pod("web-2", false, Some("sts-uid")),
        ];
        // maxUnavailable 1 of a StatefulSet of 3: two must stay healthy; two are.
        let s = status(&pdb(json!({"maxUnavailable": 1})), &pods, 3);
        assert_eq!(counts(&s), [3, 2, 2, 0]);
        assert_eq!(s["conditions"][0]["reason"], "InsufficientPods");
        assert_eq!(s["observedGeneration"], 2);
        // An integer minAvailable counts the pods, not the scale.
        assert_eq!(counts(&status(&pdb(json!({"minAvailable": 1})), &pods, 5)), [3, 1, 2, 1]);
        // Percentages of the scale, rounded up.
        assert_eq!(counts(&status(&pdb(json!({"minAvailable": "50%"})), &pods, 3)), [3, 2, 2, 0]);
        assert_eq!(counts(&status(&pdb(json!({"maxUnavailable": "50%"})), &pods, 4)), [4, 2, 2, 0]);
        let all_ready = [pod("web-0", true, Some("sts-uid")), pod("web-1", true, Some("sts-uid"))];
        let s = status(&pdb(json!({"maxUnavailable": "50%"})), &all_ready, 2);
        assert_eq!(counts(&s), [2, 1, 2, 1]);
        assert_eq!(
            (s["conditions"][0]["status"].as_str(), s["conditions"][0]["reason"].as_str()),
            (Some("True"), Some("SufficientPods"))
        );
    }

    #[test]
    fn deleting_and_just_evicted_pods_are_not_healthy() {
        let mut deleting = pod("web-0", true, Some("sts-uid"));
        deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        let pods = [deleting, pod("web-1", true, Some("sts-uid")), pod("web-2", true, Some("sts-uid"))];
        let mut budget = pdb(json!({"minAvailable": 1}));
        budget["status"] = json!({"disruptedPods": {"web-1": object::now_rfc3339(), "web-0": object::now_rfc3339(), "gone": object::now_rfc3339()}});
        let s = status(&budget, &pods, 3);
        assert_eq!(counts(&s), [3, 1, 1, 0]);
        // Only the eviction whose pod exists and is not yet deleting is remembered.
        assert_eq!(s["disruptedPods"].as_object().unwrap().keys().collect::<Vec<_>>(), ["web-1"]);
        // An eviction older than the timeout is forgotten: its pod counts again.
        budget["status"] = json!({"disruptedPods": {"web-1": "2000-01-01T00:00:00Z"}});
        let s = status(&budget, &pods, 3);
        assert_eq!(counts(&s), [3, 1, 2, 1]);
        assert!(s.get("disruptedPods").is_none());
    }

    #[test]
    fn a_missing_controller_or_selector_is_handled_as_kcm_does() {
        let pods = [pod("web-0", true, Some("sts-uid"))];
        let refs: Vec<&Value> = pods.iter().collect();
        let gone = |_: &Value| Ok(None);
        let err =
            desired_status(&pdb(json!({"maxUnavailable": 1})), &refs, gone, jiff::Timestamp::now(), DELETION_TIMEOUT);
        assert_eq!(err.unwrap_err(), "found no controllers for pod \"web-0\"");
        let failed = fail_safe(&json!({"status": {"disruptionsAllowed": 3, "currentHealthy": 3}}), "boom");
        assert_eq!((failed["disruptionsAllowed"].as_i64(), failed["currentHealthy"].as_i64()), (Some(0), Some(3)));
        assert_eq!(
            (failed["conditions"][0]["reason"].as_str(), failed["conditions"][0]["message"].as_str()),
            (Some("SyncFailed"), Some("boom"))
        );
        // No selector selects nothing; no pods expected means nothing allowed.
        let mut none = pdb(json!({"minAvailable": 0}));
        none["spec"].as_object_mut().unwrap().remove("selector");
        assert_eq!(counts(&status(&none, &pods, 1)), [0, 0, 0, 0]);
        // Unmanaged pods count for an integer minAvailable only.
        let bare = [pod("solo", true, None)];
        assert_eq!(counts(&status(&pdb(json!({"minAvailable": 0})), &bare, 1)), [1, 0, 1, 1]);
        assert_eq!(counts(&status(&pdb(json!({"maxUnavailable": 1})), &bare, 1)), [0, 0, 1, 0]);
    }

    fn set_ready(c: &Cluster, name: &str, ready: bool) {
        let pods = c.resources.by_plural("", "pods").unwrap();
        let p = c.get(&pods, "default", name).unwrap();
        let word = if ready { "True" } else { "False" };
        c.update_incarnation(&pods, &p, Subresource::Status, Component::Kubelet, |p| {
            p["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": word}]});
        })
        .unwrap();
    }

    #[test]
    fn a_recomputation_from_a_stale_read_does_not_undo_an_eviction() {
        use crate::cluster::ClusterConfig;
        let c = Cluster::new(ClusterConfig::named("t"));
        let pods_rt = c.resources.by_plural("", "pods").unwrap();
        for i in 0..3 {
            let p = json!({"metadata": {"name": format!("web-{i}"), "labels": {"app": "web"}},
                           "spec": {"containers": [{"name": "c", "image": "i"}]}});
            c.create(&pods_rt, Some("default"), p, &WriteOptions::default()).unwrap();
            set_ready(&c, &format!("web-{i}"), true);
        }
        let rt = c.resources.by_plural("policy", "poddisruptionbudgets").unwrap();
        let budget = json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
        c.create(&rt, Some("default"), budget, &WriteOptions::default()).unwrap();
        sweep(
            &c,
            &mut Recorder::new(
                Component::DisruptionController,
                Style::Legacy { component: "controllermanager", host: None },
            ),
            &Wake::default(),
        );
        assert_eq!(c.get(&rt, "default", "web").unwrap()["status"]["disruptionsAllowed"], 2);
        // web-2 goes unready; the controller reads the budget (still allowing 2)...
        set_ready(&c, "web-2", false);
        let stale = c.get(&rt, "default", "web").unwrap();
        let (pods, _) = c.storage.list(&(String::new(), "pods".into()), None);
        // ...an eviction of web-0 spends one (as `api::eviction` writes it) after that read...
        c.update_with(&rt, "default", "web", Subresource::Status, &WriteOptions::default(), |cur| {
            let mut next = cur.clone();
            next["status"]["disruptionsAllowed"] = json!(1);
            next["status"]["disruptedPods"] = json!({"web-0": object::now_rfc3339()});
            Ok(next)
        })
        .unwrap();
        // ...and the controller's write from its stale read must not erase it: web-0 is going,
        // web-2 is unready, so only web-1 is healthy and nothing more may be disrupted.
        sync(&c, &rt, &stale, &pods);
        sync(&c, &rt, &c.get(&rt, "default", "web").unwrap(), &pods);
        let now = c.get(&rt, "default", "web").unwrap();
        assert_eq!(
            (now["status"]["disruptionsAllowed"].as_i64(), now["status"]["currentHealthy"].as_i64()),
            (Some(0), Some(1))
        );
        assert!(now["status"]["disruptedPods"].get("web-0").is_some());
    }

    #[test]
    fn the_condition_keeps_its_transition_time_while_its_status_holds() {
        let mut s = json!({"disruptionsAllowed": 0, "observedGeneration": 1,
            "conditions": [{"type": DISRUPTION_ALLOWED, "status": "False", "reason": "InsufficientPods", "message": "", "lastTransitionTime": "2000-01-01T00:00:00Z", "observedGeneration": 1}]});
        set_disruption_allowed(&mut s);
        assert_eq!(s["conditions"][0]["lastTransitionTime"], "2000-01-01T00:00:00Z");
        s["disruptionsAllowed"] = json!(1);
        set_disruption_allowed(&mut s);
        assert_ne!(s["conditions"][0]["lastTransitionTime"], "2000-01-01T00:00:00Z");
        assert_eq!(s["conditions"].as_array().unwrap().len(), 1);
    }
}
