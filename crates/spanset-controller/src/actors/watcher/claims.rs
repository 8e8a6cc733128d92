//! Storage handovers and retired claims, as [`decide::claims`] plans them: the source's volumes
//! set to Retain once every one may go, the destination's claims created beside a stale one
//! retired, and a retirement's volume kept before its claim is deleted.

use actix::prelude::*;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, PostParams, Preconditions},
};
use spanset_api::labels::FIELD_MANAGER;

use super::{
    ClusterWatcher, calls,
    decide::{
        self, CallFailure,
        claims::{AdoptClaim, RetireCall},
    },
};
use crate::{
    actors::messages::{AdoptClaims, ReleaseClaims, RetireClaims, WriteError},
    member::{cache::ClaimRecord, storage},
    telemetry::metrics::Metrics,
};

/// Turns a client error into the watcher's answer.
fn reply(cluster: &str) -> impl Fn(kube::Error) -> WriteError + '_ {
    move |e| CallFailure::of(&e).reply(cluster)
}

impl Handler<ReleaseClaims> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<Vec<(PersistentVolume, PersistentVolumeClaim)>, WriteError>>;

    fn handle(&mut self, msg: ReleaseClaims, _: &mut Self::Context) -> Self::Result {
        if let Err(refusal) = decide::claims::plan_claims(&self.standing(&msg.key), msg.term) {
            return self.refused(refusal, &msg.key, msg.term);
        }
        let client = self.client.clone();
        let cluster = self.cluster.clone();
        let work = async move {
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &msg.namespace);
            let pvs: Api<PersistentVolume> = Api::all(client);
            let mut found = Vec::new();
            for name in &msg.claims {
                let pvc = pvcs.get(name).await.map_err(reply(&cluster))?;
                let volume = decide::claims::volume_to_release(&cluster, name, &pvc)?;
                let pv = pvs.get(&volume).await.map_err(reply(&cluster))?;
                decide::claims::release_allowed(&cluster, &pv)?;
                found.push((pv, pvc));
            }
            // Every volume can go: only now is anything changed.
            let mut out = Vec::new();
            for (pv, pvc) in found {
                let pv = calls::retain(&pvs, &pv.name_any()).await.map_err(reply(&cluster))?;
                out.push((storage::pv_for_destination(&pv), storage::pvc_for_destination(&pvc)));
            }
            Ok(out)
        };
        self.noting_contact(work)
    }
}

impl Handler<AdoptClaims> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<Vec<(String, Option<String>)>, WriteError>>;

    fn handle(&mut self, msg: AdoptClaims, _: &mut Self::Context) -> Self::Result {
        if let Err(refusal) = decide::claims::plan_claims(&self.standing(&msg.key), msg.term) {
            return self.refused(refusal, &msg.key, msg.term);
        }
        let client = self.client.clone();
        let cluster = self.cluster.clone();
        let metrics = self.metrics.clone();
        let work = async move {
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &msg.namespace);
            let pvs: Api<PersistentVolume> = Api::all(client);
            let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
            let mut retired = Vec::new();
            for (pv, pvc) in &msg.objects {
                let volume = pv.name_any();
                if pvs.get_opt(&volume).await.map_err(reply(&cluster))?.is_none() {
                    pvs.create(&pp, pv).await.map_err(reply(&cluster))?;
                    metrics.member_write(&cluster, "PersistentVolume");
                }
                let there = pvcs.get_opt(&pvc.name_any()).await.map_err(reply(&cluster))?;
                let retire = match decide::claims::adopt_claim(there.as_ref(), &volume) {
                    AdoptClaim::Keep => continue,
                    AdoptClaim::Create => {
                        pvcs.create(&pp, pvc).await.map_err(reply(&cluster))?;
                        metrics.member_write(&cluster, "PersistentVolumeClaim");
                        continue;
                    }
                    AdoptClaim::ReplaceStale { retire } => retire,
                };
                let Some(there) = there else { continue };
                let name = there.name_any();
                if retire {
                    // The stale claim exactly as read here: one that changed since is left for the
                    // next handover.
                    let record = ClaimRecord::of(&there).1;
                    let old =
                        retire_claim(&pvcs, &pvs, &record, true, &cluster, &metrics).await?.and_then(|volume| volume);
                    tracing::warn!(
                        cluster = %cluster, claim = %name, volume = ?old, handed_over = %volume,
                        "stale claim retired in the destination of a storage handover; its volume is kept"
                    );
                    retired.push((name.clone(), old));
                }
                match pvcs.create(&pp, pvc).await {
                    Ok(_) => metrics.member_write(&cluster, "PersistentVolumeClaim"),
                    Err(e) if CallFailure::of(&e).is(409) => {
                        return Err(decide::claims::stale_claim_pending(&cluster, &name, &volume));
                    }
                    Err(e) => return Err(reply(&cluster)(e)),
                }
            }
            Ok(retired)
        };
        self.noting_contact(work)
    }
}

impl Handler<RetireClaims> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<Vec<(String, Option<String>)>, WriteError>>;

    fn handle(&mut self, msg: RetireClaims, _: &mut Self::Context) -> Self::Result {
        if let Err(refusal) = decide::claims::plan_claims(&self.standing(&msg.key), msg.term) {
            return self.refused(refusal, &msg.key, msg.term);
        }
        let client = self.client.clone();
        let cluster = self.cluster.clone();
        let metrics = self.metrics.clone();
        let work = async move {
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &msg.namespace);
            let pvs: Api<PersistentVolume> = Api::all(client);
            let mut retired = Vec::new();
            for claim in &msg.claims {
                if let Some(volume) = retire_claim(&pvcs, &pvs, claim, msg.keep_volume, &cluster, &metrics).await? {
                    retired.push((claim.name.clone(), volume));
                }
            }
            Ok(retired)
        };
        self.noting_contact(work)
    }
}

/// Retires `claim` with the calls of [`decide::claims::retire_calls`]: its volume set to
/// Retain first when `keep_volume` (if it still exists), then exactly the version observed
/// deleted (uid and resourceVersion preconditions). Answers `Some(its volume)` once deleted,
/// `None` when it was gone already; a claim changed since it was observed is a conflict, for
/// the next decision.
async fn retire_claim(
    pvcs: &Api<PersistentVolumeClaim>,
    pvs: &Api<PersistentVolume>,
    claim: &ClaimRecord,
    keep_volume: bool,
    cluster: &str,
    metrics: &Metrics,
) -> Result<Option<Option<String>>, WriteError> {
    for call in decide::claims::retire_calls(claim, keep_volume) {
        match call {
            RetireCall::RetainVolume(v) => {
                if pvs.get_opt(&v).await.map_err(reply(cluster))?.is_some() {
                    calls::retain(pvs, &v).await.map_err(reply(cluster))?;
                    metrics.member_write(cluster, "PersistentVolume");
                }
            }
            RetireCall::DeleteClaim { name, exactly } => {
                let preconditions =
                    exactly.map(|(uid, rv)| Preconditions { uid: Some(uid), resource_version: Some(rv.to_string()) });
                let dp = DeleteParams { preconditions, ..Default::default() };
                match calls::delete(pvcs, &name, &dp, false).await.map_err(reply(cluster))? {
                    decide::DeleteOutcome::Deleted => metrics.member_write(cluster, "PersistentVolumeClaim"),
                    _ => return Ok(None),
                }
            }
        }
    }
    Ok(Some(claim.volume.clone()))
}
