//! Turns a request path into what it addresses, accepting the URL shapes kubectl and kube-rs
//! send.

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/livez`, `/readyz`.
    Health,
    /// `/api` (core group versions, or aggregated discovery of the core group).
    Api,
    /// `/apis` (all named groups, or aggregated discovery of them).
    Apis,
    /// `/apis/GROUP`.
    Group(String),
    /// `/api/v1` or `/apis/GROUP/VERSION`: the resource list of one group version.
    GroupVersion {
        /// The API group, empty for the core group.
        group: String,
        /// Its version, as in the path.
        version: String,
    },
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3` and below.
    OpenApiV3,
    /// A collection, object or subresource.
    Resource(ResourcePath),
    /// Anything else.
    Unknown,
}

/// The parts of a resource URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group (`""` for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace from `/namespaces/NS/...`, if present.
    pub namespace: Option<String>,
    /// Plural resource name.
    pub plural: String,
    /// Object name, if the URL names one.
    pub name: Option<String>,
    /// Subresource such as `status` or `scale`.
    pub subresource: Option<String>,
}

/// Parses a path (no query string).
pub fn parse(path: &str) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::Api,
        ["apis"] => Route::Apis,
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3", ..] => Route::OpenApiV3,
        ["api", version] => Route::GroupVersion { group: String::new(), version: version.to_string() },
        ["apis", group] => Route::Group(group.to_string()),
        ["apis", group, version] => Route::GroupVersion { group: group.to_string(), version: version.to_string() },
        ["api", version, rest @ ..] => resource("", version, rest),
        ["apis", group, version, rest @ ..] => resource(group, version, rest),
        _ => Route::Unknown,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
    let mk = |namespace: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourcePath {
            group: group.to_string(),
            version: version.to_string(),
            namespace: namespace.map(str::to_string),
            plural: plural.to_string(),
            name: name.map(str::to_string),
            subresource: sub.map(str::to_string),
        })
    };
    match rest {
        // `/namespaces/NS/RESOURCE...` addresses namespaced resources; `/namespaces/NS` and
        // `/namespaces/NS/status` address the namespace object itself.
        ["namespaces", ns, "status" | "finalize"] => mk(None, "namespaces", Some(ns), Some(rest[2])),
        ["namespaces", ns, plural] => mk(Some(ns), plural, None, None),
        ["namespaces", ns, plural, name] => mk(Some(ns), plural, Some(name), None),
        ["namespaces", ns, plural, name, sub] => mk(Some(ns), plural, Some(name), Some(sub)),
        [plural] => mk(None, plural, None, None),
        [plural, name] => mk(None, plural, Some(name), None),
        [plural, name, sub] => mk(None, plural, Some(name), Some(sub)),
        _ => Route::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(r: Route) -> ResourcePath {
        match r {
            Route::Resource(p) => p,
            other => panic!("expected a resource route, got {other:?}"),
        }
    }

    #[test]
    fn namespaced_object_with_subresource() {
        let p = res(parse("/apis/apps/v1/namespaces/default/statefulsets/quiz/scale"));
        assert_eq!((p.group.as_str(), p.version.as_str()), ("apps", "v1"));
        assert_eq!(p.namespace.as_deref(), Some("default"));
        assert_eq!(
            (p.plural.as_str(), p.name.as_deref(), p.subresource.as_deref()),
            ("statefulsets", Some("quiz"), Some("scale"))
        );
    }

    #[test]
    fn namespace_object_is_cluster_scoped() {
        let p = res(parse("/api/v1/namespaces/kube-system"));
        assert_eq!((p.plural.as_str(), p.name.as_deref(), p.namespace), ("namespaces", Some("kube-system"), None));
        let s = res(parse("/api/v1/namespaces/x/status"));
        assert_eq!((s.name.as_deref(), s.subresource.as_deref()), (Some("x"), Some("status")));
    }

    #[test]
    fn collections_and_discovery() {
        assert_eq!(res(parse("/api/v1/pods")).namespace, None);
        assert_eq!(res(parse("/api/v1/namespaces/ns/secrets")).name, None);
        assert_eq!(parse("/apis/apps/v1"), Route::GroupVersion { group: "apps".into(), version: "v1".into() });
        assert_eq!(parse("/api"), Route::Api);
        assert_eq!(parse("/openapi/v2"), Route::OpenApiV2);
        assert_eq!(parse("/nope/x"), Route::Unknown);
    }
}
