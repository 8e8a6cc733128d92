//! One disruption budget across clusters (`spec.disruption`): each member gets a
//! PodDisruptionBudget holding its share of what the federation's budget has left, so that node
//! drains in several members together never take more of the federation down than the budget
//! allows.
//!
//! - What is left: the budget minus every ordinal of the federation's range not available now
//!   (not Ready where it is written, moving, about to be replaced by the rollout, or held by a
//!   member that does not answer or is fenced — what such a member runs is not known).
//! - Shares: first to members where a drain waits (a cordoned node hosts a federation pod), one
//!   per such pod, in placement order; then round-robin over the other members. A share never
//!   exceeds the member's Ready pods, and the shares never add up to more than what is left.
//! - A member's budget says `minAvailable` = its Ready pods − its share: absolute, so that a
//!   pod failing there spends that member's share at once, before spanset divides again.
//! - Written only when it changed, and a budget that loosens (its minimum drops) is written only
//!   once no other member's budget still waits to be tightened: a share moves from one member to
//!   another by taking it away first, so two members never both hold it, even for the length of
//!   a write.
//!
//! Pure: [`divide`] and [`plan`] are the arithmetic; [`budgets`] reads it off a reconcile's
//! observation. The coordinator carries the resulting [`BudgetWrite`]s out through the watchers.

use std::collections::BTreeMap;

/// The change a [`BudgetWrite`] makes, carried to the watcher in
/// [`crate::actors::messages::WriteBudget`].
pub use crate::actors::messages::BudgetChange;
use crate::{
    actors::messages::MemberView,
    member::budget::{self, BudgetRecord},
};
use spanset_api::FederatedStatefulSet;
use spanset_plan::{Observed, Ordinals};

/// What spanset's budget in a member is, as its watcher last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// Not known (the member's budget or node watch has not listed yet).
    Unknown,
    /// There is none.
    Absent,
    /// There is one: its `minAvailable` if a number, and whether it is otherwise as spanset
    /// would write it (selector; no `maxUnavailable`).
    Present {
        /// `spec.minAvailable`, when a number.
        min_available: Option<u32>,
        /// Everything else as spanset writes it.
        current: bool,
    },
}

/// One member holding part of the federation, as the division needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member.
    pub cluster: String,
    /// Its pods of the federation that are Ready and not being deleted (what its budget counts
    /// healthy).
    pub ready: u32,
    /// Its pods of the federation on cordoned nodes, not being deleted: a drain waits on each.
    pub waiting: u32,
    /// spanset's budget there.
    pub stored: Stored,
}

/// Divides `left` disruptions among `members` (in placement order): first one per pod a drain
/// waits on, then round-robin over the members where none waits (then over all of them, when
/// those are full); never more than a member's Ready pods, never more than `left` in all.
pub fn divide(left: u32, members: &[Member]) -> Vec<u32> {
    let mut shares = vec![0u32; members.len()];
    let mut rest = left;
    for (share, m) in shares.iter_mut().zip(members) {
        let give = m.waiting.min(m.ready).min(rest);
        *share += give;
        rest -= give;
    }
    // Round-robin over the members where no drain waits, then (if those are full) over all.
    let others: Vec<usize> = (0..members.len()).filter(|i| members[*i].waiting == 0).collect();
    let all: Vec<usize> = (0..members.len()).collect();
    for round in [others, all] {
        while rest > 0 {
            let mut gave = false;
            for &i in &round {
                if rest > 0 && shares[i] < members[i].ready {
                    shares[i] += 1;
                    rest -= 1;
                    gave = true;
                }
            }
            if !gave {
                break;
            }
        }
    }
    shares
}

/// One member's budget as decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    /// The member.
    pub cluster: String,
    /// Its share of what is left.
    pub allowance: u32,
    /// Its budget's `minAvailable`: Ready pods − allowance.
    pub min_available: u32,
}

/// The division of a budget and the budgets to write now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Division {
    /// What the budget has left: `budget − unavailable`, at least 0.
    pub left: u32,
    /// Every member's share, in placement order.
    pub shares: Vec<Share>,
    /// Members whose budget is written now (tightened, created, or corrected).
    pub write: Vec<Share>,
    /// Members whose budget loosens, held until no budget waits to be tightened.
    pub held: Vec<String>,
}

