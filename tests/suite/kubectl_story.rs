//! What a new user reads on the sandbox with kubectl 1.27–1.33 once a StatefulSet runs: the
//! Events in `kubectl describe`, `kubectl events` and `kubectl get events` (core and
//! events.k8s.io), the container logs in `kubectl logs` (with `--tail`, `--previous`, `-f` and
//! a bad container), and the `kubernetes` EndpointSlice.

use crate::support;

use support::{Background, DEADLINE, Kubectl, Sandbox, wait_until};

const STS: &str = r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  replicas: 2
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
  volumeClaimTemplates:
  - metadata: {name: www}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"#;

/// The first line of `text` holding every one of `words`, for a readable failure.
fn line_with<'a>(text: &'a str, words: &[&str]) -> Option<&'a str> {
    text.lines().find(|l| words.iter().all(|w| l.contains(w)))
}

fn assert_line(what: &str, text: &str, words: &[&str]) {
    assert!(line_with(text, words).is_some(), "{what}: no line with {words:?} in:\n{text}");
}

fn story(minor: u32) {
    let sandbox = Sandbox::start("solo");
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    k.ok_with_stdin(&["apply", "-f", "-"], STS);
    wait_until("web-1 says it is ready", DEADLINE, || {
        String::from_utf8_lossy(&k.run(&["logs", "web-1"]).stdout).contains("ready: accepting connections")
    });
    let v = format!("kubectl 1.{minor}");

    let sts = k.ok(&["describe", "sts", "web"]);
    assert_line(
        &v,
        &sts,
        &["Normal", "SuccessfulCreate", "statefulset-controller", "create Pod web-0 in StatefulSet web successful"],
    );
    assert_line(&v, &sts, &["SuccessfulCreate", "create Claim www-web-1 Pod web-1 in StatefulSet web success"]);
    let pod = k.ok(&["describe", "pod", "web-0"]);
    assert_line(&v, &pod, &["Scheduled", "default-scheduler", "Successfully assigned default/web-0 to node-"]);
    assert_line(&v, &pod, &["Pulling", "kubelet", r#"Pulling image "nginx:1.25""#]);
    assert_line(&v, &pod, &["Started", "kubelet", "Started container nginx"]);
    let pvc = k.ok(&["describe", "pvc", "www-web-0"]);
    assert_line(&v, &pvc, &["ProvisioningSucceeded", "Successfully provisioned volume pvc-"]);

    let events = k.ok(&["events", "--for", "pod/web-0"]);
    assert!(events.starts_with("LAST SEEN"), "{v} events:\n{events}");
    for reason in ["Scheduled", "Pulling", "Pulled", "Created", "Started"] {
        assert_line(&v, &events, &["Normal", reason, "Pod/web-0"]);
    }
    let table = k.ok(&["get", "events"]);
    let header: Vec<&str> = table.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], "{v}:\n{table}");
    assert_line(
        &v,
        &table,
        &["Normal", "SuccessfulCreate", "statefulset/web", "create Pod web-1 in StatefulSet web successful"],
    );
    let wide = k.ok(&["get", "events", "-o", "wide"]);
    assert_line(&v, &wide, &["Started", "pod/web-0", "spec.containers{nginx}", "kubelet, node-"]);
    let v1 = k.ok(&["get", "events.v1.events.k8s.io", "-o", "jsonpath={.items[*].reason}"]);
    assert!(v1.contains("Scheduled") && v1.contains("SuccessfulCreate"), "{v} events.k8s.io reasons: {v1}");

    let slices = k.ok(&["get", "endpointslices"]);
    let row: Vec<&str> = slices.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert_eq!(row.get(..4), Some(&["kubernetes", "IPv4", "6443", "192.168.0.2"][..]), "{v}:\n{slices}");

    let log = k.ok(&["logs", "web-0"]);
    assert_line(&v, &log, &["[sim] container nginx (nginx:1.25) of pod default/web-0 starting on node-"]);
    assert_eq!(k.ok(&["logs", "web-0", "--tail", "1"]), "[sim] ready: accepting connections\n");
    assert_line(&v, &k.ok(&["logs", "sts/web"]), &["of pod default/web-", "starting on node-"]);
    let previous = k.fails(&["logs", "web-0", "--previous"]);
    assert!(
        previous.contains(
            r#"Error from server (BadRequest): previous terminated container "nginx" in pod "web-0" not found"#
        ),
        "{v}: {previous}"
    );
    let bad = k.fails(&["get", "--raw", "/api/v1/namespaces/default/pods/web-0/log?container=nope"]);
    assert!(bad.contains("container nope is not valid for pod web-0"), "{v}: {bad}");

    // `logs -f` follows until the container exits.
    let mut follow = Background::spawn({
        let mut c = k.command();
        c.args(["logs", "-f", "web-1"]);
        c
    });
    follow.wait_for_line("the follower has the log so far", |l| l.contains("ready: accepting connections"));
    k.ok(&["scale", "sts", "web", "--replicas", "1"]);
    assert!(follow.wait_exit().success(), "{v} logs -f exits 0 when the container exits");
    let followed = follow.lines();
    assert_eq!(followed.last().map(String::as_str), Some("[sim] exited with code 0"), "{v}: {followed:?}");
    let killing = k.ok(&["events", "--for", "pod/web-1"]);
    assert_line(&v, &killing, &["Killing", "Stopping container nginx"]);
}

macro_rules! per_version {
    ($($name:ident => $minor:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            story($minor);
        }
    )*};
}

per_version! {
    story_1_27 => 27,
    story_1_28 => 28,
    story_1_29 => 29,
    story_1_30 => 30,
    story_1_31 => 31,
    story_1_32 => 32,
    story_1_33 => 33,
}
