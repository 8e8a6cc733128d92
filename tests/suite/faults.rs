//! Each fault of the sandbox's admin API, observed through kube-rs: refused and hung
//! partitions, latency, injected errors (absorbed or surfaced), cut watches, expired watches,
//! and a member that silently drops `.spec.ordinals`. Plus determinism: the same seed injects
//! the same errors.

use std::{
    sync::{Arc, atomic::Ordering},
    time::{Duration, Instant},
};

use futures::TryStreamExt;
use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::ConfigMap};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::watcher::{self, Event},
};
use serde_json::json;
use spanset_sim::{
    cluster::{
        Cluster, ClusterConfig,
        faults::{ErrorRate, Faults, Partition},
    },
    sandbox::fleet::Fleet,
};
use support::{DEADLINE, eventually};

use crate::support;

async fn sandbox() -> (Fleet, Arc<Cluster>, Api<ConfigMap>) {
    let config = ClusterConfig { time_factor: 0.01, nodes: 0, ..ClusterConfig::named("a") };
    let fleet = Fleet::start(vec![config], None).await.expect("sandbox starts");
    let client = Client::try_from(kube::Config::new(fleet.servers[0].url().parse().unwrap())).unwrap();
    let cluster = fleet.servers[0].cluster.clone();
    (fleet, cluster, Api::default_namespaced(client))
}

#[tokio::test]
async fn a_refused_partition_refuses_connections_until_healed() {
    let (f, cluster, api) = sandbox().await;
    cluster.faults.set_partition(Partition::Refuse);
    let addr = f.servers[0].addr;
    eventually("connections to be refused", || async { tokio::net::TcpStream::connect(addr).await.is_err() }).await;
    assert!(matches!(
        api.list(&ListParams::default()).await,
        Err(kube::Error::HyperError(_) | kube::Error::Service(_))
    ));
    cluster.faults.set_partition(Partition::None);
    eventually("the cluster to answer again", || async { api.list(&ListParams::default()).await.is_ok() }).await;
}

#[tokio::test]
async fn a_partition_from_outside_only_leaves_the_cluster_s_own_pods_their_api() {
    // A cluster whose pods run real processes serves them on a listener of their own.
    if support::program("unshare", "util-linux").is_none() {
        return;
    }
    let config =
        ClusterConfig { time_factor: 0.01, nodes: 0, run_images: vec!["busybox".into()], ..ClusterConfig::named("a") };
    let fleet = Fleet::start(vec![config], None).await.expect("sandbox starts");
    let cluster = fleet.servers[0].cluster.clone();
    let outside = fleet.servers[0].addr;
    let inside = cluster.api_endpoint.get().expect("the pods' endpoint").addr;
    assert_ne!(inside, outside, "the pods' `kubernetes` Service has an address of its own");
    let at = |addr: std::net::SocketAddr| {
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        Api::<ConfigMap>::default_namespaced(Client::try_from(config).unwrap())
    };
    let (from_outside, from_pods) = (at(outside), at(inside));
    cluster.faults.set_partition_outside();
    eventually("connections from outside refused", || async { tokio::net::TcpStream::connect(outside).await.is_err() })
        .await;
    assert!(from_outside.list(&ListParams::default()).await.is_err(), "cut off from outside");
    from_pods.list(&ListParams::default()).await.expect("its pods still reach its API");
    // A partition of the whole cluster cuts its pods off too.
    cluster.faults.set_partition(Partition::Refuse);
    eventually("the pods' connections refused", || async { tokio::net::TcpStream::connect(inside).await.is_err() })
        .await;
    cluster.faults.heal();
    eventually("both answer again", || async {
        from_outside.list(&ListParams::default()).await.is_ok() && from_pods.list(&ListParams::default()).await.is_ok()
    })
    .await;
}

#[tokio::test]
async fn a_hung_partition_accepts_and_never_answers_until_healed() {
    let (_f, cluster, api) = sandbox().await;
    cluster.faults.set_partition(Partition::Hang);
    let pending = tokio::spawn({
        let api = api.clone();
        async move { api.list(&ListParams::default()).await.map(|l| l.items.len()) }
    });
    // The request is accepted but not answered while hung: the controllers keep sweeping and
    // it stays pending.
    let sweeps = cluster.counters.statefulset_sweeps.load(Ordering::SeqCst);
    eventually("some sweeps", || async {
        cluster.faults.resync();
        cluster.counters.statefulset_sweeps.load(Ordering::SeqCst) > sweeps + 20
    })
    .await;
    assert!(!pending.is_finished(), "a hung cluster answers nothing");
    cluster.faults.set_partition(Partition::None);
    assert_eq!(tokio::time::timeout(DEADLINE, pending).await.unwrap().unwrap().unwrap(), 0, "answered after the heal");
}

