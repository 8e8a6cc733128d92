//! The eviction subresource, `POST /api/v1/namespaces/NS/pods/NAME/eviction`, as the
//! apiserver's `EvictionREST` answers it, so that `kubectl drain` meets disruption budgets as
//! on a real cluster: a pod that is not running yet, has finished or is already being deleted
//! is deleted at once; otherwise the one budget selecting it must allow a disruption, which is
//! spent by a conditional write of the budget's status (two evictions racing for the last
//! disruption cannot both have it) before the pod is deleted gracefully with the caller's
//! `deleteOptions`. A refusal is a 429 (`Cannot evict pod as it would violate the pod's
//! disruption budget.`) that kubectl retries every 5 s; a pod under two budgets is a 500.

use serde_json::{Value, json};

use crate::{
    cluster::{Cluster, disruption, kubelet},
    store::{
        actor::{Actor, Component},
        error::{ApiError, ApiResult},
        object,
        registry::{DeleteOptions, Subresource, WriteOptions},
        resources::ResourceType,
        selector::LabelSelector,
    },
};

/// The apiserver's retries of a write that met a conflict (`EvictionsRetry.Steps`).
const RETRIES: usize = 20;

/// Evictions recorded in a budget's status beyond which it refuses more (`MaxDisruptedPodSize`).
const MAX_DISRUPTED_PODS: usize = 2000;

/// The refusal's message, which `kubectl drain` prints before retrying.
pub const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// The `Status` of an eviction that went through (`201`).
fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

fn cause(message: String) -> Value {
    json!({"reason": "DisruptionBudget", "message": message})
}

/// `createTooManyRequestsError`: the budget's status is behind its spec, or the pod changed.
fn still_processing(pdb: &str) -> ApiError {
    ApiError::too_many_requests(
        REFUSED,
        10,
        vec![cause(format!("The disruption budget {pdb} is still being processed by the server."))],
    )
}

fn budget_forbidden(pdb: &str, why: &str) -> ApiError {
    ApiError::custom(403, "Forbidden", format!("poddisruptionbudget.policy \"{pdb}\" is forbidden: {why}"))
        .with_details(json!({"name": pdb, "group": "policy", "kind": "poddisruptionbudget"}))
}

/// The caller's `deleteOptions`, with the request's `dryRun` when the body has none
/// (`propagateDryRun`).
fn delete_options(eviction: &Value, query_dry_run: bool) -> ApiResult<DeleteOptions> {
    let body = eviction.get("deleteOptions").filter(|v| !v.is_null());
    let mut opts = match body {
        Some(b) => DeleteOptions::from_json(b)?,
        None => DeleteOptions::default(),
    };
    let listed: Vec<&str> = body
        .and_then(|b| b.get("dryRun"))
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| v.as_str().unwrap_or("")).collect())
        .unwrap_or_default();
    if query_dry_run && !listed.is_empty() && listed != ["All"] {
        return Err(ApiError::bad_request(format!(
            "Non-matching dry-run options in request and content: [All] and [{}]",
            listed.join(" ")
        )));
    }
    opts.dry_run |= query_dry_run;
    Ok(opts)
}

