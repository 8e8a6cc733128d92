//! What a deleted federation leaves in a member it could not tear down: recorded on the
//! MemberCluster (`status.leftovers`) by the federation's deletion, so that the federation can
//! go from the host; removed by the sweep ([`SweepLeftover`]) once the member answers again,
//! then cleared from the record.
//!
//! Each write is a JSON merge patch of `status.leftovers` conditional on the MemberCluster's
//! resourceVersion as read (the watcher's own status patches touch other fields and never this
//! one): a conflict is tried again by the next round. Entries are keyed by the federation's
//! uid, so recording twice or clearing twice changes nothing.

use std::{collections::BTreeMap, time::Duration};

use actix::prelude::*;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, Client, ResourceExt,
    api::{DynamicObject, ListParams, Patch, PatchParams},
};
use spanset_api::{FederatedStatefulSet, Leftover, MemberCluster};

use crate::{
    actors::{
        messages::{MEMBER_CALL_TIMEOUT, SweepLeftover, Swept},
        watcher::{ClusterWatcher, decide::teardown::Removal},
    },
    host::events::{Note, Recorder},
    leadership::shards::Shards,
    member::sharing::{self, Sharers},
};

/// The record of what `fsts` may leave in a member, with `removal` (its Service, carried
/// objects, ServiceExport).
pub fn entry(fsts: &FederatedStatefulSet, removal: &Removal, since: jiff::Timestamp) -> Leftover {
    let federation = fsts.name_any();
    Leftover {
        objects: removal.objects(&federation),
        federation,
        namespace: fsts.namespace().unwrap_or_default(),
        uid: fsts.uid().unwrap_or_default(),
        since: Some(since.round(jiff::Unit::Second).unwrap_or(since).to_string()),
        service: removal.service.clone(),
        exported: removal.exported,
    }
}

/// `leftovers` with `entry` added, unless one of its uid is there already (`None`: nothing to
/// write).
pub fn with(leftovers: &[Leftover], entry: &Leftover) -> Option<Vec<Leftover>> {
    if leftovers.iter().any(|l| l.uid == entry.uid) {
        return None;
    }
    let mut out = leftovers.to_vec();
    out.push(entry.clone());
    Some(out)
}

/// `leftovers` without the entry of `uid` (`None`: it is not there).
pub fn without(leftovers: &[Leftover], uid: &str) -> Option<Vec<Leftover>> {
    if !leftovers.iter().any(|l| l.uid == uid) {
        return None;
    }
    Some(leftovers.iter().filter(|l| l.uid != uid).cloned().collect())
}

/// The leftovers recorded on `mc`.
pub fn of(mc: &MemberCluster) -> &[Leftover] {
    mc.status.as_ref().map(|s| s.leftovers.as_slice()).unwrap_or_default()
}

/// Why a deleted MemberCluster is kept for its leftovers: each entry, unless the member is
/// fenced and `silent` (as a federation's pods there hold it only then): its record goes with
/// the MemberCluster, and with it what spanset knows is left there.
pub fn holding(mc: &MemberCluster, silent: bool) -> Vec<String> {
    if mc.spec.fenced && silent {
        return Vec::new();
    }
    of(mc)
        .iter()
        .map(|l| format!("{}/{} (deleted) left objects here, removed once they are swept", l.namespace, l.federation))
        .collect()
}

/// Changes member `name`'s record by `change` (answering the new list, or `None` for no
/// change), conditional on the version read.
async fn update(
    host: &Client,
    name: &str,
    change: impl FnOnce(&[Leftover]) -> Option<Vec<Leftover>>,
) -> Result<(), String> {
    let api: Api<MemberCluster> = Api::all(host.clone());
    let mc = api.get(name).await.map_err(|e| format!("MemberCluster {name}: {e}"))?;
    let Some(next) = change(of(&mc)) else { return Ok(()) };
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": mc.resource_version()},
        "status": {"leftovers": next},
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| format!("MemberCluster {name} status.leftovers: {e}"))
}

/// The host's federations of namespace `ns` as stored (one that cannot be decoded counts too:
/// what it keeps in the members is read from its stored fields).
pub async fn federations_of(host: &Client, ns: &str) -> Result<Vec<DynamicObject>, String> {
    Api::<DynamicObject>::namespaced_with(host.clone(), ns, &spanset_api::decode::federation_resource())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| format!("federations of {ns}, for what their members share: {e}"))
}

/// Records `entry` on member `name` (idempotent).
pub async fn record(host: &Client, name: &str, entry: &Leftover) -> Result<(), String> {
    update(host, name, |l| with(l, entry)).await
}

/// Clears the entry of federation uid `uid` from member `name` (idempotent).
pub async fn clear(host: &Client, name: &str, uid: &str) -> Result<(), String> {
    update(host, name, |l| without(l, uid)).await
}