/// Divides a budget allowing `budget` pods down, with `unavailable` ordinals down already, among
/// `members`, and says which budgets to write now: every one that tightens (or is missing, or
/// not as spanset writes it) at once; one that loosens only when no member's budget waits to be
/// tightened (nor is unknown), so that a share is taken away before it is given elsewhere.
pub fn plan(budget: u32, unavailable: u32, members: &[Member]) -> Division {
    let left = budget.saturating_sub(unavailable);
    let shares: Vec<Share> = divide(left, members)
        .into_iter()
        .zip(members)
        .map(|(allowance, m)| Share { cluster: m.cluster.clone(), allowance, min_available: m.ready - allowance })
        .collect();
    let mut tighten = Vec::new();
    let mut loosen = Vec::new();
    let mut unknown = false;
    for (share, m) in shares.iter().zip(members) {
        match &m.stored {
            Stored::Unknown => unknown = true,
            Stored::Present { min_available: Some(min), current: true } if *min == share.min_available => {}
            Stored::Present { min_available: Some(min), current: true } if share.min_available < *min => {
                loosen.push(share.clone());
            }
            _ => tighten.push(share.clone()),
        }
    }
    let (write, held) = if tighten.is_empty() && !unknown {
        (loosen, Vec::new())
    } else {
        (tighten, loosen.into_iter().map(|s| s.cluster).collect())
    };
    Division { left, shares, write, held }
}

/// A budget write decided by a reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetWrite {
    /// The member.
    pub cluster: String,
    /// What to do there.
    pub change: BudgetChange,
}

