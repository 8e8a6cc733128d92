//! Fencing a member cluster: `spec.fenced` set or cleared on its MemberCluster, with who,
//! when and why in annotations and an Event. Shared by `spanset fence`/`unfence` and the
//! automatic failover policy, so both leave the same record.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use serde_json::json;

use super::{
    events::{Note, Recorder},
    labels::{FENCE_REASON, FENCED_AT, FENCED_BY, UNFENCED_AT, UNFENCED_BY},
};
use crate::api::MemberCluster;

fn now() -> String {
    let t = jiff::Timestamp::now();
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
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
    let mc = api.get_opt(name).await.map_err(|e| format!("cannot read MemberCluster {name}: {e}"))?;
    let Some(mc) = mc else { return Err(format!("no MemberCluster named {name:?}")) };
    if mc.spec.fenced {
        let who = mc.annotations().get(FENCED_BY).cloned().unwrap_or_else(|| "someone".into());
        return Ok(format!("membercluster/{name} is already fenced (by {who})"));
    }
    if !unreachable(&mc) && !force {
        return Err(format!(
            "membercluster/{name} is not Unreachable (condition Reachable is not False): its pods may be \
             running, and fencing declares them dead, so their ordinals would start elsewhere while they still \
             run; stop the member first, or pass --force"
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
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| format!("cannot fence MemberCluster {name}: {e}"))?;
    let message = format!("fenced by {by}: {reason}");
    events.record_about("default", reference(&mc), &Note::warning("Fenced", message)).await;
    Ok(format!(
        "membercluster/{name} fenced: its ordinals are re-homed to healthy members; when it answers again its \
         StatefulSets are shrunk first, and it stays fenced until `spanset unfence {name}`"
    ))
}

/// Unfences a member as `by`.
pub async fn unfence(client: &Client, name: &str, by: &str, events: &mut Recorder) -> Result<String, String> {
    let api: Api<MemberCluster> = Api::all(client.clone());
    let mc = api.get_opt(name).await.map_err(|e| format!("cannot read MemberCluster {name}: {e}"))?;
    let Some(mc) = mc else { return Err(format!("no MemberCluster named {name:?}")) };
    if !mc.spec.fenced {
        return Ok(format!("membercluster/{name} is not fenced"));
    }
    let patch = json!({
        "metadata": {
            "resourceVersion": mc.resource_version(),
            "annotations": {UNFENCED_BY: by, UNFENCED_AT: now()},
        },
        "spec": {"fenced": false},
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| format!("cannot unfence MemberCluster {name}: {e}"))?;
    events.record_about("default", reference(&mc), &Note::normal("Unfenced", format!("unfenced by {by}"))).await;
    Ok(format!("membercluster/{name} unfenced: it may take ordinals again"))
}

fn reference(mc: &MemberCluster) -> ObjectReference {
    ObjectReference {
        api_version: Some(MemberCluster::api_version(&()).to_string()),
        kind: Some(MemberCluster::kind(&()).to_string()),
        name: Some(mc.name_any()),
        uid: mc.uid(),
        ..Default::default()
    }
}
