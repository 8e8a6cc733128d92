//! The real kube-rs client against the sandbox: CRUD and every error kind, status and scale
//! subresources, watchers (pages, 410 relists, bookmarks, streaming lists), a kube Controller,
//! garbage collection, bad input, and many watchers at once.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{ConfigMap, Pod},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy, WatchEvent, WatchParams},
    runtime::{
        Controller, WatchStreamExt,
        controller::Action,
        reflector,
        watcher::{self, Event},
    },
};
use serde_json::{Value, json};
use spanset_sim::{cluster::ClusterConfig, sandbox::fleet::Fleet, store::storage::StorageLimits};
use support::eventually;

use crate::support;

async fn sandbox(config: ClusterConfig) -> (Fleet, Client) {
    let fleet = Fleet::start(vec![config], None).await.expect("sandbox starts");
    let client = Client::try_from(kube::Config::new(fleet.servers[0].url().parse().unwrap())).expect("client");
    (fleet, client)
}

fn fast() -> ClusterConfig {
    ClusterConfig { time_factor: 0.01, ..ClusterConfig::named("a") }
}

/// A cluster with no worker nodes: pods stay Pending, nothing changes behind the test's back.
fn quiet() -> ClusterConfig {
    ClusterConfig { nodes: 0, ..fast() }
}

fn sts(name: &str, replicas: i32) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}},
    }))
    .unwrap()
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": "x"}}, "data": {"k": "v"}})).unwrap()
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn crud_and_every_error_kind_look_like_a_real_apiserver() {
    let (_f, client) = sandbox(quiet()).await;
    let api: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let created = api.create(&PostParams::default(), &sts("web", 2)).await.unwrap();
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"), "namespace defaulted");
    assert_eq!(created.metadata.generation, Some(1));
    let first_rv: u64 = created.resource_version().unwrap().parse().unwrap();

    let dup = api_error(api.create(&PostParams::default(), &sts("web", 2)).await.unwrap_err());
    assert!(dup.is_already_exists() && dup.code == 409, "{dup:?}");
    let missing = api_error(api.get("nope").await.unwrap_err());
    assert!(missing.is_not_found());
    assert_eq!(missing.message, r#"statefulsets.apps "nope" not found"#);

    // Optimistic concurrency: a stale resourceVersion conflicts, the current one succeeds.
    let mut stale = created.clone();
    api.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}}))).await.unwrap();
    stale.spec.as_mut().unwrap().replicas = Some(5);
    let conflict = api_error(api.replace("web", &PostParams::default(), &stale).await.unwrap_err());
    assert!(conflict.is_conflict(), "{conflict:?}");
    let current = api.get("web").await.unwrap();
    assert_eq!(current.spec.as_ref().unwrap().replicas, Some(3));
    assert_eq!(current.metadata.generation, Some(2), "a spec change bumps generation");
    assert!(current.resource_version().unwrap().parse::<u64>().unwrap() > first_rv);

    // Apply needs a field manager; invalid names and negative replicas are 422.
    let no_manager = api_error(
        api.patch(
            "web",
            &PatchParams::default(),
            &Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "StatefulSet"})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(no_manager.code, 422);
    assert!(no_manager.message.contains("fieldManager: Required value"), "{no_manager:?}");
    let bad_name = api_error(api.create(&PostParams::default(), &sts("Bad_Name", 1)).await.unwrap_err());
    assert!(bad_name.is_invalid() && bad_name.message.contains("RFC 1123"), "{bad_name:?}");
    let negative = api_error(
        api.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": -1}}))).await.unwrap_err(),
    );
    assert_eq!(
        negative.message,
        r#"StatefulSet.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#
    );
    let immutable = api_error(
        api.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"serviceName": "x"}})))
            .await
            .unwrap_err(),
    );
    assert!(
        immutable.is_invalid() && immutable.message.contains("spec: Forbidden: updates to statefulset spec"),
        "{immutable:?}"
    );

    // Server-side apply creates when absent.
    let applied = api
        .patch("applied", &PatchParams::apply("test"), &Patch::Apply(serde_json::to_value(sts("applied", 1)).unwrap()))
        .await
        .unwrap();
    assert_eq!(applied.name_any(), "applied");

    // A missing namespace is 404 on create.
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "nowhere");
    let no_ns = api_error(elsewhere.create(&PostParams::default(), &cm("c")).await.unwrap_err());
    assert_eq!((no_ns.code, no_ns.message.as_str()), (404, r#"namespaces "nowhere" not found"#));

    // delete returns the object (pods) or a Status (others).
    let deleted = api.delete("applied", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_right(), "a StatefulSet delete answers with a Status");
    assert!(api_error(api.get("applied").await.unwrap_err()).is_not_found());
}

#[tokio::test]
async fn status_and_scale_subresources_split_spec_from_status() {
    let (_f, client) = sandbox(quiet()).await;
    let api: Api<StatefulSet> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &sts("web", 2)).await.unwrap();
    // The main endpoint ignores status; /status changes only status.
    let ignored =
        api.patch("web", &PatchParams::default(), &Patch::Merge(json!({"status": {"replicas": 9}}))).await.unwrap();
    assert_ne!(ignored.status.as_ref().map(|s| s.replicas), Some(9));
    let st = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 7}, "status": {"replicas": 9, "readyReplicas": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(st.status.as_ref().unwrap().replicas, 9);
    assert_eq!(st.spec.as_ref().unwrap().replicas, Some(2), "/status cannot change spec");
    assert_eq!(st.metadata.generation, Some(1), "status writes do not bump generation");
    // Scale reads and writes replicas.
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    api.patch_scale("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 4}}))).await.unwrap();
    let after = api.get("web").await.unwrap();
    assert_eq!((after.spec.unwrap().replicas, after.metadata.generation), (Some(4), Some(2)));
}

#[tokio::test]
async fn the_watcher_lists_in_pages_then_streams_changes() {
    let (f, client) = sandbox(quiet()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"))).await.unwrap();
    }
    let lists_before = f.servers[0].cluster.counters.lists.load(Ordering::SeqCst);
    let mut events = watcher(api.clone(), watcher::Config::default().page_size(2)).boxed();
    assert!(matches!(events.try_next().await.unwrap(), Some(Event::Init)));
    let mut names = Vec::new();
    loop {
        match events.try_next().await.unwrap() {
            Some(Event::InitApply(c)) => names.push(c.name_any()),
            Some(Event::InitDone) => break,
            other => panic!("unexpected event during the initial list: {other:?}"),
        }
    }
    assert_eq!(names, ["c0", "c1", "c2", "c3", "c4"]);
    let lists = f.servers[0].cluster.counters.lists.load(Ordering::SeqCst) - lists_before;
    assert_eq!(lists, 3, "5 objects in pages of 2 take 3 list requests");

    api.patch("c1", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "changed"}}))).await.unwrap();
    match events.try_next().await.unwrap() {
        Some(Event::Apply(c)) => assert_eq!((c.name_any(), c.data.unwrap()["k"].as_str()), ("c1".into(), "changed")),
        other => panic!("expected Apply, got {other:?}"),
    }
    api.delete("c2", &DeleteParams::default()).await.unwrap();
    match events.try_next().await.unwrap() {
        Some(Event::Delete(c)) => assert_eq!(c.name_any(), "c2"),
        other => panic!("expected Delete, got {other:?}"),
    }
}

