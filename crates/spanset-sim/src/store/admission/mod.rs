//! Validating admission policies (`admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy
//! and ValidatingAdmissionPolicyBinding), evaluated as the apiserver evaluates them: after a
//! write passed authorization and the kind's own validation, before it is stored (dry runs
//! included), on create, update (patches and the `/status` and `/scale` subresources too) and
//! delete. For every policy whose `matchConstraints` cover the request and each of its bindings
//! whose `matchResources` do, the binding's params are looked up, the `matchConditions` decide
//! whether it applies, the `variables` are computed and the `validations` run; the first
//! refusal of a binding with the `Deny` action refuses the request with the apiserver's words
//! (`statefulsets.apps "redis" is forbidden: ValidatingAdmissionPolicy 'P' with binding 'B'
//! denied request: MESSAGE`, code by the validation's `reason`, 422 Invalid by default) and is
//! written to the audit log. An error (an expression that fails, a missing param kind) follows
//! the policy's `failurePolicy`: `Fail` (the default) refuses, `Ignore` lets the request pass.
//!
//! Only requests that come through the API are admitted; the simulated components (StatefulSet
//! controller, kubelets, garbage collector) write through the store directly, as if their
//! identities were exempt. Not supported: the `authorizer` variable, `auditAnnotations`
//! (accepted, not evaluated), `matchPolicy: Equivalent` across versions (each resource has one
//! version here), and the `Warn`/`Audit` actions (accepted; they refuse nothing, as on a real
//! server, but leave no warning header or audit annotation).

pub mod cel;
pub mod check;
pub mod matching;
#[cfg(test)]
mod shipped_tests;

use std::sync::Arc;

use serde_json::{Map, Value, json};

use self::cel::{Bindings, to_cel};
use crate::{
    cluster::Cluster,
    store::{
        audit::{Attributes, AuditRecord},
        error::{ApiError, ApiResult},
        object,
        resources::ResourceType,
        selector::LabelSelector,
        tokens::UserInfo,
    },
};

/// The API group of the policy kinds.
pub const GROUP: &str = "admissionregistration.k8s.io";
/// Plural of ValidatingAdmissionPolicy.
pub const POLICIES: &str = "validatingadmissionpolicies";
/// Plural of ValidatingAdmissionPolicyBinding.
pub const BINDINGS: &str = "validatingadmissionpolicybindings";

/// The admission operation of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// POST, and an apply patch that creates.
    Create,
    /// PUT and PATCH, subresources included.
    Update,
    /// DELETE (each object of a collection delete on its own).
    Delete,
}

impl Operation {
    /// `CREATE`, `UPDATE`, `DELETE`, as rules and `request.operation` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Update => "update",
            Operation::Delete => "delete",
        }
    }
}

/// One write as admission sees it (`admission.Attributes`).
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// What is done.
    pub operation: Operation,
    /// The resource written (for `/scale`, the parent's).
    pub resource: &'a ResourceType,
    /// The version of the resource in the URL.
    pub version: &'a str,
    /// `""`, `status` or `scale`.
    pub subresource: &'a str,
    /// The object's namespace (empty when cluster-scoped).
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The object as it would be stored (none on delete); for `/scale`, the Scale.
    pub object: Option<&'a Value>,
    /// The stored object (none on create); for `/scale`, the current Scale.
    pub old_object: Option<&'a Value>,
    /// `(group, version, kind)` of `object` when it is not the resource's own kind (Scale).
    pub kind: Option<(&'a str, &'a str, &'a str)>,
    /// Who asks.
    pub user: &'a UserInfo,
    /// `dryRun=All`.
    pub dry_run: bool,
}

