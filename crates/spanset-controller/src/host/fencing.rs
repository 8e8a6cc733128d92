//! Fencing a member cluster: `spec.fenced` set or cleared on its MemberCluster, with who,
//! when and why in annotations and an Event. Shared by `spanset fence`/`unfence` and the
//! automatic failover policy, so both leave the same record.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use serde_json::json;
use spanset_api::labels::{FENCE_REASON, FENCED_AT, FENCED_BY, UNFENCED_AT, UNFENCED_BY};
use spanset_api::{
    FederatedStatefulSet, FederatedStatefulSetStatus, MemberCluster,
    decode::{self, Undecodable},
};

use crate::host::events::{Note, Recorder};

fn now() -> String {
    let t = jiff::Timestamp::now();
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

/// How many times a fence or unfence is tried on a MemberCluster that changed between its read
/// and the conditional patch (`409 Conflict`). Its watcher writes its status (the `Reachable`
/// condition as it turns, `lastContact` every 30 s), so a fence right after a member turns
/// Unreachable can race that write; each attempt reads the object again and judges afresh.
const CONFLICT_ATTEMPTS: u32 = 5;

/// Whether a patch that failed with `e` on attempt `attempt` is tried again, from a new read.
fn read_again(e: &kube::Error, attempt: u32) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409) && attempt < CONFLICT_ATTEMPTS
}

/// Whether the member's status says the controller cannot reach it (`Reachable=False`): only
/// then may it be fenced without force. A member without that condition may be running.
fn unreachable(mc: &MemberCluster) -> bool {
    mc.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Reachable" && c.status == "False"))
}

/// Fences a member as `by`, for `reason`; the message says what happened (or why nothing
/// did). Shared by `spanset fence` and the controller's automatic policy.
pub async fn fence(
    client: &Client,
    name: &str,
    reason: &str,
    by: &str,
    force: bool,
    events: &mut Recorder,
) -> Result<String, String> {
    let api: Api<MemberCluster> = Api::all(client.clone());
    let mut attempt = 1;
    let mc = loop {
        let mc = api.get_opt(name).await.map_err(|e| format!("cannot read MemberCluster {name}: {e}"))?;
        let Some(mc) = mc else { return Err(format!("no MemberCluster named {name:?}")) };
        // `--force` on a fenced member fences it anew (a new `fenced-at`): one heard from since its
        // fence holds what it was last seen to run until then (`fence_clock`).
        if mc.spec.fenced && !force {
            let who = mc.annotations().get(FENCED_BY).cloned().unwrap_or_else(|| "someone".into());
            return Ok(format!("membercluster/{name} is already fenced (by {who})"));
        }
        if !unreachable(&mc) && !force {
            return Err(format!(
                "membercluster/{name} is not Unreachable (condition Reachable is not False): its pods may be \
                 running, and fencing declares them dead, so their ordinals would start elsewhere while they \
                 still run; stop the member first, or pass --force"
            ));
        }
        let at = now();
        let patch = json!({
            "metadata": {
                "resourceVersion": mc.resource_version(),
                "annotations": {FENCED_BY: by, FENCED_AT: at, FENCE_REASON: reason, UNFENCED_BY: null, UNFENCED_AT: null},
            },
            "spec": {"fenced": true},
        });
        match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => break mc,
            Err(e) if read_again(&e, attempt) => attempt += 1,
            Err(e) => return Err(format!("cannot fence MemberCluster {name}: {e}")),
        }
    };
    let message = format!("fenced by {by}: {reason}");
    events.record_about("default", reference(&mc), &Note::warning("Fenced", message)).await;
    Ok(format!(
        "membercluster/{name} fenced: its ordinals are re-homed to healthy members; when it answers again its \
         StatefulSets are shrunk first, and it stays fenced until `spanset unfence {name}`"
    ))
}

