//! OpenAPI v3 documents, so that `kubectl explain` works against the sandbox: the discovery
//! document at `/openapi/v3` (one entry per served group-version, each with a content hash),
//! and one OpenAPI 3.0 document per group-version whose `components.schemas` are keyed by the
//! full definition names and tagged with `x-kubernetes-group-version-kind`, which is how
//! kubectl finds a kind's schema.
//!
//! Built-in schemas come from k8s-openapi's `JsonSchema` impls through schemars and are built
//! once; CRD schemas come from the CRD objects in storage and are rebuilt on each request, as
//! CRDs come and go at run time.

use std::{
    collections::{BTreeMap, BTreeSet},
    hash::{Hash, Hasher},
    sync::OnceLock,
};

use http::{HeaderValue, Response, header};
use k8s_openapi::{
    api::{
        admissionregistration::v1 as admissionregistration, apps::v1 as apps, authorization::v1 as authorization,
        coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery, events::v1 as events,
        policy::v1 as policy, rbac::v1 as rbac, storage::v1 as storage,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions,
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use crate::{
    api::response::{self, Body},
    cluster::Cluster,
    store::{error::ApiError, resources::ResourceKey},
};

/// Adds a type's schema (and every schema it references) to a generator; returns its name.
type AddSchema = fn(&mut SchemaGenerator) -> String;

fn add<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
    generator.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// The k8s-openapi type of each built-in kind, by (group, version, kind). A kind served by
/// `builtins()` but missing here is still served, just not explainable: add a line.
const BUILTIN_KINDS: &[(&str, &str, &str, AddSchema)] = &[
    ("", "v1", "Namespace", add::<core::Namespace>),
    ("", "v1", "Node", add::<core::Node>),
    ("", "v1", "Pod", add::<core::Pod>),
    ("", "v1", "Service", add::<core::Service>),
    ("", "v1", "Endpoints", add::<core::Endpoints>),
    ("", "v1", "ConfigMap", add::<core::ConfigMap>),
    ("", "v1", "Secret", add::<core::Secret>),
    ("", "v1", "ServiceAccount", add::<core::ServiceAccount>),
    ("", "v1", "PersistentVolumeClaim", add::<core::PersistentVolumeClaim>),
    ("", "v1", "PersistentVolume", add::<core::PersistentVolume>),
    ("", "v1", "Event", add::<core::Event>),
    ("apps", "v1", "StatefulSet", add::<apps::StatefulSet>),
    ("apps", "v1", "ControllerRevision", add::<apps::ControllerRevision>),
    ("apps", "v1", "Deployment", add::<apps::Deployment>),
    ("rbac.authorization.k8s.io", "v1", "Role", add::<rbac::Role>),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", add::<rbac::RoleBinding>),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", add::<rbac::ClusterRole>),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", add::<rbac::ClusterRoleBinding>),
    ("authorization.k8s.io", "v1", "SelfSubjectAccessReview", add::<authorization::SelfSubjectAccessReview>),
    ("coordination.k8s.io", "v1", "Lease", add::<coordination::Lease>),
    ("policy", "v1", "PodDisruptionBudget", add::<policy::PodDisruptionBudget>),
    ("storage.k8s.io", "v1", "StorageClass", add::<storage::StorageClass>),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", add::<apiextensions::CustomResourceDefinition>),
    ("discovery.k8s.io", "v1", "EndpointSlice", add::<discovery::EndpointSlice>),
    ("events.k8s.io", "v1", "Event", add::<events::Event>),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        add::<admissionregistration::ValidatingAdmissionPolicy>,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        add::<admissionregistration::ValidatingAdmissionPolicyBinding>,
    ),
];

/// The discovery key of a group-version: `api/v1` or `apis/GROUP/VERSION`.
pub fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// A schemars generator with OpenAPI 3 settings (`#/components/schemas/` references).
fn generator() -> SchemaGenerator {
    SchemaSettings::openapi3().into_generator()
}

/// Tags a top-level kind's schema the way the apiserver does.
fn tag_gvk(schema: &mut Value, group: &str, version: &str, kind: &str) {
    if let Some(obj) = schema.as_object_mut() {
        obj.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": group, "kind": kind, "version": version}]),
        );
    }
}

