//! Every Kubernetes object written in the docs (`README.md`, `docs/`) is one a cluster accepts:
//! each is sent to a sandbox with spanset's CRDs installed as `kubectl apply --dry-run=server`
//! sends it (a create with `dryRun=All` and `fieldValidation=Strict`), and whatever the apiserver
//! refuses fails here with the block's `file:line` and the apiserver's message. A reader who
//! copies a block gets an object, not an error.
//!
//! Which blocks: a fenced block tagged `yaml` (or `yml`) must be whole objects, each YAML
//! document with `apiVersion` and `kind`; an untagged block is checked when one of its
//! documents has both. A block that is deliberately part of an object (a `spec.placement`
//! excerpt) says so with the HTML comment [`FRAGMENT`] on the line before its fence, which a code
//! host does not render (docs/development.md). Objects go into a namespace created first when
//! it does not exist, as a reader's own cluster would have it.

use std::path::Path;

use kube::{
    Client,
    core::GroupVersionKind,
    discovery::{Scope, pinned_kind},
};
use serde_json::Value;

use crate::support::{
    docs::{fenced_blocks, markdown_files, root},
    fleet_with_clients,
};

/// The mark of a block that is part of an object, not one: this line right before its fence.
const FRAGMENT: &str = "<!-- fragment -->";

/// One Kubernetes object of the docs.
#[derive(Debug)]
struct Written {
    /// `docs/api.md:12`: where its YAML document starts.
    at: String,
    object: Value,
}

/// The YAML documents of a block's body, each with the line (0-based, in the body) it starts on.
fn documents(body: &str) -> Vec<(usize, String)> {
    let mut out = vec![(0, String::new())];
    for (i, line) in body.lines().enumerate() {
        if line.trim_end() == "---" {
            out.push((i + 1, String::new()));
        } else {
            out.last_mut().expect("one document at least").1.push_str(&format!("{line}\n"));
        }
    }
    out.retain(|(_, text)| text.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')));
    out
}

/// Whether `value` is a whole Kubernetes object: a mapping with a string `apiVersion` and `kind`.
fn is_object(value: &Value) -> bool {
    value.get("apiVersion").is_some_and(Value::is_string) && value.get("kind").is_some_and(Value::is_string)
}

/// The Kubernetes objects of `text` (the file `file`), and what is wrong with its YAML blocks
/// that are neither objects nor marked as fragments.
fn written_objects(file: &Path, text: &str) -> (Vec<Written>, Vec<String>) {
    let (mut objects, mut problems) = (Vec::new(), Vec::new());
    for block in fenced_blocks(text) {
        let lang = block.info.split_whitespace().next().unwrap_or_default();
        if block.before == FRAGMENT || !matches!(lang, "" | "yaml" | "yml") {
            continue;
        }
        let docs: Vec<(String, Result<Value, String>)> = documents(&block.body)
            .into_iter()
            .map(|(line, yaml)| {
                let at = format!("{}:{}", file.display(), block.line + 1 + line);
                (at, serde_yaml::from_str::<Value>(&yaml).map_err(|e| e.to_string()))
            })
            .collect();
        let any_object = docs.iter().any(|(_, d)| d.as_ref().is_ok_and(is_object));
        if lang.is_empty() && !any_object {
            continue;
        }
        for (at, doc) in docs {
            match doc {
                Ok(object) if is_object(&object) => objects.push(Written { at, object }),
                Ok(_) => problems.push(format!(
                    "{at}: a YAML document without apiVersion and kind; mark the block `{FRAGMENT}` if it is part of an object"
                )),
                Err(e) => problems.push(format!("{at}: not YAML ({e}); mark the block `{FRAGMENT}` if it is not meant whole")),
            }
        }
    }
    (objects, problems)
}

/// The apiserver's answer to creating `object` with `dryRun=All` (its namespace created first
/// if missing): `Err` with its message when it refuses it.
async fn dry_run(client: &Client, object: &Value) -> Result<(), String> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) =
        pinned_kind(client, &gvk).await.map_err(|e| format!("the server has no {kind} in {api_version}: {e}"))?;
    let base = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
    let url = if caps.scope == Scope::Namespaced {
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or("default");
        ensure_namespace(client, namespace).await?;
        format!("{base}/namespaces/{namespace}/{}", resource.plural)
    } else {
        format!("{base}/{}", resource.plural)
    };
    let body = serde_json::to_vec(object).map_err(|e| e.to_string())?;
    let request = http::Request::post(format!("{url}?dryRun=All&fieldValidation=Strict&fieldManager=kubectl"))
        .header("content-type", "application/json")
        .body(body)
        .map_err(|e| e.to_string())?;
    match client.request::<Value>(request).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(e) => Err(e.to_string()),
    }
}

