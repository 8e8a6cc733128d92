//! Discovery documents built from the live resource table: `/version`, legacy `/api`, `/apis`,
//! per-group-version resource lists, and aggregated discovery v2 / v2beta1
//! (<https://kubernetes.io/docs/concepts/overview/kubernetes-api/#discovery-api>).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::{cluster::Cluster, store::resources::ResourceType};

/// The `version.Info` document.
pub fn version(cluster: &Cluster) -> Value {
    let release = cluster.config.release;
    json!({
        "major": "1",
        "minor": release.minor.to_string(),
        "gitVersion": release.git_version(),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-05-15T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// Resource types grouped by API group (core first), each with its served versions.
fn groups(cluster: &Cluster) -> BTreeMap<String, Vec<std::sync::Arc<ResourceType>>> {
    let mut groups: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for rt in cluster.resources.all() {
        groups.entry(rt.group.clone()).or_default().push(rt);
    }
    groups
}

fn group_versions(types: &[std::sync::Arc<ResourceType>]) -> Vec<String> {
    let mut versions: Vec<String> = Vec::new();
    for rt in types {
        for v in &rt.versions {
            if !versions.contains(v) {
                versions.push(v.clone());
            }
        }
    }
    versions
}

/// Legacy `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn api_group(name: &str, versions: &[String]) -> Value {
    let gvs: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v})).collect();
    json!({"name": name, "versions": gvs, "preferredVersion": gvs[0].clone()})
}

/// Legacy `/apis`.
pub fn api_group_list(cluster: &Cluster) -> Value {
    let groups: Vec<Value> = groups(cluster)
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, types)| api_group(g, &group_versions(types)))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/GROUP`, if the group exists.
pub fn api_group_doc(cluster: &Cluster, group: &str) -> Option<Value> {
    let all = groups(cluster);
    let types = all.get(group).filter(|_| !group.is_empty())?;
    let mut doc = api_group(group, &group_versions(types));
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn scale_kind() -> Value {
    json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
}

/// Whether the resource is core/v1 pods, whose `eviction` subresource (answered in
/// `policy/v1 Eviction`) `kubectl drain` looks for in discovery: without it, drain deletes pods
/// instead of evicting them, and disruption budgets go unheeded.
fn has_eviction(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "pods"
}

fn eviction_kind() -> Value {
    json!({"group": "policy", "version": "v1", "kind": "Eviction"})
}

/// `/api/v1` or `/apis/GROUP/VERSION`, if served.
pub fn api_resource_list(cluster: &Cluster, group: &str, version: &str) -> Option<Value> {
    let types: Vec<_> = cluster.resources.all().into_iter().filter(|t| t.group == group && t.serves(version)).collect();
    if types.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for rt in &types {
        let mut entry = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": rt.verbs(),
        });
        if !rt.short_names.is_empty() {
            entry["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            entry["categories"] = json!(rt.categories);
        }
        resources.push(entry);
        if rt.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", rt.plural), "singularName": "", "namespaced": rt.namespaced,
                "kind": rt.kind, "verbs": ["get", "patch", "update"],
            }));
        }
        if rt.scale.is_some() {
            resources.push(json!({
                "name": format!("{}/scale", rt.plural), "singularName": "", "namespaced": rt.namespaced,
                "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"],
            }));
        }
        if has_eviction(rt) {
            resources.push(json!({
                "name": format!("{}/eviction", rt.plural), "singularName": "", "namespaced": rt.namespaced,
                "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"],
            }));
        }
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}

fn aggregated_resource(rt: &ResourceType, version: &str) -> Value {
    let mut subresources = Vec::new();
    if rt.status_subresource {
        subresources.push(json!({
            "subresource": "status",
            "responseKind": {"group": rt.group, "version": version, "kind": rt.kind},
            "verbs": ["get", "patch", "update"],
        }));
    }
    if rt.scale.is_some() {
        subresources
            .push(json!({"subresource": "scale", "responseKind": scale_kind(), "verbs": ["get", "patch", "update"]}));
    }
    if has_eviction(rt) {
        subresources.push(json!({"subresource": "eviction", "responseKind": eviction_kind(), "verbs": ["create"]}));
    }
    let mut entry = json!({
        "resource": rt.plural,
        "responseKind": {"group": rt.group, "version": version, "kind": rt.kind},
        "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": rt.singular,
        "verbs": rt.verbs(),
    });
    if !rt.short_names.is_empty() {
        entry["shortNames"] = json!(rt.short_names);
    }
    if !rt.categories.is_empty() {
        entry["categories"] = json!(rt.categories);
    }
    if !subresources.is_empty() {
        entry["subresources"] = json!(subresources);
    }
    entry
}

/// Aggregated discovery for `/api` (`core = true`) or `/apis`, in `apidiscovery.k8s.io/<dv>`.
pub fn aggregated(cluster: &Cluster, core: bool, dv: &str) -> Value {
    let items: Vec<Value> = groups(cluster)
        .iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, types)| {
            let versions: Vec<Value> = group_versions(types)
                .iter()
                .map(|v| {
                    let resources: Vec<Value> =
                        types.iter().filter(|t| t.serves(v)).map(|t| aggregated_resource(t, v)).collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{dv}"),
        "metadata": {},
        "items": items,
    })
}
