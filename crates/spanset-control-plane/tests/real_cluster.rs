//! A real cluster starts from the binaries `tests/kube/build` makes, serves its API to its
//! administrator and nobody else, runs a StatefulSet's pods on its kwok node in order, and
//! leaves no process behind once stopped.

use std::{path::PathBuf, process::Command, time::Duration};

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::{Api, api::PostParams};
use spanset_control_plane::{Binaries, ClusterOptions, RealCluster};

/// The control plane of the newest release the repository builds. The build is a no-op once
/// cached; without Go the test fails under `CI` and is skipped, loudly, elsewhere.
fn binaries() -> Option<Binaries> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/kube/build");
    let out = match Command::new(&script).output() {
        Ok(out) if out.status.success() => out,
        other => {
            let why = format!("tests/kube/build failed: {other:?}");
            assert!(std::env::var_os("CI").is_none(), "{why}");
            eprintln!("SKIPPED: {why}");
            return None;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout.lines().last().expect("the build prints its directory");
    Some(Binaries::at(dir).expect("the build's directory holds every program"))
}

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_cluster_runs_a_statefulset_in_order_and_leaves_nothing_running() {
    let Some(binaries) = binaries() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = RealCluster::start(&binaries, &ClusterOptions::named("east", 1), dir.path()).await.unwrap();
    let client = cluster.client().await.unwrap();
    let version = client.apiserver_version().await.unwrap();
    assert!(binaries.dir().to_string_lossy().contains(&version.git_version), "{version:?} is the release built");

    let sets: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let set = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2, "serviceName": "web", "ordinals": {"start": 3},
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}},
        },
    }))
    .unwrap();
    sets.create(&PostParams::default(), &set).await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    eventually("web-3 and web-4 Ready", || async {
        let Ok(list) = pods.list(&Default::default()).await else { return false };
        let mut ready: Vec<String> = list
            .items
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        ready.sort();
        ready == ["web-3", "web-4"]
    })
    .await;
    // OrderedReady: web-4 was created only once web-3 was Ready.
    let three = pods.get("web-3").await.unwrap();
    let four = pods.get("web-4").await.unwrap();
    let ready_at = three.status.unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert!(four.metadata.creation_timestamp.unwrap().0 >= ready_at.last_transition_time.unwrap().0);

    // Nobody but the administrator: a client without a certificate is anonymous and forbidden.
    let anonymous = reqwest_free_get(cluster.server()).await;
    assert!(anonymous.contains("\"code\": 401") || anonymous.contains("\"code\": 403"), "{anonymous}");

    let dir_path = cluster.dir().to_path_buf();
    cluster.stop();
    let left = Command::new("pgrep").arg("-f").arg(dir_path.as_os_str()).output().unwrap();
    assert!(left.stdout.is_empty(), "processes left: {}", String::from_utf8_lossy(&left.stdout));
}

/// An unauthenticated GET of `/api/v1/pods`, by curl (which every machine of the suite has).
async fn reqwest_free_get(server: &str) -> String {
    let out = Command::new("curl").args(["-sk", &format!("{server}/api/v1/pods")]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}
