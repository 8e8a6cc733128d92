//! Images the sandbox's kubelets cannot pull, through the real kubectl: a pod of a
//! `doesnotexist` image (or of one marked with `sim-ctl image-unpullable`) stays Pending,
//! `ErrImagePull` then `ImagePullBackOff` with the kubelet's messages and Events, and starts
//! on its next back-off retry once the image is marked pullable; a StatefulSet rolling update
//! to such an image stops at its first pod, under OrderedReady and Parallel; and Kruise's
//! in-place update to one leaves the pod Running with that container waiting, unready. Every
//! poll from the image change on checks the whole timeline, and the ledger stays clean.

use crate::support;

use serde_json::Value;
use support::{Background, DEADLINE, Kubectl, Sandbox, wait_until};

const MISSING: &str = "nginx:doesnotexist";
const NOT_FOUND: &str = "rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/nginx:doesnotexist\": failed to resolve reference \"docker.io/library/nginx:doesnotexist\": docker.io/library/nginx:doesnotexist: not found";

fn json(k: &Kubectl, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&k.ok(&all)).expect("kubectl prints JSON")
}

fn field(k: &Kubectl, pod: &str, path: &str) -> String {
    k.ok(&["get", "pod", pod, "-o", &format!("jsonpath={path}")])
}

/// The Events about one object: (type, reason, message, count).
fn events(k: &Kubectl, object: &str) -> Vec<(String, String, String, u64)> {
    let list = json(k, &["get", "events", "--field-selector", &format!("involvedObject.name={object}")]);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let s = |f: &str| e[f].as_str().unwrap_or("").to_string();
            (s("type"), s("reason"), s("message"), e["count"].as_u64().unwrap_or(1))
        })
        .collect()
}

/// How many times the kubelet reported `Error: ErrImagePull` for an object (one per failed pull).
fn failed_pulls(k: &Kubectl, object: &str) -> u64 {
    events(k, object).iter().filter(|e| e.1 == "Failed" && e.2 == "Error: ErrImagePull").map(|e| e.3).sum()
}

/// The StatefulSet controller's sweeps so far in the first cluster, so that "it went on
/// waiting" is a counted fact, never a sleep.
fn sweeps(sandbox: &Sandbox) -> u64 {
    let doc: Value = serde_json::from_str(&sandbox.ctl_ok(&["clusters"])).expect("sim-ctl clusters prints JSON");
    doc["clusters"][0]["statefulsetSweeps"].as_u64().expect("a sweep count")
}

/// Wakes the controllers of the first cluster for ten more sweeps, one at a time (they sleep
/// while idle), and returns the sweeps so far.
fn resynced(sandbox: &Sandbox) -> u64 {
    let doc: Value = serde_json::from_str(&sandbox.ctl_ok(&["clusters"])).expect("sim-ctl clusters prints JSON");
    let name = doc["clusters"][0]["name"].as_str().expect("a cluster name").to_string();
    for _ in 0..10 {
        let from = sweeps(sandbox);
        wait_until("a resync's sweep", DEADLINE, || {
            sandbox.ctl_ok(&["resync", &name]);
            sweeps(sandbox) > from
        });
    }
    sweeps(sandbox)
}

/// The `READY` and `STATUS` columns of `kubectl get pod NAME`.
fn row(k: &Kubectl, pod: &str) -> (String, String) {
    let out = k.ok(&["get", "pod", pod]);
    let cols: Vec<String> = out.lines().nth(1).unwrap_or("").split_whitespace().map(str::to_string).collect();
    (cols.get(1).cloned().unwrap_or_default(), cols.get(2).cloned().unwrap_or_default())
}

fn ledger_clean(sandbox: &Sandbox) {
    let out = sandbox.ctl_ok(&["ledger", "--check"]);
    assert!(out.starts_with("ledger ok"), "{out}");
}

/// One pod as a poll sees it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    uid: String,
    image: String,
    phase: String,
    ready: bool,
    waiting: String,
}

