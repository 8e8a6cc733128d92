//! The member's own guards, read back: every ValidatingAdmissionPolicy and binding that
//! `spanset join` installs (`deploy/member/admission.yaml`) is fetched by name and compared
//! with the manifest, so that `AdmissionPolicies` is said to be in force only once spanset has
//! seen each of them as shipped. Serving the API is not enough: a binding deleted by hand, a
//! policy edited, or a member registered without `spanset join` guards nothing, and spanset
//! says so instead of assuming otherwise.
//!
//! What is compared is what decides what the member refuses: a policy's `spec.matchConstraints`,
//! `validations`, `variables`, `matchConditions`, `failurePolicy` and `paramKind`, and a
//! binding's `spec.policyName`, `validationActions`, `matchResources` and `paramRef`. Within
//! those, a field the manifest sets must read back the same (lists element by element, in
//! order; `validationActions` as a set). A field the manifest leaves out may read back unset:
//! absent, empty, or at the apiserver's default (`matchPolicy: Equivalent`,
//! `namespaceSelector: {}`, `objectSelector: {}`, a rule's `scope: "*"`, `failurePolicy:
//! Fail`), which is what a real apiserver fills in. Any other value of a field the API defines
//! there (an `objectSelector` that selects nothing, `excludeResourceRules`, one more match
//! condition) narrows what the guard refuses, and reads as altered. A field this code does not
//! know of is ignored, so that a newer apiserver's new defaults are not taken for alterations.

use std::{collections::BTreeMap, sync::LazyLock};

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use serde_json::Value;

/// The member's own guards (ValidatingAdmissionPolicies and their bindings), as shipped in
/// `deploy/member/`: what `spanset join` installs and what the watcher reads back.
pub const MEMBER_ADMISSION: &str = include_str!("../../../../deploy/member/admission.yaml");

/// The two kinds the manifest ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A ValidatingAdmissionPolicy: what is refused.
    Policy,
    /// A ValidatingAdmissionPolicyBinding: that it is refused, and where.
    Binding,
}

impl Kind {
    /// The kind as a manifest names it.
    pub fn of(kind: &str) -> Option<Self> {
        match kind {
            "ValidatingAdmissionPolicy" => Some(Self::Policy),
            "ValidatingAdmissionPolicyBinding" => Some(Self::Binding),
            _ => None,
        }
    }

    /// The resource, singular, as messages name one object (`validatingadmissionpolicy X`).
    pub fn singular(self) -> &'static str {
        match self {
            Self::Policy => "validatingadmissionpolicy",
            Self::Binding => "validatingadmissionpolicybinding",
        }
    }

    /// The resource, plural, as the API and RBAC name it.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Policy => "validatingadmissionpolicies",
            Self::Binding => "validatingadmissionpolicybindings",
        }
    }

    /// The fields that decide what is refused (`spec.FIELD`): the only ones compared.
    pub fn compared(self) -> &'static [&'static str] {
        match self {
            Self::Policy => &[
                "spec.matchConstraints",
                "spec.validations",
                "spec.variables",
                "spec.matchConditions",
                "spec.failurePolicy",
                "spec.paramKind",
            ],
            Self::Binding => &["spec.policyName", "spec.validationActions", "spec.matchResources", "spec.paramRef"],
        }
    }

    /// The API resource, for a dynamic client (the objects are compared as JSON, unknown
    /// fields included).
    pub fn resource(self) -> ApiResource {
        let kind = match self {
            Self::Policy => "ValidatingAdmissionPolicy",
            Self::Binding => "ValidatingAdmissionPolicyBinding",
        };
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", kind), self.plural())
    }
}

/// The API group of both kinds.
pub const GROUP: &str = "admissionregistration.k8s.io";

/// One object the manifest ships.
#[derive(Debug, Clone, PartialEq)]
pub struct Shipped {
    /// Policy or binding.
    pub kind: Kind,
    /// Its name.
    pub name: String,
    /// Its `spec`, as the manifest writes it.
    pub spec: Value,
}

/// The policies and bindings of [`MEMBER_ADMISSION`], in its order.
pub fn shipped() -> &'static [Shipped] {
    static SHIPPED: LazyLock<Vec<Shipped>> =
        LazyLock::new(|| parse(MEMBER_ADMISSION).expect("deploy/member/admission.yaml is compiled in and tested"));
    &SHIPPED
}

