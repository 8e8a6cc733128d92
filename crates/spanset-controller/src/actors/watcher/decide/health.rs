//! How the watcher reads its member's health: what a probe asks, what its answers mean, what a
//! failed watch says, when the member's reachability changed, and what the MemberCluster's
//! status reports. Times come in as values; nothing here reads a clock.

use std::time::Duration;

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Namespace};
use kube::runtime::watcher;

use super::CallFailure;
use crate::member::{
    health::Failure,
    protections::{GuardFacts, guards},
};

/// How often a member that does not serve Advanced StatefulSets is asked again (OpenKruise
/// may be installed later), in probes.
pub const ADVANCED_RECHECK_PROBES: u64 = 15;

/// What one probe asks besides the server version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeAsks {
    /// The member's cluster identity (once per watcher, before anything else is asked).
    pub identity: bool,
    /// Whether it keeps `.spec.ordinals` (once, with a dry run that stores nothing).
    pub ordinals: bool,
    /// Whether it serves Advanced StatefulSets (until it does; again every
    /// [`ADVANCED_RECHECK_PROBES`] probes while it does not).
    pub advanced: bool,
}

/// What probe number `probes` (from 0) asks.
pub fn probe_asks(
    identity_known: bool,
    keeps_ordinals: Option<bool>,
    serves_advanced: Option<bool>,
    probes: u64,
) -> ProbeAsks {
    let advanced = match serves_advanced {
        None => true,
        Some(true) => false,
        Some(false) => probes.is_multiple_of(ADVANCED_RECHECK_PROBES),
    };
    ProbeAsks { identity: !identity_known, ordinals: keeps_ordinals.is_none(), advanced }
}

/// Whether the member's own guards are read back now: while it serves them, none is in flight,
/// and the latest started at least `period` ago, or never. After `failures` failed read-backs
/// in a row the next comes sooner, one `probe` period doubling up to `period`: a blip (one
/// server error, one slow answer) is short, and a member that keeps failing is asked no more
/// often than an answering one.
pub fn read_back_due(
    serves: Option<bool>,
    reading: bool,
    since_latest: Option<Duration>,
    failures: u32,
    period: Duration,
    probe: Duration,
) -> bool {
    if serves != Some(true) || reading {
        return false;
    }
    let wait = match failures {
        0 => period,
        n => probe.saturating_mul(1 << (n - 1).min(16)).min(period),
    };
    since_latest.is_none_or(|since| since >= wait)
}

/// The member's identity from its `kube-system` Namespace (the uid, KEP-2149's cluster id), or
/// why it shows none.
pub fn identity_of(ns: &Namespace) -> Result<String, String> {
    ns.metadata.uid.clone().filter(|u| !u.is_empty()).ok_or_else(|| "kube-system has no uid".into())
}

/// A failed read of the identity that is an answer all the same: the member does not show it
/// (403 or 404), and says why. `None`: the read failed (asked again at the next probe).
pub fn identity_unshown(f: &CallFailure) -> Option<String> {
    (f.is(403) || f.is(404))
        .then(|| format!("get namespaces/kube-system answered {}: {}", f.code.unwrap_or_default(), f.message))
}

/// Whether the dry-run create of the ordinals probe, as stored, shows that the member keeps
/// `.spec.ordinals` (the probe asks for start 1).
pub fn ordinals_kept(stored: &StatefulSet) -> bool {
    stored.spec.as_ref().and_then(|s| s.ordinals.as_ref()).and_then(|o| o.start) == Some(1)
}

/// A failed ordinals probe that asks no further (counted as kept): the probe's name is taken
/// (409) or the dry run refused (422, 403). Anything else fails the probe.
pub fn ordinals_probe_settled(f: &CallFailure) -> bool {
    f.is(409) || f.is(422) || f.is(403)
}

/// Whether discovery of `apps.kruise.io/v1beta1` lists OpenKruise's `statefulsets`.
pub fn advanced_served(resources: &[String]) -> bool {
    resources.iter().any(|r| r == "statefulsets")
}

/// A failed discovery of Advanced StatefulSets that is an answer all the same (not served): any
/// answer of the API server, an absent group (404), a refused (403) and a failing one (5xx):
/// an optional group failing is not the member failing, and it is asked again later. Only no
/// answer at all fails the probe.
pub fn advanced_failure_answers(f: &CallFailure) -> bool {
    f.code.is_some()
}

