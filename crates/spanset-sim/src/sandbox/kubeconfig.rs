//! Writes a kubeconfig with one context per simulated cluster, so kubectl and kube-rs reach
//! them with `--context NAME` (context, cluster and user are all named after the cluster).

use std::path::Path;

use base64::Engine;
use serde_json::json;

/// How to reach one simulated cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// Cluster name (also the context and user name).
    pub name: String,
    /// Server URL.
    pub url: String,
    /// The administrator's bearer token, when the cluster enforces authentication.
    pub token: Option<String>,
    /// The CA that signed the server's certificate (PEM), for a cluster served over TLS.
    pub ca_pem: Option<String>,
}

impl Access {
    /// Access without credentials (a cluster that does not enforce authentication).
    pub fn open(name: &str, url: &str) -> Self {
        Self { name: name.into(), url: url.into(), token: None, ca_pem: None }
    }
}

/// Renders the kubeconfig for some clusters; the first cluster is current.
pub fn render(clusters: &[Access]) -> String {
    let user = |a: &Access| match &a.token {
        Some(t) => json!({"token": t}),
        None => json!({}),
    };
    let cluster = |a: &Access| match &a.ca_pem {
        Some(pem) => {
            json!({"server": a.url, "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(pem)})
        }
        None => json!({"server": a.url}),
    };
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters.iter().map(|a| json!({"name": a.name, "cluster": cluster(a)})).collect::<Vec<_>>(),
        "contexts": clusters.iter().map(|a| json!({"name": a.name, "context": {"cluster": a.name, "user": a.name, "namespace": "default"}})).collect::<Vec<_>>(),
        "users": clusters.iter().map(|a| json!({"name": a.name, "user": user(a)})).collect::<Vec<_>>(),
        "current-context": clusters.first().map(|a| a.name.as_str()).unwrap_or(""),
        "preferences": {},
    });
    serde_yaml::to_string(&doc).expect("a JSON document always renders as YAML")
}

/// Writes the kubeconfig atomically (a reader never sees half a file); owner-only, since it
/// may hold tokens.
pub fn write(path: &Path, clusters: &[Access]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    std::io::Write::write_all(&mut file.open(&tmp)?, render(clusters).as_bytes())?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_context_per_cluster_and_first_is_current() {
        let text = render(&[Access::open("a", "http://127.0.0.1:1"), Access::open("b", "http://127.0.0.1:2")]);
        let doc: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(doc["current-context"], "a");
        assert_eq!(doc["contexts"][1]["context"]["cluster"], "b");
        assert_eq!(doc["contexts"][1]["context"]["user"], "b");
        assert_eq!(doc["clusters"][1]["cluster"]["server"], "http://127.0.0.1:2");
        assert_eq!(doc["users"][1]["user"], serde_json::json!({}));
    }

    #[test]
    fn a_cluster_that_enforces_authentication_gets_its_token() {
        let a = Access { token: Some("t0k".into()), ..Access::open("a", "http://127.0.0.1:1") };
        let doc: serde_json::Value = serde_yaml::from_str(&render(&[a])).unwrap();
        assert_eq!(doc["users"][0]["user"]["token"], "t0k");
    }
}
