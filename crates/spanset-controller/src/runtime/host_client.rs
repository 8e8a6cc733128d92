//! A kube [`Client`] for the host cluster, from the command line's `--kubeconfig FILE` and
//! `--context CTX`, the way kubectl finds one:
//!
//! 1. `--kubeconfig FILE` when given (the file must exist);
//! 2. else `$KUBECONFIG`, a list of files joined like `PATH`; files that do not exist are
//!    skipped and the others merged, first one wins (client-go's loading rules);
//! 3. else `~/.kube/config` when it exists;
//! 4. else the in-cluster service account (`KUBERNETES_SERVICE_HOST`/`_PORT` and the token
//!    under `/var/run/secrets/kubernetes.io/serviceaccount/`), where `--context` means nothing.
//!
//! A kubeconfig that exists but is broken is an error, not a reason to try the next source:
//! silently talking to another cluster than the one meant is worse than stopping.
//!
//! Errors name the file, the context and the problem, never a credential: kubeconfigs hold
//! tokens and keys, so no text of the file is ever quoted (parse errors give a line and column
//! and the expected shape, with quoted values blanked).

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
};

use kube::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig, KubeconfigError, LoadDataError},
};

/// Why no client could be built; every message names the file or context concerned.
#[derive(Debug, thiserror::Error)]
pub enum HostClientError {
    /// The kubeconfig file asked for does not exist.
    #[error("kubeconfig {path} does not exist")]
    FileMissing {
        /// The file.
        path: PathBuf,
    },
    /// The kubeconfig file exists but cannot be read.
    #[error("cannot read kubeconfig {path}: {reason}")]
    FileUnreadable {
        /// The file.
        path: PathBuf,
        /// The OS error.
        reason: String,
    },
    /// The kubeconfig is not YAML of a kubeconfig's shape.
    #[error("kubeconfig {source_name} is not a valid kubeconfig: {reason}")]
    Unparsable {
        /// The file, or a description such as "in Secret ns/name".
        source_name: String,
        /// Where and what, without the file's text.
        reason: String,
    },
    /// `--context` (or current-context) names no context of the kubeconfig.
    #[error("kubeconfig {source_name} has no context {context:?} (contexts: {})", list(.available))]
    UnknownContext {
        /// The kubeconfig.
        source_name: String,
        /// The context asked for.
        context: String,
        /// The contexts it has.
        available: Vec<String>,
    },
    /// No `--context` and no `current-context`.
    #[error("kubeconfig {source_name} sets no current-context; pass --context (contexts: {})", list(.available))]
    NoCurrentContext {
        /// The kubeconfig.
        source_name: String,
        /// The contexts it has.
        available: Vec<String>,
    },
    /// The context names a cluster the kubeconfig does not define.
    #[error("kubeconfig {source_name}: context {context:?} refers to cluster {cluster:?}, which it does not define")]
    UnknownCluster {
        /// The kubeconfig.
        source_name: String,
        /// The context.
        context: String,
        /// The missing cluster.
        cluster: String,
    },
    /// The context's cluster or user cannot be used (no server, bad URL, unreadable
    /// certificate, ...).
    #[error("kubeconfig {source_name}, context {context:?}: {reason}")]
    BadContext {
        /// The kubeconfig.
        source_name: String,
        /// The context.
        context: String,
        /// What is wrong, without credentials.
        reason: String,
    },
    /// No kubeconfig anywhere, and not running in a cluster.
    #[error("no kubeconfig found ({looked}) and not running in a cluster ({reason}); pass --kubeconfig FILE")]
    NoInCluster {
        /// Where kubeconfigs were looked for.
        looked: String,
        /// Why the in-cluster configuration is not available.
        reason: String,
    },
    /// `--context` was given but only the in-cluster configuration was found.
    #[error("--context {context:?} needs a kubeconfig, but none was found ({looked})")]
    ContextWithoutKubeconfig {
        /// The context asked for.
        context: String,
        /// Where kubeconfigs were looked for.
        looked: String,
    },
    /// The configuration was loaded but the HTTP client could not be built (e.g. TLS setup).
    #[error("cannot build a client for {source_name}: {reason}")]
    Client {
        /// The kubeconfig and context, or "the in-cluster service account".
        source_name: String,
        /// Why.
        reason: String,
    },
}

fn list(names: &[String]) -> String {
    if names.is_empty() { "none".to_string() } else { names.join(", ") }
}

