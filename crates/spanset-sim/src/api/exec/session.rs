//! One `kubectl exec` session on an upgraded WebSocket: runs the command line it is given as a
//! child process and carries its streams over the [`channel`] protocol — stdin in (ended by
//! the version 5 close signal), stdout and stderr out, and last the `Status` of its exit.
//! It knows nothing of pods: what to run (the runtime's `nsenter` prefix and the command) is
//! decided before, so it runs any program, which is how its tests drive it.

use std::{os::unix::process::ExitStatusExt, process::Stdio, time::Duration};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    process::Command,
    sync::mpsc,
    task::JoinHandle,
};
use tokio_tungstenite::{
    WebSocketStream,
    tungstenite::{
        Message,
        protocol::{CloseFrame, frame::coding::CloseCode},
    },
};

use super::channel::{self, Inbound, Protocol};
use crate::store::error::ApiError;

/// How long the server waits, after its close frame, for the client to close the connection
/// (client-go does so once it has read everything); only a client that stopped reading waits
/// it out.
const CLOSE_WAIT: Duration = Duration::from_secs(60);

/// How long after its opening frame the session sends anything else. client-go before 1.34
/// (kubectl 1.33 and older) starts reading the connection while it is still creating its
/// streams, and drops a message for a stream not yet created: a refusal, an exit code or the
/// first output sent at once could be lost, and kubectl would report a silent success. A
/// kubelet is never that fast (its runtime starts a process first); the sandbox, refusing from
/// memory, would be.
pub(super) const STREAMS_SETTLE: Duration = Duration::from_millis(250);

/// The streams a client asked for (`stdin`, `stdout`, `stderr`, `tty` of `PodExecOptions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Streams {
    /// Pass the client's input to the command.
    pub stdin: bool,
    /// Send the command's standard output.
    pub stdout: bool,
    /// Send the command's standard error (kubectl asks for none with a TTY).
    pub stderr: bool,
    /// The client wants a terminal; accepted, but the command gets pipes, not a terminal.
    pub tty: bool,
}

/// Serves one session: runs `argv` (or, when the command may not run, reports why on the
/// error stream), then closes the WebSocket the way the apiserver does — the `Status`, a close
/// frame, and a wait for the client's close. The command is killed if the client goes away
/// first.
pub async fn run<S>(ws: WebSocketStream<S>, protocol: Protocol, argv: Result<Vec<String>, ApiError>, streams: Streams)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut source) = ws.split();
    let (out, mut out_rx) = mpsc::channel::<Message>(16);
    let writer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            if sink.send(m).await.is_err() {
                return;
            }
        }
    });
    // As the apiserver: an empty message on the first stream the client reads tells it the
    // session is open.
    let first = if streams.stdout {
        channel::STDOUT
    } else if streams.stderr {
        channel::STDERR
    } else {
        channel::ERROR
    };
    let _ = out.send(binary(channel::frame(first, &[]))).await;
    tokio::time::sleep(STREAMS_SETTLE).await;
    let status = match argv {
        Err(refusal) => Some(channel::refused(&refusal)),
        Ok(argv) => match spawn(&argv, streams) {
            Err(e) => Some(channel::refused(&ApiError::internal(format!(
                "error executing command in container: failed to start {:?}: {e}",
                argv.first().map(String::as_str).unwrap_or("")
            )))),
            Ok(child) => supervise(child, &argv, protocol, &out, &mut source).await,
        },
    };
    if let Some(status) = status {
        let _ = out.send(binary(channel::frame(channel::ERROR, status.to_string().as_bytes()))).await;
        let _ = out.send(Message::Close(Some(CloseFrame { code: CloseCode::Normal, reason: "".into() }))).await;
        drop(out);
        let _ = writer.await;
        // Reading on lets tungstenite take the client's close and finish the handshake.
        let _ = tokio::time::timeout(CLOSE_WAIT, async { while source.next().await.is_some() {} }).await;
    }
}

fn binary(bytes: Vec<u8>) -> Message {
    Message::Binary(Bytes::from(bytes))
}

fn spawn(argv: &[String], streams: Streams) -> std::io::Result<tokio::process::Child> {
    let (program, args) =
        argv.split_first().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty command"))?;
    let pipe = |wanted: bool| if wanted { Stdio::piped() } else { Stdio::null() };
    Command::new(program)
        .args(args)
        .stdin(pipe(streams.stdin))
        .stdout(pipe(streams.stdout))
        .stderr(pipe(streams.stderr))
        .kill_on_drop(true)
        .spawn()
}

/// Carries a running command's streams until it has exited and its output is sent; its
/// `Status`, or `None` when the client went away first (the command is then killed).
async fn supervise<R>(
    mut child: tokio::process::Child,
    argv: &[String],
    protocol: Protocol,
    out: &mpsc::Sender<Message>,
    source: &mut R,
) -> Option<Value>
where
    R: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let pumps: Vec<JoinHandle<()>> = [
        child.stdout.take().map(|o| tokio::spawn(pump(o, channel::STDOUT, out.clone()))),
        child.stderr.take().map(|e| tokio::spawn(pump(e, channel::STDERR, out.clone()))),
    ]
    .into_iter()
    .flatten()
    .collect();
    // Stdin is written by its own task, so that a command slow to read its input never holds
    // up its output (nor the reading of a close signal).
    let mut stdin = child.stdin.take().map(|mut w| {
        let (tx, mut rx) = mpsc::channel::<Bytes>(16);
        tokio::spawn(async move {
            while let Some(b) = rx.recv().await {
                if w.write_all(&b).await.is_err() {
                    break;
                }
            }
        });
        tx
    });
    let done = async move {
        let status = child.wait().await;
        for p in pumps {
            let _ = p.await;
        }
        status
    };
    tokio::pin!(done);
    let exit = loop {
        tokio::select! {
            status = &mut done => break status,
            msg = source.next() => match msg {
                Some(Ok(Message::Binary(data))) => match channel::inbound(protocol, &data) {
                    Inbound::Data { channel: channel::STDIN, data } => {
                        if let Some(tx) = &stdin
                            && tx.send(Bytes::copy_from_slice(data)).await.is_err()
                        {
                            stdin = None;
                        }
                    }
                    Inbound::Close(channel::STDIN) => stdin = None,
                    _ => {}
                },
                Some(Ok(Message::Close(_)) | Err(_)) | None => return None,
                Some(Ok(_)) => {}
            },
        }
    };
    Some(match exit {
        Ok(s) => match s.code().or_else(|| s.signal().map(|sig| 128 + sig)) {
            Some(0) => channel::success(),
            Some(code) => channel::exited(code, argv),
            None => channel::exited(1, argv),
        },
        Err(e) => channel::refused(&ApiError::internal(format!("waiting for the command: {e}"))),
    })
}

/// Sends what a command writes to one of its outputs, as messages of that stream.
async fn pump(mut from: impl AsyncRead + Unpin, stream: u8, out: mpsc::Sender<Message>) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if out.send(binary(channel::frame(stream, &buf[..n]))).await.is_err() {
                    return;
                }
            }
        }
    }
}
