//! `kubectl exec` against the sandbox: the refusals reach the user in words that say what to
//! do — a simulated container has no process to join, kubectl 1.29 and older (SPDY) are told
//! that 1.30+ is needed, a missing pod or container is worded as the apiserver words it — and
//! running a command needs `create` on `pods/exec`, over WebSocket too. What the runtime
//! refuses (a runnable container not running) comes back on the error stream.

use crate::support;

use support::{DEADLINE, Kubectl, Sandbox, wait_until};

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},
  "spec":{"containers":[{"name":"c","image":"nginx:1.25"}]}}"#;

const SIMULATED: &str = "container c runs the simulated image nginx:1.25; only images listed in --run-images run real processes that exec can join";

/// Creates the pod `web` (one simulated container `c`) and waits until it is on a node.
fn sandbox_with_pod(k: &Kubectl) {
    k.ok_with_stdin(&["apply", "-f", "-"], POD);
    wait_until("web is scheduled", DEADLINE, || {
        !k.ok(&["get", "pod", "web", "-o", "jsonpath={.spec.nodeName}"]).trim().is_empty()
    });
}

fn exec_refusals_reach_the_user(minor: u32) {
    let sandbox = Sandbox::start_with("solo", &["--auth"]);
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    let v = format!("kubectl 1.{minor}");
    sandbox_with_pod(&k);

    let simulated = k.fails(&["exec", "web", "--", "echo", "hi"]);
    assert!(simulated.contains(SIMULATED), "{v}: {simulated}");
    let missing = k.fails(&["exec", "nope", "--", "true"]);
    assert!(missing.contains(r#"pods "nope" not found"#), "{v}: {missing}");
    let container = k.fails(&["exec", "web", "-c", "sidecar", "--", "true"]);
    assert!(container.contains("container sidecar is not valid for pod web"), "{v}: {container}");

    // A role that may read pods and `get` pods/exec, as the WebSocket GET asks, may not run
    // commands: exec is `create` on pods/exec.
    k.ok(&["create", "serviceaccount", "viewer"]);
    // A day of simulated time: ten minutes are six real seconds at the sandbox's time factor.
    let token = k.ok(&["create", "token", "viewer", "--duration", "24h"]);
    let as_viewer = |args: &[&str]| {
        let mut all = vec!["--token", token.trim()];
        all.extend_from_slice(args);
        k.fails(&all)
    };
    k.ok(&["create", "role", "pod-viewer", "--verb=get,list", "--resource=pods,pods/exec"]);
    k.ok(&["create", "rolebinding", "viewer", "--role=pod-viewer", "--serviceaccount=default:viewer"]);
    let forbidden = as_viewer(&["exec", "web", "--", "true"]);
    assert!(
        forbidden.contains(
            r#"User "system:serviceaccount:default:viewer" cannot create resource "pods/exec" in API group "" in the namespace "default""#
        ),
        "{v}: {forbidden}"
    );
    k.ok(&["create", "role", "pod-exec", "--verb=create", "--resource=pods/exec"]);
    k.ok(&["create", "rolebinding", "exec", "--role=pod-exec", "--serviceaccount=default:viewer"]);
    let allowed = as_viewer(&["exec", "web", "--", "true"]);
    assert!(allowed.contains(SIMULATED), "{v}: with create on pods/exec the request reaches the pod: {allowed}");
}

#[test]
fn kubectl_exec_refusals_1_33() {
    exec_refusals_reach_the_user(33);
}

#[test]
fn kubectl_exec_refusals_1_30() {
    exec_refusals_reach_the_user(30);
}

/// kubectl 1.29 speaks SPDY, which the sandbox does not serve: it says so, and what to use.
#[test]
fn kubectl_1_29_is_told_to_use_1_30_or_newer() {
    let sandbox = Sandbox::start_with("solo", &["--auth"]);
    let Some(k) = Kubectl::new(29, &sandbox) else {
        return;
    };
    sandbox_with_pod(&k);
    let refused = k.fails(&["exec", "web", "--", "true"]);
    assert!(refused.contains("this sandbox serves exec over WebSocket only"), "{refused}");
    assert!(refused.contains("use kubectl 1.30 or newer"), "{refused}");
    let missing = k.fails(&["exec", "nope", "--", "true"]);
    assert!(missing.contains(r#"pods "nope" not found"#), "{missing}");
}

/// A container of a runnable image (`run_images`) that is not running: the runtime's refusal
/// comes back on the error stream of an accepted WebSocket, through the sandbox's own server.
#[tokio::test]
async fn a_runnable_container_not_running_is_refused_on_the_error_stream() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::{Api, Client, api::PostParams};
    use spanset_sim::{cluster::ClusterConfig, sandbox::fleet::Fleet};
    use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};

    let config = ClusterConfig { time_factor: 0.01, run_images: vec!["redis".into()], ..ClusterConfig::named("a") };
    let fleet = Fleet::start(vec![config], None).await.expect("sandbox starts");
    let url = fleet.servers[0].url();
    let client = Client::try_from(kube::Config::new(url.parse().unwrap())).expect("client");
    let pods: Api<Pod> = Api::default_namespaced(client);
    // Bound to a node whose kubelet is gone: on a node, never started.
    fleet.servers[0].cluster.faults.node_out("node-1", spanset_sim::cluster::faults::NodeOutage::Unreachable);
    let pod = serde_json::from_str(
        &POD.replace("nginx:1.25", "redis:7").replace(r#""spec":{"#, r#""spec":{"nodeName":"node-1","#),
    )
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    support::eventually("web is scheduled", || async {
        pods.get("web").await.is_ok_and(|p| p.spec.and_then(|s| s.node_name).is_some())
    })
    .await;

    let addr = url.trim_start_matches("http://");
    let mut req = format!("ws://{addr}/api/v1/namespaces/default/pods/web/exec?command=true&stdout=true")
        .into_client_request()
        .unwrap();
    req.headers_mut().insert("Sec-WebSocket-Protocol", "v5.channel.k8s.io".parse().unwrap());
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut ws, resp) = tokio_tungstenite::client_async(req, tcp).await.expect("the upgrade is accepted");
    assert_eq!(resp.headers()["Sec-WebSocket-Protocol"], "v5.channel.k8s.io");
    let mut status = Vec::new();
    let read = async {
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Binary(b) = m
                && b.first() == Some(&3)
            {
                status.extend_from_slice(&b[1..]);
            }
        }
    };
    tokio::time::timeout(DEADLINE, read).await.expect("the server ended the session");
    let status: serde_json::Value = serde_json::from_slice(&status).expect("a JSON Status on stream 3");
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["message"], "container c is not running");
}

