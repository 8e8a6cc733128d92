//! The request dispatcher: decodes an HTTP request, routes it to discovery or to the resource
//! verbs, and encodes the answer. Every failure becomes a `Status` response; nothing here
//! panics on client input.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Response, header, request::Parts};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::store::validate::FieldError;
use crate::{
    api::{
        auth, discovery, eviction, exec, impersonation, list, logs,
        negotiate::{self, Output},
        openapi,
        patch::{self, PatchError},
        protobuf,
        query::Query,
        render,
        response::{self, Body},
        reviews,
        routes::{self, ResourcePath, Route},
        scale, watch,
    },
    cluster::Cluster,
    store::{
        actor::Actor,
        crd_deletion,
        error::{ApiError, ApiResult},
        object,
        registry::{DeleteOptions, Deleted, Propagation, Subresource, Warnings, WriteOptions},
        resources::ResourceType,
        schema::FieldValidation,
        tokens::UserInfo,
        views,
    },
};

/// Content-Type of the empty OpenAPI v2 document: the `@` form that clients send in Accept must
/// not be echoed, Go's MIME parser rejects it.
const OPENAPI_V2_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Answers one request.
pub async fn handle(cluster: Arc<Cluster>, server_address: String, req: http::Request<Incoming>) -> Response<Body> {
    let request = format!("{} {}", req.method(), req.uri().path());
    if let Some(resp) = injected_fault(&cluster, &request).await {
        return resp;
    }
    let (parts, body) = req.into_parts();
    tracing::debug!(
        cluster = %cluster.config.name,
        method = %parts.method,
        uri = %parts.uri,
        content_type = ?parts.headers.get(header::CONTENT_TYPE),
        accept = ?parts.headers.get(header::ACCEPT),
        "request"
    );
    let accept = parts.headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).map(str::to_string);
    let accept = accept.as_deref();
    let if_none_match = parts.headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).map(str::to_string);
    let if_none_match = if_none_match.as_deref();
    let route = routes::parse(parts.uri.path());
    // Without `--auth` every caller may do everything, as the administrator (or whom it
    // impersonates).
    let user = if cluster.config.auth {
        let user = match auth::authenticate(&cluster, &parts.headers)
            .and_then(|u| impersonation::apply(&cluster, u, &parts.headers))
        {
            Ok(u) => u,
            Err(e) => return response::error(&e),
        };
        let attrs = auth::attributes(&parts.method, parts.uri.path(), &route, parts.uri.query());
        let checks = [Some(attrs.clone()), auth::connect_also_creates(&attrs)];
        if let Some(e) = checks.iter().flatten().find_map(|a| auth::authorize(&cluster, &user, a).err()) {
            return response::error(&e);
        }
        user
    } else {
        // Every caller is the administrator, who may impersonate anyone (`kubectl --as`).
        match impersonation::apply(&cluster, UserInfo::admin(), &parts.headers) {
            Ok(u) => u,
            Err(e) => return response::error(&e),
        }
    };
    match route {
        Route::Version => response::json(200, &discovery::version(&cluster)),
        Route::Health => response::raw(200, "text/plain; charset=utf-8", "ok"),
        Route::Api | Route::Apis if parts.method != Method::GET => {
            response::error(&ApiError::method_not_allowed(parts.method.as_str()))
        }
        Route::Api => match negotiate::discovery(accept, cluster.config.release.serves_discovery_v2()).version() {
            None => response::json(200, &discovery::api_versions(&server_address)),
            Some(dv) => aggregated(&discovery::aggregated(&cluster, true, dv), dv, if_none_match),
        },
        Route::Apis => match negotiate::discovery(accept, cluster.config.release.serves_discovery_v2()).version() {
            None => response::json(200, &discovery::api_group_list(&cluster)),
            Some(dv) => aggregated(&discovery::aggregated(&cluster, false, dv), dv, if_none_match),
        },
        Route::Group(g) => match discovery::api_group_doc(&cluster, &g) {
            Some(doc) => response::json(200, &doc),
            None => response::error(&ApiError::no_route()),
        },
        Route::GroupVersion { group, version } => match discovery::api_resource_list(&cluster, &group, &version) {
            Some(doc) => response::json(200, &doc),
            None => response::error(&ApiError::no_route()),
        },
        Route::OpenApiV2 => response::raw(200, OPENAPI_V2_TYPE, Bytes::new()),
        Route::OpenApiV3 => openapi::serve(&cluster, parts.uri.path()),
        Route::Unknown => response::error(&ApiError::no_route()),
        Route::Resource(path) => match resource(&cluster, &parts, path, body, accept, &user).await {
            Ok(resp) => resp,
            Err(e) => response::error(&e),
        },
    }
}

