//! The member StatefulSet write: [`decide::sts`] plans it (refused before any call unless the
//! gate lets it through; a create or a conditional replace) and settles it (the stored object
//! cached, or an uncertain write recorded); this sends the calls and notes the rest.

use actix::prelude::*;
use kube::{
    Api,
    api::{DeleteParams, DynamicObject, PostParams, Preconditions, PropagationPolicy},
};
use spanset_api::labels::FIELD_MANAGER;

use super::{
    ClusterWatcher,
    decide::{
        self, CallFailure,
        sts::{AfterFailure, StsCall, StsEnd},
    },
};
use crate::{
    actors::messages::{WriteError, WriteStatefulSet},
    member::{
        cache::StsRecord,
        supporting::{self, STAND_IN_NAMESPACE},
        workload::api_resource,
    },
    telemetry::spans,
};

/// The member's answer to a StatefulSet write, and whether it is only the object sent back.
type Answer = Result<(DynamicObject, bool), kube::Error>;

/// The answer, and whether the write deleted the stored object to create it again (so that
/// what is left uncertain is a create).
type Sent = (Answer, bool);

impl Handler<WriteStatefulSet> for ClusterWatcher {
    type Result = ResponseActFuture<Self, Result<StsRecord, WriteError>>;

    fn handle(&mut self, msg: WriteStatefulSet, _: &mut Self::Context) -> Self::Result {
        let plan = match decide::sts::plan_sts_write(&self.standing(&msg.key), &msg) {
            Ok(plan) => plan,
            Err(refusal) => return self.refused(refusal, &msg.key, msg.term),
        };
        if plan.note_write {
            self.note_write(msg.term, &msg.key);
        }
        self.metrics.api_request(&self.cluster, plan.verb);
        let span = spans::member_write(&self.cluster, &msg.key, &msg.object, msg.kind, msg.dry_run);
        let work = send(self.client.clone(), plan.call, &msg);
        let work = tracing::Instrument::instrument(work, span);
        Box::pin(work.into_actor(self).map(move |(res, recreated), act, ctx| {
            let mut msg = msg;
            if recreated {
                tracing::info!(cluster = %act.cluster, federation = %msg.key,
                    "recreated the member StatefulSet with its pods orphaned: a field it cannot change differed from what this version writes");
                // What follows the delete is a create: that is what may still land.
                msg.expected_rv = None;
            }
            act.sts_written(msg, res, ctx)
        }))
    }
}

/// Sends the write's calls, each next one as [`decide::sts::after_sts_failure`] says.
fn send(client: kube::Client, first: StsCall, msg: &WriteStatefulSet) -> impl Future<Output = Sent> + use<> {
    let (kind, dry_run, ns, name) = (msg.kind, msg.dry_run, msg.key.namespace.clone(), msg.key.name.clone());
    let object = msg.object.clone();
    async move {
        let pp = PostParams { dry_run, field_manager: Some(FIELD_MANAGER.into()) };
        let mut call = first;
        let mut recreated = false;
        loop {
            let res = match call {
                StsCall::Create => {
                    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &api_resource(kind));
                    api.create(&pp, &object).await
                }
                StsCall::StandInCreate => {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), STAND_IN_NAMESPACE, &api_resource(kind));
                    let mut moved = object.clone();
                    moved.metadata.namespace = Some(STAND_IN_NAMESPACE.into());
                    api.create(&pp, &moved).await
                }
                StsCall::Replace { expected_rv } => {
                    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &api_resource(kind));
                    let mut object = object.clone();
                    object.metadata.resource_version = Some(expected_rv.to_string());
                    api.replace(&name, &pp, &object).await
                }
                StsCall::DryRecreate => {
                    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &api_resource(kind));
                    api.create(&pp, &object).await
                }
                StsCall::Recreate { expected_rv } => {
                    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &api_resource(kind));
                    match delete_orphaning(&api, &name, &object, expected_rv).await {
                        Ok(()) => {
                            recreated = true;
                            api.create(&pp, &object).await
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            let e = match res {
                Ok(stored) => return (Ok((stored, false)), recreated),
                Err(e) => e,
            };
            let missing = supporting::namespace_missing(&e, &ns);
            match decide::sts::after_sts_failure(call, dry_run, &CallFailure::of(&e), missing) {
                AfterFailure::Call(next) => call = next,
                AfterFailure::Echoed => return (Ok((object, true)), recreated),
                AfterFailure::Failed => return (Err(e), recreated),
            }
        }
    }
}

