//! What every stage after the refusals reads: the federation as it is planned (duplicate
//! members dropped), its desired state within the bounds, and what is derived once from them.

use std::{collections::BTreeSet, ops::Range, sync::Arc, time::Duration};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{ResourceExt, api::DynamicObject};
use spanset_api::{FederatedStatefulSet, FederatedStatefulSetStatus};
use spanset_plan as plan;
use spanset_plan::{Backend, Ordinal, Slice};

use super::{
    Inputs,
    refusals::{Accepted, Held},
    unreachable_after,
};
use crate::{
    actors::messages::MemberView,
    member::{
        cache::StsRecord,
        objects::{member_partition, pod_template, statefulset_at, template_hash},
        ungated,
    },
};

/// The reconcile's fixed facts, shared by its stages.
pub(super) struct Scope<'a> {
    /// What the reconcile decides from.
    pub inp: &'a Inputs<'a>,
    /// The federation without its duplicate members.
    pub fsts: &'a FederatedStatefulSet,
    /// The status stored before this reconcile.
    pub previous: &'a FederatedStatefulSetStatus,
    /// The desired state, within the controller's bounds on replicas.
    pub desired: &'a plan::Desired,
    /// The API of the member StatefulSets.
    pub backend: Backend,
    /// Whether any pod of the federation may hold a pod lease (`spec.failover.podLease`, or a
    /// length still in force in the status).
    pub leased: bool,
    /// The placement's members.
    pub placement: BTreeSet<&'a str>,
    /// `failover.unreachableAfterSeconds`, effective.
    pub grace: Duration,
    /// The hash of the current template.
    pub hash: String,
    /// Wall-clock now, for conditions.
    pub wall: Time,
    /// The placement's duplicate members, each with why.
    pub duplicates: &'a [String],
    /// Why `desired` holds replicas other than the spec's, if it does.
    pub replicas_held: Option<&'a Held>,
}

impl<'a> Scope<'a> {
    /// The scope of a federation that passed the refusals.
    pub fn new(
        inp: &'a Inputs<'a>,
        accepted: &'a Accepted<'a>,
        previous: &'a FederatedStatefulSetStatus,
        wall: Time,
    ) -> Self {
        let fsts: &FederatedStatefulSet = &accepted.fsts;
        Scope {
            inp,
            fsts,
            previous,
            desired: &accepted.desired,
            backend: accepted.backend,
            leased: crate::pod_lease::leased(&accepted.fsts),
            placement: fsts.spec.placement.clusters.iter().map(|c| c.name.as_str()).collect(),
            grace: unreachable_after(fsts),
            hash: template_hash(fsts),
            wall,
            duplicates: &accepted.duplicates,
            replicas_held: accepted.replicas_held.as_ref(),
        }
    }

    /// The latest report of member `c`'s watcher.
    pub fn view_of(&self, c: &str) -> Option<Arc<MemberView>> {
        self.inp.members.get(c).and_then(|m| m.view.clone())
    }

    /// The ordinals the federation runs.
    pub fn range(&self) -> Range<Ordinal> {
        self.desired.start..self.desired.start + self.desired.replicas
    }

    /// The member StatefulSet holding `slice`, stamped with the term and the rollout's cursor,
    /// written over `stored`: it keeps holding the pods made before the identity gate (see
    /// [`ungated`]). Answers whether the write must recreate the StatefulSet.
    pub fn statefulset(&self, slice: &Slice, cursor: Ordinal, stored: Option<&StsRecord>) -> (DynamicObject, bool) {
        let mut object = statefulset_at(self.fsts, slice, self.inp.term, cursor);
        let held = stored.and_then(|s| self.held(s));
        if let Some(revision) = &held {
            ungated::hold(&mut object, revision);
        }
        (object, stored.is_some_and(|s| ungated::begins(s, held.as_ref())))
    }

    /// The revision of the pods a write over `stored` holds (see [`ungated`]).
    pub fn held(&self, stored: &StsRecord) -> Option<String> {
        ungated::held_revision(self.fsts, stored, &self.hash, || pod_template(self.fsts))
    }

    /// The partition a write over `stored` holding `slice` gives the member (see
    /// [`member_partition`] and [`ungated::held_partition`]).
    pub fn partition(&self, stored: &StsRecord, slice: &Slice, cursor: Ordinal) -> Option<i32> {
        let partition = member_partition(self.fsts, slice, cursor);
        match self.held(stored) {
            Some(_) => ungated::held_partition(partition, slice.replicas),
            None => partition,
        }
    }

    /// The federation's name (its pods are `{name}-{ordinal}`).
    pub fn name(&self) -> String {
        self.fsts.name_any()
    }
}
