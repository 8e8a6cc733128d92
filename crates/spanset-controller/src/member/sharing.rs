//! Member objects that several federations of one namespace may share: the headless Service
//! (two federations may govern their pods with one Service name) and the carried Secrets and
//! ConfigMaps (two federations may carry the same Secret). Each such object names the
//! federations that keep it in its [`CARRIED_BY`] annotation; a federation's ensure adds its
//! name, and its teardown removes it, deleting the object only when no other federation keeps
//! it — neither by that annotation nor, as the host says, by its spec.
//!
//! The annotation is a set: writing it again changes nothing, so an ensure or a teardown
//! repeated after a crash writes nothing more. An object written before the annotation existed
//! is kept by the federation its [`FEDERATION`] label names; the host's own word (which other
//! federations keep the object, see [`Sharers`]) covers the federations that found it there
//! and, before the annotation existed, wrote nothing to it.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::ObjectMeta;
use spanset_api::labels::{CARRIED_BY, FEDERATION, FEDERATION_UID};

/// The other federations that keep each shared object in one member, as the host says:
/// `(kind, name)` to their names. Computed from the host's federations of the namespace (those
/// placing the member, or holding a slice there): a Service kept by its `serviceName`, a carried
/// object by `spec.migration.carry`.
pub type Sharers = BTreeMap<(String, String), BTreeSet<String>>;

/// The [`Sharers`] of federation `leaving` (by name) in `member`: every other federation of
/// `federations` (the host's, of the same namespace, read as stored: one that cannot be decoded
/// keeps what its stored fields name all the same) that places the member or holds a slice
/// there keeps its headless Service and its carried objects there.
pub fn sharers(federations: &[kube::api::DynamicObject], leaving: &str, member: &str) -> Sharers {
    let names = |v: &serde_json::Value, field: &str| -> Vec<String> {
        v.as_array().into_iter().flatten().filter_map(|c| c[field].as_str().map(String::from)).collect()
    };
    let mut out = Sharers::new();
    for f in federations {
        let name = f.metadata.name.clone().unwrap_or_default();
        let spec = &f.data["spec"];
        let placed = names(&spec["placement"]["clusters"], "name").iter().any(|c| c == member)
            || names(&f.data["status"]["slices"], "cluster").iter().any(|c| c == member);
        if name == leaving || !placed {
            continue;
        }
        let mut keep = |kind: &str, object: &str| {
            out.entry((kind.to_string(), object.to_string())).or_default().insert(name.clone());
        };
        if let Some(service) = spec["template"]["serviceName"].as_str() {
            keep("Service", service);
        }
        for c in spec["migration"]["carry"].as_array().into_iter().flatten() {
            if let (Some(kind), Some(object)) = (c["kind"].as_str(), c["name"].as_str()) {
                keep(kind, object);
            }
        }
    }
    out
}

/// The federations that keep an object: its [`CARRIED_BY`] annotation, or (an object written
/// before it existed) its [`FEDERATION`] label.
pub fn keepers(meta: &ObjectMeta) -> BTreeSet<String> {
    if let Some(names) = meta.annotations.as_ref().and_then(|a| a.get(CARRIED_BY)) {
        return names.split(',').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect();
    }
    meta.labels.as_ref().and_then(|l| l.get(FEDERATION)).into_iter().cloned().collect()
}

/// Whether `me` is recorded among the object's keepers in its annotation (an object without the
/// annotation gets it at the next ensure, once).
pub fn kept_by(stored: &ObjectMeta, me: &str) -> bool {
    stored.annotations.as_ref().is_some_and(|a| a.contains_key(CARRIED_BY)) && keepers(stored).contains(me)
}

fn annotation(names: &BTreeSet<String>) -> String {
    names.iter().cloned().collect::<Vec<_>>().join(",")
}

/// What federation `me` writes over a stored shared object (`next`, its own version): the
/// stored keepers with `me` added, and the stored ownership labels while they name another
/// keeper (so that two federations keeping one object never relabel it in turn).
pub fn joined(next: &mut ObjectMeta, stored: &ObjectMeta, me: &str) {
    let mut names = keepers(stored);
    names.insert(me.to_string());
    next.annotations.get_or_insert_with(Default::default).insert(CARRIED_BY.into(), annotation(&names));
    let stored_labels = stored.labels.clone().unwrap_or_default();
    if let Some(owner) = stored_labels.get(FEDERATION).filter(|o| *o != me && names.contains(*o)) {
        let labels = next.labels.get_or_insert_with(Default::default);
        labels.insert(FEDERATION.into(), owner.clone());
        match stored_labels.get(FEDERATION_UID) {
            Some(uid) => labels.insert(FEDERATION_UID.into(), uid.clone()),
            None => labels.remove(FEDERATION_UID),
        };
    }
}

/// What a federation's teardown does to a shared object it finds.
#[derive(Debug, Clone, PartialEq)]
pub enum Release {
    /// Nothing: not spanset's, not kept by the leaving federation, or being deleted already.
    Untouched,
    /// Deleted, conditional on the version read (a keeper added meanwhile keeps it).
    Delete,
    /// Kept for the others: the object's metadata with the leaving federation's name removed
    /// (and its labels naming another keeper where they named the leaving one), written
    /// conditional on the version read.
    Keep(Box<ObjectMeta>),
}

