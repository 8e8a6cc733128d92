//! The sandbox's Events and container logs through the real kube-rs client: each simulated
//! component tells its part of a StatefulSet's story with the real reasons, sources and
//! wording; the two client-go recorders fold repeats their own ways (a count, a series);
//! events.k8s.io/v1 is the same Events under other names; and the `log` subresource answers
//! as the apiserver and kubelet do.

use std::time::Duration;

use futures::{AsyncBufReadExt, TryStreamExt};
use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{Event, Pod},
    events::v1::Event as EventV1,
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, LogParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use spanset_sim::{cluster::ClusterConfig, sandbox::fleet::Fleet};
use support::eventually;

use crate::support;

async fn sandbox(config: ClusterConfig) -> (Fleet, Client) {
    let fleet = Fleet::start(vec![config], None).await.expect("sandbox starts");
    let client = Client::try_from(kube::Config::new(fleet.servers[0].url().parse().unwrap())).expect("client");
    (fleet, client)
}

fn sts(replicas: i32, image: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": image}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "www"},
                     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]},
    }))
    .unwrap()
}

async fn events(client: &Client) -> Vec<Event> {
    Api::<Event>::all(client.clone()).list(&ListParams::default()).await.expect("events list").items
}

fn find<'a>(all: &'a [Event], object: &str, reason: &str) -> Vec<&'a Event> {
    all.iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(object) && e.reason.as_deref() == Some(reason))
        .collect()
}

fn message(e: &Event) -> &str {
    e.message.as_deref().unwrap_or("")
}

fn component(e: &Event) -> &str {
    e.source.as_ref().and_then(|s| s.component.as_deref()).unwrap_or("")
}

#[tokio::test]
async fn each_component_tells_its_part_of_a_statefulsets_story() {
    // One node, so the second pod finds the image already pulled.
    let (_f, client) = sandbox(ClusterConfig { time_factor: 0.01, nodes: 1, ..ClusterConfig::named("a") }).await;
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    sets.create(&PostParams::default(), &sts(2, "nginx:1.25")).await.unwrap();
    eventually("web-1 started", || async { !find(&events(&client).await, "web-1", "Started").is_empty() }).await;
    let all = events(&client).await;

    let created: Vec<&str> = find(&all, "web", "SuccessfulCreate").into_iter().map(message).collect();
    for want in [
        "create Claim www-web-0 Pod web-0 in StatefulSet web success",
        "create Pod web-0 in StatefulSet web successful",
        "create Claim www-web-1 Pod web-1 in StatefulSet web success",
        "create Pod web-1 in StatefulSet web successful",
    ] {
        assert!(created.contains(&want), "no {want:?} in {created:?}");
    }
    assert!(find(&all, "web", "SuccessfulCreate").iter().all(|e| component(e) == "statefulset-controller"));

    // The scheduler records through events.k8s.io: eventTime and reportingComponent, no source.
    let scheduled = find(&all, "web-0", "Scheduled");
    assert_eq!(scheduled.len(), 1, "{scheduled:?}");
    assert_eq!(message(scheduled[0]), "Successfully assigned default/web-0 to node-1");
    assert_eq!(scheduled[0].reporting_component.as_deref(), Some("default-scheduler"));
    assert_eq!(scheduled[0].action.as_deref(), Some("Binding"));
    assert!(scheduled[0].event_time.is_some() && scheduled[0].first_timestamp.is_none());

    // The kubelet: per container, with its node as the source host.
    let kubelet = |pod: &str, reason: &str| -> String {
        let found = find(&all, pod, reason);
        assert_eq!(found.len(), 1, "{pod} {reason}: {found:?}");
        let e = found[0];
        assert_eq!(component(e), "kubelet");
        assert_eq!(e.source.as_ref().and_then(|s| s.host.as_deref()), Some("node-1"));
        assert_eq!(e.involved_object.field_path.as_deref(), Some("spec.containers{c}"));
        message(e).to_string()
    };
    assert_eq!(kubelet("web-0", "Pulling"), r#"Pulling image "nginx:1.25""#);
    assert!(kubelet("web-0", "Pulled").starts_with(r#"Successfully pulled image "nginx:1.25" in "#));
    assert_eq!(kubelet("web-1", "Pulled"), r#"Container image "nginx:1.25" already present on machine"#);
    assert!(find(&all, "web-1", "Pulling").is_empty(), "an image already on the node is not pulled again");
    assert_eq!(kubelet("web-0", "Created"), "Created container: c");
    assert_eq!(kubelet("web-0", "Started"), "Started container c");

    let provisioned = find(&all, "www-web-0", "ProvisioningSucceeded");
    assert_eq!(provisioned.len(), 1);
    assert!(message(provisioned[0]).starts_with("Successfully provisioned volume pvc-"));

    sets.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 1}}))).await.unwrap();
    eventually("web-1 deleted and killed", || async {
        let all = events(&client).await;
        find(&all, "web", "SuccessfulDelete")
            .iter()
            .any(|e| message(e) == "delete Pod web-1 in StatefulSet web successful")
            && find(&all, "web-1", "Killing").iter().any(|e| message(e) == "Stopping container c")
    })
    .await;
}

