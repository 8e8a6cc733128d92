//! A federation harness: a `spanset sim` with a host and member clusters, the CRDs and one
//! MemberCluster per member installed, and `spanset run` controller processes that tests can
//! start, kill and restart.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::{Api, Client, api::PostParams};
use spanset_api::{FederatedStatefulSet, FederatedStatefulSetStatus};

use super::{DEADLINE, Sandbox};

/// The user spanset's controller is in every member under `--auth` (`deploy/member/rbac.yaml`).
pub const MEMBER_IDENTITY: &str = "system:serviceaccount:spanset-system:spanset-member";

/// A `spanset run` process, logging to a file; killed on drop.
pub struct Controller {
    child: Child,
    /// Its log file.
    pub log: PathBuf,
}

impl Controller {
    /// Starts `spanset run` against the sandbox's host.
    pub fn start(sandbox: &Sandbox, name: &str) -> Self {
        Self::start_with(sandbox, name, &[])
    }

    /// Starts `spanset run` with extra environment (e.g. `FAILPOINTS`).
    pub fn start_with(sandbox: &Sandbox, name: &str, env: &[(&str, &str)]) -> Self {
        Self::start_full(sandbox, name, env, &[])
    }

    /// Starts `spanset run` with extra environment and extra flags (e.g. `--log-format json`).
    pub fn start_full(sandbox: &Sandbox, name: &str, env: &[(&str, &str)], flags: &[&str]) -> Self {
        match &sandbox.controller_kubeconfig {
            // The shipped identity: its Lease lives in spanset-system.
            Some(kubeconfig) => {
                let mut all = vec!["--lease-namespace", "spanset-system"];
                all.extend_from_slice(flags);
                Self::start_as(sandbox, name, kubeconfig, env, &all)
            }
            None => Self::start_as(sandbox, name, &sandbox.kubeconfig, env, flags),
        }
    }

    /// Starts `spanset run` with another kubeconfig (e.g. a ServiceAccount's).
    pub fn start_as(
        sandbox: &Sandbox,
        name: &str,
        kubeconfig: &std::path::Path,
        env: &[(&str, &str)],
        flags: &[&str],
    ) -> Self {
        let log = sandbox.dir.path().join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_spanset"))
            .args(["run", "--context", "host", "--metrics-addr", "127.0.0.1:0", "--identity", name])
            // Short leases, so that a successor of a killed controller takes over in seconds.
            .args(["--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5", "--kubeconfig"])
            .arg(kubeconfig)
            .args(flags)
            .env("RUST_LOG", "spanset=debug")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spanset run starts");
        Self { child, log }
    }

    /// Kills the process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `signal` (e.g. `-STOP`, `-CONT`, `-TERM`).
    pub fn signal(&self, signal: &str) {
        let _ = Command::new("kill").args([signal, &self.child.id().to_string()]).status();
    }