/// What federation `leaving`'s teardown does to `stored`, which `others` keep besides (the
/// host's word, [`Sharers`]).
pub fn release(stored: &ObjectMeta, leaving: &str, others: &BTreeSet<String>) -> Release {
    let labelled = stored.labels.as_ref().is_some_and(|l| l.contains_key(FEDERATION));
    let mut names = keepers(stored);
    if !labelled || stored.deletion_timestamp.is_some() || !names.remove(leaving) {
        return Release::Untouched;
    }
    names.extend(others.iter().filter(|n| *n != leaving).cloned());
    let Some(first) = names.first().cloned() else { return Release::Delete };
    let mut meta = stored.clone();
    meta.annotations.get_or_insert_with(Default::default).insert(CARRIED_BY.into(), annotation(&names));
    let labels = meta.labels.get_or_insert_with(Default::default);
    if labels.get(FEDERATION).map(String::as_str) == Some(leaving) {
        labels.insert(FEDERATION.into(), first);
        // The leaving federation's uid names no keeper any more.
        labels.remove(FEDERATION_UID);
    }
    Release::Keep(Box::new(meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(label: Option<&str>, annotation: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some("creds".into()),
            labels: label.map(|l| {
                [(FEDERATION.to_string(), l.to_string()), (FEDERATION_UID.to_string(), format!("uid-{l}"))].into()
            }),
            annotations: annotation.map(|a| [(CARRIED_BY.to_string(), a.to_string())].into()),
            ..Default::default()
        }
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn an_object_written_before_the_annotation_is_kept_by_its_label() {
        assert_eq!(keepers(&meta(Some("redis"), None)), set(&["redis"]));
        assert_eq!(keepers(&meta(Some("redis"), Some("kv, redis"))), set(&["kv", "redis"]));
        assert!(!kept_by(&meta(Some("redis"), None), "redis"), "the annotation is written once");
        assert!(kept_by(&meta(Some("redis"), Some("redis")), "redis"));
    }

    #[test]
    fn joining_adds_a_name_once_and_never_relabels_another_keeper_s_object() {
        let stored = meta(Some("redis"), None);
        let mut next = meta(Some("kv"), None);
        joined(&mut next, &stored, "kv");
        assert_eq!(keepers(&next), set(&["kv", "redis"]));
        let labels = next.labels.clone().unwrap();
        assert_eq!((labels[FEDERATION].as_str(), labels[FEDERATION_UID].as_str()), ("redis", "uid-redis"));
        // Idempotent: joining again what was written gives the same object.
        let mut again = meta(Some("kv"), None);
        joined(&mut again, &next, "kv");
        assert_eq!(again, next);
    }

    #[test]
    fn the_last_keeper_deletes_and_any_other_keeps() {
        assert_eq!(release(&meta(Some("redis"), Some("redis")), "redis", &set(&[])), Release::Delete);
        assert_eq!(release(&meta(Some("redis"), None), "redis", &set(&["redis"])), Release::Delete);
        // Another keeper by the annotation, or by the host's word (written before the
        // annotation existed): kept, relabelled to a keeper, the leaver's name gone.
        for (stored, others) in
            [(meta(Some("redis"), Some("kv,redis")), set(&[])), (meta(Some("redis"), None), set(&["kv"]))]
        {
            let Release::Keep(m) = release(&stored, "redis", &others) else { panic!("kept for kv") };
            assert_eq!(keepers(&m), set(&["kv"]));
            assert_eq!(m.labels.as_ref().unwrap()[FEDERATION], "kv");
            assert!(!m.labels.as_ref().unwrap().contains_key(FEDERATION_UID));
            // Idempotent: the next teardown finds nothing of redis's.
            assert_eq!(release(&m, "redis", &others), Release::Untouched);
        }
    }

    #[test]
    fn the_host_says_who_else_keeps_what_in_a_member() {
        let fsts = |name: &str, members: &[&str], carry: &str| {
            let mut f =
                serde_json::to_value(spanset_api::example(&members.iter().map(|m| m.to_string()).collect::<Vec<_>>()))
                    .expect("JSON");
            f["metadata"]["name"] = serde_json::json!(name);
            f["spec"]["migration"] = serde_json::json!({"carry": [{"kind": "Secret", "name": carry}]});
            // Stored objects need not decode: a replicas no type can hold changes nothing here.
            f["spec"]["replicas"] = serde_json::json!("eight");
            serde_json::from_value::<kube::api::DynamicObject>(f).expect("an object")
        };
        let all = [fsts("redis", &["east", "west"], "creds"), fsts("kv", &["east"], "creds")];
        let east = sharers(&all, "redis", "east");
        assert_eq!(east.get(&("Secret".into(), "creds".into())), Some(&set(&["kv"])));
        assert_eq!(east.get(&("Service".into(), "redis".into())), Some(&set(&["kv"])), "the example's serviceName");
        assert!(sharers(&all, "redis", "west").is_empty(), "kv does not place west");
    }

    #[test]
    fn what_the_leaving_federation_does_not_keep_is_untouched() {
        assert_eq!(
            release(&meta(Some("kv"), None), "redis", &set(&[])),
            Release::Untouched,
            "kv's Service of that name"
        );
        assert_eq!(release(&meta(None, None), "redis", &set(&[])), Release::Untouched, "the user's own");
        let mut deleting = meta(Some("redis"), None);
        deleting.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2026-01-01T00:00:00Z".parse().expect("a time")));
        assert_eq!(release(&deleting, "redis", &set(&[])), Release::Untouched);
    }
}
