//! The writes of one object besides the StatefulSet: the release of a gated pod, the deletes of
//! pods left in a fenced member, spanset's PodDisruptionBudget and EndpointSlices. Each is
//! conditional on what was judged (a uid, a resourceVersion); its end puts the stored object in
//! the cache at once, so that the next reconcile decides from it before the watch event comes.

use k8s_openapi::api::{discovery::v1::EndpointSlice, policy::v1::PodDisruptionBudget};
use spanset_api::labels::TERM;

use super::{CallFailure, WriteRefusal, WriterStanding, admit::admit};
use crate::{
    actors::messages::{DeletePods, ReleasePod, WriteBudget, WriteEndpointSlice, WriteError},
    decisions::{disruption::BudgetChange, network::SliceChange},
    leadership::written_by::{self, WRITTEN_BY},
    member::{
        cache::{MemberCache, rv_of},
        objects::FederationKey,
    },
};

/// The merge patch that releases a gated pod: the uid and resourceVersion it was judged at
/// (the apiserver refuses the patch if either changed: 409 for the version, 422 for the uid),
/// the writer's term, and the pod's scheduling gates without spanset's (`null` when none is
/// left: a merge patch replaces a list whole).
pub fn release_patch(msg: &ReleasePod) -> serde_json::Value {
    let gates: serde_json::Value = if msg.remaining.is_empty() {
        serde_json::Value::Null
    } else {
        msg.remaining.iter().map(|g| serde_json::json!({"name": g})).collect()
    };
    serde_json::json!({
        "metadata": {
            "uid": msg.uid,
            "resourceVersion": msg.rv.to_string(),
            "annotations": {TERM: msg.term.to_string(), WRITTEN_BY: written_by::version()},
        },
        "spec": {"schedulingGates": gates},
    })
}

/// A merge patch of one pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodPatch {
    /// The pod's name.
    pub name: String,
    /// The patch.
    pub patch: serde_json::Value,
}

/// The release of a gated pod: one conditional patch, or the gate's refusal.
pub fn plan_release(standing: &WriterStanding<'_>, msg: &ReleasePod) -> Result<PodPatch, WriteRefusal> {
    admit(standing, msg.term)?;
    Ok(PodPatch { name: format!("{}-{}", msg.key.name, msg.ordinal), patch: release_patch(msg) })
}

/// The deletes of pods left in a fenced member: one per pod, each conditional on its uid.
pub fn plan_pod_deletes(
    standing: &WriterStanding<'_>,
    msg: &DeletePods,
) -> Result<Vec<(String, String)>, WriteRefusal> {
    admit(standing, msg.term)?;
    Ok(msg.pods.clone())
}

/// One call of a budget write.
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetCall {
    /// Create it.
    Create(PodDisruptionBudget),
    /// Replace it, conditional on the version carried (`None`: none seen, unconditional).
    Replace(PodDisruptionBudget),
    /// Delete spanset's budget of this uid.
    Delete {
        /// The precondition.
        uid: String,
    },
}

impl BudgetCall {
    /// The request's verb, for the request metrics.
    pub fn verb(&self) -> &'static str {
        match self {
            BudgetCall::Create(_) => "create",
            BudgetCall::Replace(_) => "update",
            BudgetCall::Delete { .. } => "delete",
        }
    }
}

/// A budget write: a replace is conditional on the newest version this watcher has seen (the
/// member's disruption controller changes the status with every eviction, which spanset does
/// not report); a 409 plans again.
pub fn plan_budget_write(
    standing: &WriterStanding<'_>,
    cache: &MemberCache,
    msg: WriteBudget,
) -> Result<BudgetCall, WriteRefusal> {
    admit(standing, msg.term)?;
    Ok(match msg.change {
        BudgetChange::Create(pdb) => BudgetCall::Create(pdb),
        BudgetChange::Replace(mut pdb) => {
            let seen = cache.federations.get(&msg.key).and_then(|f| f.budget.as_ref()).map(|b| b.rv);
            pdb.metadata.resource_version = seen.map(|rv| rv.to_string());
            BudgetCall::Replace(pdb)
        }
        BudgetChange::Delete { uid } => BudgetCall::Delete { uid },
    })
}