fn watcher(
    api: Api<ConfigMap>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<Event<ConfigMap>, watcher::Error>> {
    kube::runtime::watcher(api, config)
}

#[tokio::test]
async fn a_410_makes_the_watcher_relist_and_the_reflector_matches_the_server() {
    let (f, client) = sandbox(quiet()).await;
    let cluster = f.servers[0].cluster.clone();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"))).await.unwrap();
    }
    let (reader, writer) = reflector::store();
    let errors = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen_errors = errors.clone();
    let stream =
        reflector(writer, watcher(api.clone(), watcher::Config::default())).default_backoff().for_each(move |e| {
            if let Err(watcher::Error::WatchError(s)) = &e
                && s.code == 410
            {
                seen_errors.fetch_add(1, Ordering::SeqCst);
            }
            futures::future::ready(())
        });
    let task = tokio::spawn(stream);
    eventually("the initial list", || async { reader.state().len() == 3 }).await;
    // Changes made while the history is being dropped, then every watch is cut: the re-watch
    // from the old resourceVersion gets an ERROR 410 event and the watcher relists.
    api.delete("c0", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("c9")).await.unwrap();
    cluster.storage.compact();
    cluster.storage.close_watches();
    api.create(&PostParams::default(), &cm("c10")).await.unwrap();
    eventually("the 410 to be seen", || async { errors.load(Ordering::SeqCst) >= 1 }).await;
    eventually("the store to match the server", || async {
        let mut ours: Vec<String> = reader.state().iter().map(|c| c.name_any()).collect();
        ours.sort();
        let mut theirs: Vec<String> =
            api.list(&ListParams::default()).await.unwrap().items.iter().map(|c| c.name_any()).collect();
        theirs.sort();
        ours == theirs
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn bookmarks_decode_and_streaming_lists_end_with_the_initial_events_bookmark() {
    let config = ClusterConfig { bookmark_interval: Duration::from_millis(50), ..quiet() };
    let (_f, client) = sandbox(config).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &cm("c0")).await.unwrap();
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut raw = api.watch(&WatchParams::default().timeout(30), &rv).await.unwrap().boxed();
    match raw.try_next().await.unwrap() {
        Some(WatchEvent::Bookmark(b)) => {
            assert_eq!((b.types.kind.as_str(), b.types.api_version.as_str()), ("ConfigMap", "v1"));
            assert!(b.metadata.resource_version.parse::<u64>().unwrap() >= rv.parse::<u64>().unwrap());
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
    let mut events = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = 0;
    loop {
        match events.try_next().await.unwrap() {
            Some(Event::Init) => {}
            Some(Event::InitApply(_)) => initial += 1,
            Some(Event::InitDone) => break,
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(initial, 1);
}

#[tokio::test]
async fn a_watch_gets_a_bookmark_just_before_its_deadline_even_between_the_minute_ones() {
    // The default interval is kube-apiserver's minute: this 4-s watch's only bookmark is the
    // one sent two seconds before its deadline, and the stream ends after it.
    let (_f, client) = sandbox(quiet()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &cm("c0")).await.unwrap();
    let mut raw = api.watch(&WatchParams::default().timeout(4), &rv).await.unwrap().boxed();
    let mut seen = Vec::new();
    while let Some(event) = raw.try_next().await.unwrap() {
        seen.push(match event {
            WatchEvent::Added(c) => format!("ADDED {}", c.name_any()),
            WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
            other => format!("{other:?}"),
        });
    }
    let created = api.get("c0").await.unwrap().resource_version().unwrap();
    assert_eq!(seen, ["ADDED c0".to_string(), format!("BOOKMARK {created}")]);
}

#[tokio::test]
async fn a_hung_cluster_sends_no_bookmark_until_it_heals() {
    let config = ClusterConfig { bookmark_interval: Duration::from_millis(50), ..quiet() };
    let (f, client) = sandbox(config).await;
    let cluster = f.servers[0].cluster.clone();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut raw = api.watch(&WatchParams::default().timeout(60), &rv).await.unwrap().boxed();
    assert!(matches!(raw.try_next().await.unwrap(), Some(WatchEvent::Bookmark(_))), "bookmarks flow");
    cluster.faults.set_partition(spanset_sim::cluster::faults::Partition::Hang);
    // Those already on their way (a few at most) are read, then nothing comes for twenty
    // intervals.
    for _ in 0..10 {
        if tokio::time::timeout(Duration::from_millis(300), raw.try_next()).await.is_err() {
            break;
        }
    }
    let silent = tokio::time::timeout(Duration::from_secs(1), raw.try_next()).await;
    assert!(silent.is_err(), "a hung cluster sent {silent:?}");
    cluster.faults.set_partition(spanset_sim::cluster::faults::Partition::None);
    let healed = tokio::time::timeout(Duration::from_secs(30), raw.try_next()).await;
    assert!(matches!(healed, Ok(Ok(Some(WatchEvent::Bookmark(_))))), "after healing: {healed:?}");
}

#[tokio::test]
async fn a_watch_ends_at_its_timeout_and_the_watcher_rewatches_without_relisting() {
    let (f, client) = sandbox(quiet()).await;
    let cluster = f.servers[0].cluster.clone();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let mut events = watcher(api.clone(), watcher::Config::default().timeout(1)).boxed();
    while !matches!(events.try_next().await.unwrap(), Some(Event::InitDone)) {}
    let lists = cluster.counters.lists.load(Ordering::SeqCst);
    let watches = cluster.counters.watches.load(Ordering::SeqCst);
    // Keep reading while the 1 s watches expire and are re-established.
    let reader = tokio::spawn(async move { while events.try_next().await.is_ok() {} });
    eventually("a second watch", || async { cluster.counters.watches.load(Ordering::SeqCst) >= watches + 2 }).await;
    assert_eq!(cluster.counters.lists.load(Ordering::SeqCst), lists, "re-watching does not relist");
    reader.abort();
}

#[tokio::test]
async fn a_controller_reconciles_its_statefulset_when_an_owned_pod_changes() {
    let (_f, client) = sandbox(quiet()).await;
    let sts_api: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let set = sts_api.create(&PostParams::default(), &sts("owner", 0)).await.unwrap();
    let reconciles = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = reconciles.clone();
    let controller = Controller::new(sts_api.clone(), watcher::Config::default())
        .owns(pods.clone(), watcher::Config::default())
        .run(
            move |obj: Arc<StatefulSet>, _ctx: Arc<()>| {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().push(obj.name_any());
                    Ok::<_, kube::Error>(Action::await_change())
                }
            },
            |_, _, _| Action::await_change(),
            Arc::new(()),
        )
        .for_each(|_| futures::future::ready(()));
    let task = tokio::spawn(controller);
    eventually("the first reconcile", || async { !reconciles.lock().unwrap().is_empty() }).await;
    let before = reconciles.lock().unwrap().len();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "owned", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "owner", "uid": set.uid().unwrap(), "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    eventually("a reconcile caused by the owned pod", || async { reconciles.lock().unwrap().len() > before }).await;
    assert!(reconciles.lock().unwrap().iter().all(|n| n == "owner"));
    task.abort();
}

async fn owner_with_dependents(client: &Client, name: &str) -> (Api<StatefulSet>, Api<ConfigMap>) {
    let sts_api: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let owner = sts_api.create(&PostParams::default(), &sts(name, 0)).await.unwrap();
    for i in 0..2 {
        let dep: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("{name}-dep-{i}"),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "uid": owner.uid().unwrap(), "blockOwnerDeletion": true}]}}))
        .unwrap();
        cms.create(&PostParams::default(), &dep).await.unwrap();
    }
    (sts_api, cms)
}