    /// Waits for the process to exit by itself; returns its exit code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s.code();
            }
            assert!(start.elapsed() < DEADLINE, "spanset run did not exit: {}", self.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.signal("-TERM");
        let start = Instant::now();
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s;
            }
            assert!(start.elapsed() < DEADLINE, "spanset run did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the controller has reconciled `federation` `n` more times (all outcomes), or
    /// has stayed quiet about it while its members were probed three more times (it plans
    /// only when something changed, so a federation it has nothing more to do for is not
    /// planned again): either way the test has given it every chance to act wrongly before it
    /// judges.
    pub fn wait_reconciles(&self, federation: &str, n: u32) {
        let count = || {
            self.metrics_text()
                .lines()
                .filter(|l| l.starts_with("spanset_reconciles_total{") && l.contains(federation))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        };
        // The latest answer of any member (Unix seconds): it advances with every probe round.
        let contact = || {
            self.metrics_text()
                .lines()
                .filter(|l| l.starts_with("spanset_member_last_contact_timestamp_seconds{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .fold(0.0, f64::max)
        };
        let then = count();
        let mut quiet_since = (then, contact());
        super::wait_until(&format!("{n} more reconciles of {federation}, or a quiet spell"), super::DEADLINE, || {
            let now = count();
            if now >= then + f64::from(n) {
                return true;
            }
            if now != quiet_since.0 {
                quiet_since = (now, contact());
                return false;
            }
            contact() >= quiet_since.1 + 6.0
        });
    }

    /// Waits for a quiet spell of `federation`: no reconcile of it while the members were
    /// probed three times. After it, nothing the controller had to do for it is left, so a
    /// test may take a mark and judge what is written after.
    pub fn wait_quiet(&self, federation: &str) {
        self.wait_reconciles(federation, u32::MAX);
    }

    /// When `cluster` last answered this controller's probe (Unix seconds, from
    /// `spanset_member_last_contact_timestamp_seconds`): its silence counts from then or later
    /// (other calls may have answered after it).
    pub fn last_contact(&self, cluster: &str) -> f64 {
        let series = format!("spanset_member_last_contact_timestamp_seconds{{cluster=\"{cluster}\"}}");
        self.sample(&series).unwrap_or_else(|| panic!("no {series} in {}", self.metrics_text()))
    }

    /// The value of one series of `/metrics` now, written as exposed (`name{label="v"}`), if
    /// it is there; panics on a value that is no number.
    pub fn sample(&self, series: &str) -> Option<f64> {
        let text = self.metrics_text();
        let value = text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))?;
        Some(value.trim().parse().unwrap_or_else(|e| panic!("{series} {value}: {e}")))
    }

    /// The controller's `/metrics` exposition now (it logs its address when it starts).
    pub fn metrics_text(&self) -> String {
        use std::io::{Read, Write};
        let log = self.log_text();
        let at = log.find("metrics_addr").expect("the controller logged its metrics address");
        let rest = &log[at..];
        let from = rest.find("127.0.0.1:").expect("a loopback address");
        let addr: String = rest[from..].chars().take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':').collect();
        let mut stream = std::net::TcpStream::connect(&addr).expect("the metrics endpoint answers");
        write!(stream, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
        let mut body = String::new();
        stream.read_to_string(&mut body).unwrap();
        body
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // SPANSET_KEEP_LOGS=DIR keeps every controller log of a test run for reading.
        if let Some(dir) = std::env::var_os("SPANSET_KEEP_LOGS") {
            let dir = PathBuf::from(dir);
            let _ = std::fs::create_dir_all(&dir);
            let name = self.log.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let _ = std::fs::copy(&self.log, dir.join(format!("{}-{name}", self.child.id())));
        }
    }
}

impl Drop for Federation {
    fn drop(&mut self) {
        if std::thread::panicking() || self.refusals_expected {
            return;
        }
        let refused = self.refused_requests();
        assert!(refused.is_empty(), "the shipped permissions were not enough:\n{}", refused.join("\n"));
    }
}

/// A simulated host and members with spanset's API installed.
pub struct Federation {
    /// The sandbox process.
    pub sandbox: Sandbox,
    /// A client of the host.
    pub host: Client,
    /// Member names.
    pub members: Vec<String>,
    /// A test that takes permissions away expects refusals: no check at the end.
    pub refusals_expected: bool,
}

/// A kube client for one context of a kubeconfig.
pub async fn client_for(kubeconfig: &std::path::Path, context: &str) -> Client {
    spanset_controller::runtime::app::host_client(Some(kubeconfig), Some(context))
        .await
        .expect("a client for the context")
}

impl Federation {
    /// Starts `host` plus `members`, installs the CRDs and the MemberClusters.
    /// The sandbox enforces RBAC and controllers run as the shipped identities (`spanset
    /// sandbox --auth`'s set-up), and each test ends by checking the audit for refusals: the
    /// whole controller suite is the proof that the shipped permissions are enough.
    /// `SPANSET_TEST_AUTH=0` runs it as an all-powerful administrator instead.
    pub async fn start(members: &[&str]) -> Self {
        if std::env::var("SPANSET_TEST_AUTH").as_deref() == Ok("0") {
            return Self::start_with(members, &[]).await;
        }
        Self::start_secure(members).await
    }

