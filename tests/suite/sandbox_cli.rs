//! `spanset sandbox`, the README's first command: simulated host and members, the example
//! federation sliced 0-1, 2-3, 4-5, metrics served, kubectl working, a clean stop on SIGTERM;
//! and `spanset sandbox --kruise east,west`: the example as Advanced StatefulSets, with the
//! member left without OpenKruise out of the placement and named in the Degraded condition.

use crate::support;

use std::{
    io::{BufRead, BufReader, Read},
    process::{Command, Stdio},
    sync::{Arc, Mutex},
};

use support::{DEADLINE, wait_until};

fn http_get(addr: &str, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).expect("metrics endpoint accepts");
    std::io::Write::write_all(&mut stream, format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes()).unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).unwrap();
    body
}

/// `spanset sandbox FLAGS` with its stdout lines collected as they come.
fn start_sandbox(kubeconfig: &std::path::Path, flags: &[&str]) -> (std::process::Child, Arc<Mutex<Vec<String>>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["sandbox", "--time-factor", "0.01", "--metrics-addr", "127.0.0.1:0", "--kubeconfig"])
        .arg(kubeconfig)
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spanset sandbox starts");
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    (child, lines)
}

/// Waits until the live table shows `cluster` holding `ordinals` of default/redis, `ready`.
fn wait_row(lines: &Arc<Mutex<Vec<String>>>, cluster: &str, ordinals: &str, ready: &str) {
    wait_until(&format!("{cluster} {ordinals} ready in the table"), DEADLINE * 2, || {
        lines.lock().unwrap().iter().any(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells.len() >= 4
                && cells[0] == "default/redis"
                && cells[1] == cluster
                && cells[2] == ordinals
                && cells[3] == ready
        })
    });
}

/// Sends SIGTERM and asserts a clean exit.
fn stop(mut child: std::process::Child) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < DEADLINE, "the sandbox stops on SIGTERM");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status}");
}

/// kubectl 1.33 against the sandbox (`None` without kubectl, which CI refuses).
fn kubectl(kubeconfig: &std::path::Path, context: &str, args: &[&str]) -> Option<String> {
    let kubectl = support::kubectl_binary(33)?;
    let out = Command::new(kubectl)
        .args(["--kubeconfig", kubeconfig.to_str().unwrap(), "--context", context])
        .args(args)
        .output()
        .unwrap();
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_kruise_sandbox_runs_the_example_as_advanced_statefulsets_where_openkruise_is() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("sandbox.kubeconfig");
    let (child, lines) = start_sandbox(&kubeconfig, &["--kruise", "east,west"]);
    wait_until("ready", DEADLINE, || lines.lock().unwrap().iter().any(|l| l == "ready"));
    // Central has no OpenKruise: the six replicas go to east and west.
    wait_row(&lines, "east", "0-2", "3/3");
    wait_row(&lines, "west", "3-5", "3/3");
    let jsonpath = "jsonpath={.spec.ordinals.start}/{.spec.replicas}";
    if let Some(out) = kubectl(&kubeconfig, "west", &["get", "asts", "redis", "-o", jsonpath]) {
        assert_eq!(out, "3/3", "west runs an Advanced StatefulSet");
        let backend = kubectl(&kubeconfig, "host", &["get", "fsts", "redis", "-o", "jsonpath={.spec.backend}"]);
        assert_eq!(backend.as_deref(), Some("AdvancedStatefulSet"));
        let condition = "jsonpath={.status.conditions[?(@.type==\"Degraded\")].message}";
        let degraded = kubectl(&kubeconfig, "host", &["get", "fsts", "redis", "-o", condition]).unwrap_or_default();
        assert!(degraded.contains("central (Incompatible") && degraded.contains("apps.kruise.io"), "{degraded}");
    }
    stop(child);
}

