//! The exec protocol through a real WebSocket client against a real HTTP server that upgrades:
//! ordinary programs stand for the command a container would run.

use std::{collections::BTreeMap, time::Duration};

use futures::{SinkExt, StreamExt};
use http::header;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::{
    WebSocketStream, client_async,
    tungstenite::{Message, client::IntoClientRequest},
};

use super::{ExecOptions, accept, channel};
use crate::{api::response, store::error::ApiError};

/// A generous bound on a whole session, so a protocol bug fails the test instead of hanging it.
const DEADLINE: Duration = Duration::from_secs(60);

/// An HTTP/1.1 server whose every request is an exec of the `command` in its query (no pod:
/// the command runs as it is), or of nothing with `refuse=MESSAGE`.
async fn server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let svc = service_fn(|req: http::Request<hyper::body::Incoming>| async move {
                let (parts, _) = req.into_parts();
                let answer = ExecOptions::parse(parts.uri.query()).and_then(|o| {
                    let refusal = url::form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
                        .find(|(k, _)| k == "refuse")
                        .map(|(_, v)| ApiError::bad_request(v.into_owned()));
                    // `cut=true`: the session is cut as soon as it starts, as a refused
                    // partition cuts it.
                    let cut = parts.uri.query().is_some_and(|q| q.contains("cut=true"));
                    let until = async move {
                        if !cut {
                            std::future::pending::<()>().await
                        }
                    };
                    accept(&parts, refusal.map_or(Ok(o.command), Err), o.streams, until)
                });
                Ok::<_, std::convert::Infallible>(answer.unwrap_or_else(|e| response::error(&e)))
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).with_upgrades(),
            );
        }
    });
    addr
}

fn query(command: &[&str], streams: &str) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for c in command {
        q.append_pair("command", c);
    }
    format!("{}&{streams}", q.finish())
}

/// Opens an exec WebSocket offering `protocols`; the connection and the chosen subprotocol.
async fn open(addr: std::net::SocketAddr, query: &str, protocols: &str) -> (WebSocketStream<TcpStream>, String) {
    let mut req = format!("ws://{addr}/api/v1/namespaces/default/pods/p/exec?{query}").into_client_request().unwrap();
    req.headers_mut().insert(header::SEC_WEBSOCKET_PROTOCOL, protocols.parse().unwrap());
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, resp) = client_async(req, tcp).await.expect("the upgrade is accepted");
    let chosen = resp.headers()[header::SEC_WEBSOCKET_PROTOCOL].to_str().unwrap().to_string();
    (ws, chosen)
}

