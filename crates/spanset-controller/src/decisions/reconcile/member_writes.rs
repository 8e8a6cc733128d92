//! The round's writes to members other than their StatefulSets: the gated pods released, the
//! PodDisruptionBudgets (`spec.disruption`) and spanset's EndpointSlices (`spec.network`), and
//! the members that may be written at all.

use std::{collections::BTreeMap, sync::Arc};

use spanset_api::labels::IDENTITY_GATE;
use spanset_plan as plan;
use spanset_plan::{Observed, Ordinal, Ordinals};

use super::{
    Inputs, PodRelease,
    homes::{self, Claims, Homes},
    move_storage::Handover,
    scope::Scope,
};
use crate::{
    actors::messages::MemberView,
    decisions::{
        disruption::{self, BudgetWrite},
        network::{self, SliceWrite},
    },
};

/// The round's writes besides the StatefulSets.
pub(super) struct MemberWrites {
    /// Gated pods that may run now.
    pub releases: Vec<PodRelease>,
    /// Claims to fetch from an ordinal's home before its pod is released (see [`homes`]).
    pub fetches: Vec<Handover>,
    /// PodDisruptionBudgets to write or delete.
    pub budgets: Vec<BudgetWrite>,
    /// Placement members that may be written now: reachable, unfenced and keeping ordinals.
    pub writable: Vec<String>,
    /// EndpointSlices to write or delete.
    pub slices: Vec<SliceWrite>,
}

/// The round's writes besides the StatefulSets (`ok`: the ordinals available; `homes`: where
/// each was last let run).
pub(super) fn member_writes(cx: &Scope<'_>, obs: &Observed, ok: &Ordinals, homes: &Homes) -> MemberWrites {
    let fsts = cx.fsts;
    let views: BTreeMap<String, Arc<MemberView>> =
        cx.inp.members.iter().filter_map(|(n, m)| Some((n.clone(), m.view.clone()?))).collect();
    let order: Vec<String> = fsts.spec.placement.clusters.iter().map(|c| c.name.clone()).collect();
    let (budgets, _) = disruption::budgets(fsts, &views, obs, cx.range(), ok, &order, cx.inp.term);
    let writable: Vec<String> = obs
        .iter()
        .filter(|(n, o)| cx.placement.contains(n.as_str()) && o.reachable && !o.fenced && o.compatible)
        .map(|(n, _)| n.clone())
        .collect();
    let slices = network::slice_writes(fsts, &views, obs, &writable, cx.inp.term);
    let (releases, fetches) = releases(cx.inp, obs, cx.range(), homes);
    MemberWrites { releases, fetches, budgets, writable, slices }
}

/// The gated pods that may run now. A pod of ordinal k in member m is released when:
/// m is reachable, unfenced, and its StatefulSet is the one this process wrote in this term
/// (stamped with it, spec not changed by anyone since) and selects k, an ordinal of the
/// federation's range (a drift stamped as spanset's own is shrunk by the next plan); the pod
/// carries the identity gate, is not being deleted and was made by that StatefulSet (a pod
/// someone else created with the identity's name is never released); and every other member that counts
/// (unfenced, or fenced but answering again: [`plan::steps::counts`]) is confirmed not to hold
/// k in its spec nor to have a pod for k — the at-most-one rule's condition for a grow
/// (`Holders::free_for`): each is observed since its last write (an unreachable member counts
/// with what it was last seen to hold or run), and a member that has not reported blocks
/// every release. So a pod that a member's own StatefulSet controller made on its own (a hand
/// scale, a member back from an outage with its stale slice, a stale leader's late write)
/// waits, unscheduled, until spanset has undone it. Last, the ordinal's claims there must be its
/// own ([`homes::claims_for`]): a release that needs its home's claims first waits for them,
/// and their handover is answered beside the releases.
fn releases(
    inp: &Inputs<'_>,
    obs: &Observed,
    range: std::ops::Range<Ordinal>,
    homes: &Homes,
) -> (Vec<PodRelease>, Vec<Handover>) {
    let mut out = Vec::new();
    let mut fetches = Vec::new();
    for (name, o) in obs {
        if o.fenced || !o.reachable {
            continue;
        }
        let Some(view) = inp.members.get(name).and_then(|m| m.view.as_ref()).filter(|v| v.synced) else {
            continue;
        };
        let f = &view.federation;
        let Some(sts) = f.sts.as_ref().filter(|s| !s.deleting && s.term == Some(inp.term)) else { continue };
        if !f.spec_is_ours() {
            continue;
        }
        for (k, pod) in &f.pods {
            // Only a pod its StatefulSet made: one created by someone else with the identity's
            // name (a copied manifest, a restore) is no pod of spanset's to start.
            if !pod.gated() || pod.deleting || !pod.owned_by(&sts.uid) || !sts.slice.contains(*k) || !range.contains(k)
            {
                continue;
            }
            // Its name must not answer twice: spanset's records here drop k's old address first.
            if network::names_ordinal(inp.fsts, view, *k) {
                continue;
            }
            let elsewhere = obs
                .iter()
                .filter(|(n, other)| *n != name && plan::steps::counts(other))
                .any(|(_, other)| !other.observed_since_write || other.written.contains(*k) || other.pods.contains(*k));
            if elsewhere {
                continue;
            }
            match homes::claims_for(inp, obs, homes, *k, name) {
                Claims::Ready => {}
                Claims::Fetch(h) => {
                    fetches.push(h);
                    continue;
                }
                Claims::Wait(_) => continue,
            }
            out.push(PodRelease {
                cluster: name.clone(),
                ordinal: *k,
                uid: pod.uid.clone(),
                rv: pod.rv,
                remaining: pod.gates.iter().filter(|g| *g != IDENTITY_GATE).cloned().collect(),
            });
        }
    }
    (out, fetches)
}
