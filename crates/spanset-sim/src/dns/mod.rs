//! Cluster DNS for the sandbox: each simulated cluster answers DNS on loopback (UDP and TCP on
//! one port) for the zone `cluster.local`, as CoreDNS's kubernetes plugin does, read from the
//! cluster's own store at query time (a write is visible to the next query). Built on
//! hickory-server: its loops and wire format, our [`name`] parsing, [`lookup`] in the store and
//! [`answer`] records; [`server`] wires them.
//!
//! # What it answers, and where that comes from
//!
//! Sources: the Kubernetes DNS specification for Services and Pods
//! (<https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/>,
//! <https://github.com/kubernetes/dns/blob/master/docs/specification.md>), and CoreDNS's
//! kubernetes plugin: its README and `plugin/kubernetes/{parse,kubernetes,handler}.go`,
//! `object/endpoint.go` and `plugin/backend_lookup.go` (read as vendored in public repositories).
//!
//! - Names are read from the right (`parse.go`): `svc`, namespace, Service, then one label (an
//!   endpoint) or two (`_port._proto`, underscores stripped); longer names are NXDOMAIN. The
//!   apex, `svc.<zone>` and an existing `<ns>.svc.<zone>` exist with no records (NODATA); a
//!   namespace that does not exist makes every name under it NXDOMAIN (`namespaceExposed`).
//! - `<svc>.<ns>.svc.<zone>` A: the Service's `clusterIPs`; for a headless Service
//!   (`clusterIP: None`) one A per ready address over every EndpointSlice labelled
//!   `kubernetes.io/service-name: <svc>`, whoever manages it (`findServices` indexes slices by
//!   that label only). An endpoint whose `conditions.ready` is missing counts as ready
//!   (`endpointsliceReady`: "a nil value indicates an unknown state … interpret as ready").
//! - `<hostname>.<svc>.<ns>.svc.<zone>`: the ready endpoints whose `hostname` matches, or, with
//!   no hostname, whose address with `.`/`:` replaced by `-` matches (`endpointHostname`). This
//!   holds for ClusterIP Services too (`svc.Headless() || r.endpoint != ""`).
//! - ExternalName: a CNAME to `spec.externalName` (no endpoint names). CoreDNS would then try to
//!   resolve the target upstream; the sandbox has no upstream and answers the CNAME alone.
//! - SRV `_<port>._<proto>.<svc>.<ns>.svc.<zone>` for named ports: for a ClusterIP Service the
//!   Service's ports, target `<svc>.<ns>.svc.<zone>`; for a headless one the slices' ports, one
//!   per ready endpoint, target `<hostname-or-dashed-ip>.<svc>.<ns>.svc.<zone>`; priority 0 and
//!   weight `floor(100 / n)`; each target's A record in the additional section (`plugin.SRV`). A
//!   slice without ports still gives A records (a sentinel port that SRV skips).
//! - Nothing matching (no Service, no ready endpoint, no such port): NXDOMAIN, as the plugin's
//!   `errNoItems` — even for a headless Service whose endpoints are all unready. A name that
//!   exists asked for a type it has none of (AAAA of an IPv4 Service): NOERROR with no answer
//!   (NODATA). Both carry the zone's SOA (`ns.dns.<zone>`, `hostmaster.<zone>`, refresh 7200,
//!   retry 1800, expire 86400, minimum = TTL) in the authority section, as `BackendError` does;
//!   answers are authoritative (`aa`).
//! - Names outside the zone: REFUSED (CoreDNS forwards them; the sandbox has nowhere to).
//! - TTL 5 everywhere: the plugin's default `ttl`.
//! - Not served: `pod.<zone>` records (CoreDNS's default `pods disabled`), reverse (PTR) zones,
//!   NS records, wildcards, zone transfers.
//!
//! # Ports
//!
//! Port 0 (a free one) by default; with a port base B for n clusters (`spanset sim
//! --port-base B`), cluster i's DNS listens on B+n+1+i, after the API servers (B..B+n-1) and
//! the admin API (B+n).

pub mod answer;
pub mod lookup;
pub mod name;
pub mod server;