/// Everything the server sends until it closes: the bytes of each stream, and the messages in
/// order (stream, length).
async fn drain(ws: &mut WebSocketStream<TcpStream>) -> (BTreeMap<u8, Vec<u8>>, Vec<(u8, usize)>) {
    let mut streams: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
    let mut order = Vec::new();
    let read = async {
        while let Some(msg) = ws.next().await {
            match msg.expect("a clean session") {
                Message::Binary(b) => {
                    let (&id, data) = b.split_first().expect("a stream number");
                    streams.entry(id).or_default().extend_from_slice(data);
                    order.push((id, data.len()));
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    tokio::time::timeout(DEADLINE, read).await.expect("the server ended the session");
    (streams, order)
}

fn status(streams: &BTreeMap<u8, Vec<u8>>) -> Value {
    serde_json::from_slice(streams.get(&channel::ERROR).expect("a status")).expect("the status is JSON")
}

fn text(streams: &BTreeMap<u8, Vec<u8>>, id: u8) -> String {
    String::from_utf8_lossy(streams.get(&id).map(Vec::as_slice).unwrap_or_default()).into_owned()
}

#[tokio::test]
async fn output_streams_and_a_non_zero_exit_reach_the_client_in_order() {
    let addr = server().await;
    let q = query(&["sh", "-c", "echo out; echo err >&2; exit 3"], "stdout=true&stderr=true");
    let (mut ws, chosen) = open(addr, &q, "v5.channel.k8s.io").await;
    assert_eq!(chosen, "v5.channel.k8s.io");
    let (streams, order) = drain(&mut ws).await;
    assert_eq!(order.first(), Some(&(channel::STDOUT, 0)), "an empty message opens the session");
    assert_eq!(order.last().map(|m| m.0), Some(channel::ERROR), "the status comes last: {order:?}");
    assert_eq!(text(&streams, channel::STDOUT), "out\n");
    assert_eq!(text(&streams, channel::STDERR), "err\n");
    let s = status(&streams);
    assert_eq!((s["status"].as_str(), s["reason"].as_str()), (Some("Failure"), Some("NonZeroExitCode")));
    assert_eq!(s["details"]["causes"], json!([{"reason": "ExitCode", "message": "3"}]));
}

#[tokio::test]
async fn stdin_reaches_the_command_and_the_v5_close_signal_ends_it() {
    let addr = server().await;
    let (mut ws, _) = open(addr, &query(&["cat"], "stdin=true&stdout=true"), "v5.channel.k8s.io").await;
    ws.send(Message::Binary(channel::frame(channel::STDIN, b"hello ").into())).await.unwrap();
    ws.send(Message::Binary(channel::frame(channel::RESIZE, br#"{"Width":80,"Height":24}"#).into())).await.unwrap();
    ws.send(Message::Binary(channel::frame(channel::STDIN, b"world\n").into())).await.unwrap();
    // Without the close signal `cat` never sees the end of its input and the session never ends.
    ws.send(Message::Binary(vec![channel::CLOSE, channel::STDIN].into())).await.unwrap();
    let (streams, _) = drain(&mut ws).await;
    assert_eq!(text(&streams, channel::STDOUT), "hello world\n");
    assert_eq!(status(&streams), json!({"metadata": {}, "status": "Success"}));
}

#[tokio::test]
async fn version_4_is_spoken_when_only_it_is_offered() {
    let addr = server().await;
    let (mut ws, chosen) = open(addr, &query(&["echo", "v4"], "stdout=true"), "v4.channel.k8s.io").await;
    assert_eq!(chosen, "v4.channel.k8s.io");
    let (streams, _) = drain(&mut ws).await;
    assert_eq!(text(&streams, channel::STDOUT), "v4\n");
    assert_eq!(status(&streams)["status"], "Success");
}

#[tokio::test]
async fn a_refusal_is_the_status_of_a_session_that_runs_nothing() {
    let addr = server().await;
    let q = format!("{}&refuse=container+c+runs+the+simulated+image+nginx", query(&["touch", "/tmp/x"], "stdout=true"));
    let (mut ws, _) = open(addr, &q, "v5.channel.k8s.io").await;
    let (streams, _) = drain(&mut ws).await;
    let s = status(&streams);
    assert_eq!((s["status"].as_str(), s["code"].as_u64()), (Some("Failure"), Some(400)));
    assert_eq!(s["message"], "container c runs the simulated image nginx");
    assert!(text(&streams, channel::STDOUT).is_empty());
}

#[tokio::test]
async fn a_client_that_goes_away_takes_its_command_with_it() {
    let addr = server().await;
    let q = query(&["sh", "-c", "echo $$; exec sleep 1000"], "stdout=true");
    let (mut ws, _) = open(addr, &q, "v5.channel.k8s.io").await;
    let pid = first_line_pid(&mut ws).await;
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    drop(ws);
    killed(&pid).await;
}

/// The pid a command prints first (`echo $$`) on stdout, reading until the line ends.
async fn first_line_pid(ws: &mut WebSocketStream<TcpStream>) -> String {
    let mut pid = String::new();
    while !pid.ends_with('\n') {
        match tokio::time::timeout(DEADLINE, ws.next()).await.expect("output in time") {
            Some(Ok(Message::Binary(b))) if b.first() == Some(&channel::STDOUT) => {
                pid.push_str(&String::from_utf8_lossy(&b[1..]))
            }
            Some(Ok(_)) => {}
            other => panic!("the session ended early: {other:?}"),
        }
    }
    pid.trim().to_string()
}

/// Waits until a process is gone (or a zombie: killed, not yet reaped).
async fn killed(pid: &str) {
    let stat = format!("/proc/{pid}/stat");
    let gone = async {
        while std::fs::read_to_string(&stat).is_ok_and(|s| !s.contains(") Z ")) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(DEADLINE, gone).await.expect("the command was killed");
}

#[tokio::test]
async fn a_cut_session_takes_its_command_with_it() {
    let addr = server().await;
    let q = format!("{}&cut=true", query(&["sh", "-c", "echo $$; exec sleep 1000"], "stdout=true"));
    let (mut ws, _) = open(addr, &q, "v5.channel.k8s.io").await;
    // The cut may come before the command prints; then it never ran, which is as good.
    let ended = tokio::time::timeout(DEADLINE, async {
        let mut pid = String::new();
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Binary(b) = m
                && b.first() == Some(&channel::STDOUT)
            {
                pid.push_str(&String::from_utf8_lossy(&b[1..]));
            }
        }
        pid
    })
    .await
    .expect("the cut ended the connection");
    if !ended.trim().is_empty() {
        killed(ended.trim()).await;
    }
}

#[tokio::test]
async fn an_offer_without_a_known_subprotocol_is_a_bad_request() {
    let addr = server().await;
    let mut req = format!("ws://{addr}/x?command=true&stdout=true").into_client_request().unwrap();
    req.headers_mut().insert(header::SEC_WEBSOCKET_PROTOCOL, "channel.k8s.io".parse().unwrap());
    let err = client_async(req, TcpStream::connect(addr).await.unwrap()).await.expect_err("refused");
    match err {
        tokio_tungstenite::tungstenite::Error::Http(resp) => {
            assert_eq!(resp.status(), 400);
            let body: Value = serde_json::from_slice(resp.body().as_deref().unwrap_or_default()).unwrap();
            assert!(body["message"].as_str().unwrap().starts_with("requested protocol(s) are not supported"));
        }
        other => panic!("expected an HTTP refusal, got {other:?}"),
    }
}

/// kubectl 1.33 and older register their streams while already reading: a refusal sent with
/// the opening frame can arrive before its stream exists and be dropped, and kubectl then
/// reports success. Nothing but the opening frame is sent until the client has had time.
#[tokio::test]
async fn a_refusal_waits_for_the_client_to_have_its_streams() {
    let addr = server().await;
    let q = format!("{}&refuse=no", query(&["true"], "stdout=true"));
    let (mut ws, _) = open(addr, &q, "v5.channel.k8s.io").await;
    let opening = tokio::time::timeout(DEADLINE, ws.next()).await.expect("an opening frame").expect("open");
    assert_eq!(opening.expect("a message").into_data().as_ref(), [channel::STDOUT]);
    let opened = tokio::time::Instant::now();
    let (streams, _) = drain(&mut ws).await;
    assert!(
        opened.elapsed() >= super::session::STREAMS_SETTLE * 9 / 10,
        "the status came after {:?}",
        opened.elapsed()
    );
    assert_eq!(status(&streams)["message"], "no");
}