impl Request<'_> {
    /// The `request` variable of CEL (`admission.k8s.io/v1` AdmissionRequest's fields).
    fn to_cel(&self) -> kube_cel::cel::Value {
        let (kg, kv, kk) = self.kind.unwrap_or((&self.resource.group, self.version, &self.resource.kind));
        let kind = json!({"group": kg, "version": kv, "kind": kk});
        let resource = json!({"group": self.resource.group, "version": self.version, "resource": self.resource.plural});
        let mut request = json!({
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "operation": self.operation.as_str(),
            "userInfo": {"username": self.user.name, "groups": self.user.groups},
            "dryRun": self.dry_run,
        });
        // The apiserver hands CEL the AdmissionRequest as its JSON, whose empty strings are
        // omitted: a cluster-scoped object's request has no `namespace` key at all, so that
        // `request.namespace` is an error there ("no such key") and only `has()` can ask.
        for (key, value) in [
            ("subResource", self.subresource),
            ("requestSubResource", self.subresource),
            ("name", self.name),
            ("namespace", self.namespace),
        ] {
            if !value.is_empty() {
                request[key] = json!(value);
            }
        }
        to_cel(&request)
    }

    /// The name the refusal names: the request's, else the object's (or its generateName).
    fn display_name(&self) -> String {
        if !self.name.is_empty() {
            return self.name.to_string();
        }
        let meta = self.object.and_then(|o| o.get("metadata"));
        let field = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str).filter(|s| !s.is_empty());
        field("name").or_else(|| field("generateName")).unwrap_or("Unknown").to_string()
    }
}

/// Why a binding refuses a request.
#[derive(Debug, Clone, PartialEq)]
struct Denial {
    message: String,
    reason: &'static str,
}

impl Denial {
    fn invalid(message: impl Into<String>) -> Self {
        Self { message: message.into(), reason: "Invalid" }
    }
}

/// The `reason` a validation may give, and its HTTP code (`reasonToCode`).
pub fn reason_code(reason: &str) -> Option<(&'static str, u16)> {
    match reason {
        "Invalid" => Some(("Invalid", 422)),
        "Forbidden" => Some(("Forbidden", 403)),
        "Unauthorized" => Some(("Unauthorized", 401)),
        "RequestEntityTooLarge" => Some(("RequestEntityTooLarge", 413)),
        _ => None,
    }
}

fn by_name(mut items: Vec<Arc<Value>>) -> Vec<Arc<Value>> {
    items.sort_by(|a, b| object::name(a).cmp(object::name(b)));
    items
}

fn labels(obj: Option<&Value>) -> Option<&Map<String, Value>> {
    obj.and_then(|o| o.pointer("/metadata/labels")).and_then(Value::as_object)
}

/// The params of one binding.
enum Params {
    /// The policy takes none: evaluate once, `params` null.
    None,
    /// Evaluate once per object.
    Found(Vec<Arc<Value>>),
    /// None found and `parameterNotFoundAction: Allow`: the binding does not apply.
    NotFoundAllow,
    /// None found and `parameterNotFoundAction: Deny`.
    NotFoundDeny,
}

/// What admission needs from storage for the requests of one resource in one namespace: the
/// policies and their bindings (by name), each binding's params, and the namespace object. It
/// is read before a write's read-modify-write starts, since the evaluation then runs inside
/// the storage's update (where storage cannot be read again).
pub struct Snapshot {
    entries: Vec<Entry>,
    namespace: Option<Arc<Value>>,
}

struct Entry {
    policy: Arc<Value>,
    binding: Arc<Value>,
    /// The binding's params, or why they cannot be had (a failure of the policy).
    params: Result<Params, String>,
}

impl Cluster {
    /// Reads what admission needs for writes of `resource` in `namespace`.
    pub fn admission(&self, resource: &ResourceType, namespace: &str) -> Snapshot {
        let (policies, _) = self.storage.list(&(GROUP.to_string(), POLICIES.to_string()), None);
        if policies.is_empty() {
            return Snapshot { entries: Vec::new(), namespace: None };
        }
        let (bindings, _) = self.storage.list(&(GROUP.to_string(), BINDINGS.to_string()), None);
        let bindings = by_name(bindings);
        let mut entries = Vec::new();
        for policy in by_name(policies) {
            for binding in bindings.iter().filter(|b| spec_str(b, "policyName") == Some(object::name(&policy))) {
                let params = self.params(&policy, binding, resource, namespace);
                entries.push(Entry { policy: policy.clone(), binding: binding.clone(), params });
            }
        }
        let namespace = (resource.namespaced && !namespace.is_empty())
            .then(|| self.storage.get(&(String::new(), "namespaces".into()), "", namespace))
            .flatten();
        Snapshot { entries, namespace }
    }

