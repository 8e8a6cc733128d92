//! A small Redis Cluster client over tokio's TcpStream: what the Redis benchmarks measure with.
//! Spawning `redis-cli -c` per request costs about 5 ms of its own, which would drown the
//! latencies being measured; this client speaks RESP on kept connections, knows which node
//! serves each slot from the `MOVED` redirects it was given, and follows `MOVED` and `ASK` as a
//! cluster client does. A node that refuses the connection (gone: it moved) is skipped for the
//! next seed, as a cluster client refreshes its view of the nodes; nothing else is retried: a
//! request that reached a node and was refused (`CLUSTERDOWN`, `TRYAGAIN`), lost its
//! connection before the answer (its outcome unknown), or had no answer in time is reported
//! as failed, so that the figures count what a client saw while the cluster moved.

use std::{
    collections::{HashMap, hash_map::Entry},
    net::SocketAddr,
    sync::Arc,
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufStream},
    net::TcpStream,
};

/// One answer of a Redis server (the kinds `SET` and `GET` give).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`.
    Simple(String),
    /// `-ERR …`, `-CLUSTERDOWN …` (redirects are followed, never answered).
    Error(String),
    /// An integer.
    Int(i64),
    /// A bulk string; `None` is nil (no such key).
    Bulk(Option<Vec<u8>>),
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The connection broke after the request left: its outcome is unknown.
    Connection(String),
    /// No node known accepted a connection.
    Unreachable(String),
    /// No answer within the client's timeout.
    Timeout,
    /// Redis answered with an error.
    Refused(String),
    /// Redirected more often than a settled cluster ever redirects.
    Redirects,
    /// No node known to ask.
    NoNode,
}

/// How an exchange with a node failed: before the request left (no connection), or after.
enum Exchange {
    Connect(std::io::Error),
    Broken(std::io::Error),
}

