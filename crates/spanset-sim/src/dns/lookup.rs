//! What a classified name holds in one cluster's object store, as CoreDNS's kubernetes plugin
//! finds it (`findServices`): the Service's ClusterIPs, or for a headless Service (and for any
//! endpoint name) the ready addresses of every EndpointSlice labelled with the Service's name;
//! an ExternalName Service's target. No wire format here: [`super::answer`] turns these
//! entries into records for the asked type.

use std::{net::IpAddr, sync::Arc};

use serde_json::Value;

use super::name::{Part, QName, ZONE};
use crate::store::{object, resources::ResourceKey, storage::Storage};

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Where a record points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// An address (A or AAAA).
    Ip(IpAddr),
    /// Another name (an ExternalName Service: CNAME).
    Name(String),
}

/// One thing found for a name: what CoreDNS's plugin calls a `msg.Service`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The address or name.
    pub host: Host,
    /// The port, when the Service or slice declares one (SRV needs it).
    pub port: Option<u16>,
    /// The name an SRV record targets: `<svc>.<ns>.svc.<zone>` for a ClusterIP, or
    /// `<hostname>.<svc>.<ns>.svc.<zone>` for an endpoint.
    pub target: String,
}

/// Whether a name exists, and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// No such name: NXDOMAIN.
    NoName,
    /// The name exists; these are its entries (none: NODATA for every type).
    Entries(Vec<Entry>),
}

fn services() -> ResourceKey {
    (String::new(), "services".into())
}

fn endpoint_slices() -> ResourceKey {
    ("discovery.k8s.io".into(), "endpointslices".into())
}

fn namespaces() -> ResourceKey {
    (String::new(), "namespaces".into())
}

/// Looks `name` up in `storage` as it is now.
pub fn lookup(storage: &Storage, name: &QName) -> Found {
    let namespace_exists = |ns: &str| storage.get(&namespaces(), "", ns).is_some();
    match name {
        QName::Apex | QName::Structural => Found::Entries(vec![]),
        QName::Namespace(ns) if namespace_exists(ns) => Found::Entries(vec![]),
        QName::Service { namespace, service, part } if namespace_exists(namespace) => {
            let Some(svc) = storage.get(&services(), namespace, service) else { return Found::NoName };
            let slices = slices_of(storage, namespace, service);
            match entries(&svc, &slices, part) {
                found if found.is_empty() => Found::NoName,
                found => Found::Entries(found),
            }
        }
        _ => Found::NoName,
    }
}

/// The EndpointSlices of one Service, read in one snapshot (one write that replaces an address
/// is seen whole or not at all).
fn slices_of(storage: &Storage, namespace: &str, service: &str) -> Vec<Arc<Value>> {
    let (all, _) = storage.list(&endpoint_slices(), Some(namespace));
    all.into_iter()
        .filter(|s| object::labels(s).and_then(|l| l.get(SERVICE_NAME_LABEL)).and_then(Value::as_str) == Some(service))
        .collect()
}

/// The entries `part` of Service `svc` has, given the Service's EndpointSlices. Empty when
/// nothing matches (CoreDNS then answers NXDOMAIN, even for an existing Service).
pub fn entries(svc: &Value, slices: &[Arc<Value>], part: &Part) -> Vec<Entry> {
    let base = format!("{}.{}.svc.{ZONE}", object::name(svc), object::namespace(svc));
    let spec = |field: &str| svc.pointer(&format!("/spec/{field}"));
    if spec("type").and_then(Value::as_str) == Some("ExternalName") {
        // An ExternalName Service has no endpoints; its name is an alias for the target.
        let target = spec("externalName").and_then(Value::as_str).unwrap_or("");
        return match part {
            Part::Endpoint(_) => vec![],
            _ if target.is_empty() => vec![],
            _ => vec![Entry { host: Host::Name(target.trim_end_matches('.').into()), port: None, target: base }],
        };
    }
    let headless = spec("clusterIP").and_then(Value::as_str) == Some("None");
    if headless || matches!(part, Part::Endpoint(_)) {
        return slices.iter().flat_map(|slice| slice_entries(slice, &base, part)).collect();
    }
    let ips: Vec<IpAddr> = match spec("clusterIPs").and_then(Value::as_array) {
        Some(ips) => ips.iter().filter_map(|ip| ip.as_str()?.parse().ok()).collect(),
        None => spec("clusterIP").and_then(Value::as_str).and_then(|ip| ip.parse().ok()).into_iter().collect(),
    };
    let ports = spec("ports").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut out = vec![];
    for (_, _, port) in ports.iter().filter_map(port_of).filter(|(name, proto, _)| port_matches(part, name, proto)) {
        out.extend(ips.iter().map(|ip| Entry { host: Host::Ip(*ip), port: Some(port), target: base.clone() }));
    }
    out
}

/// The ready endpoints of one slice that `part` asks for, one entry per address and port.
fn slice_entries(slice: &Value, base: &str, part: &Part) -> Vec<Entry> {
    let declared: Vec<(String, String, Option<u16>)> = slice
        .get("ports")
        .and_then(Value::as_array)
        .map(|ports| ports.iter().filter_map(port_of).map(|(n, p, port)| (n, p, Some(port))).collect())
        .unwrap_or_default();
    // A slice without ports still answers A queries: CoreDNS adds a sentinel port (-1) that
    // SRV skips and no named-port query matches.
    let ports = if declared.is_empty() { vec![(String::new(), String::new(), None)] } else { declared };
    let ports: Vec<_> = ports.into_iter().filter(|(name, proto, _)| port_matches(part, name, proto)).collect();
    let mut out = vec![];
    for endpoint in slice.get("endpoints").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        // `ready` missing is unknown, which consumers should read as ready (EndpointConditions).
        if endpoint.pointer("/conditions/ready").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let addresses = endpoint.get("addresses").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for ip in addresses.iter().filter_map(|a| a.as_str()?.parse::<IpAddr>().ok()) {
            let hostname = match endpoint.get("hostname").and_then(Value::as_str) {
                Some(h) if !h.is_empty() => h.to_ascii_lowercase(),
                _ => ip.to_string().replace(['.', ':'], "-"),
            };
            if let Part::Endpoint(wanted) = part
                && *wanted != hostname
            {
                continue;
            }
            for (_, _, port) in &ports {
                out.push(Entry { host: Host::Ip(ip), port: *port, target: format!("{hostname}.{base}") });
            }
        }
    }
    out
}

