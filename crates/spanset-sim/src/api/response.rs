//! Building HTTP responses: JSON documents, `Status` errors, and streamed watch bodies.

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::Frame;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::store::error::ApiError;

/// The body type of every simulator response.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A complete body from bytes.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// A JSON document with a status code.
pub fn json(code: u16, doc: &Value) -> Response<Body> {
    json_with_type(code, doc, "application/json")
}

/// A JSON document with an explicit Content-Type (aggregated discovery needs parameters).
pub fn json_with_type(code: u16, doc: &Value, content_type: &str) -> Response<Body> {
    let body = serde_json::to_vec(doc).expect("JSON values always serialize");
    let mut resp = Response::new(full(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(content_type).unwrap_or(HeaderValue::from_static("application/json")),
    );
    resp
}

/// An already serialized JSON document.
pub fn json_bytes(code: u16, body: Vec<u8>) -> Response<Body> {
    let mut resp = Response::new(full(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// The `Status` answer for an error.
pub fn error(err: &ApiError) -> Response<Body> {
    let mut resp = json(err.code, &err.to_status());
    // As the apiserver's `ErrorNegotiated`: a Status asking for a pause says so in the header.
    if let Some(secs) = err.retry_after_seconds() {
        resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

/// A chunked streaming body fed by a channel of lines (watch).
pub fn stream(lines: mpsc::Receiver<Bytes>) -> Response<Body> {
    stream_with_type(lines, "application/json")
}

/// A chunked streaming body with an explicit Content-Type (`text/plain` for logs).
pub fn stream_with_type(lines: mpsc::Receiver<Bytes>, content_type: &'static str) -> Response<Body> {
    let frames = futures::stream::unfold(lines, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let mut resp = Response::new(StreamBody::new(frames).boxed_unsync());
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    resp
}

/// A body with an explicit Content-Type and raw bytes (OpenAPI).
pub fn raw(code: u16, content_type: &'static str, bytes: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}
