//! What a federation still holds in one member cluster, so that deleting its MemberCluster
//! never erases what spanset knows about that member: forgotten, its ordinals would start
//! elsewhere while its pods may still run there.
//!
//! A MemberCluster carries the finalizer [`MEMBER_FINALIZER`](spanset_api::labels::MEMBER_FINALIZER)
//! from the moment the leader sees it. When it is deleted, the supervisor asks every
//! coordinator what its federation still holds there and removes the finalizer only once no
//! federation holds anything — or once the member is fenced and no longer answers, since the
//! fence is an operator's statement that its workloads are dead. Until then its watcher keeps
//! running, so its pods keep blocking their ordinals elsewhere: a pod stuck Terminating on a
//! dead node is the book's case where the containers may still run.
//!
//! Pure: from the federation, the member's input and the clock, no I/O.

use std::time::{Duration, Instant};

use kube::ResourceExt;
use spanset_api::FederatedStatefulSet;
use spanset_plan as plan;
use spanset_plan::ordinals_text;

use crate::decisions::reconcile::{MemberInput, observe};

/// Why a federation still holds `cluster`, one phrase each (empty: it holds nothing there).
/// `grace` is the federation's `unreachableAfterSeconds`, which decides whether the member
/// answers.
pub fn holds(
    fsts: &FederatedStatefulSet,
    cluster: &str,
    member: Option<&MemberInput>,
    now: Instant,
    grace: Duration,
) -> Vec<String> {
    let key = format!("{}/{}", fsts.namespace().unwrap_or_default(), fsts.name_any());
    let status = fsts.status.clone().unwrap_or_default();
    let fenced = member.is_some_and(|m| m.fenced);
    let view = member.and_then(|m| m.view.as_ref()).filter(|v| v.synced);
    let backend = crate::member::objects::backend(fsts);
    let mut out = Vec::new();
    match view {
        Some(view) => {
            let o = observe(view, backend, crate::pod_lease::leased(fsts), fenced, now, grace);
            // A fenced member that no longer answers holds nothing: the fence stands for it.
            if fenced && !o.reachable {
                return out;
            }
            if o.written.replicas > 0 {
                out.push(format!("{key}: its StatefulSet holds ordinals {}", ordinals_text(&o.written.ordinals())));
            }
            if !o.pods.is_empty() {
                let terminating = view.federation.pods.values().filter(|p| p.deleting).count();
                out.push(format!(
                    "{key}: pods of ordinals {} exist there ({terminating} terminating)",
                    ordinals_text(&o.pods)
                ));
            }
        }
        None if fenced => return out,
        // Not observed by this process yet: the status is what is known.
        None => {
            for s in status.slices.iter().filter(|s| s.cluster == cluster) {
                let written = plan::stored_slice_text(
                    s.start.into(),
                    s.replicas.into(),
                    s.reserved_ordinals.iter().map(|k| i64::from(*k)),
                );
                let last = if s.replicas > 0 { format!("ordinals {written}") } else { "no ordinals".into() };
                out.push(format!(
                    "{key}: last seen holding {last}, and not observed since this controller started (its pods are unknown)"
                ));
            }
        }
    }
    if fsts.spec.placement.clusters.iter().any(|c| c.name == cluster) && !fenced {
        out.push(format!("{key}: named in spec.placement"));
    }
    let moving: plan::Ordinals = status
        .moves
        .iter()
        .filter(|m| m.from == cluster || m.to == cluster)
        .filter_map(|m| u32::try_from(m.ordinal).ok())
        .collect();
    if !moving.is_empty() && !fenced {
        out.push(format!("{key}: ordinals {} are moving from or to it", ordinals_text(&moving)));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{
        actors::messages::MemberView,
        member::cache::{FederationCache, PodPhase, PodRecord},
    };
    use spanset_api::{FederatedStatefulSetStatus, MoveStatus, SliceStatus};

    const GRACE: Duration = Duration::from_secs(15);

    fn fsts(placement: &[&str]) -> FederatedStatefulSet {
        let names: Vec<String> = placement.iter().map(|c| c.to_string()).collect();
        spanset_api::example(&names)
    }

    /// A member that answers (or not), with pods of `pods` terminating and an empty slice.
    fn member(pods: &[u32], answers: bool, fenced: bool) -> MemberInput {
        let federation = FederationCache {
            pods: pods
                .iter()
                .map(|k| {
                    let p = PodRecord {
                        uid: format!("p{k}"),
                        node: Some("node-1".into()),
                        phase: PodPhase::Running,
                        ready: false,
                        deleting: true,
                        rv: 3,
                        gates: vec![],
                        revision: None,
                        ready_since: None,
                        ready_seen: None,
                        trouble: None,
                        ip: None,
                        owner: None,
                        labelled: true,
                        guard: None,
                    };
                    (*k, p)
                })
                .collect(),
            ..Default::default()
        };
        let contact = if answers { Instant::now() } else { Instant::now() - Duration::from_secs(120) };
        let view = MemberView {
            synced: true,
            federation: federation.into(),
            last_contact: Some(contact),
            ..Default::default()
        };
        MemberInput {
            exists: true,
            unusable: None,
            fenced,
            answered_since_fence: false,
            view: Some(Arc::new(view)),
            duplicate: None,
        }
    }

    #[test]
    fn pods_still_terminating_in_a_member_hold_it_until_they_are_gone() {
        // c left the placement, its StatefulSet is shrunk, its pods 4-5 are stuck Terminating
        // on dead nodes and the moves wait for them.
        let mut f = fsts(&["a", "b"]);
        f.metadata.namespace = Some("default".into());
        f.status = Some(FederatedStatefulSetStatus {
            moves: [4, 5]
                .map(|k| MoveStatus {
                    ordinal: k,
                    from: "c".into(),
                    to: "b".into(),
                    phase: "Draining".into(),
                    since: String::new(),
                    stale_claims: None,
                })
                .to_vec(),
            ..Default::default()
        });
        let held = holds(&f, "c", Some(&member(&[4, 5], true, false)), Instant::now(), GRACE);
        assert_eq!(
            held,
            [
                "default/redis: pods of ordinals 4-5 exist there (2 terminating)",
                "default/redis: ordinals 4-5 are moving from or to it"
            ]
        );
        // Fenced but answering: its pods still hold it.
        let held = holds(&f, "c", Some(&member(&[4, 5], true, true)), Instant::now(), GRACE);
        assert_eq!(held, ["default/redis: pods of ordinals 4-5 exist there (2 terminating)"]);
        // Fenced and silent: the fence stands for it.
        assert!(holds(&f, "c", Some(&member(&[4, 5], false, true)), Instant::now(), GRACE).is_empty());
        // Gone and nothing recorded: free.
        f.status = None;
        assert!(holds(&f, "c", Some(&member(&[], true, false)), Instant::now(), GRACE).is_empty());
    }

    #[test]
    fn a_member_not_observed_yet_is_held_by_what_the_status_recorded() {
        let mut f = fsts(&["a"]);
        f.metadata.namespace = Some("default".into());
        f.status = Some(FederatedStatefulSetStatus {
            slices: vec![SliceStatus {
                cluster: "c".into(),
                start: 4,
                replicas: 0,
                reserved_ordinals: vec![],
                ready_replicas: 0,
            }],
            ..Default::default()
        });
        let held = holds(&f, "c", None, Instant::now(), GRACE);
        assert_eq!(held.len(), 1);
        assert!(held[0].contains("not observed since this controller started"), "{held:?}");
        // In the placement, unfenced: held whatever it runs.
        let held = holds(&f, "a", Some(&member(&[], true, false)), Instant::now(), GRACE);
        assert_eq!(held, ["default/redis: named in spec.placement"]);
    }
}
