//! The kinds of object a simulated cluster serves: the built-in ones spanset and kubectl need,
//! plus every custom resource a `CustomResourceDefinition` adds at run time. Discovery, routing
//! and storage all read this one table, so a CRD becomes served and discoverable in one step.

use std::{collections::BTreeMap, sync::Arc};

use parking_lot::RwLock;
use serde_json::Value;

use crate::{
    cluster::release::Release,
    store::{admission, schema::CrdSchema},
};

/// Where a resource's `/scale` subresource reads and writes replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    /// JSON path of the desired replicas, e.g. `.spec.replicas`.
    pub spec_replicas: String,
    /// JSON path of the observed replicas, e.g. `.status.replicas`.
    pub status_replicas: String,
    /// JSON path of the selector string, if any.
    pub label_selector: Option<String>,
}

/// One served resource: names, scope and subresources, as discovery reports them.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    /// API group, `""` for the core group.
    pub group: String,
    /// Every served version; the first is the preferred (storage) one.
    pub versions: Vec<String>,
    /// Plural resource name used in URLs, e.g. `statefulsets`.
    pub plural: String,
    /// Singular name, e.g. `statefulset`.
    pub singular: String,
    /// Kind, e.g. `StatefulSet`.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names such as `sts`; kubectl resolves them only from discovery.
    pub short_names: Vec<String>,
    /// Categories such as `all`.
    pub categories: Vec<String>,
    /// Whether `/status` is a separate subresource (the main endpoint then ignores `.status`).
    pub status_subresource: bool,
    /// The `/scale` subresource, if served.
    pub scale: Option<ScalePaths>,
    /// A CRD version's `additionalPrinterColumns`, for Table output.
    pub printer_columns: Option<Vec<Value>>,
    /// True for resources defined by a CRD (no strategic merge, generation on any non-metadata change).
    pub custom: bool,
    /// Set when this resource is another group's view of objects stored under a different
    /// resource (see [`View`]).
    pub view: Option<View>,
    /// A custom resource's schema per served version, parsed and compiled once when its CRD is
    /// installed (empty for built-ins, which [`crate::store::validate`] checks).
    pub schemas: BTreeMap<String, Arc<CrdSchema>>,
}

/// A resource served as a view of another resource's objects, converted field by field on the
/// way in and out, as the real apiserver serves one storage under two groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// `events.k8s.io/v1` Events: core/v1 Events with renamed fields (`note` for `message`,
    /// `regarding` for `involvedObject`, `deprecatedCount` for `count`, …).
    EventsV1,
}

impl ResourceType {
    /// Where this resource's objects are stored: its own group and plural, or for a view the
    /// resource it shows.
    pub fn storage_key(&self) -> ResourceKey {
        match self.view {
            Some(View::EventsV1) => (String::new(), "events".into()),
            None => (self.group.clone(), self.plural.clone()),
        }
    }

    /// `statefulsets.apps`, or `pods` for the core group: the prefix of most error messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() { self.plural.clone() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// The schema a write sent to `version` is checked against (a custom resource's).
    pub fn schema(&self, version: &str) -> Option<Arc<CrdSchema>> {
        self.schemas.get(version).or_else(|| self.schemas.get(self.version())).cloned()
    }

    /// The preferred version.
    pub fn version(&self) -> &str {
        &self.versions[0]
    }

    /// `apps/v1` or `v1`.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() { version.to_string() } else { format!("{}/{version}", self.group) }
    }

    /// Whether a given version is served.
    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }

    /// The verbs discovery advertises.
    pub fn verbs(&self) -> Vec<&'static str> {
        if self.create_only() {
            return vec!["create"];
        }
        vec!["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    }

    /// Reviews (`SelfSubjectAccessReview`, `SelfSubjectReview`): answered on create, never
    /// stored.
    pub fn create_only(&self) -> bool {
        self.group == "authorization.k8s.io"
            || (self.group == "authentication.k8s.io" && self.plural == "selfsubjectreviews")
    }

    /// Whether a change to this field set bumps `metadata.generation`: built-ins bump on `.spec`
    /// changes; custom resources with a status subresource bump on anything but metadata/status.
    pub fn has_generation(&self) -> bool {
        self.custom
            || !matches!(
                self.plural.as_str(),
                "configmaps" | "secrets" | "events" | "endpoints" | "leases" | "controllerrevisions" | "storageclasses"
            )
    }
}

