//! Per-kind write rules, as the apiserver's registry strategies apply them: metadata the server
//! owns (uid, timestamps, generation), defaults, the spec/status split, optimistic concurrency,
//! validation, namespaces, custom resource definitions, and two-phase deletion (a CRD's own
//! is [`super::crd_deletion`]'s).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::{
    cluster::Cluster,
    store::{
        account::Verb,
        actor::{Actor, Component},
        admission::{Operation, Request},
        crd_deletion, defaults,
        error::{ApiError, ApiResult, Cause},
        object,
        resources::{self, ResourceKey, ResourceType},
        schema::{CrdSchema, FieldValidation, Part, ShownValue},
        service_ips,
        storage::Updated,
        tokens::UserInfo,
        validate,
    },
};

/// Options shared by create, update and patch.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: run every check but store nothing.
    pub dry_run: bool,
    /// `fieldManager`, required for apply patches.
    pub field_manager: Option<String>,
    /// `force` (apply patches only).
    pub force: bool,
    /// Who asks, for a request that came through the API: its write runs the admission
    /// policies. `None` for the simulated components' own writes, which no policy sees.
    pub user: Option<UserInfo>,
    /// `fieldValidation`: what a custom resource's unknown fields do (`Ignore` for the
    /// simulated components' own writes).
    pub field_validation: FieldValidation,
    /// Where the write leaves its `Warning`s (unknown fields under `Warn`), for the response.
    pub warnings: Warnings,
    /// Who writes, for the resource account: the API caller, or the simulated component.
    pub actor: Actor,
}

impl WriteOptions {
    /// The options of a simulated component's own write.
    pub fn by(component: Component) -> Self {
        Self { actor: component.into(), ..Default::default() }
    }
}

/// The warnings of one write, shared with the API layer that turns them into `Warning`
/// response headers.
#[derive(Debug, Clone, Default)]
pub struct Warnings(Arc<parking_lot::Mutex<Vec<String>>>);

impl Warnings {
    /// Adds warnings.
    pub fn extend(&self, more: impl IntoIterator<Item = String>) {
        self.0.lock().extend(more);
    }

    /// The warnings so far.
    pub fn all(&self) -> Vec<String> {
        self.0.lock().clone()
    }
}

/// Which part of an object a write targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The main endpoint: everything but `.status` when status is a subresource.
    Main,
    /// `/status`: only `.status`.
    Status,
}

/// How dependents are treated when their owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents lose their owner reference and stay.
    Orphan,
    /// The owner goes now; the garbage collector deletes dependents afterwards.
    Background,
    /// Dependents are deleted first; the owner waits with the `foregroundDeletion` finalizer.
    Foreground,
}

/// The parsed `DeleteOptions` body and query.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `propagationPolicy`.
    pub propagation: Option<Propagation>,
    /// `orphanDependents` (deprecated form of Orphan).
    pub orphan_dependents: Option<bool>,
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_rv: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// Who asks (see [`WriteOptions::user`]).
    pub user: Option<UserInfo>,
    /// Who deletes, for the resource account (see [`WriteOptions::actor`]).
    pub actor: Actor,
}

impl DeleteOptions {
    /// The options of a simulated component's own delete.
    pub fn by(component: Component) -> Self {
        Self { actor: component.into(), ..Default::default() }
    }