/// The pods with label `app=web`, by name.
fn web_pods(k: &Kubectl) -> std::collections::BTreeMap<String, Seen> {
    let list = json(k, &["get", "pods", "-l", "app=web"]);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let ready = p["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
            let seen = Seen {
                uid: p["metadata"]["uid"].as_str().unwrap_or("").into(),
                image: p["spec"]["containers"][0]["image"].as_str().unwrap_or("").into(),
                phase: p["status"]["phase"].as_str().unwrap_or("").into(),
                ready: ready && p["metadata"]["deletionTimestamp"].is_null(),
                waiting: p
                    .pointer("/status/containerStatuses/0/state/waiting/reason")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
            };
            (p["metadata"]["name"].as_str().unwrap_or("").to_string(), seen)
        })
        .collect()
}

/// A pod of a missing image waits with the kubelet's reasons, messages and Events, as do pods
/// of an image marked unpullable; marked pullable, both start on their next retry.
fn a_missing_image_backs_off_until_it_can_be_pulled(minor: u32) {
    let sandbox = Sandbox::start("solo");
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    let mut watch = k.command();
    watch.args(["get", "pods", "--watch"]);
    let watch = Background::spawn(watch);
    k.ok(&["run", "bad", "--image", MISSING]);
    // The fully qualified name marks the short one.
    sandbox.ctl_ok(&["image-unpullable", "solo", "docker.io/library/nginx:1.25"]);
    k.ok(&["run", "marked", "--image", "nginx:1.25"]);

    // ErrImagePull, then ImagePullBackOff, again at each retry: the watch sees both.
    for reason in ["ErrImagePull", "ImagePullBackOff"] {
        for pod in ["bad", "marked"] {
            watch
                .wait_for_line(&format!("{pod} {reason}"), |l| l.starts_with(&format!("{pod} ")) && l.contains(reason));
        }
    }
    wait_until("bad backs off", DEADLINE, || {
        field(&k, "bad", "{.status.containerStatuses[0].state.waiting.reason}") == "ImagePullBackOff"
    });
    let message = field(&k, "bad", "{.status.containerStatuses[0].state.waiting.message}");
    assert!(
        message == format!("Back-off pulling image \"{MISSING}\": ErrImagePull: {NOT_FOUND}") || message == NOT_FOUND,
        "kubectl 1.{minor}: {message}"
    );
    assert_eq!(field(&k, "bad", "{.status.phase} {.status.containerStatuses[0].ready}"), "Pending false");
    let (ready, status) = row(&k, "bad");
    assert_eq!(ready, "0/1");
    assert!(["ErrImagePull", "ImagePullBackOff"].contains(&status.as_str()), "kubectl 1.{minor}: STATUS {status}");
    let logs = k.fails(&["logs", "bad"]);
    assert!(
        logs.contains("container \"bad\" in pod \"bad\" is waiting to start: trying and failing to pull image")
            || logs.contains("container \"bad\" in pod \"bad\" is waiting to start: image can't be pulled"),
        "kubectl 1.{minor}: {logs}"
    );

    wait_until("every kubelet Event of a failed pull", DEADLINE, || {
        let seen = events(&k, "bad");
        let has = |t: &str, r: &str, m: &str| seen.iter().any(|e| e.0 == t && e.1 == r && e.2 == m);
        has("Normal", "Pulling", &format!("Pulling image \"{MISSING}\""))
            && has("Warning", "Failed", &format!("Failed to pull image \"{MISSING}\": {NOT_FOUND}"))
            && has("Warning", "Failed", "Error: ErrImagePull")
            && has("Normal", "BackOff", &format!("Back-off pulling image \"{MISSING}\""))
            && has("Warning", "Failed", "Error: ImagePullBackOff")
    });
    let all = json(&k, &["get", "events", "--field-selector", "involvedObject.name=bad,reason=BackOff"]);
    let backoff = &all["items"][0];
    assert_eq!(backoff["source"]["component"], "kubelet");
    assert_eq!(backoff["involvedObject"]["fieldPath"], "spec.containers{bad}");
    assert!(!events(&k, "bad").iter().any(|e| e.1 == "Started"), "nothing started");
    assert!(events(&k, "marked").iter().any(|e| e.2 == "Failed to pull image \"nginx:1.25\": rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/nginx:1.25\": failed to resolve reference \"docker.io/library/nginx:1.25\": docker.io/library/nginx:1.25: not found"));

    // Bad input changes nothing.
    let faults = || -> Value {
        let doc: Value = serde_json::from_str(&sandbox.ctl_ok(&["clusters"])).expect("sim-ctl clusters prints JSON");
        doc["clusters"][0]["faults"].clone()
    };
    let before = faults();
    let out = sandbox.ctl(&["image-pullable", "solo", "has space"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("image-pullable: image must be an image reference"));
    let out = sandbox.ctl(&["image-pullable", "nowhere", MISSING]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no simulated cluster named \"nowhere\""));
    assert_eq!(faults(), before);

    sandbox.ctl_ok(&["image-pullable", "solo", MISSING]);
    sandbox.ctl_ok(&["image-pullable", "solo", "nginx:1.25"]);
    for pod in ["bad", "marked"] {
        wait_until(&format!("{pod} runs and is ready"), DEADLINE, || {
            field(&k, pod, "{.status.phase} {.status.conditions[?(@.type==\"Ready\")].status}") == "Running True"
        });
        assert_eq!(row(&k, pod), ("1/1".into(), "Running".into()));
        assert_eq!(field(&k, pod, "{.status.containerStatuses[0].restartCount}"), "0");
    }
    // The container's own log (Events may be past the kubelet's spam filter by now).
    let log = k.ok(&["logs", "bad"]);
    assert!(log.contains(&format!("[sim] container bad ({MISSING}) of pod default/bad starting")), "{log}");
}

