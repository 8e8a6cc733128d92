//! Events as the simulated components emit them, so that `kubectl describe` and `kubectl
//! events` tell the story a real cluster tells. Each component owns a [`Recorder`] with its own
//! memory, as each real component owns its broadcaster, and records in one of the two styles
//! client-go has:
//!
//! - [`Style::Legacy`] (`k8s.io/client-go/tools/record`: the StatefulSet controller, kubelet,
//!   node lifecycle and PV controllers): core/v1 fields `source`, `firstTimestamp`,
//!   `lastTimestamp` and `count`; a repeat of the same event bumps `count` at once; a spam
//!   filter keeps a burst of 25 events per source and object, refilled one per 5 minutes.
//! - [`Style::Series`] (`k8s.io/client-go/tools/events`: the scheduler): `eventTime`,
//!   `reportingController`/`Instance` and `action`; the first repeat turns the event into a
//!   series of count 2, later repeats are counted in memory and written by a heartbeat every
//!   30 minutes, and a series unseen for 6 minutes is finished (the next repeat starts a new
//!   Event).
//!
//! Durations are simulated time, scaled by the cluster's time factor like every other delay.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::{Cluster, controller_loop::Wake};
use crate::store::{
    actor::Component,
    object,
    registry::{Subresource, WriteOptions},
};

/// Burst of the legacy recorder's spam filter (client-go `defaultSpamBurst`).
const SPAM_BURST: f64 = 25.0;
/// Simulated time to earn one more event past the burst (client-go `defaultSpamQPS` = 1/300).
const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Entries the legacy correlator remembers (client-go `maxLruCacheEntries`).
const LEGACY_CACHE: usize = 4096;
/// How often a series' count is written (client-go `refreshTime`).
const SERIES_HEARTBEAT: Duration = Duration::from_secs(30 * 60);
/// A series unseen this long is finished (client-go `finishTime`).
const SERIES_FINISH: Duration = Duration::from_secs(6 * 60);

/// How a component records: the two recorders of client-go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Style {
    /// core/v1 recorder: `source.component` (and `source.host` for a kubelet).
    Legacy {
        /// `source.component`, e.g. `statefulset-controller`.
        component: &'static str,
        /// `source.host`: the node, for a kubelet.
        host: Option<String>,
    },
    /// events.k8s.io/v1 recorder: `reportingController` and `reportingInstance`.
    Series {
        /// `reportingController`, e.g. `default-scheduler`.
        controller: &'static str,
        /// `reportingInstance`, e.g. `default-scheduler-solo-control-plane`.
        instance: String,
    },
}

/// Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something happened as expected.
    Normal,
    /// Something went wrong or needs attention.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One event to record.
#[derive(Debug, Clone)]
pub struct Occurrence<'a> {
    /// The object it is about.
    pub about: &'a Value,
    /// Part of it (`spec.containers{nginx}`), if any.
    pub field_path: Option<String>,
    /// Normal or Warning.
    pub event_type: EventType,
    /// CamelCase reason, e.g. `SuccessfulCreate`.
    pub reason: &'a str,
    /// What the series recorder calls the action (`Scheduling`); ignored by the legacy one.
    pub action: &'a str,
    /// For people.
    pub message: String,
}

struct Correlated {
    name: String,
    namespace: String,
}

struct Series {
    name: String,
    namespace: String,
    count: u64,
    written: u64,
    last_observed: Instant,
    last_observed_at: String,
}

/// One component's event recorder and its memory of what it recorded.
pub struct Recorder {
    style: Style,
    /// Whose writes its Events are, in the resource account.
    by: Component,
    legacy: HashMap<String, Correlated>,
    spam: HashMap<String, (f64, Instant)>,
    series: HashMap<String, Series>,
    last_heartbeat: Instant,
}

fn micro_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// The reference to an object an Event carries (`involvedObject` / `regarding`).
fn reference(about: &Value, field_path: Option<&str>) -> Value {
    let mut r = json!({
        "kind": about["kind"],
        "name": object::name(about),
        "uid": object::uid(about),
        "apiVersion": about["apiVersion"],
        "resourceVersion": about.pointer("/metadata/resourceVersion").cloned().unwrap_or(json!("")),
    });
    if !object::namespace(about).is_empty() {
        r["namespace"] = json!(object::namespace(about));
    }
    if let Some(f) = field_path {
        r["fieldPath"] = json!(f);
    }
    r
}

/// Events about cluster-scoped objects (nodes, PVs) live in `default`, as client-go puts them.
fn event_namespace(about: &Value) -> String {
    match object::namespace(about) {
        "" => "default".into(),
        ns => ns.into(),
    }
}