/// The words of a failed call for the `Reachable` condition: rejected credentials name where
/// they come from (never the credentials themselves).
pub fn failure_message(failure: &CallFailure, credentials: &str) -> String {
    match failure.code {
        Some(401) => format!("the member rejects the credentials of {credentials}: {}", failure.message),
        Some(_) => failure.message.clone(),
        None => failure.text.clone(),
    }
}

/// What a failed watch says of the member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchFailure {
    /// Why, as the `Reachable` condition's reason.
    pub cause: Failure,
    /// The message noted with it.
    pub message: String,
    /// The member denies this watch, in its own words (they name the missing permission).
    pub denied: Option<String>,
}

/// Reads a failed watch.
pub fn watch_failure(e: &watcher::Error, credentials: &str) -> WatchFailure {
    let status = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s))
        | watcher::Error::WatchError(s) => Some(s.message.clone()),
        _ => None,
    };
    let cause = match e {
        watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => {
            Failure::of(e)
        }
        watcher::Error::WatchError(s) => Failure::of(&kube::Error::Api(s.clone())),
        _ => Failure::ServerError,
    };
    let words = status.unwrap_or_else(|| e.to_string());
    match cause {
        Failure::Unauthorized => WatchFailure {
            cause,
            message: format!("the member rejects the credentials of {credentials}: {words}"),
            denied: None,
        },
        Failure::Forbidden => WatchFailure { cause, message: e.to_string(), denied: Some(words) },
        _ => WatchFailure { cause, message: e.to_string(), denied: None },
    }
}

/// A change of the member's reachability, judged at each probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reachability {
    /// The first judgement: nothing to say yet.
    First,
    /// It answers again.
    Answers,
    /// It stopped answering.
    Unreachable,
}

/// Whether the member's reachability changed since the state last acted on (`previous`), not
/// since a moment ago: silence turns a member Unreachable between two probes, not during one.
pub fn reachability_change(previous: Option<bool>, up: bool) -> Option<Reachability> {
    match (previous, up) {
        (Some(p), _) if p == up => None,
        (None, _) => Some(Reachability::First),
        (Some(_), true) => Some(Reachability::Answers),
        (Some(_), false) => Some(Reachability::Unreachable),
    }
}

/// What the MemberCluster's status reports of a member (without times).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberFacts<'a> {
    /// Whether it is reachable, the condition's reason and message.
    pub condition: (bool, &'static str, String),
    /// Its cluster identity once read (`Some(None)`: it does not show one).
    pub identity: &'a Option<Option<String>>,
    /// Whether the supervisor lets it be used, or why not.
    pub admission: &'a Result<(), String>,
    /// Its version.
    pub server_version: &'a Option<String>,
    /// Whether it keeps `.spec.ordinals`.
    pub keeps_ordinals: Option<bool>,
    /// Whether it serves Advanced StatefulSets.
    pub serves_advanced: Option<bool>,
    /// What decides its guards.
    pub guards: GuardFacts,
}

/// The status facts: a member that reaches the same cluster as another one is not Reachable
/// but a `DuplicateCluster`, with the supervisor's words.
pub fn member_facts(f: &MemberFacts<'_>) -> serde_json::Value {
    let (mut up, mut reason, mut message) = f.condition.clone();
    if let (true, Some(Some(_)), Err(why)) = (up, f.identity, f.admission) {
        (up, reason, message) = (false, "DuplicateCluster", why.clone());
    }
    let reachable = serde_json::json!({
        "type": "Reachable",
        "status": if up { "True" } else { "False" },
        "reason": reason,
        "message": message,
    });
    serde_json::json!({
        "conditions": [reachable],
        "serverVersion": f.server_version,
        "keepsOrdinals": f.keeps_ordinals,
        "servesAdvancedStatefulSets": f.serves_advanced,
        "clusterID": f.identity.clone().flatten(),
        "guards": guards(&f.guards),
    })
}

/// Whether the status is written: when the facts changed, or the last contact reported is no
/// longer `fresh`.
pub fn report_due(reported: Option<&serde_json::Value>, facts: &serde_json::Value, fresh: bool) -> bool {
    reported != Some(facts) || !fresh
}

/// Whether the `Reachable` condition's status changes (its transition time is then now).
pub fn condition_turns(reported: Option<&serde_json::Value>, facts: &serde_json::Value) -> bool {
    reported.map(|r| r["conditions"][0]["status"].clone()) != Some(facts["conditions"][0]["status"].clone())
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
