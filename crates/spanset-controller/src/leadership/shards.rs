//! Federations sharded over several `spanset run` replicas (`--shards N`): each federation
//! belongs to one shard, `fnv1a("namespace/name") % N`, and each shard has its own Lease, term
//! and [`Leadership`]. A process acts for a federation only while it leads the federation's
//! shard; what is not a federation's (MemberCluster finalizers and status, reports of members
//! and federations that cannot be used) is done by whoever leads shard 0.
//!
//! With one shard this is the single leader of before: one Lease, named by `--lease-name`.

use std::sync::Arc;

use crate::{leadership::leader::Leadership, member::objects::FederationKey};

/// Most shards `--shards` accepts.
pub const MAX_SHARDS: u32 = 256;

pub use crate::leadership::shard_hash::shard_of;

/// The Lease of shard `shard` of `count`: `base` itself when there is one shard (the Lease of
/// an unsharded controller), else `base-shard-S-of-N`, so that a change of `--shards` uses new
/// Leases rather than reinterpreting old ones.
pub fn lease_name(base: &str, shard: u32, count: u32) -> String {
    if count <= 1 { base.to_string() } else { format!("{base}-shard-{shard}-of-{count}") }
}

/// One [`Leadership`] per shard, sharing one floor of terms; cheap to clone.
#[derive(Clone, Debug)]
pub struct Shards {
    leaderships: Arc<[Leadership]>,
}

impl From<Leadership> for Shards {
    fn from(leadership: Leadership) -> Self {
        Self { leaderships: Arc::from(vec![leadership]) }
    }
}

impl Shards {
    /// `count` shards (at least one), none led yet; every shard's term is taken above every
    /// stamp this process saw, whichever shard it was seen on.
    pub fn new(count: u32) -> Self {
        let first = Leadership::new();
        let mut all = vec![first.clone()];
        all.extend((1..count.max(1)).map(|_| first.sharing_floor()));
        Self { leaderships: Arc::from(all) }
    }

    /// How many shards there are.
    pub fn count(&self) -> u32 {
        self.leaderships.len() as u32
    }

    /// The leadership of federation `key`'s shard.
    pub fn of(&self, key: &FederationKey) -> &Leadership {
        self.of_object(&key.namespace, &key.name)
    }

    /// The leadership of the shard of the federation named `namespace/name`.
    pub fn of_object(&self, namespace: &str, name: &str) -> &Leadership {
        &self.leaderships[shard_of(namespace, name, self.count()) as usize]
    }

    /// The leadership of shard `index`.
    pub fn get(&self, index: u32) -> Option<&Leadership> {
        self.leaderships.get(index as usize)
    }

    /// Every shard's leadership, by index.
    pub fn iter(&self) -> std::slice::Iter<'_, Leadership> {
        self.leaderships.iter()
    }

    /// The leadership that does what belongs to no federation: shard 0's.
    pub fn cluster_duties(&self) -> &Leadership {
        &self.leaderships[0]
    }

    /// How many shards this process leads now.
    pub fn held(&self) -> usize {
        self.leaderships.iter().filter(|l| l.term().is_some()).count()
    }

    /// Tells every shard's elector whether the members' stamps are known.
    pub fn set_stamps_known(&self, known: bool) {
        for l in self.leaderships.iter() {
            l.set_stamps_known(known);
        }
    }

    /// A term seen stamped somewhere: every shard's next term is above it.
    pub fn observe_stamp(&self, term: u64) {
        self.leaderships[0].observe_stamp(term);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shard_is_the_unsharded_leader() {
        assert_eq!(shard_of("db", "redis", 1), 0);
        assert_eq!(lease_name("spanset-leader", 0, 1), "spanset-leader");
        assert_eq!(lease_name("spanset-leader", 2, 4), "spanset-leader-shard-2-of-4");
    }

    #[test]
    fn shards_spread_federations_and_stay_put() {
        let mut counts = [0u32; 4];
        for i in 0..1000 {
            let s = shard_of("db", &format!("f{i}"), 4);
            assert_eq!(s, shard_of("db", &format!("f{i}"), 4), "the same federation, the same shard");
            counts[s as usize] += 1;
        }
        // Each of four shards gets a fair part of a thousand names (an even split is 250).
        assert!(counts.iter().all(|c| (180..=320).contains(c)), "{counts:?}");
        // The namespace counts: `a/bc` and `ab/c` are different federations.
        let differ = (0..50).any(|i| shard_of("a", &format!("b{i}"), 8) != shard_of(&format!("a{i}"), "b", 8));
        assert!(differ);
    }

    #[test]
    fn every_shard_takes_its_term_above_any_stamp_seen() {
        let shards = Shards::new(3);
        shards.get(2).unwrap().observe_stamp(41);
        assert!(shards.iter().all(|l| l.floor() == 41));
        assert_eq!(shards.held(), 0);
    }
}
