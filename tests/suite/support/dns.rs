//! Asking a simulated cluster's DNS server, in process (UDP, hickory's wire format), for the
//! poller tests that query every few milliseconds; the real `dig` is used beside it.

use std::{
    net::{Ipv4Addr, SocketAddr, UdpSocket},
    str::FromStr,
    time::Duration,
};

use hickory_proto::{
    op::{Message, Query, ResponseCode},
    rr::{Name, RData, RecordType},
};

/// What a DNS server answered for an A query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// NOERROR with these addresses (sorted; empty: the name exists with no address).
    Addresses(Vec<Ipv4Addr>),
    /// NXDOMAIN.
    NoSuchName,
    /// Another response code.
    Other(String),
}

impl Answer {
    /// The addresses answered (none for an error).
    pub fn addresses(&self) -> Vec<Ipv4Addr> {
        match self {
            Answer::Addresses(a) => a.clone(),
            _ => Vec::new(),
        }
    }
}

/// Asks `server` for the A records of `name` (retrying a lost datagram a few times).
pub fn query_a(server: SocketAddr, name: &str) -> Answer {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
    socket.set_read_timeout(Some(Duration::from_secs(2))).expect("a timeout");
    let mut msg = Message::query();
    msg.metadata.id = rand_id();
    msg.metadata.recursion_desired = true;
    msg.add_query(Query::query(Name::from_str(name).expect("a DNS name"), RecordType::A));
    let bytes = msg.to_vec().expect("a query encodes");
    let mut buf = [0u8; 4096];
    for _ in 0..5 {
        socket.send_to(&bytes, server).expect("sent");
        let Ok((n, _)) = socket.recv_from(&mut buf) else { continue };
        let reply = Message::from_vec(&buf[..n]).expect("a DNS reply");
        if reply.metadata.id != msg.metadata.id {
            continue;
        }
        return match reply.metadata.response_code {
            ResponseCode::NoError => {
                let mut ips: Vec<Ipv4Addr> = reply
                    .answers
                    .iter()
                    .filter_map(|r| match &r.data {
                        RData::A(a) => Some(a.0),
                        _ => None,
                    })
                    .collect();
                ips.sort();
                Answer::Addresses(ips)
            }
            ResponseCode::NXDomain => Answer::NoSuchName,
            other => Answer::Other(format!("{other:?}")),
        };
    }
    panic!("{server} did not answer {name} in 5 tries");
}

fn rand_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos() as u64
    );
    h.finish() as u16
}

/// The real `dig`'s short answer (`+short`) for `name` from `server`, or `None` when dig is
/// missing (outside CI; under CI a missing dig fails the test).
pub fn dig_short(server: SocketAddr, name: &str) -> Option<Vec<String>> {
    let out = match std::process::Command::new("dig")
        .args([&format!("@{}", server.ip()), "-p", &server.port().to_string(), "+short", "+tries=3", "+time=2", name])
        .output()
    {
        Ok(out) => {
            super::tally::found("dig");
            out
        }
        Err(e) => {
            super::tally::missing("dig", &format!("{e}: apt-get install dnsutils"));
            return None;
        }
    };
    assert!(out.status.success(), "dig failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    lines.sort();
    Some(lines)
}