    /// Reads a `DeleteOptions` JSON body (kube-rs always sends one; kubectl sends the policy).
    pub fn from_json(body: &Value) -> ApiResult<Self> {
        let Some(map) = body.as_object() else {
            return Err(ApiError::bad_request("DeleteOptions must be a JSON object"));
        };
        let propagation = match map.get("propagationPolicy").and_then(Value::as_str) {
            None => None,
            Some("Orphan") => Some(Propagation::Orphan),
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some(other) => {
                let err = validate::FieldError::not_supported(
                    "propagationPolicy",
                    Value::String(other.into()),
                    &["Foreground", "Background", "Orphan", "nil"],
                );
                return Err(ApiError::invalid_field("DeleteOptions", "meta.k8s.io", "", &err));
            }
        };
        let grace = match map.get("gracePeriodSeconds") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_i64().ok_or_else(|| ApiError::bad_request("gracePeriodSeconds must be an integer"))?),
        };
        Ok(Self {
            grace_period_seconds: grace,
            propagation,
            orphan_dependents: map.get("orphanDependents").and_then(Value::as_bool),
            precondition_uid: body.pointer("/preconditions/uid").and_then(Value::as_str).map(str::to_string),
            precondition_rv: body.pointer("/preconditions/resourceVersion").and_then(Value::as_str).map(str::to_string),
            dry_run: map.get("dryRun").and_then(Value::as_array).is_some_and(|a| a.iter().any(|v| v == "All")),
            user: None,
            actor: Actor::default(),
        })
    }
}

/// What a delete did.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// The object is gone; its last state.
    Gone(Arc<Value>),
    /// The object is marked for deletion (grace period, finalizers) and still exists.
    Pending(Arc<Value>),
}

fn key(rt: &ResourceType) -> ResourceKey {
    rt.storage_key()
}

fn invalid(rt: &ResourceType, name: &str, errs: &[validate::FieldError]) -> ApiError {
    let causes = errs
        .iter()
        .map(|e| {
            let text = e.to_string();
            let message = text.strip_prefix(&format!("{}: ", e.field)).unwrap_or(&text).to_string();
            Cause { reason: e.cause_reason().to_string(), message, field: e.field.clone() }
        })
        .collect();
    let full = validate::invalid_message(&rt.kind, &rt.group, name, errs);
    let prefix = format!(
        "{} \"{name}\" is invalid: ",
        if rt.group.is_empty() { rt.kind.clone() } else { format!("{}.{}", rt.kind, rt.group) }
    );
    let summary = full.strip_prefix(&prefix).unwrap_or(&full).to_string();
    ApiError::invalid(&rt.kind, &rt.group, name, summary, causes)
}

/// Checks the body's `apiVersion` and `kind` against the URL, filling them in when absent.
fn check_type(rt: &ResourceType, version: &str, body: &mut Value) -> ApiResult<()> {
    if !rt.custom {
        validate::check_shape(&rt.group, &rt.plural, &rt.kind, body).map_err(ApiError::bad_request)?;
    }
    let Some(map) = body.as_object_mut() else {
        return Err(ApiError::bad_request(format!(
            "the body of the request was in an unknown format: expected a {} object",
            rt.kind
        )));
    };
    let want_av = rt.api_version(version);
    match map.get("apiVersion").and_then(Value::as_str) {
        Some(av) if av != want_av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
        _ => {}
    }
    match map.get("kind").and_then(Value::as_str) {
        Some(kind) if kind != rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({}) of {}",
                rt.kind,
                rt.group_resource()
            )));
        }
        _ => {}
    }
    map.insert("apiVersion".into(), Value::String(want_av));
    map.insert("kind".into(), Value::String(rt.kind.clone()));
    Ok(())
}

const GENERATE_NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The part of an object whose change bumps `metadata.generation`.
fn generation_relevant(rt: &ResourceType, obj: &Value) -> Value {
    if rt.custom {
        let mut copy = obj.clone();
        if let Some(m) = copy.as_object_mut() {
            m.remove("metadata");
            m.remove("status");
        }
        copy
    } else {
        obj.get("spec").cloned().unwrap_or(Value::Null)
    }
}

impl Cluster {
    /// One object, or 404.
    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> ApiResult<Arc<Value>> {
        self.storage.get(&key(rt), ns, name).ok_or_else(|| ApiError::not_found(rt, name))
    }

