//! Stage 3: what runs. Each ordinal's pod as the rollout sees it, the rollout's cursor, the
//! ordinals available and unavailable for the disruption budget, and the ordinals seen running
//! in two members.

use std::{collections::BTreeMap, time::Duration};

use spanset_plan::{Observed, Ordinal, Ordinals};

use super::{Conflict, Inputs, scope::Scope};
use crate::{
    decisions::rollout::{self, PodState, Rollout},
    member::objects::{global_partition, on_delete, revision, rolling_max_unavailable},
};

/// What runs, as this reconcile counts it.
pub(super) struct Availability {
    /// The rollout: revisions, counts, and the cursor members are written with.
    pub roll: Rollout,
    /// When the next pod becomes available by time alone (`minReadySeconds`).
    pub wake_after: Option<Duration>,
    /// Ordinals available (and, below the cursor or updated, not about to be replaced).
    pub ok: Ordinals,
    /// Ordinals counted unavailable for the disruption budget.
    pub unavailable: Ordinals,
    /// Ordinals seen running in two unfenced members.
    pub conflicts: Vec<Conflict>,
}

/// Counts what runs.
pub(super) fn assess(cx: &Scope<'_>, obs: &Observed) -> Availability {
    let fsts = cx.fsts;
    let (pods, wake_after) = pod_states(cx.inp, obs, &cx.hash, cx.range());
    let roll = rollout::roll(&rollout::Input {
        name: &cx.name(),
        revision: revision(fsts),
        previous: cx.previous,
        range: cx.range(),
        partition: global_partition(fsts),
        max_unavailable: rollout::resolve_max_unavailable(rolling_max_unavailable(fsts), cx.desired.replicas)
            .min(fsts.spec.disruption.as_ref().map_or(u32::MAX, |d| d.allowed_unavailable(cx.desired.replicas))),
        on_delete: on_delete(fsts),
        pods: &pods,
    });
    let ok = available(cx, &pods, roll.cursor);
    let unavailable = unavailable(cx, obs, &ok);
    Availability { roll, wake_after, ok, unavailable, conflicts: conflicts(cx.inp, obs) }
}

/// Ordinals available and not about to be replaced by the rollout (below its cursor, or
/// updated already).
fn available(cx: &Scope<'_>, pods: &BTreeMap<Ordinal, PodState>, cursor: Ordinal) -> Ordinals {
    pods.iter()
        .filter(|(k, p)| p.available && !p.deleting && (on_delete(cx.fsts) || **k < cursor || p.updated))
        .map(|(k, _)| *k)
        .collect()
}

/// Ordinals counted unavailable for the disruption budget: placed (in the written slice of a
/// member that answers and is not fenced, or moving) and not available there, or about to be
/// replaced by the rollout (at or above its cursor, not yet updated). An ordinal no member
/// holds yet (a scale-up not yet written) was never available and counts for nothing
/// (counting it would hold the very moves that make room for it); a member that does not
/// answer is not judged. Ordinals re-homed from a fenced member count once written in their
/// new home: until then they hold no voluntary move (which may be what makes room for them).
fn unavailable(cx: &Scope<'_>, obs: &Observed, ok: &Ordinals) -> Ordinals {
    let fenced = |c: &str| obs.get(c).is_some_and(|o| o.fenced);
    let mut placed: Ordinals =
        cx.previous.moves.iter().filter(|m| !fenced(&m.from)).filter_map(|m| u32::try_from(m.ordinal).ok()).collect();
    for o in obs.values().filter(|o| o.reachable && !o.fenced) {
        placed = &placed | &o.written.ordinals();
    }
    &(&cx.desired.ordinals() & &placed) - ok
}

/// The rollout's view of every ordinal of `range`: the pod in the member whose written slice
/// holds it, when that member answers and is not fenced (otherwise the ordinal has no pod the
/// rollout can count on). A pod runs the spec's template when its revision label is its
/// member's `updateRevision` for the current template. Also: when the next pod becomes
/// available by time alone (`minReadySeconds`).
fn pod_states(
    inp: &Inputs<'_>,
    obs: &Observed,
    hash: &str,
    range: std::ops::Range<Ordinal>,
) -> (BTreeMap<Ordinal, PodState>, Option<Duration>) {
    let min_ready = inp.fsts.spec.template.min_ready_seconds.unwrap_or(0).max(0) as u64;
    let mut out = BTreeMap::new();
    let mut wake: Option<Duration> = None;
    for (name, o) in obs.iter().filter(|(_, o)| o.reachable && !o.fenced) {
        let Some(view) = inp.members.get(name).and_then(|m| m.view.as_ref()) else { continue };
        let f = &view.federation;
        let Some(sts) = f.sts.as_ref().filter(|s| !s.deleting) else { continue };
        let current_template = sts.template_hash.as_deref() == Some(hash);
        for (k, p) in f.pods.range(range.clone()).filter(|(k, _)| o.written.contains(**k)) {
            let ready = p.ready && !p.deleting;
            // Judged on this process's monotonic clock alone, from when its watcher first saw
            // the pod Ready (see `PodRecord::ready_for`): a member's clock never enters it.
            let needed = Duration::from_secs(min_ready);
            let ready_for = p.ready_for(inp.now);
            let available = ready && (min_ready == 0 || ready_for.is_some_and(|d| d >= needed));
            if ready
                && !available
                && let Some(d) = ready_for
            {
                let left = needed.saturating_sub(d) + Duration::from_millis(50);
                wake = Some(wake.map_or(left, |w| w.min(left)));
            }
            // An ordinal two members hold (a drift being undone) counts by its better pod.
            if out.get(k).is_some_and(|p: &PodState| p.available || !ready) {
                continue;
            }
            out.insert(
                *k,
                PodState {
                    cluster: name.clone(),
                    // A pod held since the identity gate was added runs the template too.
                    updated: current_template
                        && p.revision.is_some()
                        && (p.revision == sts.update_revision || p.revision == sts.ungated_revision),
                    available,
                    ready,
                    deleting: p.deleting,
                    trouble: p.trouble.clone(),
                },
            );
        }
    }
    (out, wake)
}

/// Ordinals whose pods exist in two unfenced members at once; a pod still waiting for
/// spanset's release (identity gate) cannot run and does not count.
fn conflicts(inp: &Inputs<'_>, obs: &Observed) -> Vec<Conflict> {
    let mut runs: BTreeMap<Ordinal, Vec<String>> = BTreeMap::new();
    for (name, o) in obs.iter().filter(|(_, o)| !o.fenced) {
        let gated: Ordinals = inp
            .members
            .get(name)
            .and_then(|m| m.view.as_ref())
            .map(|v| v.federation.pods.iter().filter(|(_, p)| p.gated()).map(|(k, _)| *k).collect())
            .unwrap_or_default();
        for k in (&o.pods - &gated).iter() {
            runs.entry(k).or_default().push(name.clone());
        }
    }
    runs.into_iter().filter(|(_, m)| m.len() > 1).map(|(ordinal, members)| Conflict { ordinal, members }).collect()
}
