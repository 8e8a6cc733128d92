//! The member's probe, every [`PROBE_PERIOD`]: its version, and once each its identity, whether
//! it keeps `.spec.ordinals`, whether it serves ValidatingAdmissionPolicies (which are then read
//! back on their own, see `read_back.rs`) and whether it serves Advanced StatefulSets. What a
//! probe asks and
//! what its answers mean are [`super::decide::health`]'s; this sends it and notes the result.

use std::time::{Duration, Instant};

use actix::prelude::*;
use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Namespace};
use kube::{Api, Client, api::PostParams};
use spanset_api::labels::{FEDERATION, FIELD_MANAGER, MANAGED_BY, MANAGER};

use super::{
    ClusterWatcher, MEMBER_UNREACHABLE_AFTER, PROBE_PERIOD, PROBE_TIMEOUT,
    decide::{
        CallFailure,
        health::{
            Reachability, advanced_failure_answers, advanced_served, identity_of, identity_unshown, ordinals_kept,
            ordinals_probe_settled, probe_asks, reachability_change,
        },
    },
};
use crate::{
    actors::messages::Identified,
    member::{
        health::Failure,
        protections::{minor_of, serves_admission_policies},
        workload::{KRUISE_GROUP, KRUISE_VERSION},
    },
};

/// What one probe learnt: the version, then each `None` when not asked.
struct Learnt {
    version: k8s_openapi::apimachinery::pkg::version::Info,
    identity: Option<Result<String, String>>,
    keeps: Option<bool>,
    advanced: Option<bool>,
    policies: Option<bool>,
}

impl ClusterWatcher {
    /// Every [`PROBE_PERIOD`]: judges the member's health (so that detection lands within one
    /// period of the threshold even while a probe hangs), reports it, and starts a probe unless
    /// one is still waiting for its answer.
    pub(super) fn tick(&mut self, ctx: &mut Context<Self>) {
        self.judge_reachability(ctx);
        // A silence crosses the threshold between two ticks: it is judged at that instant, not
        // up to a probe period later.
        if let Some(left) =
            until_crossing(self.health.last_contact, Instant::now(), MEMBER_UNREACHABLE_AFTER, PROBE_PERIOD)
        {
            ctx.run_later(left, |act, ctx| act.judge_reachability(ctx));
        }
        self.tell_if_quiet(ctx);
        if !self.probing {
            self.probe(ctx);
        }
        self.read_back_if_due(ctx);
        self.settle_uncertain_writes(ctx);
        // Confirmations still due (one whose list failed, or whose federation was touched
        // before the member synced) are tried again here too, without reporting to anyone.
        if self.cache.synced() && self.confirm_scan {
            // Only the due ones are copied: a member serving a thousand federations has none
            // due at almost every tick. One never seen here is due (its absence is confirmed
            // by a list).
            let due: Vec<_> = self
                .subscribers
                .keys()
                .filter(|key| self.cache.federations.get(*key).is_none_or(|f| f.is_confirmation_due()))
                .cloned()
                .collect();
            // Looked through again only after something changes (see `confirm_scan`); a list
            // in flight sets it again when it ends.
            self.confirm_scan = !due.is_empty() || !self.confirming.is_empty();
            if let Some(first) = due.first() {
                tracing::debug!(
                    cluster = %self.cluster, due = due.len(), confirming = self.confirming.len(), first = %first,
                    "confirmations due at the probe tick"
                );
                self.confirm_due(&due, ctx);
            }
        }
    }

    /// Whether the member answered within the threshold, said in the metric, the MemberCluster's
    /// status and, when it changed, to every federation.
    fn judge_reachability(&mut self, ctx: &mut Context<Self>) {
        let up = self.health.reachable(Instant::now(), MEMBER_UNREACHABLE_AFTER);
        self.metrics.set_reachable(&self.cluster, up);
        self.report_status(ctx);
        // Coordinators judge reachability with their own thresholds, reading the member's last
        // answer from its contact clock when they plan: only a change of what every
        // federation's view shares is reported to all of them.
        self.touched_all_if_changed(ctx);
    }

