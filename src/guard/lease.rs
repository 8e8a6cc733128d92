//! Reading the member's pod Lease as a guard does: a plain GET (no `resourceVersion`, so the
//! API server answers from etcd by quorum, never from a cache that may be behind) under a
//! short timeout, read into what the guard's decisions need.

use std::{fmt, str::FromStr, time::Duration};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use spanset_api::labels::FEDERATION_UID;
use spanset_controller::pod_lease::{EXTENSION, ORDINALS, RELEASED, parse_ordinals};
use spanset_plan::Ordinals;

/// The Lease a guard reads: `NAMESPACE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRef {
    /// Its namespace (the federation's).
    pub namespace: String,
    /// Its name (`<federation>-pods`).
    pub name: String,
}

impl FromStr for LeaseRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(LeaseRef { namespace: ns.to_string(), name: name.to_string() })
            }
            _ => Err(format!("--lease: {s:?} is not NAMESPACE/NAME")),
        }
    }
}

impl fmt::Display for LeaseRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What one successful read says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The [`EXTENSION`] counter.
    pub extension: u64,
    /// The ordinals [`ORDINALS`] names; none when it is missing or does not parse, so that a
    /// Lease the guard cannot understand stops its pod rather than keeping it.
    pub ordinals: Ordinals,
    /// [`RELEASED`] is `"true"`: spanset let the federation go.
    pub released: bool,
}

/// Reads a Lease object's annotations; an error names what is missing. Without a readable
/// counter nothing proves an extension: the read counts as failed. A Lease written for another
/// federation than `federation_uid` (one deleted and made again under the same name) names no
/// ordinal and releases nothing: the pod is not its.
pub fn reading(lease: &Lease, federation_uid: Option<&str>) -> Result<Reading, String> {
    let annotations = lease.metadata.annotations.as_ref();
    let get = |key: &str| annotations.and_then(|a| a.get(key));
    let extension = get(EXTENSION)
        .ok_or_else(|| format!("annotation {EXTENSION} missing"))?
        .trim()
        .parse::<u64>()
        .map_err(|e| format!("annotation {EXTENSION}: {e}"))?;
    let theirs = lease.metadata.labels.as_ref().and_then(|l| l.get(FEDERATION_UID)).map(String::as_str);
    if let Some(own) = federation_uid
        && theirs != Some(own)
    {
        return Ok(Reading { extension, ordinals: Ordinals::new(), released: false });
    }
    let ordinals = get(ORDINALS).and_then(|text| parse_ordinals(text).ok()).unwrap_or_default();
    let released = get(RELEASED).is_some_and(|v| v.trim() == "true");
    Ok(Reading { extension, ordinals, released })
}

/// One poll: a quorum GET of `name` answered within `timeout`, or why not.
pub async fn poll(
    api: &Api<Lease>,
    name: &str,
    federation_uid: Option<&str>,
    timeout: Duration,
) -> Result<Reading, String> {
    match tokio::time::timeout(timeout, api.get(name)).await {
        Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(lease)) => reading(&lease, federation_uid),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn lease(annotations: &[(&str, &str)]) -> Lease {
        let mut l = Lease::default();
        l.metadata.annotations =
            Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>());
        l.metadata.labels = Some(BTreeMap::from([(FEDERATION_UID.to_string(), "u1".to_string())]));
        l
    }

    #[test]
    fn a_lease_reads_as_its_counter_and_ordinals_and_what_is_unclear_names_nothing() {
        let read = |l: &Lease| reading(l, Some("u1"));
        let r = read(&lease(&[(EXTENSION, "12"), (ORDINALS, "0-1,4")])).unwrap();
        assert_eq!(r, Reading { extension: 12, ordinals: Ordinals::from_iter([0, 1, 4]), released: false });
        let r = read(&lease(&[(EXTENSION, "13"), (ORDINALS, "nonsense")])).unwrap();
        assert!(r.ordinals.is_empty(), "an unreadable list names no ordinal");
        assert!(read(&lease(&[(EXTENSION, "13")])).unwrap().ordinals.is_empty());
        assert!(read(&lease(&[(ORDINALS, "1")])).unwrap_err().contains(EXTENSION));
        assert!(read(&lease(&[(EXTENSION, "x"), (ORDINALS, "1")])).unwrap_err().contains(EXTENSION));
        assert!(read(&Lease::default()).is_err());
        let released = lease(&[(EXTENSION, "14"), (ORDINALS, "4"), (RELEASED, "true")]);
        assert!(read(&released).unwrap().released);
        // Another federation's Lease (made again under the same name) is not this pod's.
        let theirs = reading(&released, Some("u2")).unwrap();
        assert!(theirs.ordinals.is_empty() && !theirs.released, "{theirs:?}");
        assert!(reading(&released, None).unwrap().released, "a guard told no uid reads any");
    }

    #[test]
    fn a_lease_is_named_namespace_slash_name() {
        let r: LeaseRef = "shop/cache-pods".parse().unwrap();
        assert_eq!((r.namespace.as_str(), r.name.as_str()), ("shop", "cache-pods"));
        assert_eq!(r.to_string(), "shop/cache-pods");
        for bad in ["cache-pods", "/x", "x/", "a/b/c"] {
            assert!(bad.parse::<LeaseRef>().unwrap_err().contains("--lease"), "{bad}");
        }
    }
}
