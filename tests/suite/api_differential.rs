//! The sandbox's wire protocol held to a real kube-apiserver of the same release: one table of
//! requests — the refusals a client classifies by their `Status` (not found, already exists,
//! conflict, invalid, bad request, expired), the server-side apply conflict, preconditions,
//! selectors, pagination, dry runs and a watch from the first resourceVersion (history replayed) — sent by the
//! same kube client to both, and their answers compared: the code, the `Status`'s reason,
//! message, details and causes, and the shape of what succeeds. kube-rs sorts an error by its
//! reason first and its code second, and users read the messages, so each must agree.

use std::time::Duration;

use crate::support;

use http::{Method, Request};
use http_body_util::BodyExt;
use kube::{Client, client::Body};
use serde_json::{Value, json};
use support::{Sandbox, federation::client_for};

/// How long a watch may take to say its first event.
const FIRST_EVENT: Duration = Duration::from_secs(60);

/// One request of the table.
struct Probe {
    what: &'static str,
    method: Method,
    path: &'static str,
    content_type: &'static str,
    body: Option<Value>,
    /// A difference `docs/sandbox.md` lists, with why it cannot matter to spanset: the answers
    /// must still differ, so that the list is emptied when the sandbox learns it.
    listed: bool,
}

fn probe(what: &'static str, method: Method, path: &'static str, body: Option<Value>) -> Probe {
    Probe { what, method, path, content_type: "application/json", body, listed: false }
}

fn patch(what: &'static str, path: &'static str, content_type: &'static str, body: Value) -> Probe {
    Probe { what, method: Method::PATCH, path, content_type, body: Some(body), listed: false }
}

/// A probe whose difference is listed in `docs/sandbox.md`.
fn listed(p: Probe) -> Probe {
    Probe { listed: true, ..p }
}

const NS: &str = "/api/v1/namespaces/diff";

fn config_map(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "diff"}, "data": {"k": value}})
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "diff"}, "data": {}})
}

fn stateful_set(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": "diff"},
        "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}})
}

/// What each side is given first; every one must succeed on both.
fn setup() -> Vec<Probe> {
    vec![
        probe(
            "the namespace",
            Method::POST,
            "/api/v1/namespaces",
            Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "diff"}})),
        ),
        probe(
            "a ConfigMap",
            Method::POST,
            "/api/v1/namespaces/diff/configmaps?fieldManager=creator",
            Some(config_map("cm", "v")),
        ),
        probe("a Secret", Method::POST, "/api/v1/namespaces/diff/secrets", Some(secret("s1"))),
        probe("another Secret", Method::POST, "/api/v1/namespaces/diff/secrets", Some(secret("s2"))),
        probe(
            "a StatefulSet of none",
            Method::POST,
            "/apis/apps/v1/namespaces/diff/statefulsets",
            Some(stateful_set("web", 0)),
        ),
    ]
}

