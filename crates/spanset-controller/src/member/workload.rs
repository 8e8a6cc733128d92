//! A member StatefulSet of either backend, held as a [`DynamicObject`]: an apps/v1 StatefulSet
//! or an OpenKruise Advanced StatefulSet (`apps.kruise.io/v1beta1`), whose spec is a superset
//! (`reserveOrdinals`, `scaleStrategy`, in-place update policies). One representation for both
//! keeps a single watch, cache and write path; these functions read the few fields spanset
//! needs from either, tolerating anything the member stores besides them.

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;
use spanset_plan::{Backend, Ordinal, Ordinals, Slice};

/// The API group of OpenKruise's Advanced StatefulSet.
pub const KRUISE_GROUP: &str = "apps.kruise.io";
/// The version spanset writes.
pub const KRUISE_VERSION: &str = "v1beta1";

/// The member API resource a backend's StatefulSets live in.
pub fn api_resource(backend: Backend) -> ApiResource {
    let gvk = match backend {
        Backend::StatefulSet => GroupVersionKind::gvk("apps", "v1", "StatefulSet"),
        Backend::AdvancedStatefulSet => GroupVersionKind::gvk(KRUISE_GROUP, KRUISE_VERSION, "StatefulSet"),
    };
    ApiResource::from_gvk_with_plural(&gvk, "statefulsets")
}

fn i64_at(obj: &DynamicObject, pointer: &str) -> Option<i64> {
    obj.data.pointer(pointer).and_then(Value::as_i64)
}

/// `.spec.replicas` (1 when unset, as the apiserver defaults it).
pub fn replicas(obj: &DynamicObject) -> i64 {
    i64_at(obj, "/spec/replicas").unwrap_or(1)
}

/// `.spec.ordinals.start`, if the stored object has `.spec.ordinals`.
pub fn ordinals_start(obj: &DynamicObject) -> Option<i64> {
    obj.data.pointer("/spec/ordinals").map(|o| o.get("start").and_then(Value::as_i64).unwrap_or(0))
}

/// `.status.observedGeneration` (0 when unreported).
pub fn observed_generation(obj: &DynamicObject) -> i64 {
    i64_at(obj, "/status/observedGeneration").unwrap_or(0)
}

/// `.spec.reserveOrdinals` as a set: Kruise accepts integers and, since 1.7, `"a-b"` ranges;
/// anything else is ignored (it reserves nothing in Kruise either).
fn reserved(obj: &DynamicObject) -> Ordinals {
    let mut out = Ordinals::new();
    for v in obj.data.pointer("/spec/reserveOrdinals").and_then(Value::as_array).into_iter().flatten() {
        match v {
            Value::Number(n) => {
                if let Some(k) = n.as_u64().and_then(|k| Ordinal::try_from(k).ok()) {
                    out.insert(k);
                }
            }
            Value::String(s) => {
                let parsed = match s.split_once('-') {
                    Some((a, b)) => a.trim().parse::<Ordinal>().ok().zip(b.trim().parse::<Ordinal>().ok()),
                    None => s.trim().parse::<Ordinal>().ok().map(|k| (k, k)),
                };
                if let Some((a, b)) = parsed.filter(|(a, b)| a <= b) {
                    out.ranges_insert(a..=b);
                }
            }
            _ => {}
        }
    }
    out
}

/// The slice a stored member StatefulSet selects, as the member runs it: a server that dropped
/// `.spec.ordinals` runs from ordinal 0; only an Advanced StatefulSet (`backend`, the API it was
/// read from) skips `reserveOrdinals`.
pub fn stored_slice(obj: &DynamicObject, backend: Backend) -> Slice {
    let start = ordinals_start(obj).unwrap_or(0).clamp(0, i64::from(Ordinal::MAX));
    let replicas = replicas(obj).clamp(0, i64::from(Ordinal::MAX));
    let slice = Slice { start: start as Ordinal, replicas: replicas as Ordinal, reserved: Ordinals::new() };
    match backend {
        Backend::StatefulSet => slice,
        // Written back in its smallest form (see `Slice::from_ordinals`), so that a set stored
        // with superfluous reservations compares equal to the planner's slice of the same set.
        Backend::AdvancedStatefulSet => Slice::from_ordinals(&Slice { reserved: reserved(obj), ..slice }.ordinals()),
    }
}

/// Whether the stored object kept the `.spec.ordinals` that was written (false: the member's
/// API server silently drops the field and must get no slice).
pub fn keeps_ordinals(written: &DynamicObject, stored: &DynamicObject) -> bool {
    match ordinals_start(written) {
        None => true,
        Some(w) => ordinals_start(stored) == Some(w),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn an_advanced_statefulset_skips_its_reserved_ordinals_and_an_apps_v1_one_has_none() {
        let kruise = obj(serde_json::json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "metadata": {"name": "r"},
            "spec": {"replicas": 3, "ordinals": {"start": 2}, "reserveOrdinals": [0, 3, "5-6", "x", -1, "9-7", 20]},
            "status": {"observedGeneration": 4}
        }));
        assert_eq!(reserved(&kruise), Ordinals::from([0, 3, 5, 6, 20]), "malformed entries reserve nothing");
        let s = stored_slice(&kruise, Backend::AdvancedStatefulSet);
        assert_eq!(s.ordinals(), Ordinals::from([2, 4, 7]));
        assert_eq!(s.reserved, Ordinals::from([3, 5, 6]), "only the gaps inside the set are kept");
        assert_eq!(observed_generation(&kruise), 4);
        let plain = obj(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "r"},
            "spec": {"replicas": 2, "reserveOrdinals": [0]}
        }));
        assert_eq!(
            stored_slice(&plain, Backend::StatefulSet),
            Slice { start: 0, replicas: 2, ..Slice::empty() },
            "apps/v1 has no reserve"
        );
        assert_eq!(ordinals_start(&plain), None);
        assert_eq!(observed_generation(&plain), 0);
    }

    #[test]
    fn a_dropped_ordinals_field_is_caught_even_at_start_zero() {
        let written = obj(serde_json::json!({"apiVersion": "apps/v1", "spec": {"ordinals": {"start": 0}}}));
        let kept = obj(serde_json::json!({"apiVersion": "apps/v1", "spec": {"ordinals": {}}}));
        let dropped = obj(serde_json::json!({"apiVersion": "apps/v1", "spec": {}}));
        assert!(keeps_ordinals(&written, &kept), "an empty ordinals object means start 0");
        assert!(!keeps_ordinals(&written, &dropped));
        assert!(keeps_ordinals(&dropped, &dropped), "nothing written, nothing to keep");
    }
}
