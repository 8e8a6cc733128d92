//! The remotecommand channel protocol that `kubectl exec` speaks over a WebSocket since kubectl
//! 1.30: every binary message starts with the number of the stream it carries — 0 stdin (client
//! to server), 1 stdout, 2 stderr, 3 the final `Status`, 4 terminal resizes — and version 5
//! (`v5.channel.k8s.io`) adds a message `[255, N]` by which the client closes stream N, so a
//! command reading its stdin sees the end of it. Version 4 is the same without that signal.

use serde_json::{Value, json};

use crate::store::error::ApiError;

/// The command's standard input (client to server).
pub const STDIN: u8 = 0;
/// The command's standard output.
pub const STDOUT: u8 = 1;
/// The command's standard error.
pub const STDERR: u8 = 2;
/// The final `Status` of the command: success, its non-zero exit code, or why it did not run.
pub const ERROR: u8 = 3;
/// Terminal size changes (client to server, JSON `{"Width":…,"Height":…}`).
pub const RESIZE: u8 = 4;
/// The first byte of a version 5 close signal: `[255, stream]`.
pub const CLOSE: u8 = 255;

/// The versions of the protocol this server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `v4.channel.k8s.io`: JSON `Status` on the error stream, no close signal.
    V4,
    /// `v5.channel.k8s.io`: version 4 with the close signal; the only one kubectl 1.30+ offers.
    V5,
}

impl Protocol {
    /// The subprotocol name, as offered in and answered with `Sec-WebSocket-Protocol`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::V4 => "v4.channel.k8s.io",
            Protocol::V5 => "v5.channel.k8s.io",
        }
    }

    /// The first offered subprotocol this server speaks, in the client's order of preference
    /// (as the apiserver's handshake picks); `offers` are the `Sec-WebSocket-Protocol` header
    /// values, each a comma-separated list.
    pub fn choose<'a>(offers: impl IntoIterator<Item = &'a str>) -> Option<Protocol> {
        offers.into_iter().flat_map(|v| v.split(',')).map(str::trim).find_map(|offer| match offer {
            "v5.channel.k8s.io" => Some(Protocol::V5),
            "v4.channel.k8s.io" => Some(Protocol::V4),
            _ => None,
        })
    }
}

/// What one client message means.
#[derive(Debug, PartialEq, Eq)]
pub enum Inbound<'a> {
    /// Bytes for a stream (stdin, or a resize).
    Data {
        /// The stream.
        channel: u8,
        /// The bytes after the stream number.
        data: &'a [u8],
    },
    /// The client closed this stream (version 5 only).
    Close(u8),
    /// Nothing usable: an empty message, or a malformed close signal.
    Nothing,
}

/// Reads one binary message from the client.
pub fn inbound(protocol: Protocol, message: &[u8]) -> Inbound<'_> {
    match message {
        [] => Inbound::Nothing,
        [CLOSE, rest @ ..] if protocol == Protocol::V5 => match rest {
            [channel] => Inbound::Close(*channel),
            _ => Inbound::Nothing,
        },
        [channel, data @ ..] => Inbound::Data { channel: *channel, data },
    }
}

/// One server message: the stream number, then the bytes.
pub fn frame(channel: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 1);
    out.push(channel);
    out.extend_from_slice(data);
    out
}

/// The `Status` a command that exited 0 ends with (no kind: the apiserver marshals the bare
/// struct).
pub fn success() -> Value {
    json!({"metadata": {}, "status": "Success"})
}

/// The `Status` of a command that exited non-zero: client-go reads the code from the
/// `ExitCode` cause, and kubectl exits with it.
pub fn exited(code: i32, argv: &[String]) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
            argv.join(" ")
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

/// The `Status` of a command that could not run (kubectl prints its message).
pub fn refused(err: &ApiError) -> Value {
    err.to_status()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_first_offer_this_server_speaks_is_chosen() {
        assert_eq!(Protocol::choose(["v5.channel.k8s.io"]), Some(Protocol::V5));
        assert_eq!(Protocol::choose(["v4.channel.k8s.io, v5.channel.k8s.io"]), Some(Protocol::V4));
        assert_eq!(Protocol::choose(["channel.k8s.io", "v5.channel.k8s.io"]), Some(Protocol::V5));
        assert_eq!(Protocol::choose(["base64.channel.k8s.io", "v3.channel.k8s.io"]), None);
    }

    #[test]
    fn only_version_5_knows_the_close_signal() {
        assert_eq!(inbound(Protocol::V5, &[CLOSE, STDIN]), Inbound::Close(STDIN));
        assert_eq!(inbound(Protocol::V4, &[CLOSE, STDIN]), Inbound::Data { channel: CLOSE, data: &[STDIN] });
        assert_eq!(inbound(Protocol::V5, &[STDIN, b'h', b'i']), Inbound::Data { channel: STDIN, data: b"hi" });
        assert_eq!(inbound(Protocol::V5, &[CLOSE]), Inbound::Nothing);
        assert_eq!(inbound(Protocol::V5, &[]), Inbound::Nothing);
        assert_eq!(frame(STDERR, b"x"), vec![2, b'x']);
    }

    #[test]
    fn a_non_zero_exit_carries_its_code_as_client_go_reads_it() {
        let s = exited(3, &["sh".into(), "-c".into(), "exit 3".into()]);
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(s["details"]["causes"][0], json!({"reason": "ExitCode", "message": "3"}));
        assert!(s["message"].as_str().unwrap().starts_with("command terminated with non-zero exit code: "));
        assert_eq!(success(), json!({"metadata": {}, "status": "Success"}));
    }
}
