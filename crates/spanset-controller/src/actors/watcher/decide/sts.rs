//! A member StatefulSet write ([`WriteStatefulSet`]): which call goes first (a create, or a
//! replace conditional on the version the coordinator planned on), what follows a failed one
//! (the stand-in namespace for a dry run whose namespace is missing), and what its end changes
//! in the cache: the stored object, or, when the answer was lost, an [`UncertainWrite`] that
//! keeps anything there from counting as confirmed until the object is read again.

use kube::api::DynamicObject;
use spanset_plan::Backend;

use super::{CallFailure, WriteRefusal, WriterStanding, admit::admit};
use crate::{
    actors::messages::{WriteError, WriteStatefulSet},
    member::{
        cache::{MemberCache, StsRecord, UncertainWrite, rv_of},
        objects::FederationKey,
        workload::keeps_ordinals,
    },
};

/// One call of a StatefulSet write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StsCall {
    /// Create it in the federation's namespace.
    Create,
    /// Create it in the stand-in namespace instead: the dry run of a new federation's
    /// StatefulSet in a member without its namespace yet (creating the namespace before every
    /// member accepted the template would be a write).
    StandInCreate,
    /// Replace it, conditional on the resourceVersion the coordinator planned on.
    Replace {
        /// The precondition.
        expected_rv: u64,
    },
    /// The member refused the replace because it changes a field a StatefulSet cannot change
    /// (what an older spanset wrote lacks what this one writes there, such as the claim
    /// templates' label): delete it with its pods orphaned, conditional on the version planned
    /// on and only if it selects its pods as the new one will, then create it again. The
    /// member's StatefulSet controller adopts the running pods; none restarts.
    Recreate {
        /// The precondition of the delete.
        expected_rv: u64,
    },
    /// The dry run of [`StsCall::Recreate`]: a create of the same name, which the member
    /// answers with a conflict only once the object passed its validation and admission.
    DryRecreate,
}

/// The words a member's apiserver uses when an update changes a StatefulSet's immutable
/// fields (`ValidateStatefulSetUpdate`): `spec: Forbidden: updates to statefulset spec for
/// fields other than 'replicas', 'ordinals', 'template', … are forbidden`.
const IMMUTABLE_FIELDS: &str = "updates to statefulset spec for fields other than";

/// Whether a failure is the member refusing a change of a StatefulSet's immutable fields.
pub fn immutable_fields_refused(failure: &CallFailure) -> bool {
    failure.is(422) && failure.message.contains(IMMUTABLE_FIELDS)
}

/// What a StatefulSet write does before its first call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StsPlan {
    /// Note that this process writes the object in its term, before the write is sent (so
    /// that its own stamp, seen later, is not taken for another leader's). Not for a dry run.
    pub note_write: bool,
    /// The first call.
    pub call: StsCall,
    /// The request's verb, for the request metrics.
    pub verb: &'static str,
}

/// The first step of a StatefulSet write: refused before any call unless the gate lets it
/// through; a create without a precondition, else a conditional replace.
pub fn plan_sts_write(standing: &WriterStanding<'_>, msg: &WriteStatefulSet) -> Result<StsPlan, WriteRefusal> {
    admit(standing, msg.term)?;
    let (call, verb) = match msg.expected_rv {
        None => (StsCall::Create, "create"),
        Some(_) if msg.recreate && msg.dry_run => (StsCall::DryRecreate, "create"),
        Some(expected_rv) if msg.recreate => (StsCall::Recreate { expected_rv }, "delete"),
        Some(expected_rv) => (StsCall::Replace { expected_rv }, "update"),
    };
    Ok(StsPlan { note_write: !msg.dry_run, call, verb })
}

/// What follows a StatefulSet call that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Send this call next.
    Call(StsCall),
    /// The answer is the object sent: a stand-in of that name exists, and a 409 there comes
    /// only after validation passed. Such an echo says nothing of what the member keeps.
    Echoed,
    /// The write ends with this failure.
    Failed,
}