/// Applies the cluster's injected faults to a request (`METHOD PATH`): waits out a hang
/// (listed among the held requests meanwhile), adds latency, and answers with an injected
/// error when one is drawn.
async fn injected_fault(cluster: &Cluster, request: &str) -> Option<Response<Body>> {
    cluster.faults.hold_while_hung(request).await;
    let latency = cluster.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let code = cluster.faults.draw_error()?;
    let (reason, message) = match code {
        429 => ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
        500 => ("InternalError", "Internal error occurred: injected fault"),
        503 => ("ServiceUnavailable", "the server is currently unable to handle the request"),
        504 => ("Timeout", "Timeout: the server was unable to return a response in the time allotted"),
        _ => ("InternalError", "injected fault"),
    };
    Some(response::error(&ApiError::custom(code, reason, message)))
}

/// Aggregated discovery as the apiserver serves it: with an ETag (the hash of the document,
/// so it changes with every type served or removed), and `304 Not Modified` for a client
/// whose cached copy (`If-None-Match`) is still the current one.
fn aggregated(doc: &Value, dv: &str, if_none_match: Option<&str>) -> Response<Body> {
    let bytes = serde_json::to_vec(doc).expect("JSON values always serialize");
    let etag = format!("\"{}\"", openapi::hash(&bytes));
    let mut resp = if if_none_match.is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag)) {
        let mut resp = Response::new(response::full(Bytes::new()));
        *resp.status_mut() = http::StatusCode::NOT_MODIFIED;
        resp
    } else {
        let mut resp = response::json_bytes(200, bytes);
        let content_type = format!("application/json;g=apidiscovery.k8s.io;v={dv};as=APIGroupDiscoveryList");
        if let Ok(v) = http::HeaderValue::from_str(&content_type) {
            resp.headers_mut().insert(header::CONTENT_TYPE, v);
        }
        resp
    };
    if let Ok(v) = http::HeaderValue::from_str(&etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp
}

/// Reads the request body up to the cluster's limit.
async fn read_body(cluster: &Cluster, body: Incoming) -> ApiResult<Bytes> {
    let limit = cluster.config.max_body_bytes;
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(ApiError::too_large(limit)),
        Err(e) => Err(ApiError::bad_request(format!("unable to read the request body: {e}"))),
    }
}

fn content_type(parts: &Parts) -> String {
    parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Decodes an object body (JSON, or YAML when the client says so).
fn decode_object(parts: &Parts, bytes: &[u8]) -> ApiResult<Value> {
    if content_type(parts) == "application/vnd.kubernetes.protobuf" {
        return protobuf::decode_object(bytes).map_err(|e| match e {
            protobuf::ProtobufError::Unsupported(_) => ApiError::unsupported_media_type(e.to_string()),
            protobuf::ProtobufError::Malformed(_) => ApiError::bad_request(e.to_string()),
        });
    }
    let value: Value = if content_type(parts).contains("yaml") {
        serde_yaml::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?
    } else {
        serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))?
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(format!(
            "couldn't get version/kind; json parse error: expected a JSON object, got {}",
            kind_of(&value)
        )));
    }
    Ok(value)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The options of a write that came through the API: the caller's, and who the caller is (so