/// The table: each answer compared between the two.
fn probes() -> Vec<Probe> {
    let mut stale = config_map("cm", "w");
    stale["metadata"]["resourceVersion"] = json!("1");
    let mut renamed = config_map("other", "w");
    renamed["metadata"]["resourceVersion"] = json!("1");
    let apply = |value: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "diff"}, "data": {"k": value}});
    vec![
        probe("a missing StatefulSet", Method::GET, "/apis/apps/v1/namespaces/diff/statefulsets/nope", None),
        probe("a missing pod", Method::GET, "/api/v1/namespaces/diff/pods/nope", None),
        probe("a missing namespace", Method::POST, "/api/v1/namespaces/nope/configmaps", Some(config_map("x", "v"))),
        probe(
            "a ConfigMap created twice",
            Method::POST,
            "/api/v1/namespaces/diff/configmaps",
            Some(config_map("cm", "v")),
        ),
        probe(
            "a write from a stale resourceVersion",
            Method::PUT,
            "/api/v1/namespaces/diff/configmaps/cm",
            Some(stale),
        ),
        probe("a body named other than its URL", Method::PUT, "/api/v1/namespaces/diff/configmaps/cm", Some(renamed)),
        probe(
            "an invalid StatefulSet",
            Method::POST,
            "/apis/apps/v1/namespaces/diff/statefulsets",
            Some(stateful_set("bad", -1)),
        ),
        patch(
            "a negative scale",
            "/apis/apps/v1/namespaces/diff/statefulsets/web/scale",
            "application/merge-patch+json",
            json!({"spec": {"replicas": -1}}),
        ),
        patch(
            "the scale of a missing StatefulSet",
            "/apis/apps/v1/namespaces/diff/statefulsets/nope/scale",
            "application/merge-patch+json",
            json!({"spec": {"replicas": 1}}),
        ),
        probe(
            "a delete whose uid precondition fails",
            Method::DELETE,
            "/api/v1/namespaces/diff/configmaps/cm",
            Some(json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
        ),
        probe(
            "a delete whose resourceVersion precondition fails",
            Method::DELETE,
            "/api/v1/namespaces/diff/configmaps/cm",
            Some(json!({"preconditions": {"resourceVersion": "1"}})),
        ),
        patch(
            "an apply without a field manager",
            "/api/v1/namespaces/diff/configmaps/cm",
            "application/apply-patch+yaml",
            apply("w"),
        ),
        // The sandbox does not track field managers: an apply never conflicts there.
        listed(patch(
            "an apply that conflicts with another manager",
            "/api/v1/namespaces/diff/configmaps/cm?fieldManager=other",
            "application/apply-patch+yaml",
            apply("w"),
        )),
        patch(
            "an apply of the value already there",
            "/api/v1/namespaces/diff/configmaps/cm?fieldManager=other",
            "application/apply-patch+yaml",
            apply("v"),
        ),
        probe(
            "an unparsable label selector",
            Method::GET,
            "/api/v1/namespaces/diff/configmaps?labelSelector=a%20in%20(",
            None,
        ),
        probe(
            "a field selector on a field pods do not index",
            Method::GET,
            "/api/v1/namespaces/diff/pods?fieldSelector=spec.foo%3Dbar",
            None,
        ),
        probe("a first page of one", Method::GET, "/api/v1/namespaces/diff/secrets?limit=1", None),
        // The same code and reason; the apiserver's message is its decoder's error.
        listed(probe(
            "a continue token that is not one",
            Method::GET,
            "/api/v1/namespaces/diff/secrets?limit=1&continue=garbage",
            None,
        )),
        probe(
            "a resourceVersionMatch without a resourceVersion",
            Method::GET,
            "/api/v1/namespaces/diff/configmaps?resourceVersionMatch=NotOlderThan",
            None,
        ),
        probe(
            "a dry-run create",
            Method::POST,
            "/api/v1/namespaces/diff/configmaps?dryRun=All",
            Some(config_map("dry", "v")),
        ),
        probe("what the dry run did not store", Method::GET, "/api/v1/namespaces/diff/configmaps/dry", None),
        probe(
            "an unknown dryRun value",
            Method::POST,
            "/api/v1/namespaces/diff/configmaps?dryRun=Some",
            Some(config_map("dry", "v")),
        ),
        probe("an unknown resource of a known group", Method::GET, "/api/v1/namespaces/diff/widgets", None),
        probe(
            "a watch from the first resourceVersion (history replayed)",
            Method::GET,
            "/api/v1/namespaces/diff/configmaps?watch=true&resourceVersion=1&fieldSelector=metadata.name%3Dcm",
            None,
        ),
    ]
}

/// Sends one request; its answer as compared (see [`shape`]).
async fn send(client: &Client, p: &Probe, uid: &str) -> Value {
    let body = p.body.as_ref().map(|b| serde_json::to_vec(b).expect("JSON")).unwrap_or_default();
    let request = Request::builder()
        .method(p.method.clone())
        .uri(p.path)
        .header(http::header::CONTENT_TYPE, p.content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(Body::from(body))
        .expect("a request");
    let response = client.send(request).await.unwrap_or_else(|e| panic!("{}: {e}", p.what));
    let code = response.status().as_u16();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    if p.path.contains("watch=true") {
        // A watch answers 200 and streams: its first event is what is compared.
        let first = async {
            while !bytes.contains(&b'\n') {
                match body.frame().await {
                    Some(Ok(f)) => bytes.extend_from_slice(f.data_ref().map(|d| d.as_ref()).unwrap_or_default()),
                    _ => break,
                }
            }
        };
        let _ = tokio::time::timeout(FIRST_EVENT, first).await;
        let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
        let event: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
        return json!({"code": code, "event": event["type"], "object": shape(0, &event["object"], uid)});
    }
    let collected = body.collect().await.unwrap_or_else(|e| panic!("{}: the body: {e}", p.what));
    bytes.extend_from_slice(&collected.to_bytes());
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => shape(code, &v, uid),
        Err(_) => json!({"code": code, "text": String::from_utf8_lossy(&bytes).trim()}),
    }
}