#[tokio::test]
async fn garbage_collection_follows_the_propagation_policy() {
    let (_f, client) = sandbox(quiet()).await;
    // Background: the owner goes at once, dependents after.
    let (sets, cms) = owner_with_dependents(&client, "bg").await;
    sets.delete("bg", &DeleteParams::background()).await.unwrap();
    assert!(api_error(sets.get("bg").await.unwrap_err()).is_not_found());
    eventually("background collection", || async {
        cms.get_opt("bg-dep-0").await.unwrap().is_none() && cms.get_opt("bg-dep-1").await.unwrap().is_none()
    })
    .await;

    // Foreground: the owner waits with a finalizer until its dependents are gone.
    let (sets, cms) = owner_with_dependents(&client, "fg").await;
    let pending = sets.delete("fg", &DeleteParams::foreground()).await.unwrap();
    let marked = pending.left().expect("a foreground delete answers with the marked object");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(marked.finalizers().iter().any(|f| f == "foregroundDeletion"));
    eventually("foreground collection", || async { sets.get_opt("fg").await.unwrap().is_none() }).await;
    assert!(cms.get_opt("fg-dep-0").await.unwrap().is_none(), "dependents go before the owner");

    // Orphan: dependents stay, without the owner reference.
    let (sets, cms) = owner_with_dependents(&client, "or").await;
    sets.delete("or", &DeleteParams { propagation_policy: Some(PropagationPolicy::Orphan), ..Default::default() })
        .await
        .unwrap();
    eventually("the orphaned owner to go", || async { sets.get_opt("or").await.unwrap().is_none() }).await;
    let dep = cms.get("or-dep-0").await.unwrap();
    assert!(dep.owner_references().is_empty());
}

async fn raw(addr: std::net::SocketAddr, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // The server may answer (413) before reading a huge body; ignore a broken pipe then.
    let _ = s.write_all(body).await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out);
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).expect("status line");
    let json_start = text.find('{').expect("a JSON body");
    let json_end = text.rfind('}').expect("a JSON body");
    (code, serde_json::from_str(&text[json_start..=json_end]).expect("a Status body"))
}

#[tokio::test]
async fn bad_input_gets_real_status_codes_and_changes_nothing() {
    let (f, client) = sandbox(quiet()).await;
    let addr = f.servers[0].addr;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &cm("keep")).await.unwrap();
    let before = serde_json::to_value(api.list(&ListParams::default()).await.unwrap().items).unwrap();
    let rv_before = f.servers[0].cluster.storage.current_rv();
    // (method, path, content type, body, expected code, expected reason)
    type Case = (&'static str, &'static str, &'static str, Vec<u8>, u16, &'static str);
    let cases: Vec<Case> = vec![
        ("POST", "/api/v1/namespaces/default/configmaps", "application/json", b"{not json".to_vec(), 400, "BadRequest"),
        ("POST", "/api/v1/namespaces/default/configmaps", "application/json", b"[1,2]".to_vec(), 400, "BadRequest"),
        ("GET", "/api/v1/namespaces/default/widgets", "application/json", vec![], 404, "NotFound"),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            br#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            br#"{"metadata":{"name":"Not_Valid"}}"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            vec![b' '; 4 * 1024 * 1024],
            413,
            "RequestEntityTooLarge",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/keep",
            "application/json-patch+json",
            br#"{"op":"add"}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/keep",
            "text/plain",
            b"x".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "PUT",
            "/api/v1/namespaces/default/configmaps/keep",
            "application/json",
            br#"{"metadata":{"name":"other"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?labelSelector=a%20in%20b",
            "application/json",
            vec![],
            400,
            "BadRequest",
        ),
        // A structural field of the wrong JSON type is refused at decoding, as by the apiserver.
        (
            "POST",
            "/api/v1/namespaces/default/pods",
            "application/json",
            br#"{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]},"status":"x"}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?fieldSelector=spec.x%3Dy",
            "application/json",
            vec![],
            400,
            "BadRequest",
        ),
    ];
    for (method, path, ctype, body, code, reason) in cases {
        let (got, status) = raw(addr, method, path, ctype, &body).await;
        assert_eq!((got, status["reason"].as_str()), (code, Some(reason)), "{method} {path}: {status}");
        assert_eq!(status["kind"], "Status");
        assert!(status["message"].as_str().is_some_and(|m| !m.is_empty()), "{status}");
    }
    let after = serde_json::to_value(api.list(&ListParams::default()).await.unwrap().items).unwrap();
    assert_eq!(before, after, "bad input changed nothing");
    assert_eq!(f.servers[0].cluster.storage.current_rv(), rv_before);
}

