//! Every HTTP request to a member, as sent (watches, lists, probes, writes and kube's retries),
//! counted by verb and status code and timed to its response headers: a member client is
//! wrapped once, in the supervisor, so the watcher's code does not change to be measured.

use std::{sync::Arc, time::Instant};

use http::{Method, Request, Response};
use kube::{Client, client::Body};

use super::metrics::Metrics;

/// `client`, recording each request of member `cluster` in `metrics`
/// (`spanset_member_http_requests_total`, `spanset_member_http_request_duration_seconds`).
/// Errors pass through unchanged, so kube's error handling sees what it would without this.
pub fn instrumented(client: Client, cluster: &str, metrics: Arc<Metrics>) -> Client {
    let namespace = client.default_namespace().to_string();
    let cluster = cluster.to_string();
    let service = tower::service_fn(move |request: Request<Body>| {
        let (client, cluster, metrics) = (client.clone(), cluster.clone(), metrics.clone());
        async move {
            let verb = verb(request.method(), request.uri().path(), request.uri().query().unwrap_or(""));
            let started = Instant::now();
            let result: Result<Response<Body>, kube::Error> = client.send(request).await;
            let code = result.as_ref().map(|r| r.status().as_u16()).ok();
            metrics.member_http_request(&cluster, verb, code, started.elapsed().as_secs_f64());
            result
        }
    });
    Client::new(service, namespace)
}

/// The Kubernetes verb of a request: `get`, `list`, `watch`, `create`, `update`, `patch`,
/// `delete` (one of [`super::metrics::HTTP_VERBS`]).
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
