//! The pods' `log` subresource (`kubectl logs`): what the apiserver checks itself (the pod,
//! the container name) with its own wording, then what the node's kubelet answers — the lines
//! of the current or previous container instance, filtered by `tailLines`, `sinceSeconds`,
//! `sinceTime`, `limitBytes`, prefixed with `timestamps`, and followed (`follow`) until the
//! container exits.

use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use serde_json::Value;
use tokio::sync::mpsc;

use super::response::{self, Body};
use crate::{
    cluster::{
        Cluster,
        logs::{Line, Written},
    },
    store::{
        error::{ApiError, ApiResult},
        object,
    },
};

/// The parameters of a log request (`PodLogOptions`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LogOptions {
    /// `container`.
    pub container: Option<String>,
    /// `previous`: the last terminated instance.
    pub previous: bool,
    /// `follow`: keep streaming until the container exits.
    pub follow: bool,
    /// `timestamps`: prefix each line with its RFC 3339 time.
    pub timestamps: bool,
    /// `tailLines`.
    pub tail_lines: Option<usize>,
    /// `sinceSeconds`.
    pub since_seconds: Option<i64>,
    /// `sinceTime`.
    pub since_time: Option<jiff::Timestamp>,
    /// `limitBytes`.
    pub limit_bytes: Option<usize>,
}

fn flag(v: &str) -> bool {
    matches!(v, "true" | "1" | "True")
}

impl LogOptions {
    /// Parses the query string; a malformed number is a 400 as the apiserver sends it.
    pub fn parse(raw: Option<&str>) -> ApiResult<Self> {
        let mut o = LogOptions::default();
        let number = |k: &str, v: &str| -> ApiResult<i64> {
            v.parse().map_err(|_| ApiError::bad_request(format!("invalid value for {k}: {v:?} is not a valid number")))
        };
        for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match k.as_ref() {
                "container" => o.container = Some(v.into_owned()).filter(|c| !c.is_empty()),
                "previous" => o.previous = flag(&v),
                "follow" => o.follow = flag(&v),
                "timestamps" => o.timestamps = flag(&v),
                "tailLines" => o.tail_lines = Some(number("tailLines", &v)?.max(0) as usize),
                "sinceSeconds" => o.since_seconds = Some(number("sinceSeconds", &v)?),
                "limitBytes" => o.limit_bytes = Some(number("limitBytes", &v)?.max(0) as usize),
                "sinceTime" => {
                    o.since_time = Some(v.parse().map_err(|_| {
                        ApiError::bad_request(format!("invalid value for sinceTime: {v:?} is not an RFC 3339 time"))
                    })?)
                }
                _ => {}
            }
        }
        if o.since_seconds.is_some_and(|s| s < 1) {
            return Err(ApiError::custom(
                422,
                "Invalid",
                "PodLogOptions \"\" is invalid: sinceSeconds: Invalid value: must be greater than 0",
            ));
        }
        Ok(o)
    }

    fn keeps(&self, line: &Line) -> bool {
        let since =
            self.since_seconds.map(|s| jiff::Timestamp::now() - jiff::SignedDuration::from_secs(s)).or(self.since_time);
        since.is_none_or(|t| line.at >= t)
    }

    fn render(&self, line: &Line) -> String {
        if self.timestamps {
            format!("{} {}\n", line.at.strftime("%Y-%m-%dT%H:%M:%S%.9fZ"), line.text)
        } else {
            format!("{}\n", line.text)
        }
    }
}

fn container_names(pod: &Value, field: &str) -> Vec<String> {
    pod.pointer(&format!("/spec/{field}"))
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// The container a request names, checked as the apiserver's `LogLocation` (and, alike,
/// `ExecLocation`) checks it.
pub(super) fn container_of(pod: &Value, asked: Option<&str>) -> ApiResult<String> {
    let name = object::name(pod);
    let containers = container_names(pod, "containers");
    let init = container_names(pod, "initContainers");
    match asked {
        Some(c) if containers.iter().chain(&init).any(|n| n == c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!("container {c} is not valid for pod {name}"))),
        None if containers.len() == 1 => Ok(containers[0].clone()),
        None if containers.is_empty() => {
            Err(ApiError::bad_request(format!("a container name must be specified for pod {name}")))
        }
        None => {
            let mut message =
                format!("a container name must be specified for pod {name}, choose one of: [{}]", containers.join(" "));
            if !init.is_empty() {
                message.push_str(&format!(" or one of the init containers: [{}]", init.join(" ")));
            }
            Err(ApiError::bad_request(message))
        }
    }
}