#[tokio::test]
async fn latency_delays_every_request() {
    let (_f, cluster, api) = sandbox().await;
    cluster.faults.set_latency_ms(300);
    let start = Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    // A lower bound only: the sleep is at least this long, however loaded the machine.
    assert!(start.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn injected_500s_surface_and_503s_are_absorbed_by_the_client_retry() {
    let (_f, cluster, api) = sandbox().await;
    cluster.faults.set_errors(Some(ErrorRate::seeded(1.0, 500)));
    match api.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (500, "InternalError")),
        other => panic!("expected a 500, got {other:?}"),
    }
    // kube-rs retries 503s by itself. Every other request fails, starting with the first: each
    // list is refused once and answered on its retry, none by luck of a draw.
    cluster.faults.set_errors(Some(ErrorRate::even(0.5, 503)));
    let injected = cluster.faults.injected();
    for i in 0..10 {
        api.list(&ListParams::default()).await.unwrap_or_else(|e| panic!("list {i}: a 503 is retried, yet {e}"));
    }
    assert_eq!(cluster.faults.injected() - injected, 10, "each of the ten lists was refused once, then retried");
}

#[tokio::test]
async fn cut_watches_are_resumed_and_expired_watches_relist() {
    let (_f, cluster, api) = sandbox().await;
    api.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "c0"}})).unwrap())
        .await
        .unwrap();
    let events = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = events.clone();
    let stream = kube::runtime::watcher(api.clone(), watcher::Config::default());
    let task = tokio::spawn(async move {
        let mut stream = Box::pin(stream);
        loop {
            match stream.try_next().await {
                Ok(Some(Event::Init)) => sink.lock().unwrap().push("init".into()),
                Ok(Some(Event::Apply(c))) => sink.lock().unwrap().push(format!("apply {}", c.metadata.name.unwrap())),
                Ok(_) => {}
                Err(watcher::Error::WatchError(status)) => sink.lock().unwrap().push(format!("error {}", status.code)),
                Err(e) => sink.lock().unwrap().push(format!("other error {e}")),
            }
        }
    });
    eventually("the initial list", || async { events.lock().unwrap().iter().any(|e| e == "init") }).await;
    let lists = cluster.counters.lists.load(Ordering::SeqCst);
    let watches = cluster.counters.watches.load(Ordering::SeqCst);
    cluster.storage.close_watches();
    eventually("a re-watch", || async { cluster.counters.watches.load(Ordering::SeqCst) > watches }).await;
    assert_eq!(cluster.counters.lists.load(Ordering::SeqCst), lists, "a cut watch resumes without relisting");
    api.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "c1"}})).unwrap())
        .await
        .unwrap();
    eventually("the change after the cut", || async { events.lock().unwrap().iter().any(|e| e == "apply c1") }).await;
    // Expired: the next watch gets 410 and the watcher lists again.
    cluster.storage.compact();
    cluster.storage.close_watches();
    eventually("a relist after 410", || async { cluster.counters.lists.load(Ordering::SeqCst) > lists }).await;
    assert!(events.lock().unwrap().iter().any(|e| e == "error 410"), "{:?}", events.lock().unwrap());
    task.abort();
}

#[tokio::test]
async fn a_member_that_drops_ordinals_is_caught_by_reading_back() {
    let (f, cluster, _) = sandbox().await;
    let client = Client::try_from(kube::Config::new(f.servers[0].url().parse().unwrap())).unwrap();
    let sets: Api<StatefulSet> = Api::default_namespaced(client);
    cluster.faults.set_drop_ordinals(true);
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "ordinals": {"start": 5}, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }))
    .unwrap();
    let stored = sets.create(&PostParams::default(), &sts).await.unwrap();
    assert!(stored.spec.as_ref().unwrap().ordinals.is_none(), "accepted, yet silently dropped");
    let patched = sets
        .patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"ordinals": {"start": 7}}})))
        .await
        .unwrap();
    assert!(patched.spec.unwrap().ordinals.is_none());
    cluster.faults.set_drop_ordinals(false);
    let kept = sets
        .patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"ordinals": {"start": 7}}})))
        .await
        .unwrap();
    assert_eq!(kept.spec.unwrap().ordinals.unwrap().start, Some(7));
}

#[test]
fn the_same_seed_injects_the_same_errors() {
    let draw = |seed| {
        let f = Faults::new(seed);
        f.set_errors(Some(ErrorRate::seeded(0.3, 500)));
        (0..200).map(|_| f.draw_error().is_some()).collect::<Vec<_>>()
    };
    assert_eq!(draw(7), draw(7));
    assert_ne!(draw(7), draw(8));
    let hits = draw(7).iter().filter(|x| **x).count();
    assert!((30..=90).contains(&hits), "about 30% of 200: {hits}");
}

/// The errors a seed injects do not depend on the uids and names the cluster drew meanwhile
/// (the objects a run happens to create): they come from a generator of their own.
#[test]
fn injected_errors_do_not_depend_on_the_objects_created() {
    let draw = |uids_between: usize| {
        let f = Faults::for_cluster(7, "east");
        f.set_errors(Some(ErrorRate::seeded(0.3, 500)));
        (0..200)
            .map(|_| {
                for _ in 0..uids_between {
                    f.random_uid();
                }
                f.draw_error().is_some()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(0), draw(3));
}