/// Deletes the stored StatefulSet `name` with its pods orphaned, conditional on its uid and on
/// the version planned on, once [`decide::sts::recreate_refusal`] finds nothing against it.
async fn delete_orphaning(
    api: &Api<DynamicObject>,
    name: &str,
    new: &DynamicObject,
    expected_rv: u64,
) -> Result<(), kube::Error> {
    let stored = api.get(name).await?;
    if let Some(why) = decide::sts::recreate_refusal(&stored, new, expected_rv) {
        let code = if why.starts_with("changed") { 409 } else { 422 };
        return Err(kube::Error::Api(kube::core::Status::failure(&why, "Invalid").with_code(code).boxed()));
    }
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        preconditions: Some(Preconditions {
            uid: stored.metadata.uid.clone(),
            resource_version: Some(expected_rv.to_string()),
        }),
        ..DeleteParams::default()
    };
    api.delete(name, &dp).await?;
    // The garbage collector takes the orphan finalizer off once it has released the pods;
    // until then the name is taken. A create that still finds it is a conflict: the next
    // reconcile tries again.
    let gone_by = tokio::time::Instant::now() + ORPHANING_WAIT;
    while tokio::time::Instant::now() < gone_by {
        match api.get_opt(name).await? {
            Some(s) if s.metadata.uid == stored.metadata.uid => tokio::time::sleep(ORPHANING_POLL).await,
            _ => break,
        }
    }
    Ok(())
}

/// How long a recreate waits for the member to finish deleting the old StatefulSet (its pods'
/// owner references removed by the garbage collector): seconds on a healthy member.
const ORPHANING_WAIT: std::time::Duration = std::time::Duration::from_secs(8);
/// How often it looks.
const ORPHANING_POLL: std::time::Duration = std::time::Duration::from_millis(100);

impl ClusterWatcher {
    /// Settles a StatefulSet write (see [`decide::sts::settle_sts_write`]) and notes the rest.
    fn sts_written(
        &mut self,
        msg: WriteStatefulSet,
        res: Answer,
        ctx: &mut Context<Self>,
    ) -> Result<StsRecord, WriteError> {
        let failure;
        let end = match &res {
            Ok((stored, echoed)) => StsEnd::Stored { stored, echoed: *echoed },
            Err(e) => {
                failure = CallFailure::of(e);
                StsEnd::Failed(&failure)
            }
        };
        let known = *self.keeps_ordinals_of(msg.kind);
        self.confirm_scan = true;
        let settled = decide::sts::settle_sts_write(&mut self.cache, &self.cluster, &msg, known, end);
        match (&res, settled.contact) {
            (Err(e), false) => self.contact_failed(e),
            _ => self.contact_ok(),
        }
        if let (true, Err(e)) = (settled.uncertain, &res) {
            tracing::warn!(cluster = %self.cluster, federation = %msg.key, error = %e,
                "a StatefulSet write got no definite answer; nothing there counts as confirmed until it is read again");
        }
        if settled.advanced_gone {
            let keys = self.advanced_gone(ctx);
            self.touched(keys, ctx);
        }
        if let Some(kept) = settled.keeps_ordinals {
            *self.keeps_ordinals_of(msg.kind) = Some(kept);
        }
        if let (Ok(record), false) = (&settled.reply, msg.dry_run) {
            tracing::debug!(
                cluster = %self.cluster, federation = %msg.key, term = msg.term, rv = record.rv,
                start = record.slice.start, replicas = record.slice.replicas,
                reserved = %spanset_plan::ordinal_runs(&record.slice.reserved).join(","), "wrote member StatefulSet"
            );
            self.metrics.member_write(&self.cluster, "statefulset");
        }
        if let Some(key) = settled.touched {
            self.touched([key], ctx);
        }
        settled.reply
    }
}
