//! What a fresh cluster holds before anyone writes to it — the namespaces every real cluster
//! starts with, the `kubernetes` Service and the default StorageClasses — and the constructors
//! that install it. Apart from the cluster's state ([`super`]) because installing goes through
//! the registry, which itself acts on that state.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Cluster, ClusterConfig, disks::VolumeStore, ledger::Ledger};
use crate::store::{actor::Component, registry::WriteOptions};

/// The part of the Advanced StatefulSet schema that the sandbox enforces: the types of the
/// fields the StatefulSet controller reads (the chart's schema is much longer; the rest is kept
/// as sent).
fn kruise_schema() -> Value {
    let int = |format: &str| json!({"type": "integer", "format": format});
    let free = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {
                    "replicas": int("int32"), "revisionHistoryLimit": int("int32"), "minReadySeconds": int("int32"),
                    "serviceName": {"type": "string"}, "podManagementPolicy": {"type": "string"},
                    "selector": free, "template": free,
                },
            },
            "status": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {
                    "replicas": int("int32"), "readyReplicas": int("int32"), "availableReplicas": int("int32"),
                    "updatedReplicas": int("int32"), "currentReplicas": int("int32"), "observedGeneration": int("int64"),
                },
            },
        },
    })
}

/// The API group of the Multi-Cluster Services API (KEP-1645).
pub const MCS_GROUP: &str = "multicluster.x-k8s.io";

/// A namespaced `multicluster.x-k8s.io/v1alpha1` CRD of this kind, with a status subresource.
fn mcs_crd(kind: &str, short: &str, schema: Value) -> Value {
    let singular = kind.to_lowercase();
    let plural = format!("{singular}s");
    let column = |name: &str, ty: &str, path: &str| json!({"name": name, "type": ty, "jsonPath": path});
    let mut columns = vec![column("Age", "date", ".metadata.creationTimestamp")];
    if kind == "ServiceImport" {
        columns.splice(0..0, [column("Type", "string", ".spec.type"), column("IP", "string", ".spec.ips")]);
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{MCS_GROUP}")},
        "spec": {
            "group": MCS_GROUP, "scope": "Namespaced",
            "names": {"plural": plural, "singular": singular, "kind": kind, "listKind": format!("{kind}List"), "shortNames": [short]},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
            }],
        },
    })
}

/// `status.conditions` of the MCS types: metav1.Conditions, a map keyed by type.
fn conditions_schema() -> Value {
    json!({
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object", "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "message": {"type": "string"}, "observedGeneration": {"type": "integer", "format": "int64"},
                "reason": {"type": "string"}, "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "type": {"type": "string"},
            },
        },
    })
}

/// ServiceExport: the Service of the same name and namespace is to be consumable from the
/// other clusters of the ClusterSet; it has no spec.
fn service_export_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"status": {"type": "object", "properties": {"conditions": conditions_schema()}}},
    })
}

/// ServiceImport: a Service imported from the clusters of a ClusterSet.
fn service_import_schema() -> Value {
    let port = json!({
        "type": "object", "required": ["port"],
        "properties": {"name": {"type": "string"}, "protocol": {"type": "string"}, "appProtocol": {"type": "string"},
                       "port": {"type": "integer", "format": "int32"}},
    });
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object", "required": ["ports", "type"],
                "properties": {
                    "ips": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
                    "ports": {"type": "array", "x-kubernetes-list-type": "atomic", "items": port},
                    "sessionAffinity": {"type": "string"},
                    "sessionAffinityConfig": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "type": {"type": "string", "enum": ["ClusterSetIP", "Headless"]},
                },
            },
            "status": {
                "type": "object",
                "properties": {"clusters": {
                    "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["cluster"],
                    "items": {"type": "object", "required": ["cluster"], "properties": {"cluster": {"type": "string"}}},
                }},
            },
        },
    })
}