/// Short constructor for built-in types.
#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    singular: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
    all: bool,
) -> ResourceType {
    ResourceType {
        group: group.into(),
        versions: vec![version.into()],
        plural: plural.into(),
        singular: singular.into(),
        kind: kind.into(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: if all { vec!["all".into()] } else { vec![] },
        status_subresource: status,
        scale: None,
        printer_columns: None,
        custom: false,
        view: None,
        schemas: BTreeMap::new(),
    }
}

/// The built-in resources every simulated cluster serves.
pub fn builtins() -> Vec<ResourceType> {
    let scale = Some(ScalePaths {
        spec_replicas: ".spec.replicas".into(),
        status_replicas: ".status.replicas".into(),
        label_selector: None,
    });
    let mut sts = builtin("apps", "v1", "statefulsets", "statefulset", "StatefulSet", true, &["sts"], true, true);
    sts.scale = scale.clone();
    // Stored and served (so `kubectl apply -k deploy/` works); no controller runs their pods.
    let mut deployments =
        builtin("apps", "v1", "deployments", "deployment", "Deployment", true, &["deploy"], true, true);
    deployments.scale = scale;
    let rbac = |plural: &str, singular: &str, kind: &str, namespaced: bool| {
        builtin("rbac.authorization.k8s.io", "v1", plural, singular, kind, namespaced, &[], false, false)
    };
    vec![
        builtin("", "v1", "namespaces", "namespace", "Namespace", false, &["ns"], true, false),
        builtin("", "v1", "nodes", "node", "Node", false, &["no"], true, false),
        builtin("", "v1", "pods", "pod", "Pod", true, &["po"], true, true),
        builtin("", "v1", "services", "service", "Service", true, &["svc"], true, true),
        builtin("", "v1", "endpoints", "endpoints", "Endpoints", true, &["ep"], false, false),
        builtin("", "v1", "configmaps", "configmap", "ConfigMap", true, &["cm"], false, false),
        builtin("", "v1", "secrets", "secret", "Secret", true, &[], false, false),
        builtin("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, &["sa"], false, false),
        builtin(
            "",
            "v1",
            "persistentvolumeclaims",
            "persistentvolumeclaim",
            "PersistentVolumeClaim",
            true,
            &["pvc"],
            true,
            false,
        ),
        builtin("", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", false, &["pv"], true, false),
        builtin("", "v1", "events", "event", "Event", true, &["ev"], false, false),
        ResourceType {
            view: Some(View::EventsV1),
            ..builtin("events.k8s.io", "v1", "events", "event", "Event", true, &["ev"], false, false)
        },
        builtin("discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice", true, &[], false, false),
        sts,
        deployments,
        rbac("roles", "role", "Role", true),
        rbac("rolebindings", "rolebinding", "RoleBinding", true),
        rbac("clusterroles", "clusterrole", "ClusterRole", false),
        rbac("clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false),
        builtin(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "selfsubjectaccessreview",
            "SelfSubjectAccessReview",
            false,
            &[],
            false,
            false,
        ),
        builtin(
            "authorization.k8s.io",
            "v1",
            "selfsubjectrulesreviews",
            "selfsubjectrulesreview",
            "SelfSubjectRulesReview",
            false,
            &[],
            false,
            false,
        ),
        // `kubectl auth whoami`: v1 from kubectl 1.28, v1beta1 for 1.27.
        ResourceType {
            versions: vec!["v1".into(), "v1beta1".into()],
            ..builtin(
                "authentication.k8s.io",
                "v1",
                "selfsubjectreviews",
                "selfsubjectreview",
                "SelfSubjectReview",
                false,
                &[],
                false,
                false,
            )
        },
        builtin(
            "apps",
            "v1",
            "controllerrevisions",
            "controllerrevision",
            "ControllerRevision",
            true,
            &[],
            false,
            false,
        ),
        builtin("coordination.k8s.io", "v1", "leases", "lease", "Lease", true, &[], false, false),
        // Honoured by the eviction subresource (`api::eviction`); status kept by the disruption
        // controller (`cluster::disruption`), so `kubectl drain` meets them as on a real cluster.
        builtin(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "poddisruptionbudget",
            "PodDisruptionBudget",
            true,
            &["pdb"],
            true,
            false,
        ),
        builtin("storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", false, &["sc"], false, false),
        // Validating admission policies (evaluated by `store::admission`).
        builtin(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicies",
            "validatingadmissionpolicy",
            "ValidatingAdmissionPolicy",
            false,
            &[],
            true,
            false,
        ),
        builtin(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicybindings",
            "validatingadmissionpolicybinding",
            "ValidatingAdmissionPolicyBinding",
            false,
            &[],
            false,
            false,
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "customresourcedefinition",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
            true,
            false,
        ),
    ]
}

/// Key of a resource in storage: group and plural (versions share one store).
pub type ResourceKey = (String, String);

/// The live table of served resources of one simulated cluster.
#[derive(Debug)]
pub struct ResourceTable {
    types: RwLock<BTreeMap<ResourceKey, Arc<ResourceType>>>,
}

impl Default for ResourceTable {
    /// The table of the newest simulated release.
    fn default() -> Self {
        Self::for_release(Release::default())
    }
}

/// Whether a release serves a built-in resource as installed (feature gates at their defaults):
/// ValidatingAdmissionPolicies and their bindings only from 1.30, where they are GA.
fn served_in(release: Release, rt: &ResourceType) -> bool {
    match (rt.group.as_str(), rt.plural.as_str()) {
        (admission::GROUP, admission::POLICIES | admission::BINDINGS) => release.serves_admission_policies(),
        _ => true,
    }
}

impl ResourceTable {
    /// The built-in resources `release` serves, before any CRD is installed.
    pub fn for_release(release: Release) -> Self {
        let types = builtins()
            .into_iter()
            .filter(|t| served_in(release, t))
            .map(|t| ((t.group.clone(), t.plural.clone()), Arc::new(t)))
            .collect();
        Self { types: RwLock::new(types) }
    }
}

impl ResourceTable {
    /// The resource served at `group/version/plural`, if any.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        let types = self.types.read();
        types.get(&(group.to_string(), plural.to_string())).filter(|t| t.serves(version)).cloned()
    }

    /// The resource of a group and plural, any version.
    pub fn by_plural(&self, group: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types.read().get(&(group.to_string(), plural.to_string())).cloned()
    }

    /// The resource of a group, version and kind (for owner references and bodies).
    pub fn by_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.types.read().values().find(|t| t.group == group && t.kind == kind).cloned()
    }

    /// Every served resource, sorted by group then plural.
    pub fn all(&self) -> Vec<Arc<ResourceType>> {
        self.types.read().values().cloned().collect()
    }

    /// Serve a custom resource (from a CRD); replaces an earlier definition of the same name.
    pub fn install(&self, rt: ResourceType) {
        self.types.write().insert((rt.group.clone(), rt.plural.clone()), Arc::new(rt));
    }

    /// Stop serving a custom resource.
    pub fn remove(&self, group: &str, plural: &str) {
        self.types.write().remove(&(group.to_string(), plural.to_string()));
    }
}

/// Reads a CRD object into the resource type it defines; `None` if it defines nothing servable.
pub fn from_crd(crd: &Value) -> Option<ResourceType> {
    let spec = crd.get("spec")?;
    let names = spec.get("names")?;
    let str_of = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let list_of = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    let plural = str_of(names.get("plural"))?;
    let kind = str_of(names.get("kind"))?;
    let versions: Vec<&Value> = spec
        .get("versions")?
        .as_array()?
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .collect();
    // The storage version goes first: it is the preferred one.
    let mut ordered = versions.clone();
    ordered.sort_by_key(|v| !v.get("storage").and_then(Value::as_bool).unwrap_or(false));
    let first = *ordered.first()?;
    let subresources = first.get("subresources");
    let scale = subresources.and_then(|s| s.get("scale")).map(|s| ScalePaths {
        spec_replicas: str_of(s.get("specReplicasPath")).unwrap_or_else(|| ".spec.replicas".into()),
        status_replicas: str_of(s.get("statusReplicasPath")).unwrap_or_else(|| ".status.replicas".into()),
        label_selector: str_of(s.get("labelSelectorPath")),
    });
    Some(ResourceType {
        group: str_of(spec.get("group"))?,
        versions: ordered.iter().filter_map(|v| str_of(v.get("name"))).collect(),
        singular: str_of(names.get("singular")).unwrap_or_else(|| kind.to_lowercase()),
        plural,
        kind,
        namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
        short_names: list_of(names.get("shortNames")),
        categories: list_of(names.get("categories")),
        status_subresource: subresources.and_then(|s| s.get("status")).is_some(),
        scale,
        printer_columns: first.get("additionalPrinterColumns").and_then(Value::as_array).cloned(),
        custom: true,
        view: None,
        schemas: ordered
            .iter()
            .filter_map(|v| {
                let schema = v.pointer("/schema/openAPIV3Schema")?;
                Some((str_of(v.get("name"))?, Arc::new(CrdSchema::new(schema))))
            })
            .collect(),
    })
}
