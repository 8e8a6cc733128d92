//! Discovery and OpenAPI answers of the sandbox, read over raw HTTP so that headers are seen
//! exactly as kubectl's client-go sees them.

use serde_json::Value;
use spanset_sim::{cluster::ClusterConfig, sandbox::fleet::Fleet};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Answer {
    status: u16,
    content_type: String,
    etag: Option<String>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("JSON body ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

async fn get(addr: std::net::SocketAddr, path: &str, accept: &str) -> Answer {
    get_if(addr, path, accept, None).await
}

/// A GET revalidating what an HTTP cache holds (`If-None-Match`), as kubectl's cache does.
async fn get_if(addr: std::net::SocketAddr, path: &str, accept: &str, if_none_match: Option<&str>) -> Answer {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let condition = if_none_match.map(|e| format!("If-None-Match: {e}\r\n")).unwrap_or_default();
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\n{condition}Connection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.expect("request written");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("response read");
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("header end");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("status code");
    let header = |name: &str| {
        head.lines().find_map(|l| {
            l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_string())
        })
    };
    let mut body = raw[split + 4..].to_vec();
    if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        body = dechunk(&body);
    }
    Answer { status, content_type: header("content-type").unwrap_or_default(), etag: header("etag"), body }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(std::str::from_utf8(&data[..eol]).unwrap_or("0").trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[eol + 2..eol + 2 + size]);
        data = &data[eol + 2 + size + 2..];
    }
}

const KUBECTL_127: &str = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
const KUBECTL_133: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

async fn fleet() -> Fleet {
    Fleet::start(vec![ClusterConfig::named("a")], None).await.expect("sandbox starts")
}