#[test]
fn a_missing_image_backs_off_1_27() {
    a_missing_image_backs_off_until_it_can_be_pulled(27);
}

#[test]
fn a_missing_image_backs_off_1_33() {
    a_missing_image_backs_off_until_it_can_be_pulled(33);
}

const STS: &str = r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  replicas: 3
  podManagementPolicy: POLICY
  serviceName: web
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
"#;

/// A StatefulSet's rolling update to a missing image: web-2 is recreated and backs off, and
/// nothing else moves — over several failed pulls and many controller sweeps, web-0 and web-1
/// keep running their old image, Ready, with their uids; never more than one pod down. Once
/// the image can be pulled, the rollout goes on to the end, one pod at a time.
fn a_rolling_update_to_a_missing_image_stops_at_its_first_pod(policy: &str) {
    let sandbox = Sandbox::start("solo");
    let Some(k) = Kubectl::new(33, &sandbox) else {
        return;
    };
    k.ok_with_stdin(&["apply", "-f", "-"], &STS.replace("POLICY", policy));
    wait_until("three pods ready", DEADLINE, || {
        let pods = web_pods(&k);
        pods.len() == 3 && pods.values().all(|p| p.ready)
    });
    let before = web_pods(&k);
    k.ok(&["set", "image", "statefulset/web", &format!("nginx={MISSING}")]);

    // Every poll from the change on: at most one pod unavailable (a missing pod counts).
    let poll = || {
        let pods = web_pods(&k);
        let down = ["web-0", "web-1", "web-2"].iter().filter(|n| !pods.get(**n).is_some_and(|p| p.ready)).count();
        assert!(down <= 1, "{policy}: two pods down at once: {pods:#?}");
        pods
    };
    let untouched = |pods: &std::collections::BTreeMap<String, Seen>| {
        for name in ["web-0", "web-1"] {
            assert_eq!(pods.get(name), Some(&before[name]), "{policy}: {name} was touched");
        }
    };
    wait_until("web-2 recreated with the missing image, backing off", DEADLINE, || {
        let pods = poll();
        untouched(&pods);
        pods.get("web-2").is_some_and(|p| {
            p.image == MISSING
                && p.uid != before["web-2"].uid
                && p.phase == "Pending"
                && p.waiting == "ImagePullBackOff"
        })
    });
    let swept = sweeps(&sandbox);
    wait_until("three failed pulls and a hundred controller sweeps later", DEADLINE, || {
        let pods = poll();
        untouched(&pods);
        failed_pulls(&k, "web-2") >= 3 && resynced(&sandbox) >= swept + 100
    });
    let counts = k.ok(&["get", "sts", "web", "-o", "jsonpath={.status.updatedReplicas} {.status.readyReplicas}"]);
    assert_eq!(counts, "1 2", "{policy}");

    sandbox.ctl_ok(&["image-pullable", "solo", MISSING]);
    wait_until("the rollout finished", DEADLINE, || {
        let pods = poll();
        pods.len() == 3 && pods.values().all(|p| p.ready && p.image == MISSING)
    });
    let after = web_pods(&k);
    assert!(after.iter().all(|(n, p)| p.uid != before[n].uid), "{policy}: every pod recreated");
    ledger_clean(&sandbox);
}

