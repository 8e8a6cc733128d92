//! Content negotiation by the `Accept` header: plain JSON, server-side Table, metadata-only
//! objects, and aggregated discovery (the API concepts page of the Kubernetes docs,
//! <https://kubernetes.io/docs/reference/using-api/api-concepts/>, and its discovery section).

/// One media range of an `Accept` header, with its parameters.
#[derive(Debug, Clone, PartialEq)]
struct MediaRange {
    mime: String,
    params: Vec<(String, String)>,
}

impl MediaRange {
    fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

fn parse_accept(accept: &str) -> Vec<MediaRange> {
    accept
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';').map(str::trim);
            let mime = pieces.next()?.to_ascii_lowercase();
            if mime.is_empty() {
                return None;
            }
            let params = pieces
                .filter_map(|p| p.split_once('=').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
                .collect();
            Some(MediaRange { mime, params })
        })
        .collect()
}

fn is_json(mime: &str) -> bool {
    matches!(mime, "application/json" | "*/*" | "application/*")
}

/// How an object or list response is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The objects as stored.
    Json,
    /// A `meta.k8s.io` Table (`v1` or `v1beta1`).
    Table {
        /// Whether the client asked for `meta.k8s.io/v1beta1` rather than `v1`.
        v1beta1: bool,
    },
    /// `PartialObjectMetadata` / `PartialObjectMetadataList`.
    Metadata,
}

/// Picks the first acceptable rendering for object, list and watch responses; `None` when
/// nothing offered can be produced (406).
pub fn output(accept: Option<&str>) -> Option<Output> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Some(Output::Json);
    };
    for r in parse_accept(accept) {
        if !is_json(&r.mime) {
            continue;
        }
        match (r.param("as"), r.param("g"), r.param("v")) {
            (None, _, _) => return Some(Output::Json),
            (Some("Table"), Some("meta.k8s.io"), Some(v @ ("v1" | "v1beta1"))) => {
                return Some(Output::Table { v1beta1: v == "v1beta1" });
            }
            (Some("PartialObjectMetadata" | "PartialObjectMetadataList"), Some("meta.k8s.io"), Some("v1")) => {
                return Some(Output::Metadata);
            }
            _ => continue,
        }
    }
    None
}

/// Which discovery document the client asked for on `/api` and `/apis`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discovery {
    /// Aggregated `apidiscovery.k8s.io/v2`.
    AggregatedV2,
    /// Aggregated `apidiscovery.k8s.io/v2beta1`.
    AggregatedV2Beta1,
    /// Plain `APIVersions` / `APIGroupList`.
    Legacy,
}

impl Discovery {
    /// The `apidiscovery.k8s.io` version, for aggregated forms.
    pub fn version(self) -> Option<&'static str> {
        match self {
            Discovery::AggregatedV2 => Some("v2"),
            Discovery::AggregatedV2Beta1 => Some("v2beta1"),
            Discovery::Legacy => None,
        }
    }
}

/// Picks the discovery form: the first aggregated version offered that the server serves
/// (`v2` only when `serves_v2`, from 1.30), else legacy.
pub fn discovery(accept: Option<&str>, serves_v2: bool) -> Discovery {
    for r in parse_accept(accept.unwrap_or("")) {
        if r.mime != "application/json" {
            continue;
        }
        match (r.param("g"), r.param("v"), r.param("as")) {
            (Some("apidiscovery.k8s.io"), Some("v2"), Some("APIGroupDiscoveryList")) if serves_v2 => {
                return Discovery::AggregatedV2;
            }
            (Some("apidiscovery.k8s.io"), Some("v2beta1"), Some("APIGroupDiscoveryList")) => {
                return Discovery::AggregatedV2Beta1;
            }
            (None, None, None) => return Discovery::Legacy,
            _ => {}
        }
    }
    Discovery::Legacy
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_127: &str =
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    const KUBECTL_133: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    #[test]
    fn discovery_follows_the_first_offer() {
        assert_eq!(discovery(Some(KUBECTL_127), true), Discovery::AggregatedV2Beta1);
        assert_eq!(discovery(Some(KUBECTL_133), true), Discovery::AggregatedV2);
        assert_eq!(discovery(Some(KUBECTL_133), false), Discovery::AggregatedV2Beta1, "a 1.29 server has no v2");
        assert_eq!(discovery(Some("application/json, */*"), true), Discovery::Legacy);
        assert_eq!(discovery(None, true), Discovery::Legacy);
    }

    #[test]
    fn outputs() {
        assert_eq!(output(Some(TABLE)), Some(Output::Table { v1beta1: false }));
        assert_eq!(output(Some("application/json, */*")), Some(Output::Json));
        assert_eq!(output(None), Some(Output::Json));
        assert_eq!(
            output(Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")),
            Some(Output::Metadata)
        );
        assert_eq!(output(Some("application/vnd.kubernetes.protobuf")), None);
        assert_eq!(output(Some("application/vnd.kubernetes.protobuf, application/json")), Some(Output::Json));
    }
}