#[tokio::test]
async fn aggregated_discovery_answers_the_version_offered_first_with_its_content_type() {
    let f = fleet().await;
    let addr = f.servers[0].addr;

    let core = get(addr, "/api?timeout=32s", KUBECTL_127).await;
    assert_eq!(core.status, 200);
    assert_eq!(core.content_type, "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList");
    let doc = core.json();
    assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    assert_eq!(doc["items"][0]["metadata"]["name"], "");
    let pods = doc["items"][0]["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "pods")
        .cloned()
        .unwrap();
    assert_eq!(pods["shortNames"][0], "po");
    assert_eq!(pods["scope"], "Namespaced");

    let apis = get(addr, "/apis", KUBECTL_133).await;
    assert_eq!(apis.content_type, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
    let doc = apis.json();
    assert_eq!(doc["kind"], "APIGroupDiscoveryList");
    let apps =
        doc["items"].as_array().unwrap().iter().find(|g| g["metadata"]["name"] == "apps").cloned().expect("apps group");
    let sts = apps["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "statefulsets")
        .cloned()
        .unwrap();
    assert_eq!(sts["shortNames"][0], "sts");
    assert_eq!(sts["categories"][0], "all");
    let scale = sts["subresources"].as_array().unwrap().iter().find(|s| s["subresource"] == "scale").cloned().unwrap();
    assert_eq!(scale["responseKind"]["group"], "autoscaling");
    assert_eq!(scale["responseKind"]["kind"], "Scale");
}

#[tokio::test]
async fn legacy_discovery_lists_groups_and_subresources() {
    let f = fleet().await;
    let addr = f.servers[0].addr;
    let api = get(addr, "/api", "application/json, */*").await;
    assert_eq!(api.content_type, "application/json");
    assert_eq!(api.json()["versions"][0], "v1");

    let groups = get(addr, "/apis", "application/json").await.json();
    let names: Vec<&str> = groups["groups"].as_array().unwrap().iter().filter_map(|g| g["name"].as_str()).collect();
    for g in ["apps", "coordination.k8s.io", "storage.k8s.io", "apiextensions.k8s.io"] {
        assert!(names.contains(&g), "{g} in {names:?}");
    }

    let apps = get(addr, "/apis/apps/v1", "application/json, */*").await.json();
    assert_eq!(apps["groupVersion"], "apps/v1");
    let scale =
        apps["resources"].as_array().unwrap().iter().find(|r| r["name"] == "statefulsets/scale").cloned().unwrap();
    assert_eq!(
        (scale["group"].as_str(), scale["version"].as_str(), scale["kind"].as_str()),
        (Some("autoscaling"), Some("v1"), Some("Scale"))
    );
    assert!(apps["resources"].as_array().unwrap().iter().any(|r| r["name"] == "statefulsets/status"));

    assert_eq!(get(addr, "/apis/nope.example.com/v1", "application/json").await.status, 404);
}

#[tokio::test]
async fn openapi_v2_is_an_empty_protobuf_document_and_version_is_served() {
    let f = fleet().await;
    let addr = f.servers[0].addr;
    let v2 = get(addr, "/openapi/v2?timeout=32s", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf").await;
    assert_eq!(v2.status, 200);
    assert!(v2.body.is_empty());
    // The `@` form must not be echoed: Go's MIME parser rejects it.
    assert_eq!(v2.content_type, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");

    let version = get(addr, "/version", "application/json").await.json();
    assert_eq!((version["major"].as_str(), version["minor"].as_str()), (Some("1"), Some("33")));
    assert_eq!(version["gitVersion"], "v1.33.1");
}

#[tokio::test]
async fn a_new_crd_is_discoverable_in_both_forms() {
    let f = fleet().await;
    let cluster = f.servers[0].cluster.clone();
    let crds = cluster.resources.by_plural("apiextensions.k8s.io", "customresourcedefinitions").unwrap();
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wg"]},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    });
    let stored = cluster.create(&crds, None, crd, &Default::default()).expect("CRD accepted");
    let established = stored["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    assert!(established);
    let addr = f.servers[0].addr;
    let legacy = get(addr, "/apis/example.com/v1", "application/json").await.json();
    let widgets = legacy["resources"].as_array().unwrap().iter().find(|r| r["name"] == "widgets").cloned().unwrap();
    assert_eq!((widgets["namespaced"].as_bool(), widgets["shortNames"][0].as_str()), (Some(false), Some("wg")));
    let agg = get(addr, "/apis", KUBECTL_133).await.json();
    assert!(agg["items"].as_array().unwrap().iter().any(|g| g["metadata"]["name"] == "example.com"));
    let list = get(addr, "/apis/example.com/v1/widgets", "application/json").await;
    assert_eq!((list.status, list.json()["kind"].as_str()), (200, Some("WidgetList")));
}

/// Aggregated discovery carries an ETag that changes with what it lists (and a revalidation
/// with the current one is answered 304), so a cached copy taken before a CRD is never
/// mistaken for the current one; the new type is listed by the time the CRD says Established.
#[tokio::test]
async fn discovery_etags_change_when_a_crd_is_served() {
    let f = fleet().await;
    let cluster = f.servers[0].cluster.clone();
    let addr = f.servers[0].addr;
    let mut tags = Vec::new();
    for accept in [KUBECTL_133, KUBECTL_127] {
        let before = get(addr, "/apis", accept).await;
        let etag = before.etag.clone().expect("aggregated discovery has an ETag");
        let cached = get_if(addr, "/apis", accept, Some(&etag)).await;
        assert_eq!((cached.status, cached.body.len()), (304, 0), "unchanged: not modified");
        let core = get(addr, "/api", accept).await.etag.expect("core discovery has an ETag");
        tags.push((accept, etag, core));
    }
    let crds = cluster.resources.by_plural("apiextensions.k8s.io", "customresourcedefinitions").unwrap();
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "shortNames": ["gz"]},
                 "versions": [{"name": "v1", "served": true, "storage": true}]},
    });
    let stored = cluster.create(&crds, None, crd, &Default::default()).expect("CRD accepted");
    let established = |c: &Value| c["type"] == "Established" && c["status"] == "True";
    assert!(stored["status"]["conditions"].as_array().unwrap().iter().any(established));
    for (accept, etag, core) in tags {
        let after = get_if(addr, "/apis", accept, Some(&etag)).await;
        assert_eq!(after.status, 200, "{accept}: changed since the cached copy");
        assert!(after.etag.as_ref().is_some_and(|e| *e != etag), "{accept}: a new ETag");
        let groups = after.json();
        assert!(groups["items"].as_array().unwrap().iter().any(|g| g["metadata"]["name"] == "example.com"));
        let unchanged = get_if(addr, "/api", accept, Some(&core)).await;
        assert_eq!(unchanged.status, 304, "{accept}: the core group did not change");
    }
}

/// A new CRD's type is served before the CRD (which says Established) is stored: a write that
/// holds the store sees the type served while the CRD's create waits for the store.
#[test]
fn a_crd_type_is_served_before_the_crd_is_stored() {
    use spanset_sim::{cluster::Cluster, store::registry::Subresource};
    let cluster = std::sync::Arc::new(Cluster::new(ClusterConfig::named("a")));
    let namespaces = cluster.resources.by_plural("", "namespaces").unwrap();
    let (holding, held) = std::sync::mpsc::channel();
    let creator = {
        let cluster = cluster.clone();
        std::thread::spawn(move || {
            held.recv().unwrap();
            let crds = cluster.resources.by_plural("apiextensions.k8s.io", "customresourcedefinitions").unwrap();
            let crd = serde_json::json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "gizmos.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced",
                         "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                         "versions": [{"name": "v1", "served": true, "storage": true}]},
            });
            cluster.create(&crds, None, crd, &Default::default()).expect("CRD accepted")
        })
    };
    let mut served_first = false;
    // The closure runs under the store's lock: the CRD cannot be stored meanwhile.
    cluster
        .update_with(&namespaces, "", "default", Subresource::Main, &Default::default(), |current| {
            holding.send(()).unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while std::time::Instant::now() < deadline && !served_first {
                served_first = cluster.resources.lookup("example.com", "v1", "gizmos").is_some();
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok(current.clone())
        })
        .unwrap();
    let stored = creator.join().unwrap();
    assert!(served_first, "gizmos served while its CRD waited to be stored");
    let established = |c: &Value| c["type"] == "Established" && c["status"] == "True";
    assert!(stored["status"]["conditions"].as_array().unwrap().iter().any(established));
}