/// Where the configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// These kubeconfig files, merged in order.
    Files(Vec<PathBuf>),
    /// The in-cluster service account; `looked` says where kubeconfigs were looked for.
    InCluster { looked: String },
}

/// Picks the source from the flag, `$KUBECONFIG` and the home directory (passed in, so tests
/// need not touch the process environment).
fn pick_source(
    explicit: Option<&Path>,
    env: Option<OsString>,
    home: Option<PathBuf>,
) -> Result<Source, HostClientError> {
    if let Some(path) = explicit {
        if !path.exists() {
            return Err(HostClientError::FileMissing { path: path.to_path_buf() });
        }
        return Ok(Source::Files(vec![path.to_path_buf()]));
    }
    let mut looked = Vec::new();
    match env.filter(|v| !v.is_empty()) {
        Some(value) => {
            let existing: Vec<PathBuf> =
                std::env::split_paths(&value).filter(|p| !p.as_os_str().is_empty() && p.exists()).collect();
            if !existing.is_empty() {
                return Ok(Source::Files(existing));
            }
            looked.push(format!("none of $KUBECONFIG={} exists", value.to_string_lossy()));
        }
        None => looked.push("$KUBECONFIG unset".to_string()),
    }
    match home {
        Some(home) => {
            let default = home.join(".kube").join("config");
            if default.exists() {
                return Ok(Source::Files(vec![default]));
            }
            looked.push(format!("{} does not exist", default.display()));
        }
        None => looked.push("no home directory".to_string()),
    }
    Ok(Source::InCluster { looked: looked.join(", ") })
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// A client for the host cluster from `--kubeconfig FILE` (default: `$KUBECONFIG`, then
/// `~/.kube/config`, then in-cluster) and `--context CTX` (default: the current context).
pub async fn client(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Client, HostClientError> {
    client_tuned(kubeconfig, context, |_| {}).await
}

/// Like [`client`], with `tune` adjusting the loaded configuration (e.g. shorter timeouts for
/// member clusters) before the client is built.
pub async fn client_tuned(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    tune: fn(&mut Config),
) -> Result<Client, HostClientError> {
    from_source(pick_source(kubeconfig, std::env::var_os("KUBECONFIG"), home_dir())?, context, tune).await
}

async fn from_source(source: Source, context: Option<&str>, tune: fn(&mut Config)) -> Result<Client, HostClientError> {
    match source {
        Source::Files(paths) => {
            let mut merged: Option<Kubeconfig> = None;
            for path in &paths {
                let one = read_file(path)?;
                merged = Some(match merged {
                    None => one,
                    Some(m) => m.merge(one).map_err(|e| HostClientError::Unparsable {
                        source_name: describe_files(&paths),
                        reason: format!("cannot merge {}: {e}", path.display()),
                    })?,
                });
            }
            build(merged.unwrap_or_default(), context, &describe_files(&paths), tune).await
        }
        Source::InCluster { looked } => {
            if let Some(context) = context {
                return Err(HostClientError::ContextWithoutKubeconfig { context: context.to_string(), looked });
            }
            let mut config =
                Config::incluster().map_err(|e| HostClientError::NoInCluster { looked, reason: e.to_string() })?;
            tune(&mut config);
            crate::runtime::connection::client(config).map_err(|e| HostClientError::Client {
                source_name: "the in-cluster service account".into(),
                reason: e.to_string(),
            })
        }
    }
}

/// A client from kubeconfig YAML text, e.g. a member cluster's kubeconfig held in a Secret;
/// `context` defaults to its current-context. Relative file paths in such a kubeconfig mean
/// nothing, so it should carry its certificates and token inline.
pub async fn client_from_kubeconfig_yaml(yaml: &str, context: Option<&str>) -> Result<Client, HostClientError> {
    client_from_kubeconfig_yaml_named(yaml, context, "text").await
}

/// Like [`client_from_kubeconfig_yaml`], with `source_name` naming where the text came from in
/// errors (e.g. `"in Secret spanset/east-kubeconfig"`).
pub async fn client_from_kubeconfig_yaml_named(
    yaml: &str,
    context: Option<&str>,
    source_name: &str,
) -> Result<Client, HostClientError> {
    client_from_kubeconfig_yaml_tuned(yaml, context, source_name, |_| {}).await
}

/// Like [`client_from_kubeconfig_yaml_named`], with `tune` adjusting the configuration.
pub async fn client_from_kubeconfig_yaml_tuned(
    yaml: &str,
    context: Option<&str>,
    source_name: &str,
    tune: fn(&mut Config),
) -> Result<Client, HostClientError> {
    let config = Kubeconfig::from_yaml(yaml).map_err(|e| HostClientError::Unparsable {
        source_name: source_name.to_string(),
        reason: parse_reason(yaml, &e),
    })?;
    build(config, context, source_name, tune).await
}

fn describe_files(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":")
}

fn read_file(path: &Path) -> Result<Kubeconfig, HostClientError> {
    // Read once ourselves first, to tell a missing or unreadable file from a broken one and to
    // describe a parse error without kube's message (which may quote the file).
    let text = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => HostClientError::FileMissing { path: path.to_path_buf() },
        _ => HostClientError::FileUnreadable { path: path.to_path_buf(), reason: e.to_string() },
    })?;
    // `read_from` resolves relative certificate and token paths against the file's directory.
    Kubeconfig::read_from(path).map_err(|e| match e {
        KubeconfigError::ReadConfig(io, _) => {
            HostClientError::FileUnreadable { path: path.to_path_buf(), reason: io.to_string() }
        }
        other => HostClientError::Unparsable {
            source_name: path.display().to_string(),
            reason: parse_reason(&String::from_utf8_lossy(&text), &other),
        },
    })
}

