//! `spanset drill evacuate` against the sandbox: every ordinal of a healthy member moves out
//! and back, each timed, the placement is restored, and the ledger stays clean.

use crate::support;

use spanset::cli::sandbox::example;
use support::{
    federation::{Controller, Federation},
    timeline,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evacuate_moves_every_ordinal_out_and_back_and_reports_each() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let c = Controller::start(&f.sandbox, "controller");
    f.create(&example(&f.members)).await;
    let thirds = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];
    f.wait_settled("redis", &thirds, "initial slices").await;
    let before = f.api().get("redis").await.unwrap().spec.placement;
    let out =
        f.spanset(&["drill", "evacuate", "central", "--fsts", "default/redis", "-o", "yaml", "--timeout", "120"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("out: ") && stderr.contains("back: "), "progress is shown: {stderr}");
    // The report as YAML (the cluster-loss drill below reads it as JSON): the same document.
    assert!(
        String::from_utf8_lossy(&out.stdout).lines().any(|l| l == "federation: default/redis"),
        "not YAML's block style: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report: serde_json::Value = serde_yaml::from_slice(&out.stdout).expect("a YAML report");
    let moves = report["ordinals"].as_array().unwrap();
    let of = |half: &str| -> Vec<(i64, String, String)> {
        let mut v: Vec<_> = moves
            .iter()
            .filter(|m| m["half"] == half)
            .map(|m| {
                (m["ordinal"].as_i64().unwrap(), m["from"].as_str().unwrap().into(), m["to"].as_str().unwrap().into())
            })
            .collect();
        v.sort();
        v
    };
    // Out: central's 4 and 5 leave (to west, while 2 shifts from west to east: apps/v1 slices
    // stay contiguous); back: they return to central.
    let from_central: Vec<i64> = of("out").iter().filter(|m| m.1 == "central").map(|m| m.0).collect();
    assert_eq!(from_central, [4, 5], "central's ordinals left: {report}");
    assert!(of("out").iter().all(|m| m.2 != "central"), "nothing went to central on the way out: {report}");
    let to_central: Vec<i64> = of("back").iter().filter(|m| m.2 == "central").map(|m| m.0).collect();
    assert_eq!(to_central, [4, 5], "they came back: {report}");
    for m in moves {
        let secs = m["unavailableSeconds"].as_f64().unwrap();
        assert!(secs > 0.0 && secs <= report["totalSeconds"].as_f64().unwrap(), "{m}");
    }
    assert!(report["outSeconds"].as_f64().unwrap() > 0.0 && report["backSeconds"].as_f64().unwrap() > 0.0);
    assert_eq!(f.api().get("redis").await.unwrap().spec.placement, before, "the placement is restored");
    f.wait_settled("redis", &thirds, "thirds again").await;
    // The same figures in the controller's metrics.
    let total = (report["totalSeconds"].as_f64().unwrap() * 1000.0).round() / 1000.0;
    support::eventually("the drill's figures in /metrics", || async {
        c.metrics_text().lines().any(|l| {
            l.starts_with("spanset_drill_seconds{")
                && l.contains("drill=\"evacuate\"")
                && l.contains("stage=\"total\"")
                && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) == Some(total)
        })
    })
    .await;
    f.assert_ledger_clean();
}