/// The schemas of the built-in kinds of one group-version (and everything they reference),
/// or `None` if no built-in kind of that group-version is mapped.
fn builtin_schemas(group: &str, version: &str) -> Option<Map<String, Value>> {
    let kinds: Vec<_> = BUILTIN_KINDS.iter().filter(|(g, v, ..)| *g == group && *v == version).collect();
    if kinds.is_empty() {
        return None;
    }
    let mut generator = generator();
    let names: Vec<(String, &str)> = kinds.iter().map(|(.., kind, add)| (add(&mut generator), *kind)).collect();
    let mut schemas = generator.take_definitions(true);
    for (name, kind) in names {
        if let Some(schema) = schemas.get_mut(&name) {
            tag_gvk(schema, group, version, kind);
        }
    }
    Some(schemas)
}

/// The built-in schemas of every mapped group-version, built once: built-ins never change.
fn builtin_cache() -> &'static BTreeMap<String, Map<String, Value>> {
    static CACHE: OnceLock<BTreeMap<String, Map<String, Value>>> = OnceLock::new();
    CACHE.get_or_init(|| {
        let gvs: BTreeSet<(&str, &str)> = BUILTIN_KINDS.iter().map(|(g, v, ..)| (*g, *v)).collect();
        gvs.into_iter().filter_map(|(g, v)| Some((gv_path(g, v), builtin_schemas(g, v)?))).collect()
    })
}

/// ObjectMeta and what it references, which every CRD schema points at.
fn object_meta_schemas() -> &'static Map<String, Value> {
    static CACHE: OnceLock<Map<String, Value>> = OnceLock::new();
    CACHE.get_or_init(|| {
        let mut generator = generator();
        add::<ObjectMeta>(&mut generator);
        generator.take_definitions(true)
    })
}

/// The definition name the apiserver gives a custom kind: the group reversed, then version and
/// kind (`spanset.dev`, `v1alpha1`, `FederatedStatefulSet` →
/// `dev.spanset.v1alpha1.FederatedStatefulSet`).
pub fn crd_schema_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// The schema of one served version of a CRD as the apiserver publishes it: the CRD's
/// `openAPIV3Schema` (or a permissive object when it has none) with `apiVersion`, `kind` and
/// `metadata` filled in, tagged with its group-version-kind.
pub fn crd_version_schema(group: &str, kind: &str, version: &Value) -> Option<(String, String, Value)> {
    let name = version.get("name")?.as_str()?;
    let mut schema = version
        .pointer("/schema/openAPIV3Schema")
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let obj = schema.as_object_mut()?;
    obj.entry("type").or_insert_with(|| json!("object"));
    let props = obj.entry("properties").or_insert_with(|| json!({}));
    if let Some(props) = props.as_object_mut() {
        props.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}),
        );
        props.insert(
            "kind".into(),
            json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}),
        );
        props.insert(
            "metadata".into(),
            json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],
                   "default": {},
                   "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}),
        );
    }
    tag_gvk(&mut schema, group, name, kind);
    Some((name.to_string(), crd_schema_name(group, name, kind), schema))
}

/// The schemas each served CRD version adds, by group-version path.
fn crd_schemas(crds: &[std::sync::Arc<Value>]) -> BTreeMap<String, Map<String, Value>> {
    let mut out: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for crd in crds {
        let Some(spec) = crd.get("spec") else { continue };
        let (Some(group), Some(kind)) =
            (spec.get("group").and_then(Value::as_str), spec.pointer("/names/kind").and_then(Value::as_str))
        else {
            continue;
        };
        let versions = spec.get("versions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for version in versions.iter().filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true)) {
            if let Some((v, name, schema)) = crd_version_schema(group, kind, version) {
                let schemas = out.entry(gv_path(group, &v)).or_default();
                schemas.insert(name, schema);
                for (meta_name, meta) in object_meta_schemas() {
                    schemas.entry(meta_name.clone()).or_insert_with(|| meta.clone());
                }
            }
        }
    }
    out
}