    /// Runs the stored policies on a request: `Ok` admits it, an error refuses it. Not to be
    /// called while storage is being updated (use [`Cluster::admission`] first, then
    /// [`Snapshot::admit`]).
    pub fn admit(&self, req: &Request<'_>) -> ApiResult<()> {
        self.admission(req.resource, req.namespace).admit(self, req)
    }

    /// The params a binding names (`paramRef`) for its policy's `paramKind`, looked up in the
    /// request's namespace unless the binding names one.
    fn params(
        &self,
        policy: &Value,
        binding: &Value,
        resource: &ResourceType,
        namespace: &str,
    ) -> Result<Params, String> {
        let Some(kind) = policy.pointer("/spec/paramKind").filter(|k| !k.is_null()) else {
            return Ok(Params::None);
        };
        let api_version = kind.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind_name = kind.get("kind").and_then(Value::as_str).unwrap_or("");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let rt =
            self.resources.by_kind(group, kind_name).filter(|rt| rt.serves(version)).ok_or_else(|| {
                format!("failed to configure policy: paramKind {api_version} {kind_name} is not served")
            })?;
        let Some(pref) = binding.pointer("/spec/paramRef").filter(|p| !p.is_null()) else {
            return Err("failed to configure binding: the policy has a paramKind, the binding no paramRef".into());
        };
        let ns = if rt.namespaced {
            let ns = pref.get("namespace").and_then(Value::as_str).filter(|s| !s.is_empty());
            match ns.or((resource.namespaced && !namespace.is_empty()).then_some(namespace)) {
                Some(ns) => ns,
                None => {
                    return Err(
                        "failed to configure binding: cannot use a namespaced paramRef without a namespace in a binding that matches cluster-scoped resources".into(),
                    );
                }
            }
        } else {
            ""
        };
        let key = rt.storage_key();
        let found: Vec<Arc<Value>> = match pref.get("name").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            Some(name) => self.storage.get(&key, ns, name).into_iter().collect(),
            None => {
                let selector = LabelSelector::from_api(pref.get("selector").unwrap_or(&json!({})))
                    .map_err(|e| format!("failed to configure binding: spec.paramRef.selector: {e}"))?;
                let (items, _) = self.storage.list(&key, rt.namespaced.then_some(ns));
                by_name(items.into_iter().filter(|o| selector.matches(labels(Some(o)))).collect())
            }
        };
        Ok(match (found.is_empty(), pref.get("parameterNotFoundAction").and_then(Value::as_str)) {
            (false, _) => Params::Found(found),
            (true, Some("Allow")) => Params::NotFoundAllow,
            (true, _) => Params::NotFoundDeny,
        })
    }
}

fn spec_str<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.get("spec").and_then(|s| s.get(key)).and_then(Value::as_str)
}

impl Snapshot {
    /// Runs the policies on a request (of the resource and namespace the snapshot was read
    /// for); a refusal is written to `cluster`'s audit log.
    pub fn admit(&self, cluster: &Cluster, req: &Request<'_>) -> ApiResult<()> {
        let ns_labels = labels(self.namespace.as_deref());
        for entry in &self.entries {
            let spec = entry.policy.get("spec").cloned().unwrap_or(json!({}));
            let bspec = entry.binding.get("spec").cloned().unwrap_or(json!({}));
            let ignore = spec.get("failurePolicy").and_then(Value::as_str) == Some("Ignore");
            let denies =
                bspec.get("validationActions").and_then(Value::as_array).is_some_and(|a| a.iter().any(|v| v == "Deny"));
            let outcome = (|| {
                let constraints = spec.get("matchConstraints").cloned().unwrap_or(json!({}));
                if !matching::resources_match(&constraints, req, ns_labels)
                    .map_err(|e| format!("failed to configure policy: spec.matchConstraints.{e}"))?
                {
                    return Ok(None);
                }
                if let Some(m) = bspec.get("matchResources").filter(|m| !m.is_null())
                    && !matching::resources_match(m, req, ns_labels)
                        .map_err(|e| format!("failed to configure binding: spec.matchResources.{e}"))?
                {
                    return Ok(None);
                }
                let params = entry.params.as_ref().map_err(Clone::clone)?;
                evaluate(&spec, params, req, self.namespace.as_deref(), ignore)
            })();
            let denial = match outcome {
                Ok(d) => d,
                Err(_) if ignore => None,
                Err(message) => Some(Denial::invalid(message)),
            };
            if let Some(d) = denial.filter(|_| denies) {
                return Err(refuse(cluster, req, object::name(&entry.policy), object::name(&entry.binding), d));
            }
        }
        Ok(())
    }
}