/// that the admission policies run on it).
fn write_options(q: &Query, user: &UserInfo, warnings: &Warnings, parts: &Parts) -> ApiResult<WriteOptions> {
    let options_kind = match parts.method {
        Method::POST => "CreateOptions",
        Method::PUT => "UpdateOptions",
        _ => "PatchOptions",
    };
    Ok(WriteOptions {
        actor: actor(user, parts),
        dry_run: q.dry_run_of(options_kind)?,
        field_manager: q.field_manager.clone(),
        force: q.force.unwrap_or(false),
        user: Some(user.clone()),
        field_validation: FieldValidation::parse(q.field_validation.as_deref(), options_kind)?,
        warnings: warnings.clone(),
    })
}

/// Who a request is, for the resource account (see [`Actor::of_request`]).
fn actor(user: &UserInfo, parts: &Parts) -> Actor {
    Actor::of_request(user, parts.headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()))
}

/// `Warning: 299 - "<text>"` headers, one per warning of the write (kubectl prints each as
/// `Warning: <text>`).
fn add_warnings(resp: &mut Response<Body>, warnings: &Warnings) {
    for w in warnings.all() {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = http::HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            resp.headers_mut().append(http::header::WARNING, v);
        }
    }
}

async fn resource(
    cluster: &Arc<Cluster>,
    parts: &Parts,
    path: ResourcePath,
    body: Incoming,
    accept: Option<&str>,
    user: &UserInfo,
) -> ApiResult<Response<Body>> {
    let rt = cluster.resources.lookup(&path.group, &path.version, &path.plural).ok_or_else(ApiError::no_route)?;
    // A namespaced object needs a namespace in its URL; a cluster-scoped one must not have one.
    if (!rt.namespaced && path.namespace.is_some())
        || (rt.namespaced && path.name.is_some() && path.namespace.is_none())
    {
        return Err(ApiError::no_route());
    }
    // A view (events.k8s.io/v1 Events) is read through itself, which converts what it shows,
    // and written through the resource it views, after converting what was sent.
    let stored_rt = match rt.view {
        Some(_) => {
            let (group, plural) = rt.storage_key();
            cluster.resources.by_plural(&group, &plural).ok_or_else(ApiError::no_route)?
        }
        None => rt.clone(),
    };
    let stored_version = if rt.view.is_some() { stored_rt.version() } else { path.version.as_str() };
    let q = Query::parse(parts.uri.query())?;
    let out = negotiate::output(accept).ok_or_else(|| ApiError::not_acceptable(accept.unwrap_or("")))?;
    let ns = path.namespace.as_deref();
    let obj_ns = ns.unwrap_or("");
    let version = path.version.as_str();
    let method = &parts.method;
    let warnings = Warnings::default();
    let answer = match (method, path.name.as_deref(), path.subresource.as_deref()) {
        (&Method::POST, None, None) if rt.create_only() => {
            let bytes = read_body(cluster, body).await?;
            let review = decode_object(parts, &bytes)?;
            let answer = match rt.plural.as_str() {
                "selfsubjectreviews" => Ok(reviews::self_review(user, version, &review)),
                "selfsubjectrulesreviews" => reviews::rules_review(cluster, user, &review),
                _ => reviews::access_review(cluster, user, &review),
            };
            Ok(response::json(201, &answer?))
        }
        (m, _, _) if rt.create_only() => Err(ApiError::method_not_allowed(m.as_str())),
        (&Method::POST, Some(name), Some("token")) if rt.group.is_empty() && rt.plural == "serviceaccounts" => {
            let bytes = read_body(cluster, body).await?;
            let request =
                if bytes.iter().all(u8::is_ascii_whitespace) { json!({}) } else { decode_object(parts, &bytes)? };
            Ok(response::json(201, &reviews::token_request(cluster, obj_ns, name, &request)?))
        }
        (&Method::GET, None, None) if q.watch => {
            cluster.counters.watches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let lines = watch::start(cluster, rt.clone(), version, ns, q, out)?;
            Ok(response::stream(lines))
        }
        (&Method::GET, None, None) => {
            cluster.counters.lists.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(response::json_bytes(200, list::serve(cluster, &rt, version, ns, &q, out)?))
        }
        (&Method::GET, Some(name), None) => {
            let obj = cluster.get(&rt, obj_ns, name)?;
            Ok(response::json(200, &render::object(&rt, version, &obj, out, &q)))
        }
        (&Method::GET, Some(name), Some("status")) if rt.status_subresource => {
            Ok(response::json(200, &render::as_version(&rt, version, &*cluster.get(&rt, obj_ns, name)?)))
        }
        (&Method::GET, Some(name), Some("log")) if rt.group.is_empty() && rt.plural == "pods" => {
            logs::serve(cluster, obj_ns, name, parts.uri.query())
        }
        (&Method::GET | &Method::POST, Some(name), Some("exec")) if rt.group.is_empty() && rt.plural == "pods" => {
            exec::serve(cluster, obj_ns, name, parts)
        }
        (&Method::GET, Some(name), Some("scale")) if rt.scale.is_some() => {
            Ok(response::json(200, &scale::get(cluster, &rt, obj_ns, name)?))
        }
        (&Method::POST, Some(name), Some("eviction")) if rt.group.is_empty() && rt.plural == "pods" => {
            let bytes = read_body(cluster, body).await?;
            let request = decode_object(parts, &bytes)?;
            Ok(response::json(
                201,
                &eviction::evict(cluster, obj_ns, name, &request, q.dry_run_of("CreateOptions")?, actor(user, parts))?,
            ))
        }
        (&Method::POST, None, None) => {
            if cluster.crd_terminating(&stored_rt) {
                return Err(crd_deletion::create_refused(&rt));
            }
            let bytes = read_body(cluster, body).await?;
            let mut obj = views::from_view(&rt, &decode_object(parts, &bytes)?);
            let created = cluster.create_versioned(
                &stored_rt,
                stored_version,
                ns,
                &mut obj,
                &write_options(&q, user, &warnings, parts)?,
            )?;
            Ok(response::json(201, &render::as_version(&rt, version, &created)))
        }
        (&Method::PUT, Some(name), sub @ (None | Some("status"))) => {
            let sub = subresource(&rt, sub)?;
            let bytes = read_body(cluster, body).await?;
            let obj = views::from_view(&rt, &decode_object(parts, &bytes)?);
            let updated =
                cluster.replace(&stored_rt, obj_ns, name, sub, obj, &write_options(&q, user, &warnings, parts)?)?;
            Ok(response::json(200, &render::as_version(&rt, version, &updated)))
        }
        (&Method::PUT, Some(name), Some("scale")) if rt.scale.is_some() => {
            let bytes = read_body(cluster, body).await?;
            let obj = decode_object(parts, &bytes)?;
            Ok(response::json(
                200,
                &scale::replace(cluster, &rt, obj_ns, name, obj, &write_options(&q, user, &warnings, parts)?)?,
            ))
        }
        (&Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
            let sub = subresource(&rt, sub)?;
            let bytes = read_body(cluster, body).await?;
            let opts = write_options(&q, user, &warnings, parts)?;
            let (code, obj) = patch_object(cluster, &rt, &stored_rt, parts, ns, name, sub, &bytes, &q, opts)?;
            Ok(response::json(code, &render::as_version(&rt, version, &obj)))
        }
        (&Method::PATCH, Some(name), Some("scale")) if rt.scale.is_some() => {
            let bytes = read_body(cluster, body).await?;
            let kind = patch_kind(&content_type(parts))?;
            let patch_doc = decode_patch(kind, &bytes)?;
            let opts = write_options(&q, user, &warnings, parts)?;
            let scaled =
                scale::patch(cluster, &rt, obj_ns, name, &opts, |cur| apply_patch(kind, cur, &patch_doc, None))?;
            Ok(response::json(200, &scaled))
        }
        (&Method::DELETE, Some(name), None) => {
            let bytes = read_body(cluster, body).await?;
            let opts = delete_options(&bytes, &q, user, parts)?;
            match cluster.delete(&rt, obj_ns, name, &opts)? {
                Deleted::Pending(obj) => Ok(response::json(200, &render::as_version(&rt, version, &obj))),
                Deleted::Gone(obj) if rt.plural == "pods" && rt.group.is_empty() => {
                    Ok(response::json(200, &render::as_version(&rt, version, &obj)))
                }
                Deleted::Gone(obj) => Ok(response::json(200, &deleted_status(&rt, &obj))),
            }
        }
        (&Method::DELETE, None, None) => {
            let bytes = read_body(cluster, body).await?;
            let opts = delete_options(&bytes, &q, user, parts)?;
            let filter = list::Filter::new(&rt, ns, &q)?;
            let (items, _) = cluster.storage.list(&rt.storage_key(), ns);
            let mut deleted = Vec::new();
            for obj in items.iter().filter(|o| filter.matches(o)) {
                match cluster.delete(&rt, object::namespace(obj), object::name(obj), &opts) {
                    Ok(Deleted::Gone(o) | Deleted::Pending(o)) => deleted.push(o),
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            let refs: Vec<&Value> = deleted.iter().map(|o| o.as_ref()).collect();
            let meta = json!({"resourceVersion": cluster.storage.current_rv().to_string()});
            Ok(response::json(200, &render::list(&rt, version, &refs, meta, Output::Json, &q)))
        }
        (m, _, Some(sub))
            if !matches!(m, &Method::GET | &Method::PUT | &Method::PATCH) || !matches!(sub, "status" | "scale") =>
        {
            Err(ApiError::no_route())
        }
        (m, _, _) => Err(ApiError::method_not_allowed(m.as_str())),
    };
    answer.map(|mut resp| {
        add_warnings(&mut resp, &warnings);
        resp
    })
}

fn subresource(rt: &ResourceType, sub: Option<&str>) -> ApiResult<Subresource> {
    match sub {
        None => Ok(Subresource::Main),
        Some("status") if rt.status_subresource => Ok(Subresource::Status),
        Some(_) => Err(ApiError::no_route()),
    }
}

fn deleted_status(rt: &ResourceType, obj: &Value) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": object::name(obj), "group": rt.group, "kind": rt.plural, "uid": object::uid(obj)},
    })
}