/// The policies and bindings of a manifest like [`MEMBER_ADMISSION`].
pub fn parse(text: &str) -> Result<Vec<Shipped>, String> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let doc: Value = serde::Deserialize::deserialize(doc).map_err(|e| e.to_string())?;
        if doc.is_null() {
            continue;
        }
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
        let kind = Kind::of(kind).ok_or_else(|| format!("unexpected kind {kind:?}"))?;
        let name = doc.pointer("/metadata/name").and_then(Value::as_str).ok_or("an object without a name")?;
        out.push(Shipped { kind, name: name.into(), spec: doc.get("spec").cloned().unwrap_or(Value::Null) });
    }
    Ok(out)
}

/// Fields the VAP API defines in the parts compared: one of them read back with a value the
/// manifest does not set (and that is not unset, see [`unset`]) changes what is refused.
/// Anything else is a field this code does not know of, and is ignored.
const KNOWN: &[&str] = &[
    "apiGroups",
    "apiVersion",
    "apiVersions",
    "excludeResourceRules",
    "expression",
    "failurePolicy",
    "key",
    "kind",
    "matchConditions",
    "matchConstraints",
    "matchExpressions",
    "matchLabels",
    "matchPolicy",
    "matchResources",
    "message",
    "messageExpression",
    "name",
    "namespace",
    "namespaceSelector",
    "objectSelector",
    "operations",
    "operator",
    "paramKind",
    "paramRef",
    "parameterNotFoundAction",
    "policyName",
    "reason",
    "resourceNames",
    "resourceRules",
    "resources",
    "scope",
    "selector",
    "validationActions",
    "validations",
    "values",
    "variables",
];

/// The values the apiserver gives these fields when a write leaves them out (its
/// `admissionregistration/v1` defaulters): read back, they mean the same as absent.
const DEFAULTS: &[(&str, &str)] = &[("matchPolicy", "Equivalent"), ("scope", "*"), ("failurePolicy", "Fail")];

/// Whether `value`, read at field `key`, says no more than the field left out: absent, empty,
/// the apiserver's default, or an object of only such fields (a `matchResources` holding
/// nothing but its defaults).
fn unset(key: &str, value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty() || DEFAULTS.contains(&(key, s.as_str())),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.iter().all(|(k, v)| unset(k, v)),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

/// Whether `read` (field `key` as stored) refuses what `shipped` (the same field in the
/// manifest) refuses: see the module's documentation for what counts.
fn same(key: &str, shipped: &Value, read: &Value) -> bool {
    if unset(key, shipped) && unset(key, read) {
        return true;
    }
    match (shipped, read) {
        (Value::Object(s), Value::Object(r)) => {
            s.iter().all(|(k, sv)| same(k, sv, r.get(k).unwrap_or(&Value::Null)))
                && r.iter().all(|(k, rv)| s.contains_key(k) || !KNOWN.contains(&k.as_str()) || unset(k, rv))
        }
        (Value::Array(s), Value::Array(r)) => s.len() == r.len() && s.iter().zip(r).all(|(s, r)| same(key, s, r)),
        (s, r) => s == r,
    }
}

/// The strings of a list, sorted: a set's value.
fn as_set(v: &Value) -> Value {
    let mut items: Vec<Value> = v.as_array().cloned().unwrap_or_default();
    items.sort_by_key(Value::to_string);
    items.dedup();
    Value::Array(items)
}

/// The compared fields of a `kind` whose stored `spec` (`None`: it has none) differs from the
/// manifest's, as `spec.FIELD`, in [`Kind::compared`]'s order: empty when it refuses what
/// `spanset join` installs.
pub fn differing(kind: Kind, shipped: &Value, read: Option<&Value>) -> Vec<&'static str> {
    let null = Value::Null;
    let read = read.unwrap_or(&null);
    let mut out = Vec::new();
    for path in kind.compared() {
        let field = path.strip_prefix("spec.").unwrap_or(path);
        let (s, r) = (shipped.get(field).unwrap_or(&null), read.get(field).unwrap_or(&null));
        let alike = if field == "validationActions" { same(field, &as_set(s), &as_set(r)) } else { same(field, s, r) };
        if !alike {
            out.push(*path);
        }
    }
    out
}

/// What reading one shipped object back found wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Amiss {
    /// The member has no object of that name (404).
    Missing,
    /// It refuses something else: these fields differ (see [`differing`]).
    Altered(Vec<&'static str>),
    /// spanset's identity may not read it (403): a member joined before spanset read its guards
    /// back lacks the rule that lets it. The answer's code and message.
    Unreadable(u16, String),
}

