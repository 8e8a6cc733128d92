//! Observability checked against a real Prometheus (the Debian package `prometheus`, installed
//! by `.ci/run`): the alert rules pass `promtool`, the dashboards are Grafana JSON whose every
//! query returns data from a Prometheus scraping a sandbox while ordinals move, and the label
//! sets stay bounded as federations come and go.

use std::{
    collections::BTreeSet,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::Instant,
};

use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use spanset_api::FederatedStatefulSet;
use support::{
    DEADLINE,
    prometheus::{Prometheus, get, tool},
    wait_until,
};

use crate::support;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn yaml(path: &str) -> serde_yaml::Value {
    serde_yaml::from_str(&std::fs::read_to_string(repo(path)).expect("file readable")).expect("valid YAML")
}

#[test]
fn the_alert_rules_pass_promtool_check_and_their_unit_tests_and_the_prometheusrule_carries_the_same_groups() {
    let rules = yaml("deploy/prometheus/rules.yaml");
    let crd = yaml("deploy/prometheus/prometheusrule.yaml");
    assert_eq!(crd["spec"]["groups"], rules["groups"], "prometheusrule.yaml and rules.yaml differ");
    let alerts: BTreeSet<&str> =
        rules["groups"][0]["rules"].as_sequence().expect("rules").iter().filter_map(|r| r["alert"].as_str()).collect();
    for wanted in [
        "SpansetIdentityConflict",
        "SpansetMemberUnreachable",
        "SpansetMoveStuck",
        "SpansetReconcileErrors",
        "SpansetNoLeader",
        "SpansetFencedMemberReachable",
    ] {
        assert!(alerts.contains(wanted), "{wanted} missing from {alerts:?}");
    }
    // Every alert is tested both firing and quiet.
    let tests = std::fs::read_to_string(repo("deploy/prometheus/rules_test.yaml")).unwrap();
    for alert in &alerts {
        assert!(tests.contains(&format!("alertname: {alert}")), "{alert} has no promtool test");
    }
    let Some(promtool) = tool("promtool") else { return };
    for args in [&["check", "rules", "rules.yaml"][..], &["test", "rules", "rules_test.yaml"][..]] {
        let out = Command::new(&promtool).args(args).current_dir(repo("deploy/prometheus")).output().unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A dashboard's queries: (panel title, expr).
fn queries(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        if panel["type"] == "row" {
            continue;
        }
        let title = panel["title"].as_str().expect("a title").to_string();
        let targets = panel["targets"].as_array().filter(|t| !t.is_empty());
        for t in targets.unwrap_or_else(|| panic!("panel {title} has no targets")) {
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("a target of {title} has no expr"));
            out.push((title.clone(), expr.to_string()));
        }
    }
    out
}

fn dashboards() -> Vec<(String, serde_json::Value)> {
    ["spanset-overview.json", "spanset-federation.json"]
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(repo(&format!("dashboards/{name}"))).expect("dashboard readable");
            (name.to_string(), serde_json::from_str(&text).expect("dashboard is JSON"))
        })
        .collect()
}

#[test]
fn the_dashboards_are_grafana_json_with_defined_template_variables_and_a_configmap_each() {
    let kustomization = yaml("dashboards/kustomization.yaml");
    assert_eq!(kustomization["generatorOptions"]["labels"]["grafana_dashboard"], "1");
    let readme = std::fs::read_to_string(repo("dashboards/README.md")).expect("dashboards/README.md");
    for (name, d) in dashboards() {
        assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 30), "{name}: schemaVersion");
        assert!(d["uid"].is_string() && d["title"].is_string(), "{name}: uid and title");
        let files = serde_yaml::to_string(&kustomization["configMapGenerator"]).unwrap();
        assert!(files.contains(&name), "{name} is not in the kustomization");
        let vars: BTreeSet<String> = d["templating"]["list"]
            .as_array()
            .expect("templating.list")
            .iter()
            .map(|v| v["name"].as_str().expect("variable name").to_string())
            .collect();
        assert!(vars.contains("DS_PROMETHEUS") && vars.contains("federation"), "{name}: {vars:?}");
        for (title, expr) in queries(&d) {
            for var in expr.split('$').skip(1) {
                let var: String = var.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                assert!(var.starts_with("__") || vars.contains(&var), "{name} / {title}: ${var} is not defined");
            }
            assert!(readme.contains(&format!("| {title} |")), "dashboards/README.md does not list panel {title:?}");
        }
    }
}