#[test]
fn the_sandbox_runs_the_example_federation_across_three_members_until_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("sandbox.kubeconfig");
    let (child, lines) = start_sandbox(&kubeconfig, &[]);
    let has = |pred: &dyn Fn(&str) -> bool| lines.lock().unwrap().iter().any(|l| pred(l));
    wait_until("ready", DEADLINE, || has(&|l| l == "ready"));
    // As deployed: every cluster over HTTPS with authentication, the admin URL carrying its token.
    for name in ["host", "east", "west", "central"] {
        assert!(has(&|l| l.starts_with(&format!("cluster {name}: https://127.0.0.1:"))), "a line for {name}");
        assert!(has(&|l| l.starts_with(&format!("dns {name}: 127.0.0.1:"))), "a DNS line for {name}");
    }
    assert!(has(&|l| l.starts_with("admin: http://sandbox:")));
    // The live table shows the three slices, all Ready.
    for (cluster, ordinals) in [("east", "0-1"), ("west", "2-3"), ("central", "4-5")] {
        wait_row(&lines, cluster, ordinals, "2/2");
    }
    let metrics_line =
        lines.lock().unwrap().iter().find_map(|l| l.strip_prefix("metrics: http://").map(str::to_string));
    let addr = metrics_line.expect("a metrics line").trim_end_matches("/metrics").to_string();
    let metrics = http_get(&addr, "/metrics");
    assert!(
        metrics.contains("spanset_slice_replicas{cluster=\"east\",federation=\"default/redis\",state=\"ready\"} 2"),
        "{metrics}"
    );
    let ready = http_get(&addr, "/readyz");
    assert!(ready.lines().next().is_some_and(|l| l.contains(" 200 ")), "{ready}");
    // kubectl works against the written kubeconfig.
    let jsonpath = "jsonpath={.spec.ordinals.start}/{.spec.replicas}";
    if let Some(out) = kubectl(&kubeconfig, "west", &["get", "sts", "redis", "-o", jsonpath]) {
        assert_eq!(out, "2/2");
    }
    // Each member was joined: its guards are installed, read back, and refuse a hand scale.
    let guards = || kubectl(&kubeconfig, "host", &["get", "mc", "west", "-o", "jsonpath={.status.guards[0]}"]);
    if guards().is_some() {
        wait_until("west's admission policies read back in force", DEADLINE, || {
            guards().is_some_and(|g| g.contains(r#""inForce":true"#) && g.contains("AdmissionPolicies"))
        });
        let out = Command::new("kubectl")
            .args(["--context", "west", "scale", "sts", "redis", "--replicas", "1", "--kubeconfig"])
            .arg(&kubeconfig)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("ValidatingAdmissionPolicy 'spanset-owner-scale'"), "{err}");
        let replicas = kubectl(&kubeconfig, "west", &["get", "sts", "redis", "-o", "jsonpath={.spec.replicas}"]);
        assert_eq!(replicas.as_deref(), Some("2"), "the refused scale changed nothing");
    }
    // `spanset status` reads the same federation from the host.
    let out = Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["status", "default/redis", "-o", "json", "--context", "host", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status prints JSON");
    let text = doc.to_string();
    assert!(text.contains("\"ready\":\"6/6\""), "{text}");
    for cluster in ["east", "west", "central"] {
        assert!(text.contains(&format!("\"cluster\":\"{cluster}\"")), "{cluster} in {text}");
    }
    stop(child);
}

/// Runs `spanset ARGS` to its exit, killed (and failed) if it outlives the deadline.
fn run_to_exit(args: &[&str], kubeconfig: &std::path::Path) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spanset starts");
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("spanset {args:?} still running: it should have refused to start");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_sandbox_whose_metrics_port_is_taken_exits_naming_it_and_writes_no_kubeconfig() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.kubeconfig");
    let old = dir.path().join("old.kubeconfig");
    std::fs::write(&old, "# a kubeconfig from an earlier sandbox\n").unwrap();
    for kubeconfig in [&fresh, &old] {
        let before = std::fs::read_to_string(kubeconfig).ok();
        let args = ["sandbox", "--time-factor", "0.01", "--no-example", "--clusters", "east", "--metrics-addr", &addr];
        let out = run_to_exit(&args, kubeconfig);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
        assert!(stderr.contains(&addr), "the error names {addr}: {stderr}");
        assert!(!stdout.lines().any(|l| l == "ready"), "{stdout}");
        assert_eq!(
            std::fs::read_to_string(kubeconfig).ok(),
            before,
            "{}: neither written nor overwritten",
            kubeconfig.display()
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind: {leftovers:?}");
    }
    drop(taken);
}

#[test]
fn a_sandbox_without_its_controller_leaves_the_federation_to_a_spanset_run_started_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("sandbox.kubeconfig");
    let (child, lines) = start_sandbox(&kubeconfig, &["--no-controller"]);
    let has = |pred: &dyn Fn(&str) -> bool| lines.lock().unwrap().iter().any(|l| pred(l));
    wait_until("ready", DEADLINE, || has(&|l| l == "ready"));
    assert!(!has(&|l| l.starts_with("metrics: ")), "no controller, no metrics line: {:?}", lines.lock().unwrap());
    // The controller a user (or `spanset drill chaos --controllers N`) starts drives it.
    let mut run = Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["run", "--context", "host", "--metrics-addr", "127.0.0.1:0", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spanset run starts");
    for (cluster, ordinals) in [("east", "0-1"), ("west", "2-3"), ("central", "4-5")] {
        wait_row(&lines, cluster, ordinals, "2/2");
    }
    let _ = run.kill();
    let _ = run.wait();
    stop(child);
}