/// The next step after `call` failed with `failure`; `namespace_missing`: the member answered
/// that the federation's namespace does not exist.
pub fn after_sts_failure(call: StsCall, dry_run: bool, failure: &CallFailure, namespace_missing: bool) -> AfterFailure {
    match call {
        StsCall::Create if dry_run && namespace_missing => AfterFailure::Call(StsCall::StandInCreate),
        StsCall::StandInCreate | StsCall::DryRecreate if failure.is(409) => AfterFailure::Echoed,
        StsCall::Replace { .. } if dry_run && immutable_fields_refused(failure) => {
            AfterFailure::Call(StsCall::DryRecreate)
        }
        StsCall::Replace { expected_rv } if immutable_fields_refused(failure) => {
            AfterFailure::Call(StsCall::Recreate { expected_rv })
        }
        _ => AfterFailure::Failed,
    }
}

/// Why a member StatefulSet cannot be recreated over its pods, if it cannot: the stored one
/// is not the version planned on, or selects its pods otherwise than the new one (they would
/// be left orphaned, and the new one would fail to create pods of their names).
pub fn recreate_refusal(stored: &DynamicObject, new: &DynamicObject, expected_rv: u64) -> Option<String> {
    let rv = rv_of(stored.metadata.resource_version.as_deref());
    if rv != expected_rv {
        return Some(format!("changed since it was read (resourceVersion {rv}, planned on {expected_rv})"));
    }
    let (old, wanted) = (&stored.data["spec"]["selector"], &new.data["spec"]["selector"]);
    (old != wanted).then(|| {
        format!(
            "spec.selector: the member's StatefulSet selects its pods by {old}, this version by {wanted}; recreated, it would not adopt them"
        )
    })
}

/// How a StatefulSet write ended, as its handler saw it.
#[derive(Debug, Clone, Copy)]
pub enum StsEnd<'a> {
    /// The member stored (or, dry run, would store) `stored`; `echoed`: it is only the object
    /// sent back (see [`AfterFailure::Echoed`]).
    Stored {
        /// The object answered.
        stored: &'a DynamicObject,
        /// Whether it is an echo of the object sent.
        echoed: bool,
    },
    /// The last call failed.
    Failed(&'a CallFailure),
}

/// What the watcher does at the end of a StatefulSet write, besides the cache change.
#[derive(Debug, Clone, PartialEq)]
pub struct StsSettled {
    /// The member answered: contact (else the failure counts against its health).
    pub contact: bool,
    /// The answer was lost: the write may have landed or not (recorded in the cache).
    pub uncertain: bool,
    /// The member stopped serving Advanced StatefulSets (OpenKruise removed).
    pub advanced_gone: bool,
    /// What the member is now known to do with `.spec.ordinals` of this API, when that changed.
    pub keeps_ordinals: Option<bool>,
    /// The federation whose cache changed, to report.
    pub touched: Option<FederationKey>,
    /// The reply to the coordinator.
    pub reply: Result<StsRecord, WriteError>,
}

/// Settles a StatefulSet write in the cache and says the rest. `known_keeps` is what the
/// member was known to do with `.spec.ordinals` of this API before.
pub fn settle_sts_write(
    cache: &mut MemberCache,
    cluster: &str,
    msg: &WriteStatefulSet,
    known_keeps: Option<bool>,
    end: StsEnd<'_>,
) -> StsSettled {
    let nothing = StsSettled {
        contact: true,
        uncertain: false,
        advanced_gone: false,
        keeps_ordinals: None,
        touched: None,
        reply: Err(WriteError::Conflict),
    };
    let (stored, echoed) = match end {
        StsEnd::Failed(failure) => {
            // No answer, or a server error: the write may have been applied or not.
            let uncertain = !msg.dry_run && !failure.is_definite();
            if uncertain {
                cache.write_in_doubt(&msg.key, UncertainWrite { kind: msg.kind, expected_rv: msg.expected_rv });
            }
            // The member stopped serving Advanced StatefulSets: not the template's fault; the
            // member is marked, and the next report excludes it.
            let advanced_gone = msg.kind == Backend::AdvancedStatefulSet && failure.resource_missing();
            let reply = if advanced_gone {
                Err(WriteError::Unavailable {
                    cluster: cluster.to_string(),
                    message: "the member no longer serves statefulsets.apps.kruise.io/v1beta1".into(),
                })
            } else {
                Err(failure.reply(cluster))
            };
            return StsSettled { contact: failure.is_contact(), uncertain, advanced_gone, reply, ..nothing };
        }
        StsEnd::Stored { stored, echoed } => (stored, echoed),
    };
    let kept = keeps_ordinals(&msg.object, stored);
    let keeps_ordinals = (!echoed && (!kept || known_keeps.is_none())).then_some(kept);
    let Some((_, record)) = StsRecord::of(stored, msg.kind) else {
        let reply = Err(WriteError::Refused {
            cluster: cluster.to_string(),
            code: 500,
            message: "the stored object lost its federation label".into(),
        });
        return StsSettled { keeps_ordinals, reply, ..nothing };
    };
    // A dry run stored nothing: the cache keeps what the member holds.
    let touched = if msg.dry_run { None } else { cache.sts_written(stored, msg.kind) };
    StsSettled { keeps_ordinals, touched, reply: Ok(record), ..nothing }
}

