//! Every cluster a plan concerns, looked up once per plan: the placement's clusters in
//! placement order, then the observed clusters the placement no longer lists, each with its
//! observation, its target set and the set its spec holds. The rules then walk this list by
//! index, so a plan makes one name look-up per cluster rather than one per rule.

use std::borrow::Cow;

use super::types::{ClusterObservation, Desired, Observed, Ordinals, Slice};

/// One cluster as the rules see it.
pub struct Member<'a> {
    /// Cluster name.
    pub name: &'a str,
    /// Whether the observation has this cluster (a placement cluster never seen has none).
    pub observed: bool,
    /// Its observation, or that of a cluster never seen (unreachable, nothing written).
    pub obs: Cow<'a, ClusterObservation>,
    /// Its target set, when it is in the target.
    pub target: Option<Ordinals>,
    /// The ordinals its spec holds.
    pub written: Ordinals,
}

/// The clusters of `d` in placement order, then the unplaced ones of `obs` in name order;
/// `target` is the divided target as `(placement index, slice)`.
pub fn members<'a>(d: &'a Desired, obs: &'a Observed, target: &[(usize, Slice)]) -> Vec<Member<'a>> {
    let mut targets: Vec<Option<Ordinals>> = vec![None; d.clusters.len()];
    for (i, s) in target {
        targets[*i] = Some(s.ordinals());
    }
    let member = |name: &'a str, target: Option<Ordinals>| {
        let (observed, o) = match obs.get(name) {
            Some(o) => (true, Cow::Borrowed(o)),
            None => (false, Cow::Owned(ClusterObservation::default())),
        };
        Member { name, observed, written: o.written.ordinals(), obs: o, target }
    };
    let placed = d.clusters.iter().zip(targets).map(|(c, t)| member(c.name.as_str(), t));
    let unplaced: Vec<Member<'a>> = unplaced(d, obs).map(|n| member(n, None)).collect();
    placed.chain(unplaced).collect()
}

/// The observed clusters that the placement does not list (removed from the spec), in name
/// order: a merge of the sorted placement names with the observation's sorted keys.
fn unplaced<'a>(d: &'a Desired, obs: &'a Observed) -> impl Iterator<Item = &'a str> + 'a {
    let mut placed: Vec<&str> = d.clusters.iter().map(|c| c.name.as_str()).collect();
    placed.sort_unstable();
    let mut placed = placed.into_iter().peekable();
    obs.keys().map(String::as_str).filter(move |n| {
        while placed.next_if(|p| p < n).is_some() {}
        placed.peek() != Some(n)
    })
}
