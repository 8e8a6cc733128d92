//! A small client of etcd's v3 HTTP/JSON gateway (`POST /v3/kv/put`, `/v3/kv/range`) over a
//! raw HTTP/1.1 connection: one connection per request, so that what a test records of each
//! operation is exactly when it was sent and when its answer came, and whether it was sent at
//! all (a refused connection sent nothing, so the operation certainly did not happen).

use std::{net::Ipv4Addr, time::Duration};

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What became of one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// etcd answered 200 with this body.
    Ok(Value),
    /// Nothing was sent: the connection was refused (no server listens at the address).
    NotSent,
    /// It was sent and no success came back (an error status, a timeout, a cut connection):
    /// a write may or may not have happened.
    Unknown(String),
}

/// Sends `body` to `path` of the member at `ip` (client port 2379), within `timeout`.
pub async fn call(ip: Ipv4Addr, path: &str, body: &Value, timeout: Duration) -> Outcome {
    let connect = tokio::time::timeout(timeout, tokio::net::TcpStream::connect((ip, 2379))).await;
    let mut stream = match connect {
        Ok(Ok(s)) => s,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Outcome::NotSent,
        // Not connected: nothing was sent either.
        Ok(Err(_)) | Err(_) => return Outcome::NotSent,
    };
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {ip}:2379\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => return Outcome::Unknown(format!("{path} to {ip}: {e}")),
        Err(_) => return Outcome::Unknown(format!("{path} to {ip}: no answer in {timeout:?}")),
    };
    let text = String::from_utf8_lossy(&answer);
    let Some((head, rest)) = text.split_once("\r\n\r\n") else {
        return Outcome::Unknown(format!("{path} to {ip}: a truncated answer {text:?}"));
    };
    let chunked = head.lines().any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding: chunked"));
    let payload = if chunked { dechunk(rest) } else { rest.to_string() };
    let status = head.split_whitespace().nth(1).unwrap_or("");
    match (status, serde_json::from_str::<Value>(&payload)) {
        ("200", Ok(v)) => Outcome::Ok(v),
        _ => Outcome::Unknown(format!("{path} to {ip}: {status} {payload}")),
    }
}

/// The body of a chunked transfer.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || after.len() < n {
            break;
        }
        out += &after[..n];
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// `put key value`.
pub async fn put(ip: Ipv4Addr, key: &str, value: &str, timeout: Duration) -> Outcome {
    let body = json!({"key": STANDARD.encode(key), "value": STANDARD.encode(value)});
    call(ip, "/v3/kv/put", &body, timeout).await
}

/// A linearizable `get key`.
pub async fn get(ip: Ipv4Addr, key: &str, timeout: Duration) -> Outcome {
    call(ip, "/v3/kv/range", &json!({"key": STANDARD.encode(key)}), timeout).await
}

/// The value a range answer holds (`None`: the key does not exist); an error names what in
/// the answer is not what etcd sends.
pub fn value_of(range: &Value) -> Result<Option<String>, String> {
    let Some(kv) = range.get("kvs").and_then(Value::as_array).and_then(|kvs| kvs.first()) else { return Ok(None) };
    let encoded = kv.get("value").and_then(Value::as_str).unwrap_or("");
    let bytes = STANDARD.decode(encoded).map_err(|e| format!("kvs[0].value {encoded:?}: {e}"))?;
    String::from_utf8(bytes).map(Some).map_err(|e| format!("kvs[0].value: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_is_joined() {
        assert_eq!(dechunk("4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n"), "{\"a\":1}");
    }

    #[test]
    fn a_range_answer_reads_as_its_value() {
        let v = json!({"kvs": [{"key": STANDARD.encode("k"), "value": STANDARD.encode("42")}]});
        assert_eq!(value_of(&v), Ok(Some("42".into())));
        assert_eq!(value_of(&json!({"header": {}})), Ok(None));
    }
}