/// Why a container that never started waits, as the kubelet words it for `kubectl logs`.
fn waiting_for(pod: &Value, container: &str) -> String {
    let reason = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["name"] == container))
        .and_then(|c| c.pointer("/state/waiting/reason"))
        .and_then(Value::as_str)
        .unwrap_or("ContainerCreating");
    match reason {
        "ErrImagePull" => "image can't be pulled".into(),
        "ImagePullBackOff" => "trying and failing to pull image".into(),
        other => other.to_string(),
    }
}

/// Answers `GET .../pods/NAME/log`.
pub fn serve(cluster: &Arc<Cluster>, ns: &str, name: &str, raw_query: Option<&str>) -> ApiResult<Response<Body>> {
    let opts = LogOptions::parse(raw_query)?;
    let pods = cluster.resources.by_plural("", "pods").ok_or_else(ApiError::no_route)?;
    let pod = cluster.get(&pods, ns, name)?;
    let container = container_of(&pod, opts.container.as_deref())?;
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    if node.is_empty() {
        // Not scheduled yet: the apiserver has no kubelet to ask and answers with nothing.
        return Ok(response::raw(200, "text/plain", Bytes::new()));
    }
    if cluster.faults.node_down_since(node).is_some() {
        let host = pod.pointer("/status/hostIP").and_then(Value::as_str).unwrap_or(node);
        return Err(ApiError::custom(
            500,
            "",
            format!(
                "Get \"https://{host}:10250/containerLogs/{ns}/{name}/{container}\": dial tcp {host}:10250: connect: no route to host"
            ),
        ));
    }
    let Some(log) = cluster.logs.get(object::uid(&pod), &container, opts.previous) else {
        return Err(ApiError::bad_request(if opts.previous {
            format!("previous terminated container \"{container}\" in pod \"{name}\" not found")
        } else {
            format!(
                "container \"{container}\" in pod \"{name}\" is waiting to start: {}",
                waiting_for(&pod, &container)
            )
        }));
    };
    let written = log.snapshot();
    let mut first = text_of(&opts, &written.lines);
    if let Some(limit) = opts.limit_bytes {
        first.truncate(limit);
    }
    if !opts.follow || opts.previous || written.exited || opts.limit_bytes.is_some_and(|l| first.len() >= l) {
        return Ok(response::raw(200, "text/plain", first));
    }
    let (tx, rx) = mpsc::channel(64);
    let mut follower = log.subscribe();
    let mut seen = written.lines.len();
    let mut sent = first.len();
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Bytes::from(first)).await.is_err() {
            return;
        }
        while follower.changed().await.is_ok() {
            let Written { lines, exited } = follower.borrow_and_update().clone();
            let fresh = lines.get(seen..).unwrap_or_default();
            seen = lines.len();
            let mut chunk: String = fresh.iter().map(|l| opts.render(l)).collect();
            if let Some(limit) = opts.limit_bytes {
                chunk.truncate(limit.saturating_sub(sent));
            }
            sent += chunk.len();
            if !chunk.is_empty() && tx.send(Bytes::from(chunk)).await.is_err() {
                return;
            }
            if exited || opts.limit_bytes.is_some_and(|l| sent >= l) {
                return;
            }
        }
    });
    Ok(response::stream_with_type(rx, "text/plain"))
}

/// The lines a request shows from what was written so far.
fn text_of(opts: &LogOptions, lines: &[Line]) -> String {
    let kept: Vec<&Line> = lines.iter().filter(|l| opts.keeps(l)).collect();
    let from = opts.tail_lines.map_or(0, |n| kept.len().saturating_sub(n));
    kept[from..].iter().map(|l| opts.render(l)).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_container_is_checked_with_the_apiservers_words() {
        let pod = json!({"metadata": {"name": "web-0"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "init"}]}});
        assert_eq!(container_of(&pod, Some("b")).unwrap(), "b");
        assert_eq!(container_of(&pod, Some("nope")).unwrap_err().message, "container nope is not valid for pod web-0");
        assert_eq!(
            container_of(&pod, None).unwrap_err().message,
            "a container name must be specified for pod web-0, choose one of: [a b] or one of the init containers: [init]"
        );
        let single = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "only"}]}});
        assert_eq!(container_of(&single, None).unwrap(), "only");
    }

    #[test]
    fn tail_and_timestamps_shape_the_text() {
        let at = jiff::Timestamp::from_second(1_700_000_000).unwrap();
        let lines: Vec<Line> = ["one", "two", "three"].iter().map(|t| Line { at, text: t.to_string() }).collect();
        let opts = LogOptions::parse(Some("tailLines=2&timestamps=true")).unwrap();
        assert_eq!(
            text_of(&opts, &lines),
            "2023-11-14T22:13:20.000000000Z two\n2023-11-14T22:13:20.000000000Z three\n"
        );
        assert!(LogOptions::parse(Some("sinceSeconds=0")).is_err());
        assert!(LogOptions::parse(Some("tailLines=x")).is_err());
    }
}