    /// `host` plus `members` enforcing RBAC, with the shipped identities set up: members joined
    /// with `spanset join`, the controller's kubeconfig in `sandbox.controller_kubeconfig`.
    pub async fn start_secure(members: &[&str]) -> Self {
        Self::start_secure_with(members, &[]).await
    }

    /// Like [`Federation::start_secure`], with more `spanset sim` flags (`--kruise`).
    pub async fn start_secure_with(members: &[&str], flags: &[&str]) -> Self {
        let names = std::iter::once("host").chain(members.iter().copied()).collect::<Vec<_>>().join(",");
        let mut sandbox = Sandbox::start_with(&names, &[&["--auth"], flags].concat());
        let host = client_for(&sandbox.kubeconfig, "host").await;
        let members: Vec<String> = members.iter().map(|m| m.to_string()).collect();
        spanset::cli::sandbox::install_crds(&host).await.expect("CRDs installed");
        let controller = spanset::cli::sandbox::secure(&host, &sandbox.kubeconfig, &members).await.expect("identities");
        sandbox.controller_kubeconfig = Some(controller);
        Self { sandbox, host, members, refusals_expected: false }
    }

    /// Where the controllers' leader Lease lives.
    pub fn lease_namespace(&self) -> &'static str {
        if self.sandbox.controller_kubeconfig.is_some() { "spanset-system" } else { "default" }
    }

    /// The requests of spanset's identities that the sandbox refused (empty without `--auth`).
    pub fn refused_requests(&self) -> Vec<String> {
        if self.sandbox.controller_kubeconfig.is_none() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for c in std::iter::once("host".to_string()).chain(self.members.iter().cloned()) {
            for r in self.audit(&c) {
                let user = r["user"].as_str().unwrap_or("");
                if r["allowed"] == false && user.starts_with("system:serviceaccount:spanset-system:") {
                    out.push(format!("{c}: {user} {} {} {} {}", r["verb"], r["resource"], r["subresource"], r["path"]));
                }
            }
        }
        out
    }

    /// Every request one cluster's apiserver has authorized or refused so far, oldest first
    /// (its audit; empty without `--auth`): what the cluster received, whether it was served
    /// or not.
    pub fn audit(&self, cluster: &str) -> Vec<serde_json::Value> {
        let url = format!("{}/clusters/{cluster}/audit", self.sandbox.admin);
        let Ok(res) = std::process::Command::new("curl").args(["-sf", &url]).output() else { return Vec::new() };
        let doc: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap_or_default();
        doc["records"].as_array().cloned().unwrap_or_default()
    }

    /// The write requests (`verb resource.group namespace/name`, dry runs included; a create's
    /// name is empty, as its path does not carry it) that spanset's
    /// member identity sent to `member` after the first `since` records of its audit: what a
    /// controller tried to write there, whether the member served it, refused it or found it
    /// conflicting. A test that says a controller "writes nothing" judges by this, as a write
    /// refused by the member is still one the controller should not have sent.
    pub fn spanset_write_requests(&self, member: &str, since: usize) -> Vec<String> {
        let records = self.audit(member);
        assert!(
            self.sandbox.controller_kubeconfig.is_some(),
            "only a sandbox with --auth tells spanset's requests apart in the audit"
        );
        records
            .iter()
            .skip(since)
            .filter(|r| r["user"] == MEMBER_IDENTITY)
            .filter(|r| {
                ["create", "update", "patch", "delete", "deletecollection"].contains(&r["verb"].as_str().unwrap_or(""))
            })
            .map(|r| {
                let field = |k: &str| r[k].as_str().unwrap_or("").to_string();
                let resource = match field("group").as_str() {
                    "" => field("resource"),
                    group => format!("{}.{group}", field("resource")),
                };
                // A create names its object in its body, not in its path: its name is empty.
                format!("{} {resource} {}/{}", field("verb"), field("namespace"), field("name"))
            })
            .collect()
    }

    /// Deletes a member's guard bindings `names` (`deploy/member/admission.yaml`), as an
    /// administrator steps in by hand: how a test takes a member's own guard away, so that
    /// what it sees is the controller's rule alone.
    pub async fn delete_bindings(&self, member: &str, names: &[&str]) {
        let resource = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding"),
            "validatingadmissionpolicybindings",
        );
        let bindings: Api<kube::api::DynamicObject> = Api::all_with(self.member(member).await, &resource);
        for name in names {
            bindings
                .delete(name, &Default::default())
                .await
                .unwrap_or_else(|e| panic!("{member}: deleting {name}: {e}"));
        }
    }

    /// Like [`Federation::start`] (shipped identities unless `SPANSET_TEST_AUTH=0`), with more
    /// `spanset sim` flags (`--kruise`).
    pub async fn start_flags(members: &[&str], flags: &[&str]) -> Self {
        if std::env::var("SPANSET_TEST_AUTH").as_deref() == Ok("0") {
            return Self::start_with(members, flags).await;
        }
        Self::start_secure_with(members, flags).await
    }

    /// Like [`Federation::start`] as an administrator, with more `spanset sim` flags (`--auth`).
    pub async fn start_with(members: &[&str], flags: &[&str]) -> Self {
        let names = std::iter::once("host").chain(members.iter().copied()).collect::<Vec<_>>().join(",");
        let sandbox = Sandbox::start_with(&names, flags);
        let host = client_for(&sandbox.kubeconfig, "host").await;
        let members: Vec<String> = members.iter().map(|m| m.to_string()).collect();
        spanset::cli::sandbox::install_crds(&host).await.expect("CRDs installed");
        spanset::cli::sandbox::join_members(&host, &members).await.expect("MemberClusters created");
        Self { sandbox, host, members, refusals_expected: false }
    }

    /// The example federation under another name, placed on `clusters` (weight 1 each).
    pub fn placing(&self, name: &str, clusters: &[&str]) -> FederatedStatefulSet {
        let mut fsts = spanset::cli::sandbox::example(&self.members);
        fsts.metadata.name = Some(name.into());
        fsts.spec.placement.clusters =
            spanset::cli::sandbox::example(&clusters.iter().map(|c| c.to_string()).collect::<Vec<_>>())
                .spec
                .placement
                .clusters;
        fsts
    }

    /// A client of a member.
    pub async fn member(&self, name: &str) -> Client {
        client_for(&self.sandbox.kubeconfig, name).await
    }

    /// The ordinals of federation `name` moving out of `member` now (its recorded moves whose
    /// source it is).
    pub async fn moving_from(&self, name: &str, member: &str) -> Vec<i32> {
        self.status(name).await.moves.iter().filter(|m| m.from == member).map(|m| m.ordinal).collect()
    }

    /// Waits until a move of federation `name` out of `member` is recorded in `phase`, and
    /// answers the ordinals moving out of it then: how a fault test finds its risky moment.
    pub async fn wait_moving_from(&self, name: &str, member: &str, phase: &str) -> Vec<i32> {
        super::eventually(&format!("a move from {member} recorded, {phase}"), || async {
            self.status(name).await.moves.iter().any(|m| m.from == member && m.phase == phase)
        })
        .await;
        self.moving_from(name, member).await
    }

    /// A client of a member acting as spanset does there: its member identity, from the
    /// kubeconfig `spanset join` left in the host (the administrator without `--auth`). The
    /// member's guards tell spanset's writes from everyone else's by this identity.
    pub async fn spanset_identity(&self, member: &str) -> Client {
        if self.sandbox.controller_kubeconfig.is_none() {
            return self.member(member).await;
        }
        let secret = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(self.host.clone(), "spanset-system")
            .get(&format!("spanset-member-{member}"))
            .await
            .expect("join wrote the member's kubeconfig");
        let yaml = String::from_utf8(secret.data.expect("data")["kubeconfig"].0.clone()).expect("UTF-8");
        let kc = kube::config::Kubeconfig::from_yaml(&yaml).expect("a kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.expect("a config");
        Client::try_from(config).expect("a client")
    }

    /// The FederatedStatefulSets of `default`.
    /// Replaces the FederatedStatefulSet CRD by an older one without the rule whose message
    /// starts with `message`: how a test stores what today's schema refuses (as a cluster whose
    /// CRD predates the rule would), to see the controller survive it.
    pub async fn drop_crd_rule(&self, message: &str) {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        fn strip(v: &mut serde_json::Value, message: &str, dropped: &mut usize) {
            match v {
                serde_json::Value::Object(m) => {
                    if let Some(serde_json::Value::Array(rules)) = m.get_mut("x-kubernetes-validations") {
                        let before = rules.len();
                        rules.retain(|r| !r["message"].as_str().unwrap_or("").starts_with(message));
                        *dropped += before - rules.len();
                    }
                    m.values_mut().for_each(|c| strip(c, message, dropped));
                }
                serde_json::Value::Array(items) => items.iter_mut().for_each(|c| strip(c, message, dropped)),
                _ => {}
            }
        }
        let api: Api<CustomResourceDefinition> = Api::all(self.host.clone());
        let name = "federatedstatefulsets.spanset.dev";
        let mut crd = serde_json::to_value(api.get(name).await.expect("the CRD")).expect("JSON");
        let mut dropped = 0;
        strip(&mut crd["spec"], message, &mut dropped);
        assert!(dropped > 0, "no rule of the CRD says {message:?}");
        let older: CustomResourceDefinition = serde_json::from_value(crd).expect("still a CRD");
        api.replace(name, &PostParams::default(), &older).await.expect("the older CRD installed");
    }

    pub fn api(&self) -> Api<FederatedStatefulSet> {
        Api::namespaced(self.host.clone(), "default")
    }

    /// Creates a federation in `default`.
    pub async fn create(&self, f: &FederatedStatefulSet) {
        self.api().create(&PostParams::default(), f).await.expect("federation created");
    }

    /// Its status now.
    pub async fn status(&self, name: &str) -> FederatedStatefulSetStatus {
        self.api().get(name).await.ok().and_then(|f| f.status).unwrap_or_default()
    }

    /// The member StatefulSet's `(start, replicas)`, if it exists; a read that fails (a member
    /// cut off) answers `None`, which is right for waiting only: an assertion that nothing is
    /// there reads with [`Federation::member_slice_now`].
    pub async fn member_slice(&self, member: &str, name: &str) -> Option<(i32, i32)> {
        self.try_member_slice(member, name).await.ok().flatten()
    }

    /// Like [`Federation::member_slice`], failing the test when the member cannot be read, so
    /// that an error is never taken for "nothing there".
    pub async fn member_slice_now(&self, member: &str, name: &str) -> Option<(i32, i32)> {
        self.try_member_slice(member, name)
            .await
            .unwrap_or_else(|e| panic!("{member}: reading StatefulSet {name}: {e}"))
    }

    async fn try_member_slice(&self, member: &str, name: &str) -> Result<Option<(i32, i32)>, kube::Error> {
        let api: Api<StatefulSet> = Api::namespaced(self.member(member).await, "default");
        let Some(spec) = api.get_opt(name).await?.and_then(|s| s.spec) else { return Ok(None) };
        Ok(Some((spec.ordinals.and_then(|o| o.start).unwrap_or(0), spec.replicas.unwrap_or(1))))
    }

    /// Waits until every member holds exactly `want` (`(member, start, replicas)`; members not
    /// named hold nothing), the status says so with every pod Ready, and nothing is moving.
    pub async fn wait_settled(&self, name: &str, want: &[(&str, i32, i32)], what: &str) {
        self.wait_settled_within(name, want, what, DEADLINE * 2).await;
    }

    /// [`Federation::wait_settled`] with another deadline: for moves of a real program that
    /// joins in its own time (a Redis node joining its cluster, one move after another).
    pub async fn wait_settled_within(&self, name: &str, want: &[(&str, i32, i32)], what: &str, deadline: Duration) {
        let start = Instant::now();
        loop {
            let status = self.status(name).await;
            let mut ok = status.moves.is_empty();
            for m in &self.members {
                let expected = want.iter().find(|w| w.0 == m).map(|w| (w.1, w.2));
                let actual = self.member_slice(m, name).await.filter(|s| s.1 > 0);
                let in_status = status.slices.iter().find(|s| &s.cluster == m).filter(|s| s.replicas > 0);
                ok &= match expected {
                    None => actual.is_none() && in_status.is_none(),
                    Some((s, r)) => {
                        actual == Some((s, r))
                            && in_status.is_some_and(|st| st.start == s && st.replicas == r && st.ready_replicas == r)
                    }
                };
            }
            let total: i32 = want.iter().map(|w| w.2).sum();
            ok &= status.ready.as_deref() == Some(format!("{total}/{total}").as_str());
            if ok {
                return;
            }
            assert!(
                start.elapsed() < deadline,
                "timed out waiting for {what}: status {}",
                serde_json::to_string(&status).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `name` reports condition `type_` True with `reason`; answers its message.
    pub async fn wait_condition(&self, name: &str, type_: &str, reason: &str) -> String {
        let start = Instant::now();
        loop {
            let status = self.status(name).await;
            if let Some(c) =
                status.conditions.iter().find(|c| c.type_ == type_ && c.status == "True" && c.reason == reason)
            {
                return c.message.clone();
            }
            assert!(start.elapsed() < DEADLINE, "{name} never reported {type_}={reason}: {status:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The `(type, reason, message)` of the host's Events about a federation.
    pub async fn events(&self, name: &str) -> Vec<(String, String, String)> {
        let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(self.host.clone(), "default");
        let list = api.list(&Default::default()).await.expect("events listed");
        list.items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect()
    }

    /// Runs `spanset ARGS --kubeconfig <sandbox> --context host` off the async threads (a drill
    /// or a fence waits on the controller, which runs beside it) and answers its output.
    pub async fn spanset(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_spanset"));
        cmd.args(args).arg("--kubeconfig").arg(&self.sandbox.kubeconfig).args(["--context", "host"]);
        tokio::task::spawn_blocking(move || cmd.output().expect("spanset runs")).await.expect("spanset's thread")
    }

    /// A federation's pods in `member`: ordinal → uid (running or terminating). A list that
    /// fails answers none, which is right for waiting only: an assertion reads with
    /// [`Federation::pod_uids_now`].
    pub async fn pod_uids(&self, member: &str, name: &str) -> std::collections::BTreeMap<u32, String> {
        self.try_pod_uids(member, name).await.unwrap_or_default()
    }

    /// Like [`Federation::pod_uids`], failing the test when the member cannot be read.
    pub async fn pod_uids_now(&self, member: &str, name: &str) -> std::collections::BTreeMap<u32, String> {
        self.try_pod_uids(member, name).await.unwrap_or_else(|e| panic!("{member}: listing the pods of {name}: {e}"))
    }

    async fn try_pod_uids(
        &self,
        member: &str,
        name: &str,
    ) -> Result<std::collections::BTreeMap<u32, String>, kube::Error> {
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(self.member(member).await, "default");
        let lp = kube::api::ListParams::default().labels(&format!("spanset.dev/federation={name}"));
        let list = api.list(&lp).await?.items;
        Ok(list
            .into_iter()
            .filter_map(|p| {
                let k = p.metadata.name.as_deref()?.strip_prefix(&format!("{name}-"))?.parse().ok()?;
                Some((k, p.metadata.uid.clone()?))
            })
            .collect())
    }

    /// Every member's pods of a federation: cluster → ordinal → uid.
    pub async fn placement(
        &self,
        name: &str,
    ) -> std::collections::BTreeMap<String, std::collections::BTreeMap<u32, String>> {
        let mut out = std::collections::BTreeMap::new();
        for m in &self.members {
            out.insert(m.clone(), self.pod_uids(m, name).await);
        }
        out
    }

    /// Like [`Federation::placement`], failing the test when a member cannot be read.
    pub async fn placement_now(
        &self,
        name: &str,
    ) -> std::collections::BTreeMap<String, std::collections::BTreeMap<u32, String>> {
        let mut out = std::collections::BTreeMap::new();
        for m in &self.members {
            out.insert(m.clone(), self.pod_uids_now(m, name).await);
        }
        out
    }

    /// The names of a member's simulated worker nodes (`node-*`), read from its API: what a test
    /// takes down or brings back. A read that fails fails the test.
    pub async fn node_names(&self, member: &str) -> Vec<String> {
        use k8s_openapi::api::core::v1::Node;
        use kube::{ResourceExt, api::ListParams};
        let nodes: Api<Node> = Api::all(self.member(member).await);
        let listed = nodes.list(&ListParams::default()).await.unwrap_or_else(|e| panic!("{member}'s nodes: {e}"));
        listed.items.iter().map(|n| n.name_any()).filter(|n| n.starts_with("node-")).collect()
    }

    /// Powers off every node of a member (its pods die with them), then cuts it off: a real
    /// loss, the one a fence asserts.
    pub async fn lose(&self, member: &str) {
        for name in self.node_names(member).await {
            self.sandbox.ctl_ok(&["node-down", member, &name, "--power-off"]);
        }
        // The sandbox records the pods as stopped at the power-off.
        let start = Instant::now();
        loop {
            let out = self.sandbox.ctl_ok(&["ledger"]);
            let ledger: serde_json::Value = serde_json::from_str(&out).expect("ledger JSON");
            let mine: Vec<&serde_json::Value> =
                ledger["incarnations"].as_array().expect("a list").iter().filter(|e| e["cluster"] == member).collect();
            if !mine.is_empty() && mine.iter().all(|e| !e["runningUntil"].is_null()) {
                break;
            }
            assert!(start.elapsed() < DEADLINE, "{member}'s pods never recorded as stopped: {mine:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.sandbox.ctl_ok(&["partition", member]);
    }

    /// The uids of every pod incarnation the sandbox's ledger has recorded so far.
    pub fn incarnations(&self) -> std::collections::BTreeSet<String> {
        let out = self.sandbox.ctl_ok(&["ledger"]);
        let ledger: serde_json::Value = serde_json::from_str(&out).expect("ledger JSON");
        ledger["incarnations"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|e| format!("{}/{}", e["cluster"].as_str().unwrap_or_default(), e["uid"].as_str().unwrap_or_default()))
            .collect()
    }

    /// When MemberCluster `name` was last fenced: its `spanset.dev/fenced-at` annotation, which
    /// holds whole seconds (rounded to the nearest one).
    pub async fn fenced_at(&self, name: &str) -> jiff::Timestamp {
        use kube::ResourceExt;
        let mc = Api::<spanset_api::MemberCluster>::all(self.host.clone()).get(name).await.expect("MemberCluster read");
        let at = mc.annotations().get("spanset.dev/fenced-at").unwrap_or_else(|| panic!("{name} has no fenced-at"));
        at.parse().unwrap_or_else(|e| panic!("{name}'s fenced-at {at:?}: {e}"))
    }

    /// Asserts that no ordinal ever ran in two clusters at once over the whole run.
    pub fn assert_ledger_clean(&self) {
        let out = self.sandbox.ctl(&["ledger", "--check"]);
        assert!(
            out.status.success(),
            "ledger --check found violations: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
