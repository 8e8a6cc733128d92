//! Pods made before the identity gate entered their template keep running.
//!
//! The gate matters only when a pod is created: it keeps the pod unscheduled until spanset
//! released it. A member StatefulSet written by a spanset without the gate (or with the gate
//! disabled) runs pods that were never gated; adding the gate to its template makes a new
//! revision, and the member's StatefulSet controller would replace every pod to reach it — an
//! upgrade of spanset would restart every pod of every federation once, for nothing.
//!
//! So the first write that adds the gate to such a StatefulSet holds those pods: it records their
//! revision (`spanset.dev/ungated-revision`), counts pods of that revision as up to date, and
//! writes the member's partition at the slice's size, so that the member's controller replaces
//! none of them; any pod created from then on (a new ordinal, a pod deleted) is made from the
//! gated template. The write recreates the StatefulSet with its pods orphaned (they are adopted
//! at once): a replaced one would keep the old revision as its `currentRevision`, from which a
//! pod deleted below the partition is made again — without the gate.
//!
//! The hold lasts while the template is the one it began with: the next change of the template
//! drops it and rolls every pod, as any template change does. It begins only where the stored
//! template is the federation's template without the gate, so a template that also changed
//! (say an image edited while spanset was being upgraded) rolls as it should.

use std::sync::Arc;

use kube::api::DynamicObject;
use serde_json::Value;
use spanset_api::{FederatedStatefulSet, labels::IDENTITY_GATE};

use super::{cache::StsRecord, objects::gated};

/// The annotation naming the revision of the pods a member StatefulSet holds (see the module).
pub const UNGATED_REVISION: &str = "spanset.dev/ungated-revision";

/// The stored pod template of a member StatefulSet, kept only when it lacks the identity gate
/// (the one case the hold needs it; every other record keeps none).
pub fn ungated_template(sts: &DynamicObject) -> Option<Arc<Value>> {
    let template = sts.data.pointer("/spec/template")?;
    let gates = template.pointer("/spec/schedulingGates").and_then(Value::as_array);
    let has_gate = gates.is_some_and(|g| g.iter().any(|g| g["name"] == IDENTITY_GATE));
    (!has_gate).then(|| Arc::new(template.clone()))
}

/// Whether `stored` holds everything of `wanted`: every field `wanted` sets has the same value
/// there (lists item by item, of the same length); fields only `stored` has are the API
/// server's defaults.
fn holds(stored: &Value, wanted: &Value) -> bool {
    match (stored, wanted) {
        (Value::Object(s), Value::Object(w)) => w.iter().all(|(k, v)| match s.get(k) {
            Some(sv) => holds(sv, v),
            None => {
                v.is_null() || v.as_object().is_some_and(|o| o.is_empty()) || v.as_array().is_some_and(|a| a.is_empty())
            }
        }),
        (Value::Array(s), Value::Array(w)) => s.len() == w.len() && s.iter().zip(w).all(|(s, w)| holds(s, w)),
        (s, w) => s == w,
    }
}

/// The pod template `new` without the identity gate (and without an emptied gate list).
fn without_gate(new: &Value) -> Value {
    let mut t = new.clone();
    if let Some(spec) = t.get_mut("spec").and_then(Value::as_object_mut) {
        if let Some(gates) = spec.get_mut("schedulingGates").and_then(Value::as_array_mut) {
            gates.retain(|g| g["name"] != IDENTITY_GATE);
        }
        if spec.get("schedulingGates").and_then(Value::as_array).is_some_and(|g| g.is_empty()) {
            spec.remove("schedulingGates");
        }
    }
    t
}

/// The revision of pods that a write over `stored` holds, if any: the stored hold while the
/// template is the one it began with (`hash`, the template hash written), else a new one where
/// the stored template is the new pod template (`new_template`, asked only then) without the
/// gate and its pods' revision is known.
pub fn held_revision(
    fsts: &FederatedStatefulSet,
    stored: &StsRecord,
    hash: &str,
    new_template: impl FnOnce() -> Value,
) -> Option<String> {
    if !gated(fsts) {
        return None;
    }
    if let Some(held) = &stored.ungated_revision {
        return (stored.template_hash.as_deref() == Some(hash)).then(|| held.clone());
    }
    let old = stored.ungated_template.as_ref()?;
    let revision = stored.update_revision.clone()?;
    let wanted = without_gate(&new_template());
    holds(old, &wanted).then_some(revision)
}