#[tokio::test]
async fn a_hundred_watchers_see_a_write_and_a_stuck_one_is_dropped_without_blocking() {
    let config = ClusterConfig { limits: StorageLimits { history: 10_000, watcher_buffer: 8 }, ..quiet() };
    let (f, client) = sandbox(config).await;
    let cluster = f.servers[0].cluster.clone();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    // A watcher that never reads: a raw connection whose response body is left unread.
    let stuck = {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(f.servers[0].addr).await.unwrap();
        let req = format!(
            "GET /api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv} HTTP/1.1\r\nHost: x\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.unwrap();
        s
    };
    let mut streams = Vec::new();
    for _ in 0..100 {
        streams.push(api.watch(&WatchParams::default().timeout(60), &rv).await.unwrap().boxed());
    }
    let configmaps = (String::new(), "configmaps".to_string());
    eventually("101 registered watches", || async { cluster.storage.watchers_of(&configmaps) == 101 }).await;
    // Many writes, each small; the stuck watcher's buffers fill and it is dropped.
    // 200 x 256 KiB overflows the kernel's socket buffers, the body buffer and the watcher's.
    let big = "x".repeat(256 * 1024);
    for i in 0..200 {
        let c: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("w{i}")}, "data": {"big": big}})).unwrap();
        api.create(&PostParams::default(), &c).await.unwrap();
        if i == 0 {
            for s in streams.iter_mut() {
                match s.try_next().await.unwrap() {
                    Some(WatchEvent::Added(c)) => assert_eq!(c.name_any(), "w0"),
                    other => panic!("expected ADDED w0, got {other:?}"),
                }
            }
        }
    }
    drop(streams);
    eventually("the stuck watcher to be dropped", || async { cluster.storage.watchers_of(&configmaps) == 0 }).await;
    drop(stuck);
}

#[tokio::test]
async fn pages_share_one_snapshot_and_an_expired_continue_token_is_410() {
    let (f, client) = sandbox(quiet()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    for i in 0..4 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"))).await.unwrap();
    }
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    let token = first.metadata.continue_.clone().expect("a continue token");
    assert_eq!(first.metadata.remaining_item_count, Some(2));
    // A change after the first page does not show on the second: one snapshot.
    api.delete("c3", &DeleteParams::default()).await.unwrap();
    let second = api.list(&ListParams::default().limit(2).continue_token(&token)).await.unwrap();
    assert_eq!(second.items.iter().map(|c| c.name_any()).collect::<Vec<_>>(), ["c2", "c3"]);
    assert_eq!(second.metadata.resource_version, first.metadata.resource_version);
    assert!(second.metadata.continue_.as_deref().unwrap_or("").is_empty());
    f.servers[0].cluster.storage.compact();
    let expired = api_error(api.list(&ListParams::default().limit(2).continue_token(&token)).await.unwrap_err());
    assert_eq!((expired.code, expired.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn deletecollection_preconditions_and_graceful_pods() {
    let (_f, client) = sandbox(quiet()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let c: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": app}}})).unwrap();
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    api.delete_collection(&DeleteParams::default(), &ListParams::default().labels("app=x")).await.unwrap();
    let left: Vec<String> =
        api.list(&ListParams::default()).await.unwrap().items.iter().map(|c| c.name_any()).collect();
    assert_eq!(left, ["c"]);
    // Preconditions: a wrong uid conflicts and deletes nothing.
    let wrong = DeleteParams {
        preconditions: Some(kube::api::Preconditions { uid: Some("not-it".into()), resource_version: None }),
        ..Default::default()
    };
    let e = api_error(api.delete("c", &wrong).await.unwrap_err());
    assert!(
        e.is_conflict() && e.message.contains("the UID in the precondition (not-it) does not match the UID in record"),
        "{e:?}"
    );
    assert!(api.get_opt("c").await.unwrap().is_some());
    // A pod on a node waits for its kubelet: here the node has none, so it stays Terminating
    // until a forced delete (grace period 0).
    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"nodeName": "far-away", "containers": [{"name": "c", "image": "i"}]}})).unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let pending = pods.delete("p", &DeleteParams::default()).await.unwrap().left().expect("the pod, marked");
    assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert!(pods.get_opt("p").await.unwrap().is_some(), "still there, Terminating");
    pods.delete("p", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.unwrap();
    assert!(pods.get_opt("p").await.unwrap().is_none(), "a forced delete removes it at once");
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}))
        .unwrap()
}

fn rv_of(obj: &impl ResourceExt) -> u64 {
    obj.resource_version().expect("a resourceVersion").parse().expect("a numeric resourceVersion")
}

