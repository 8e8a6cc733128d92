//! Every HTTP request to a member, as sent (watches, lists, probes, writes and kube's retries),
//! counted by verb and status code and timed to its response headers, and given a deadline: a
//! member client is wrapped once, in the supervisor, so the watcher's code does not change to
//! be measured or bounded.
//!
//! Deadlines (kube's client has none for a response by default, so a member that accepts a
//! connection and never answers held a request, and the reconcile waiting on it, forever):
//! every request but a watch must be answered in full within [`REQUEST_TIMEOUT`]; a watch must
//! be opened (response headers) within it, and then lasts as long as the member keeps it
//! (kube's watcher has its own idle timeout). A request past its deadline fails with an error
//! that says so, which the watcher counts as a `Timeout` failure of the member.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use http::{Method, Request, Response};
use kube::{Client, client::Body};

use crate::telemetry::metrics::Metrics;

/// How long a member has to answer one request (a watch: to open it). Above the probe's own
/// timeout, so that a slow but live member is not cut off; far below the time after which a
/// member counts as unreachable plus a round, so that a hung one delays a reconcile by this
/// much at most.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// `client`, recording each request of member `cluster` in `metrics`
/// (`spanset_member_http_requests_total`, `spanset_member_http_request_duration_seconds`).
/// Errors pass through unchanged, so kube's error handling sees what it would without this.
pub fn instrumented(client: Client, cluster: &str, metrics: Arc<Metrics>) -> Client {
    bounded(client, cluster, metrics, REQUEST_TIMEOUT)
}

/// Like [`instrumented`], with the deadline `timeout` (see the module's doc).
pub fn bounded(client: Client, cluster: &str, metrics: Arc<Metrics>, timeout: Duration) -> Client {
    let namespace = client.default_namespace().to_string();
    let cluster = cluster.to_string();
    let service = tower::service_fn(move |request: Request<Body>| {
        let (client, cluster, metrics) = (client.clone(), cluster.clone(), metrics.clone());
        async move {
            let verb = verb(request.method(), request.uri().path(), request.uri().query().unwrap_or(""));
            let started = Instant::now();
            let sent = client.send(request);
            let result = if verb == "watch" {
                tokio::time::timeout(timeout, sent).await
            } else {
                // The whole body within the deadline: a member may hang after the headers too.
                tokio::time::timeout(timeout, async move {
                    let (parts, body) = sent.await?.into_parts();
                    let bytes = body.collect_bytes().await?;
                    Ok(Response::from_parts(parts, Body::from(bytes)))
                })
                .await
            };
            let result: Result<Response<Body>, kube::Error> = result.unwrap_or_else(|_| {
                Err(kube::Error::Service(
                    format!(
                        "member {cluster} gave no answer to a {verb} request within {}s (timed out)",
                        timeout.as_secs()
                    )
                    .into(),
                ))
            });
            let code = result.as_ref().map(|r| r.status().as_u16()).ok();
            metrics.member_http_request(&cluster, verb, code, started.elapsed().as_secs_f64());
            result
        }
    });
    Client::new(service, namespace)
}

/// The Kubernetes verb of a request: `get`, `list`, `watch`, `create`, `update`, `patch`,
/// `delete` (one of [`crate::telemetry::metrics::HTTP_VERBS`]).
pub fn verb(method: &Method, path: &str, query: &str) -> &'static str {
    match *method {
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        Method::GET if query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1") => "watch",
        Method::GET if is_collection(path) => "list",
        _ => "get",
    }
}

/// Whether `path` names a collection (`/api/v1/namespaces/ns/pods`) rather than one object
/// (`…/pods/name`) or a non-resource path (`/version`).
fn is_collection(path: &str) -> bool {
    let segs: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segs.first() {
        Some(&"api") if segs.len() >= 2 => &segs[2..],
        Some(&"apis") if segs.len() >= 3 => &segs[3..],
        _ => return false,
    };
    let rest = if rest.len() >= 3 && rest[0] == "namespaces" { &rest[2..] } else { rest };
    rest.len() == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client whose member accepts every request and never answers.
    fn hung() -> Client {
        let service =
            tower::service_fn(|_: Request<Body>| std::future::pending::<Result<Response<Body>, kube::Error>>());
        Client::new(service, "default")
    }

    #[tokio::test]
    async fn a_member_that_never_answers_fails_the_request_at_its_deadline_as_a_timeout() {
        let metrics = Arc::new(Metrics::new());
        let client = bounded(hung(), "central", metrics.clone(), Duration::from_millis(20));
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "default");
        let e = pods.get("redis-0").await.expect_err("no answer");
        assert!(e.to_string().contains("member central gave no answer to a get request within"), "{e}");
        assert_eq!(crate::member::health::Failure::of(&e), crate::member::health::Failure::Timeout);
        assert!(
            metrics
                .render()
                .contains(r#"spanset_member_http_requests_total{cluster="central",code="error",verb="get"} 1"#),
            "counted as a request without an answer"
        );
    }

    #[test]
    fn requests_are_named_by_their_kubernetes_verb() {
        let get = Method::GET;
        assert_eq!(verb(&get, "/apis/apps/v1/namespaces/default/statefulsets", "labelSelector=x"), "list");
        assert_eq!(
            verb(&get, "/apis/apps/v1/namespaces/default/statefulsets", "watch=true&resourceVersion=5"),
            "watch"
        );
        assert_eq!(verb(&get, "/apis/apps/v1/namespaces/default/statefulsets/redis", ""), "get");
        assert_eq!(verb(&get, "/api/v1/namespaces", ""), "list");
        assert_eq!(verb(&get, "/api/v1/namespaces/default", ""), "get");
        assert_eq!(verb(&get, "/api/v1/pods", ""), "list");
        assert_eq!(verb(&get, "/version", ""), "get");
        assert_eq!(verb(&Method::PUT, "/apis/apps/v1/namespaces/d/statefulsets/r", ""), "update");
        assert_eq!(verb(&Method::POST, "/api/v1/namespaces/d/services", "dryRun=All"), "create");
    }
}
