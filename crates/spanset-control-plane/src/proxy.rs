//! A TCP proxy in front of one apiserver, so that a fault is seen by whoever connects through
//! it and by nobody else: spanset reaches a member through its proxy while the member's own
//! components, the tests' administrator and the audit reach it directly, as when a network
//! between spanset and one member fails and the member itself runs on. TLS passes through
//! untouched (the apiserver's certificate names 127.0.0.1, where the proxy listens too).
//!
//! [`Fault::Refuse`] closes every connection and each new one at once, as a dead route or a
//! stopped load balancer answers; [`Fault::Hang`] holds every connection open and silent, as a
//! black hole does, until the fault is lifted (then bytes flow again on the same connections).

use std::net::SocketAddr;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::watch,
};

/// What the proxy does to its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Nothing: bytes flow both ways.
    None,
    /// Every connection is closed, and each new one as soon as it is accepted.
    Refuse,
    /// Every connection stays open and nothing flows either way.
    Hang,
}

/// A running proxy; dropping it closes every connection.
pub struct FaultProxy {
    addr: SocketAddr,
    fault: watch::Sender<Fault>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (fault, watching) = watch::channel(Fault::None);
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        let _ = client.set_nodelay(true);
                        connections.spawn(forward(client, target, watching.clone()));
                    }
                    // Reaped as they end, so that a long run does not accumulate them.
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        Ok(Self { addr, fault, task })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sets the fault, for every connection open and to come.
    pub fn set(&self, fault: Fault) {
        self.fault.send_replace(fault);
    }

    /// The fault in force.
    pub fn fault(&self) -> Fault {
        *self.fault.borrow()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One connection: copies both ways while no fault holds, stops copying while hung, and drops
/// both sides when refused.
async fn forward(mut client: TcpStream, target: SocketAddr, mut fault: watch::Receiver<Fault>) {
    // A new connection under a fault: closed at once, or held until the fault is lifted.
    loop {
        let now = *fault.borrow_and_update();
        match now {
            Fault::None => break,
            Fault::Refuse => return,
            Fault::Hang => {}
        }
        if fault.changed().await.is_err() {
            return;
        }
    }
    let Ok(mut upstream) = TcpStream::connect(target).await else { return };
    let _ = upstream.set_nodelay(true);
    let (mut client_in, mut client_out) = client.split();
    let (mut upstream_in, mut upstream_out) = upstream.split();
    let mut up = vec![0u8; 64 * 1024];
    let mut down = vec![0u8; 64 * 1024];
    loop {
        let now = *fault.borrow_and_update();
        match now {
            Fault::None => {}
            Fault::Refuse => return,
            Fault::Hang => {
                if fault.changed().await.is_err() {
                    return;
                }
                continue;
            }
        }
        tokio::select! {
            // A fault set is seen before any more bytes are copied.
            biased;
            changed = fault.changed() => if changed.is_err() { return },
            read = client_in.read(&mut up) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => if upstream_out.write_all(&up[..n]).await.is_err() { return },
            },
            read = upstream_in.read(&mut down) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => if client_out.write_all(&down[..n]).await.is_err() { return },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// An echo server: what it reads, it writes back.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn round_trip(s: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
        s.write_all(b"ping").await.ok()?;
        let mut buf = [0u8; 4];
        match tokio::time::timeout(within, s.read_exact(&mut buf)).await {
            Ok(Ok(_)) => Some(buf.to_vec()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn bytes_flow_stop_while_hung_resume_after_and_a_refusal_closes_everything() {
        let proxy = FaultProxy::start(echo().await).await.unwrap();
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut s, Duration::from_secs(30)).await.as_deref(), Some(&b"ping"[..]));

        proxy.set(Fault::Hang);
        // What is sent while hung is not answered (a short wait: the proxy forwards nothing, so
        // any answer at all would be the failure)...
        assert_eq!(round_trip(&mut s, Duration::from_millis(300)).await, None, "nothing flows while hung");
        // ...and arrives once the fault is lifted, on the same connection.
        proxy.set(Fault::None);
        let mut buf = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(30), s.read_exact(&mut buf)).await.unwrap().unwrap();
        assert_eq!(&buf, b"ping");

        proxy.set(Fault::Refuse);
        let mut rest = vec![];
        let closed = tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut rest)).await.unwrap();
        assert!(closed.is_ok_and(|n| n == 0) || rest.is_empty(), "the open connection is closed");
        let mut again = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut again, Duration::from_secs(30)).await, None, "a new one is closed at once");
        proxy.set(Fault::None);
        let mut healed = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(round_trip(&mut healed, Duration::from_secs(30)).await.as_deref(), Some(&b"ping"[..]));
    }
}