/// What one read-back of the member's guards found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readback {
    /// Every shipped policy and binding is there, as shipped.
    AsShipped,
    /// What is missing, altered or unreadable (kind, name, what), in the manifest's order.
    Amiss(Vec<(Kind, String, Amiss)>),
    /// The read-back itself failed (no answer, or a server error): nothing was seen, so nothing
    /// is claimed.
    Failed(String),
}

impl Readback {
    /// From each object's finding.
    pub fn of(found: Vec<(Kind, String, Amiss)>) -> Self {
        if found.is_empty() { Self::AsShipped } else { Self::Amiss(found) }
    }

    /// Whether the guards hold: every shipped object was seen as shipped.
    pub fn in_force(&self) -> bool {
        matches!(self, Self::AsShipped)
    }

    /// What the read-back found, in words naming each object amiss (empty when as shipped):
    /// `validatingadmissionpolicybinding spanset-owner is missing`,
    /// `validatingadmissionpolicy spanset-member-term: spec.validations differs from what
    /// spanset join installs`.
    pub fn findings(&self) -> String {
        let found = match self {
            Self::AsShipped => return String::new(),
            Self::Failed(why) => return format!("spanset could not read them back ({why})"),
            Self::Amiss(found) => found,
        };
        let all = shipped();
        if found.len() == all.len() && found.iter().all(|(_, _, a)| *a == Amiss::Missing) {
            let count = |k: Kind| all.iter().filter(|s| s.kind == k).count();
            return format!(
                "none of the {} {} and {} {} that spanset join installs is there",
                count(Kind::Policy),
                Kind::Policy.plural(),
                count(Kind::Binding),
                Kind::Binding.plural()
            );
        }
        let mut parts = Vec::new();
        // Missing and unreadable objects grouped by kind, each group one phrase.
        let mut missing: BTreeMap<Kind, Vec<&str>> = BTreeMap::new();
        let mut unreadable: BTreeMap<Kind, (Vec<&str>, String)> = BTreeMap::new();
        for (kind, name, amiss) in found {
            match amiss {
                Amiss::Missing => missing.entry(*kind).or_default().push(name),
                Amiss::Unreadable(code, message) => {
                    let e = unreadable.entry(*kind).or_insert_with(|| (Vec::new(), format!("{code}: {message}")));
                    e.0.push(name);
                }
                Amiss::Altered(_) => {}
            }
        }
        let named = |kind: Kind, names: &[&str]| {
            if names.len() == 1 {
                format!("{} {}", kind.singular(), names[0])
            } else {
                format!("{} {}", kind.plural(), names.join(", "))
            }
        };
        for (kind, names) in &missing {
            parts.push(format!("{} {} missing", named(*kind, names), if names.len() == 1 { "is" } else { "are" }));
        }
        for (kind, name, amiss) in found {
            if let Amiss::Altered(fields) = amiss {
                let verb = if fields.len() == 1 { "differs" } else { "differ" };
                parts.push(format!(
                    "{} {name}: {} {verb} from what spanset join installs",
                    kind.singular(),
                    fields.join(", ")
                ));
            }
        }
        for (kind, (names, answer)) in &unreadable {
            parts.push(format!("{} cannot be read by spanset ({answer})", named(*kind, names)));
        }
        parts.join("; ")
    }
}

/// Reads back every shipped policy and binding, by name, all at once (one round trip, one GET
/// each: [`shipped`]`().len()` requests), and compares each with the manifest. A 404 is a
/// missing object and a 403 an unreadable one; any other failure fails the whole read-back.
pub async fn read_back(client: &Client) -> Readback {
    let reads = shipped().iter().map(|s| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &s.kind.resource());
        async move { (s, api.get(&s.name).await) }
    });
    let mut found = Vec::new();
    for (s, answer) in futures::future::join_all(reads).await {
        let amiss = match answer {
            Ok(obj) => {
                let fields = differing(s.kind, &s.spec, obj.data.get("spec"));
                if fields.is_empty() {
                    continue;
                }
                Amiss::Altered(fields)
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Amiss::Missing,
            Err(kube::Error::Api(e)) if e.code == 403 => Amiss::Unreadable(e.code, e.message),
            Err(e) => return Readback::Failed(format!("get {} {}: {e}", s.kind.plural(), s.name)),
        };
        found.push((s.kind, s.name.clone(), amiss));
    }
    Readback::of(found)
}

#[cfg(test)]
#[path = "policies_tests.rs"]
mod tests;
