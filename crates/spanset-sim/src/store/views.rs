//! Conversion between a stored object and a [`View`] of it: `events.k8s.io/v1` Events are
//! core/v1 Events under other field names, as the apiserver's own conversion maps them
//! (`k8s.io/kubernetes/pkg/apis/events/v1`). One storage serves both, so an Event written
//! through either group is read through the other.

use serde_json::{Map, Value};

use super::resources::{ResourceType, View};

/// core/v1 field ↔ events.k8s.io/v1 field; every other field keeps its name.
const EVENTS_V1: &[(&str, &str)] = &[
    ("message", "note"),
    ("involvedObject", "regarding"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn rename(obj: &Value, pairs: impl Iterator<Item = (&'static str, &'static str)>, api_version: &str) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let pairs: Vec<(&str, &str)> = pairs.collect();
    let mut out = Map::with_capacity(map.len());
    for (k, v) in map {
        let name = pairs.iter().find(|(from, _)| from == k).map_or(k.as_str(), |(_, to)| to);
        out.insert(name.to_string(), v.clone());
    }
    out.insert("apiVersion".into(), Value::String(api_version.into()));
    Value::Object(out)
}

/// A stored object as the addressed resource shows it (unchanged unless `rt` is a view).
pub fn to_view(rt: &ResourceType, stored: &Value) -> Value {
    match rt.view {
        Some(View::EventsV1) => rename(stored, EVENTS_V1.iter().copied(), "events.k8s.io/v1"),
        None => stored.clone(),
    }
}

/// An object sent to the addressed resource, in the form it is stored in.
pub fn from_view(rt: &ResourceType, sent: &Value) -> Value {
    match rt.view {
        Some(View::EventsV1) => {
            // Only a body that named the view's apiVersion (or none) is converted; anything
            // else is left for the type check to refuse.
            match sent.get("apiVersion").and_then(Value::as_str) {
                None | Some("events.k8s.io/v1") => rename(sent, EVENTS_V1.iter().map(|(c, v)| (*v, *c)), "v1"),
                Some(_) => sent.clone(),
            }
        }
        None => sent.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::resources::builtins;

    fn events_v1() -> ResourceType {
        builtins().into_iter().find(|r| r.group == "events.k8s.io").expect("events.k8s.io served")
    }

    #[test]
    fn events_convert_both_ways_without_loss() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web-0.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web-0"}, "reason": "Scheduled", "message": "Successfully assigned",
            "source": {"component": "kubelet"}, "count": 3, "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:01:00Z", "reportingComponent": "kubelet", "type": "Normal"});
        let rt = events_v1();
        let v1 = to_view(&rt, &core);
        assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
        assert_eq!(v1["note"], "Successfully assigned");
        assert_eq!(v1["regarding"]["name"], "web-0");
        assert_eq!(v1["deprecatedCount"], 3);
        assert_eq!(v1["reportingController"], "kubelet");
        assert!(v1.get("message").is_none() && v1.get("involvedObject").is_none());
        assert_eq!(from_view(&rt, &v1), core);
    }

    #[test]
    fn a_body_of_another_api_version_is_left_for_the_type_check() {
        let body = json!({"apiVersion": "v1", "kind": "Event", "message": "m"});
        assert_eq!(from_view(&events_v1(), &body), body);
    }
}