/// A settling read of `key`'s StatefulSet of API `kind` came back with `found`: the cache takes
/// it, and the uncertain write is void once the object moved past its precondition (or, for a
/// create, exists). Still at the precondition, the write may land after this read: it stays
/// uncertain; the coordinator's next stamp (conditional on the same version) voids it,
/// whichever of the two lands first.
pub fn settle_uncertain(cache: &mut MemberCache, key: &FederationKey, kind: Backend, found: Option<&DynamicObject>) {
    let read_rv = found.map(|s| rv_of(s.metadata.resource_version.as_deref()));
    if let Some(sts) = found {
        cache.sts_applied(sts, kind);
    }
    if cache.federations.get(key).is_some_and(|f| f.uncertain_write.is_some_and(|u| u.settled_by(read_rv))) {
        cache.federation_mut(key).uncertain_write = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::watcher::decide::{
        admit::tests::standing,
        answer::tests::{answered, silent},
    };
    use spanset_api::labels::{FEDERATION, TERM};

    fn key() -> FederationKey {
        FederationKey { namespace: "db".into(), name: "redis".into() }
    }

    fn object(rv: u64, start: Option<i32>) -> DynamicObject {
        let mut spec = serde_json::json!({"replicas": 2, "selector": {}, "serviceName": "redis", "template": {}});
        if let Some(start) = start {
            spec["ordinals"] = serde_json::json!({"start": start});
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "redis", "namespace": "db", "uid": "s-1", "generation": 2,
                "resourceVersion": rv.to_string(), "labels": {FEDERATION: "redis"}, "annotations": {TERM: "3"}},
            "spec": spec,
        }))
        .expect("an object")
    }

    fn write(expected_rv: Option<u64>, dry_run: bool) -> WriteStatefulSet {
        WriteStatefulSet {
            key: key(),
            object: object(0, Some(2)),
            kind: Backend::StatefulSet,
            expected_rv,
            term: 3,
            dry_run,
            recreate: false,
        }
    }

    #[test]
    fn a_write_of_a_lower_term_is_refused_before_any_call() {
        assert_eq!(plan_sts_write(&standing(Some(4), 4), &write(Some(7), false)), Err(WriteRefusal::NotLeading));
    }

    #[test]
    fn a_write_is_refused_when_the_member_carries_a_newer_term() {
        assert_eq!(
            plan_sts_write(&standing(Some(3), 4), &write(Some(7), false)),
            Err(WriteRefusal::Superseded { newest: 4 })
        );
    }

    #[test]
    fn a_write_with_a_precondition_is_a_conditional_replace_noted_before_it_is_sent() {
        let plan = plan_sts_write(&standing(Some(3), 3), &write(Some(7), false)).expect("allowed");
        assert_eq!(plan, StsPlan { note_write: true, call: StsCall::Replace { expected_rv: 7 }, verb: "update" });
        let dry = plan_sts_write(&standing(Some(3), 3), &write(None, true)).expect("allowed");
        assert_eq!(dry, StsPlan { note_write: false, call: StsCall::Create, verb: "create" });
    }

    #[test]
    fn a_dry_run_create_without_its_namespace_goes_to_the_stand_in_which_may_echo() {
        let missing = answered(404, "namespaces \"db\" not found");
        assert_eq!(
            after_sts_failure(StsCall::Create, true, &missing, true),
            AfterFailure::Call(StsCall::StandInCreate)
        );
        assert_eq!(after_sts_failure(StsCall::Create, false, &missing, true), AfterFailure::Failed, "only a dry run");
        let taken = answered(409, "already exists");
        assert_eq!(after_sts_failure(StsCall::StandInCreate, true, &taken, false), AfterFailure::Echoed);
        assert_eq!(after_sts_failure(StsCall::Create, true, &taken, false), AfterFailure::Failed);
        assert_eq!(
            after_sts_failure(StsCall::StandInCreate, true, &answered(422, "invalid"), false),
            AfterFailure::Failed
        );
    }

    #[test]
    fn a_change_of_immutable_fields_recreates_the_statefulset_and_its_dry_run_creates_one_of_the_name() {
        let immutable = answered(
            422,
            "StatefulSet.apps \"redis\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        );
        let replace = StsCall::Replace { expected_rv: 7 };
        assert_eq!(
            after_sts_failure(replace, false, &immutable, false),
            AfterFailure::Call(StsCall::Recreate { expected_rv: 7 })
        );
        assert_eq!(after_sts_failure(replace, true, &immutable, false), AfterFailure::Call(StsCall::DryRecreate));
        assert_eq!(
            after_sts_failure(StsCall::DryRecreate, true, &answered(409, "already exists"), false),
            AfterFailure::Echoed
        );
        let other = answered(422, "spec.template.spec.containers[0].image: Required value");
        assert_eq!(
            after_sts_failure(replace, false, &other, false),
            AfterFailure::Failed,
            "any other refusal stays one"
        );
        assert_eq!(
            after_sts_failure(StsCall::Recreate { expected_rv: 7 }, false, &immutable, false),
            AfterFailure::Failed,
            "a recreate is tried once"
        );
    }

    #[test]
    fn a_write_asked_to_recreate_deletes_first_and_its_dry_run_creates() {
        let mut msg = write(Some(7), false);
        msg.recreate = true;
        let plan = plan_sts_write(&standing(Some(3), 3), &msg).expect("allowed");
        assert_eq!(plan.call, StsCall::Recreate { expected_rv: 7 });
        msg.dry_run = true;
        assert_eq!(plan_sts_write(&standing(Some(3), 3), &msg).expect("allowed").call, StsCall::DryRecreate);
        msg.expected_rv = None;
        assert_eq!(
            plan_sts_write(&standing(Some(3), 3), &msg).expect("allowed").call,
            StsCall::Create,
            "nothing to delete"
        );
    }

    #[test]
    fn a_statefulset_is_recreated_only_at_the_version_planned_on_and_selecting_its_pods_alike() {
        let stored = object(7, Some(2));
        let mut new = object(0, Some(2));
        assert_eq!(recreate_refusal(&stored, &new, 7), None);
        assert!(recreate_refusal(&stored, &new, 6).is_some_and(|why| why.starts_with("changed")));
        new.data["spec"]["selector"] = serde_json::json!({"matchLabels": {"app": "other"}});
        let why = recreate_refusal(&stored, &new, 7).expect("another selector");
        assert!(why.starts_with("spec.selector") && why.contains("would not adopt"), "{why}");
    }

    #[test]
    fn a_lost_answer_records_an_uncertain_write_with_its_precondition() {
        let mut cache = MemberCache::default();
        let s = settle_sts_write(&mut cache, "east", &write(Some(7), false), None, StsEnd::Failed(&silent()));
        assert!(s.uncertain && !s.contact);
        assert!(matches!(s.reply, Err(WriteError::Unavailable { .. })));
        assert_eq!(
            cache.federations[&key()].uncertain_write,
            Some(UncertainWrite { kind: Backend::StatefulSet, expected_rv: Some(7) })
        );
        let mut cache = MemberCache::default();
        settle_sts_write(&mut cache, "east", &write(Some(7), false), None, StsEnd::Failed(&answered(503, "etcd")));
        assert!(cache.federations[&key()].uncertain_write.is_some(), "a server error may have stored it too");
    }

    #[test]
    fn a_definite_no_or_a_dry_run_records_nothing_uncertain() {
        for (msg, failure) in [(write(Some(7), false), answered(409, "changed")), (write(Some(7), true), silent())] {
            let mut cache = MemberCache::default();
            let s = settle_sts_write(&mut cache, "east", &msg, None, StsEnd::Failed(&failure));
            assert!(!s.uncertain);
            assert!(cache.federations.get(&key()).is_none_or(|f| f.uncertain_write.is_none()));
        }
    }

    #[test]
    fn a_successful_conditional_write_settles_an_uncertain_one_and_is_cached() {
        let mut cache = MemberCache::default();
        cache.write_in_doubt(&key(), UncertainWrite { kind: Backend::StatefulSet, expected_rv: Some(7) });
        let stored = object(9, Some(2));
        let s = settle_sts_write(
            &mut cache,
            "east",
            &write(Some(7), false),
            Some(true),
            StsEnd::Stored { stored: &stored, echoed: false },
        );
        assert_eq!(s.reply.expect("a record").rv, 9);
        assert_eq!(s.touched, Some(key()));
        let f = &cache.federations[&key()];
        assert_eq!(f.uncertain_write, None);
        assert_eq!(f.sts.as_ref().map(|r| r.rv), Some(9), "the next reconcile decides from the stored object");
    }

    #[test]
    fn a_dry_run_answer_is_not_cached() {
        let mut cache = MemberCache::default();
        let stored = object(9, Some(2));
        let s = settle_sts_write(
            &mut cache,
            "east",
            &write(None, true),
            Some(true),
            StsEnd::Stored { stored: &stored, echoed: false },
        );
        assert!(s.reply.is_ok() && s.touched.is_none());
        assert!(cache.federations.is_empty());
    }

    #[test]
    fn a_member_that_drops_the_ordinals_is_noted_but_an_echo_proves_nothing() {
        let dropped = object(9, None);
        let mut cache = MemberCache::default();
        let s = settle_sts_write(
            &mut cache,
            "east",
            &write(None, true),
            Some(true),
            StsEnd::Stored { stored: &dropped, echoed: false },
        );
        assert_eq!(s.keeps_ordinals, Some(false));
        let s = settle_sts_write(
            &mut cache,
            "east",
            &write(None, true),
            None,
            StsEnd::Stored { stored: &dropped, echoed: true },
        );
        assert_eq!(s.keeps_ordinals, None);
        let kept = object(9, Some(2));
        let s = settle_sts_write(
            &mut cache,
            "east",
            &write(None, true),
            None,
            StsEnd::Stored { stored: &kept, echoed: false },
        );
        assert_eq!(s.keeps_ordinals, Some(true), "first learnt");
    }

    #[test]
    fn an_advanced_statefulset_write_that_finds_no_such_resource_marks_the_api_gone() {
        let mut msg = write(Some(7), false);
        msg.kind = Backend::AdvancedStatefulSet;
        let mut cache = MemberCache::default();
        let missing = answered(404, "the server could not find the requested resource");
        let s = settle_sts_write(&mut cache, "east", &msg, None, StsEnd::Failed(&missing));
        assert!(s.advanced_gone && s.contact && !s.uncertain);
        assert!(matches!(s.reply, Err(WriteError::Unavailable { message, .. }) if message.contains("kruise")));
    }

    #[test]
    fn a_settling_read_at_the_precondition_keeps_the_write_uncertain_and_one_past_it_settles_it() {
        let mut cache = MemberCache::default();
        cache.write_in_doubt(&key(), UncertainWrite { kind: Backend::StatefulSet, expected_rv: Some(7) });
        assert_eq!(cache.writes_in_doubt(), [(key(), Backend::StatefulSet)]);
        settle_uncertain(&mut cache, &key(), Backend::StatefulSet, Some(&object(7, Some(2))));
        assert!(cache.federations[&key()].uncertain_write.is_some(), "it may still land");
        assert_eq!(cache.federations[&key()].sts.as_ref().map(|s| s.rv), Some(7), "what was read is cached");
        settle_uncertain(&mut cache, &key(), Backend::StatefulSet, Some(&object(8, Some(2))));
        assert_eq!(cache.federations[&key()].uncertain_write, None);
        assert!(cache.writes_in_doubt().is_empty());
    }

    #[test]
    fn an_uncertain_create_is_settled_only_once_the_object_exists() {
        let mut cache = MemberCache::default();
        cache.write_in_doubt(&key(), UncertainWrite { kind: Backend::StatefulSet, expected_rv: None });
        settle_uncertain(&mut cache, &key(), Backend::StatefulSet, None);
        assert!(cache.federations[&key()].uncertain_write.is_some());
        settle_uncertain(&mut cache, &key(), Backend::StatefulSet, Some(&object(3, Some(2))));
        assert_eq!(cache.federations[&key()].uncertain_write, None);
    }
}