    fn check_namespace_for_create(&self, rt: &ResourceType, ns: &str, name: &str) -> ApiResult<()> {
        let ns_rt = self.resources.by_plural("", "namespaces").expect("namespaces are built in");
        match self.storage.get(&key(&ns_rt), "", ns) {
            None => Err(ApiError::not_found(&ns_rt, ns)),
            Some(n) if object::is_deleting(&n) => Err(ApiError::forbidden(
                rt,
                name,
                &format!("unable to create new content in namespace {ns} because it is being terminated"),
            )),
            Some(_) => Ok(()),
        }
    }

    /// Creates an object (POST). `url_ns` is the namespace of the URL, if any.
    pub fn create(
        &self,
        rt: &ResourceType,
        url_ns: Option<&str>,
        mut body: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Arc<Value>> {
        let version = rt.version().to_string();
        self.create_versioned(rt, &version, url_ns, &mut body, opts)
    }

    /// Creates an object sent to a specific served version.
    pub fn create_versioned(
        &self,
        rt: &ResourceType,
        version: &str,
        url_ns: Option<&str>,
        body: &mut Value,
        opts: &WriteOptions,
    ) -> ApiResult<Arc<Value>> {
        check_type(rt, version, body)?;
        let schema = rt.schema(version);
        if let Some(s) = &schema {
            decode_custom(rt, version, s, body, opts)?;
        }
        self.drop_unsupported_fields(rt, body);
        let meta = object::metadata_mut(body);
        // Namespace: the URL's wins; a different one in the body is an error.
        if rt.namespaced {
            let url_ns = url_ns.unwrap_or("default");
            match meta.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != url_ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    meta.insert("namespace".into(), Value::String(url_ns.to_string()));
                }
            }
        } else {
            meta.remove("namespace");
        }
        let name = meta.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        let name = if name.is_empty() {
            match meta.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => {
                    let n = format!("{prefix}{}", self.faults.random_suffix(GENERATE_NAME_ALPHABET, 5));
                    meta.insert("name".into(), Value::String(n.clone()));
                    n
                }
                _ => {
                    let err = validate::FieldError {
                        field: "metadata.name".into(),
                        kind: validate::FieldErrorKind::Required,
                        value: None,
                        detail: "name or generateName is required".into(),
                    };
                    return Err(invalid(rt, "", &[err]));
                }
            }
        } else {
            name
        };
        // RBAC's escalation prevention comes before the object is validated or admitted.
        if let Some(user) = &opts.user {
            let ns = object::namespace(body).to_string();
            self.escalation_guard(rt, &ns, "", user, body).check(rt, &name, body, None)?;
        }
        let meta = object::metadata_mut(body);
        // Server-owned metadata.
        meta.insert("uid".into(), Value::String(self.faults.random_uid()));
        meta.insert("creationTimestamp".into(), Value::String(object::now_rfc3339()));
        for owned in ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "generation"] {
            meta.remove(owned);
        }
        if rt.has_generation() {
            meta.insert("generation".into(), json!(1));
        }
        defaults::apply(rt, body);
        defaults::initial_status(rt, body);
        let mut errs = validate::validate_create(&rt.group, &rt.plural, body);
        if let Some(s) = &schema {
            errs.extend(s.validate(body, None, Part::Whole, rt.scale.as_ref(), self.shown_rule_value()));
        }
        if !errs.is_empty() {
            return Err(invalid(rt, &name, &errs));
        }
        // Held until the Service is stored, so that no other create takes its address.
        let _allocation = match (rt.group.as_str(), rt.plural.as_str()) {
            ("", "services") => Some(
                self.service_ips
                    .allocate(
                        body,
                        || self.storage.list(&key(rt), None).0.iter().flat_map(|s| service_ips::held_by(s)).collect(),
                        |n| self.faults.random_below(n),
                    )
                    .map_err(|e| invalid(rt, &name, &[e]))?,
            ),
            _ => None,
        };
        if rt.namespaced {
            self.check_namespace_for_create(rt, object::namespace(body), &name)?;
        }
        let crd_type =
            if (rt.group.as_str(), rt.plural.as_str()) == ("apiextensions.k8s.io", "customresourcedefinitions") {
                Some(self.accept_crd(rt, &name, body)?)
            } else {
                None
            };
        if let Some(user) = &opts.user {
            self.admit(&Request {
                operation: Operation::Create,
                resource: rt,
                version,
                subresource: "",
                namespace: object::namespace(body),
                name: &name,
                object: Some(body),
                old_object: None,
                kind: None,
                user,
                dry_run: opts.dry_run,
            })?;
        }
        if opts.dry_run {
            return Ok(Arc::new(body.clone()));
        }
        // A new CRD's type is served (discovery, OpenAPI, its endpoints) before the CRD, which
        // says Established, can be read or watched: the apiserver's discovery comes first too.
        // (A served custom type of that group and plural means its CRD, of this name, exists:
        // the create is refused below, and the type stays. The store is not read here, so that
        // the type is served even while the store is busy.)
        let replaced = match &crd_type {
            Some(t) if !self.resources.by_plural(&t.group, &t.plural).is_some_and(|e| e.custom) => {
                let replaced = self.resources.by_plural(&t.group, &t.plural);
                self.resources.install(t.clone());
                Some((t, replaced))
            }
            _ => None,
        };
        let created = self.storage.create(rt, &key(rt), body.clone());
        if let Ok(obj) = &created {
            self.account.record(rt, &opts.actor, Verb::Created, obj);
        }
        if let (Err(_), Some((t, replaced))) = (&created, replaced) {
            // Refused: serve what the stored CRD says (a namesake created meanwhile won), or
            // what was served before.
            let stored = self.storage.get(&key(rt), "", &name).and_then(|crd| resources::from_crd(&crd));
            match stored.or_else(|| replaced.map(|previous| (*previous).clone())) {
                Some(served) => self.resources.install(served),
                None => self.resources.remove(&t.group, &t.plural),
            }
        }
        created
    }

    /// How this cluster's release words the value of a CRD's failed CEL rule.
    fn shown_rule_value(&self) -> ShownValue {
        match self.config.release.shows_failed_rule_values() {
            true => ShownValue::NodeValue,
            false => ShownValue::SchemaType,
        }
    }

    /// Silently drops fields the simulated server does not keep, like an apiserver without the
    /// feature gate: a release before start ordinals, or the fault `drop-ordinals`; an init
    /// container's `restartPolicy` before sidecars.
    fn drop_unsupported_fields(&self, rt: &ResourceType, obj: &mut Value) {
        let drops = match (rt.group.as_str(), rt.plural.as_str()) {
            ("apps", "statefulsets") => self.faults.drops_ordinals() || !self.config.release.keeps_start_ordinals(),
            ("apps.kruise.io", "statefulsets") => self.faults.kruise_drops_ordinals(),
            _ => false,
        };
        if drops && let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("ordinals");
        }
        if !self.config.release.runs_sidecars() {
            // The pod spec itself, or the pod template of a workload.
            let spec = match (rt.group.as_str(), rt.plural.as_str()) {
                ("", "pods") => obj.get_mut("spec"),
                ("", "podtemplates") => obj.pointer_mut("/template/spec"),
                (_, "statefulsets" | "deployments" | "replicasets" | "daemonsets" | "jobs")
                | ("", "replicationcontrollers") => obj.pointer_mut("/spec/template/spec"),
                _ => None,
            };
            let inits = spec.and_then(|s| s.get_mut("initContainers")).and_then(Value::as_array_mut);
            for c in inits.into_iter().flatten().filter_map(Value::as_object_mut) {
                c.remove("restartPolicy");
            }
        }
    }

    /// Checks a CRD, fills its status, and returns the resource type it will serve.
    fn accept_crd(&self, rt: &ResourceType, name: &str, crd: &mut Value) -> ApiResult<ResourceType> {
        let Some(t) = resources::from_crd(crd) else {
            let err = validate::FieldError {
                field: "spec".into(),
                kind: validate::FieldErrorKind::Required,
                value: None,
                detail: "group, names.plural, names.kind and at least one served version are required".into(),
            };
            return Err(invalid(rt, name, &[err]));
        };
        let broken: Vec<String> = t
            .schemas
            .iter()
            .flat_map(|(version, s)| s.compile_errors().into_iter().map(move |e| format!("{version}: {e}")))
            .collect();
        if !broken.is_empty() {
            let err = validate::FieldError {
                field: "spec.validation.openAPIV3Schema".into(),
                kind: validate::FieldErrorKind::Invalid,
                value: Some(Value::String("x-kubernetes-validations".into())),
                detail: format!("compilation failed: {}", broken.join("; ")),
            };
            return Err(invalid(rt, name, &[err]));
        }
        let expected = format!("{}.{}", t.plural, t.group);
        if name != expected {
            let err = validate::FieldError {
                field: "metadata.name".into(),
                kind: validate::FieldErrorKind::Invalid,
                value: Some(Value::String(name.to_string())),
                detail: "must be spec.names.plural+\".\"+spec.group".to_string(),
            };
            return Err(invalid(rt, name, &[err]));
        }
        if self.resources.by_plural(&t.group, &t.plural).is_some_and(|existing| !existing.custom) {
            return Err(ApiError::already_exists(rt, name));
        }
        let now = object::now_rfc3339();
        crd["status"] = json!({
            "acceptedNames": crd.pointer("/spec/names").cloned().unwrap_or(json!({})),
            "storedVersions": [t.version()],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
        });
        Ok(t)
    }

    /// What a controller writes about an object it read: [`Cluster::update_with`], but only
    /// while it is the same incarnation (a namesake created since, with another uid, is
    /// refused with 409 and left alone). `f` edits a copy of the current object.
    pub fn update_incarnation(
        &self,
        rt: &ResourceType,
        obj: &Value,
        sub: Subresource,
        by: Component,
        f: impl FnOnce(&mut Value),
    ) -> ApiResult<Arc<Value>> {
        let uid = object::uid(obj).to_string();
        self.update_with(rt, object::namespace(obj), object::name(obj), sub, &WriteOptions::by(by), |cur| {
            if object::uid(cur) != uid {
                return Err(ApiError::conflict(rt, object::name(cur)));
            }
            let mut next = cur.clone();
            f(&mut next);
            Ok(next)
        })
    }

    /// Read-modify-write of one object through the kind's update rules. `f` gets the current
    /// object and returns the desired one (a PUT body, or the result of a patch).
    pub fn update_with(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        sub: Subresource,
        opts: &WriteOptions,
        f: impl FnOnce(&Value) -> ApiResult<Value>,
    ) -> ApiResult<Arc<Value>> {
        let version = rt.version().to_string();
        let res = key(rt);
        // Read before the update: admission cannot read storage while it is being updated.
        let admission = opts.user.as_ref().map(|user| (user, self.admission(rt, ns)));
        // So is what escalation prevention checks the new object against (a binding's role is
        // the stored one's: its roleRef cannot change).
        let escalation = match (&opts.user, self.storage.get(&res, ns, name)) {
            (Some(user), Some(stored)) => self.escalation_guard(rt, ns, name, user, &stored),
            _ => Default::default(),
        };
        let schema = rt.schema(&version);
        let prepare = |current: &Arc<Value>| -> ApiResult<Value> {
            let mut desired = f(current)?;
            check_type(rt, &version, &mut desired)?;
            if let Some(s) = &schema {
                decode_custom(rt, &version, s, &mut desired, opts)?;
            }
            self.drop_unsupported_fields(rt, &mut desired);
            let next = prepare_update(rt, sub, current, desired, schema.as_deref(), self.shown_rule_value())?;
            escalation.check(rt, name, &next, Some(current))?;
            if let Some((user, snapshot)) = &admission {
                snapshot.admit(
                    self,
                    &Request {
                        operation: Operation::Update,
                        resource: rt,
                        version: &version,
                        subresource: if sub == Subresource::Status { "status" } else { "" },
                        namespace: ns,
                        name,
                        object: Some(&next),
                        old_object: Some(current),
                        kind: None,
                        user,
                        dry_run: opts.dry_run,
                    },
                )?;
            }
            Ok(next)
        };
        if opts.dry_run {
            let current = self.get(rt, ns, name)?;
            return prepare(&current).map(Arc::new);
        }
        // The last finalizer of a deleting object is gone: the object goes too, in the same write.
        let emptied =
            |o: &Value| object::is_deleting(o) && object::finalizers(o).is_empty() && !self.waits_for_kubelet(rt, o);
        let updated = self.storage.update_or_remove(rt, &res, ns, name, prepare, emptied)?;
        let verb = match (&updated, sub) {
            (Updated::Unchanged(_), _) => Verb::Unchanged,
            (_, Subresource::Main) => Verb::Updated,
            (_, Subresource::Status) => Verb::StatusUpdated,
        };
        self.account.record(rt, &opts.actor, verb, updated.object());
        match &updated {
            Updated::Changed(o) => {
                if (rt.group.as_str(), rt.plural.as_str()) == ("apiextensions.k8s.io", "customresourcedefinitions")
                    && let Some(t) = resources::from_crd(o)
                {
                    self.resources.install(t);
                }
            }
            Updated::Removed(last) => {
                self.account.record(rt, &opts.actor, Verb::Removed, last);
                self.after_removal(rt, last);
            }
            Updated::Unchanged(_) => {}
        }
        Ok(updated.object().clone())
    }

    /// Replaces an object (PUT) with optimistic concurrency.
    pub fn replace(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        sub: Subresource,
        body: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Arc<Value>> {
        let body_name = object::name(&body);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if rt.namespaced {
            let body_ns = object::namespace(&body);
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        self.update_with(rt, ns, name, sub, opts, |_| Ok(body))
    }

    /// A pod with a node and a grace period is removed only when its kubelet confirms.
    fn waits_for_kubelet(&self, rt: &ResourceType, obj: &Value) -> bool {
        (rt.group.as_str(), rt.plural.as_str()) == ("", "pods")
            && obj.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(0) > 0
    }

    /// Deletes an object: at once, or by marking it (grace period, finalizers, propagation).
    pub fn delete(&self, rt: &ResourceType, ns: &str, name: &str, opts: &DeleteOptions) -> ApiResult<Deleted> {
        let res = key(rt);
        let current = self.get(rt, ns, name)?;
        check_preconditions(rt, name, &current, opts)?;
        if let Some(user) = &opts.user {
            self.admit(&Request {
                operation: Operation::Delete,
                resource: rt,
                version: rt.version(),
                subresource: "",
                namespace: ns,
                name,
                object: None,
                old_object: Some(&current),
                kind: None,
                user,
                dry_run: opts.dry_run,
            })?;
        }
        let propagation = opts.propagation.unwrap_or(if opts.orphan_dependents == Some(true) {
            Propagation::Orphan
        } else {
            Propagation::Background
        });
        let is_pod = (rt.group.as_str(), rt.plural.as_str()) == ("", "pods");
        let is_namespace = (rt.group.as_str(), rt.plural.as_str()) == ("", "namespaces");
        let grace = if is_pod { pod_grace(&current, opts.grace_period_seconds) } else { 0 };
        let mut add: Vec<&str> = match propagation {
            Propagation::Orphan => vec!["orphan"],
            Propagation::Foreground => vec!["foregroundDeletion"],
            Propagation::Background => vec![],
        };
        add.retain(|f| !object::finalizers(&current).iter().any(|g| g == f));
        let has_finalizers = !object::finalizers(&current).is_empty() || !add.is_empty();
        if opts.dry_run {
            return Ok(Deleted::Pending(current));
        }
        // One delete request, counted once: whether it removes the object, marks it, or finds
        // it marked already (its removal, later, is counted as such).
        // A CRD's first DELETE only marks it: its objects go first (see `crd_deletion`). A
        // repeat keeps the first one's deletionTimestamp, as the generic store does for an
        // object already being deleted.
        if crd_deletion::is_crd_resource(rt) && object::is_deleting(&current) && add.is_empty() {
            self.account.record(rt, &opts.actor, Verb::Deleted, &current);
            return Ok(Deleted::Pending(current));
        }
        if crd_deletion::is_crd_resource(rt) && !object::is_deleting(&current) {
            let marked = self.storage.update(rt, &res, ns, name, |cur| {
                check_preconditions(rt, name, cur, opts)?;
                let mut next = (**cur).clone();
                crd_deletion::mark_for_deletion(&mut next);
                Ok(next)
            })?;
            self.account.record(rt, &opts.actor, Verb::Deleted, marked.object());
            return Ok(Deleted::Pending(marked.object().clone()));
        }
        if grace > 0 || has_finalizers || is_namespace {
            if object::is_deleting(&current) && add.is_empty() && grace >= current_grace(&current) {
                self.account.record(rt, &opts.actor, Verb::Deleted, &current);
                return Ok(Deleted::Pending(current));
            }
            let deadline = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(grace);
            let marked = self.storage.update(rt, &res, ns, name, |cur| {
                // Checked again under the store's lock: a conditional delete (the eviction
                // subresource's) must not mark an object changed since it was read.
                check_preconditions(rt, name, cur, opts)?;
                let mut next = (**cur).clone();
                let meta = object::metadata_mut(&mut next);
                meta.insert("deletionTimestamp".into(), Value::String(object::format_time(deadline)));
                meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
                if !add.is_empty() {
                    let fins = meta.entry("finalizers").or_insert_with(|| json!([]));
                    if let Some(arr) = fins.as_array_mut() {
                        arr.extend(add.iter().map(|f| json!(f)));
                    }
                }
                if is_namespace {
                    next["status"]["phase"] = json!("Terminating");
                }
                Ok(next)
            })?;
            self.account.record(rt, &opts.actor, Verb::Deleted, marked.object());
            self.gc_wake.notify_one();
            return Ok(Deleted::Pending(marked.object().clone()));
        }
        let last = self.storage.remove(rt, &res, ns, name, |cur| check_preconditions(rt, name, cur, opts))?;
        self.account.record(rt, &opts.actor, Verb::Deleted, &last);
        self.account.record(rt, &opts.actor, Verb::Removed, &last);
        self.after_removal(rt, &last);
        Ok(Deleted::Gone(last))
    }

    /// Follow-up of a removal: CRDs stop serving their resource; the collector looks for orphans.
    fn after_removal(&self, rt: &ResourceType, last: &Value) {
        if (rt.group.as_str(), rt.plural.as_str()) == ("apiextensions.k8s.io", "customresourcedefinitions")
            && let Some(t) = resources::from_crd(last)
        {
            self.resources.remove(&t.group, &t.plural);
            self.storage.drop_resource(&(t.group, t.plural));
        }
        self.gc_wake.notify_one();
    }
}

fn current_grace(obj: &Value) -> i64 {
    obj.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(i64::MAX)
}

/// A pod's grace period: the request's, else its spec's (default 30); 0 for a pod that never ran
/// on a node or has finished (`CheckGracefulDelete`).
fn pod_grace(pod: &Value, requested: Option<i64>) -> i64 {
    let unscheduled = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("").is_empty();
    let finished = matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
    if unscheduled || finished {
        return 0;
    }
    requested
        .unwrap_or_else(|| pod.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(30))
        .max(0)
}

fn check_preconditions(rt: &ResourceType, name: &str, current: &Value, opts: &DeleteOptions) -> ApiResult<()> {
    if let Some(uid) = &opts.precondition_uid
        && uid != object::uid(current)
    {
        return Err(ApiError::precondition_failed(
            rt,
            name,
            &format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                object::uid(current)
            ),
        ));
    }
    if let Some(rv) = &opts.precondition_rv {
        let have = object::resource_version(current).to_string();
        if *rv != have {
            return Err(ApiError::precondition_failed(
                rt,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({have}). The object might have been modified"
                ),
            ));
        }
    }
    Ok(())
}