/// A port's name and protocol (lowercase; protocol defaults to TCP as the API does) and number.
fn port_of(port: &Value) -> Option<(String, String, u16)> {
    let number = port.get("port").and_then(Value::as_u64).and_then(|p| u16::try_from(p).ok())?;
    let name = port.get("name").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    let protocol = port.get("protocol").and_then(Value::as_str).unwrap_or("TCP").to_ascii_lowercase();
    Some((name, protocol, number))
}

/// Whether a port answers `part`: every port for a plain or endpoint name, the named one for
/// `_<port>._<proto>`.
fn port_matches(part: &Part, name: &str, protocol: &str) -> bool {
    match part {
        Part::Port { port, protocol: wanted } => port == name && wanted == protocol,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn headless() -> Value {
        json!({"metadata": {"name": "redis", "namespace": "default"},
               "spec": {"clusterIP": "None", "ports": [{"name": "client", "port": 6379}]}})
    }

    fn slice(endpoints: Value) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": "redis-x", "namespace": "default",
                                     "labels": {SERVICE_NAME_LABEL: "redis"}},
                        "addressType": "IPv4",
                        "ports": [{"name": "client", "port": 6379, "protocol": "TCP"}],
                        "endpoints": endpoints}))
    }

    fn ips(found: &[Entry]) -> Vec<String> {
        found
            .iter()
            .map(|e| match &e.host {
                Host::Ip(ip) => ip.to_string(),
                Host::Name(n) => n.clone(),
            })
            .collect()
    }

    #[test]
    fn a_clusterip_service_answers_its_cluster_ip_and_targets_its_own_name() {
        let svc = json!({"metadata": {"name": "web", "namespace": "shop"},
                         "spec": {"clusterIP": "10.96.0.7", "clusterIPs": ["10.96.0.7"],
                                  "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}});
        let found = entries(&svc, &[], &Part::Whole);
        assert_eq!(ips(&found), ["10.96.0.7"]);
        assert_eq!(found[0].target, "web.shop.svc.cluster.local");
        let port = Part::Port { port: "http".into(), protocol: "tcp".into() };
        assert_eq!(entries(&svc, &[], &port)[0].port, Some(80));
        assert!(entries(&svc, &[], &Part::Port { port: "http".into(), protocol: "udp".into() }).is_empty());
    }

    #[test]
    fn a_headless_service_answers_every_ready_endpoint_of_every_slice_and_missing_ready_counts_as_ready() {
        let a = slice(json!([
            {"addresses": ["10.1.0.1"], "hostname": "redis-0", "conditions": {"ready": true}},
            {"addresses": ["10.1.0.2"], "hostname": "redis-1", "conditions": {"ready": false}},
        ]));
        // Another writer's slice (spanset's, with its own managed-by) counts the same.
        let b = slice(json!([{"addresses": ["10.2.0.3"], "hostname": "redis-3"}]));
        let found = entries(&headless(), &[a, b], &Part::Whole);
        assert_eq!(ips(&found), ["10.1.0.1", "10.2.0.3"]);
        assert_eq!(found[1].target, "redis-3.redis.default.svc.cluster.local");
    }

    #[test]
    fn an_endpoint_name_matches_the_hostname_or_else_the_dashed_address() {
        let s = slice(json!([
            {"addresses": ["10.1.0.1"], "hostname": "redis-0"},
            {"addresses": ["10.1.0.9"]},
        ]));
        assert_eq!(
            ips(&entries(&headless(), std::slice::from_ref(&s), &Part::Endpoint("redis-0".into()))),
            ["10.1.0.1"]
        );
        let dashed = entries(&headless(), std::slice::from_ref(&s), &Part::Endpoint("10-1-0-9".into()));
        assert_eq!(ips(&dashed), ["10.1.0.9"]);
        assert_eq!(dashed[0].target, "10-1-0-9.redis.default.svc.cluster.local");
        assert!(entries(&headless(), &[s], &Part::Endpoint("redis-7".into())).is_empty());
    }

    #[test]
    fn an_external_name_service_is_an_alias_and_has_no_endpoints() {
        let svc = json!({"metadata": {"name": "db", "namespace": "default"},
                         "spec": {"type": "ExternalName", "externalName": "db.example.com."}});
        assert_eq!(ips(&entries(&svc, &[], &Part::Whole)), ["db.example.com"]);
        assert!(entries(&svc, &[], &Part::Endpoint("x".into())).is_empty());
    }

    #[test]
    fn a_slice_without_ports_answers_addresses_but_no_named_port() {
        let s = Arc::new(json!({"metadata": {"labels": {SERVICE_NAME_LABEL: "redis"}},
                                "endpoints": [{"addresses": ["10.1.0.1"]}]}));
        let found = entries(&headless(), std::slice::from_ref(&s), &Part::Whole);
        assert_eq!((ips(&found), found[0].port), (vec!["10.1.0.1".to_string()], None));
        assert!(entries(&headless(), &[s], &Part::Port { port: "client".into(), protocol: "tcp".into() }).is_empty());
    }
}
