//! From what a name holds ([`Found`]) to the records of a response for one query type, as
//! CoreDNS's `plugin.A`/`SRV`/`CNAME`/`SOA` and `BackendError` build them: answers owned by the
//! name as asked, SRV targets' addresses in the additional section, and the zone's SOA in the
//! authority section of every negative answer. Pure: records in, records out.

use std::{collections::BTreeSet, net::IpAddr};

use hickory_proto::{
    op::ResponseCode,
    rr::{
        Name, RData, Record, RecordType,
        rdata::{A, AAAA, CNAME, SOA, SRV},
    },
};

use super::{
    lookup::{Entry, Found, Host},
    name::ZONE,
};

/// TTL of every record: the kubernetes plugin's default `ttl`.
pub const TTL: u32 = 5;

/// The records of one response.
#[derive(Debug, Default)]
pub struct Response {
    /// NOERROR, or NXDOMAIN.
    pub code: ResponseCode,
    /// The answer section.
    pub answers: Vec<Record>,
    /// The authority section: the zone's SOA when there is no answer.
    pub authorities: Vec<Record>,
    /// The additional section: the addresses of SRV targets.
    pub additionals: Vec<Record>,
}

/// The response to `qtype` for `qname` (as asked, case kept) holding `found`; `serial` is the
/// SOA serial (the store's resourceVersion, as CoreDNS uses its last-modified time).
pub fn respond(qname: &Name, qtype: RecordType, found: &Found, serial: u32) -> Response {
    let entries = match found {
        Found::NoName => {
            return Response { code: ResponseCode::NXDomain, authorities: vec![soa(serial)], ..Default::default() };
        }
        Found::Entries(entries) => entries,
    };
    let mut response = Response::default();
    let apex = qname.to_lowercase() == zone();
    match qtype {
        RecordType::A | RecordType::AAAA => response.answers = addresses(qname, qtype, entries),
        RecordType::CNAME => response.answers = aliases(qname, entries).take(1).collect(),
        RecordType::SRV => (response.answers, response.additionals) = services(qname, entries),
        RecordType::SOA if apex => response.answers = vec![soa(serial)],
        _ => {}
    }
    if response.answers.is_empty() {
        response.authorities = vec![soa(serial)];
    }
    response
}

fn zone() -> Name {
    Name::from_ascii(format!("{ZONE}.")).expect("the zone is a valid name")
}

fn name(text: &str) -> Option<Name> {
    Name::from_ascii(format!("{}.", text.trim_end_matches('.'))).ok()
}

/// The zone's SOA, as the plugin makes it: `ns.dns.<zone>`, `hostmaster.<zone>`, TTL and
/// minimum the record TTL.
fn soa(serial: u32) -> Record {
    let mname = name(&format!("ns.dns.{ZONE}")).expect("a valid name");
    let rname = name(&format!("hostmaster.{ZONE}")).expect("a valid name");
    Record::from_rdata(zone(), TTL, RData::SOA(SOA::new(mname, rname, serial, 7200, 1800, 86400, TTL)))
}

/// One A or AAAA per distinct address of the asked family; an alias answers as its CNAME.
fn addresses(qname: &Name, qtype: RecordType, entries: &[Entry]) -> Vec<Record> {
    let mut seen = BTreeSet::new();
    let mut out: Vec<Record> = entries
        .iter()
        .filter_map(|e| match e.host {
            Host::Ip(ip) if seen.insert(ip) => address(qname.clone(), ip, qtype),
            _ => None,
        })
        .collect();
    out.extend(aliases(qname, entries).take(1));
    out
}

fn address(owner: Name, ip: IpAddr, qtype: RecordType) -> Option<Record> {
    match (ip, qtype) {
        (IpAddr::V4(v4), RecordType::A) => Some(Record::from_rdata(owner, TTL, RData::A(A(v4)))),
        (IpAddr::V6(v6), RecordType::AAAA) => Some(Record::from_rdata(owner, TTL, RData::AAAA(AAAA(v6)))),
        _ => None,
    }
}

fn aliases<'a>(qname: &'a Name, entries: &'a [Entry]) -> impl Iterator<Item = Record> + 'a {
    entries.iter().filter_map(move |e| match &e.host {
        Host::Name(target) => Some(Record::from_rdata(qname.clone(), TTL, RData::CNAME(CNAME(name(target)?)))),
        Host::Ip(_) => None,
    })
}

