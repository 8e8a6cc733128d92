//! API errors as a real kube-apiserver reports them: a `Status` object with the HTTP code,
//! reason and message that kubectl prints verbatim (`Error from server (<Reason>): <message>`)
//! and that kube-rs classifies with `is_not_found()`, `is_conflict()` and friends.

use serde_json::{Value, json};

use crate::store::{resources::ResourceType, validate::FieldError};

/// One field problem inside an `Invalid` error; becomes an entry of `details.causes`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// Machine-readable cause, e.g. `FieldValueInvalid`.
    pub reason: String,
    /// Human text for this cause.
    pub message: String,
    /// Dotted path of the field, e.g. `spec.replicas`.
    pub field: String,
}

/// An error answer of the simulated API server; converts into a `Status` body.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// `Status.message`, printed by kubectl.
    pub message: String,
    /// `Status.details`, when the apiserver sets it.
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into(), details: None }
    }

    /// Adds the `details` of the `Status` (name, group, kind).
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// `Status.details` naming an object: the group is left out for the core group, as the
    /// apiserver's `omitempty` leaves it.
    fn details(name: &str, group: &str, kind: &str) -> Value {
        let mut d = json!({"name": name, "kind": kind});
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        d
    }

    /// `404 NotFound` for a named object: `statefulsets.apps "quiz" not found`.
    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", rt.group_resource()))
            .with_details(Self::details(name, &rt.group, &rt.plural))
    }

    /// `404 NotFound` for a path the server does not serve at all.
    pub fn no_route() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource").with_details(json!({}))
    }

    /// `409 AlreadyExists` on create.
    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", rt.group_resource()))
            .with_details(Self::details(name, &rt.group, &rt.plural))
    }

    /// `409 Conflict` for a stale `resourceVersion` (optimistic concurrency).
    pub fn conflict(rt: &ResourceType, name: &str) -> Self {
        Self::conflict_because(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// `409 Conflict` of a delete whose precondition failed: the registry checks them before
    /// storage does and names the object by its kind, not its resource
    /// (`Operation cannot be fulfilled on StatefulSet.apps "web": the UID in the precondition …`).
    pub fn precondition_failed(rt: &ResourceType, name: &str, why: &str) -> Self {
        let qualified = if rt.group.is_empty() { rt.kind.clone() } else { format!("{}.{}", rt.kind, rt.group) };
        Self::new(409, "Conflict", format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"))
            .with_details(Self::details(name, &rt.group, &rt.kind))
    }

    /// `409 Conflict` with a specific explanation (failed preconditions, UID mismatch).
    pub fn conflict_because(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{name}\": {why}", rt.group_resource()),
        )
        .with_details(Self::details(name, &rt.group, &rt.plural))
    }

    /// `422 Invalid` with field causes: `StatefulSet.apps "web" is invalid: spec.replicas: ...`.
    pub fn invalid(kind: &str, group: &str, name: &str, summary: String, causes: Vec<Cause>) -> Self {
        let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let causes: Vec<Value> =
            causes.into_iter().map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field})).collect();
        let mut details = Self::details(name, group, kind);
        if name.is_empty() {
            // An options object (`PatchOptions`, `ListOptions`) has no name to give.
            details.as_object_mut().map(|d| d.remove("name"));
        }
        details["causes"] = json!(causes);
        Self::new(422, "Invalid", format!("{qualified} \"{name}\" is invalid: {summary}")).with_details(details)
    }

    /// `422 Invalid` for one field error of an object or of a request's options
    /// (`ListOptions.meta.k8s.io "" is invalid: …`), with its cause as the apiserver lists it.
    pub fn invalid_field(kind: &str, group: &str, name: &str, err: &FieldError) -> Self {
        let text = err.to_string();
        let cause = Cause {
            reason: err.cause_reason().into(),
            message: text.strip_prefix(&format!("{}: ", err.field)).unwrap_or(&text).into(),
            field: err.field.clone(),
        };
        Self::invalid(kind, group, name, text, vec![cause])
    }

    /// `400 BadRequest` with free text.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// `403 Forbidden`, e.g. creating in a terminating namespace.
    pub fn forbidden(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(403, "Forbidden", format!("{} \"{name}\" is forbidden: {why}", rt.group_resource()))
            .with_details(Self::details(name, &rt.group, &rt.plural))
    }

    /// `405 MethodNotAllowed` for a verb the resource does not support.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// `406 NotAcceptable` when no offered media type can be produced.
    pub fn not_acceptable(accept: &str) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!("only the following media types are accepted: application/json, application/yaml; got {accept}"),
        )
    }

    /// `410 Expired`: a watch or continue token older than the retained history.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// `413 RequestEntityTooLarge`: bodies over the apiserver's 3 MiB limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(413, "RequestEntityTooLarge", format!("Request entity too large: limit is {limit}"))
    }

    /// `415 UnsupportedMediaType` for a patch or body type the resource cannot take.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// `429 TooManyRequests` with `details.causes`, and `retryAfterSeconds` when non-zero (the
    /// response then carries `Retry-After`, on which clients retry by themselves): the eviction
    /// subresource's refusal while a disruption budget forbids it.
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u32, causes: Vec<Value>) -> Self {
        let mut details = json!({"causes": causes});
        if retry_after_seconds > 0 {
            details["retryAfterSeconds"] = json!(retry_after_seconds);
        }
        Self::new(429, "TooManyRequests", message).with_details(details)
    }

    /// The `Retry-After` seconds a client is asked to wait, if any.
    pub fn retry_after_seconds(&self) -> Option<u64> {
        self.details.as_ref()?.get("retryAfterSeconds")?.as_u64().filter(|s| *s > 0)
    }

    /// `500 InternalError`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", format!("Internal error occurred: {}", message.into()))
    }

    /// Any other code with a reason chosen by the caller (fault injection).
    pub fn custom(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(code, reason, message)
    }

    /// The `Status` object a real apiserver writes for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        // `reason` is `omitempty`: a Status built by hand without one (the eviction
        // subresource's 500 for several budgets) has none.
        if self.reason.is_empty() {
            status.as_object_mut().map(|m| m.remove("reason"));
        }
        if let Some(d) = &self.details {
            status["details"] = d.clone();
        }
        status
    }
}

/// Result alias for simulator operations that answer with an API error.
pub type ApiResult<T> = Result<T, ApiError>;