/// The member partition while pods are held: the slice's size, so that the member's controller
/// replaces none (`partition`: the one the rollout would write; `None` with `OnDelete`).
pub fn held_partition(partition: Option<i32>, replicas: u32) -> Option<i32> {
    partition.map(|_| i32::try_from(replicas).unwrap_or(i32::MAX))
}

/// Writes the hold of `revision` into `object`: the annotation, and the partition of
/// [`held_partition`] where the object has one.
pub fn hold(object: &mut DynamicObject, revision: &str) {
    object.metadata.annotations.get_or_insert_with(Default::default).insert(UNGATED_REVISION.into(), revision.into());
    let replicas = object.data.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(0);
    if let Some(rolling) = object.data.pointer_mut("/spec/updateStrategy/rollingUpdate").and_then(Value::as_object_mut)
        && let Some(p) = held_partition(rolling.get("partition").map(|_| 0), replicas as u32)
    {
        rolling.insert("partition".into(), p.into());
    }
}

/// Whether a write of a hold must recreate the StatefulSet: it begins the hold (see the module).
pub fn begins(stored: &StsRecord, revision: Option<&String>) -> bool {
    revision.is_some() && stored.ungated_revision.is_none()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::member::objects::{statefulset, template_hash};
    use spanset_plan::{Backend, Slice};

    fn record(object: &DynamicObject, revision: Option<&str>) -> StsRecord {
        let (_, mut r) = StsRecord::of(object, Backend::StatefulSet).expect("a member StatefulSet");
        r.update_revision = revision.map(str::to_string);
        r
    }

    /// What a spanset without the gate wrote: the same object without it, defaults added.
    fn older(f: &FederatedStatefulSet) -> DynamicObject {
        let mut o = statefulset(f, &Slice { start: 0, replicas: 2, ..Slice::empty() }, 1);
        o.data["spec"]["template"]["spec"].as_object_mut().unwrap().remove("schedulingGates");
        o.data["spec"]["template"]["spec"]["dnsPolicy"] = json!("ClusterFirst");
        o.data["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
        o.metadata.annotations.as_mut().unwrap().insert(spanset_api::labels::TEMPLATE_HASH.into(), "old".into());
        o
    }

    #[test]
    fn pods_of_a_template_without_the_gate_are_held_once_and_while_the_template_stays() {
        let f = spanset_api::example(&["east".to_string()]);
        let new = statefulset(&f, &Slice { start: 0, replicas: 2, ..Slice::empty() }, 2);
        let hash = template_hash(&f);
        let stored = record(&older(&f), Some("redis-abc"));
        let template = || new.data["spec"]["template"].clone();
        let held = held_revision(&f, &stored, &hash, template);
        assert_eq!(held.as_deref(), Some("redis-abc"), "the stored template is the new one without the gate");
        assert!(begins(&stored, held.as_ref()), "the hold begins with a recreate");
        let mut written = new.clone();
        hold(&mut written, "redis-abc");
        assert_eq!(written.data["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 2, "no pod replaced");
        let stored_hold = record(&written, Some("redis-new"));
        assert_eq!(stored_hold.ungated_revision.as_deref(), Some("redis-abc"));
        assert_eq!(held_revision(&f, &stored_hold, &hash, template).as_deref(), Some("redis-abc"), "carried on");
        assert!(!begins(&stored_hold, Some(&"redis-abc".to_string())), "and not recreated again");
        assert_eq!(held_revision(&f, &stored_hold, "another-template", template), None, "a template change ends it");
    }

    #[test]
    fn a_template_that_also_changed_or_an_unknown_revision_is_not_held() {
        let f = spanset_api::example(&["east".to_string()]);
        let new = statefulset(&f, &Slice { start: 0, replicas: 2, ..Slice::empty() }, 2);
        let hash = template_hash(&f);
        let template = || new.data["spec"]["template"].clone();
        let mut edited = older(&f);
        edited.data["spec"]["template"]["spec"]["containers"][0]["image"] = json!("redis:6");
        assert_eq!(
            held_revision(&f, &record(&edited, Some("redis-abc")), &hash, template),
            None,
            "the image changed too"
        );
        assert_eq!(
            held_revision(&f, &record(&older(&f), None), &hash, template),
            None,
            "its pods' revision is not known"
        );
        let gated_stored = record(&new, Some("redis-abc"));
        assert_eq!(held_revision(&f, &gated_stored, &hash, template), None, "a gated template holds nothing");
        let mut off = f.clone();
        off.spec.identity_gate = Some(spanset_api::IdentityGate::Disabled);
        assert_eq!(
            held_revision(&off, &record(&older(&f), Some("r")), &hash, template),
            None,
            "nor a federation without it"
        );
    }
}