/// The budget writes of one reconcile. `available` are ordinals of `range` available now
/// (Ready for `minReadySeconds` where they are written, in a member that answers and is not
/// fenced, and not about to be replaced by the rollout); `order` the placement's member order.
/// Budgets are written in members that answer, are not fenced and hold a slice or pods of the
/// federation; deleted in any other member that answers and is not fenced, and everywhere when
/// `spec.disruption` is unset. Answers the division too (for the status and tests).
pub fn budgets(
    fsts: &FederatedStatefulSet,
    views: &BTreeMap<String, std::sync::Arc<MemberView>>,
    obs: &Observed,
    range: std::ops::Range<u32>,
    available: &Ordinals,
    order: &[String],
    term: u64,
) -> (Vec<BudgetWrite>, Option<Division>) {
    let mut out = Vec::new();
    let mut members = Vec::new();
    let mut records: BTreeMap<&str, &BudgetRecord> = BTreeMap::new();
    let position = |c: &str| order.iter().position(|o| o == c).unwrap_or(usize::MAX);
    let mut names: Vec<&String> = obs.keys().collect();
    names.sort_by_key(|n| (position(n), n.as_str()));
    for name in names {
        let o = &obs[name.as_str()];
        let Some(view) = views.get(name.as_str()).filter(|v| v.synced) else { continue };
        if !o.reachable || o.fenced {
            continue;
        }
        let f = &view.federation;
        let holds = o.written.replicas > 0 || !f.pods.is_empty();
        if fsts.spec.disruption.is_none() || !holds {
            if let Some(b) = f.budget.as_ref().filter(|b| !b.deleting) {
                out.push(BudgetWrite { cluster: name.clone(), change: BudgetChange::Delete { uid: b.uid.clone() } });
            }
            continue;
        }
        let live = f.pods.values().filter(|p| !p.deleting);
        let waiting = live.filter(|p| p.node.as_ref().is_some_and(|n| view.cordoned.contains(n))).count();
        let stored = match (&f.budget, view.budgets_known) {
            (_, false) => Stored::Unknown,
            (None, true) => Stored::Absent,
            (Some(b), true) => Stored::Present {
                min_available: b.min_available.and_then(|m| u32::try_from(m).ok()),
                current: budget::is_current(&BudgetRecord { min_available: Some(0), ..b.clone() }, fsts, 0),
            },
        };
        if let Some(b) = &f.budget {
            records.insert(name.as_str(), b);
        }
        members.push(Member {
            cluster: name.clone(),
            ready: f.pods.values().filter(|p| p.ready).count() as u32,
            waiting: waiting as u32,
            stored,
        });
    }
    let Some(d) = &fsts.spec.disruption else { return (out, None) };
    let replicas = range.end.saturating_sub(range.start);
    let unavailable = replicas.saturating_sub(available.len() as u32);
    let division = plan(d.allowed_unavailable(replicas), unavailable, &members);
    for s in &division.write {
        let object = budget::disruption_budget(fsts, s.min_available, term);
        let change = match records.get(s.cluster.as_str()) {
            Some(b) if !b.deleting => BudgetChange::Replace(object),
            _ => BudgetChange::Create(object),
        };
        out.push(BudgetWrite { cluster: s.cluster.clone(), change });
    }
    (out, Some(division))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(cluster: &str, ready: u32, waiting: u32, min: Option<u32>) -> Member {
        Member {
            cluster: cluster.into(),
            ready,
            waiting,
            stored: match min {
                Some(min) => Stored::Present { min_available: Some(min), current: true },
                None => Stored::Absent,
            },
        }
    }

    #[test]
    fn what_is_left_goes_first_where_a_drain_waits_one_per_pod() {
        let idle = [m("east", 2, 0, None), m("west", 2, 0, None), m("central", 2, 0, None)];
        assert_eq!(divide(1, &idle), [1, 0, 0], "round-robin from the first member");
        assert_eq!(divide(2, &idle), [1, 1, 0]);
        assert_eq!(divide(4, &idle), [2, 1, 1]);
        let draining = [m("east", 2, 0, None), m("west", 2, 1, None), m("central", 2, 0, None)];
        assert_eq!(divide(1, &draining), [0, 1, 0], "the drain in west gets the one disruption");
        assert_eq!(divide(3, &draining), [1, 1, 1], "the rest round-robin over the others");
        let two = [m("east", 2, 1, None), m("west", 2, 1, None), m("central", 2, 0, None)];
        assert_eq!(divide(1, &two), [1, 0, 0], "two drains and one disruption: the first in placement order");
        assert_eq!(divide(2, &two), [1, 1, 0]);
        assert_eq!(divide(0, &two), [0, 0, 0], "nothing left, nothing given");
        let everywhere = [m("east", 1, 1, None), m("west", 2, 2, None)];
        assert_eq!(divide(5, &everywhere), [1, 2], "never more than a member's Ready pods");
    }

    #[test]
    fn shares_never_add_up_to_more_than_what_is_left_nor_exceed_ready_pods() {
        for left in 0..7 {
            for a in 0..3u32 {
                for b in 0..3u32 {
                    for wa in 0..=a {
                        for wb in 0..=b {
                            let ms = [m("a", a, wa, None), m("b", b, wb, None), m("c", 2, 0, None)];
                            let shares = divide(left, &ms);
                            assert!(shares.iter().sum::<u32>() <= left, "{left} {shares:?}");
                            assert!(shares.iter().zip(&ms).all(|(s, m)| *s <= m.ready));
                            let ready: u32 = ms.iter().map(|m| m.ready).sum();
                            assert_eq!(shares.iter().sum::<u32>(), left.min(ready), "all of it is given");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn budgets_are_absolute_and_a_failure_elsewhere_spends_what_is_left() {
        let ms = [m("east", 2, 0, None), m("west", 2, 0, None), m("central", 2, 0, None)];
        let d = plan(1, 0, &ms);
        let mins: Vec<u32> = d.shares.iter().map(|s| s.min_available).collect();
        assert_eq!((d.left, mins), (1, vec![1, 2, 2]));
        assert_eq!(d.write.len(), 3, "every missing budget is created");
        // A pod of west is down: nothing is left anywhere, and west's minimum is its one Ready pod.
        let ms = [m("east", 2, 0, Some(1)), m("west", 1, 0, Some(2)), m("central", 2, 0, Some(2))];
        let d = plan(1, 1, &ms);
        let mins: Vec<u32> = d.shares.iter().map(|s| s.min_available).collect();
        assert_eq!((d.left, mins), (0, vec![2, 1, 2]));
        assert_eq!(d.write.iter().map(|s| s.cluster.as_str()).collect::<Vec<_>>(), ["east"], "east tightens first");
        assert_eq!(d.held, ["west"], "west's lower minimum waits until east's is stored");
        let ms = [m("east", 2, 0, Some(2)), m("west", 1, 0, Some(2)), m("central", 2, 0, Some(2))];
        let d = plan(1, 1, &ms);
        assert_eq!(d.write.iter().map(|s| (s.cluster.as_str(), s.min_available)).collect::<Vec<_>>(), [("west", 1)]);
        assert!(plan(1, 1, &[m("east", 2, 0, Some(2)), m("west", 1, 0, Some(1))]).write.is_empty(), "idempotent");
    }

    #[test]
    fn a_share_moves_to_a_waiting_drain_by_being_taken_away_first() {
        // east held the one disruption; a drain now waits in west.
        let ms = [m("east", 2, 0, Some(1)), m("west", 2, 1, Some(2)), m("central", 2, 0, Some(2))];
        let d = plan(1, 0, &ms);
        assert_eq!(d.write.iter().map(|s| (s.cluster.as_str(), s.min_available)).collect::<Vec<_>>(), [("east", 2)]);
        assert_eq!(d.held, ["west"]);
        let ms = [m("east", 2, 0, Some(2)), m("west", 2, 1, Some(2)), m("central", 2, 0, Some(2))];
        let d = plan(1, 0, &ms);
        assert_eq!(d.write.iter().map(|s| (s.cluster.as_str(), s.min_available)).collect::<Vec<_>>(), [("west", 1)]);
        // A member whose budget is not known yet holds every loosening.
        let unknown = Member { stored: Stored::Unknown, ..m("central", 2, 0, None) };
        let d = plan(1, 0, &[m("east", 2, 0, Some(2)), m("west", 2, 1, Some(2)), unknown]);
        assert!(d.write.is_empty() && d.held == ["west"], "{d:?}");
    }
}
