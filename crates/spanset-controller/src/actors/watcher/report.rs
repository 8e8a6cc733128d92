//! The MemberCluster's status: written when its facts changed (last contact at most every
//! [`CONTACT_REPORT_PERIOD`]), and only while this process leads. The facts and whether they
//! are due are [`super::decide::health`]'s; the times are read here.

use std::time::Instant;

use actix::prelude::*;
use kube::api::{Patch, PatchParams};

use super::{
    CONTACT_REPORT_PERIOD, ClusterWatcher, MEMBER_UNREACHABLE_AFTER,
    decide::health::{MemberFacts, condition_turns, member_facts, report_due},
};

impl ClusterWatcher {
    /// Writes the MemberCluster's status when it is due.
    pub(super) fn report_status(&mut self, ctx: &mut Context<Self>) {
        if self.leadership.cluster_duties().term().is_none() {
            return;
        }
        let facts = member_facts(&MemberFacts {
            condition: self.health.condition(Instant::now(), MEMBER_UNREACHABLE_AFTER),
            identity: &self.identity,
            admission: &self.admission,
            server_version: &self.server_version,
            keeps_ordinals: self.keeps_ordinals,
            serves_advanced: self.cache.serves_advanced,
            guards: self.guard_facts(),
        });
        let fresh = self.reported_at.is_some_and(|t| t.elapsed() < CONTACT_REPORT_PERIOD);
        if !report_due(self.reported.as_ref(), &facts, fresh) {
            return;
        }
        let now =
            jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now()).to_string();
        let mut status = facts.clone();
        status["conditions"][0]["lastTransitionTime"] =
            if condition_turns(self.reported.as_ref(), &facts) { now.into() } else { self.reported_since.clone() };
        if let Some(t) = self.health.last_contact {
            let ago = jiff::SignedDuration::try_from(t.elapsed()).unwrap_or_default();
            let at = jiff::Timestamp::now().checked_sub(ago).unwrap_or_else(|_| jiff::Timestamp::now());
            status["lastContact"] = at.round(jiff::Unit::Second).unwrap_or(at).to_string().into();
        }
        let since = status["conditions"][0]["lastTransitionTime"].clone();
        let api = self.host.clone();
        let name = self.cluster.clone();
        let patch = serde_json::json!({"status": status});
        ctx.spawn(
            async move { api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await }
                .into_actor(self)
                .map(move |res, act, _| match res {
                    Ok(_) => {
                        act.reported = Some(facts);
                        act.reported_since = since;
                        act.reported_at = Some(Instant::now());
                    }
                    Err(e) => tracing::debug!(cluster = %act.cluster, error = %e, "MemberCluster status not written"),
                }),
        );
    }
}
