//! Writes a kubeconfig with one context per simulated cluster, so kubectl and kube-rs reach
//! them with `--context NAME` (context, cluster and user are all named after the cluster).

use std::path::Path;

use serde_json::json;

/// Renders the kubeconfig for `(name, server URL)` pairs; the first cluster is current.
pub fn render(clusters: &[(String, String)]) -> String {
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters.iter().map(|(n, url)| json!({"name": n, "cluster": {"server": url}})).collect::<Vec<_>>(),
        "contexts": clusters.iter().map(|(n, _)| json!({"name": n, "context": {"cluster": n, "user": n, "namespace": "default"}})).collect::<Vec<_>>(),
        "users": clusters.iter().map(|(n, _)| json!({"name": n, "user": {}})).collect::<Vec<_>>(),
        "current-context": clusters.first().map(|(n, _)| n.as_str()).unwrap_or(""),
        "preferences": {},
    });
    serde_yaml::to_string(&doc).expect("a JSON document always renders as YAML")
}

/// Writes the kubeconfig atomically (a reader never sees half a file).
pub fn write(path: &Path, clusters: &[(String, String)]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, render(clusters))?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_context_per_cluster_and_first_is_current() {
        let text = render(&[("a".into(), "http://127.0.0.1:1".into()), ("b".into(), "http://127.0.0.1:2".into())]);
        let doc: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(doc["current-context"], "a");
        assert_eq!(doc["contexts"][1]["context"]["cluster"], "b");
        assert_eq!(doc["contexts"][1]["context"]["user"], "b");
        assert_eq!(doc["clusters"][1]["cluster"]["server"], "http://127.0.0.1:2");
    }
}
