//! No escalation through the sandbox: a sandbox started by root to run real processes gives
//! another account of the machine nothing. As `nobody`, with no kubeconfig and no token, only
//! the addresses the sandbox printed, every request to a cluster's API and to the admin API is
//! refused, and the sandbox's kubeconfig, admin URL file and directories are closed to it. A
//! pod's root, reached with credentials, is root only inside: on the machine it is a user no
//! account has, and what it writes anywhere of the machine's directories stays in the
//! container's own layer (nothing lands on the machine). A sandbox asked to run real processes
//! without authentication refuses to start.

use std::{path::Path, process::Command};

use serde_json::Value;

use crate::{
    processes::live_processes_with,
    support::{self, DEADLINE, Kubectl, Sandbox, program, wait_until},
};

/// Runs a command as `nobody` (uid and gid 65534, no other group), with a home of its own.
fn as_nobody(home: &Path, argv: &[&str]) -> std::process::Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin"])
        .arg(format!("HOME={}", home.display()))
        .args(argv)
        .output()
        .expect("setpriv runs")
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn real_processes_without_authentication_are_refused_at_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["sim", "--clusters", "solo", "--run-images", "busybox", "--kubeconfig"])
        .arg(dir.path().join("kubeconfig"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error: {}", text(&out));
    assert!(text(&out).contains("--run-images") && text(&out).contains("add --auth"), "{}", text(&out));
    assert!(!dir.path().join("kubeconfig").exists(), "nothing was started or written");
    let out = Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["sandbox", "--no-auth", "--example", "etcd", "--kubeconfig"])
        .arg(dir.path().join("kubeconfig"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--no-auth: the sandbox runs pods of etcd as real processes"), "{}", text(&out));
}

#[test]
fn as_nobody_a_sandbox_run_by_root_with_real_processes_grants_nothing_and_its_pods_write_nothing_of_the_machine() {
    if program("sh", "dash").is_none() || program("kubectl", "kubectl").is_none() || program("curl", "curl").is_none() {
        return;
    }
    if !spanset_sim::cluster::processes::launch::running_as_root() {
        // Only root can start a sandbox whose containers run as other users, and only root can
        // become nobody to try it.
        assert!(std::env::var_os("CI").is_none(), "under CI the tests run as root");
        eprintln!("skipped: needs root");
        return;
    }
    let sandbox = Sandbox::start_with("solo", &["--auth", "--run-images", "busybox"]);
    let Some(k) = Kubectl::installed(&sandbox) else { return };
    let server = sandbox
        .banner
        .iter()
        .find_map(|l| l.strip_prefix("cluster solo: "))
        .expect("a `cluster solo:` line")
        .to_string();
    let admin = spanset_sim::cli::ctl::redacted(&sandbox.admin);
    assert_ne!(admin, sandbox.admin, "the printed admin URL carries its credentials");
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let nobody = |argv: &[&str]| as_nobody(home.path(), argv);

    // Every request without credentials is refused, by kubectl (given a made-up token, since
    // over HTTPS it asks for a user name rather than send nothing) and by hand.
    let kubectl = |args: &[&str]| {
        let mut argv = vec![
            "kubectl",
            "--server",
            &server,
            "--insecure-skip-tls-verify",
            "--token=made-up",
            "--request-timeout=30s",
        ];
        argv.extend(args);
        nobody(&argv)
    };
    for args in [
        &["get", "pods"][..],
        &["run", "escape", "--image", "busybox", "--", "sh", "-c", "sleep 3600"],
        &["create", "namespace", "mine"],
        &["auth", "whoami"],
    ] {
        let out = kubectl(args);
        assert!(!out.status.success(), "kubectl {args:?} as nobody: {}", text(&out));
        assert!(
            text(&out).contains("Unauthorized") || text(&out).contains("provide credentials"),
            "kubectl {args:?}: {}",
            text(&out)
        );
    }
    for (method, url) in [
        ("GET", format!("{server}/api/v1/namespaces/default/pods")),
        ("POST", format!("{server}/api/v1/namespaces/default/pods")),
        ("GET", format!("{admin}/clusters")),
        ("GET", format!("{admin}/ledger")),
        ("POST", format!("{admin}/clusters/solo/partition")),
        ("POST", format!("{admin}/clusters/solo/node-down?node=node-1&power-off=true")),
    ] {
        let out = nobody(&["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "-X", method, &url]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "401", "{method} {url} as nobody: {}", text(&out));
    }
    let clusters: Value = serde_json::from_str(
        &spanset_sim::cli::ctl::request(&sandbox.admin, "GET", "/clusters").expect("the admin URL's credentials pass"),
    )
    .unwrap();
    let faults = &clusters["clusters"][0]["faults"];
    assert_eq!(faults["partition"], "None", "no partition was made: {faults}");
    assert_eq!(faults["nodesDown"], serde_json::json!([]), "no node was powered off: {faults}");
    // What holds the credentials, and the sandbox's directories, are closed to it.
    let admin_file = format!("{}.admin", sandbox.kubeconfig.display());
    let kubeconfig = sandbox.kubeconfig.display().to_string();
    for file in [&kubeconfig, &admin_file] {
        let out = nobody(&["cat", file]);
        assert!(!out.status.success(), "nobody reads {file}: {}", text(&out));
    }
    assert_eq!(std::fs::read_to_string(&admin_file).unwrap().trim(), sandbox.admin, "the admin URL, kept beside");

    // With credentials: a pod's root tries to write where only the machine's root may.
    let machine_only = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(machine_only.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mark = format!("escape-{}", std::process::id());
    let targets = ["/var/tmp", "/usr/local", "/etc", "/opt"]
        .map(|d| format!("{d}/{mark}"))
        .into_iter()
        .chain([machine_only.path().join(&mark).display().to_string()])
        .collect::<Vec<_>>();
    let script = format!(
        "for f in {}; do if echo inside > \"$f\"; then echo wrote \"$f\"; else echo refused \"$f\"; fi; done; \
         echo done; while :; do sleep 0.1; done",
        targets.join(" ")
    );
    let marker = format!("local-users-{mark}");
    k.ok_with_stdin(
        &["apply", "-f", "-"],
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "root-inside"},
            "spec": {"volumes": [{"name": "v", "emptyDir": {}}],
              "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", script, marker],
                              "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]}})
        .to_string(),
    );
    wait_until("its writes are done", DEADLINE, || {
        String::from_utf8_lossy(&k.run(&["logs", "root-inside"]).stdout).lines().any(|l| l == "done")
    });
    // Its root's top-level directories are its own layer's, which it may write (as a real
    // container's root file system); below them, the machine's files are no user's of its
    // namespace, and stay as they are.
    let log = k.ok(&["logs", "root-inside"]);
    assert!(log.lines().any(|l| l == format!("wrote /etc/{mark}")), "{log}");
    assert!(log.lines().any(|l| l == format!("refused /usr/local/{mark}")), "{log}");
    // `kubectl exec` is root inside, and writes the same way.
    let exec = k.ok(&[
        "exec",
        "root-inside",
        "--",
        "sh",
        "-c",
        &format!("id -u; echo exec >> /etc/{mark}; cat /etc/{mark}; touch /v/mine"),
    ]);
    assert_eq!(exec.lines().collect::<Vec<_>>(), ["0", "inside", "exec"], "root inside, its root file system its own");
    for t in &targets {
        assert!(!Path::new(t).exists(), "{t} was written on the machine");
    }
    // On the machine the container's root is a user no account has, and so is what it made.
    let base = spanset_sim::cluster::processes::launch::ID_BASE;
    let pids = live_processes_with(&marker);
    assert!(!pids.is_empty(), "the container runs");
    for pid in pids {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let uid: u32 = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|u| u.parse().ok())
            .unwrap_or(0);
        assert!(uid >= base, "process {pid} runs as {uid} on the machine: {status}");
    }
    let p: Value = serde_json::from_str(&k.ok(&["get", "pod", "root-inside", "-o", "json"])).unwrap();
    let uid = p["metadata"]["uid"].as_str().unwrap();
    let volume = support::pod_volume_on_machine(uid, "v").expect("the pod's volume on the machine");
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(volume.join("mine")).unwrap());
    assert_eq!(owner, base, "a file of the pod's root belongs to the pod's user namespace's root");
    let out = nobody(&["ls", &volume.display().to_string()]);
    assert!(!out.status.success(), "nobody lists a pod's volume: {}", text(&out));
}
