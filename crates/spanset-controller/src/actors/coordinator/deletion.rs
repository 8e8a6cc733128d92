//! A deleted federation's teardown. Every member that answers is torn down (shared objects
//! released, see [`sharing`]); the finalizer goes once
//! each of them is clean. A member that does not answer holds the deletion only while it is
//! unfenced and may still run the federation's pods: the federation then says so (`Blocked`,
//! naming the member and the two ways on: it answers again, or an operator fences it). A
//! fenced member, and a silent one known to run nothing of it, gets a record of what the
//! federation may leave there (its MemberCluster's `status.leftovers`), written before the
//! finalizer goes and swept when the member answers (see [`crate::host::leftovers`]);
//! a fenced member is never torn down by the deletion itself, even when it answers, since a
//! returning fenced member is always shrunk first and its pods deleted before anything else.
//! While the deletion lasts, `Ready`, `Progressing` and `Updating` say it is being deleted,
//! not how a rollout stands.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use actix::prelude::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams},
};
use spanset_api::{FederatedStatefulSet, labels::FINALIZER};

use super::{MEMBER_CALL_TIMEOUT, RoundOutcome as Outcome, call_failed, write_status};
use crate::{
    actors::{
        messages::DeleteFederation,
        watcher::{ClusterWatcher, decide::teardown::Removal},
    },
    decisions::{
        reconcile::{Decision, MemberInput},
        status::{Verdict, conditions, types},
    },
    host::leftovers,
    member::{objects::FederationKey, sharing},
};

/// One member as the deletion judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberState {
    /// Its name.
    pub name: String,
    /// `spec.fenced`.
    pub fenced: bool,
    /// It has a watcher and answered within `unreachableAfterSeconds`.
    pub answering: bool,
    /// It may run the federation's pods: placed, holding a slice in the status, or seen with
    /// its StatefulSet or pods.
    pub may_run: bool,
    /// The ordinals it was last seen to hold: its StatefulSet's slice and its pods.
    pub held: spanset_plan::Ordinals,
}

/// The members of a deleted federation as the deletion judges them, from the coordinator's
/// inputs at `now` (`grace`: `unreachableAfterSeconds`).
pub fn states(
    fsts: &FederatedStatefulSet,
    members: &BTreeMap<String, MemberInput>,
    now: Instant,
    grace: Duration,
) -> Vec<MemberState> {
    let placed = |n: &str| fsts.spec.placement.clusters.iter().any(|c| c.name == n);
    let sliced = |n: &str| fsts.status.as_ref().is_some_and(|s| s.slices.iter().any(|s| s.cluster == n));
    members
        .iter()
        .filter(|(_, m)| m.duplicate.is_none())
        .map(|(name, m)| {
            let view = m.view.as_ref();
            let answering = m.unusable.is_none()
                && view.is_some_and(|v| {
                    v.synced && v.last_contact.is_some_and(|t| now.saturating_duration_since(t) < grace)
                });
            let seen = view.is_some_and(|v| v.federation.sts.is_some() || !v.federation.pods.is_empty());
            let mut held: spanset_plan::Ordinals =
                view.map(|v| v.federation.pods.keys().copied().collect()).unwrap_or_default();
            if let Some(sts) = view.and_then(|v| v.federation.sts.as_ref()) {
                held.extend(sts.slice.ordinals());
            }
            MemberState {
                name: name.clone(),
                fenced: m.fenced,
                answering,
                may_run: placed(name) || sliced(name) || seen,
                held,
            }
        })
        .collect()
}

/// What the deletion does with each member this round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Torn down now (they answer, unfenced, and are not known clean yet).
    pub ask: Vec<String>,
    /// Recorded as leftovers when the finalizer goes: fenced, or silent and known to run
    /// nothing of the federation.
    pub record: Vec<String>,
    /// Silent, unfenced, and may run the federation's pods: the deletion waits for them.
    pub wait: Vec<String>,
}

/// The plan of this round; `cleaned`: members whose teardown answered clean in this process.
pub fn plan(members: &[MemberState], cleaned: &BTreeSet<String>) -> Plan {
    let mut out = Plan::default();
    for m in members.iter().filter(|m| !cleaned.contains(&m.name)) {
        let to = match (m.fenced, m.answering, m.may_run) {
            (true, _, _) => &mut out.record,
            (false, true, _) => &mut out.ask,
            (false, false, true) => &mut out.wait,
            (false, false, false) => &mut out.record,
        };
        to.push(m.name.clone());
    }
    out
}

/// A member's answer to its teardown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Its StatefulSets and pods are gone.
    Clean,
    /// Deletes sent; pods are still terminating.
    Terminating,
    /// The teardown failed there: why.
    Failed(String),
}

