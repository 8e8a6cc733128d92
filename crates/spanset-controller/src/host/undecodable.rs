//! What the controller says about a FederatedStatefulSet it cannot decode: `Blocked=True`
//! and `Ready=False`, reason `InvalidSpec`, naming the field and the decoder's reason, stored
//! once through the status subresource (the stored object with its status edited, conditional
//! on the resourceVersion read), plus one Warning Event. Nothing is written in any member for it.

use k8s_openapi::{
    api::core::v1::ObjectReference,
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
};
use kube::{
    Api, Client, Resource,
    api::{DynamicObject, PostParams},
};
use spanset_api::labels::FIELD_MANAGER;
use spanset_api::{FederatedStatefulSet, decode::Undecodable};

use crate::{
    decisions::status::{Verdict, conditions, types},
    host::events::{Note, Recorder},
};

/// The reason of both conditions.
pub const REASON: &str = "InvalidSpec";

/// The condition message for `u`.
pub fn message(u: &Undecodable) -> String {
    format!("the stored object cannot be read: {u}; fix it (a CRD with its schema refuses such objects)")
}

/// The status that reports `u` (the stored one with `observedGeneration` and the conditions
/// replaced), or `None` when the stored status already says so for this generation (so that
/// it is written once, not on every event).
pub fn reported_status(u: &Undecodable, now: &Time) -> Option<serde_json::Value> {
    let previous: Vec<Condition> = u.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let message = message(u);
    let said = previous.iter().any(|c| {
        c.type_ == types::BLOCKED
            && c.status == "True"
            && c.reason == REASON
            && c.message == message
            && c.observed_generation == u.generation()
    });
    if said {
        return None;
    }
    let verdicts = [Verdict::yes(types::BLOCKED, REASON, message.clone()), Verdict::no(types::READY, REASON, message)];
    let mut status = match u.object.data.get("status") {
        Some(serde_json::Value::Object(stored)) => stored.clone(),
        _ => serde_json::Map::new(),
    };
    status.insert("observedGeneration".into(), serde_json::json!(u.generation()));
    status.insert("conditions".into(), serde_json::json!(conditions(&previous, &verdicts, u.generation(), now)));
    Some(serde_json::Value::Object(status))
}

/// Stores the report of `u` if its status does not carry it yet, and records one Warning
/// Event when it does. Answers whether anything was written. The write is conditional on the
/// resourceVersion `u` was read at: a later version brings its own report.
pub async fn report(host: &Client, u: &Undecodable) -> Result<bool, kube::Error> {
    let now = Time(jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now()));
    let Some(status) = reported_status(u, &now) else { return Ok(false) };
    let api: Api<DynamicObject> =
        Api::namespaced_with(host.clone(), &u.namespace(), &spanset_api::decode::federation_resource());
    let mut next = u.object.clone();
    next.data["status"] = status;
    let pp = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
    api.replace_status(&u.name(), &pp, &next).await?;
    let about = ObjectReference {
        api_version: Some(FederatedStatefulSet::api_version(&()).to_string()),
        kind: Some(FederatedStatefulSet::kind(&()).to_string()),
        name: Some(u.name()),
        namespace: Some(u.namespace()),
        uid: u.object.metadata.uid.clone(),
        ..Default::default()
    };
    let mut events = Recorder::new(host.clone(), "spanset".into());
    events.record_about(&u.namespace(), about, &Note::warning(REASON, message(u))).await;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use spanset_api::decode::federation;

    fn undecodable(status: serde_json::Value) -> Undecodable {
        let mut v = serde_json::to_value(spanset_api::example(&["east".into()])).unwrap();
        v["metadata"]["namespace"] = json!("default");
        v["metadata"]["resourceVersion"] = json!("9");
        v["metadata"]["generation"] = json!(4);
        v["spec"]["backend"] = json!("Deployment");
        v["status"] = status;
        *federation(&serde_json::from_value(v).unwrap()).unwrap_err()
    }

    fn at(second: i64) -> Time {
        Time(jiff::Timestamp::from_second(second).unwrap())
    }

    #[test]
    fn the_report_names_the_field_and_keeps_the_rest_of_the_status() {
        let u = undecodable(json!({"readyReplicas": 3, "someFieldOfALaterVersion": true}));
        let status = reported_status(&u, &at(1_000)).expect("nothing reported yet");
        assert_eq!(status["observedGeneration"], 4);
        let blocked = &status["conditions"][0];
        assert_eq!(blocked["type"], "Blocked");
        assert_eq!(blocked["status"], "True");
        assert_eq!(blocked["reason"], "InvalidSpec");
        let text = blocked["message"].as_str().unwrap();
        assert!(text.contains("spec.backend: unknown variant `Deployment`"), "{text}");
        assert_eq!(status["conditions"][1]["type"], "Ready");
        assert_eq!(status["conditions"][1]["status"], "False");
        assert_eq!(
            (status["readyReplicas"].clone(), status["someFieldOfALaterVersion"].clone()),
            (json!(3), json!(true))
        );
    }

    #[test]
    fn a_stored_report_is_not_written_again() {
        let first = undecodable(json!({}));
        let status = reported_status(&first, &at(1_000)).unwrap();
        // The object as stored after that write (a new resourceVersion, same generation).
        let again = undecodable(status);
        assert_eq!(reported_status(&again, &at(2_000)), None);
    }

    #[test]
    fn a_new_generation_is_reported_again_keeping_the_transition_time() {
        let first = undecodable(json!({}));
        let stored = reported_status(&first, &at(1_000)).unwrap();
        let mut next = undecodable(stored);
        next.object.metadata.generation = Some(5);
        let status = reported_status(&next, &at(2_000)).expect("a new generation is reported");
        assert_eq!(status["observedGeneration"], 5);
        assert_eq!(status["conditions"][0]["lastTransitionTime"], json!(at(1_000)));
    }
}
