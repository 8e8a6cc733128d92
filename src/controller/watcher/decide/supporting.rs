//! Which federations lost a supporting object in the member: spanset's Services, Secrets and
//! ConfigMaps there (labelled), as a metadata watch shows them, filed by namespace, kind and
//! name with the federations that keep each ([`sharing::keepers`]). An object deleted (by a
//! watch event, or missing from a relist after the watch was cut) counts one loss for each of
//! its keepers; the coordinator of a federation whose count moved ensures its supporting
//! objects in this member again, without waiting for a new term or a spec change.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kube::{api::ObjectMeta, runtime::watcher};

use crate::controller::member::{objects::FederationKey, sharing};

/// The watched supporting objects of one member, and the losses counted per federation.
#[derive(Debug, Default)]
pub struct SupportingIndex {
    /// `(kind, namespace, name)` to the federations keeping the object.
    known: BTreeMap<(&'static str, String, String), BTreeSet<String>>,
    /// A relist in progress, per kind: applied whole at its end.
    relist: HashMap<&'static str, Vec<ObjectMeta>>,
    /// Objects lost so far, per federation.
    lost: HashMap<FederationKey, u64>,
    /// Kinds listed at least once.
    listed: BTreeSet<&'static str>,
}

impl SupportingIndex {
    /// How many of `key`'s supporting objects were lost in the member so far.
    pub fn lost(&self, key: &FederationKey) -> u64 {
        self.lost.get(key).copied().unwrap_or(0)
    }

    /// Applies one watch event of `kind`; answers the federations that lost an object.
    pub fn on_event(&mut self, kind: &'static str, event: watcher::Event<ObjectMeta>) -> Vec<FederationKey> {
        match event {
            watcher::Event::Apply(m) => {
                self.known.insert(id(kind, &m), sharing::keepers(&m));
                Vec::new()
            }
            watcher::Event::Delete(m) => {
                let keepers = self.known.remove(&id(kind, &m)).unwrap_or_else(|| sharing::keepers(&m));
                self.count(&m.namespace.unwrap_or_default(), keepers)
            }
            watcher::Event::Init => {
                self.relist.insert(kind, Vec::new());
                Vec::new()
            }
            watcher::Event::InitApply(m) => {
                self.relist.entry(kind).or_default().push(m);
                Vec::new()
            }
            watcher::Event::InitDone => {
                let listed = self.relist.remove(kind).unwrap_or_default();
                let now: BTreeMap<_, _> = listed.iter().map(|m| (id(kind, m), sharing::keepers(m))).collect();
                let gone: Vec<_> = self
                    .known
                    .iter()
                    .filter(|(k, _)| k.0 == kind && !now.contains_key(*k))
                    .map(|(k, v)| (k.1.clone(), v.clone()))
                    .collect();
                self.known.retain(|k, _| k.0 != kind);
                self.known.extend(now);
                // The first list finds what exists: nothing was lost before it.
                let first = self.listed.insert(kind);
                if first {
                    return Vec::new();
                }
                gone.into_iter().flat_map(|(ns, keepers)| self.count(&ns, keepers)).collect()
            }
        }
    }

    fn count(&mut self, namespace: &str, keepers: BTreeSet<String>) -> Vec<FederationKey> {
        let keys: Vec<FederationKey> =
            keepers.into_iter().map(|name| FederationKey { namespace: namespace.to_string(), name }).collect();
        for k in &keys {
            *self.lost.entry(k.clone()).or_default() += 1;
        }
        keys
    }
}

fn id(kind: &'static str, m: &ObjectMeta) -> (&'static str, String, String) {
    (kind, m.namespace.clone().unwrap_or_default(), m.name.clone().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::labels::{CARRIED_BY, FEDERATION};

    fn secret(name: &str, keepers: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("db".into()),
            labels: Some([(FEDERATION.to_string(), "redis".to_string())].into()),
            annotations: Some([(CARRIED_BY.to_string(), keepers.to_string())].into()),
            ..Default::default()
        }
    }

    fn key(name: &str) -> FederationKey {
        FederationKey { namespace: "db".into(), name: name.into() }
    }

    #[test]
    fn a_deleted_shared_object_is_a_loss_for_every_keeper() {
        let mut ix = SupportingIndex::default();
        for e in
            [watcher::Event::Init, watcher::Event::InitApply(secret("creds", "kv,redis")), watcher::Event::InitDone]
        {
            assert!(ix.on_event("Secret", e).is_empty(), "the first list loses nothing");
        }
        assert_eq!(
            ix.on_event("Secret", watcher::Event::Delete(secret("creds", "kv,redis"))),
            [key("kv"), key("redis")]
        );
        assert_eq!((ix.lost(&key("kv")), ix.lost(&key("redis")), ix.lost(&key("other"))), (1, 1, 0));
    }

    #[test]
    fn an_object_missing_from_a_relist_was_lost_while_the_watch_was_cut() {
        let mut ix = SupportingIndex::default();
        for e in [watcher::Event::Init, watcher::Event::InitApply(secret("creds", "redis")), watcher::Event::InitDone] {
            ix.on_event("Secret", e);
        }
        ix.on_event("ConfigMap", watcher::Event::Init);
        ix.on_event("ConfigMap", watcher::Event::InitDone);
        ix.on_event("Secret", watcher::Event::Init);
        assert_eq!(ix.on_event("Secret", watcher::Event::InitDone), [key("redis")]);
        assert_eq!(ix.lost(&key("redis")), 1);
        // Another kind's relist does not count the Secret again.
        ix.on_event("ConfigMap", watcher::Event::Init);
        assert!(ix.on_event("ConfigMap", watcher::Event::InitDone).is_empty());
    }
}
