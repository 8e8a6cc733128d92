//! Where each ordinal was last seen Ready (`status.homes`): the member whose claims hold its
//! newest data. The model checker found why it is needed: a member fenced while it ran an
//! ordinal, the ordinal re-homed on fresh claims but not yet run there, the member unfenced —
//! then the fresh, never-used claim was taken for the ordinal's data (released there, or handed
//! back), and the ordinal started on an empty volume beside its own. Claims alone cannot tell a
//! never-used claim from one with newer data; this record can.
//!
//! - An ordinal's home is where it was last seen Ready, ungated, in exactly one member that
//!   answers and is not fenced: a pod let run that never got Ready (an image that cannot be
//!   pulled) leaves the home where it was, so that rolling its move back finds its data there.
//! - With `storage: Move`, before an ordinal is let run in another member than its home, its
//!   home's claims are handed over ([`move_storage::due`]) — unless its home is fenced
//!   (failover: the ordinal starts on fresh claims) or gone. With `Detached` nothing is fetched:
//!   the ordinal starts fresh and the claims it left are retired once it is Ready
//!   ([`move_storage::left_behind`]).

use std::collections::BTreeMap;

use spanset_api::{FederatedStatefulSetStatus, HomeStatus, StorageMode};
use spanset_plan::{Observed, Ordinal};

use super::{
    Inputs,
    move_storage::{self, Handover},
};

/// Each ordinal's home member, by ordinal.
pub type Homes = BTreeMap<Ordinal, String>;

/// The homes stored in `status` (a range that does not parse is skipped: its ordinals are
/// unknown, as before the record existed).
pub fn read(status: Option<&FederatedStatefulSetStatus>) -> Homes {
    let mut homes = Homes::new();
    for h in status.map(|s| s.homes.as_slice()).unwrap_or_default() {
        for k in parse_ranges(&h.ordinals).unwrap_or_default() {
            homes.insert(k, h.cluster.clone());
        }
    }
    homes
}

/// The home of `k` stored in the federation's status (as [`read`] would answer it, without
/// building the whole map: a reconcile asks this once per moving ordinal).
pub fn of(inp: &Inputs<'_>, k: Ordinal) -> Option<String> {
    stored_home(inp.fsts.status.as_ref(), k)
}

fn stored_home(status: Option<&FederatedStatefulSetStatus>, k: Ordinal) -> Option<String> {
    let homes = status.map(|s| s.homes.as_slice()).unwrap_or_default();
    // The last entry naming `k` wins, as in `read`.
    homes
        .iter()
        .rev()
        .find(|h| spans_of(&h.ordinals).is_some_and(|spans| spans.iter().any(|(a, b)| (*a..=*b).contains(&k))))
        .map(|h| h.cluster.clone())
}

/// `homes` as stored: one entry per member, in name order.
pub fn write(homes: &Homes) -> Vec<HomeStatus> {
    let mut by_member: BTreeMap<&str, Vec<Ordinal>> = BTreeMap::new();
    for (k, m) in homes {
        by_member.entry(m).or_default().push(*k);
    }
    by_member
        .into_iter()
        .map(|(cluster, ks)| HomeStatus { cluster: cluster.to_string(), ordinals: format_ranges(&ks) })
        .collect()
}

/// What stands between ordinal `k` and its run in member `to`.
#[derive(Debug, Clone, PartialEq)]
pub enum Claims {
    /// Its claims in `to` are its own: it may run there.
    Ready,
    /// Its home's claims need dealing with first, and can be now.
    Fetch(Handover),
    /// Its home's claims need dealing with first, but not now (why, for a condition).
    Wait(String),
}

/// Whether `k` may be let run in `to`, by its recorded home (see the module doc).
pub fn claims_for(inp: &Inputs<'_>, obs: &Observed, homes: &Homes, k: Ordinal, to: &str) -> Claims {
    if !inp.rules.handover_gate {
        return Claims::Ready;
    }
    let Some(home) = homes.get(&k).filter(|h| h.as_str() != to) else { return Claims::Ready };
    // A fenced home's volumes stay behind by the rules of failover; a member gone took them.
    if inp.members.get(home).is_none_or(|m| m.fenced) {
        return Claims::Ready;
    }
    // Detached: the ordinal starts on fresh claims; the ones it left wait for its run.
    if inp.fsts.spec.migration.storage.unwrap_or(StorageMode::Detached) == StorageMode::Detached {
        return Claims::Ready;
    }
    let Some((kind, claims)) = move_storage::due(inp, k, home, to, None) else { return Claims::Ready };
    let handover = Handover { ordinal: k, from: home.clone(), to: to.to_string(), claims, kind };
    if let Some(why) = inp.handover_refusals.get(&k) {
        return Claims::Wait(format!("ordinal {k}: {why}"));
    }
    let Some(o) = obs.get(home).filter(|o| o.reachable) else {
        return Claims::Wait(format!("ordinal {k}: {home} is unreachable ({} wait there)", handover.claim_names()));
    };
    if !o.observed_since_write || o.written.contains(k) || o.pods.contains(k) {
        return Claims::Wait(format!("ordinal {k}: {home} still holds it ({} wait there)", handover.claim_names()));
    }
    Claims::Fetch(handover)
}

