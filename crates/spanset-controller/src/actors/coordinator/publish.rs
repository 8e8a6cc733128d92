//! Carrying out a reconcile's EndpointSlice writes (`spec.network`): every member at once, each
//! bounded by the member call deadline. A slice that cannot be written holds nothing else of
//! the reconcile; the pod whose start waits on it stays gated, and the write is tried again
//! after the pause that follows a failure.

use std::collections::BTreeMap;

use actix::Addr;

use super::{
    MEMBER_CALL_TIMEOUT, RoundOutcome as Outcome, call_failed, note_access_refusal,
    round_error::{MemberFailure, MemberPart, RoundError},
};
use crate::{
    actors::{
        messages::{WriteEndpointSlice, WriteError},
        watcher::ClusterWatcher,
    },
    decisions::reconcile::Decision,
    member::objects::FederationKey,
};

/// Writes the decision's slices; failures are noted in `out` (again, error).
pub(super) async fn write_slices(
    decision: &Decision,
    watchers: &BTreeMap<String, Addr<ClusterWatcher>>,
    key: &FederationKey,
    term: u64,
    out: &mut Outcome,
) {
    let sends = decision.slices.iter().filter_map(|w| {
        let watcher = watchers.get(&w.cluster)?.clone();
        let msg = WriteEndpointSlice { key: key.clone(), name: w.name.clone(), change: w.change.clone(), term };
        Some(async move { (w, watcher.send(msg).timeout(MEMBER_CALL_TIMEOUT).await) })
    });
    let mut failed = Vec::new();
    for (w, res) in futures::future::join_all(sends).await {
        match res {
            Ok(Ok(_)) => {}
            // Someone else's slice of that name, or a newer version: the watch plans again.
            Ok(Err(WriteError::Conflict)) => out.again = true,
            Ok(Err(e)) => {
                note_access_refusal(out, &e);
                failed.push(MemberFailure::new(&w.cluster, format!("EndpointSlice {}: {e}", w.name)));
            }
            Err(e) => {
                failed.push(MemberFailure::new(&w.cluster, format!("EndpointSlice {}: {}", w.name, call_failed(e))))
            }
        }
    }
    if let Err(e) = RoundError::of_members(MemberPart::Slices, failed) {
        tracing::warn!(federation = %key, error = %e, "published EndpointSlices not written; retrying");
        out.again = true;
        out.error = Some(e);
    }
}