/// One SRV per distinct target and port (priority 0, weight 100 split evenly, as the plugin
/// does), and the targets' addresses as additional records.
fn services(qname: &Name, entries: &[Entry]) -> (Vec<Record>, Vec<Record>) {
    let with_port: Vec<(&Entry, u16)> = entries.iter().filter_map(|e| Some((e, e.port?))).collect();
    let weight = u16::try_from(100 / with_port.len().max(1)).unwrap_or(0);
    let (mut answers, mut additionals) = (vec![], vec![]);
    let (mut srv_seen, mut addr_seen) = (BTreeSet::new(), BTreeSet::new());
    for (entry, port) in with_port {
        let (Host::Ip(ip), Some(target)) = (&entry.host, name(&entry.target)) else { continue };
        if srv_seen.insert((entry.target.clone(), port)) {
            answers.push(Record::from_rdata(qname.clone(), TTL, RData::SRV(SRV::new(0, weight, port, target.clone()))));
        }
        if addr_seen.insert((entry.target.clone(), *ip)) {
            let qtype = if ip.is_ipv4() { RecordType::A } else { RecordType::AAAA };
            additionals.extend(address(target, *ip, qtype));
        }
    }
    (answers, additionals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str, target: &str, port: Option<u16>) -> Entry {
        Entry { host: Host::Ip(text.parse().unwrap()), port, target: target.into() }
    }

    fn q(text: &str) -> Name {
        Name::from_ascii(text).unwrap()
    }

    #[test]
    fn no_name_is_nxdomain_with_the_zone_soa() {
        let r = respond(&q("x.default.svc.cluster.local."), RecordType::A, &Found::NoName, 7);
        assert_eq!(r.code, ResponseCode::NXDomain);
        assert!(r.answers.is_empty());
        assert_eq!(r.authorities.len(), 1);
        assert_eq!(r.authorities[0].record_type(), RecordType::SOA);
        assert_eq!(r.authorities[0].ttl, TTL);
    }

    #[test]
    fn an_existing_name_asked_for_another_family_is_nodata() {
        let found = Found::Entries(vec![ip("10.0.0.1", "web.default.svc.cluster.local", Some(80))]);
        let r = respond(&q("web.default.svc.cluster.local."), RecordType::AAAA, &found, 7);
        assert_eq!(r.code, ResponseCode::NoError);
        assert!(r.answers.is_empty());
        assert_eq!(r.authorities[0].record_type(), RecordType::SOA);
    }

    #[test]
    fn addresses_are_answered_once_each_under_the_name_as_asked() {
        let found = Found::Entries(vec![
            ip("10.0.0.1", "a.redis.default.svc.cluster.local", Some(6379)),
            ip("10.0.0.1", "a.redis.default.svc.cluster.local", Some(16379)),
            ip("10.0.0.2", "b.redis.default.svc.cluster.local", Some(6379)),
        ]);
        let r = respond(&q("Redis.default.svc.cluster.local."), RecordType::A, &found, 7);
        assert_eq!(r.answers.len(), 2);
        assert!(r.answers.iter().all(|a| a.name.to_ascii() == "Redis.default.svc.cluster.local."));
        assert!(r.authorities.is_empty());
    }

    #[test]
    fn srv_targets_each_endpoint_and_carries_its_address_as_additional() {
        let found = Found::Entries(vec![
            ip("10.0.0.1", "redis-0.redis.default.svc.cluster.local", Some(6379)),
            ip("10.0.0.2", "redis-1.redis.default.svc.cluster.local", Some(6379)),
        ]);
        let r = respond(&q("_client._tcp.redis.default.svc.cluster.local."), RecordType::SRV, &found, 7);
        let srvs: Vec<(u16, u16, String)> = r
            .answers
            .iter()
            .map(|a| match &a.data {
                RData::SRV(s) => (s.weight, s.port, s.target.to_ascii()),
                other => panic!("not an SRV: {other:?}"),
            })
            .collect();
        assert_eq!(
            srvs,
            [
                (50, 6379, "redis-0.redis.default.svc.cluster.local.".to_string()),
                (50, 6379, "redis-1.redis.default.svc.cluster.local.".to_string())
            ]
        );
        let extra: Vec<String> = r.additionals.iter().map(|a| a.name.to_ascii()).collect();
        assert_eq!(extra, ["redis-0.redis.default.svc.cluster.local.", "redis-1.redis.default.svc.cluster.local."]);
    }

    #[test]
    fn an_alias_answers_a_cname_and_the_apex_answers_its_soa() {
        let found = Found::Entries(vec![Entry {
            host: Host::Name("db.example.com".into()),
            port: None,
            target: "db.default.svc.cluster.local".into(),
        }]);
        let r = respond(&q("db.default.svc.cluster.local."), RecordType::A, &found, 7);
        assert_eq!(r.answers[0].record_type(), RecordType::CNAME);
        let apex = respond(&q("cluster.local."), RecordType::SOA, &Found::Entries(vec![]), 7);
        assert_eq!(apex.answers[0].record_type(), RecordType::SOA);
    }
}