/// `homes` with each ordinal seen Ready (ungated, not being deleted) in exactly one member that
/// answers and is not fenced recorded there. Two members showing it Ready is a conflict the
/// `IdentityConflict` condition names; neither is taken for its home then.
pub fn seen(inp: &Inputs<'_>, obs: &Observed, mut homes: Homes) -> Homes {
    let mut ready: BTreeMap<Ordinal, Vec<&String>> = BTreeMap::new();
    for (name, _) in obs.iter().filter(|(_, o)| o.reachable && !o.fenced) {
        let Some(view) = inp.members.get(name).and_then(|m| m.view.as_ref()).filter(|v| v.synced) else {
            continue;
        };
        for (k, pod) in &view.federation.pods {
            if pod.ready && !pod.gated() && !pod.deleting {
                ready.entry(*k).or_default().push(name);
            }
        }
    }
    for (k, members) in ready {
        if let [only] = members.as_slice() {
            homes.insert(k, (*only).clone());
        }
    }
    homes
}

fn format_ranges(ks: &[Ordinal]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ks.len() {
        let mut j = i;
        while j + 1 < ks.len() && ks[j + 1] == ks[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { ks[i].to_string() } else { format!("{}-{}", ks[i], ks[j]) });
        i = j + 1;
    }
    parts.join(",")
}

fn parse_ranges(text: &str) -> Option<Vec<Ordinal>> {
    Some(spans_of(text)?.into_iter().flat_map(|(a, b)| a..=b).collect())
}

/// The inclusive spans of `0-3,7`; `None` if any part does not parse, or a span is too long
/// to be expanded into its ordinals.
fn spans_of(text: &str) -> Option<Vec<(Ordinal, Ordinal)>> {
    let spans: Vec<_> = spanset_plan::parse_ordinal_runs(text)?.ranges().map(|r| (*r.start(), *r.end())).collect();
    spans.iter().all(|(a, b)| b - a <= 1_000_000).then_some(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn homes_are_stored_as_ranges_per_member_and_read_back() {
        let homes: Homes =
            [(0, "a"), (1, "a"), (2, "a"), (3, "b"), (4, "a"), (7, "b")].map(|(k, m)| (k, m.to_string())).into();
        let stored = write(&homes);
        assert_eq!(
            stored,
            vec![
                HomeStatus { cluster: "a".into(), ordinals: "0-2,4".into() },
                HomeStatus { cluster: "b".into(), ordinals: "3,7".into() },
            ]
        );
        let status = FederatedStatefulSetStatus { homes: stored, ..Default::default() };
        assert_eq!(read(Some(&status)), homes);
    }

    #[test]
    fn a_range_that_does_not_parse_leaves_its_ordinals_unknown() {
        let status = FederatedStatefulSetStatus {
            homes: vec![
                HomeStatus { cluster: "a".into(), ordinals: "0-x".into() },
                HomeStatus { cluster: "b".into(), ordinals: "5-3".into() },
                HomeStatus { cluster: "c".into(), ordinals: " 2 , 4-5 ".into() },
            ],
            ..Default::default()
        };
        let homes = read(Some(&status));
        assert_eq!(homes.keys().copied().collect::<Vec<_>>(), vec![2, 4, 5]);
        assert!(homes.values().all(|m| m == "c"));
    }

    #[test]
    fn one_ordinal_s_home_is_what_the_whole_record_says() {
        let status = FederatedStatefulSetStatus {
            homes: vec![
                HomeStatus { cluster: "a".into(), ordinals: "0-3,9".into() },
                HomeStatus { cluster: "b".into(), ordinals: "3-5,x".into() },
                HomeStatus { cluster: "c".into(), ordinals: "5-6".into() },
                HomeStatus { cluster: "d".into(), ordinals: "1".into() },
            ],
            ..Default::default()
        };
        let homes = read(Some(&status));
        for k in 0..12 {
            assert_eq!(stored_home(Some(&status), k), homes.get(&k).cloned(), "ordinal {k}");
        }
        assert_eq!(stored_home(None, 0), None);
    }
}
