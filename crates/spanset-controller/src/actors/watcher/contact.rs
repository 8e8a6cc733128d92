//! What the watcher notes of each member call (contact, or a failure against the member's
//! health), and what it does when the gate refuses a write (a stale leader steps down).

use std::time::Instant;

use actix::prelude::*;

use super::{
    ClusterWatcher,
    decide::{self, CallFailure, WriteRefusal as Refusal},
};
use crate::{
    actors::messages::WriteError,
    member::{health::Failure, objects::FederationKey},
};

impl ClusterWatcher {
    /// The member answered.
    pub(super) fn contact_ok(&mut self) {
        let now = Instant::now();
        self.health.answered(now);
        self.contact.note(now);
        self.metrics.answered(&self.cluster);
    }

    /// A member call as an actor future that notes the member's answer when it succeeds.
    pub(super) fn noting_contact<T: 'static>(
        &self,
        work: impl std::future::Future<Output = Result<T, WriteError>> + 'static,
    ) -> ResponseActFuture<Self, Result<T, WriteError>> {
        Box::pin(work.into_actor(self).map(|res, act, _| {
            if res.is_ok() {
                act.contact_ok();
            }
            res
        }))
    }

    /// A write failed: a refusal the member answered (a 4xx other than 401/403) is contact all
    /// the same; anything else counts against its health.
    pub(super) fn refused_or_failed(&mut self, e: &kube::Error) {
        if CallFailure::of(e).is_contact() {
            self.contact_ok();
        } else {
            self.contact_failed(e);
        }
    }

    /// A call failed against the member's health.
    pub(super) fn contact_failed(&mut self, e: &kube::Error) {
        let message = decide::health::failure_message(&CallFailure::of(e), &self.credentials);
        self.health.failed(Failure::of(e), message);
    }

    /// What the coordinator is told of a write the gate refused. A newer term on the member
    /// means this process is a stale leader: that is said loudly (a warning and
    /// `spanset_stale_writes_refused_total`) and it steps down, so that the elector takes a
    /// term above the member's.
    pub(super) fn refuse(&self, refusal: Refusal, key: &FederationKey, term: u64) -> WriteError {
        if let Refusal::Superseded { newest } = refusal {
            tracing::warn!(
                cluster = %self.cluster, term, member_term = newest,
                "write refused as stale: the member carries a newer term than this leader's; stepping down"
            );
            self.metrics.stale_write_refused(&self.cluster);
            self.leadership.of(key).step_down(&format!(
                "{}: a write in term {term} for {key} was refused, the member carries term {newest}",
                self.cluster
            ));
        }
        refusal.reply(&self.cluster, term)
    }

    /// Refuses a write unless this process leads in `term`, the member is admitted and it
    /// carries no newer term (see [`Self::refuse`]).
    pub(super) fn check_term(&self, key: &FederationKey, term: u64) -> Result<(), WriteError> {
        decide::admit::admit(&self.standing(key), term).map_err(|r| self.refuse(r, key, term))
    }

    /// A refused write as the handler's answer.
    pub(super) fn refused<T: 'static>(
        &self,
        refusal: Refusal,
        key: &FederationKey,
        term: u64,
    ) -> ResponseActFuture<Self, Result<T, WriteError>> {
        Box::pin(fut::ready(Err(self.refuse(refusal, key, term))))
    }
}