#[tokio::test]
async fn configmaps_and_pods_go_through_every_verb() {
    let (_f, client) = sandbox(quiet()).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let created = cms.create(&PostParams::default(), &cm("one")).await.unwrap();
    assert_eq!(created.metadata.generation, None, "ConfigMaps have no spec, so no generation");
    assert_eq!(cms.get("one").await.unwrap(), created);

    // PUT with the current resourceVersion, then without one (unconditional), then a stale one.
    let mut next = created.clone();
    next.data = Some([("k".to_string(), "v2".to_string())].into());
    let replaced = cms.replace("one", &PostParams::default(), &next).await.unwrap();
    assert!(rv_of(&replaced) > rv_of(&created));
    let mut unconditional = replaced.clone();
    unconditional.metadata.resource_version = None;
    unconditional.data = Some([("k".to_string(), "v3".to_string())].into());
    cms.replace("one", &PostParams::default(), &unconditional).await.unwrap();
    let stale = api_error(cms.replace("one", &PostParams::default(), &next).await.unwrap_err());
    assert_eq!(
        (stale.code, stale.reason.as_str(), stale.message.as_str()),
        (
            409,
            "Conflict",
            r#"Operation cannot be fulfilled on configmaps "one": the object has been modified; please apply your changes to the latest version and try again"#
        )
    );
    assert_eq!(cms.get("one").await.unwrap().data.unwrap()["k"], "v3", "the stale write changed nothing");

    // A merge patch carrying a stale resourceVersion is the same precondition.
    let stale_patch = json!({"metadata": {"resourceVersion": created.resource_version()}, "data": {"k": "x"}});
    assert!(
        api_error(cms.patch("one", &PatchParams::default(), &Patch::Merge(stale_patch)).await.unwrap_err())
            .is_conflict()
    );

    let listed = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.iter().map(|c| c.name_any()).collect::<Vec<_>>(), ["one"]);
    let deleted = cms.delete("one", &DeleteParams::default()).await.unwrap();
    let status = deleted.right().expect("a ConfigMap delete answers with a Status");
    assert_eq!(status.status, Some(kube::core::response::StatusSummary::Success));
    assert_eq!(status.details.as_ref().map(|d| d.name.as_str()), Some("one"));

    // Pods: core group wording, and an unscheduled pod goes at once, answered with its last state.
    let pods: Api<Pod> = Api::default_namespaced(client);
    let p = pods.create(&PostParams::default(), &pod("p")).await.unwrap();
    assert!(p.metadata.generation.is_none() || p.metadata.generation == Some(1));
    let missing = api_error(pods.get("nope").await.unwrap_err());
    assert_eq!((missing.code, missing.message.as_str()), (404, r#"pods "nope" not found"#));
    assert_eq!(missing.details.as_ref().map(|d| d.kind.as_str()), Some("pods"));
    let dup = api_error(pods.create(&PostParams::default(), &pod("p")).await.unwrap_err());
    assert_eq!((dup.code, dup.message.as_str()), (409, r#"pods "p" already exists"#));
    let labelled = pods
        .patch("p", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})))
        .await
        .unwrap();
    assert_eq!(labelled.labels()["x"], "y");
    assert_eq!(labelled.uid(), p.uid());
    let gone =
        pods.delete("p", &DeleteParams::default()).await.unwrap().left().expect("a pod delete answers with the pod");
    assert_eq!(gone.uid(), p.uid());
    assert!(rv_of(&gone) > rv_of(&labelled), "the deletion has its own resourceVersion");
    assert!(pods.get_opt("p").await.unwrap().is_none());
}

#[tokio::test]
async fn uids_timestamps_and_resource_versions_are_per_cluster_and_monotonic() {
    let fleet = Fleet::start(
        vec![ClusterConfig { nodes: 0, ..fast() }, ClusterConfig { nodes: 0, ..ClusterConfig::named("b") }],
        None,
    )
    .await
    .expect("sandbox starts");
    let clients: Vec<Client> =
        fleet.servers.iter().map(|s| Client::try_from(kube::Config::new(s.url().parse().unwrap())).unwrap()).collect();
    let mut uids = std::collections::HashSet::new();
    for client in &clients {
        let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
        let mut last_rv = 0;
        let mut last_created = None;
        for i in 0..3 {
            // One sequence shared by every kind of one cluster.
            let metas = [
                cms.create(&PostParams::default(), &cm(&format!("c{i}"))).await.unwrap().metadata,
                pods.create(&PostParams::default(), &pod(&format!("p{i}"))).await.unwrap().metadata,
                sets.create(&PostParams::default(), &sts(&format!("s{i}"), 0)).await.unwrap().metadata,
            ];
            for meta in metas {
                let rv: u64 = meta.resource_version.unwrap().parse().unwrap();
                assert!(rv > last_rv, "resourceVersions increase: {rv} after {last_rv}");
                last_rv = rv;
                assert!(uids.insert(meta.uid.expect("a uid")), "uids are unique across the fleet");
                let created = meta.creation_timestamp.expect("a creationTimestamp").0;
                assert!(last_created.is_none_or(|l| created >= l), "creationTimestamps do not go back");
                last_created = Some(created);
            }
        }
        let list_rv: u64 =
            cms.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap().parse().unwrap();
        assert!(list_rv >= last_rv);
    }
}