fn delete_options(bytes: &[u8], q: &Query, user: &UserInfo, parts: &Parts) -> ApiResult<DeleteOptions> {
    let mut opts = if bytes.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else {
        let body: Value = serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("couldn't decode DeleteOptions: {e}")))?;
        DeleteOptions::from_json(&body)?
    };
    if opts.grace_period_seconds.is_none() {
        opts.grace_period_seconds = q.grace_period_seconds;
    }
    if opts.propagation.is_none() {
        opts.propagation = match q.propagation_policy.as_deref() {
            Some("Orphan") => Some(Propagation::Orphan),
            Some("Foreground") => Some(Propagation::Foreground),
            Some("Background") => Some(Propagation::Background),
            _ => None,
        };
    }
    opts.dry_run |= q.dry_run_of("DeleteOptions")?;
    opts.user = Some(user.clone());
    opts.actor = actor(user, parts);
    Ok(opts)
}

/// The patch formats a PATCH may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchKind {
    Merge,
    Json,
    Strategic,
    Apply,
}

fn patch_kind(content_type: &str) -> ApiResult<PatchKind> {
    match content_type {
        "application/merge-patch+json" => Ok(PatchKind::Merge),
        "application/json-patch+json" => Ok(PatchKind::Json),
        "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
        "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchKind::Apply),
        other => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"
        ))),
    }
}