/// The conditions of a federation being deleted (replacing `Ready`, `Progressing`, `Updating`
/// and `Blocked`): what the deletion waits for, naming the members, and for a silent member
/// what lets it go on.
pub fn verdicts(name: &str, plan: &Plan, answers: &BTreeMap<String, Answer>) -> Vec<Verdict> {
    let busy: Vec<String> = answers
        .iter()
        .filter_map(|(m, a)| match a {
            Answer::Clean => None,
            Answer::Terminating => Some(format!("{m} (pods terminating)")),
            Answer::Failed(why) => Some(format!("{m} ({why})")),
        })
        .collect();
    let mut waits = Vec::new();
    if !busy.is_empty() {
        waits.push(format!("removing its objects from {}", busy.join(", ")));
    }
    if !plan.wait.is_empty() {
        waits.push(format!("{} not answering", plan.wait.join(", ")));
    }
    let message = if waits.is_empty() {
        "being deleted: every member that answers is clean".to_string()
    } else {
        format!("being deleted: {}", waits.join("; "))
    };
    let blocked = if plan.wait.is_empty() {
        Verdict::no(types::BLOCKED, "Deleting", "")
    } else {
        let each: Vec<String> = plan
            .wait
            .iter()
            .map(|m| {
                format!(
                    "{m} does not answer and may still run {name}'s pods: the deletion goes on when {m} answers \
                     again, or once an operator fences it (spanset fence {m}), which declares its workloads dead; \
                     what it holds is then removed when it returns"
                )
            })
            .collect();
        Verdict::yes(types::BLOCKED, "DeletionWaitsForMember", each.join("; "))
    };
    vec![
        Verdict::no(types::READY, "Deleting", message.clone()),
        if busy.is_empty() {
            Verdict::no(types::PROGRESSING, "Deleting", message)
        } else {
            Verdict::yes(types::PROGRESSING, "Deleting", message)
        },
        Verdict::no(types::UPDATING, "Deleting", "no rollout while the federation is being deleted"),
        blocked,
    ]
}

/// `current` with the conditions of `verdicts` in place of those of their types (each keeping
/// its transition time from `previous` while its status is unchanged).
pub fn with_verdicts(
    previous: &[Condition],
    current: &[Condition],
    verdicts: &[Verdict],
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    let new = conditions(previous, verdicts, generation, now);
    let mut out: Vec<Condition> =
        current.iter().map(|c| new.iter().find(|n| n.type_ == c.type_).cloned().unwrap_or_else(|| c.clone())).collect();
    out.extend(new.into_iter().filter(|n| !current.iter().any(|c| c.type_ == n.type_)));
    out
}

/// What one deletion round needs besides the federation.
pub struct DeletionRound<'a> {
    /// The host.
    pub host: &'a Client,
    /// The round's decision (its status, with the deletion's conditions put in).
    pub decision: &'a Decision,
    /// The members' watchers.
    pub watchers: &'a BTreeMap<String, Addr<ClusterWatcher>>,
    /// The members as judged.
    pub members: &'a [MemberState],
    /// Members already clean.
    pub cleaned: &'a BTreeSet<String>,
    /// The term.
    pub term: u64,
}

/// Releases the federation's pods from their leases in every unfenced member that may run them
/// (a released Lease lets every guard run its pod on with no deadline, for good); what is not
/// released yet, one phrase per member. A member that does not answer holds the uninstall as it
/// holds a deletion: until it answers, or an operator fences it (its pods then stop when their
/// lease lapses, and stay stopped until its Lease is released by hand). A fenced member is
/// skipped: its workloads are declared dead.
async fn release_pod_leases(fsts: &FederatedStatefulSet, r: &DeletionRound<'_>) -> Vec<String> {
    let key = FederationKey::of(fsts);
    let seconds = fsts
        .spec
        .failover
        .pod_lease
        .map(|p| p.seconds)
        .max(fsts.status.as_ref().and_then(|s| s.pod_lease_seconds))
        .unwrap_or(spanset_api::MAX_POD_LEASE_SECONDS);
    let window = crate::pod_lease::send_window(crate::pod_lease::settings::settings().write_deadline);
    let mut waiting = Vec::new();
    let mut asks = Vec::new();
    for m in r.members.iter().filter(|m| !m.fenced && m.may_run) {
        let Some(w) = r.watchers.get(&m.name).filter(|_| m.answering) else {
            waiting.push(format!(
                "{} does not answer (it goes on when {} answers, or once it is fenced: spanset fence {})",
                m.name, m.name, m.name
            ));
            continue;
        };
        let msg = crate::actors::messages::ExtendPodLease {
            key: key.clone(),
            ordinals: m.held.clone(),
            known: None,
            lease_seconds: seconds,
            term: r.term,
            send_by: Instant::now() + window,
            federation_uid: fsts.uid().unwrap_or_default(),
            release: true,
        };
        let (name, w) = (m.name.clone(), w.clone());
        asks.push(async move { (name, w.send(msg).timeout(MEMBER_CALL_TIMEOUT).await) });
    }
    for (name, res) in futures::future::join_all(asks).await {
        match res {
            Ok((crate::actors::messages::LeaseWritten::Stored { .. }, _)) => {
                tracing::info!(federation = %key, cluster = %name, "pod lease released: the pods run on unguarded");
            }
            Ok((sent, why)) => waiting.push(format!(
                "{name} did not store the release ({sent:?}{})",
                why.map(|w| format!(": {w}")).unwrap_or_default()
            )),
            Err(e) => waiting.push(format!("{name}: {}", call_failed(e))),
        }
    }
    waiting
}