#[tokio::test]
async fn generation_counts_spec_changes_only_and_replace_status_changes_only_status() {
    let (_f, client) = sandbox(quiet()).await;
    let api: Api<StatefulSet> = Api::default_namespaced(client);
    let created = api.create(&PostParams::default(), &sts("web", 1)).await.unwrap();
    assert!(created.status.is_none() || created.status.as_ref().is_some_and(|s| s.replicas == 0));
    // The simulated controller writes status too; let it settle so a no-op stays a no-op.
    eventually("the controller to observe the set", || async {
        let s = api.get("web").await.unwrap();
        s.status.is_some_and(|st| st.observed_generation == Some(1) && st.replicas == 1)
    })
    .await;
    let created = api.get("web").await.unwrap();
    let labelled = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}, "annotations": {"c": "d"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1), "metadata changes do not bump generation");
    assert!(rv_of(&labelled) > rv_of(&created));
    let unchanged =
        api.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 1}}))).await.unwrap();
    assert_eq!((unchanged.metadata.generation, rv_of(&unchanged)), (Some(1), rv_of(&labelled)), "a no-op write");

    // PUT /status with a different spec and labels: only the status lands.
    let mut body = api.get("web").await.unwrap();
    body.spec.as_mut().unwrap().replicas = Some(8);
    body.metadata.labels = None;
    body.status =
        Some(serde_json::from_value(json!({"replicas": 5, "readyReplicas": 4, "observedGeneration": 1})).unwrap());
    let after = api.replace_status("web", &PostParams::default(), &body).await.unwrap();
    let status = after.status.as_ref().unwrap();
    assert_eq!((status.replicas, status.ready_replicas), (5, Some(4)));
    assert_eq!(after.spec.as_ref().unwrap().replicas, Some(1), "/status ignores spec");
    assert_eq!(after.labels().get("a").map(String::as_str), Some("b"), "/status ignores metadata labels");
    assert_eq!(after.metadata.generation, Some(1));

    // PUT on the main endpoint with a different status: the spec lands, the status does not.
    let mut body = after.clone();
    body.spec.as_mut().unwrap().replicas = Some(2);
    body.status.as_mut().unwrap().replicas = 99;
    // Unconditional (no resourceVersion), as PUT allows for StatefulSets: the simulated
    // controller may have rewritten status meanwhile.
    body.metadata.resource_version = None;
    let replaced = api.replace("web", &PostParams::default(), &body).await.unwrap();
    assert_eq!(replaced.spec.as_ref().unwrap().replicas, Some(2));
    assert_ne!(replaced.status.as_ref().unwrap().replicas, 99, "the main endpoint ignores status");
    assert_eq!(replaced.metadata.generation, Some(2));

    // The scale subresource is a spec change (retried on conflict, as clients do: the
    // simulated controller writes status concurrently), and a stale resourceVersion conflicts.
    let written = loop {
        let mut scale = api.get_scale("web").await.unwrap();
        scale.spec.as_mut().unwrap().replicas = Some(3);
        match api.replace_scale("web", &PostParams::default(), &scale).await {
            Ok(s) => break scale.clone().metadata.resource_version.map(|_| (scale, s)).unwrap(),
            Err(kube::Error::Api(s)) if s.is_conflict() => continue,
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(written.1.spec.unwrap().replicas, Some(3));
    let stale = api_error(api.replace_scale("web", &PostParams::default(), &written.0).await.unwrap_err());
    assert!(stale.is_conflict(), "{stale:?}");
    assert_eq!(api.get("web").await.unwrap().metadata.generation, Some(3));
}

#[tokio::test]
async fn a_too_old_watch_is_an_error_event_in_a_200_stream_and_the_watcher_relists() {
    let (f, client) = sandbox(quiet()).await;
    let cluster = f.servers[0].cluster.clone();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &cm("c0")).await.unwrap();
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    while !matches!(events.try_next().await.unwrap(), Some(Event::InitDone)) {}
    let old_rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &cm("c1")).await.unwrap();
    match events.try_next().await.unwrap() {
        Some(Event::Apply(c)) => assert_eq!(c.name_any(), "c1"),
        other => panic!("expected Apply c1, got {other:?}"),
    }
    cluster.storage.compact();
    // Raw: not an HTTP 410 (kube would retry that without relisting), but an ERROR event.
    let mut raw = api
        .watch(&WatchParams::default().timeout(30), &old_rv)
        .await
        .expect("a too-old watch still starts with 200")
        .boxed();
    match raw.try_next().await.unwrap() {
        Some(WatchEvent::Error(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
            assert!(s.message.starts_with(&format!("too old resource version: {old_rv} (")), "{s:?}");
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
    assert!(raw.try_next().await.unwrap().is_none(), "the stream ends after the ERROR event");

    // The watcher: its watch is cut and re-made from a compacted version → 410 → full relist.
    api.delete("c0", &DeleteParams::default()).await.unwrap();
    cluster.storage.compact();
    cluster.storage.close_watches();
    let mut saw_410 = false;
    loop {
        match events.next().await.expect("the watcher never ends") {
            Err(watcher::Error::WatchError(s)) if s.code == 410 => saw_410 = true,
            // The deletion may arrive before the watch is cut, but never after the 410.
            Ok(Event::Delete(c)) if !saw_410 => assert_eq!(c.name_any(), "c0"),
            Ok(Event::Init) if saw_410 => break,
            other => panic!("unexpected item (after the 410: {saw_410}): {other:?}"),
        }
    }
    assert!(saw_410, "the relist came after a 410");
    let mut names = Vec::new();
    loop {
        match events.try_next().await.unwrap() {
            Some(Event::InitApply(c)) => names.push(c.name_any()),
            Some(Event::InitDone) => break,
            other => panic!("unexpected event during the relist: {other:?}"),
        }
    }
    assert_eq!(names, ["c1"], "the relist shows the server's state");
}

#[tokio::test]
async fn streaming_lists_send_every_object_then_the_annotated_bookmark() {
    let (f, client) = sandbox(quiet()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"))).await.unwrap();
    }
    let rv = f.servers[0].cluster.storage.current_rv();
    let mut raw = api.watch(&WatchParams::streaming_lists().timeout(30), "0").await.unwrap().boxed();
    let mut added = Vec::new();
    loop {
        match raw.try_next().await.unwrap() {
            Some(WatchEvent::Added(c)) => added.push(c.name_any()),
            Some(WatchEvent::Bookmark(b)) => {
                assert_eq!(b.metadata.annotations.get("k8s.io/initial-events-end").map(String::as_str), Some("true"));
                assert_eq!(b.metadata.resource_version, rv.to_string(), "the bookmark carries the snapshot version");
                break;
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(added, ["c0", "c1", "c2"]);
    api.create(&PostParams::default(), &cm("c3")).await.unwrap();
    match raw.try_next().await.unwrap() {
        Some(WatchEvent::Added(c)) => assert_eq!(c.name_any(), "c3"),
        other => panic!("expected ADDED c3, got {other:?}"),
    }
    // Without resourceVersionMatch=NotOlderThan, or without bookmarks, the request is refused,
    // so a caller fails loudly instead of waiting forever for the end bookmark.
    for query in
        ["sendInitialEvents=true&allowWatchBookmarks=true", "sendInitialEvents=true&resourceVersionMatch=NotOlderThan"]
    {
        let uri = format!("/api/v1/namespaces/default/configmaps?watch=true&{query}");
        let req = http::Request::get(uri).body(Vec::new()).unwrap();
        let refused = api_error(client.request_text(req).await.expect_err("refused"));
        assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"), "{query}: {refused:?}");
        assert!(refused.message.contains("sendInitialEvents") || refused.message.contains("allowWatchBookmarks"));
    }
}

#[tokio::test]
async fn a_raw_watch_ends_at_its_timeout_seconds() {
    let (_f, client) = sandbox(quiet()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let mut raw = api.watch(&WatchParams::default().timeout(1).disable_bookmarks(), "0").await.unwrap().boxed();
    // A generous outer bound only guards against a hang; the server must end it first.
    let end = tokio::time::timeout(support::DEADLINE, raw.try_next()).await.expect("the watch ended by itself");
    assert!(end.unwrap().is_none());
}

/// A StatefulSet whose simulated controller has made its pods, each owned by it.
async fn set_with_pods(client: &Client, name: &str) -> (StatefulSet, Api<StatefulSet>, Api<Pod>) {
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut spec = sts(name, 2);
    spec.spec.as_mut().unwrap().pod_management_policy = Some("Parallel".into());
    let set = sets.create(&PostParams::default(), &spec).await.unwrap();
    eventually("the set's pods", || async {
        let listed = pods.list(&ListParams::default().labels(&format!("app={name}"))).await.unwrap().items;
        listed.len() == 2
            && listed.iter().all(|p| p.owner_references().iter().any(|r| Some(&r.uid) == set.uid().as_ref()))
    })
    .await;
    (set, sets, pods)
}

fn names_of<K: ResourceExt>(items: &[K]) -> Vec<String> {
    items.iter().map(|o| o.name_any()).collect()
}

#[tokio::test]
async fn deleting_a_statefulset_collects_its_pods_by_propagation_policy() {
    let (_f, client) = sandbox(fast()).await;

    // Default (Background for apps/v1): the set goes at once, its pods after.
    let (_, sets, pods) = set_with_pods(&client, "dflt").await;
    sets.delete("dflt", &DeleteParams::default()).await.unwrap();
    assert!(sets.get_opt("dflt").await.unwrap().is_none(), "the owner goes at once");
    eventually("default collection", || async {
        pods.list(&ListParams::default().labels("app=dflt")).await.unwrap().items.is_empty()
    })
    .await;

    // Foreground: every pod is deleted before the set (compare deletion resourceVersions).
    let (set, sets, pods) = set_with_pods(&client, "fg").await;
    let from = pods.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut pod_events = pods.watch(&WatchParams::default().labels("app=fg").timeout(60), &from).await.unwrap().boxed();
    let mut set_events = sets.watch(&WatchParams::default().timeout(60), &from).await.unwrap().boxed();
    let marked = sets.delete("fg", &DeleteParams::foreground()).await.unwrap().left().expect("the marked owner");
    assert!(marked.metadata.deletion_timestamp.is_some() && marked.finalizers().contains(&"foregroundDeletion".into()));
    let set_gone = loop {
        match set_events.try_next().await.unwrap().expect("the watch lasts") {
            WatchEvent::Deleted(s) if s.uid() == set.uid() => break rv_of(&s),
            _ => {}
        }
    };
    let mut pods_gone = Vec::new();
    while pods_gone.len() < 2 {
        if let WatchEvent::Deleted(p) = pod_events.try_next().await.unwrap().expect("the watch lasts") {
            pods_gone.push(rv_of(&p));
        }
    }
    assert!(pods_gone.iter().all(|rv| *rv < set_gone), "pods {pods_gone:?} go before their owner ({set_gone})");
    assert!(
        pods.list(&ListParams::default().labels("app=fg")).await.unwrap().items.is_empty(),
        "and none is recreated"
    );

    // Background, explicitly.
    let (_, sets, pods) = set_with_pods(&client, "bg").await;
    sets.delete("bg", &DeleteParams::background()).await.unwrap();
    assert!(sets.get_opt("bg").await.unwrap().is_none());
    eventually("background collection", || async {
        pods.list(&ListParams::default().labels("app=bg")).await.unwrap().items.is_empty()
    })
    .await;

    // Orphan: the pods stay, and by the time the owner is gone they no longer point at it.
    let (_, sets, pods) = set_with_pods(&client, "or").await;
    let before = names_of(&pods.list(&ListParams::default().labels("app=or")).await.unwrap().items);
    sets.delete("or", &DeleteParams::orphan()).await.unwrap();
    eventually("the orphaning owner to go", || async { sets.get_opt("or").await.unwrap().is_none() }).await;
    let after = pods.list(&ListParams::default().labels("app=or")).await.unwrap().items;
    assert_eq!(names_of(&after), before);
    assert!(
        after.iter().all(|p| p.owner_references().is_empty() && p.metadata.deletion_timestamp.is_none()),
        "{after:?}"
    );
}

#[tokio::test]
async fn a_controller_reconciles_again_when_an_owned_pod_is_modified_or_deleted() {
    let (_f, client) = sandbox(quiet()).await;
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let set = sets.create(&PostParams::default(), &sts("owner", 0)).await.unwrap();
    let mut owned = pod("owned");
    owned.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "apps/v1".into(),
        kind: "StatefulSet".into(),
        name: "owner".into(),
        uid: set.uid().unwrap(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    pods.create(&PostParams::default(), &owned).await.unwrap();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    let task = tokio::spawn(
        Controller::new(sets.clone(), watcher::Config::default())
            .owns(pods.clone(), watcher::Config::default())
            .run(
                move |obj: Arc<StatefulSet>, _ctx: Arc<()>| {
                    let seen = seen.clone();
                    async move {
                        assert_eq!(obj.name_any(), "owner");
                        seen.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, kube::Error>(Action::await_change())
                    }
                },
                |_, _, _| Action::await_change(),
                Arc::new(()),
            )
            .for_each(|_| futures::future::ready(())),
    );
    eventually("the first reconcile", || async { count.load(Ordering::SeqCst) >= 1 }).await;
    let before = count.load(Ordering::SeqCst);
    pods.patch("owned", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})))
        .await
        .unwrap();
    eventually("a reconcile for the modified pod", || async { count.load(Ordering::SeqCst) > before }).await;
    let before = count.load(Ordering::SeqCst);
    pods.delete("owned", &DeleteParams::default()).await.unwrap();
    eventually("a reconcile for the deleted pod", || async { count.load(Ordering::SeqCst) > before }).await;
    task.abort();
}

#[tokio::test]
async fn a_stuck_watcher_blocks_neither_writes_nor_reading_watchers_and_is_dropped() {
    let config = ClusterConfig { limits: StorageLimits { history: 10_000, watcher_buffer: 8 }, ..quiet() };
    let (f, client) = sandbox(config).await;
    let cluster = f.servers[0].cluster.clone();
    let configmaps = (String::new(), "configmaps".to_string());
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    // Three reflectors that keep reading.
    let mut readers = Vec::new();
    let mut stores = Vec::new();
    for _ in 0..3 {
        let (reader, writer) = reflector::store();
        let stream = reflector(writer, watcher(api.clone(), watcher::Config::default())).default_backoff();
        readers.push(tokio::spawn(stream.for_each(|_| futures::future::ready(()))));
        stores.push(reader);
    }
    for s in &stores {
        s.wait_until_ready().await.unwrap();
    }
    eventually("three reading watches", || async { cluster.storage.watchers_of(&configmaps) == 3 }).await;
    // A watch whose response is never read (no timeoutSeconds: only being dropped ends it).
    let rv = cluster.storage.current_rv();
    let stuck = {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(f.servers[0].addr).await.unwrap();
        let req = format!(
            "GET /api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv} HTTP/1.1\r\nHost: x\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.unwrap();
        s
    };
    eventually("the stuck watch registered", || async { cluster.storage.watchers_of(&configmaps) == 4 }).await;
    // Enough data to fill the kernel's socket buffers, the body buffer and the watcher buffer.
    let big = "x".repeat(256 * 1024);
    for i in 0..200 {
        let c: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("w{i}")}, "data": {"big": big}})).unwrap();
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    for (i, s) in stores.iter().enumerate() {
        eventually(&format!("reader {i} to see every write"), || async { s.state().len() == 200 }).await;
    }
    eventually("the stuck watcher to be dropped", || async { cluster.storage.watchers_of(&configmaps) == 3 }).await;
    // And the readers still follow.
    api.delete("w0", &DeleteParams::default()).await.unwrap();
    for s in &stores {
        eventually("readers to see the deletion", || async { s.state().len() == 199 }).await;
    }
    drop(stuck);
    readers.iter().for_each(|r| r.abort());
}

#[tokio::test]
async fn an_oversized_create_from_kube_is_a_413_status_and_dry_runs_change_nothing() {
    let (f, client) = sandbox(quiet()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let huge: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "huge"}, "data": {"k": "x".repeat(4 * 1024 * 1024)}}))
            .unwrap();
    let too_large = api_error(api.create(&PostParams::default(), &huge).await.unwrap_err());
    assert_eq!((too_large.code, too_large.reason.as_str()), (413, "RequestEntityTooLarge"), "{too_large:?}");
    assert!(api.get_opt("huge").await.unwrap().is_none());

    let rv = f.servers[0].cluster.storage.current_rv();
    let dry = PostParams { dry_run: true, ..Default::default() };
    let would_be = api.create(&dry, &cm("dry")).await.unwrap();
    assert_eq!(would_be.name_any(), "dry");
    assert!(api.get_opt("dry").await.unwrap().is_none(), "a dry-run create stores nothing");
    api.create(&PostParams::default(), &cm("real")).await.unwrap();
    let rv = f.servers[0].cluster.storage.current_rv().max(rv);
    api.delete("real", &DeleteParams::default().dry_run()).await.unwrap();
    api.patch("real", &PatchParams::default().dry_run(), &Patch::Merge(json!({"data": {"k": "dry"}}))).await.unwrap();
    let kept = api.get("real").await.unwrap();
    assert_eq!(kept.data.unwrap()["k"], "v", "dry-run patch and delete change nothing");
    assert_eq!(f.servers[0].cluster.storage.current_rv(), rv);

    // generateName.
    let generated: ConfigMap = serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).unwrap();
    let made = api.create(&PostParams::default(), &generated).await.unwrap();
    assert!(made.name_any().starts_with("gen-") && made.name_any().len() == 9, "{}", made.name_any());
}