/// Checks the body is an Eviction of this pod (policy/v1, or the policy/v1beta1 form that
/// older clients send).
fn check_body(eviction: &Value, ns: &str, name: &str) -> ApiResult<()> {
    let api_version = eviction.get("apiVersion").and_then(Value::as_str).unwrap_or("policy/v1");
    let kind = eviction.get("kind").and_then(Value::as_str).unwrap_or("Eviction");
    if !matches!(api_version, "policy/v1" | "policy/v1beta1") || kind != "Eviction" {
        return Err(ApiError::bad_request(format!("not a Eviction object: {api_version} {kind}")));
    }
    if object::name(eviction) != name {
        return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
    }
    let body_ns = object::namespace(eviction);
    if !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

/// A pod whose budget need not be asked: not started, finished, or already being deleted.
fn can_ignore_budget(pod: &Value) -> bool {
    matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed" | "Pending") | None)
        || object::is_deleting(pod)
}

/// Whether the delete must be conditional on the version read (not for finished or deleting
/// pods), so a pod that became Ready meanwhile is not taken down unbudgeted.
fn enforce_version(pod: &Value) -> bool {
    !matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"))
        && !object::is_deleting(pod)
}

fn pods_rt(cluster: &Cluster) -> std::sync::Arc<ResourceType> {
    cluster.resources.by_plural("", "pods").expect("pods are built in")
}

fn budgets_rt(cluster: &Cluster) -> std::sync::Arc<ResourceType> {
    cluster.resources.by_plural("policy", "poddisruptionbudgets").expect("budgets are built in")
}

/// Evicts a pod; answers the `Status` of success, or the apiserver's error. The pod's delete is
/// `actor`'s (the caller's), the budget's bookkeeping the eviction subresource's own.
pub fn evict(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    eviction: &Value,
    query_dry_run: bool,
    actor: Actor,
) -> ApiResult<Value> {
    check_body(eviction, ns, name)?;
    let original = DeleteOptions { actor, ..delete_options(eviction, query_dry_run)? };
    let pods = pods_rt(cluster);
    // Pods whose budget need not be asked go at once; a conflict (the pod changed) is retried
    // unless the caller gave a resourceVersion of its own.
    let mut pod = cluster.get(&pods, ns, name)?;
    let mut attempt = 1;
    while can_ignore_budget(&pod) {
        let mut opts = original.clone();
        if enforce_version(&pod) && opts.precondition_rv.is_none() {
            opts.precondition_rv = Some(object::resource_version(&pod).to_string());
        }
        match mark_and_delete(cluster, &pods, ns, name, opts) {
            Ok(()) => return Ok(success()),
            Err(e) if e.code == 409 && original.precondition_rv.is_none() && attempt < RETRIES => {
                attempt += 1;
                pod = cluster.get(&pods, ns, name)?;
            }
            Err(e) => return Err(e),
        }
    }
    let budgets = matching_budgets(cluster, &pod);
    let mut conditional = false;
    let mut budget_name = String::new();
    match budgets.as_slice() {
        [] => {}
        [pdb] => {
            budget_name = object::name(pdb).to_string();
            conditional = unhealthy_may_go(pdb, &pod);
            if !conditional {
                spend(cluster, pdb, name, original.dry_run)?;
            }
        }
        _ => {
            return Err(ApiError::custom(
                500,
                "",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    }
    let mut opts = original.clone();
    if conditional {
        opts.precondition_rv = Some(object::resource_version(&pod).to_string());
    }
    match mark_and_delete(cluster, &pods, ns, name, opts) {
        Ok(()) => Ok(success()),
        // The unready pod changed (became Ready?) since the budget was read: try again later.
        Err(e) if e.code == 409 && conditional && original.precondition_rv.is_none() => {
            Err(still_processing(&budget_name))
        }
        Err(e) => Err(e),
    }
}

/// The budgets of the pod's namespace whose selector picks it (an unparsable selector picks
/// nothing; so does none at all).
fn matching_budgets(cluster: &Cluster, pod: &Value) -> Vec<std::sync::Arc<Value>> {
    let (all, _) = cluster.storage.list(&budgets_rt(cluster).storage_key(), Some(object::namespace(pod)));
    all.into_iter()
        .filter(|b| {
            LabelSelector::from_api(b.pointer("/spec/selector").unwrap_or(&Value::Null))
                .is_ok_and(|s| s.matches(object::labels(pod)))
        })
        .collect()
}

/// An unready pod may go without spending a disruption: always under `AlwaysAllow`, and under
/// the default `IfHealthyBudget` while the budget has the healthy pods it wants.
fn unhealthy_may_go(pdb: &Value, pod: &Value) -> bool {
    if kubelet::is_ready(pod) {
        return false;
    }
    if pdb.pointer("/spec/unhealthyPodEvictionPolicy").and_then(Value::as_str) == Some("AlwaysAllow") {
        return true;
    }
    let n = |k: &str| pdb.pointer(&format!("/status/{k}")).and_then(Value::as_i64).unwrap_or(0);
    n("currentHealthy") >= n("desiredHealthy") && n("desiredHealthy") > 0
}

/// Spends one disruption of the budget (`checkAndDecrement`), retried on conflict with a fresh
/// read: the write is conditional on the version checked.
fn spend(cluster: &Cluster, pdb: &Value, pod: &str, dry_run: bool) -> ApiResult<()> {
    let rt = budgets_rt(cluster);
    let (ns, name) = (object::namespace(pdb), object::name(pdb));
    let mut current = pdb.clone();
    for _ in 0..RETRIES {
        match check_and_decrement(cluster, &rt, &current, pod, dry_run) {
            Err(e) if e.code == 409 => current = (*cluster.get(&rt, ns, name)?).clone(),
            other => return other,
        }
    }
    Err(ApiError::custom(
        504,
        "Timeout",
        format!("Timeout: couldn't update PodDisruptionBudget {name:?} due to conflicts"),
    )
    .with_details(json!({"retryAfterSeconds": 10})))
}

fn check_and_decrement(cluster: &Cluster, rt: &ResourceType, pdb: &Value, pod: &str, dry_run: bool) -> ApiResult<()> {
    let name = object::name(pdb);
    let n = |k: &str| pdb.pointer(&format!("/status/{k}")).and_then(Value::as_i64).unwrap_or(0);
    let generation = pdb.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
    if n("observedGeneration") < generation {
        return Err(still_processing(name));
    }
    let allowed = n("disruptionsAllowed");
    if allowed < 0 {
        return Err(budget_forbidden(name, "pdb disruptions allowed is negative"));
    }
    let mut disrupted = disruption::disrupted_pods(pdb);
    if disrupted.len() > MAX_DISRUPTED_PODS {
        return Err(budget_forbidden(
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        let why = format!(
            "The disruption budget {name} needs {} healthy pods and has {} currently",
            n("desiredHealthy"),
            n("currentHealthy")
        );
        return Err(ApiError::too_many_requests(REFUSED, 0, vec![cause(why)]));
    }
    if dry_run {
        return Ok(());
    }
    let mut next = pdb.clone();
    next["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed == 1 {
        disruption::set_disruption_allowed(&mut next["status"]);
    }
    // Tells the disruption controller the pod is going, before it is deleted.
    disrupted.insert(pod.to_string(), json!(object::now_rfc3339()));
    next["status"]["disruptedPods"] = json!(disrupted);
    // `next` carries the resourceVersion read: a write since then is a conflict.
    cluster.update_with(
        rt,
        object::namespace(pdb),
        name,
        Subresource::Status,
        &WriteOptions::by(Component::Eviction),
        |_| Ok(next),
    )?;
    Ok(())
}

/// Marks the pod `DisruptionTarget` (unless a dry run) and deletes it with the caller's
/// options (`addConditionAndDeletePod`); a resourceVersion precondition is checked against
/// the pod before the mark and follows it.
fn mark_and_delete(
    cluster: &Cluster,
    rt: &ResourceType,
    ns: &str,
    name: &str,
    mut opts: DeleteOptions,
) -> ApiResult<()> {
    if !opts.dry_run {
        let conflict = |why: String| {
            ApiError::custom(409, "Conflict", format!("Operation cannot be fulfilled on Pod \"{name}\": {why}"))
                .with_details(json!({"name": name, "kind": "Pod"}))
        };
        let (want_uid, want_rv) = (opts.precondition_uid.clone(), opts.precondition_rv.clone());
        let marked = cluster.update_with(rt, ns, name, Subresource::Status, &WriteOptions::by(Component::Eviction), |cur| {
            if let Some(uid) = want_uid.as_deref().filter(|u| !u.is_empty() && *u != object::uid(cur)) {
                return Err(conflict(format!(
                    "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                    object::uid(cur)
                )));
            }
            let have = object::resource_version(cur).to_string();
            if let Some(rv) = want_rv.as_deref().filter(|rv| !rv.is_empty() && **rv != have) {
                return Err(conflict(format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({have}). The object might have been modified"
                )));
            }
            let mut next = cur.clone();
            add_disruption_target(&mut next);
            Ok(next)
        })?;
        if opts.precondition_rv.is_some() {
            opts.precondition_rv = Some(object::resource_version(&marked).to_string());
        }
    }
    cluster.delete(rt, ns, name, &opts).map(|_| ())
}

/// `UpdatePodCondition` with the eviction's `DisruptionTarget` condition.
fn add_disruption_target(pod: &mut Value) {
    let now = object::now_rfc3339();
    if !pod.pointer("/status/conditions").is_some_and(Value::is_array) {
        pod["status"]["conditions"] = json!([]);
    }
    let conditions = pod["status"]["conditions"].as_array_mut().expect("made an array above");
    let mut condition = json!({"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
        "lastTransitionTime": now, "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"});
    match conditions.iter_mut().find(|c| c["type"] == "DisruptionTarget") {
        Some(c) => {
            if c["status"] == "True" {
                condition["lastTransitionTime"] = c["lastTransitionTime"].clone();
            }
            *c = condition;
        }
        None => conditions.push(condition),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterConfig;

    /// A budget whose status allows one disruption.
    fn cluster_with_budget() -> (std::sync::Arc<Cluster>, std::sync::Arc<ResourceType>) {
        let c = Cluster::new(ClusterConfig::named("t"));
        let rt = budgets_rt(&c);
        let budget = json!({"metadata": {"name": "web"}, "spec": {"maxUnavailable": 1, "selector": {}}});
        c.create(&rt, Some("default"), budget, &WriteOptions::default()).unwrap();
        c.update_with(&rt, "default", "web", Subresource::Status, &WriteOptions::default(), |cur| {
            let mut next = cur.clone();
            next["status"] = json!({"observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 3,
                                    "desiredHealthy": 2, "expectedPods": 3});
            Ok(next)
        })
        .unwrap();
        (c, rt)
    }

    #[test]
    fn two_evictions_decided_from_one_read_spend_the_last_disruption_once() {
        let (c, rt) = cluster_with_budget();
        let read = c.get(&rt, "default", "web").unwrap();
        check_and_decrement(&c, &rt, &read, "web-0", false).unwrap();
        // The second decision was made on the same read: its write is a conflict...
        assert_eq!(check_and_decrement(&c, &rt, &read, "web-1", false).unwrap_err().code, 409);
        // ...and, retried on a fresh read, a refusal.
        let refused = spend(&c, &read, "web-1", false).unwrap_err();
        assert_eq!((refused.code, refused.message.as_str()), (429, REFUSED));
        assert_eq!(refused.retry_after_seconds(), None, "kubectl retries on its own clock");
        let now = c.get(&rt, "default", "web").unwrap();
        assert_eq!(now["status"]["disruptionsAllowed"], 0);
        assert_eq!(disruption::disrupted_pods(&now).keys().collect::<Vec<_>>(), ["web-0"]);
        assert_eq!(now["status"]["conditions"][0]["reason"], "InsufficientPods");
    }

    #[test]
    fn a_budget_behind_its_spec_asks_the_client_to_come_back() {
        let (c, rt) = cluster_with_budget();
        let changed = c
            .update_with(&rt, "default", "web", Subresource::Main, &WriteOptions::default(), |cur| {
                let mut next = cur.clone();
                next["spec"]["maxUnavailable"] = json!(2);
                Ok(next)
            })
            .unwrap();
        let e = check_and_decrement(&c, &rt, &changed, "web-0", false).unwrap_err();
        assert_eq!((e.code, e.retry_after_seconds()), (429, Some(10)));
        assert_eq!(
            e.details.unwrap()["causes"][0]["message"],
            "The disruption budget web is still being processed by the server."
        );
    }

    #[test]
    fn bodies_are_checked_as_the_apiserver_checks_them() {
        let ok = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0"}});
        assert!(check_body(&ok, "default", "web-0").is_ok());
        let beta = json!({"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "web-0", "namespace": "default"}});
        assert!(check_body(&beta, "default", "web-0").is_ok());
        assert_eq!(
            check_body(&ok, "default", "web-1").unwrap_err().message,
            "name in URL does not match name in Eviction object"
        );
        let elsewhere = json!({"metadata": {"name": "web-0", "namespace": "other"}});
        assert_eq!(check_body(&elsewhere, "default", "web-0").unwrap_err().code, 400);
        let body = json!({"metadata": {"name": "p"}, "deleteOptions": {"gracePeriodSeconds": 0, "dryRun": ["All"]}});
        let opts = delete_options(&body, false).unwrap();
        assert_eq!((opts.grace_period_seconds, opts.dry_run), (Some(0), true));
        assert!(delete_options(&json!({"metadata": {"name": "p"}}), true).unwrap().dry_run, "the query's dryRun");
    }
}