/// Removes the federation's member objects; records what fenced or silent members may hold
/// and drops the finalizer once every member that answers is clean and no silent one may run
/// its pods; meanwhile stores the conditions that say what it waits for. While the
/// federations' CRD is being deleted, only drops the finalizer ([`crate::host::uninstall`]).
pub async fn carry_out(fsts: &FederatedStatefulSet, r: DeletionRound<'_>, out: &mut Outcome) -> Result<(), String> {
    if !fsts.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    // An uninstall (the CRD itself is being deleted) deletes nothing in the members; the pods of
    // a pod lease are released first, or nobody would extend their leases any more and every
    // one of them would stop.
    if crate::host::uninstall::decide(r.host).await? == crate::host::uninstall::Deletion::LetGo {
        if crate::pod_lease::leased(fsts) {
            let waiting = release_pod_leases(fsts, &r).await;
            if !waiting.is_empty() {
                let mut decision = r.decision.clone();
                let previous = fsts.status.clone().unwrap_or_default();
                let now =
                    Time(jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now()));
                let message = format!(
                    "the CustomResourceDefinition is being deleted: spanset lets go of the federation once its pods are \
                        released from their pod leases (else they stop when the leases lapse, and stay stopped): {}",
                    waiting.join("; ")
                );
                let verdict = Verdict::yes(types::BLOCKED, "ReleasingPodLeases", message.clone());
                decision.status.conditions = with_verdicts(
                    &previous.conditions,
                    &decision.status.conditions,
                    &[verdict],
                    fsts.metadata.generation,
                    &now,
                );
                if let Some(stored) = write_status(r.host, fsts, &decision).await.map_err(|e| e.to_string())? {
                    out.stored = Some(stored);
                }
                return Err(message);
            }
        }
        return crate::host::uninstall::let_go(r.host, fsts).await;
    }
    let key = FederationKey::of(fsts);
    let ns = fsts.namespace().unwrap_or_default();
    let plan = plan(r.members, r.cleaned);
    let removal = Removal {
        service: fsts.spec.template.service_name.clone(),
        carried: fsts.spec.migration.carry.iter().map(|c| (c.kind.clone(), c.name.clone())).collect(),
        exported: crate::decisions::network::service_export(fsts, r.term).is_some(),
        pod_lease: fsts.spec.failover.pod_lease.is_some(),
    };
    // Who else keeps its Service and carried objects in each member: the host's federations.
    let federations = if plan.ask.is_empty() { Vec::new() } else { leftovers::federations_of(r.host, &ns).await? };
    let asks = plan.ask.iter().filter_map(|cluster| {
        let w = r.watchers.get(cluster)?.clone();
        let msg = DeleteFederation {
            key: key.clone(),
            service: removal.service.clone(),
            carried: removal.carried.clone(),
            exported: removal.exported,
            pod_lease: removal.pod_lease,
            term: r.term,
            uid: fsts.uid(),
            sharers: sharing::sharers(&federations, &key.name, cluster),
        };
        Some(async move { (cluster.clone(), w.send(msg).timeout(MEMBER_CALL_TIMEOUT).await) })
    });
    let mut answers = BTreeMap::new();
    for (cluster, res) in futures::future::join_all(asks).await {
        let answer = match res {
            Ok(Ok(true)) => Answer::Clean,
            Ok(Ok(false)) => Answer::Terminating,
            Ok(Err(e)) => Answer::Failed(e.to_string()),
            Err(e) => Answer::Failed(call_failed(e)),
        };
        if answer == Answer::Clean {
            out.cleaned.push(cluster.clone());
        }
        answers.insert(cluster, answer);
    }
    let failed = answers.values().any(|a| matches!(a, Answer::Failed(_)));
    let done = plan.wait.is_empty() && answers.values().all(|a| *a == Answer::Clean);
    if !done {
        let mut decision = r.decision.clone();
        let previous = fsts.status.clone().unwrap_or_default();
        let now = Time(jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now()));
        decision.status.conditions = with_verdicts(
            &previous.conditions,
            &decision.status.conditions,
            &verdicts(&key.name, &plan, &answers),
            fsts.metadata.generation,
            &now,
        );
        if let Some(stored) = write_status(r.host, fsts, &decision).await.map_err(|e| e.to_string())? {
            out.stored = Some(stored);
        }
        if failed {
            // Tried again after the pause that follows a failure; terminating pods and a
            // silent member's return or fence are reported, and plan again by themselves.
            return Err(format!("deleting: {}", verdicts(&key.name, &plan, &answers)[0].message));
        }
        return Ok(());
    }
    let entry = leftovers::entry(fsts, &removal, jiff::Timestamp::now());
    for member in &plan.record {
        leftovers::record(r.host, member, &entry).await?;
    }
    if !plan.record.is_empty() {
        tracing::warn!(
            federation = %key, members = %plan.record.join(","),
            "recorded what the federation may leave in members that are fenced or silent; removed when they answer again"
        );
    }
    let api: Api<FederatedStatefulSet> = Api::namespaced(r.host.clone(), &ns);
    let finalizers: Vec<String> = fsts.finalizers().iter().filter(|f| *f != FINALIZER).cloned().collect();
    let patch = serde_json::json!({"metadata": {"finalizers": finalizers, "resourceVersion": fsts.resource_version()}});
    api.patch(&fsts.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|e| e.to_string())?;
    tracing::info!(federation = %key, "member objects removed; finalizer released");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, fenced: bool, answering: bool, may_run: bool) -> MemberState {
        MemberState { name: name.into(), fenced, answering, may_run, held: Default::default() }
    }

    #[test]
    fn a_fenced_member_is_recorded_and_an_unfenced_silent_one_that_may_run_pods_holds_the_deletion() {
        let members = [
            member("east", false, true, true),
            member("west", false, true, true),
            member("central", true, false, true),
            member("north", false, false, true),
            member("south", false, false, false),
            member("returned", true, true, true),
        ];
        let p = plan(&members, &BTreeSet::new());
        assert_eq!(p.ask, ["east", "west"]);
        assert_eq!(p.record, ["central", "south", "returned"], "a fenced member is never torn down directly");
        assert_eq!(p.wait, ["north"]);
        let cleaned: BTreeSet<String> = ["east".to_string()].into();
        assert_eq!(plan(&members, &cleaned).ask, ["west"], "a member found clean is not asked again");
    }

    #[test]
    fn a_waiting_deletion_names_the_member_and_both_ways_on_and_no_rollout() {
        let p = Plan { wait: vec!["central".into()], ..Default::default() };
        let answers: BTreeMap<String, Answer> = [("east".to_string(), Answer::Clean)].into();
        let v = verdicts("redis", &p, &answers);
        let of = |t: &str| v.iter().find(|v| v.type_ == t).expect("a verdict").clone();
        let blocked = of(types::BLOCKED);
        assert!(blocked.status && blocked.reason == "DeletionWaitsForMember");
        assert!(blocked.message.contains("central does not answer") && blocked.message.contains("answers again"));
        assert!(blocked.message.contains("spanset fence central"), "{}", blocked.message);
        for t in [types::READY, types::PROGRESSING] {
            let c = of(t);
            assert!(!c.status && c.reason == "Deleting" && c.message.contains("central not answering"), "{c:?}");
        }
        let terminating: BTreeMap<String, Answer> = [("west".to_string(), Answer::Terminating)].into();
        let v = verdicts("redis", &Plan::default(), &terminating);
        assert!(v[1].status && v[1].message.contains("west (pods terminating)"), "{:?}", v[1]);
        assert!(!v[3].status, "nothing blocks while every member answers");
    }

    #[test]
    fn the_deletion_s_conditions_replace_the_rollout_s_and_keep_the_others() {
        let t0 = Time(jiff::Timestamp::from_second(1_000).unwrap());
        let t1 = Time(jiff::Timestamp::from_second(2_000).unwrap());
        let current = conditions(
            &[],
            &[
                Verdict::no(types::READY, "GateHeld", "redis-4 waits for redis-2 to be Ready"),
                Verdict::yes(types::CLUSTER_UNREACHABLE, "Unreachable", "not answering: central"),
            ],
            Some(1),
            &t0,
        );
        let out =
            with_verdicts(&current, &current, &verdicts("redis", &Plan::default(), &BTreeMap::new()), Some(1), &t1);
        let ready = out.iter().find(|c| c.type_ == types::READY).unwrap();
        assert_eq!((ready.reason.as_str(), &ready.last_transition_time), ("Deleting", &t0));
        assert!(out.iter().any(|c| c.type_ == types::CLUSTER_UNREACHABLE && c.status == "True"));
        assert!(out.iter().any(|c| c.type_ == types::BLOCKED));
        assert!(!out.iter().any(|c| c.message.contains("waits for redis-2")));
    }
}