#[tokio::test]
async fn metadata_watchers_and_cluster_wide_lists_work() {
    let (_f, client) = sandbox(quiet()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &cm("m0")).await.unwrap();
    let metas_api: Api<kube::core::PartialObjectMeta<ConfigMap>> = Api::default_namespaced(client.clone());
    let mut events = kube::runtime::watcher(metas_api, watcher::Config::default()).boxed();
    let mut names = Vec::new();
    loop {
        match events.try_next().await.unwrap() {
            Some(Event::Init) => {}
            Some(Event::InitApply(m)) => names.push(m.name_any()),
            Some(Event::InitDone) => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(names, ["m0"]);
    api.create(&PostParams::default(), &cm("m1")).await.unwrap();
    match events.try_next().await.unwrap() {
        Some(Event::Apply(m)) => assert_eq!((m.name_any(), m.labels()["app"].as_str()), ("m1".into(), "x")),
        other => panic!("expected Apply m1, got {other:?}"),
    }
    let all: Api<ConfigMap> = Api::all(client.clone());
    let everywhere = all.list(&ListParams::default()).await.unwrap();
    assert!(everywhere.items.iter().all(|c| c.namespace().is_some()));
    let metas = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(names_of(&metas.items), ["m0", "m1"]);
}

#[tokio::test]
async fn finalizers_hold_a_deleted_object_until_removed_and_watchers_see_each_phase() {
    let (_f, client) = sandbox(quiet()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let mut held = cm("held");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let created = api.create(&PostParams::default(), &held).await.unwrap();
    let mut events =
        api.watch(&WatchParams::default().timeout(60), &created.resource_version().unwrap()).await.unwrap().boxed();
    let pending = api.delete("held", &DeleteParams::default()).await.unwrap().left().expect("the object, marked");
    assert!(pending.metadata.deletion_timestamp.is_some());
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Modified(c)) => assert!(c.metadata.deletion_timestamp.is_some()),
        other => panic!("expected MODIFIED with a deletionTimestamp, got {other:?}"),
    }
    // A terminating object may still be updated, but not un-deleted, and gets no new finalizers.
    let refused = api
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}})),
        )
        .await;
    assert!(refused.is_err(), "new finalizers on a terminating object are refused: {refused:?}");
    api.patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Deleted(c)) => assert_eq!(c.name_any(), "held"),
        other => panic!("expected DELETED once the last finalizer went, got {other:?}"),
    }
    assert!(api.get_opt("held").await.unwrap().is_none());

    // A 422 names the field in its causes.
    let bad = api_error(api.create(&PostParams::default(), &cm("Bad_Name")).await.unwrap_err());
    let details = bad.details.expect("details");
    assert_eq!((details.kind.as_str(), details.name.as_str()), ("ConfigMap", "Bad_Name"));
    assert!(
        details.causes.iter().any(|c| c.field == "metadata.name" && c.reason == "FieldValueInvalid"),
        "{details:?}"
    );
}
