//! The EndpointSlices spanset publishes in a member for a federation (`spec.network.mode:
//! EndpointSlices`), and what its watcher keeps of those stored there: for each slice, the
//! endpoints by hostname, enough to write a slice only when it changed and to tell whether a
//! member's records still name an ordinal (which holds that ordinal's start there).

use std::collections::BTreeMap;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use spanset_api::labels::FEDERATION;

use super::{cache::rv_of, objects::FederationKey};

/// One published endpoint: a pod that runs in another member, as that member reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRecord {
    /// The pod's IP.
    pub ip: String,
    /// `conditions.ready`: what DNS answers.
    pub ready: bool,
    /// `conditions.serving`.
    pub serving: bool,
    /// `conditions.terminating`.
    pub terminating: bool,
}

/// What spanset keeps of one of its EndpointSlices in a member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceRecord {
    /// The object's uid (the precondition of its deletion).
    pub uid: String,
    /// Its resourceVersion (the precondition of its replacement).
    pub rv: u64,
    /// Its endpoints by hostname (the pod name); an endpoint without a hostname is kept under
    /// its address, so that nothing listed is missed.
    pub endpoints: BTreeMap<String, EndpointRecord>,
    /// Its ports, as JSON (compared with what spanset would write).
    pub ports: String,
    /// The Service it serves (`kubernetes.io/service-name`).
    pub service: String,
    /// Being deleted.
    pub deleting: bool,
}

/// The label naming the Service an EndpointSlice serves.
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The label naming an EndpointSlice's manager; a member's EndpointSlice controller leaves
/// slices with another value alone.
pub const SLICE_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// spanset's value of [`SLICE_MANAGED_BY`].
pub const SLICE_MANAGER: &str = "spanset.dev";

impl SliceRecord {
    /// The record of a slice, with its federation and name, if it carries spanset's
    /// federation label.
    /// A member's EndpointSlice controller copies a Service's labels onto the slices it keeps,
    /// so the federation label alone would also select the member's own slices of spanset's
    /// Service: only slices managed by spanset are its.
    pub fn of(slice: &EndpointSlice) -> Option<(FederationKey, String, SliceRecord)> {
        if slice.labels().get(SLICE_MANAGED_BY).map(String::as_str) != Some(SLICE_MANAGER) {
            return None;
        }
        let name = slice.labels().get(FEDERATION)?.clone();
        let endpoints = slice
            .endpoints
            .iter()
            .flat_map(|e| {
                let c = e.conditions.as_ref();
                // Unset `ready` and `serving` count as true, as CoreDNS and kube-proxy read them.
                let record = move |ip: &String| EndpointRecord {
                    ip: ip.clone(),
                    ready: c.and_then(|c| c.ready).unwrap_or(true),
                    serving: c.and_then(|c| c.serving).unwrap_or(true),
                    terminating: c.and_then(|c| c.terminating).unwrap_or(false),
                };
                e.addresses.iter().map(move |ip| (e.hostname.clone().unwrap_or_else(|| ip.clone()), record(ip)))
            })
            .collect();
        let record = SliceRecord {
            uid: slice.uid().unwrap_or_default(),
            rv: rv_of(slice.metadata.resource_version.as_deref()),
            endpoints,
            ports: serde_json::to_string(&slice.ports).unwrap_or_default(),
            service: slice.labels().get(SERVICE_NAME).cloned().unwrap_or_default(),
            deleting: slice.metadata.deletion_timestamp.is_some(),
        };
        Some((FederationKey { namespace: slice.namespace().unwrap_or_default(), name }, slice.name_any(), record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_is_kept_by_hostname_with_unset_conditions_read_as_ready() {
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "redis-spanset-0", "namespace": "shop", "uid": "u1", "resourceVersion": "42",
                         "labels": {"spanset.dev/federation": "redis", "kubernetes.io/service-name": "redis",
                                    "endpointslice.kubernetes.io/managed-by": "spanset.dev"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.1.0.5"], "hostname": "redis-3", "conditions": {"ready": false, "terminating": true}},
                {"addresses": ["10.1.0.6"], "hostname": "redis-4"},
                {"addresses": ["10.1.0.7"]}
            ]
        }))
        .unwrap();
        let (key, name, r) = SliceRecord::of(&slice).unwrap();
        assert_eq!(
            (key.to_string(), name.as_str(), r.rv, r.service.as_str()),
            ("shop/redis".into(), "redis-spanset-0", 42, "redis")
        );
        assert!(!r.endpoints["redis-3"].ready && r.endpoints["redis-3"].terminating);
        assert!(r.endpoints["redis-4"].ready && r.endpoints["redis-4"].serving);
        assert_eq!(r.endpoints["10.1.0.7"].ip, "10.1.0.7");
    }

    #[test]
    fn a_slice_without_the_federation_label_is_not_spansets() {
        let slice: EndpointSlice = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "redis-abc"}, "addressType": "IPv4", "endpoints": []}),
        )
        .unwrap();
        assert!(SliceRecord::of(&slice).is_none());
    }
}