/// The end of a budget write: the cache change is made, and this is the reply (the stored
/// object's resourceVersion, 0 for a delete). `creating_in`: the call was a create of a budget
/// in that namespace.
pub fn settle_budget_write(
    cache: &mut MemberCache,
    cluster: &str,
    key: &FederationKey,
    creating_in: Option<&str>,
    end: Result<Option<&PodDisruptionBudget>, &CallFailure>,
) -> Result<u64, WriteError> {
    match end {
        Ok(Some(stored)) => {
            cache.budget_applied(stored);
            Ok(rv_of(stored.metadata.resource_version.as_deref()))
        }
        Ok(None) => {
            cache.federation_mut(key).budget = None;
            Ok(0)
        }
        // Not spanset's (its watch sees only labelled budgets): left alone, said.
        Err(f) if creating_in.is_some() && f.is(409) => Err(WriteError::Refused {
            cluster: cluster.to_string(),
            code: 422,
            message: format!(
                "a PodDisruptionBudget {}/{} that is not spanset's (no spanset.dev/federation label) is in the \
                 way of the federation's budget (spec.disruption); remove it",
                creating_in.unwrap_or_default(),
                key.name
            ),
        }),
        Err(f) => Err(f.reply(cluster)),
    }
}

/// One call of an EndpointSlice write.
#[derive(Debug, Clone, PartialEq)]
pub enum SliceCall {
    /// Create it.
    Create(Box<EndpointSlice>),
    /// Replace it, conditional on the version its watch saw last (carried).
    Replace(Box<EndpointSlice>),
    /// Delete spanset's slice of this uid.
    Delete {
        /// The precondition.
        uid: String,
    },
}

impl SliceCall {
    /// The request's verb, for the request metrics.
    pub fn verb(&self) -> &'static str {
        match self {
            SliceCall::Create(_) => "create",
            SliceCall::Replace(_) => "update",
            SliceCall::Delete { .. } => "delete",
        }
    }
}

/// An EndpointSlice write: a replace carries the version the coordinator planned on.
pub fn plan_slice_write(standing: &WriterStanding<'_>, msg: WriteEndpointSlice) -> Result<SliceCall, WriteRefusal> {
    admit(standing, msg.term)?;
    Ok(match msg.change {
        SliceChange::Create(slice) => SliceCall::Create(slice),
        SliceChange::Replace { mut slice, rv } => {
            slice.metadata.resource_version = Some(rv.to_string());
            SliceCall::Replace(slice)
        }
        SliceChange::Delete { uid } => SliceCall::Delete { uid },
    })
}

/// The end of an EndpointSlice write named `name`: the cache change is made; the reply.
pub fn settle_slice_write(
    cache: &mut MemberCache,
    cluster: &str,
    key: &FederationKey,
    name: &str,
    end: Result<Option<&EndpointSlice>, &CallFailure>,
) -> Result<u64, WriteError> {
    match end {
        Ok(Some(stored)) => {
            cache.slice_applied(stored);
            Ok(rv_of(stored.metadata.resource_version.as_deref()))
        }
        Ok(None) => {
            cache.federation_mut(key).published.remove(name);
            Ok(0)
        }
        Err(f) => Err(f.reply(cluster)),
    }
}