/// Describes why `text` is not a kubeconfig without quoting it: kube's YAML errors show the
/// offending lines, which may hold a token or key, so the reason is rebuilt from serde_yaml's
/// error (a line, a column and the expected shape) with every quoted value blanked.
fn parse_reason(text: &str, kube_error: &KubeconfigError) -> String {
    let shape = match kube_error {
        KubeconfigError::KindMismatch | KubeconfigError::ApiVersionMismatch => return kube_error.to_string(),
        _ => {
            let mut problems = Vec::new();
            for doc in serde_yaml::Deserializer::from_str(text) {
                if let Err(e) = <Kubeconfig as serde::Deserialize>::deserialize(doc) {
                    problems.push(e.to_string());
                    break;
                }
            }
            problems.pop()
        }
    };
    match shape {
        Some(message) => blank_quoted(&message),
        None => "not YAML of a kubeconfig's shape".to_string(),
    }
}

/// Replaces the contents of every `"..."` in `message` with `…`.
fn blank_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut inside = false;
    for c in message.chars() {
        if c == '"' {
            if inside {
                out.push('…');
            }
            inside = !inside;
            out.push(c);
        } else if !inside {
            out.push(c);
        }
    }
    out
}

async fn build(
    config: Kubeconfig,
    context: Option<&str>,
    source_name: &str,
    tune: fn(&mut Config),
) -> Result<Client, HostClientError> {
    let available: Vec<String> = config.contexts.iter().map(|c| c.name.clone()).collect();
    let Some(context) =
        context.map(str::to_string).or_else(|| config.current_context.clone()).filter(|c| !c.is_empty())
    else {
        return Err(HostClientError::NoCurrentContext { source_name: source_name.to_string(), available });
    };
    let Some(named) = config.contexts.iter().find(|c| c.name == context) else {
        return Err(HostClientError::UnknownContext { source_name: source_name.to_string(), context, available });
    };
    let cluster = named.context.as_ref().map(|c| c.cluster.clone()).unwrap_or_default();
    let options = KubeConfigOptions { context: Some(context.clone()), ..KubeConfigOptions::default() };
    let bad = |reason: String| HostClientError::BadContext {
        source_name: source_name.to_string(),
        context: context.clone(),
        reason,
    };
    let mut loaded = Config::from_custom_kubeconfig(config, &options).await.map_err(|e| match e {
        KubeconfigError::LoadClusterOfContext(_) => HostClientError::UnknownCluster {
            source_name: source_name.to_string(),
            context: context.clone(),
            cluster: cluster.clone(),
        },
        KubeconfigError::LoadContext(_) => bad("the context has no body".into()),
        KubeconfigError::MissingClusterUrl => bad(format!("cluster {cluster:?} has no server")),
        KubeconfigError::ParseClusterUrl(e) => bad(format!("cluster {cluster:?} has an invalid server URL: {e}")),
        KubeconfigError::ParseProxyUrl(e) => bad(format!("cluster {cluster:?} has an invalid proxy-url: {e}")),
        KubeconfigError::LoadCertificateAuthority(e) => {
            bad(format!("cannot load the certificate authority of cluster {cluster:?}: {}", data_problem(&e)))
        }
        KubeconfigError::LoadClientCertificate(e) => {
            bad(format!("cannot load the client certificate: {}", data_problem(&e)))
        }
        KubeconfigError::LoadClientKey(e) => bad(format!("cannot load the client key: {}", data_problem(&e))),
        KubeconfigError::ParseCertificates(_) => bad(format!("cluster {cluster:?} has invalid PEM certificates")),
        other => bad(format!("cannot be loaded ({})", variant_name(&other))),
    })?;
    tune(&mut loaded);
    crate::runtime::connection::client(loaded).map_err(|e| HostClientError::Client {
        source_name: format!("{source_name}, context {context:?}"),
        reason: e.to_string(),
    })
}