/// What is compared of an answer: a `Status` whole but for what is the cluster's own (uids,
/// resourceVersions), a list by its kind, its count and whether it goes on, an object by its
/// kind and name.
fn shape(code: u16, v: &Value, uid: &str) -> Value {
    let plain = |s: &Value| s.as_str().map(|s| normalised(s, uid)).map(Value::String).unwrap_or(Value::Null);
    if v["kind"] == "Status" {
        let mut causes: Vec<Value> = v["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| json!({"reason": c["reason"], "message": plain(&c["message"]), "field": c["field"]}))
            .collect();
        causes.sort_by_key(|c| c.to_string());
        return json!({"code": code, "status": v["status"], "reason": v["reason"], "message": plain(&v["message"]),
            "statusCode": v["code"], "details": {"name": v["details"]["name"], "group": v["details"]["group"],
            "kind": v["details"]["kind"], "causes": causes}});
    }
    if let Some(items) = v["items"].as_array() {
        return json!({"code": code, "kind": v["kind"], "items": items.len(),
            "continues": v["metadata"]["continue"].as_str().is_some_and(|c| !c.is_empty()),
            "remainingItemCount": v["metadata"]["remainingItemCount"]});
    }
    json!({"code": code, "kind": v["kind"], "name": v["metadata"]["name"], "data": v["data"]})
}

/// A message with the cluster's own values put to words: the ConfigMap's uid, the
/// resourceVersion a record has, and numbers of four digits or more (resourceVersions).
fn normalised(message: &str, uid: &str) -> String {
    let numbers = regex::Regex::new(r"\b\d{4,}\b").expect("a regex");
    let in_record = regex::Regex::new(r"ResourceVersion in record \(\d+\)").expect("a regex");
    let m = message.replace(uid, "<uid>");
    let m = in_record.replace_all(&m, "ResourceVersion in record (<rv>)");
    numbers.replace_all(&m, "<n>").into_owned()
}

/// Sets up both sides, sends the table to each, and lists every answer that differs.
async fn differences(real: &Client, sandbox: &Client) -> Vec<String> {
    let mut uids = vec![];
    for client in [real, sandbox] {
        for p in setup() {
            let answer = send(client, &p, "").await;
            assert!(answer["code"].as_u64().is_some_and(|c| c < 300), "setting up {}: {answer}", p.what);
        }
        let cm = send(client, &probe("", Method::GET, "/api/v1/namespaces/diff/configmaps/cm", None), "").await;
        assert_eq!(cm["name"], "cm");
        let raw = client
            .request::<Value>(Request::get(format!("{NS}/configmaps/cm")).body(vec![]).expect("a request"))
            .await
            .expect("the ConfigMap");
        uids.push(raw["metadata"]["uid"].as_str().expect("a uid").to_string());
    }
    let mut differences = vec![];
    for p in probes() {
        let r = send(real, &p, &uids[0]).await;
        let s = send(sandbox, &p, &uids[1]).await;
        if p.listed && r == s {
            differences.push(format!("{}: listed as a difference, but both now answer {r}", p.what));
        } else if !p.listed && r != s {
            differences.push(format!("{}:\n  real:    {r}\n  sandbox: {s}", p.what));
        }
    }
    differences
}

async fn the_sandbox_answers_as_a_real_apiserver(release: &str) {
    let Some(binaries) = support::real_kube::binaries(release) else { return };
    let dir = tempfile::tempdir().expect("a scratch directory");
    let options = spanset_control_plane::ClusterOptions::named("host", 1);
    let cluster =
        spanset_control_plane::RealCluster::start(&binaries, &options, dir.path()).await.expect("a real cluster");
    let real = cluster.client().await.expect("a client");
    let sandbox = Sandbox::start_with("host", &["--cluster-version", &format!("host={release}.0")]);
    let simulated = client_for(&sandbox.kubeconfig, "host").await;
    let found = differences(&real, &simulated).await;
    assert!(found.is_empty(), "{release}: {} differences:\n{}", found.len(), found.join("\n"));
}

/// The table on the oldest release built.
#[tokio::test(flavor = "multi_thread")]
async fn the_sandbox_as_1_34_answers_the_protocol_table_as_a_real_1_34_apiserver() {
    the_sandbox_answers_as_a_real_apiserver(support::real_kube::OLDEST).await;
}

/// The table on the newest release built.
#[tokio::test(flavor = "multi_thread")]
async fn the_sandbox_as_1_37_answers_the_protocol_table_as_a_real_1_37_apiserver() {
    the_sandbox_answers_as_a_real_apiserver(support::real_kube::NEWEST).await;
}