    /// Sends one probe, asking what [`probe_asks`] says.
    pub(super) fn probe(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        let asks = probe_asks(self.identity.is_some(), self.keeps_ordinals, self.cache.serves_advanced, self.probes);
        let ask_policies = self.serves_policies.is_none();
        self.probes += 1;
        self.metrics.api_request(&self.cluster, "get");
        self.probing = true;
        let call = async move {
            let version = client.apiserver_version().await?;
            // Which cluster this is, read once per watcher, before anything else is asked.
            let identity = if asks.identity { Some(read_identity(&client).await?) } else { None };
            // Whether the member keeps `.spec.ordinals`, asked once with a dry run that
            // stores nothing: a member that drops it never gets a slice.
            let keeps = if asks.ordinals { Some(probe_ordinals(&client).await?) } else { None };
            let advanced = if asks.advanced { Some(serves_advanced(&client).await?) } else { None };
            // Whether the member's own guards can exist there, asked once: discovery of
            // admissionregistration.k8s.io/v1 (served from Kubernetes 1.30).
            let policies = if ask_policies { Some(serves_admission_policies(&client).await?) } else { None };
            Ok::<Learnt, kube::Error>(Learnt { version, identity, keeps, advanced, policies })
        };
        ctx.spawn(async move { tokio::time::timeout(PROBE_TIMEOUT, call).await }.into_actor(self).map(
            |res, act, ctx| {
                act.probing = false;
                match res {
                    Ok(Ok(learnt)) => act.learnt(learnt, ctx),
                    Ok(Err(e)) => act.contact_failed(&e),
                    Err(_) => act
                        .health
                        .failed(Failure::Timeout, format!("no answer to a probe within {}s", PROBE_TIMEOUT.as_secs())),
                }
                act.probed(ctx);
            },
        ));
    }

    /// A probe answered.
    fn learnt(&mut self, Learnt { version, identity, keeps, advanced, policies }: Learnt, ctx: &mut Context<Self>) {
        self.contact_ok();
        self.server_minor = minor_of(&version.minor);
        if let Some(served) = policies {
            if !served {
                // Nothing to read back where nothing is served (a downgraded member).
                self.installed = None;
            } else if self.serves_policies != Some(true) {
                // Newly served (the first answer, or an upgrade): read back at once.
                (self.read_back_at, self.read_back_failures) = (None, 0);
            }
            self.serves_policies = policies;
        } else if upgraded(self.server_version.as_deref(), &version.git_version) {
            // An upgraded (or downgraded) member may serve the policies now: asked again.
            self.serves_policies = None;
        }
        self.server_version = Some(version.git_version);
        if let Some(identity) = identity {
            self.identified(identity, ctx);
        }
        if keeps.is_some() {
            self.keeps_ordinals = keeps;
        }
        if let Some(served) = advanced {
            self.advanced_discovered(served, ctx);
        }
        // Served policies are read back at once, so that they are reported with their discovery.
        self.read_back_if_due(ctx);
    }

    /// After each probe: the first one without an answer is told (members ranked after this one
    /// stop waiting for it), and a change of reachability is said once, counted and reported.
    fn probed(&mut self, ctx: &mut Context<Self>) {
        if self.identity.is_none() && !self.told_silent {
            self.told_silent = true;
            if let Some(to) = &self.identities {
                to.do_send(Identified { cluster: self.cluster.clone(), id: None, answered: false });
            }
        }
        let is_up = self.health.reachable(Instant::now(), MEMBER_UNREACHABLE_AFTER);
        let Some(change) = reachability_change(self.last_up.replace(is_up), is_up) else { return };
        let (_, reason, message) = self.health.condition(Instant::now(), MEMBER_UNREACHABLE_AFTER);
        match change {
            Reachability::First => {}
            Reachability::Answers => tracing::info!(cluster = %self.cluster, "member answers again"),
            Reachability::Unreachable => {
                tracing::warn!(cluster = %self.cluster, reason, message = %message, "member unreachable")
            }
        }
        self.metrics.set_reachable(&self.cluster, is_up);
        self.report_status(ctx);
        self.touched_all(ctx);
    }

    /// Notes the member's identity and tells it to the supervisor (or admits itself without
    /// one). An unreadable identity is said once, as a warning: the member is used without it.
    fn identified(&mut self, identity: Result<String, String>, ctx: &mut Context<Self>) {
        let id = match identity {
            Ok(uid) => Some(uid),
            Err(why) => {
                tracing::warn!(
                    cluster = %self.cluster, reason = %why,
                    "cannot read the member's cluster identity (the uid of its kube-system Namespace); \
                     it is used without one, so a second MemberCluster reaching the same cluster cannot be told"
                );
                None
            }
        };
        self.identity = Some(id.clone());
        match &self.identities {
            Some(to) => to.do_send(Identified { cluster: self.cluster.clone(), id, answered: true }),
            None => self.admission = Ok(()),
        }
        self.report_status(ctx);
    }
}

