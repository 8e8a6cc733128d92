//! `spanset sim` and `spanset sim-ctl` as a user runs them: the banner, the kubeconfig, clean
//! exit on SIGTERM, and one-line errors with exit code 2 for bad flags.

use crate::support;

use std::process::Command;

use support::Sandbox;

fn spanset(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_spanset")).args(args).output().expect("spanset runs")
}

fn one_line_error(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "one line expected, got: {err}");
    assert!(err.starts_with("spanset: "), "{err}");
    err
}

#[test]
fn bad_flags_get_one_line_and_exit_2() {
    let cases: [(&[&str], &str); 6] = [
        (&["sim", "--kubeconfig", "k"], "--clusters"),
        (&["sim", "--clusters", "a", "--kubeconfig", "k", "--bogus"], "--bogus"),
        (&["sim", "--clusters", "a,a", "--kubeconfig", "k"], "named twice"),
        (&["sim", "--clusters", "Bad_Name", "--kubeconfig", "k"], "Bad_Name"),
        (&["sim", "--clusters", "a", "--kubeconfig", "k", "--time-factor", "0"], "--time-factor"),
        (&["sim", "--clusters", "a", "--kubeconfig", "k", "--port-base", "notaport"], "--port-base"),
    ];
    for (args, mentions) in cases {
        let out = spanset(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = one_line_error(&out);
        assert!(err.contains(mentions), "{args:?}: {err}");
    }
    let help = spanset(&["sim", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--port-base"));
}

#[test]
fn the_sandbox_writes_one_context_per_cluster_and_exits_0_on_sigterm() {
    let sandbox = Sandbox::start("east,west,north");
    let clusters: Vec<&str> = sandbox.banner.iter().filter_map(|l| l.strip_prefix("cluster ")).collect();
    assert_eq!(clusters.len(), 3, "{:?}", sandbox.banner);
    // The admin URL carries the admin API's token, and is kept beside the kubeconfig.
    assert!(sandbox.admin.starts_with("http://sandbox:"), "{}", sandbox.admin);
    assert!(spanset_sim::cli::ctl::redacted(&sandbox.admin).starts_with("http://127.0.0.1:"));
    let kept = std::fs::read_to_string(format!("{}.admin", sandbox.kubeconfig.display())).unwrap();
    assert_eq!(kept.trim(), sandbox.admin);
    let config: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&sandbox.kubeconfig).unwrap()).unwrap();
    assert_eq!(config["current-context"], "east");
    let contexts: Vec<&str> =
        config["contexts"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(contexts, ["east", "west", "north"]);
    for c in config["contexts"].as_array().unwrap() {
        assert_eq!(c["context"]["cluster"], c["name"]);
        assert_eq!(c["context"]["user"], c["name"]);
    }
    // sim-ctl errors are one line too.
    let out = sandbox.ctl(&["heal", "nowhere"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_line_error(&out).contains("no simulated cluster named \"nowhere\""));
    let listed: serde_json::Value = serde_json::from_str(&sandbox.ctl_ok(&["clusters"])).unwrap();
    assert_eq!(listed["clusters"].as_array().unwrap().len(), 3);
    assert_eq!(sandbox.stop().code(), Some(0));
}

#[test]
fn ledger_check_names_an_identity_that_ran_in_two_clusters() {
    let sandbox = Sandbox::start("source,destination");
    let Some(mut src) = support::Kubectl::new(33, &sandbox) else { return };
    src.context = Some("source".into());
    let mut dst = support::Kubectl::new(33, &sandbox).expect("same binary");
    dst.context = Some("destination".into());
    assert!(sandbox.ctl_ok(&["ledger", "--check"]).starts_with("ledger ok: 0 pod incarnations"));
    // The mistake spanset exists to prevent: the same ordinal started in both clusters.
    let sts = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/web-statefulset.yaml")).unwrap();
    for k in [&src, &dst] {
        k.ok_with_stdin(&["apply", "-f", "-"], &sts);
    }
    support::wait_until("a violation", support::DEADLINE, || !sandbox.ctl(&["ledger", "--check"]).status.success());
    let out = sandbox.ctl(&["ledger", "--check"]);
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8_lossy(&out.stdout);
    let line = report.lines().find(|l| l.contains("default/web ordinal 0")).unwrap_or_else(|| panic!("{report}"));
    assert!(
        line.contains("source") && line.contains("destination") && line.contains("ran in two places at once"),
        "{line}"
    );
    assert!(line.matches("20").count() >= 2, "times are named: {line}");
}

#[test]
fn a_sim_whose_port_is_taken_exits_naming_it_and_writes_no_kubeconfig() {
    let base = support::free_ports(5);
    let dir = tempfile::tempdir().unwrap();
    // Two clusters on base and base+1, the admin API on base+2 (their DNS on base+3 and
    // base+4): each taken in turn.
    for taken_port in [base + 1, base + 2] {
        let taken = std::net::TcpListener::bind(("127.0.0.1", taken_port)).unwrap();
        let kubeconfig = dir.path().join(format!("kubeconfig-{taken_port}"));
        let base = base.to_string();
        let out =
            spanset(&["sim", "--clusters", "a,b", "--port-base", &base, "--kubeconfig", kubeconfig.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1));
        let err = one_line_error(&out);
        assert!(err.contains(&format!("127.0.0.1:{taken_port}")), "{err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("ready"));
        assert!(!kubeconfig.exists(), "no kubeconfig for a sandbox that did not start");
        drop(taken);
    }
}
