//! Events in the host cluster about a FederatedStatefulSet (core/v1 `Event`, which every
//! apiserver serves and `kubectl describe fsts` / `kubectl get events` show): moves started and
//! finished, and why nothing can be written. A repeat of the same reason and message within
//! [`REPEAT_WINDOW`] bumps the existing Event's count instead of adding one, as client-go's
//! correlator does.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::core::v1::{Event, EventSource, ObjectReference},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use spanset_api::FederatedStatefulSet;

/// How long a repeated Event is folded into the previous one.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(600);

/// Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Something happened as planned.
    Normal,
    /// Something needs a person's attention.
    Warning,
}

/// One Event to record about a federation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Normal or Warning.
    pub severity: Severity,
    /// CamelCase reason (`MoveStarted`, `MoveFinished`, `Blocked`…).
    pub reason: String,
    /// For people.
    pub message: String,
}

impl Note {
    /// A Normal note.
    pub fn normal(reason: &str, message: impl Into<String>) -> Self {
        Self { severity: Severity::Normal, reason: reason.into(), message: message.into() }
    }

    /// A Warning note.
    pub fn warning(reason: &str, message: impl Into<String>) -> Self {
        Self { severity: Severity::Warning, reason: reason.into(), message: message.into() }
    }
}

/// Writes Events for one federation; remembers recent ones to fold repeats.
pub struct Recorder {
    client: Client,
    component: String,
    instance: String,
    recent: HashMap<(String, String), (String, i32, Instant)>,
}

impl Recorder {
    /// A recorder writing as the controller's `instance` (the process identity).
    pub fn new(client: Client, instance: String) -> Self {
        Self::for_component(client, "spanset.dev/controller", instance)
    }

    /// A recorder writing as `component` (e.g. `spanset.dev/cli` for `spanset fence`).
    pub fn for_component(client: Client, component: &str, instance: String) -> Self {
        Self { client, component: component.to_string(), instance, recent: HashMap::new() }
    }

    /// Records `note` about `fsts`; failures are logged, never fatal.
    pub async fn record(&mut self, fsts: &FederatedStatefulSet, note: &Note) {
        let ns = fsts.namespace().unwrap_or_default();
        let about = ObjectReference {
            api_version: Some(FederatedStatefulSet::api_version(&()).to_string()),
            kind: Some(FederatedStatefulSet::kind(&()).to_string()),
            name: Some(fsts.name_any()),
            namespace: Some(ns.clone()),
            uid: fsts.uid(),
            resource_version: fsts.resource_version(),
            ..Default::default()
        };
        self.record_about(&ns, about, note).await;
    }

    /// Records `note` about any object, in namespace `ns` (`default` for cluster-scoped
    /// objects such as MemberClusters, where `kubectl describe` looks for them).
    pub async fn record_about(&mut self, ns: &str, about: ObjectReference, note: &Note) {
        let api: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let now = jiff::Timestamp::now();
        let object = about.name.clone().unwrap_or_default();
        let key = (format!("{object}/{}", note.reason), note.message.clone());
        self.recent.retain(|_, (_, _, at)| at.elapsed() < REPEAT_WINDOW);
        if let Some((name, count, at)) = self.recent.get_mut(&key) {
            let patch = serde_json::json!({"count": *count + 1, "lastTimestamp": Time(now)});
            if api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.is_ok() {
                *count += 1;
                *at = Instant::now();
                return;
            }
        }
        let name = format!("{object}.{:x}", now.as_nanosecond());
        let event = Event {
            metadata: ObjectMeta { name: Some(name.clone()), namespace: Some(ns.to_string()), ..Default::default() },
            involved_object: about,
            reason: Some(note.reason.clone()),
            message: Some(note.message.clone()),
            type_: Some(
                match note.severity {
                    Severity::Normal => "Normal",
                    Severity::Warning => "Warning",
                }
                .into(),
            ),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            source: Some(EventSource { component: Some(self.component.clone()), host: None }),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.instance.clone()),
            action: Some(note.reason.clone()),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => {
                self.recent.insert(key, (name, 1, Instant::now()));
            }
            Err(e) => tracing::debug!(error = %e, reason = %note.reason, "event not recorded"),
        }
    }
}