/// The hash slot of a key (CRC16-XMODEM modulo 16384; the benchmark's keys have no hash tags).
pub fn slot(key: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in key {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc % 16384
}

/// A cluster client: seeds to start from (kept current by the caller, as the nodes move), and
/// what it learnt of the slots.
pub struct ClusterClient {
    seeds: Arc<Mutex<Vec<SocketAddr>>>,
    slots: HashMap<u16, SocketAddr>,
    conns: HashMap<SocketAddr, BufStream<TcpStream>>,
    next_seed: usize,
    timeout: Duration,
}

impl ClusterClient {
    /// A client asking `seeds` first, each request answered within `timeout` or failed.
    pub fn new(seeds: Arc<Mutex<Vec<SocketAddr>>>, timeout: Duration) -> Self {
        Self { seeds, slots: HashMap::new(), conns: HashMap::new(), next_seed: 0, timeout }
    }

    /// Sends one command about `args[1]` (the key), following redirects.
    pub async fn request(&mut self, args: &[&[u8]]) -> Result<Reply, Failure> {
        let slot = slot(args[1]);
        match tokio::time::timeout(self.timeout, self.redirected(slot, args)).await {
            Ok(r) => r,
            Err(_) => {
                // A half-read answer would confuse the next request on that connection.
                self.conns.clear();
                self.slots.remove(&slot);
                Err(Failure::Timeout)
            }
        }
    }

    fn seed(&mut self) -> Option<SocketAddr> {
        let seeds = self.seeds.lock();
        if seeds.is_empty() {
            return None;
        }
        self.next_seed = self.next_seed.wrapping_add(1);
        Some(seeds[self.next_seed % seeds.len()])
    }

    async fn redirected(&mut self, slot: u16, args: &[&[u8]]) -> Result<Reply, Failure> {
        let mut addr = match self.slots.get(&slot) {
            Some(a) => *a,
            None => self.seed().ok_or(Failure::NoNode)?,
        };
        let mut asking = false;
        let (mut redirects, mut skipped) = (0, 0);
        loop {
            let reply = match self.exchange(addr, asking, args).await {
                Ok(r) => r,
                Err(Exchange::Connect(e)) => {
                    // Never reached: ask another node, as long as there are untried seeds.
                    self.slots.remove(&slot);
                    skipped += 1;
                    if skipped > self.seeds.lock().len() {
                        return Err(Failure::Unreachable(e.to_string()));
                    }
                    addr = self.seed().ok_or(Failure::NoNode)?;
                    continue;
                }
                Err(Exchange::Broken(e)) => {
                    self.conns.remove(&addr);
                    self.slots.remove(&slot);
                    return Err(Failure::Connection(e.to_string()));
                }
            };
            asking = false;
            match reply {
                Reply::Error(e) if e.starts_with("MOVED ") || e.starts_with("ASK ") => {
                    let target = e.split_whitespace().nth(2).and_then(|a| a.parse().ok());
                    let Some(target) = target else { return Err(Failure::Refused(e)) };
                    if e.starts_with("MOVED ") {
                        self.slots.insert(slot, target);
                    } else {
                        asking = true;
                    }
                    addr = target;
                    redirects += 1;
                    if redirects > 5 {
                        return Err(Failure::Redirects);
                    }
                }
                Reply::Error(e) => return Err(Failure::Refused(e)),
                ok => return Ok(ok),
            }
        }
    }

    /// One command on the kept connection to `addr` (made if need be), `ASKING` first if asked.
    async fn exchange(&mut self, addr: SocketAddr, asking: bool, args: &[&[u8]]) -> Result<Reply, Exchange> {
        let conn = match self.conns.entry(addr) {
            Entry::Occupied(kept) => kept.into_mut(),
            Entry::Vacant(slot) => {
                let stream = TcpStream::connect(addr).await.map_err(Exchange::Connect)?;
                stream.set_nodelay(true).map_err(Exchange::Connect)?;
                slot.insert(BufStream::new(stream))
            }
        };
        Self::send(conn, asking, args).await.map_err(Exchange::Broken)
    }

    async fn send(conn: &mut BufStream<TcpStream>, asking: bool, args: &[&[u8]]) -> std::io::Result<Reply> {
        if asking {
            write_command(conn, &[b"ASKING"]).await?;
        }
        write_command(conn, args).await?;
        conn.flush().await?;
        if asking {
            read_reply(conn).await?;
        }
        read_reply(conn).await
    }
}

async fn write_command(conn: &mut BufStream<TcpStream>, args: &[&[u8]]) -> std::io::Result<()> {
    conn.write_all(format!("*{}\r\n", args.len()).as_bytes()).await?;
    for a in args {
        conn.write_all(format!("${}\r\n", a.len()).as_bytes()).await?;
        conn.write_all(a).await?;
        conn.write_all(b"\r\n").await?;
    }
    Ok(())
}

fn bad(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.into())
}

async fn read_reply(conn: &mut BufStream<TcpStream>) -> std::io::Result<Reply> {
    let mut line = String::new();
    if conn.read_line(&mut line).await? == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at_checked(1).ok_or_else(|| bad("an empty answer"))?;
    match kind {
        "+" => Ok(Reply::Simple(rest.to_string())),
        "-" => Ok(Reply::Error(rest.to_string())),
        ":" => rest.parse().map(Reply::Int).map_err(|_| bad(format!("integer {rest:?}"))),
        "$" => {
            let len: i64 = rest.parse().map_err(|_| bad(format!("bulk length {rest:?}")))?;
            if len < 0 {
                return Ok(Reply::Bulk(None));
            }
            let mut buf = vec![0; len as usize + 2];
            conn.read_exact(&mut buf).await?;
            buf.truncate(len as usize);
            Ok(Reply::Bulk(Some(buf)))
        }
        _ => Err(bad(format!("an answer this client does not read: {line:?}"))),
    }
}
