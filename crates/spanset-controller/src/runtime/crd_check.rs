//! Before the controller starts: are spanset's CRDs installed, and do they carry every field
//! this binary reads and writes? A CRD older than the binary (the image rolled, the CRDs not
//! applied) prunes the fields it does not know from what the controller writes and never
//! returns them, so the controller would loop on decoding or lose its own records. So
//! `spanset run` compares the served schema of each CRD with the one this binary generates
//! (`spanset crd`) and refuses to start, naming the CRD and the field.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client, CustomResourceExt};
use serde_json::Value;
use spanset_api::{FederatedStatefulSet, MemberCluster};

/// The fields (paths such as `.spec.placement.clusters[].name`) of `wanted`'s served versions
/// that `installed` lacks, and each served version it does not serve, as sentences (pure).
/// Below a node that keeps unknown fields (`x-kubernetes-preserve-unknown-fields`) nothing is
/// missing.
pub fn missing(installed: &CustomResourceDefinition, wanted: &CustomResourceDefinition) -> Vec<String> {
    let mut out = Vec::new();
    for version in wanted.spec.versions.iter().filter(|v| v.served) {
        let Some(have) = installed.spec.versions.iter().find(|v| v.name == version.name && v.served) else {
            out.push(format!("version {} is not served", version.name));
            continue;
        };
        let schema = |v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion| {
            v.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).and_then(|s| serde_json::to_value(s).ok())
        };
        let (Some(want), have) = (schema(version), schema(have)) else { continue };
        let mut fields = Vec::new();
        walk(&want, have.as_ref().unwrap_or(&Value::Null), String::new(), &mut fields);
        out.extend(fields.into_iter().map(|f| format!("version {} has no field {f}", version.name)));
    }
    out
}

/// Collects the paths under `want` that `have` lacks.
fn walk(want: &Value, have: &Value, path: String, out: &mut Vec<String>) {
    if have.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    if let Some(props) = want.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            let here = format!("{path}.{name}");
            match have.get("properties").and_then(|p| p.get(name)) {
                Some(h) => walk(sub, h, here, out),
                None => out.push(here),
            }
        }
    }
    if let Some(items) = want.get("items") {
        walk(items, have.get("items").unwrap_or(&Value::Null), format!("{path}[]"), out);
    }
    if let Some(values) = want.get("additionalProperties").filter(|v| v.is_object()) {
        walk(values, have.get("additionalProperties").unwrap_or(&Value::Null), format!("{path}{{}}"), out);
    }
}

/// Reads spanset's CRDs from the host and checks each against this binary's; the error names
/// the CRD, and each missing field or version, and says how to install the right ones.
pub async fn check(host: &Client) -> Result<(), String> {
    let api: Api<CustomResourceDefinition> = Api::all(host.clone());
    let mut problems = Vec::new();
    for wanted in [FederatedStatefulSet::crd(), MemberCluster::crd()] {
        let name = wanted.metadata.name.clone().unwrap_or_default();
        match api.get_opt(&name).await {
            Ok(Some(installed)) => {
                problems.extend(missing(&installed, &wanted).into_iter().map(|m| format!("CRD {name}: {m}")));
            }
            Ok(None) => problems.push(format!("CRD {name} is not installed")),
            Err(e) => problems.push(format!("cannot read CRD {name}: {e}")),
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the host's spanset CRDs do not match this controller ({}); install this version's CRDs \
         (`spanset crd | kubectl apply --server-side -f -`) before the controller",
        problems.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `crd` with the property at `path` (names from the schema root) removed.
    fn without(mut crd: CustomResourceDefinition, path: &[&str]) -> CustomResourceDefinition {
        let schema = crd.spec.versions[0].schema.as_mut().unwrap().open_api_v3_schema.as_mut().unwrap();
        let mut v = serde_json::to_value(&*schema).unwrap();
        let mut node = &mut v;
        for p in &path[..path.len() - 1] {
            node = &mut node["properties"][*p];
        }
        node["properties"].as_object_mut().unwrap().remove(path[path.len() - 1]).expect("the field exists");
        *schema = serde_json::from_value(v).unwrap();
        crd
    }

    #[test]
    fn this_binary_s_crds_lack_nothing() {
        for crd in [FederatedStatefulSet::crd(), MemberCluster::crd()] {
            assert_eq!(missing(&crd, &crd), Vec::<String>::new());
        }
    }

    #[test]
    fn a_removed_field_is_named_by_its_path_with_everything_below_it_once() {
        let crd = FederatedStatefulSet::crd();
        let old = without(crd.clone(), &["status", "observedGeneration"]);
        assert_eq!(missing(&old, &crd), vec!["version v1alpha1 has no field .status.observedGeneration".to_string()]);
        let old = without(crd.clone(), &["spec", "placement"]);
        assert_eq!(missing(&old, &crd), vec!["version v1alpha1 has no field .spec.placement".to_string()]);
    }

    #[test]
    fn an_unserved_version_is_named_and_unknown_fields_kept_are_enough() {
        let crd = MemberCluster::crd();
        let mut old = crd.clone();
        old.spec.versions[0].served = false;
        assert_eq!(missing(&old, &crd), vec!["version v1alpha1 is not served".to_string()]);
        let mut open = crd.clone();
        let schema = open.spec.versions[0].schema.as_mut().unwrap().open_api_v3_schema.as_mut().unwrap();
        schema.properties = None;
        schema.x_kubernetes_preserve_unknown_fields = Some(true);
        assert_eq!(missing(&open, &crd), Vec::<String>::new());
    }

    #[test]
    fn a_field_in_list_items_is_named_through_the_list() {
        let want = serde_json::json!({"properties": {"spec": {"properties": {"clusters": {
            "items": {"properties": {"name": {}, "weight": {}}}}}}}});
        let have = serde_json::json!({"properties": {"spec": {"properties": {"clusters": {
            "items": {"properties": {"name": {}}}}}}}});
        let mut out = Vec::new();
        walk(&want, &have, String::new(), &mut out);
        assert_eq!(out, vec![".spec.clusters[].weight".to_string()]);
    }
}