/// The OpenAPI 3.0 document of one group-version, around its paths and schemas.
fn document(paths: Map<String, Value>, schemas: Map<String, Value>) -> Value {
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// The list path of each resource of a group-version, with its kind on the `get` operation:
/// kubectl explain finds a resource's kind there (`/apis/GROUP/VERSION/PLURAL`), then the
/// kind's schema by `x-kubernetes-group-version-kind`. A custom resource also gets its object
/// path with a `patch` operation taking `fieldValidation`: that is how kubectl learns that the
/// server validates fields itself (else it warns that `--validate=warn` is inert and validates
/// on its own).
fn list_paths(cluster: &Cluster, gv: &str) -> Map<String, Value> {
    cluster
        .resources
        .all()
        .iter()
        .flat_map(|rt| rt.versions.iter().map(move |v| (rt, v)))
        .filter(|(rt, v)| gv_path(&rt.group, v) == gv && !rt.create_only())
        .flat_map(|(rt, v)| {
            let gvk = json!({"group": rt.group, "version": v, "kind": rt.kind});
            let op = json!({
                "description": format!("list or watch objects of kind {}", rt.kind),
                "operationId": format!("list{}", rt.kind),
                "x-kubernetes-action": "list",
                "x-kubernetes-group-version-kind": gvk,
                "responses": {"200": {"description": "OK"}},
            });
            let mut paths = vec![(format!("/{gv}/{}", rt.plural), json!({"get": op}))];
            if rt.custom {
                let scope = if rt.namespaced { "namespaces/{namespace}/" } else { "" };
                let patch = json!({
                    "description": format!("partially update the specified {}", rt.kind),
                    "operationId": format!("patch{}", rt.kind),
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk,
                    "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"},
                        "description": "Ignore, Warn or Strict: what to do with unknown fields"}],
                    "responses": {"200": {"description": "OK"}},
                });
                paths.push((format!("/{gv}/{scope}{}/{{name}}", rt.plural), json!({"patch": patch})));
            }
            paths
        })
        .collect()
}

/// Every served group-version's document, serialized, keyed by its discovery path. Built-in
/// schemas come from the cache; CRD schemas are read from storage on every call.
pub fn documents(cluster: &Cluster) -> BTreeMap<String, Vec<u8>> {
    let crd_key: ResourceKey = ("apiextensions.k8s.io".into(), "customresourcedefinitions".into());
    let (crds, _) = cluster.storage.list(&crd_key, None);
    let served: BTreeSet<String> = cluster
        .resources
        .all()
        .iter()
        .flat_map(|rt| rt.versions.iter().map(|v| gv_path(&rt.group, v)).collect::<Vec<_>>())
        .collect();
    let mut custom = crd_schemas(&crds);
    served
        .into_iter()
        .map(|gv| {
            let mut schemas = builtin_cache().get(&gv).cloned().unwrap_or_default();
            for (name, schema) in custom.remove(&gv).unwrap_or_default() {
                schemas.entry(name).or_insert(schema);
            }
            let bytes = serde_json::to_vec(&document(list_paths(cluster, &gv), schemas)).unwrap_or_default();
            (gv, bytes)
        })
        .collect()
}