/// Simulated time after which client-go's series recorder finishes a series it has not seen
/// repeat (`finishTime`): the next repeat starts a new Event.
const SERIES_FINISH: Duration = Duration::from_secs(6 * 60);

/// The legacy recorder counts repeats in one Event; the series recorder makes the first repeat
/// a series at once and writes later counts on its heartbeat (every 30 simulated minutes).
///
/// What the series is judged on holds however loaded the machine: the scheduler's loop shares
/// this test's thread, and a stall longer than six simulated minutes (1.8 s here) lets the
/// recorder finish the series, as client-go's would after that silence, so that the next
/// attempt starts a new Event. The test then requires every Event but the first to follow such
/// a silence, rather than exactly one Event (which failed on a machine busy enough to stall the
/// thread for 360 ms, six simulated minutes at a time factor of 0.001).
#[tokio::test]
async fn repeats_fold_into_a_count_or_a_series_as_each_recorder_does() {
    // No nodes: the pod is unschedulable. Simulated minutes pass in fractions of a second.
    let factor = 0.005;
    let (_f, client) = sandbox(ClusterConfig { time_factor: factor, nodes: 0, ..ClusterConfig::named("a") }).await;
    // A pod in the way of the set's web-0: the controller's create fails every sync.
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let squatter: Pod = serde_json::from_value(
        json!({"metadata": {"name": "web-0"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}),
    )
    .unwrap();
    pods.create(&PostParams::default(), &squatter).await.unwrap();
    Api::<StatefulSet>::default_namespaced(client.clone())
        .create(&PostParams::default(), &sts(1, "nginx:1.25"))
        .await
        .unwrap();

    // Legacy recorder: one Event whose count grows (it forgets nothing for silence).
    eventually("FailedCreate counted", || async {
        let all = events(&client).await;
        let failed = find(&all, "web", "FailedCreate");
        failed.len() == 1 && failed[0].count.unwrap_or(0) >= 3
    })
    .await;
    let all = events(&client).await;
    let failed = find(&all, "web", "FailedCreate")[0];
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    assert_eq!(message(failed), r#"create Pod web-0 in StatefulSet web failed error: pods "web-0" already exists"#);
    assert!(failed.last_timestamp.is_some() && failed.first_timestamp.is_some());

    // Series recorder: the first repeat makes a series of 2 at once, the heartbeat writes more.
    let series_of = |all: &[Event], beyond: i32| {
        find(all, "web-0", "FailedScheduling")
            .iter()
            .any(|e| e.series.as_ref().is_some_and(|s| s.count.unwrap_or(0) >= beyond))
    };
    eventually("FailedScheduling became a series", || async { series_of(&events(&client).await, 2) }).await;
    eventually("the heartbeat writes a series' later count", || async { series_of(&events(&client).await, 3) }).await;
    let all = events(&client).await;
    let mut unschedulable = find(&all, "web-0", "FailedScheduling");
    for e in &unschedulable {
        assert_eq!(message(e), "no nodes available to schedule pods");
        assert_eq!(e.reporting_component.as_deref(), Some("default-scheduler"));
        assert!(e.count.is_none(), "the new recorder keeps no count: {e:?}");
    }
    // Folded: a second Event only once the first series was finished by its silence. The time
    // a series last wrote is no later than its last repeat, so the gap measured from it is, if
    // anything, longer than the silence was.
    unschedulable.sort_by_key(|e| e.event_time.clone().map(|t| t.0));
    let finish = jiff::SignedDuration::try_from(SERIES_FINISH.mul_f64(factor)).expect("a short duration");
    for pair in unschedulable.windows(2) {
        let seen = |e: &Event| {
            e.series.as_ref().and_then(|s| s.last_observed_time.as_ref()).or(e.event_time.as_ref()).expect("a time").0
        };
        let (last, next) = (seen(pair[0]), pair[1].event_time.as_ref().expect("an eventTime").0);
        assert!(
            next.duration_since(last) >= finish,
            "a repeat {} after the last one seen started a new Event, not a series: {unschedulable:#?}",
            next.duration_since(last)
        );
    }
}

/// A create that fails is retried by the controller itself, with a growing delay (as a real
/// controller's work queue does), not only when something else in the cluster happens to
/// change: here nothing else changes once the claim is bound, and the count still climbs.
/// (A count that depended on those incidental changes would stop short of 3 on a busy
/// machine, where they coalesce into fewer sweeps.)
#[tokio::test]
async fn a_failed_create_is_retried_with_backoff_though_nothing_else_changes() {
    let (_f, client) = sandbox(ClusterConfig { time_factor: 0.001, nodes: 0, ..ClusterConfig::named("a") }).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let squatter: Pod = serde_json::from_value(
        json!({"metadata": {"name": "web-0"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}),
    )
    .unwrap();
    pods.create(&PostParams::default(), &squatter).await.unwrap();
    Api::<StatefulSet>::default_namespaced(client.clone())
        .create(&PostParams::default(), &sts(1, "nginx:1.25"))
        .await
        .unwrap();
    eventually("FailedCreate counted ten times", || async {
        let all = events(&client).await;
        let failed = find(&all, "web", "FailedCreate");
        failed.len() == 1 && failed[0].count.unwrap_or(0) >= 10
    })
    .await;
}

#[tokio::test]
async fn events_k8s_io_is_the_same_events_under_other_names() {
    let (_f, client) = sandbox(ClusterConfig { time_factor: 0.01, nodes: 0, ..ClusterConfig::named("a") }).await;
    let v1: Api<EventV1> = Api::default_namespaced(client.clone());
    let core: Api<Event> = Api::default_namespaced(client.clone());
    let sent: EventV1 = serde_json::from_value(json!({
        "metadata": {"name": "probe.1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "example.com/prober", "reportingInstance": "prober-1",
        "action": "Probing", "reason": "Probed", "note": "all good", "type": "Normal",
        "regarding": {"kind": "Pod", "name": "x", "namespace": "default"},
    }))
    .unwrap();
    v1.create(&PostParams::default(), &sent).await.unwrap();
    let seen = core.get("probe.1").await.unwrap();
    assert_eq!(message(&seen), "all good");
    assert_eq!(seen.involved_object.name.as_deref(), Some("x"));
    assert_eq!(seen.reporting_component.as_deref(), Some("example.com/prober"));
    assert_eq!(seen.action.as_deref(), Some("Probing"));

    // A patch through events.k8s.io is written against its own field names.
    v1.patch("probe.1", &PatchParams::default(), &Patch::Merge(json!({"note": "changed"}))).await.unwrap();
    assert_eq!(message(&core.get("probe.1").await.unwrap()), "changed");

    // And a core Event reads back under the new names.
    let old: Event = serde_json::from_value(json!({
        "metadata": {"name": "legacy.1"}, "involvedObject": {"kind": "Pod", "name": "y", "namespace": "default"},
        "reason": "Old", "message": "from the core API", "count": 4, "source": {"component": "old-controller"},
    }))
    .unwrap();
    core.create(&PostParams::default(), &old).await.unwrap();
    let viewed = v1.get("legacy.1").await.unwrap();
    assert_eq!(viewed.note.as_deref(), Some("from the core API"));
    assert_eq!(viewed.regarding.as_ref().and_then(|r| r.name.as_deref()), Some("y"));
    assert_eq!(viewed.deprecated_count, Some(4));
    assert_eq!(viewed.deprecated_source.as_ref().and_then(|s| s.component.as_deref()), Some("old-controller"));
    let names: Vec<String> =
        v1.list(&ListParams::default()).await.unwrap().items.iter().map(|e| e.name_any()).collect();
    assert_eq!(names, ["legacy.1", "probe.1"]);
}

#[tokio::test]
async fn a_lost_node_is_told_by_the_node_controllers_and_its_return_by_the_kubelet() {
    let (fleet, client) = sandbox(ClusterConfig { time_factor: 0.01, nodes: 1, ..ClusterConfig::named("a") }).await;
    Api::<StatefulSet>::default_namespaced(client.clone())
        .create(&PostParams::default(), &sts(1, "nginx:1.25"))
        .await
        .unwrap();
    eventually("web-0 started", || async { !find(&events(&client).await, "web-0", "Started").is_empty() }).await;
    let faults = &fleet.servers[0].cluster.faults;
    faults.set_node_down("node-1", true);
    eventually("the pod evicted", || async {
        !find(&events(&client).await, "web-0", "TaintManagerEviction").is_empty()
    })
    .await;
    let all = events(&client).await;
    let node = find(&all, "node-1", "NodeNotReady");
    assert_eq!(node.len(), 1);
    assert_eq!(message(node[0]), "Node node-1 status is now: NodeNotReady");
    assert_eq!(component(node[0]), "node-controller");
    assert_eq!(
        node[0].metadata.namespace.as_deref(),
        Some("default"),
        "a cluster-scoped object's Events live in default"
    );
    let pod = find(&all, "web-0", "NodeNotReady");
    assert_eq!((pod[0].type_.as_deref(), message(pod[0])), (Some("Warning"), "Node is not ready"));
    let evicted = find(&all, "web-0", "TaintManagerEviction");
    assert_eq!(message(evicted[0]), "Marking for deletion Pod default/web-0");
    assert_eq!(component(evicted[0]), "taint-eviction-controller");
    faults.set_node_down("node-1", false);
    eventually("the kubelet reports the node Ready", || async {
        find(&events(&client).await, "node-1", "NodeReady")
            .iter()
            .any(|e| message(e) == "Node node-1 status is now: NodeReady" && component(e) == "kubelet")
    })
    .await;
}

#[tokio::test]
async fn the_log_subresource_answers_as_the_apiserver_and_kubelet_do() {
    let (_f, client) = sandbox(ClusterConfig { time_factor: 0.01, ..ClusterConfig::named("a") }).await;
    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    sets.create(&PostParams::default(), &sts(2, "nginx:1.25")).await.unwrap();
    let container = |c: &str| LogParams { container: Some(c.into()), ..Default::default() };
    eventually("web-1 ready, says its log", || async {
        pods.logs("web-1", &container("c")).await.is_ok_and(|l| l.contains("ready: accepting connections"))
    })
    .await;
    let log = pods.logs("web-0", &LogParams::default()).await.unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines[0].starts_with("[sim] container c (nginx:1.25) of pod default/web-0 starting on node-"), "{log}");
    assert_eq!(lines.last(), Some(&"[sim] ready: accepting connections"));
    let tail = pods.logs("web-0", &LogParams { tail_lines: Some(1), timestamps: true, ..Default::default() }).await;
    let tail = tail.unwrap();
    assert_eq!(tail.lines().count(), 1);
    let (stamp, text) = tail.trim_end().split_once(' ').unwrap();
    assert!(stamp.parse::<jiff::Timestamp>().is_ok() && stamp.len() == 30, "{stamp}");
    assert_eq!(text, "[sim] ready: accepting connections");

    let bad = |r: kube::Result<String>| match r {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    };
    assert_eq!(
        bad(pods.logs("web-0", &container("nope")).await),
        (400, "container nope is not valid for pod web-0".into())
    );
    assert_eq!(
        bad(pods.logs("web-0", &LogParams { previous: true, ..Default::default() }).await),
        (400, r#"previous terminated container "c" in pod "web-0" not found"#.into())
    );
    assert_eq!(bad(pods.logs("web-9", &LogParams::default()).await), (404, r#"pods "web-9" not found"#.into()));

    // Following ends when the container exits.
    let mut follow = pods.log_stream("web-1", &LogParams { follow: true, ..Default::default() }).await.unwrap().lines();
    sets.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 1}}))).await.unwrap();
    let mut followed = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = follow.try_next().await.unwrap() {
            followed.push(line);
        }
    })
    .await;
    assert!(ended.is_ok(), "the follow ended with the container: {followed:?}");
    let n = followed.len();
    assert!(n >= 2, "{followed:?}");
    assert!(followed[n - 2].starts_with("[sim] received SIGTERM (grace period 30s)"), "{followed:?}");
    assert_eq!(followed[n - 1], "[sim] exited with code 0");
}