/// The sweep of `leftover` in `member`, in `term`, with the host's federations of its
/// namespace as read now (who else keeps its shared objects there; whether a namesake exists).
pub fn sweep_message(leftover: &Leftover, member: &str, federations: &[DynamicObject], term: u64) -> SweepLeftover {
    let sharers: Sharers = sharing::sharers(federations, &leftover.federation, member);
    let namesake = federations.iter().any(|f| f.name_any() == leftover.federation);
    SweepLeftover { leftover: leftover.clone(), sharers, namesake, term }
}

/// How recently a member must have answered for its leftovers to be swept: a silent member is
/// not asked (each attempt reads the host's federations first).
pub const SWEEP_AFTER_CONTACT: Duration = Duration::from_secs(6);

/// Sweeps every entry of `entries` in member `member` once, through its `watcher`, each in the
/// term of its federation's shard (an entry whose shard this process does not lead waits for
/// the process that does); clears each entry whose sweep removed everything, and says so
/// (a log line and a Normal Event `LeftoversRemoved` about the MemberCluster, `about`).
pub async fn sweep(
    host: Client,
    member: String,
    about: ObjectReference,
    watcher: Addr<ClusterWatcher>,
    entries: Vec<spanset_api::Leftover>,
    shards: Shards,
) {
    let mut federations: BTreeMap<String, Vec<DynamicObject>> = BTreeMap::new();
    for l in entries {
        let Some(term) = shards.of_object(&l.namespace, &l.federation).term() else { continue };
        if !federations.contains_key(&l.namespace) {
            match federations_of(&host, &l.namespace).await {
                Ok(list) => federations.insert(l.namespace.clone(), list),
                Err(e) => {
                    tracing::debug!(cluster = %member, error = %e, "federations not read; leftovers swept later");
                    return;
                }
            };
        }
        let msg = sweep_message(&l, &member, &federations[&l.namespace], term);
        let what = format!("{}/{} (uid {})", l.namespace, l.federation, l.uid);
        match watcher.send(msg).timeout(MEMBER_CALL_TIMEOUT).await {
            Ok(Ok(Swept::Removed)) => match clear(&host, &member, &l.uid).await {
                Ok(()) => {
                    tracing::info!(cluster = %member, federation = %what, "removed what the deleted federation left in the member");
                    let note = Note::normal(
                        "LeftoversRemoved",
                        format!("removed what the deleted federation {what} left here; its record is cleared"),
                    );
                    Recorder::new(host.clone(), "spanset".into()).record_about("default", about.clone(), &note).await;
                }
                Err(e) => {
                    tracing::debug!(cluster = %member, federation = %what, error = %e, "record not cleared; retrying")
                }
            },
            Ok(Ok(step)) => {
                tracing::info!(cluster = %member, federation = %what, step = ?step, "sweeping what a deleted federation left")
            }
            Ok(Err(e)) => tracing::debug!(cluster = %member, federation = %what, error = %e, "leftovers not swept yet"),
            Err(e) => tracing::debug!(cluster = %member, federation = %what, error = %e, "leftovers not swept yet"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftover(uid: &str) -> Leftover {
        Leftover { federation: "redis".into(), namespace: "db".into(), uid: uid.into(), ..Default::default() }
    }

    #[test]
    fn recording_and_clearing_are_idempotent_by_uid() {
        let one = with(&[], &leftover("u1")).expect("added");
        assert_eq!(with(&one, &leftover("u1")), None, "recorded once");
        let two = with(&one, &leftover("u2")).expect("another federation's entry");
        assert_eq!(without(&two, "u1"), Some(vec![leftover("u2")]));
        assert_eq!(without(&one[..0], "u1"), None, "cleared once");
    }

    #[test]
    fn a_member_with_leftovers_is_kept_unless_fenced_and_silent() {
        let mut mc =
            MemberCluster::new("central", serde_json::from_value(serde_json::json!({"context": "c"})).unwrap());
        assert!(holding(&mc, false).is_empty(), "nothing left there");
        mc.status = Some(spanset_api::MemberClusterStatus { leftovers: vec![leftover("u1")], ..Default::default() });
        assert_eq!(holding(&mc, true), ["db/redis (deleted) left objects here, removed once they are swept"]);
        mc.spec.fenced = true;
        assert_eq!(holding(&mc, false).len(), 1, "fenced but answering: swept soon");
        assert!(holding(&mc, true).is_empty(), "fenced and silent: let go");
    }

    #[test]
    fn a_namesake_in_the_host_is_told_to_the_sweep() {
        let of = |name: &str| {
            let mut f = serde_json::to_value(spanset_api::example(&["east".to_string()])).expect("JSON");
            f["metadata"]["name"] = serde_json::json!(name);
            serde_json::from_value::<DynamicObject>(f).expect("an object")
        };
        assert!(sweep_message(&leftover("u1"), "east", &[of("redis")], 3).namesake);
        let msg = sweep_message(&leftover("u1"), "east", &[of("kv")], 3);
        assert!(!msg.namesake && msg.term == 3);
    }
}
