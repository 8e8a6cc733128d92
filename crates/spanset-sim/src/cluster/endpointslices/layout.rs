//! Where each endpoint of a Service goes: which existing slice keeps it, which slices are
//! created, emptied or deleted. Pure (no store), so that the rules are tested by themselves.
//!
//! Like the real controller's reconciler it changes as few slices as it can: an endpoint stays
//! in the slice that has it (updated in place when its conditions change), new endpoints fill
//! slices with room before new slices are made, and a slice left empty is deleted — so a pod
//! that becomes Ready rewrites one slice, not all of them. Slices are grouped by their ports
//! (pods may resolve a named target port differently). A Service with no endpoints keeps one
//! empty placeholder slice, as the controller does.

use std::collections::BTreeMap;

use serde_json::Value;

use super::desired::MAX_ENDPOINTS;

/// One slice the controller already has for the Service.
#[derive(Debug, Clone, PartialEq)]
pub struct Existing {
    /// The slice's name.
    pub name: String,
    /// Its `ports`.
    pub ports: Value,
    /// Its `endpoints`.
    pub endpoints: Vec<Value>,
}

/// What the Service's slices should become.
#[derive(Debug, Default, PartialEq)]
pub struct Layout {
    /// Existing slices to keep, by name, with their ports and endpoints (possibly unchanged).
    pub keep: Vec<Existing>,
    /// New slices: ports and endpoints.
    pub create: Vec<(Value, Vec<Value>)>,
    /// Existing slices to delete, by name.
    pub delete: Vec<String>,
}

/// What identifies an endpoint across sweeps: the pod it stands for (else its address).
fn endpoint_key(ep: &Value) -> String {
    match ep.pointer("/targetRef/name").and_then(Value::as_str) {
        Some(name) => format!("pod/{name}"),
        None => format!("ip/{}", ep.pointer("/addresses/0").and_then(Value::as_str).unwrap_or("")),
    }
}

/// A comparable form of a slice's ports (their order does not matter).
fn ports_key(ports: &Value) -> String {
    let mut each: Vec<String> = ports.as_array().into_iter().flatten().map(Value::to_string).collect();
    each.sort();
    each.join(",")
}

/// Lays out the desired endpoints (each with its ports) over the existing slices.
pub fn layout(mut existing: Vec<Existing>, desired: Vec<(Value, Value)>) -> Layout {
    existing.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = Layout::default();
    if desired.is_empty() {
        // One placeholder, empty: the first existing slice made so, or a new one.
        let placeholder = Existing { name: String::new(), ports: Value::Array(vec![]), endpoints: vec![] };
        let mut slices = existing.into_iter();
        match slices.next() {
            Some(first) => out.keep.push(Existing { name: first.name, ..placeholder }),
            None => out.create.push((placeholder.ports, vec![])),
        }
        out.delete.extend(slices.map(|s| s.name));
        return out;
    }
    // Ports key → (ports, endpoint key → endpoint), each group in key order.
    let mut groups: BTreeMap<String, (Value, BTreeMap<String, Value>)> = BTreeMap::new();
    for (ports, ep) in desired {
        let group = groups.entry(ports_key(&ports)).or_insert_with(|| (ports, BTreeMap::new()));
        group.1.insert(endpoint_key(&ep), ep);
    }
    // Endpoints stay where they are.
    let mut kept: Vec<(String, Existing)> = Vec::new();
    for slice in existing {
        let key = ports_key(&slice.ports);
        let Some((ports, remaining)) = groups.get_mut(&key) else {
            out.delete.push(slice.name);
            continue;
        };
        let mut endpoints = Vec::new();
        for ep in &slice.endpoints {
            if endpoints.len() < MAX_ENDPOINTS
                && let Some(now) = remaining.remove(&endpoint_key(ep))
            {
                endpoints.push(now);
            }
        }
        kept.push((key, Existing { name: slice.name, ports: ports.clone(), endpoints }));
    }
    // New endpoints fill the slices with room, then new slices.
    for (key, slice) in kept.iter_mut() {
        let Some((_, remaining)) = groups.get_mut(key.as_str()) else { continue };
        while slice.endpoints.len() < MAX_ENDPOINTS
            && let Some((_, ep)) = remaining.pop_first()
        {
            slice.endpoints.push(ep);
        }
    }
    for (ports, remaining) in groups.into_values() {
        let rest: Vec<Value> = remaining.into_values().collect();
        for chunk in rest.chunks(MAX_ENDPOINTS) {
            out.create.push((ports.clone(), chunk.to_vec()));
        }
    }
    for (_, slice) in kept {
        if slice.endpoints.is_empty() {
            out.delete.push(slice.name);
        } else {
            out.keep.push(slice);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ep(pod: &str, ready: bool) -> Value {
        json!({"addresses": ["10.0.0.1"], "conditions": {"ready": ready}, "targetRef": {"kind": "Pod", "name": pod}})
    }

    fn http() -> Value {
        json!([{"name": "http", "protocol": "TCP", "port": 8080}])
    }

    fn names(eps: &[Value]) -> Vec<&str> {
        eps.iter().map(|e| e["targetRef"]["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn endpoints_stay_in_their_slice_and_new_ones_fill_room_before_new_slices() {
        let existing = vec![
            Existing { name: "web-b".into(), ports: http(), endpoints: vec![ep("web-2", false)] },
            Existing { name: "web-a".into(), ports: http(), endpoints: vec![ep("web-1", true), ep("web-0", true)] },
        ];
        let desired = ["web-0", "web-1", "web-2", "web-3"].map(|p| (http(), ep(p, true))).to_vec();
        let out = layout(existing, desired);
        assert!(out.create.is_empty() && out.delete.is_empty());
        assert_eq!(out.keep[0].name, "web-a");
        assert_eq!(names(&out.keep[0].endpoints), ["web-1", "web-0", "web-3"], "kept in place, web-3 fills room");
        assert_eq!(out.keep[1].endpoints, vec![ep("web-2", true)], "updated in place");
    }

    #[test]
    fn at_most_a_hundred_endpoints_per_slice() {
        let desired: Vec<(Value, Value)> = (0..250).map(|i| (http(), ep(&format!("p-{i:03}"), true))).collect();
        let out = layout(vec![], desired);
        let sizes: Vec<usize> = out.create.iter().map(|(_, eps)| eps.len()).collect();
        assert_eq!(sizes, [100, 100, 50]);
    }

    #[test]
    fn emptied_and_mismatched_slices_go_and_an_endpointless_service_keeps_one_placeholder() {
        let existing = vec![
            Existing { name: "a".into(), ports: http(), endpoints: vec![ep("gone", true)] },
            Existing { name: "b".into(), ports: json!([]), endpoints: vec![ep("web-0", true)] },
        ];
        let out = layout(existing.clone(), vec![(http(), ep("web-0", true))]);
        assert_eq!(out.delete, ["b"], "other ports: deleted");
        assert_eq!(out.keep.len(), 1);
        assert_eq!(names(&out.keep[0].endpoints), ["web-0"], "the old slice is reused for the new pod");

        let out = layout(existing, vec![]);
        assert_eq!(out.keep, vec![Existing { name: "a".into(), ports: json!([]), endpoints: vec![] }]);
        assert_eq!(out.delete, ["b"]);
        assert_eq!(layout(vec![], vec![]).create, vec![(json!([]), vec![])]);
    }
}