/// The success path with the real kubectl: commands run inside a container of a runnable image
/// (its hostname, its first process), with stdin, stdout, stderr and the exit code.
fn exec_runs_in_a_real_container(minor: u32) {
    if support::program("sh", "dash").is_none() {
        return;
    }
    let sandbox = Sandbox::start_with("solo", &["--run-images", "busybox"]);
    let Some(k) = Kubectl::new(minor, &sandbox) else {
        return;
    };
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},
      "spec":{"containers":[{"name":"c","image":"busybox",
        "command":["sh","-c","trap 'exit 0' TERM; while :; do sleep 1; done"]}]}}"#;
    k.ok_with_stdin(&["apply", "-f", "-"], pod);
    wait_until("web is Ready", DEADLINE, || {
        k.ok(&["get", "pod", "web", "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"]).trim()
            == "True"
    });
    let v = format!("kubectl 1.{minor}");
    assert_eq!(k.ok(&["exec", "web", "--", "hostname"]).trim(), "web", "{v}");
    let first = k.ok(&["exec", "web", "--", "sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"]);
    assert!(first.starts_with("sh -c trap"), "{v}: the container's own first process: {first}");
    assert_eq!(k.ok_with_stdin(&["exec", "-i", "web", "--", "wc", "-l"], "a\nb\n").trim(), "2", "{v}");
    let out = k.run(&["exec", "web", "--", "sh", "-c", "echo out; echo err >&2; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{v}: the command's exit code");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "out", "{v}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("err") && err.contains("command terminated with exit code 3"), "{v}: {err}");
}

#[test]
fn kubectl_exec_runs_in_a_real_container_1_33() {
    exec_runs_in_a_real_container(33);
}

#[test]
fn kubectl_exec_runs_in_a_real_container_1_30() {
    exec_runs_in_a_real_container(30);
}
