//! Which federations lost a supporting object in the member: the headless Services and
//! carried Secrets and ConfigMaps the watcher ensured there, each read again (metadata only, a
//! `get`) at most every [`CHECK_PERIOD`] and at most one per probe period, so that what it costs
//! stays bounded however many there are. One found missing counts a loss for each federation
//! that keeps it; the coordinator of a federation whose count moved ensures its supporting
//! objects in this member again, without waiting for a new term or a spec change.
//!
//! A watch would tell at once, but would need `list` and `watch` on every Secret of the member,
//! which spanset's member identity is deliberately not granted (it reads a Secret by name only).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    time::{Duration, Instant},
};

use crate::member::objects::FederationKey;

/// How often each supporting object is read again at most.
pub const CHECK_PERIOD: Duration = Duration::from_secs(10);

/// A supporting object: `(kind, namespace, name)`.
pub type Id = (String, String, String);

/// The supporting objects ensured in one member, when each was last seen, and the losses
/// counted per federation.
#[derive(Debug, Default)]
pub struct SupportingIndex {
    /// Each object, with the federations (of its namespace) keeping it and when it was last
    /// written or seen.
    entries: BTreeMap<Id, (BTreeSet<String>, Instant)>,
    /// Objects lost so far, per federation.
    lost: HashMap<FederationKey, u64>,
    /// A read is in flight.
    pub checking: bool,
}

impl SupportingIndex {
    /// How many of `key`'s supporting objects were found missing in the member so far.
    pub fn lost(&self, key: &FederationKey) -> u64 {
        self.lost.get(key).copied().unwrap_or(0)
    }

    /// Federation `key` ensured `(kind, name)` in its namespace at `now`.
    pub fn ensured(&mut self, key: &FederationKey, kind: &str, name: &str, now: Instant) {
        let entry = self
            .entries
            .entry((kind.to_string(), key.namespace.clone(), name.to_string()))
            .or_insert_with(|| (BTreeSet::new(), now));
        entry.0.insert(key.name.clone());
        entry.1 = now;
    }

    /// Federation `key` left the member: what only it kept is no longer read.
    pub fn released(&mut self, key: &FederationKey) {
        for ((_, ns, _), (keepers, _)) in self.entries.iter_mut() {
            if *ns == key.namespace {
                keepers.remove(&key.name);
            }
        }
        self.entries.retain(|_, (keepers, _)| !keepers.is_empty());
    }

    /// The object to read next at `now`: the one seen longest ago, once [`CHECK_PERIOD`] passed.
    pub fn due(&self, now: Instant) -> Option<Id> {
        self.entries
            .iter()
            .filter(|(_, (_, seen))| now.saturating_duration_since(*seen) >= CHECK_PERIOD)
            .min_by_key(|(_, (_, seen))| *seen)
            .map(|(id, _)| id.clone())
    }

    /// The read of `id` at `now` found it (`found`) or not; answers the federations that lost
    /// it (it is then forgotten until ensured again).
    pub fn checked(&mut self, id: &Id, found: bool, now: Instant) -> Vec<FederationKey> {
        if found {
            if let Some(entry) = self.entries.get_mut(id) {
                entry.1 = now;
            }
            return Vec::new();
        }
        let Some((keepers, _)) = self.entries.remove(id) else { return Vec::new() };
        let keys: Vec<FederationKey> =
            keepers.into_iter().map(|name| FederationKey { namespace: id.1.clone(), name }).collect();
        for k in &keys {
            *self.lost.entry(k.clone()).or_default() += 1;
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> FederationKey {
        FederationKey { namespace: "db".into(), name: name.into() }
    }

    fn id(name: &str) -> Id {
        ("Secret".into(), "db".into(), name.into())
    }

    #[test]
    fn a_missing_shared_object_is_a_loss_for_every_keeper_once() {
        let t0 = Instant::now();
        let mut ix = SupportingIndex::default();
        ix.ensured(&key("redis"), "Secret", "creds", t0);
        ix.ensured(&key("kv"), "Secret", "creds", t0);
        assert_eq!(ix.due(t0), None, "just written");
        let later = t0 + CHECK_PERIOD;
        assert_eq!(ix.due(later), Some(id("creds")));
        assert!(ix.checked(&id("creds"), true, later).is_empty());
        assert_eq!(ix.due(later), None, "seen now: read again a period later");
        let lost = ix.checked(&id("creds"), false, later + CHECK_PERIOD);
        assert_eq!(lost, [key("kv"), key("redis")]);
        assert_eq!((ix.lost(&key("kv")), ix.lost(&key("redis")), ix.lost(&key("other"))), (1, 1, 0));
        assert_eq!(ix.due(later + CHECK_PERIOD * 2), None, "forgotten until ensured again");
        assert!(ix.checked(&id("creds"), false, later).is_empty(), "counted once");
    }

    #[test]
    fn the_one_seen_longest_ago_is_read_first_and_a_departed_keeper_s_are_not_read() {
        let t0 = Instant::now();
        let mut ix = SupportingIndex::default();
        ix.ensured(&key("redis"), "Secret", "a", t0);
        ix.ensured(&key("kv"), "Secret", "b", t0 + Duration::from_secs(1));
        assert_eq!(ix.due(t0 + CHECK_PERIOD * 2), Some(id("a")));
        ix.released(&key("redis"));
        assert_eq!(ix.due(t0 + CHECK_PERIOD * 2), Some(id("b")));
        ix.released(&key("kv"));
        assert_eq!(ix.due(t0 + CHECK_PERIOD * 2), None);
    }
}