fn decode_patch(kind: PatchKind, bytes: &[u8]) -> ApiResult<Value> {
    let doc: Value = if kind == PatchKind::Apply {
        serde_yaml::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
    };
    let shape_ok = match kind {
        PatchKind::Json => doc.is_array(),
        _ => doc.is_object(),
    };
    if !shape_ok {
        return Err(ApiError::bad_request(format!("invalid patch: the patch document is {}", kind_of(&doc))));
    }
    Ok(doc)
}

fn patch_error(e: PatchError) -> ApiError {
    match e {
        PatchError::BadRequest(m) => ApiError::bad_request(m),
        PatchError::Invalid(m) => ApiError::custom(422, "Invalid", m),
        PatchError::UnsupportedMediaType(m) => ApiError::unsupported_media_type(m),
    }
}

/// Applies a patch document to the current object. `kind_of_object` is the (group, kind) for
/// strategic merge; `None` means the Scale subresource (built in).
fn apply_patch(kind: PatchKind, current: &Value, doc: &Value, rt: Option<&ResourceType>) -> ApiResult<Value> {
    let strategic = |doc: &Value| -> ApiResult<Value> {
        let (group, k) = rt.map(|r| (r.group.as_str(), r.kind.as_str())).unwrap_or(("autoscaling", "Scale"));
        match (rt.is_some_and(|r| r.custom), patch::builtin_kind(group, k)) {
            (false, Some(bk)) => patch::apply_strategic_merge_patch(current, doc, bk).map_err(patch_error),
            _ if rt.is_none() => patch::apply_merge_patch(current, doc).map_err(patch_error),
            _ => Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            )),
        }
    };
    match kind {
        PatchKind::Merge => patch::apply_merge_patch(current, doc).map_err(patch_error),
        PatchKind::Json => patch::apply_json_patch(current, doc).map_err(patch_error),
        PatchKind::Strategic => strategic(doc),
        // Server-side apply, approximated: the applied configuration merges into the object.
        PatchKind::Apply if rt.is_some_and(|r| r.custom) => patch::apply_merge_patch(current, doc).map_err(patch_error),
        PatchKind::Apply => strategic(doc),
    }
}