/// Decodes a custom resource as the apiserver does: unknown fields pruned (refused under
/// `fieldValidation=Strict`, reported under `Warn`), defaults filled in.
fn decode_custom(
    rt: &ResourceType,
    version: &str,
    schema: &CrdSchema,
    obj: &mut Value,
    opts: &WriteOptions,
) -> ApiResult<()> {
    let warnings = schema.decode(&rt.kind, version, obj, opts.field_validation)?;
    opts.warnings.extend(warnings);
    Ok(())
}

/// The update rules of the kind: what the caller may change, what the server keeps.
fn prepare_update(
    rt: &ResourceType,
    sub: Subresource,
    current: &Value,
    desired: Value,
    schema: Option<&CrdSchema>,
    shown: ShownValue,
) -> ApiResult<Value> {
    let name = object::name(current).to_string();
    let wanted_rv = desired.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("");
    if !wanted_rv.is_empty() && wanted_rv != object::resource_version(current).to_string() {
        return Err(ApiError::conflict(rt, &name));
    }
    if wanted_rv.is_empty() && rt.custom {
        let err = validate::FieldError {
            field: "metadata.resourceVersion".into(),
            kind: validate::FieldErrorKind::Invalid,
            value: Some(json!(0)),
            detail: "must be specified for an update".into(),
        };
        return Err(invalid(rt, &name, &[err]));
    }
    let mut next = match sub {
        Subresource::Main => {
            let mut next = desired;
            if rt.status_subresource {
                match current.get("status") {
                    Some(s) => next["status"] = s.clone(),
                    None => {
                        next.as_object_mut().map(|m| m.remove("status"));
                    }
                }
            }
            next
        }
        Subresource::Status => {
            let mut next = current.clone();
            match desired.get("status") {
                Some(s) => next["status"] = s.clone(),
                None => {
                    next.as_object_mut().map(|m| m.remove("status"));
                }
            }
            next
        }
    };
    // Metadata the server owns is kept from the stored object.
    let kept: Vec<(&str, Option<Value>)> = [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "name",
    ]
    .into_iter()
    .map(|k| (k, current.pointer(&format!("/metadata/{k}")).cloned()))
    .collect();
    let new_finalizers = object::finalizers(&next);
    let meta = object::metadata_mut(&mut next);
    for (k, v) in kept {
        match v {
            Some(v) => meta.insert(k.to_string(), v),
            None => meta.remove(k),
        };
    }
    meta.remove("selfLink");
    if object::is_deleting(current) {
        let old = object::finalizers(current);
        if let Some(added) = new_finalizers.iter().find(|f| !old.contains(f)) {
            let err = validate::FieldError {
                field: "metadata.finalizers".into(),
                kind: validate::FieldErrorKind::Forbidden,
                value: None,
                detail: format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers [\"{added}\"]"
                ),
            };
            return Err(invalid(rt, &name, &[err]));
        }
    }
    if (rt.group.as_str(), rt.plural.as_str()) == ("", "services") && sub == Subresource::Main {
        service_ips::keep_allocated(current, &mut next);
    }
    defaults::apply(rt, &mut next);
    if rt.has_generation()
        && sub == Subresource::Main
        && generation_relevant(rt, current) != generation_relevant(rt, &next)
    {
        let generation = current.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0) + 1;
        object::metadata_mut(&mut next).insert("generation".into(), json!(generation));
    }
    let mut errs = validate::validate_update(&rt.group, &rt.plural, current, &next);
    if let Some(s) = schema {
        let part = if sub == Subresource::Status { Part::Status } else { Part::Whole };
        errs.extend(s.validate(&next, Some(current), part, rt.scale.as_ref(), shown));
    }
    if !errs.is_empty() {
        return Err(invalid(rt, &name, &errs));
    }
    Ok(next)
}