/// The content hash of a document, as the `?hash=` of its discovery entry and its ETag (and
/// the ETag of aggregated discovery).
pub fn hash(bytes: &[u8]) -> String {
    let mut hasher = std::hash::DefaultHasher::new();
    bytes.hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

/// The `/openapi/v3` discovery document for a set of documents.
pub fn discovery_doc(docs: &BTreeMap<String, Vec<u8>>) -> Value {
    let paths: Map<String, Value> = docs
        .iter()
        .map(|(gv, bytes)| (gv.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", hash(bytes))})))
        .collect();
    json!({ "paths": paths })
}

/// Answers a request below `/openapi/v3`: the discovery document, a group-version's document
/// (JSON whatever the Accept header: kubectl asks for JSON, or falls back to it), or 404.
pub fn serve(cluster: &Cluster, path: &str) -> Response<Body> {
    let rest = path.trim_start_matches("/openapi/v3").trim_matches('/');
    let docs = documents(cluster);
    if rest.is_empty() {
        let mut resp = response::json(200, &discovery_doc(&docs));
        no_cache(&mut resp);
        return resp;
    }
    match docs.get(rest) {
        Some(bytes) => {
            let etag = format!("\"{}\"", hash(bytes));
            let mut resp = response::json_bytes(200, bytes.clone());
            no_cache(&mut resp);
            if let Ok(v) = HeaderValue::from_str(&etag) {
                resp.headers_mut().insert(header::ETAG, v);
            }
            resp
        }
        None => response::error(&ApiError::no_route()),
    }
}

/// Documents change with CRDs: clients revalidate instead of caching by URL alone.
fn no_cache(resp: &mut Response<Body>) {
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterConfig;

    fn doc(docs: &BTreeMap<String, Vec<u8>>, gv: &str) -> Value {
        serde_json::from_slice(&docs[gv]).expect("documents are JSON")
    }

    #[test]
    fn discovery_lists_every_served_group_version() {
        let cluster = Cluster::new(ClusterConfig::named("t"));
        let docs = documents(&cluster);
        let disco = discovery_doc(&docs);
        let paths = disco["paths"].as_object().expect("paths");
        for rt in cluster.resources.all() {
            for v in &rt.versions {
                let gv = gv_path(&rt.group, v);
                let url = paths[&gv]["serverRelativeURL"].as_str().expect("a URL");
                assert!(url.starts_with(&format!("/openapi/v3/{gv}?hash=")), "{url}");
            }
        }
        let apps = doc(&docs, "apis/apps/v1");
        assert_eq!(apps["openapi"], "3.0.0");
        let sts = &apps["components"]["schemas"]["io.k8s.api.apps.v1.StatefulSet"];
        assert_eq!(
            sts["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "StatefulSet", "version": "v1"}])
        );
        let spec_ref = sts.pointer("/properties/spec/allOf/0/$ref").and_then(Value::as_str);
        assert_eq!(spec_ref, Some("#/components/schemas/io.k8s.api.apps.v1.StatefulSetSpec"));
        assert!(apps["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
        let core = doc(&docs, "api/v1");
        assert!(core["components"]["schemas"]["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"].is_array());
    }

    #[test]
    fn crd_schema_is_named_and_tagged_like_the_apiservers() {
        let version = json!({"name": "v1alpha1", "served": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "description": "the spec"}}}}});
        let (v, name, schema) = crd_version_schema("spanset.dev", "FederatedStatefulSet", &version).expect("a schema");
        assert_eq!((v.as_str(), name.as_str()), ("v1alpha1", "dev.spanset.v1alpha1.FederatedStatefulSet"));
        assert_eq!(
            schema["x-kubernetes-group-version-kind"],
            json!([{"group": "spanset.dev", "kind": "FederatedStatefulSet", "version": "v1alpha1"}])
        );
        assert_eq!(
            schema.pointer("/properties/metadata/allOf/0/$ref").and_then(Value::as_str),
            Some("#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        );
        assert_eq!(schema.pointer("/properties/spec/description"), Some(&json!("the spec")));
        assert!(schema.pointer("/properties/kind/description").is_some());
    }

    #[test]
    fn crd_without_a_schema_is_a_permissive_object() {
        let (_, _, schema) = crd_version_schema("example.com", "Widget", &json!({"name": "v1"})).expect("a schema");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["x-kubernetes-preserve-unknown-fields"], true);
        assert!(crd_version_schema("example.com", "Widget", &json!({"name": 3})).is_none());
    }

    #[test]
    fn installed_crd_gets_a_document_and_a_discovery_entry() {
        let cluster = Cluster::new(ClusterConfig::named("t"));
        let crd_type =
            cluster.resources.by_plural("apiextensions.k8s.io", "customresourcedefinitions").expect("built in");
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true}]}});
        cluster.create(&crd_type, None, crd, &Default::default()).expect("CRD created");
        let docs = documents(&cluster);
        assert!(discovery_doc(&docs)["paths"]["apis/example.com/v1"].is_object());
        let widget = doc(&docs, "apis/example.com/v1");
        let schemas = &widget["components"]["schemas"];
        assert!(schemas["com.example.v1.Widget"]["x-kubernetes-group-version-kind"].is_array());
        assert!(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    }
}
