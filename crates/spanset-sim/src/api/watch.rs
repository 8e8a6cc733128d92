//! WATCH streams: start semantics (unset, 0, exact), per-watcher filtering with selector
//! transitions, bookmarks, `timeoutSeconds`, `sendInitialEvents` streaming lists, and 410 as an
//! ERROR event inside an HTTP 200 stream
//! (<https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes>).
//!
//! Each watch runs as one task that reads the storage's bounded channel and writes compact
//! one-line JSON events into the response body. A slow client backs up only its own task; once
//! its storage buffer is full the storage drops it and the stream ends.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::{sync::mpsc, time::Instant};

use crate::store::validate::FieldError;
use crate::{
    api::{list::Filter, negotiate::Output, query::Query, render},
    cluster::Cluster,
    store::{
        error::{ApiError, ApiResult},
        resources::ResourceType,
        storage::{Event, EventKind, WatchStart},
    },
};

/// Lines buffered between a watch task and the HTTP connection.
const BODY_BUFFER: usize = 64;

/// The annotation that marks the end of a streaming list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";
/// How long before a watch's deadline its last bookmark is sent (kube-apiserver's watch cache
/// sends one two seconds before).
const BOOKMARK_BEFORE_DEADLINE: Duration = Duration::from_secs(2);

struct Watch {
    cluster: Arc<Cluster>,
    rt: Arc<ResourceType>,
    version: String,
    filter: Filter,
    out: Output,
    q: Query,
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut out = serde_json::to_vec(&json!({"type": kind, "object": object})).expect("JSON values always serialize");
    out.push(b'\n');
    Bytes::from(out)
}

/// Validates a watch request and starts streaming; the receiver yields the body's lines.
pub fn start(
    cluster: &Arc<Cluster>,
    rt: Arc<ResourceType>,
    version: &str,
    ns: Option<&str>,
    q: Query,
    out: Output,
) -> ApiResult<mpsc::Receiver<Bytes>> {
    let filter = Filter::new(&rt, ns, &q)?;
    let streaming_list = q.send_initial_events == Some(true);
    if streaming_list && q.resource_version_match.as_deref() != Some("NotOlderThan") {
        let err = FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
        );
        return Err(ApiError::invalid_field("ListOptions", "meta.k8s.io", "", &err));
    }
    if streaming_list && !q.allow_watch_bookmarks {
        let err =
            FieldError::required("allowWatchBookmarks", "allowWatchBookmarks must be true if sendInitialEvents is set");
        return Err(ApiError::invalid_field("ListOptions", "meta.k8s.io", "", &err));
    }
    let start = match q.resource_version.as_deref() {
        _ if streaming_list => WatchStart::Now,
        None | Some("") | Some("0") => WatchStart::Now,
        Some(rv) => {
            WatchStart::After(rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?)
        }
    };
    let (tx, rx) = mpsc::channel(BODY_BUFFER);
    let res = rt.storage_key();
    let watch = Watch { cluster: cluster.clone(), rt, version: version.to_string(), filter, out, q };
    match cluster.storage.watch(Some(&res), start) {
        Err(expired) => {
            // A too-old resourceVersion is an ERROR event in a 200 stream, never an HTTP 410.
            let _ = tx.try_send(line("ERROR", &expired.to_status()));
        }
        Ok(sub) => {
            tokio::spawn(watch.run(sub, tx, streaming_list));
        }
    }
    Ok(rx)
}

impl Watch {
    /// The event type this watcher sees for a change, after selector transitions.
    fn visible_kind(&self, ev: &Event) -> Option<&'static str> {
        let now = self.filter.matches(&ev.object);
        let before = ev.prev.as_deref().is_some_and(|p| self.filter.matches(p));
        match (ev.kind, before, now) {
            (EventKind::Added, _, true) => Some("ADDED"),
            (EventKind::Modified, true, true) => Some("MODIFIED"),
            (EventKind::Modified, false, true) => Some("ADDED"),
            (EventKind::Modified, true, false) => Some("DELETED"),
            (EventKind::Deleted, b, n) if b || n => Some("DELETED"),
            _ => None,
        }
    }

    fn encode(&self, ev: &Event) -> Option<Bytes> {
        let kind = self.visible_kind(ev)?;
        if kind == ev.kind.as_str() && self.out == Output::Json && self.rt.versions.len() == 1 {
            return Some(ev.json_line());
        }
        Some(line(kind, &render::watch_object(&self.rt, &self.version, &ev.object, self.out, &self.q)))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let (kind, api_version) = match self.out {
            Output::Metadata => ("PartialObjectMetadata".to_string(), "meta.k8s.io/v1".to_string()),
            _ => (self.rt.kind.clone(), self.rt.api_version(&self.version)),
        };
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({INITIAL_EVENTS_END: "true"});
        }
        line("BOOKMARK", &json!({"kind": kind, "apiVersion": api_version, "metadata": meta}))
    }

    async fn run(self, mut sub: crate::store::storage::Subscription, tx: mpsc::Sender<Bytes>, streaming_list: bool) {
        let timeout =
            self.q.timeout_seconds.map(Duration::from_secs).unwrap_or(self.cluster.config.default_watch_timeout);
        let deadline = Instant::now() + timeout;
        // Every send gives up at the deadline: a client that stopped reading cannot keep the
        // watch (and its task) alive past its timeout.
        let send = |line: Bytes| {
            let tx = tx.clone();
            async move { matches!(tokio::time::timeout_at(deadline, tx.send(line)).await, Ok(Ok(()))) }
        };
        for ev in std::mem::take(&mut sub.initial) {
            if let Some(l) = self.encode(&ev)
                && !send(l).await
            {
                return;
            }
        }
        let mut last_rv = sub.start_rv;
        if streaming_list && !send(self.bookmark(last_rv, true)).await {
            return;
        }
        // As kube-apiserver's watch cache does: a bookmark every `bookmark_interval` (a minute
        // there), and one just before the deadline, so that the client resumes from a fresh
        // version whatever the interval.
        let every = self.cluster.config.bookmark_interval;
        let mut next_bookmark = Instant::now() + every;
        let mut last_call = deadline.checked_sub(BOOKMARK_BEFORE_DEADLINE).filter(|t| *t > Instant::now());
        loop {
            let bookmark_at = last_call.map_or(next_bookmark, |t| t.min(next_bookmark));
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(bookmark_at), if self.q.allow_watch_bookmarks => {
                    if last_call.is_some_and(|t| t <= bookmark_at) {
                        last_call = None;
                    }
                    // A hung network delivers nothing until it heals, bookmarks included.
                    self.cluster.faults.wait_while_hung().await;
                    next_bookmark = Instant::now() + every;
                    // Read the store's version before checking the channel: if the channel is
                    // empty afterwards, every event up to that version has been delivered.
                    let rv = self.cluster.storage.current_rv();
                    if sub.live.is_empty() {
                        last_rv = last_rv.max(rv);
                    }
                    if !send(self.bookmark(last_rv, false)).await {
                        return;
                    }
                }
                ev = sub.live.recv() => {
                    let Some(ev) = ev else { return };
                    // A hung network delivers nothing until it heals.
                    self.cluster.faults.wait_while_hung().await;
                    last_rv = ev.rv;
                    if let Some(l) = self.encode(&ev)
                        && !send(l).await
                    {
                        return;
                    }
                }
            }
        }
    }
}