/// What each federation's status says a member's StatefulSets still hold (`NS/NAME ordinals
/// 4-5`), from the slices the controller last saw written there: a fenced member keeps these
/// until it answers again and its shrink lands.
pub fn still_written(federations: &[FederatedStatefulSet], undecodable: &[Undecodable], name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in federations {
        let key = format!("{}/{}", f.namespace().unwrap_or_default(), f.name_any());
        out.extend(slices_held(&key, f.status.as_ref(), name));
    }
    // An object that cannot be decoded still has a status that says what its slices hold; if
    // that cannot be read either, what it holds is unknown, which is not "nothing".
    for u in undecodable {
        let key = u.key();
        match &u.status {
            Some(status) => out.extend(slices_held(&key, Some(status), name)),
            None => out.push(format!("{key} (cannot be decoded: {u}; what it holds is unknown)")),
        }
    }
    out
}

/// The slices a federation's status shows holding ordinals in member `name`.
fn slices_held(key: &str, status: Option<&FederatedStatefulSetStatus>, name: &str) -> Vec<String> {
    status
        .iter()
        .flat_map(|s| s.slices.iter())
        .filter(|s| s.cluster == name && s.replicas > 0)
        .map(|s| {
            let reserved = s.reserved_ordinals.iter().map(|k| i64::from(*k));
            let ordinals = spanset_plan::stored_slice_text(s.start.into(), s.replicas.into(), reserved);
            format!("{key} ordinals {ordinals}")
        })
        .collect()
}

/// Unfences a member as `by`. Refused, unless `force`, while a federation's status says the
/// member's StatefulSets still hold ordinals: those were re-homed while it was fenced, and a
/// member that never answered since was never shrunk, so unfenced its own StatefulSet
/// controller would restart them next to their new homes the moment it returns.
pub async fn unfence(
    client: &Client,
    name: &str,
    by: &str,
    force: bool,
    events: &mut Recorder,
) -> Result<String, String> {
    let api: Api<MemberCluster> = Api::all(client.clone());
    let mut attempt = 1;
    let mc = loop {
        let mc = api.get_opt(name).await.map_err(|e| format!("cannot read MemberCluster {name}: {e}"))?;
        let Some(mc) = mc else { return Err(format!("no MemberCluster named {name:?}")) };
        if !mc.spec.fenced {
            return Ok(format!("membercluster/{name} is not fenced"));
        }
        if !force {
            let (federations, undecodable) = decode::all_federations(client).await?;
            let held = still_written(&federations, &undecodable, name);
            if !held.is_empty() {
                return Err(format!(
                    "membercluster/{name} has not been shrunk since it was fenced: its StatefulSets still hold {} \
                     (re-homed elsewhere meanwhile), and unfenced, its own StatefulSet controller would run them a \
                     second time when it answers again; wait until it answers and spanset shrinks it (the \
                     federation's status.slices shows it holding nothing), or pass --force",
                    held.join(", ")
                ));
            }
        }
        let patch = json!({
            "metadata": {
                "resourceVersion": mc.resource_version(),
                "annotations": {UNFENCED_BY: by, UNFENCED_AT: now()},
            },
            "spec": {"fenced": false},
        });
        match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => break mc,
            Err(e) if read_again(&e, attempt) => attempt += 1,
            Err(e) => return Err(format!("cannot unfence MemberCluster {name}: {e}")),
        }
    };
    events.record_about("default", reference(&mc), &Note::normal("Unfenced", format!("unfenced by {by}"))).await;
    Ok(format!("membercluster/{name} unfenced: it may take ordinals again"))
}

/// A reference to a MemberCluster, for Events about it.
pub fn reference(mc: &MemberCluster) -> ObjectReference {
    ObjectReference {
        api_version: Some(MemberCluster::api_version(&()).to_string()),
        kind: Some(MemberCluster::kind(&()).to_string()),
        name: Some(mc.name_any()),
        uid: mc.uid(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_conflict_is_read_again_and_only_a_few_times() {
        let api = |code| kube::Error::Api(kube::core::Status::failure("m", "r").with_code(code).boxed());
        // The MemberCluster changed since it was read (its watcher wrote its status): again.
        assert!(read_again(&api(409), 1));
        assert!(read_again(&api(409), CONFLICT_ATTEMPTS - 1));
        // Not forever, and nothing else is tried again (refused, gone, invalid, unauthorized).
        assert!(!read_again(&api(409), CONFLICT_ATTEMPTS));
        for code in [400, 403, 404, 422, 500] {
            assert!(!read_again(&api(code), 1), "{code}");
        }
    }
}