/// Why certificate or key data cannot be loaded; never the data itself.
fn data_problem(e: &LoadDataError) -> String {
    match e {
        LoadDataError::DecodeBase64(_) => "the inline data is not valid base64".into(),
        LoadDataError::ReadFile(io, path) => format!("cannot read {}: {io}", path.display()),
        LoadDataError::NoBase64DataOrFile => "neither inline data nor a file is given".into(),
    }
}

/// The variant's name only: the other variants' texts may carry more than we want to show.
fn variant_name(e: &KubeconfigError) -> String {
    format!("{e:?}").split(['(', ' ', '{']).next().unwrap_or("error").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cr3t-t0ken-value";

    fn kubeconfig(server: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: a\n\
             clusters:\n- name: a\n  cluster: {{server: \"{server}\"}}\n\
             contexts:\n- name: a\n  context: {{cluster: a, user: a}}\n- name: b\n  context: {{cluster: missing, user: a}}\n\
             users:\n- name: a\n  user: {{token: {SECRET}}}\n"
        )
    }

    fn no_secret(e: &HostClientError) -> String {
        let text = e.to_string();
        assert!(!text.contains(SECRET), "the error leaks the token: {text}");
        assert!(!format!("{e:?}").contains(SECRET), "the error's Debug leaks the token: {e:?}");
        text
    }

    #[tokio::test]
    async fn a_missing_file_is_named() {
        let e = client(Some(Path::new("/nonexistent/kubeconfig")), None).await.err().expect("an error");
        assert_eq!(e.to_string(), "kubeconfig /nonexistent/kubeconfig does not exist");
    }

    #[tokio::test]
    async fn an_unparsable_file_is_named_with_a_location_and_no_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        // A token where a list of clusters belongs.
        std::fs::write(&path, format!("apiVersion: v1\nkind: Config\nclusters: \"{SECRET}\"\n")).unwrap();
        let e = client(Some(&path), None).await.err().expect("an error");
        let text = no_secret(&e);
        assert!(text.starts_with(&format!("kubeconfig {} is not a valid kubeconfig: ", path.display())), "{text}");
        assert!(text.contains("line 3"), "{text}");

        std::fs::write(&path, format!("users: [{{name: a, user: {{token: {SECRET}}}}}\n  - :\n")).unwrap();
        let e = client(Some(&path), None).await.err().expect("an error");
        let text = no_secret(&e);
        assert!(text.contains("is not a valid kubeconfig"), "{text}");
    }

    #[tokio::test]
    async fn an_unknown_context_is_named_with_the_known_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, kubeconfig("http://127.0.0.1:1")).unwrap();
        let e = client(Some(&path), Some("nope")).await.err().expect("an error");
        assert_eq!(no_secret(&e), format!("kubeconfig {} has no context \"nope\" (contexts: a, b)", path.display()));
        let e = client(Some(&path), Some("b")).await.err().expect("an error");
        assert!(no_secret(&e).contains("context \"b\" refers to cluster \"missing\", which it does not define"), "{e}");
    }

    #[tokio::test]
    async fn a_context_of_the_file_gives_a_client() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, kubeconfig("http://127.0.0.1:1")).unwrap();
        let c = client(Some(&path), None).await.unwrap();
        assert_eq!(c.default_namespace(), "default");
        client(Some(&path), Some("a")).await.unwrap();
    }

    #[tokio::test]
    async fn kubeconfig_text_gives_a_client_or_a_named_error() {
        client_from_kubeconfig_yaml(&kubeconfig("http://127.0.0.1:1"), None).await.unwrap();
        let e = client_from_kubeconfig_yaml_named(&kubeconfig("http://127.0.0.1:1"), Some("x"), "in Secret ns/s")
            .await
            .err()
            .expect("an error");
        assert_eq!(no_secret(&e), "kubeconfig in Secret ns/s has no context \"x\" (contexts: a, b)");
        let e = client_from_kubeconfig_yaml(&format!("clusters: {SECRET}\n"), None).await.err().expect("an error");
        assert!(no_secret(&e).starts_with("kubeconfig text is not a valid kubeconfig"), "{e}");
        let e = client_from_kubeconfig_yaml("apiVersion: v1\nkind: Config\n", None).await.err().expect("an error");
        assert_eq!(no_secret(&e), "kubeconfig text sets no current-context; pass --context (contexts: none)");
        let bad_url = kubeconfig("http://[::1");
        let e = client_from_kubeconfig_yaml(&bad_url, None).await.err().expect("an error");
        assert!(no_secret(&e).contains("cluster \"a\" has an invalid server URL"), "{e}");
    }

    #[tokio::test]
    async fn bad_inline_certificates_are_described_without_their_data() {
        let yaml = format!(
            "current-context: a\nclusters:\n- name: a\n  cluster: {{server: \"https://127.0.0.1:1\", \
             certificate-authority-data: \"{SECRET}\"}}\ncontexts:\n- name: a\n  context: {{cluster: a, user: a}}\n\
             users:\n- name: a\n  user: {{token: {SECRET}}}\n"
        );
        let e = client_from_kubeconfig_yaml(&yaml, None).await.err().expect("an error");
        assert_eq!(
            no_secret(&e),
            "kubeconfig text, context \"a\": cannot load the certificate authority of cluster \"a\": \
             the inline data is not valid base64"
        );
    }

    #[test]
    fn sources_follow_kubectl_s_order() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        let explicit = dir.path().join("explicit");
        std::fs::write(&explicit, "").unwrap();
        // The flag wins; a missing explicit file is an error, not a fallback.
        assert_eq!(
            pick_source(Some(&explicit), Some("x".into()), Some(home.clone())).unwrap(),
            Source::Files(vec![explicit.clone()])
        );
        let gone = dir.path().join("gone");
        assert!(matches!(
            pick_source(Some(&gone), None, None),
            Err(HostClientError::FileMissing { path }) if path == gone
        ));
        // $KUBECONFIG: missing files skipped, the others kept in order.
        let env = std::env::join_paths([gone.clone(), explicit.clone()]).unwrap();
        assert_eq!(pick_source(None, Some(env), Some(home.clone())).unwrap(), Source::Files(vec![explicit.clone()]));
        // Then ~/.kube/config, then in-cluster with what was looked at.
        let Source::InCluster { looked } = pick_source(None, None, Some(home.clone())).unwrap() else {
            panic!("expected in-cluster")
        };
        assert!(looked.contains("$KUBECONFIG unset") && looked.contains(".kube/config does not exist"), "{looked}");
        std::fs::create_dir_all(home.join(".kube")).unwrap();
        std::fs::write(home.join(".kube/config"), "").unwrap();
        assert_eq!(
            pick_source(None, None, Some(home.clone())).unwrap(),
            Source::Files(vec![home.join(".kube/config")])
        );
    }

    #[test]
    fn quoted_values_are_blanked() {
        assert_eq!(
            blank_quoted(r#"invalid type: string "tok", expected a sequence"#),
            r#"invalid type: string "…", expected a sequence"#
        );
        assert_eq!(blank_quoted("no quotes at line 1"), "no quotes at line 1");
    }

    #[tokio::test]
    async fn no_kubeconfig_outside_a_cluster_is_explained() {
        let looked = "$KUBECONFIG unset, /h/.kube/config does not exist".to_string();
        let e = from_source(Source::InCluster { looked: looked.clone() }, Some("ctx"), |_| {})
            .await
            .err()
            .expect("an error");
        assert_eq!(
            e.to_string(),
            "--context \"ctx\" needs a kubeconfig, but none was found ($KUBECONFIG unset, /h/.kube/config does \
             not exist)"
        );
        if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
            eprintln!("skipping the in-cluster half: this test runs inside a cluster");
            return;
        }
        let e = from_source(Source::InCluster { looked }, None, |_| {}).await.err().expect("an error");
        let text = e.to_string();
        assert!(
            text.starts_with(
                "no kubeconfig found ($KUBECONFIG unset, /h/.kube/config does not exist) and not running in a cluster ("
            ) && text.ends_with("); pass --kubeconfig FILE"),
            "{text}"
        );
    }
}