/// `spanset sandbox` as a child process, killed on drop.
struct SandboxProcess {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl SandboxProcess {
    fn start(time_factor: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("sandbox.kubeconfig");
        let mut child = Command::new(env!("CARGO_BIN_EXE_spanset"))
            .args(["sandbox", "--time-factor", time_factor, "--metrics-addr", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
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
        let me = Self { child, lines, kubeconfig, _dir: dir };
        wait_until("the sandbox is ready", DEADLINE, || me.lines.lock().unwrap().iter().any(|l| l == "ready"));
        me
    }

    /// `127.0.0.1:PORT` of the controller's `/metrics`.
    fn metrics_addr(&self) -> String {
        let lines = self.lines.lock().unwrap();
        let url = lines.iter().find_map(|l| l.strip_prefix("metrics: http://")).expect("a metrics line");
        url.trim_end_matches("/metrics").to_string()
    }
}

impl Drop for SandboxProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The controller's exposition now (sample lines only).
fn samples(addr: &str) -> Vec<String> {
    let (_, body) = get(addr, "/metrics").expect("/metrics answers");
    body.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(str::to_string).collect()
}

/// Polls an instant query until `pred` holds for its first value.
fn wait_value(prom: &Prometheus, promql: &str, pred: impl Fn(f64) -> bool) {
    wait_until(&format!("{promql} (prometheus)"), DEADLINE * 2, || prom.scalar(promql).is_some_and(&pred));
}

fn extra(name: &str, members: &[String]) -> FederatedStatefulSet {
    let mut f = spanset::cli::sandbox::example(members);
    f.metadata.name = Some(name.to_string());
    f.spec.replicas = 2;
    f
}

/// A sample line's series without its value, and without the labels of closed sets that new
/// traffic may fill in (`code`, `verb`), e.g. `spanset_member_http_requests_total{cluster="east"}`.
fn shape(sample: &str) -> String {
    let series = sample.rsplit_once(' ').map_or(sample, |(s, _)| s);
    let Some((name, labels)) = series.split_once('{') else { return series.to_string() };
    let kept: Vec<&str> = labels
        .trim_end_matches('}')
        .split("\",")
        .filter(|l| !l.starts_with("code=") && !l.starts_with("verb="))
        .collect();
    format!("{name}{{{}}}", kept.join("\","))
}

/// Creates federations `names`, waits for their series, deletes them, waits until their
/// series are gone; returns the controller's series afterwards.
fn come_and_go(
    rt: &tokio::runtime::Runtime,
    api: &Api<FederatedStatefulSet>,
    addr: &str,
    names: &[&str],
) -> Vec<String> {
    let members: Vec<String> = ["east", "west", "central"].map(String::from).to_vec();
    for name in names {
        rt.block_on(api.create(&PostParams::default(), &extra(name, &members))).expect("federation created");
    }
    for name in names {
        let needle = format!("federation=\"default/{name}\"");
        wait_until(&format!("series of {name}"), DEADLINE, || {
            samples(addr).iter().any(|l| l.starts_with("spanset_slice_replicas{") && l.contains(&needle))
        });
    }
    for name in names {
        rt.block_on(api.delete(name, &DeleteParams::default())).expect("federation deleted");
    }
    wait_until("the deleted federations' series are gone", DEADLINE, || {
        let s = samples(addr);
        !s.iter().any(|l| names.iter().any(|n| l.contains(&format!("default/{n}\""))))
            && s.iter().any(|l| l == "spanset_federations 1")
    });
    samples(addr)
}

#[test]
fn prometheus_scrapes_a_sandbox_while_ordinals_move_and_every_dashboard_query_returns_data() {
    let Some(binary) = tool("prometheus") else { return };
    let started = Instant::now();
    let sandbox = SandboxProcess::start("0.25");
    let addr = sandbox.metrics_addr();
    let prom = Prometheus::start(&binary, &addr, "250ms", &[repo("deploy/prometheus/rules.yaml")]);
    let fed = r#"federation="default/redis""#;
    wait_value(&prom, &format!(r#"sum(spanset_slice_replicas{{{fed},state="ready"}})"#), |v| v == 6.0);

    // Move every ordinal to east.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let host = rt.block_on(support::federation::client_for(&sandbox.kubeconfig, "host"));
    let api: Api<FederatedStatefulSet> = Api::namespaced(host, "default");
    let patch = serde_json::json!({"spec": {"placement": {"clusters": [
        {"name": "east", "weight": 1}, {"name": "west", "weight": 0}, {"name": "central", "weight": 0}]}}});
    rt.block_on(api.patch("redis", &PatchParams::default(), &Patch::Merge(&patch))).expect("placement patched");
    wait_value(&prom, &format!(r#"spanset_slice_replicas{{{fed},cluster="east",state="ready"}}"#), |v| v == 6.0);
    wait_value(&prom, &format!("sum(spanset_moves_total{{{fed}}})"), |v| v >= 4.0);
    wait_value(&prom, &format!("sum(spanset_moves_in_flight{{{fed}}})"), |v| v == 0.0);
    let moved_at = started.elapsed();
    // Prometheus saw the moves in flight, east owning ordinals 0.., and never a conflict.
    let peak = prom.scalar(&format!("sum(max_over_time(spanset_moves_in_flight{{{fed}}}[10m]))"));
    assert!(peak.is_some_and(|v| v >= 1.0), "moves in flight never scraped: {peak:?}");
    assert_eq!(prom.scalar(&format!(r#"spanset_slice_start_ordinal{{{fed},cluster="east"}}"#)), Some(0.0));
    assert_eq!(prom.scalar("sum(spanset_identity_conflicts_total)"), Some(0.0));
    assert_eq!(prom.scalar("sum(spanset_leader)"), Some(1.0));
    assert!(prom.scalar("spanset_move_duration_seconds_count").is_some_and(|v| v >= 4.0));

    // Every panel's query, with its template variables substituted, returns data.
    for (name, d) in dashboards() {
        for (title, expr) in queries(&d) {
            let promql = expr
                .replace("$__rate_interval", "1m")
                .replace("$__range", "10m")
                .replace("$federation", "default/redis")
                .replace("$cluster", ".*");
            wait_until(&format!("{name} / {title}: {promql} returns data"), DEADLINE, || {
                prom.query(&promql).map(|r| !r.is_empty()).unwrap_or_else(|e| panic!("{name} / {title}: {e}"))
            });
        }
    }
    // The real Prometheus evaluates every alert rule without error, and none fires.
    wait_until("every rule evaluated", DEADLINE, || {
        let rules = prom.api("/api/v1/rules").unwrap_or_default();
        let all: Vec<serde_json::Value> = rules["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        all.len() == 6 && all.iter().all(|r| r["health"] == "ok" && r["lastEvaluation"] != "0001-01-01T00:00:00Z")
    });
    let firing = prom.query(r#"ALERTS{alertstate="firing"}"#).expect("ALERTS");
    assert!(firing.is_empty(), "{firing:?}");

    // Label sets stay bounded as federations come and go: a second round leaves exactly as
    // many series as the first, and Prometheus sees only the federation that stays.
    let per_federation = |s: &[String]| s.iter().filter(|l| l.contains("federation=\"")).count();
    let before = samples(&addr);
    let after_first = come_and_go(&rt, &api, &addr, &["obs-1", "obs-2", "obs-3"]);
    let after_second = come_and_go(&rt, &api, &addr, &["obs-4", "obs-5", "obs-6"]);
    assert_eq!(per_federation(&before), per_federation(&after_first), "a deleted federation left series");
    assert_eq!(per_federation(&after_first), per_federation(&after_second), "a deleted federation left series");
    // Beyond status codes and verbs first seen (closed sets), the second round adds no series.
    let first: BTreeSet<String> = after_first.iter().map(|l| shape(l)).collect();
    let grown: Vec<&String> = after_second.iter().filter(|l| !first.contains(&shape(l))).collect();
    assert!(grown.is_empty(), "series grew from one round of federations to the next: {grown:?}");
    let after_second = after_second.len();
    wait_value(&prom, r#"count(count by (federation) ({__name__=~"spanset_.+",federation!=""}))"#, |v| v == 1.0);
    eprintln!(
        "observability: moves done after {moved_at:?}, {after_second} series exposed, whole test {:?}",
        started.elapsed()
    );
}