/// The part of a reference that tells events apart: everything but the object's
/// resourceVersion, which changes under a repeating event (client-go `getEventKey`).
fn identity(reference: &Value) -> String {
    let mut r = reference.clone();
    if let Some(m) = r.as_object_mut() {
        m.remove("resourceVersion");
    }
    r.to_string()
}

fn event_name(about: &Value, at: jiff::Timestamp) -> String {
    format!("{}.{:x}", object::name(about), at.as_nanosecond())
}

impl Recorder {
    /// A recorder for one component (`by` names it in the resource account).
    pub fn new(by: Component, style: Style) -> Self {
        Self {
            style,
            by,
            legacy: HashMap::new(),
            spam: HashMap::new(),
            series: HashMap::new(),
            last_heartbeat: Instant::now(),
        }
    }

    /// Records one occurrence.
    pub fn record(&mut self, cluster: &Cluster, what: Occurrence<'_>) {
        match self.style.clone() {
            Style::Legacy { component, host } => self.record_legacy(cluster, component, host.as_deref(), what),
            Style::Series { controller, instance } => self.record_series(cluster, controller, &instance, what),
        }
    }

    /// Whether the spam filter lets one more event about this object through.
    fn allowed(&mut self, cluster: &Cluster, key: String) -> bool {
        let now = Instant::now();
        let refill = cluster.config.real(SPAM_REFILL).as_secs_f64().max(f64::EPSILON);
        if self.spam.len() >= LEGACY_CACHE && !self.spam.contains_key(&key) {
            // Forget buckets that have refilled (client-go keeps an LRU of the same size).
            self.spam.retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() / refill < SPAM_BURST);
        }
        let (tokens, at) = self.spam.entry(key).or_insert((SPAM_BURST, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() / refill).min(SPAM_BURST);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn record_legacy(&mut self, cluster: &Cluster, component: &str, host: Option<&str>, what: Occurrence<'_>) {
        let involved = reference(what.about, what.field_path.as_deref());
        let source_key = format!("{component}/{}/{}", host.unwrap_or(""), identity(&involved));
        if !self.allowed(cluster, source_key.clone()) {
            return;
        }
        let key = format!("{source_key}/{}/{}/{}", what.event_type.as_str(), what.reason, what.message);
        let Some(events) = cluster.resources.by_plural("", "events") else {
            return;
        };
        let now = object::now_rfc3339();
        if let Some(seen) = self.legacy.get(&key) {
            let bumped = cluster.update_with(
                &events,
                &seen.namespace,
                &seen.name,
                Subresource::Main,
                &WriteOptions::by(self.by),
                |cur| {
                    let mut next = cur.clone();
                    next["count"] = json!(cur["count"].as_i64().unwrap_or(1) + 1);
                    next["lastTimestamp"] = json!(now);
                    Ok(next)
                },
            );
            if bumped.is_ok() {
                return;
            }
        }
        let at = jiff::Timestamp::now();
        let namespace = event_namespace(what.about);
        let mut source = json!({"component": component});
        if let Some(h) = host {
            source["host"] = json!(h);
        }
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name(what.about, at), "namespace": namespace},
            "involvedObject": involved,
            "reason": what.reason,
            "message": what.message,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": what.event_type.as_str(),
            "eventTime": null,
            "reportingComponent": component,
            "reportingInstance": host.unwrap_or(""),
        });
        if let Ok(created) = cluster.create(&events, Some(&namespace), event, &WriteOptions::by(self.by)) {
            if self.legacy.len() >= LEGACY_CACHE {
                self.legacy.clear();
            }
            self.legacy.insert(key, Correlated { name: object::name(&created).to_string(), namespace });
        }
    }

    fn record_series(&mut self, cluster: &Cluster, controller: &str, instance: &str, what: Occurrence<'_>) {
        self.heartbeat(cluster);
        let regarding = reference(what.about, what.field_path.as_deref());
        let key = format!(
            "{}/{}/{}/{}/{}",
            identity(&regarding),
            what.event_type.as_str(),
            what.reason,
            what.action,
            what.message
        );
        let at = jiff::Timestamp::now();
        if let Some(s) = self.series.get_mut(&key) {
            s.count += 1;
            s.last_observed = Instant::now();
            s.last_observed_at = micro_time(at);
            // The first repeat makes the Event a series at once; later ones wait for the heartbeat.
            if s.count == 2 {
                let (ns, name, count, when) =
                    (s.namespace.clone(), s.name.clone(), s.count, s.last_observed_at.clone());
                s.written = count;
                write_series(cluster, self.by, &ns, &name, count, &when);
            }
            return;
        }
        let Some(events) = cluster.resources.by_plural("", "events") else {
            return;
        };
        let namespace = event_namespace(what.about);
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name(what.about, at), "namespace": namespace},
            "involvedObject": regarding,
            "reason": what.reason,
            "message": what.message,
            "source": {},
            "firstTimestamp": null,
            "lastTimestamp": null,
            "type": what.event_type.as_str(),
            "eventTime": micro_time(at),
            "action": what.action,
            "reportingComponent": controller,
            "reportingInstance": instance,
        });
        if let Ok(created) = cluster.create(&events, Some(&namespace), event, &WriteOptions::by(self.by)) {
            self.series.insert(
                key,
                Series {
                    name: object::name(&created).to_string(),
                    namespace,
                    count: 1,
                    written: 1,
                    last_observed: Instant::now(),
                    last_observed_at: micro_time(at),
                },
            );
        }
    }

    /// Asks `wake` for the next heartbeat, when a series has grown since it was last written
    /// (a component's loop sleeps otherwise, and the count would wait for the next change).
    pub fn next_due(&self, cluster: &Cluster, wake: &Wake) {
        if self.series.values().any(|s| s.count > s.written && s.count >= 2) {
            wake.at(self.last_heartbeat + cluster.config.real(SERIES_HEARTBEAT));
        }
    }

    /// Writes the counts of series that grew since the last heartbeat, and forgets series
    /// unseen for [`SERIES_FINISH`]; a no-op between heartbeats. Components call it on every
    /// sweep.
    pub fn heartbeat(&mut self, cluster: &Cluster) {
        let now = Instant::now();
        let finish = cluster.config.real(SERIES_FINISH);
        self.series.retain(|_, s| now.duration_since(s.last_observed) < finish);
        if now.duration_since(self.last_heartbeat) < cluster.config.real(SERIES_HEARTBEAT) {
            return;
        }
        self.last_heartbeat = now;
        for s in self.series.values_mut().filter(|s| s.count > s.written && s.count >= 2) {
            s.written = s.count;
            write_series(cluster, self.by, &s.namespace, &s.name, s.count, &s.last_observed_at);
        }
    }
}