/// The refusal of a request, recorded in the audit log.
fn refuse(cluster: &Cluster, req: &Request<'_>, policy: &str, binding: &str, d: Denial) -> ApiError {
    let message =
        format!("ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {}", d.message);
    let name = req.display_name();
    let (reason, code) = reason_code(d.reason).unwrap_or(("Invalid", 422));
    cluster.audit.record(AuditRecord {
        user: req.user.name.clone(),
        request: Attributes {
            verb: req.operation.verb().into(),
            resource_request: true,
            group: req.resource.group.clone(),
            resource: req.resource.plural.clone(),
            subresource: req.subresource.into(),
            namespace: req.namespace.into(),
            name: name.clone(),
            path: String::new(),
        },
        allowed: false,
        rule: None,
        denied_by: Some(format!("ValidatingAdmissionPolicy '{policy}' with binding '{binding}'")),
    });
    ApiError::custom(code, reason, format!("{} \"{name}\" is forbidden: {message}", req.resource.group_resource()))
        .with_details(json!({
            "name": name, "group": req.resource.group, "kind": req.resource.plural,
            "causes": [{"message": message}],
        }))
}

/// One binding of a policy on a request: its refusal, if any; an error is the policy's
/// failure (`failurePolicy` decides). With `ignore`, an expression that fails is skipped.
fn evaluate(
    spec: &Value,
    params: &Params,
    req: &Request<'_>,
    namespace: Option<&Value>,
    ignore: bool,
) -> Result<Option<Denial>, String> {
    let params: Vec<Option<&Value>> = match params {
        Params::NotFoundAllow => return Ok(None),
        Params::NotFoundDeny => {
            return Ok(Some(Denial::invalid("no params found for policy binding with `Deny` parameterNotFoundAction")));
        }
        Params::None => vec![None],
        Params::Found(found) => found.iter().map(|p| Some(p.as_ref())).collect(),
    };
    let null = || kube_cel::cel::Value::Null;
    let mut base = Bindings::default();
    base.set("object", req.object.map(to_cel).unwrap_or_else(null));
    base.set("oldObject", req.old_object.map(to_cel).unwrap_or_else(null));
    base.set("request", req.to_cel());
    base.set("namespaceObject", namespace.map(to_cel).unwrap_or_else(null));
    let list = |key: &str| spec.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    'params: for param in params {
        let mut b = base.clone();
        b.set("params", param.map(to_cel).unwrap_or_else(null));
        for (i, c) in list("matchConditions").iter().enumerate() {
            let expr = c.get("expression").and_then(Value::as_str).unwrap_or("");
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            match cel::eval_bool(expr, &b) {
                Ok(true) => {}
                Ok(false) => continue 'params,
                Err(_) if ignore => continue 'params,
                Err(e) => return Err(format!("failed to evaluate matchConditions[{i}] ({name}): {e}")),
            }
        }
        // Variables in order, each seeing the earlier ones; one that fails is left unbound
        // (an expression that uses it then fails, as the apiserver's lazy variables do).
        let mut vars: Vec<(String, kube_cel::cel::Value)> = Vec::new();
        for v in list("variables") {
            let name = v.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            let expr = v.get("expression").and_then(Value::as_str).unwrap_or("");
            b.set("variables", cel::map_of(vars.clone()));
            if let Ok(value) = cel::eval(expr, &b) {
                vars.push((name, value));
            }
        }
        b.set("variables", cel::map_of(vars));
        for v in list("validations") {
            let expr = v.get("expression").and_then(Value::as_str).unwrap_or("").trim();
            match cel::eval_bool(expr, &b) {
                Ok(true) => {}
                Ok(false) => return Ok(Some(denial_of(&v, expr, &b))),
                Err(_) if ignore => {}
                Err(e) => return Err(format!("expression '{expr}' resulted in error: {e}")),
            }
        }
    }
    Ok(None)
}