#[test]
fn evacuating_a_member_outside_the_placement_is_refused_naming_it() {
    let sandbox = support::Sandbox::start("host,east");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let host = support::federation::client_for(&sandbox.kubeconfig, "host").await;
        spanset::cli::sandbox::install_crds(&host).await.unwrap();
        spanset::cli::sandbox::join_members(&host, &["east".to_string()]).await.unwrap();
        let api: kube::Api<spanset_api::FederatedStatefulSet> = kube::Api::namespaced(host, "default");
        api.create(&Default::default(), &example(&["east".to_string()])).await.unwrap();
    });
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["drill", "evacuate", "central", "--fsts", "redis"])
        .args(["--kubeconfig", sandbox.kubeconfig.to_str().unwrap(), "--context", "host"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("central is not in the placement of default/redis"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["drill", "evacuate", "east", "--fsts", "redis"])
        .args(["--kubeconfig", sandbox.kubeconfig.to_str().unwrap(), "--context", "host"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nowhere to evacuate to"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_loss_detects_fences_rehomes_shrinks_on_return_and_keeps_the_ledger_clean() {
    let f = Federation::start(&["east", "west", "central"]).await;
    let c = Controller::start(&f.sandbox, "controller");
    let mut fsts = serde_json::to_value(example(&f.members)).unwrap();
    fsts["spec"]["failover"] = serde_json::json!({"policy": "Manual", "unreachableAfterSeconds": 6});
    f.create(&serde_json::from_value(fsts).unwrap()).await;
    let thirds = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];
    f.wait_settled("redis", &thirds, "initial slices").await;
    let admin = f.sandbox.admin.clone();
    let loss = ["drill", "cluster-loss", "central", "--fsts", "default/redis", "--admin", &admin, "-o", "json"];
    // While the drill runs: when the federation's ClusterUnreachable turned True naming
    // central, and when central last answered the controller's probe (frozen while it is lost).
    let done = std::sync::atomic::AtomicBool::new(false);
    let drill = async {
        let out = f.spanset(&[&loss[..], &["--timeout", "120"]].concat()).await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        out
    };
    let watch = async {
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            let status = f.status("redis").await;
            let turned = status
                .conditions
                .iter()
                .find(|c| c.type_ == "ClusterUnreachable" && c.status == "True" && c.message.contains("central"));
            if let Some(turned) = turned {
                return Some((turned.last_transition_time.0, c.last_contact("central")));
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        None
    };
    let (out, detected) = tokio::join!(drill, watch);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("waiting: central detected unreachable"), "progress is shown: {stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    println!("{r}");
    assert_eq!(r["policy"], "Manual");
    // Silence counts from the last answer: the condition turned (whole seconds) no earlier than
    // unreachableAfterSeconds (6) after central's last answer, by the controller's own records.
    let (turned, last) = detected.expect("the drill's loss seen in the federation's condition");
    assert!(
        turned.as_millisecond() as f64 / 1000.0 + 1.0 >= last + 6.0,
        "ClusterUnreachable turned at {turned}, before 6 s of silence since central's last answer at {last}: {r}"
    );
    assert!(r["fencedSeconds"].as_f64().unwrap() >= r["detectionSeconds"].as_f64().unwrap(), "{r}");
    // Over the whole run, central's ordinals started elsewhere only after the drill fenced it
    // (fenced-at holds whole seconds, rounded to the nearest), and after its pods had stopped.
    let fenced = f.fenced_at("central").await;
    let runs = timeline::runs(&f.sandbox, "redis");
    let early =
        timeline::started_elsewhere_before(&runs, "central", &[4, 5], fenced - jiff::SignedDuration::from_millis(500));
    assert!(early.is_empty(), "central's ordinals started elsewhere before its fence at {fenced}: {early:?}");
    assert!(runs.iter().any(|r| r.cluster != "central" && r.ordinal == 4), "4 re-homed: {runs:?}");
    for k in ["rehomeSeconds", "shrinkOnReturnSeconds", "backSeconds", "totalSeconds"] {
        assert!(r[k].as_f64().unwrap() > 0.0, "{k}: {r}");
    }
    assert_eq!(r["ledgerViolations"], serde_json::json!([]), "{r}");
    let mc: spanset_api::MemberCluster = kube::Api::all(f.host.clone()).get("central").await.unwrap();
    assert!(!mc.spec.fenced, "the drill unfences at the end");
    f.wait_settled("redis", &thirds, "thirds again").await;
    f.assert_ledger_clean();
}
