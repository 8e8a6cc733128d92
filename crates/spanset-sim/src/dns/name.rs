//! What a query name asks for in the cluster zone, read the way CoreDNS's kubernetes plugin
//! reads it (`parse.go`): counted from the right, `svc`, then the namespace, the Service, and
//! then either one more label (an endpoint's hostname) or two (`_port._proto`). Pure: no store,
//! no wire format.

/// The cluster's DNS zone (kubelet's default `--cluster-domain`).
pub const ZONE: &str = "cluster.local";

/// A query name, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QName {
    /// Not in the zone: the sandbox has nowhere to forward it (CoreDNS would), so REFUSED.
    Outside,
    /// The zone apex itself (`cluster.local`): it has the SOA and NS, nothing else.
    Apex,
    /// `svc.cluster.local` or `pod.cluster.local`: names that exist with no records (NODATA).
    Structural,
    /// `<ns>.svc.cluster.local`: exists (NODATA) when the namespace exists.
    Namespace(String),
    /// A name under the Service of `ns`/`service` (all fields lowercase).
    Service {
        /// The namespace label.
        namespace: String,
        /// The Service label.
        service: String,
        /// What under the Service is asked for.
        part: Part,
    },
    /// In the zone but of no shape the plugin answers (too long, `pod.` records, which the
    /// sandbox serves like CoreDNS's default `pods disabled`, or another second-level label):
    /// NXDOMAIN.
    Unknown,
}

/// What under a Service a name asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// `<svc>.<ns>.svc.<zone>`: the Service itself.
    Whole,
    /// `<hostname>.<svc>.<ns>.svc.<zone>`: endpoints whose hostname (or dashed IP) is this.
    Endpoint(String),
    /// `_<port>._<proto>.<svc>.<ns>.svc.<zone>`: a named port (underscores stripped, lowercase).
    Port {
        /// The port's name.
        port: String,
        /// `tcp`, `udp` or `sctp`.
        protocol: String,
    },
}

/// Classifies `name` (presentation form, with or without the final dot; any case).
pub fn parse(name: &str) -> QName {
    let lower = name.trim_end_matches('.').to_ascii_lowercase();
    let base = if lower == ZONE {
        return QName::Apex;
    } else if let Some(base) = lower.strip_suffix(ZONE).and_then(|b| b.strip_suffix('.')) {
        base
    } else {
        return QName::Outside;
    };
    let mut labels: Vec<&str> = base.split('.').collect();
    match labels.pop() {
        Some("svc") => {}
        Some("pod") if labels.is_empty() => return QName::Structural,
        _ => return QName::Unknown,
    }
    let Some(namespace) = labels.pop().map(str::to_string) else { return QName::Structural };
    let Some(service) = labels.pop().map(str::to_string) else { return QName::Namespace(namespace) };
    let part = match labels.as_slice() {
        [] => Part::Whole,
        [endpoint] => Part::Endpoint(endpoint.to_string()),
        [port, protocol] => Part::Port { port: strip(port), protocol: strip(protocol) },
        _ => return QName::Unknown,
    };
    QName::Service { namespace, service, part }
}

fn strip(label: &str) -> String {
    label.strip_prefix('_').unwrap_or(label).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(ns: &str, svc: &str, part: Part) -> QName {
        QName::Service { namespace: ns.into(), service: svc.into(), part }
    }

    #[test]
    fn a_service_name_is_read_from_the_right_whatever_the_case_and_final_dot() {
        assert_eq!(parse("redis.default.svc.cluster.local."), service("default", "redis", Part::Whole));
        assert_eq!(parse("Redis.Default.SVC.Cluster.Local"), service("default", "redis", Part::Whole));
    }

    #[test]
    fn one_more_label_is_an_endpoint_and_two_are_a_named_port() {
        assert_eq!(
            parse("redis-3.redis.default.svc.cluster.local."),
            service("default", "redis", Part::Endpoint("redis-3".into()))
        );
        assert_eq!(
            parse("_client._tcp.redis.default.svc.cluster.local."),
            service("default", "redis", Part::Port { port: "client".into(), protocol: "tcp".into() })
        );
        assert_eq!(parse("a.b.c.redis.default.svc.cluster.local."), QName::Unknown);
    }

    #[test]
    fn the_zone_its_svc_label_and_a_namespace_exist_without_records() {
        assert_eq!(parse("cluster.local."), QName::Apex);
        assert_eq!(parse("svc.cluster.local."), QName::Structural);
        assert_eq!(parse("pod.cluster.local."), QName::Structural);
        assert_eq!(parse("default.svc.cluster.local."), QName::Namespace("default".into()));
    }

    #[test]
    fn other_names_in_the_zone_are_unknown_and_names_outside_it_are_outside() {
        assert_eq!(parse("10-0-0-1.default.pod.cluster.local."), QName::Unknown);
        assert_eq!(parse("redis.default.cluster.local."), QName::Unknown);
        assert_eq!(parse("example.com."), QName::Outside);
        assert_eq!(parse("notcluster.local."), QName::Outside);
        assert_eq!(parse("redis.default.svc.cluster.local.example.com."), QName::Outside);
    }
}