#[test]
fn a_rolling_update_to_a_missing_image_stops_ordered_ready() {
    a_rolling_update_to_a_missing_image_stops_at_its_first_pod("OrderedReady");
}

#[test]
fn a_rolling_update_to_a_missing_image_stops_parallel() {
    a_rolling_update_to_a_missing_image_stops_at_its_first_pod("Parallel");
}

/// Kruise's in-place update to a missing image: web-1 keeps its uid and stays Running, its
/// container stopped and waiting (`ImagePullBackOff`, its last run terminated), the pod
/// unready; web-0 is not touched. Once the image can be pulled, the container starts (one
/// restart), and web-0 follows.
#[test]
fn an_in_place_update_to_a_missing_image_leaves_the_container_waiting() {
    let sandbox = Sandbox::start_with("solo", &["--kruise"]);
    let Some(k) = Kubectl::new(33, &sandbox) else {
        return;
    };
    k.ok_with_stdin(&["apply", "-f", "-"], support::KRUISE_IN_PLACE);
    wait_until("two pods ready", DEADLINE, || {
        let pods = web_pods(&k);
        pods.len() == 2 && pods.values().all(|p| p.ready)
    });
    let before = web_pods(&k);
    let image =
        format!(r#"{{"spec":{{"template":{{"spec":{{"containers":[{{"name":"main","image":"{MISSING}"}}]}}}}}}}}"#);
    k.ok(&["patch", "asts", "web", "--type", "merge", "-p", &image]);

    let poll = || {
        let pods = web_pods(&k);
        assert_eq!(pods.get("web-0"), Some(&before["web-0"]), "web-0 was touched: {pods:#?}");
        assert_eq!(pods.get("web-1").map(|p| &p.uid), Some(&before["web-1"].uid), "web-1 was recreated");
        assert_eq!(pods["web-1"].phase, "Running", "web-1 left Running: {pods:#?}");
        pods
    };
    wait_until("web-1's container waits for the missing image", DEADLINE, || {
        poll()["web-1"].waiting == "ImagePullBackOff"
    });
    let (ready, status) = row(&k, "web-1");
    assert_eq!(ready, "0/1");
    assert!(["ErrImagePull", "ImagePullBackOff"].contains(&status.as_str()), "STATUS {status}");
    let last = field(&k, "web-1", "{.status.containerStatuses[0].lastState.terminated.reason}");
    assert_eq!(last, "Completed", "the old instance was stopped");
    assert_eq!(field(&k, "web-1", "{.status.containerStatuses[0].restartCount}"), "0");
    let swept = sweeps(&sandbox);
    wait_until("three failed pulls and a hundred controller sweeps later", DEADLINE, || {
        let pods = poll();
        !pods["web-1"].ready && failed_pulls(&k, "web-1") >= 3 && resynced(&sandbox) >= swept + 100
    });
    let killed = events(&k, "web-1");
    assert!(killed.iter().any(|e| e.1 == "Killing" && e.2 == "Container main definition changed, will be restarted"));

    sandbox.ctl_ok(&["image-pullable", "solo", MISSING]);
    wait_until("both pods updated in place and ready", DEADLINE, || {
        let pods = web_pods(&k);
        pods.len() == 2 && pods.values().all(|p| p.ready && p.image == MISSING && p.waiting.is_empty())
    });
    let after = web_pods(&k);
    assert!(after.iter().all(|(n, p)| p.uid == before[n].uid), "updated in place, not recreated");
    assert_eq!(field(&k, "web-1", "{.status.containerStatuses[0].restartCount}"), "1");
    assert_eq!(field(&k, "web-1", "{.status.containerStatuses[0].image}"), MISSING);
    ledger_clean(&sandbox);
}
