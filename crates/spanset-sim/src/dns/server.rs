//! One cluster's DNS server: hickory-server's UDP and TCP loops on one loopback port, with a
//! request handler that classifies the name ([`super::name`]), reads the cluster's store at
//! query time ([`super::lookup`]) and sends the records [`super::answer`] builds.

use std::{
    net::{Ipv4Addr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use hickory_proto::op::{Edns, Header, HeaderCounts, MessageType, Metadata, OpCode, ResponseCode};
use hickory_server::{
    Server,
    net::runtime::Time,
    server::{Request, RequestHandler, ResponseHandler, ResponseInfo},
    zone_handler::MessageResponseBuilder,
};
use tokio::net::{TcpListener, UdpSocket};

use super::{answer, lookup, name};
use crate::cluster::Cluster;

/// How long a TCP connection may sit without sending a query before it is closed.
const TCP_IDLE: Duration = Duration::from_secs(10);
/// Responses queued per TCP connection.
const TCP_RESPONSE_BUFFER: usize = 32;
/// With port 0, how many free UDP ports to try before giving up on finding one whose TCP twin
/// is free too.
const BIND_ATTEMPTS: usize = 20;

/// A running DNS server of one cluster; stops when dropped.
pub struct DnsServer {
    /// Where it listens, UDP and TCP.
    pub addr: SocketAddr,
    server: Server<Handler>,
}

impl DnsServer {
    /// Serves `cluster`'s records on 127.0.0.1:`port` (0: a free port), UDP and TCP.
    pub async fn start(cluster: Arc<Cluster>, port: u16) -> std::io::Result<Self> {
        Self::start_on(cluster, Ipv4Addr::LOCALHOST, port).await
    }

    /// Serves `cluster`'s records on `ip`:`port` (0: a free port), UDP and TCP.
    pub async fn start_on(cluster: Arc<Cluster>, ip: Ipv4Addr, port: u16) -> std::io::Result<Self> {
        let (udp, tcp) = bind_pair(ip, port).await?;
        Self::serve(cluster, udp, tcp)
    }

    /// Serves `cluster`'s records on sockets already bound (see [`bind_pair`]): the cluster's
    /// containers that run real processes find it on port 53 of an address of their network,
    /// which is bound before the cluster exists to claim that network.
    pub fn serve(cluster: Arc<Cluster>, udp: UdpSocket, tcp: TcpListener) -> std::io::Result<Self> {
        let addr = udp.local_addr()?;
        let mut server = Server::new(Handler { cluster });
        server.register_socket(udp);
        server.register_listener(tcp, TCP_IDLE, TCP_RESPONSE_BUFFER);
        Ok(Self { addr, server })
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        // The serving tasks watch this token; dropping `server` aborts whatever is left.
        self.server.shutdown_token().cancel();
    }
}

/// A UDP socket and a TCP listener on the same port of an address of this machine.
pub async fn bind_pair(ip: Ipv4Addr, port: u16) -> std::io::Result<(UdpSocket, TcpListener)> {
    let mut last = None;
    for _ in 0..if port == 0 { BIND_ATTEMPTS } else { 1 } {
        let udp = UdpSocket::bind((ip, port)).await?;
        match TcpListener::bind(udp.local_addr()?).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no port")))
}

/// Answers queries from one cluster's store.
struct Handler {
    cluster: Arc<Cluster>,
}

impl Handler {
    /// The response to a request: an error code alone, or what the store holds for its name.
    fn resolve(&self, request: &Request) -> answer::Response {
        let refuse = |code| answer::Response { code, ..Default::default() };
        let query = match request.request_info() {
            Ok(info) if request.metadata.message_type == MessageType::Query => info.query,
            _ => return refuse(ResponseCode::FormErr),
        };
        if request.metadata.op_code != OpCode::Query {
            return refuse(ResponseCode::NotImp);
        }
        let qname = query.original().name();
        let parsed = name::parse(&qname.to_ascii());
        if parsed == name::QName::Outside {
            return refuse(ResponseCode::Refused);
        }
        let storage = &self.cluster.storage;
        let found = lookup::lookup(storage, &parsed);
        let serial = u32::try_from(storage.current_rv() & u64::from(u32::MAX)).unwrap_or(0);
        answer::respond(qname, query.query_type(), &found, serial)
    }
}

#[async_trait::async_trait]
impl RequestHandler for Handler {
    async fn handle_request<R: ResponseHandler, T: Time>(&self, request: &Request, mut handle: R) -> ResponseInfo {
        let response = self.resolve(request);
        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.authoritative = response.code != ResponseCode::Refused;
        metadata.response_code = response.code;
        // Echo EDNS to a client that used it, so dig's larger buffer applies over UDP.
        let edns = request.edns.as_ref().map(|asked| {
            let mut edns = Edns::new();
            edns.set_max_payload(asked.max_payload().max(512));
            edns
        });
        let mut builder = MessageResponseBuilder::from_message_request(request);
        if let Some(edns) = &edns {
            builder.edns(edns);
        }
        let message = builder.build(
            metadata,
            &response.answers,
            &response.authorities,
            std::iter::empty(),
            &response.additionals,
        );
        match handle.send_response(message).await {
            Ok(info) => info,
            Err(e) => failed(&request.metadata, e),
        }
    }
}

fn failed(request: &Metadata, error: impl std::fmt::Display) -> ResponseInfo {
    tracing::debug!(%error, "DNS response not sent");
    let mut metadata = Metadata::response_from_request(request);
    metadata.response_code = ResponseCode::ServFail;
    ResponseInfo::from(Header { metadata, counts: HeaderCounts::default() })
}