/// Creates namespace `name` unless it exists.
async fn ensure_namespace(client: &Client, name: &str) -> Result<(), String> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: kube::Api<Namespace> = kube::Api::all(client.clone());
    if api.get_opt(name).await.map_err(|e| format!("namespace {name}: {e}"))?.is_some() {
        return Ok(());
    }
    let namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).expect("a Namespace");
    match api.create(&Default::default(), &namespace).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(format!("namespace {name} not created: {e}")),
    }
}

/// A sandbox cluster with spanset's CRDs, as a reader's host cluster has them.
async fn host() -> (spanset_sim::sandbox::fleet::Fleet, Client) {
    let config = spanset_sim::cluster::ClusterConfig { nodes: 0, ..spanset_sim::cluster::ClusterConfig::named("host") };
    let (fleet, mut clients) = fleet_with_clients(vec![config]).await;
    let client = clients.remove(0);
    spanset::cli::sandbox::install_crds(&client).await.expect("CRDs installed");
    (fleet, client)
}

/// What the apiserver refuses of `objects`, and the problems found reading them, one line each.
async fn refused(client: &Client, objects: &[Written]) -> Vec<String> {
    let mut out = Vec::new();
    // Namespaces first, before other objects' namespaces are created for them.
    let (namespaces, others): (Vec<&Written>, Vec<&Written>) =
        objects.iter().partition(|w| w.object["kind"] == "Namespace" && w.object["apiVersion"] == "v1");
    for Written { at, object } in namespaces.into_iter().chain(others) {
        if let Err(message) = dry_run(client, object).await {
            out.push(format!(
                "{at}: {} {}: {message}",
                object["kind"].as_str().unwrap_or(""),
                object["metadata"]["name"]
            ));
        }
    }
    out
}

#[tokio::test]
async fn every_kubernetes_object_in_the_docs_passes_a_server_side_dry_run_or_is_marked_a_fragment() {
    let (mut objects, mut problems) = (Vec::new(), Vec::new());
    for file in markdown_files(root()) {
        let text = std::fs::read_to_string(root().join(&file)).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let (o, p) = written_objects(&file, &text);
        objects.extend(o);
        problems.extend(p);
    }
    // The docs show a FederatedStatefulSet and a MemberCluster (docs/api.md); none found means
    // the reading above broke, not that all is well.
    let kinds: Vec<&str> = objects.iter().filter_map(|w| w.object["kind"].as_str()).collect();
    assert!(kinds.contains(&"FederatedStatefulSet") && kinds.contains(&"MemberCluster"), "objects found: {kinds:?}");
    let (_fleet, client) = host().await;
    problems.extend(refused(&client, &objects).await);
    assert!(problems.is_empty(), "Kubernetes objects of the docs that a cluster refuses:\n{}", problems.join("\n"));
}

/// The check itself, on a small page: it sends what a reader would copy and names where the
/// apiserver's refusal comes from.
#[tokio::test]
async fn the_manifest_checker_names_the_block_and_the_apiserver_s_message() {
    let page = "\
# Page

```yaml
apiVersion: v1
kind: ConfigMap
metadata: {name: fine, namespace: made-for-it}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: Not_A_Name}
```

```
apiVersion: spanset.dev/v1alpha1
kind: MemberCluster
metadata: {name: east}
spec: {context: east, fenced: maybe}
```

<!-- fragment -->
```yaml
placement:
  clusters: [{name: east, weight: 1}]
```

```yaml
placement: {}
```

```sh
kubectl get pods
```
";
    let (objects, problems) = written_objects(Path::new("docs/page.md"), page);
    assert_eq!(
        objects.iter().map(|w| w.at.as_str()).collect::<Vec<_>>(),
        ["docs/page.md:4", "docs/page.md:8", "docs/page.md:14"]
    );
    assert_eq!(
        problems,
        [format!(
            "docs/page.md:27: a YAML document without apiVersion and kind; mark the block `{FRAGMENT}` if it is part of an object"
        )]
    );
    let (_fleet, client) = host().await;
    let refused = refused(&client, &objects).await;
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert!(refused[0].starts_with("docs/page.md:8: ConfigMap \"Not_A_Name\": "), "{refused:#?}");
    assert!(refused[0].contains("Not_A_Name"), "the apiserver's message names it: {refused:#?}");
    assert!(refused[1].starts_with("docs/page.md:14: MemberCluster \"east\": "), "{refused:#?}");
    assert!(refused[1].contains("spec.fenced"), "the apiserver's message names the field: {refused:#?}");
    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, "made-for-it");
    assert!(configmaps.get_opt("fine").await.unwrap().is_none(), "a dry run stores nothing");
}