/// Asks a member's discovery whether it serves OpenKruise's `statefulsets` in
/// `apps.kruise.io/v1beta1` (see [`advanced_failure_answers`]).
async fn serves_advanced(client: &Client) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(&format!("{KRUISE_GROUP}/{KRUISE_VERSION}")).await {
        Ok(list) => Ok(advanced_served(&list.resources.into_iter().map(|r| r.name).collect::<Vec<_>>())),
        Err(e) => {
            let f = CallFailure::of(&e);
            if f.code.is_some_and(|c| c != 404 && c != 403) {
                tracing::debug!(code = f.code, message = %f.message, "discovery of Advanced StatefulSets failed");
            }
            if advanced_failure_answers(&f) { Ok(false) } else { Err(e) }
        }
    }
}

/// The member's cluster id (see [`identity_of`]): `Err(why)` when the member does not show it,
/// which is an answer; other failures fail the probe.
async fn read_identity(client: &Client) -> Result<Result<String, String>, kube::Error> {
    match Api::<Namespace>::all(client.clone()).get("kube-system").await {
        Ok(ns) => Ok(identity_of(&ns)),
        Err(e) => identity_unshown(&CallFailure::of(&e)).map(Err).ok_or(e),
    }
}

/// Asks a member, with a dry-run create, whether it keeps `.spec.ordinals` (see
/// [`ordinals_kept`]). The probe carries spanset's label like every object it writes (the
/// member's guard, `spanset-member-scope`, admits nothing else from spanset's identity, dry
/// runs included).
async fn probe_ordinals(client: &Client) -> Result<bool, kube::Error> {
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let probe: StatefulSet = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "spanset-ordinals-probe",
            "labels": {MANAGED_BY: MANAGER, FEDERATION: "spanset-ordinals-probe"}},
        "spec": {"replicas": 0, "ordinals": {"start": 1}, "serviceName": "spanset-ordinals-probe",
            "selector": {"matchLabels": {"spanset.dev/probe": "ordinals"}},
            "template": {"metadata": {"labels": {"spanset.dev/probe": "ordinals"}},
                "spec": {"containers": [{"name": "probe", "image": "probe"}]}}}
    }))
    .expect("a literal object");
    let pp = PostParams { dry_run: true, field_manager: Some(FIELD_MANAGER.into()) };
    match api.create(&pp, &probe).await {
        Ok(stored) => Ok(ordinals_kept(&stored)),
        Err(e) => {
            if ordinals_probe_settled(&CallFailure::of(&e)) {
                Ok(true)
            } else {
                Err(e)
            }
        }
    }
}

/// How long from `now` until a member last heard from at `last` has been silent for `after`,
/// when that comes before the next tick (`period`); a little past it, so that the judgement
/// falls after the crossing.
fn until_crossing(last: Option<Instant>, now: Instant, after: Duration, period: Duration) -> Option<Duration> {
    let left = (last? + after).checked_duration_since(now)?;
    (left < period).then(|| left + Duration::from_millis(5))
}

#[cfg(test)]
mod crossing_tests {
    use super::*;

    #[test]
    fn a_silence_crossing_the_threshold_between_ticks_is_judged_at_the_crossing() {
        let now = Instant::now();
        let (after, period) = (Duration::from_secs(15), Duration::from_secs(2));
        // Silent for 14.5 s: the threshold comes in 0.5 s, before the next tick.
        let left = until_crossing(Some(now - Duration::from_millis(14_500)), now, after, period);
        assert_eq!(left, Some(Duration::from_millis(505)));
        // Heard from 1 s ago: the next tick comes first.
        assert_eq!(until_crossing(Some(now - Duration::from_secs(1)), now, after, period), None);
        // Already past it (the tick judges now), or never heard from (nothing to cross).
        assert_eq!(until_crossing(Some(now - Duration::from_secs(16)), now, after, period), None);
        assert_eq!(until_crossing(None, now, after, period), None);
    }
}

/// Whether a member's release changed since the last answer (not on the first one): what was
/// asked of it once, as whether it serves the admission policies, is asked again.
fn upgraded(before: Option<&str>, now: &str) -> bool {
    before.is_some_and(|b| b != now)
}

#[cfg(test)]
mod release_tests {
    use super::*;

    #[test]
    fn a_changed_release_asks_again_the_first_answer_does_not() {
        assert!(!upgraded(None, "v1.29.8"));
        assert!(!upgraded(Some("v1.29.8"), "v1.29.8"));
        assert!(upgraded(Some("v1.29.8"), "v1.30.4"));
    }
}