/// The refusal of a validation that answered false: its `messageExpression` when that gives a
/// non-blank string, else its `message`, else `failed expression: EXPR`.
fn denial_of(v: &Value, expr: &str, b: &Bindings) -> Denial {
    let from_expression = v
        .get("messageExpression")
        .and_then(Value::as_str)
        .and_then(|m| match cel::eval(m, b) {
            Ok(kube_cel::cel::Value::String(s)) => Some(s.trim().to_string()),
            _ => None,
        })
        .filter(|s| !s.is_empty());
    let message = from_expression
        .or_else(|| v.get("message").and_then(Value::as_str).map(|m| m.trim().to_string()).filter(|m| !m.is_empty()))
        .unwrap_or_else(|| format!("failed expression: {expr}"));
    let reason = v.get("reason").and_then(Value::as_str).and_then(reason_code).map_or("Invalid", |(r, _)| r);
    Denial { message, reason }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{
        cluster::ClusterConfig,
        store::registry::{DeleteOptions, Subresource, WriteOptions},
    };

    fn cluster() -> Arc<Cluster> {
        Cluster::new(ClusterConfig::named("t"))
    }

    fn rt(c: &Cluster, group: &str, plural: &str) -> Arc<ResourceType> {
        c.resources.by_plural(group, plural).unwrap()
    }

    fn as_user(user: UserInfo) -> WriteOptions {
        WriteOptions { user: Some(user), ..Default::default() }
    }

    fn install(c: &Cluster, policy: Value, binding: Value) {
        let admin = as_user(UserInfo::admin());
        c.create(&rt(c, GROUP, POLICIES), None, policy, &admin).expect("policy accepted");
        c.create(&rt(c, GROUP, BINDINGS), None, binding, &admin).expect("binding accepted");
    }

    fn sts(name: &str, replicas: i64, labels: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": name, "namespace": "default", "labels": labels},
               "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    }

    fn at_most_five(failure: &str) -> Value {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
               "metadata": {"name": "max-five"},
               "spec": {"failurePolicy": failure,
                        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"], "resources": ["statefulsets"]}]},
                        "matchConditions": [{"name": "not-the-robot", "expression": "request.userInfo.username != 'robot'"}],
                        "variables": [{"name": "limit", "expression": "5"}],
                        "validations": [{"expression": "object.spec.replicas <= variables.limit",
                                         "messageExpression": "'at most ' + string(variables.limit) + ' replicas, not ' + string(object.spec.replicas)"}]}})
    }

    fn binding(name: &str, policy: &str) -> Value {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": policy, "validationActions": ["Deny"]}})
    }

    #[test]
    fn a_refusal_is_worded_and_coded_as_the_apiserver_does_and_audited() {
        let c = cluster();
        install(&c, at_most_five("Fail"), binding("max-five-everywhere", "max-five"));
        let sets = rt(&c, "apps", "statefulsets");
        let e = c.create(&sets, Some("default"), sts("web", 6, json!({})), &as_user(UserInfo::admin())).unwrap_err();
        let message = "ValidatingAdmissionPolicy 'max-five' with binding 'max-five-everywhere' denied request: at most 5 replicas, not 6";
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert_eq!(e.message, format!("statefulsets.apps \"web\" is forbidden: {message}"));
        assert_eq!(e.details.as_ref().unwrap()["causes"], json!([{"message": message}]));
        let audited = c.audit.all().into_iter().rev().find(|r| !r.allowed).expect("the refusal is audited");
        assert_eq!(
            audited.denied_by.as_deref(),
            Some("ValidatingAdmissionPolicy 'max-five' with binding 'max-five-everywhere'")
        );
        // Dry runs are admitted too; allowed writes pass; the components' own writes are not admitted.
        let dry = WriteOptions { dry_run: true, ..as_user(UserInfo::admin()) };
        assert!(c.create(&sets, Some("default"), sts("web", 6, json!({})), &dry).is_err());
        c.create(&sets, Some("default"), sts("web", 5, json!({})), &as_user(UserInfo::admin())).unwrap();
        c.create(&sets, Some("default"), sts("internal", 9, json!({})), &WriteOptions::default()).unwrap();
        // An update sees the new object; a matchCondition that answers false skips the policy.
        let grow = |n: i64| {
            move |cur: &Value| {
                let mut next = cur.clone();
                next["spec"]["replicas"] = json!(n);
                Ok(next)
            }
        };
        let admin = as_user(UserInfo::admin());
        assert!(c.update_with(&sets, "default", "web", Subresource::Main, &admin, grow(7)).is_err());
        let robot = as_user(UserInfo::named("robot", vec![]));
        c.update_with(&sets, "default", "web", Subresource::Main, &robot, grow(7)).unwrap();
    }

    #[test]
    fn failure_policy_decides_on_errors_and_deletes_see_the_old_object() {
        let c = cluster();
        let mut policy = at_most_five("Fail");
        policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = json!(["DELETE"]);
        policy["spec"]["validations"] = json!([{"expression": "oldObject.spec.replicas < 3 && object == null",
                                                 "message": "  keep the big ones  ", "reason": "Forbidden"},
                                                {"expression": "oldObject.spec.nothing == 1"}]);
        install(&c, policy, binding("b", "max-five"));
        let sets = rt(&c, "apps", "statefulsets");
        let none = WriteOptions::default();
        c.create(&sets, Some("default"), sts("big", 4, json!({})), &none).unwrap();
        c.create(&sets, Some("default"), sts("small", 1, json!({})), &none).unwrap();
        let admin = DeleteOptions { user: Some(UserInfo::admin()), ..Default::default() };
        let e = c.delete(&sets, "default", "big", &admin).unwrap_err();
        assert_eq!((e.code, e.reason), (403, "Forbidden"));
        assert!(e.message.ends_with("denied request: keep the big ones"), "{}", e.message);
        // The second validation fails to evaluate: with Fail that refuses, naming the expression.
        let e = c.delete(&sets, "default", "small", &admin).unwrap_err();
        assert!(
            e.message.contains("denied request: expression 'oldObject.spec.nothing == 1' resulted in error"),
            "{}",
            e.message
        );
        let policies = rt(&c, GROUP, POLICIES);
        c.update_with(&policies, "", "max-five", Subresource::Main, &none, |cur| {
            let mut next = cur.clone();
            next["spec"]["failurePolicy"] = json!("Ignore");
            Ok(next)
        })
        .unwrap();
        c.delete(&sets, "default", "small", &admin).expect("with Ignore the error lets it through");
    }

    #[test]
    fn params_are_looked_up_per_request_and_selectors_narrow_the_binding() {
        let c = cluster();
        // Scale-like guard: every labelled StatefulSet of the request's namespace is a param.
        let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "owned"},
            "spec": {"paramKind": {"apiVersion": "apps/v1", "kind": "StatefulSet"},
                     "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                         "operations": ["CREATE"], "resources": ["configmaps"]}]},
                     "validations": [{"expression": "params.metadata.name != object.metadata.name",
                                      "message": "that name belongs to a managed StatefulSet"}]}});
        let mut b = binding("owned", "owned");
        b["spec"]["paramRef"] =
            json!({"selector": {"matchLabels": {"managed": "yes"}}, "parameterNotFoundAction": "Allow"});
        install(&c, policy, b);
        let sets = rt(&c, "apps", "statefulsets");
        let none = WriteOptions::default();
        let cms = rt(&c, "", "configmaps");
        let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        let admin = as_user(UserInfo::admin());
        c.create(&cms, Some("default"), cm("redis"), &admin).expect("no params: Allow");
        c.create(&sets, Some("default"), sts("db", 1, json!({"managed": "yes"})), &none).unwrap();
        c.create(&sets, Some("default"), sts("other", 1, json!({})), &none).unwrap();
        let e = c.create(&cms, Some("default"), cm("db"), &admin).unwrap_err();
        assert!(e.message.ends_with("denied request: that name belongs to a managed StatefulSet"), "{}", e.message);
        c.create(&cms, Some("default"), cm("other"), &admin).expect("an unlabelled StatefulSet is no param");
        c.create(&cms, Some("kube-system"), cm("db"), &admin).expect("params come from the request's namespace");
    }

    #[test]
    fn a_policy_that_cannot_compile_is_refused_naming_the_field() {
        let c = cluster();
        let mut policy = at_most_five("Fail");
        policy["spec"]["validations"][0]["expression"] = json!("object.spec.replicas <=");
        let e = c.create(&rt(&c, GROUP, POLICIES), None, policy, &WriteOptions::default()).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(e.message.contains("spec.validations[0].expression: Invalid value"), "{}", e.message);
    }
}