impl Cluster {
    /// The `kubernetes` Service in `default` and its Endpoints and EndpointSlice, which every real cluster
    /// shows first in `kubectl get svc -A` (the apiserver's own address, port 443 → 6443).
    fn add_kubernetes_service(&self) {
        let labels = json!({"component": "apiserver", "provider": "kubernetes"});
        let objects = [
            (
                "services",
                json!({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
                       "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
                                "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}}),
            ),
            (
                "endpoints",
                json!({"apiVersion": "v1", "kind": "Endpoints",
                       "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
                       "subsets": [{"addresses": [{"ip": "192.168.0.2"}],
                                    "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]}),
            ),
            (
                "endpointslices",
                json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                       "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"kubernetes.io/service-name": "kubernetes"}},
                       "addressType": "IPv4",
                       "endpoints": [{"addresses": ["192.168.0.2"], "conditions": {"ready": true}}],
                       "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}),
            ),
        ];
        for (plural, object) in objects {
            let group = if plural == "endpointslices" { "discovery.k8s.io" } else { "" };
            if let Some(rt) = self.resources.by_plural(group, plural) {
                let _ = self.create(&rt, Some("default"), object, &WriteOptions::by(Component::Sandbox));
            }
        }
    }

    /// The ClusterRoles and bindings every real cluster bootstraps that matter here: the
    /// administrators' `cluster-admin`, and what every authenticated user may do —
    /// discovery (`system:discovery`), public health and version (`system:public-info-viewer`)
    /// and reviewing its own access (`system:basic-user`).
    fn add_bootstrap_rbac(&self) {
        let rbac = |plural: &str| self.resources.by_plural("rbac.authorization.k8s.io", plural);
        let (Some(roles), Some(bindings)) = (rbac("clusterroles"), rbac("clusterrolebindings")) else { return };
        let role = |name: &str, rules: serde_json::Value| {
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
                   "rules": rules})
        };
        let binding = |name: &str, group: &str| {
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]})
        };
        let health = json!(["/healthz", "/livez", "/readyz", "/version", "/version/"]);
        let objects = [
            (
                &roles,
                role(
                    "cluster-admin",
                    json!([
                        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                        {"nonResourceURLs": ["*"], "verbs": ["*"]},
                    ]),
                ),
            ),
            (
                &roles,
                role(
                    "system:discovery",
                    json!([{"nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"
            ], "verbs": ["get"]}]),
                ),
            ),
            (&roles, role("system:public-info-viewer", json!([{"nonResourceURLs": health, "verbs": ["get"]}]))),
            (
                &roles,
                role(
                    "system:basic-user",
                    json!([{"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]}]),
                ),
            ),
            (&bindings, binding("cluster-admin", "system:masters")),
            (&bindings, binding("system:discovery", "system:authenticated")),
            (&bindings, binding("system:public-info-viewer", "system:authenticated")),
            (&bindings, binding("system:basic-user", "system:authenticated")),
        ];
        for (rt, object) in objects {
            let _ = self.create(rt, None, object, &WriteOptions::by(Component::Sandbox));
        }
    }

    /// OpenKruise's Advanced StatefulSet CRD, as the Kruise chart installs it (served version,
    /// short name, status and scale subresources, printer columns).
    fn add_kruise(&self) {
        let Some(crds) = self.resources.by_plural("apiextensions.k8s.io", "customresourcedefinitions") else { return };
        let column = |name: &str, ty: &str, path: &str| json!({"name": name, "type": ty, "jsonPath": path});
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "statefulsets.apps.kruise.io"},
            "spec": {
                "group": "apps.kruise.io", "scope": "Namespaced",
                "names": {"plural": "statefulsets", "singular": "statefulset", "kind": "StatefulSet",
                          "listKind": "StatefulSetList", "shortNames": ["asts"]},
                "versions": [{
                    "name": "v1beta1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": kruise_schema()},
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.labelSelector"}},
                    "additionalPrinterColumns": [
                        column("DESIRED", "integer", ".spec.replicas"),
                        column("CURRENT", "integer", ".status.replicas"),
                        column("UPDATED", "integer", ".status.updatedReplicas"),
                        column("READY", "integer", ".status.readyReplicas"),
                        column("AVAILABLE", "integer", ".status.availableReplicas"),
                        column("AGE", "date", ".metadata.creationTimestamp"),
                    ],
                }],
            },
        });
        if let Err(e) = self.create(&crds, None, crd, &WriteOptions::by(Component::Sandbox)) {
            tracing::warn!(cluster = %self.config.name, error = %e, "cannot install the Advanced StatefulSet CRD");
        }
    }

    /// The Multi-Cluster Services API's CRDs (`multicluster.x-k8s.io/v1alpha1`, as the
    /// kubernetes-sigs/mcs-api project ships them): ServiceExport (no spec; `status.conditions`
    /// written by the MCS implementation) and ServiceImport (`spec.type` ClusterSetIP or
    /// Headless, `ports`, `ips`; `status.clusters`). Nothing acts on them here: a test sees
    /// what a controller writes.
    fn add_mcs(&self) {
        let Some(crds) = self.resources.by_plural("apiextensions.k8s.io", "customresourcedefinitions") else { return };
        for crd in [
            mcs_crd("ServiceExport", "svcex", service_export_schema()),
            mcs_crd("ServiceImport", "svcim", service_import_schema()),
        ] {
            if let Err(e) = self.create(&crds, None, crd, &WriteOptions::by(Component::Sandbox)) {
                tracing::warn!(cluster = %self.config.name, error = %e, "cannot install an MCS API CRD");
            }
        }
    }

    /// A new cluster holding the namespaces every real cluster starts with.
    pub fn new(config: ClusterConfig) -> Arc<Self> {
        Self::in_sandbox(config, Arc::default(), Arc::default())
    }

    /// A new cluster sharing the ledger and volumes of a sandbox with its other clusters.
    pub fn in_sandbox(config: ClusterConfig, ledger: Arc<Ledger>, volumes: Arc<VolumeStore>) -> Arc<Self> {
        let cluster = Arc::new(Self::bare(config, ledger, volumes));
        let ns = cluster.resources.by_plural("", "namespaces").expect("namespaces are built in");
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            cluster
                .create(
                    &ns,
                    None,
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                    &WriteOptions::by(Component::Sandbox),
                )
                .expect("a fresh cluster accepts its own namespaces");
        }
        // Their `default` ServiceAccounts now, not on the ServiceAccount controller's first
        // sweep: what a fresh cluster holds (and the uids a seed gives) does not depend on when
        // that sweep runs.
        super::service_accounts::sweep(&cluster);
        cluster.add_kubernetes_service();
        cluster.add_bootstrap_rbac();
        super::volumes::install_classes(&cluster);
        if cluster.config.kruise {
            cluster.add_kruise();
        }
        if cluster.config.mcs {
            cluster.add_mcs();
        }
        cluster
    }
}