fn patch_options_invalid(err: FieldError) -> ApiError {
    ApiError::invalid_field("PatchOptions", "meta.k8s.io", "", &err)
}

#[allow(clippy::too_many_arguments)]
fn patch_object(
    cluster: &Cluster,
    addressed: &ResourceType,
    rt: &ResourceType,
    parts: &Parts,
    ns: Option<&str>,
    name: &str,
    sub: Subresource,
    bytes: &[u8],
    q: &Query,
    opts: WriteOptions,
) -> ApiResult<(u16, Arc<Value>)> {
    let kind = patch_kind(&content_type(parts))?;
    if kind == PatchKind::Apply && q.field_manager.is_none() {
        return Err(patch_options_invalid(FieldError::required("fieldManager", "is required for apply patch")));
    }
    if kind != PatchKind::Apply && q.force.is_some() {
        return Err(patch_options_invalid(FieldError::forbidden("force", "may not be specified for non-apply patch")));
    }
    let doc = decode_patch(kind, bytes)?;
    let obj_ns = ns.unwrap_or("");
    if kind == PatchKind::Apply
        && let Some(schema) = rt.schema(rt.version())
    {
        schema.check_applied(&doc, &format!("{obj_ns}/{name}"), &rt.api_version(rt.version()), &rt.kind)?;
    }
    // Server-side apply creates the object when it does not exist yet.
    if kind == PatchKind::Apply && sub == Subresource::Main && cluster.get(rt, obj_ns, name).is_err() {
        let mut obj = doc.clone();
        let meta = object::metadata_mut(&mut obj);
        meta.insert("name".into(), json!(name));
        let created = cluster.create(rt, ns, views::from_view(addressed, &obj), &opts)?;
        return Ok((201, created));
    }
    // The patch is written against the addressed resource's form of the object.
    let updated = cluster.update_with(rt, obj_ns, name, sub, &opts, |cur| {
        let patched = apply_patch(kind, &views::to_view(addressed, cur), &doc, Some(addressed))?;
        Ok(views::from_view(addressed, &patched))
    })?;
    Ok((200, updated))
}