fn write_series(cluster: &Cluster, by: Component, ns: &str, name: &str, count: u64, last_observed: &str) {
    let Some(events) = cluster.resources.by_plural("", "events") else {
        return;
    };
    let _ = cluster.update_with(&events, ns, name, Subresource::Main, &WriteOptions::by(by), |cur| {
        let mut next = cur.clone();
        next["series"] = json!({"count": count, "lastObservedTime": last_observed});
        Ok(next)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterConfig;

    fn stored_events(cluster: &Cluster) -> Vec<std::sync::Arc<Value>> {
        cluster.storage.list(&(String::new(), "events".into()), Some("default")).0
    }

    fn occurrence(about: &Value, message: String) -> Occurrence<'_> {
        Occurrence {
            about,
            field_path: None,
            event_type: EventType::Warning,
            reason: "FailedCreate",
            action: "",
            message,
        }
    }

    #[test]
    fn the_legacy_recorder_counts_repeats_and_drops_spam_past_its_burst() {
        let cluster = Cluster::new(ClusterConfig::named("x"));
        let set = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
                         "metadata": {"name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "1"}});
        let mut rec =
            Recorder::new(Component::Unattributed, Style::Legacy { component: "statefulset-controller", host: None });
        rec.record(&cluster, occurrence(&set, "same".into()));
        let mut moved = set.clone();
        moved["metadata"]["resourceVersion"] = json!("2");
        rec.record(&cluster, occurrence(&moved, "same".into()));
        let events = stored_events(&cluster);
        assert_eq!(events.len(), 1, "a repeat bumps the count, even after the object changed");
        assert_eq!(events[0]["count"], 2);
        // 25 per source and object, then silence (the burst is spent and refills slowly).
        for i in 0..40 {
            rec.record(&cluster, occurrence(&set, format!("message {i}")));
        }
        assert_eq!(stored_events(&cluster).len(), 1 + 23, "the burst of 25 counts the first two as well");
    }

    #[test]
    fn the_series_recorder_makes_a_series_on_the_first_repeat_only() {
        let cluster = Cluster::new(ClusterConfig::named("x"));
        let pod =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u"}});
        let mut rec = Recorder::new(
            Component::Unattributed,
            Style::Series { controller: "default-scheduler", instance: "s-1".into() },
        );
        for _ in 0..5 {
            rec.record(&cluster, occurrence(&pod, "no nodes".into()));
        }
        let events = stored_events(&cluster);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["series"]["count"], 2, "later repeats wait for the heartbeat");
        assert_eq!(events[0]["reportingComponent"], "default-scheduler");
        assert!(events[0]["eventTime"].is_string() && events[0]["firstTimestamp"].is_null());
    }
}