/// The reply to a failed [`crate::actors::messages::EnsureSupporting`]: the field that
/// failed heads the member's words, for the coordinator's condition.
pub fn supporting_reply(cluster: &str, field: &str, failure: &CallFailure) -> WriteError {
    match failure.reply(cluster) {
        WriteError::Refused { cluster, code, message } => {
            WriteError::Refused { cluster, code, message: format!("{field}: {message}") }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        actors::watcher::decide::{admit::tests::standing, answer::tests::answered},
        member::endpoints::{SLICE_MANAGED_BY, SLICE_MANAGER},
    };
    use spanset_api::labels::FEDERATION;

    fn key() -> FederationKey {
        FederationKey { namespace: "db".into(), name: "redis".into() }
    }

    fn release(remaining: Vec<String>) -> ReleasePod {
        ReleasePod { key: key(), ordinal: 3, uid: "u-3".into(), rv: 42, remaining, term: 9 }
    }

    fn budget(rv: u64) -> PodDisruptionBudget {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "redis", "namespace": "db", "uid": "b-1", "resourceVersion": rv.to_string(),
                "labels": {FEDERATION: "redis"}},
            "spec": {"maxUnavailable": 1},
        }))
        .expect("a budget")
    }

    #[test]
    fn a_release_removes_only_spansets_gate_stamps_the_term_and_is_conditional() {
        assert_eq!(
            release_patch(&release(vec![])),
            serde_json::json!({
                "metadata": {"uid": "u-3", "resourceVersion": "42", "annotations": {TERM: "9", WRITTEN_BY: written_by::version()}},
                "spec": {"schedulingGates": null},
            })
        );
        assert_eq!(
            release_patch(&release(vec!["example.com/users-own".into()]))["spec"]["schedulingGates"],
            serde_json::json!([{"name": "example.com/users-own"}])
        );
    }

    #[test]
    fn a_release_names_the_pod_of_the_ordinal_and_carries_the_uid_it_was_judged_at() {
        // A pod recreated since (another uid) fails the patch's precondition: it stays gated.
        let plan = plan_release(&standing(Some(9), 9), &release(vec![])).expect("allowed");
        assert_eq!(plan.name, "redis-3");
        assert_eq!(plan.patch["metadata"]["uid"], "u-3");
        assert_eq!(plan_release(&standing(Some(10), 9), &release(vec![])), Err(WriteRefusal::NotLeading));
    }

    #[test]
    fn pods_in_a_fenced_member_are_deleted_only_in_the_writer_s_term() {
        let msg = DeletePods {
            namespace: "db".into(),
            pods: vec![("redis-0".into(), "u-0".into())],
            key: FederationKey { namespace: "db".into(), name: "redis".into() },
            term: 2,
        };
        assert_eq!(plan_pod_deletes(&standing(Some(2), 2), &msg), Ok(vec![("redis-0".into(), "u-0".into())]));
        assert_eq!(plan_pod_deletes(&standing(Some(2), 3), &msg), Err(WriteRefusal::Superseded { newest: 3 }));
    }

    #[test]
    fn a_budget_replace_is_conditional_on_the_version_seen_last() {
        let mut cache = MemberCache::default();
        cache.budget_applied(&budget(12));
        let msg = WriteBudget { key: key(), change: BudgetChange::Replace(budget(0)), term: 1 };
        let BudgetCall::Replace(pdb) = plan_budget_write(&standing(Some(1), 0), &cache, msg).expect("allowed") else {
            panic!("a replace")
        };
        assert_eq!(pdb.metadata.resource_version.as_deref(), Some("12"));
    }

    #[test]
    fn a_budget_create_that_meets_a_foreign_one_is_refused_naming_it() {
        let mut cache = MemberCache::default();
        let r = settle_budget_write(&mut cache, "east", &key(), Some("db"), Err(&answered(409, "exists")));
        assert!(matches!(&r, Err(WriteError::Refused { code: 422, message, .. }) if message.contains("db/redis")));
        let r = settle_budget_write(&mut cache, "east", &key(), None, Err(&answered(409, "changed")));
        assert_eq!(r, Err(WriteError::Conflict), "a replace that meets a newer version plans again");
    }

    #[test]
    fn a_budget_written_is_cached_at_once_and_a_deleted_one_forgotten() {
        let mut cache = MemberCache::default();
        assert_eq!(settle_budget_write(&mut cache, "east", &key(), Some("db"), Ok(Some(&budget(15)))), Ok(15));
        assert_eq!(cache.federations[&key()].budget.as_ref().map(|b| b.rv), Some(15));
        assert_eq!(settle_budget_write(&mut cache, "east", &key(), None, Ok(None)), Ok(0));
        assert!(cache.federations[&key()].budget.is_none());
    }

    #[test]
    fn a_slice_replace_carries_the_version_planned_on() {
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "redis-east"}, "addressType": "IPv4", "endpoints": []
        }))
        .expect("a slice");
        let msg = WriteEndpointSlice {
            key: key(),
            name: "redis-east".into(),
            change: SliceChange::Replace { slice: Box::new(slice), rv: 31 },
            term: 1,
        };
        let SliceCall::Replace(s) = plan_slice_write(&standing(Some(1), 0), msg).expect("allowed") else {
            panic!("a replace")
        };
        assert_eq!(s.metadata.resource_version.as_deref(), Some("31"));
    }

    #[test]
    fn a_slice_written_is_cached_at_once_and_a_deleted_one_forgotten() {
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "redis-east", "namespace": "db", "uid": "e-1", "resourceVersion": "40",
                "labels": {FEDERATION: "redis", SLICE_MANAGED_BY: SLICE_MANAGER}},
            "addressType": "IPv4", "endpoints": []
        }))
        .expect("a slice");
        let mut cache = MemberCache::default();
        assert_eq!(settle_slice_write(&mut cache, "east", &key(), "redis-east", Ok(Some(&slice))), Ok(40));
        assert!(cache.federations[&key()].published.contains_key("redis-east"));
        assert_eq!(settle_slice_write(&mut cache, "east", &key(), "redis-east", Ok(None)), Ok(0));
        assert!(cache.federations[&key()].published.is_empty());
        assert_eq!(
            settle_slice_write(&mut cache, "east", &key(), "redis-east", Err(&answered(409, ""))),
            Err(WriteError::Conflict)
        );
    }

    #[test]
    fn a_supporting_refusal_is_headed_by_its_field() {
        assert_eq!(
            supporting_reply("east", "spec.carry[0]", &answered(422, "too big")),
            WriteError::Refused { cluster: "east".into(), code: 422, message: "spec.carry[0]: too big".into() }
        );
        assert_eq!(supporting_reply("east", "x", &answered(409, "")), WriteError::Conflict);
    }
}
