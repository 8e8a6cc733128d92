//! spanset on real Kubernetes, installed as the README tells a user: a host and three members,
//! each a real control plane (`spanset-control-plane`), the CRDs and `deploy/` applied with the
//! real kubectl, each member joined with `spanset join`, the controller running as its shipped
//! ServiceAccount; the README's tour, a member cut off, a leader killed and the blog's
//! migration done on it. Judged by the audit of every member's pods
//! over the whole run (not by spanset's own status) and by what the run left: volumes,
//! incarnations, StatefulSets; then each member guard is provoked in the real apiserver's
//! words.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{PersistentVolume, PersistentVolumeClaim},
};
use kube::{Api, api::ListParams};
use serde_json::Value;
use spanset::audit::Audit;
use spanset_control_plane::{Binaries, Fault, RealFleet};

use crate::support::{self, Kubectl, member_guards, real_kube};

/// How long one step of a scenario may take on a loaded 2-core machine running four control
/// planes.
const STEP: Duration = Duration::from_secs(300);

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path).display().to_string()
}

/// A `spanset` command, to its end; its output, or a panic with it.
fn spanset(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_spanset")).args(args).output().expect("spanset runs");
    support::succeeded(&format!("spanset {args:?}"), out)
}

/// The controller as a process, as the shipped ServiceAccount; killed on drop.
struct Controller {
    identity: String,
    child: Child,
    log: PathBuf,
}

impl Controller {
    /// `spanset run` as `identity` in the leader Lease, with short leases, so that a successor
    /// of a killed leader takes over in seconds.
    fn start(kubeconfig: &Path, log: PathBuf, identity: &str) -> Self {
        let file = std::fs::File::create(&log).expect("a log file");
        let child = Command::new(env!("CARGO_BIN_EXE_spanset"))
            .args(["run", "--context", "host", "--lease-namespace", "spanset-system", "--metrics-addr", "127.0.0.1:0"])
            .args(["--identity", identity, "--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5"])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .env("RUST_LOG", "spanset=debug")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spanset run starts");
        Self { identity: identity.to_string(), child, log }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!("{}:\n{}", self.identity, lines[lines.len().saturating_sub(30)..].join("\n"))
    }

    /// Kills it at once (SIGKILL), as a crash or a lost node would.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A kubeconfig for the host as the controller's ServiceAccount, with a token the host mints
/// (`kubectl create token`), as a Deployment's pod would be given one.
fn controller_kubeconfig(k: &Kubectl, fleet: &RealFleet, path: &Path) {
    let token = k.ok(&["--context", "host", "-n", "spanset-system", "create", "token", "spanset", "--duration", "24h"]);
    let admin: Value = serde_json::from_str(&std::fs::read_to_string(fleet.proxied_kubeconfig()).unwrap()).unwrap();
    let cluster = admin["clusters"].as_array().unwrap().iter().find(|c| c["name"] == "host").unwrap().clone();
    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "host",
        "clusters": [cluster],
        "users": [{"name": "spanset", "user": {"token": token.trim()}}],
        "contexts": [{"name": "host", "context": {"cluster": "host", "user": "spanset"}}],
    });
    std::fs::write(path, config.to_string()).unwrap();
}

/// A host and members, real, with spanset installed as the README says, the controller
/// running and the audit watching federation `default/redis` from the start. Fields drop in
/// order: the controller and the audit before the clusters they talk to.
struct Installed {
    controllers: Vec<Controller>,
    controller_kubeconfig: PathBuf,
    audit: Audit,
    record: PathBuf,
    k: Kubectl,
    /// Each cluster's control plane, by name: members may run releases of their own.
    binaries: BTreeMap<&'static str, Binaries>,
    members: Vec<&'static str>,
    fleet: RealFleet,
    /// How long the control planes took to start.
    up: Duration,
    dir: tempfile::TempDir,
    /// Dropped last: the next fleet's test starts once this one's clusters are stopped.
    _turn: real_kube::FleetTurn,
}

/// Every member on `release`.
fn all_on(release: &'static str, members: &[&'static str]) -> Vec<(&'static str, &'static str)> {
    members.iter().map(|m| (*m, release)).collect()
}

/// Starts a host on `host_release` and each member on its own release, and installs spanset:
/// the CRDs and `deploy/` with the host's kubectl, each member with `spanset join`, the
/// controller as its ServiceAccount.
async fn install(host_release: &str, members: &[(&'static str, &str)]) -> Option<Installed> {
    install_with_nodes(host_release, members, 1).await
}

/// [`install`], each cluster with `nodes` nodes.
async fn install_with_nodes(host_release: &str, members: &[(&'static str, &str)], nodes: usize) -> Option<Installed> {
    let mut binaries = BTreeMap::new();
    for (cluster, release) in [("host", host_release)].into_iter().chain(members.iter().copied()) {
        binaries.insert(cluster, real_kube::binaries(release)?);
    }
    let mut turn = real_kube::fleet_turn().await;
    let dir = tempfile::tempdir().unwrap();
    let clusters: Vec<(&str, &Binaries)> = binaries.iter().map(|(n, b)| (*n, b)).collect();
    let started = Instant::now();
    let fleet = RealFleet::start_with_nodes(&clusters, dir.path(), nodes).await.unwrap();
    let up = started.elapsed();
    let kubeconfig = fleet.kubeconfig().to_path_buf();
    let k = Kubectl::at(binaries["host"].program("kubectl"), kubeconfig.clone(), dir.path().join("kubectl-cache"));
    let members: Vec<&'static str> = members.iter().map(|(m, _)| *m).collect();

    // The README's install, verbatim but for the kubeconfig.
    k.ok(&["--context", "host", "apply", "-f", &repo("deploy/crds/")]);
    k.ok(&["--context", "host", "apply", "-k", &repo("deploy/")]);
    // spanset is given the kubeconfig through the proxies, so that a test can cut it off from a
    // cluster that runs on.
    let config = fleet.proxied_kubeconfig().display().to_string();
    for m in &members {
        let joined = spanset(&["join", m, "--kubeconfig", &config, "--context", m, "--host-context", "host"]);
        assert!(!joined.contains("not installed"), "{m} ({}) takes every guard: {joined}", binaries[m].dir().display());
    }
    // The Deployment's pod is kwok's (no kubelet runs images here): the controller runs beside
    // the clusters instead, as that pod would, with its ServiceAccount's token.
    let ctl = dir.path().join("controller.kubeconfig");
    controller_kubeconfig(&k, &fleet, &ctl);
    let controller = Controller::start(&ctl, dir.path().join("spanset-a.log"), "spanset-a");
    let mut clients = vec![];
    for m in &members {
        clients.push((m.to_string(), fleet.cluster(m).unwrap().client().await.unwrap()));
    }
    let record = dir.path().join("audit.jsonl");
    let audit = Audit::start(clients, "default", "redis", Some(std::fs::File::create(&record).unwrap()));
    turn.started();
    Some(Installed {
        controllers: vec![controller],
        controller_kubeconfig: ctl,
        audit,
        record,
        k,
        binaries,
        members,
        fleet,
        up,
        dir,
        _turn: turn,
    })
}

impl Installed {
    /// Starts one more controller replica, as `identity`.
    fn start_controller(&mut self, identity: &str) {
        let log = self.dir.path().join(format!("{identity}.log"));
        self.controllers.push(Controller::start(&self.controller_kubeconfig, log, identity));
    }

    /// The holder of the leader Lease.
    fn leader(&self) -> String {
        let holder = self.k.ok(&[
            "--context",
            "host",
            "-n",
            "spanset-system",
            "get",
            "lease",
            "spanset-leader",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ]);
        holder.trim().to_string()
    }

    /// kubectl of `context`'s own release, as its administrator.
    fn kubectl(&self, context: &str) -> Kubectl {
        let mut k = Kubectl::at(
            self.binaries[context].program("kubectl"),
            self.fleet.kubeconfig().to_path_buf(),
            self.dir.path().join("kubectl-cache"),
        );
        k.context = Some(context.into());
        k
    }

    /// Waits until spanset's MemberCluster of `member` says it is not Reachable.
    async fn unreachable(&self, member: &str, what: &str) {
        let deadline = Instant::now() + STEP;
        loop {
            let mc: Value =
                serde_json::from_str(&self.k.ok(&["--context", "host", "get", "mc", member, "-o", "json"])).unwrap();
            let conditions = mc["status"]["conditions"].as_array().cloned().unwrap_or_default();
            if conditions.iter().any(|c| c["type"] == "Reachable" && c["status"] == "False") {
                return;
            }
            assert!(Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    fn federation(&self) -> Value {
        serde_json::from_str(&self.k.ok(&["--context", "host", "get", "fsts", "redis", "-o", "json"])).unwrap()
    }

    /// Creates federation `default/redis` over the members: the README's example, with `edit`
    /// applied to it.
    fn create(&self, edit: impl FnOnce(&mut Value)) {
        let members: Vec<String> = self.members.iter().map(|m| m.to_string()).collect();
        let mut example = serde_json::to_value(spanset_api::example(&members)).unwrap();
        edit(&mut example);
        self.k.ok_with_stdin(&["--context", "host", "apply", "-f", "-"], &example.to_string());
    }

    /// Sets the members' weights, in the order of `members`.
    fn place(&self, weights: &[u32]) {
        let clusters: Vec<Value> =
            self.members.iter().zip(weights).map(|(m, w)| serde_json::json!({"name": m, "weight": w})).collect();
        let patch = serde_json::json!({"spec": {"placement": {"clusters": clusters}}}).to_string();
        self.k.ok(&["--context", "host", "patch", "fsts", "redis", "--type", "merge", "-p", &patch]);
    }

    /// Waits until the federation is Ready (all of `replicas`' sum) with no move under way and
    /// each member's StatefulSet has `replicas` (in the order of `members`), all Ready.
    async fn settled(&self, replicas: &[i32], what: &str) {
        let deadline = Instant::now() + STEP;
        let total: i32 = replicas.iter().sum();
        loop {
            let f = self.federation();
            let status = &f["status"];
            let mut done = status["ready"] == format!("{total}/{total}").as_str()
                && status["moves"].as_array().is_none_or(|m| m.is_empty());
            if done {
                for (member, want) in self.members.iter().zip(replicas) {
                    let client = self.fleet.cluster(member).unwrap().client().await.unwrap();
                    let set = Api::<StatefulSet>::namespaced(client, "default").get_opt("redis").await.unwrap();
                    let spec = set.as_ref().and_then(|s| s.spec.as_ref()?.replicas).unwrap_or(0);
                    let ready = set.as_ref().and_then(|s| s.status.as_ref()?.ready_replicas).unwrap_or(0);
                    done &= spec == *want && ready == *want;
                }
            }
            if done {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not settled within {STEP:?}; status {status}\ncontroller logs:\n{}",
                self.controllers.iter().map(Controller::log_tail).collect::<Vec<_>>().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Every member's volumes: (member, name, phase, the directory behind it).
    async fn volumes(&self) -> Vec<(String, String, String, PathBuf)> {
        let mut out = vec![];
        for m in &self.members {
            let client = self.fleet.cluster(m).unwrap().client().await.unwrap();
            for pv in Api::<PersistentVolume>::all(client).list(&ListParams::default()).await.unwrap() {
                let name = pv.metadata.name.clone().unwrap_or_default();
                let phase = pv.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
                let path = pv.spec.as_ref().and_then(|s| s.host_path.as_ref()).map(|h| PathBuf::from(&h.path));
                out.push((m.to_string(), name, phase, path.unwrap_or_default()));
            }
        }
        out
    }

    /// The volume bound to ordinal `k`'s claim in `member`.
    async fn volume_of(&self, member: &str, k: u32) -> Option<String> {
        let client = self.fleet.cluster(member).unwrap().client().await.unwrap();
        let claim = Api::<PersistentVolumeClaim>::namespaced(client, "default")
            .get_opt(&format!("data-redis-{k}"))
            .await
            .unwrap()?;
        claim.spec?.volume_name
    }

    /// Waits until the federation's status says `updated` pods run the new template.
    async fn updated(&self, updated: i64, what: &str) {
        let deadline = Instant::now() + STEP;
        loop {
            let f = self.federation();
            let status = &f["status"];
            let done = f["metadata"]["generation"] == status["observedGeneration"]
                && status["updatedReplicas"].as_i64() == Some(updated)
                && status["ready"] == "6/6";
            if done {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not {updated} updated within {STEP:?}; status {status}\ncontroller logs:\n{}",
                self.controllers.iter().map(Controller::log_tail).collect::<Vec<_>>().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Waits until the audit has seen `count` pods first seen after `since`, each Ready: its
    /// watches may lag behind the StatefulSets' status that `settled` and `updated` read.
    async fn audit_saw(&self, since: jiff::Timestamp, count: usize) {
        let deadline = Instant::now() + STEP;
        loop {
            let seen = self.seen_since(since);
            if seen.len() >= count && seen.iter().all(|i| i.ready.is_some()) {
                return;
            }
            assert!(Instant::now() < deadline, "the audit never saw {count} new pods Ready: {seen:#?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The incarnations first seen after `since`, in the order they were first seen.
    fn seen_since(&self, since: jiff::Timestamp) -> Vec<spanset::audit::timeline::Incarnation> {
        let mut found: Vec<_> = self.audit.timeline().incarnations().filter(|i| i.seen >= since).cloned().collect();
        found.sort_by_key(|i| i.seen);
        found
    }

    /// Every ordinal is down from the end of its pod to the first Ready of the next one, in
    /// whichever member; asserts that, among the pods first seen after `since`, no two of those
    /// windows overlap: the federation never had two ordinals down at once.
    fn never_two_down_since(&self, since: jiff::Timestamp) {
        let timeline = self.audit.timeline();
        let mut windows = vec![];
        for new in timeline.incarnations().filter(|i| i.seen >= since) {
            let old = timeline
                .incarnations()
                .filter(|i| i.name == new.name && i.seen < new.seen)
                .max_by_key(|i| i.seen)
                .expect("the pod it replaced");
            let down = old.ran.last().and_then(|r| r.1).or(old.gone).expect("the old pod stopped");
            let up = new.ready.expect("the new pod was Ready");
            windows.push((down, up, new.name.clone(), new.member.clone()));
        }
        windows.sort();
        for pair in windows.windows(2) {
            assert!(pair[1].0 >= pair[0].1, "two ordinals down at once: {:?} and {:?}", pair[0], pair[1]);
        }
    }

    /// The audit's verdict: no identity ran in two members at once; answers the incarnations.
    fn judged(&self) -> usize {
        let timeline = self.audit.timeline();
        let overlaps = timeline.overlaps();
        assert!(overlaps.is_empty(), "an identity ran in two members at once: {overlaps:?}");
        timeline.incarnations().count()
    }
}

fn count(volumes: &[(String, String, String, PathBuf)], member: &str, phase: &str) -> usize {
    volumes.iter().filter(|(m, _, p, _)| m == member && p == phase).count()
}

/// On one host and three real members, in turn: the README's tour (every ordinal to east and
/// back); east asked for everything while central is cut off from spanset only (central's
/// ordinals stay where they run until it answers); back to 1:1:1 with the leader of two
/// replicas killed mid-move; every member guard provoked in the real apiserver's words; and
/// last, a second redis-0 started past the guards, which the audit must name. One
/// fleet for all, so that each release starts four control planes once.
async fn tour(release: &'static str) {
    let Some(mut s) = install(release, &all_on(release, &["east", "west", "central"])).await else { return };
    // A standby replica from the start: it writes nothing while the other leads.
    s.start_controller("spanset-b");
    s.create(|_| {});
    let mark = Instant::now();
    s.settled(&[2, 2, 2], "the example").await;
    let placed = mark.elapsed();
    // The member's StatefulSet controller words its Events as its release does, and as the
    // sandbox answering as that release does (`version_skew::the_statefulset_controller_titles_its_event_verbs_from_1_35`).
    let verb = if release == real_kube::OLDEST { "create" } else { "Create" };
    let events = s.kubectl("east").ok(&["get", "events", "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}"]);
    assert!(events.lines().any(|l| l == format!("{verb} Pod redis-0 in StatefulSet redis successful")), "{events}");

    // The tour: every ordinal to east, then back to 1:1:1.
    let mark = Instant::now();
    s.place(&[1, 0, 0]);
    s.settled(&[6, 0, 0], "all to east").await;
    let to_east = mark.elapsed();
    let mark = Instant::now();
    s.place(&[1, 1, 1]);
    s.settled(&[2, 2, 2], "back to 1:1:1").await;
    let back = mark.elapsed();
    println!(
        "real {release} members: four control planes up in {:?}; the example Ready in {placed:?}; \
         four ordinals to east in {to_east:?} and back in {back:?}",
        s.up
    );
    // The judge: the members' own pods, over the whole run. What it cost: six pods to start
    // with, one more for each of the four ordinals that went to east and for each of the four
    // that left it; a pod recreated for any other reason is a cost the tour should not have.
    assert_eq!(s.judged(), 14, "6 + 4 + 4 pods: {:#?}", s.audit.timeline().incarnations().collect::<Vec<_>>());
    assert!(s.audit.timeline().incarnations().all(|i| i.ready.is_some()), "each of them was Ready");
    // The recording judges alike.
    let replayed = spanset(&["audit", "redis", "--from", &s.record.display().to_string(), "-o", "json"]);
    let replayed: Value = serde_json::from_str(&replayed).unwrap();
    assert_eq!(replayed["incarnations"].as_array().map(Vec::len), Some(14), "{replayed}");
    assert_eq!(replayed["overlaps"], serde_json::json!([]));
    // The README's count of volumes: one Released per ordinal that left a member (east 4,
    // west 2, central 2), one Bound per ordinal where it is, nothing else.
    let left = s.volumes().await;
    for (member, released) in [("east", 4), ("west", 2), ("central", 2)] {
        assert_eq!(count(&left, member, "Released"), released, "{member}: {left:?}");
        assert_eq!(count(&left, member, "Bound"), 2, "{member}: {left:?}");
    }
    assert_eq!(left.len(), 14, "no other volume: {left:?}");

    // Central cut off from spanset only (its proxy closes every connection; central, its
    // controllers and its pods run on, as in a network partition): asked to move everything
    // to east meanwhile, spanset moves west's ordinals and leaves central's running where they
    // are, never re-homing an ordinal it cannot see stopped.
    let central_pods: Vec<String> = s
        .audit
        .timeline()
        .incarnations()
        .filter(|i| i.member == "central" && i.gone.is_none())
        .map(|i| i.uid.clone())
        .collect();
    assert_eq!(central_pods.len(), 2);
    assert!(s.fleet.fault("central", Fault::Refuse), "central has a proxy");
    s.unreachable("central", "spanset never saw central cut off").await;
    s.place(&[1, 0, 0]);
    let east: Api<StatefulSet> = Api::namespaced(s.fleet.cluster("east").unwrap().client().await.unwrap(), "default");
    let deadline = Instant::now() + STEP;
    loop {
        let set = east.get("redis").await.unwrap();
        if set.status.as_ref().and_then(|s| s.ready_replicas) == Some(4) {
            break;
        }
        assert!(Instant::now() < deadline, "west's ordinals never reached east: {:?}", set.status);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Watched for a while after west's moves are done: central's pods run on untouched.
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(10) {
        let timeline = s.audit.timeline();
        for uid in &central_pods {
            let i = timeline.incarnations().find(|i| &i.uid == uid).unwrap();
            assert!(i.gone.is_none() && i.ran.last().is_some_and(|r| r.1.is_none()), "central's {i:?} stopped");
        }
        assert_eq!(s.judged(), 16, "14 + west's 2 arrived in east, nothing of central's yet");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(s.fleet.fault("central", Fault::None), "central has a proxy");
    s.settled(&[6, 0, 0], "all in east once central answers").await;
    assert_eq!(s.judged(), 18, "16 + central's 2, none twice");

    // Back to 1:1:1, the leader killed (SIGKILL) the moment a move is stored, not once it is
    // safely over: the standby takes the Lease and finishes every move from its stored phase.
    let first = s.leader();
    assert!(["spanset-a", "spanset-b"].contains(&first.as_str()), "one of the two leads: {first:?}");
    s.place(&[1, 1, 1]);
    let deadline = Instant::now() + STEP;
    while s.federation()["status"]["moves"].as_array().is_none_or(|m| m.is_empty()) {
        assert!(Instant::now() < deadline, "no move began");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let moves_at_kill = s.federation()["status"]["moves"].clone();
    s.controllers.iter_mut().find(|c| c.identity == first).unwrap().kill();
    s.settled(&[2, 2, 2], "back to 1:1:1 under the successor").await;
    assert_ne!(s.leader(), first, "the survivor leads");
    assert_eq!(s.judged(), 22, "18 + the four that left east, each once, the leader killed amid {moves_at_kill}");
    let left = s.volumes().await;
    assert_eq!(left.len(), 22, "a volume for each pod, no other: {left:?}");
    assert_eq!(left.iter().filter(|v| v.2 == "Bound").count(), 6, "{left:?}");

    // A rollout across the members (a new image), held first by a global partition of 4: the
    // members' real StatefulSet controllers replace exactly ordinals 5 and 4 (central's), the
    // highest first; then, the partition lifted, 3 down to 0 across west and east, each once,
    // never two ordinals down at once: the next is replaced only once the one before runs Ready
    // again, in whichever member it is.
    let rolled_from = jiff::Timestamp::now();
    let canary = r#"[{"op": "replace", "path": "/spec/template/template/spec/containers/0/image", "value": "redis:8"},
        {"op": "add", "path": "/spec/template/updateStrategy", "value": {"rollingUpdate": {"partition": 4}}}]"#;
    s.k.ok(&["--context", "host", "patch", "fsts", "redis", "--type", "json", "-p", canary]);
    s.updated(2, "a global partition of 4").await;
    s.audit_saw(rolled_from, 2).await;
    let names =
        |found: &[spanset::audit::timeline::Incarnation]| found.iter().map(|i| i.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&s.seen_since(rolled_from)), ["redis-5", "redis-4"], "exactly 5 then 4");
    let status = &s.federation()["status"];
    assert_ne!(status["currentRevision"], status["updateRevision"], "the old revision stays current: {status}");
    let lift = r#"[{"op": "replace", "path": "/spec/template/updateStrategy/rollingUpdate/partition", "value": 0}]"#;
    s.k.ok(&["--context", "host", "patch", "fsts", "redis", "--type", "json", "-p", lift]);
    s.updated(6, "the whole rollout").await;
    s.audit_saw(rolled_from, 6).await;
    let replaced = s.seen_since(rolled_from);
    let order: Vec<String> = (0..6).rev().map(|k| format!("redis-{k}")).collect();
    assert_eq!(names(&replaced), order, "each ordinal once, highest first");
    let status = &s.federation()["status"];
    assert_eq!(status["currentRevision"], status["updateRevision"], "the finished rollout is current: {status}");
    s.never_two_down_since(rolled_from);
    assert_eq!(s.judged(), 28, "22 + the six the rollout replaced");

    // `kubectl scale fsts`, through the federation's /scale: with `onScale: Keep` the three new
    // ordinals join central, whose slice borders them, one at a time as OrderedReady says (each
    // created once the one before is Ready), and nothing moves; scaled back, they go.
    let scaled_from = jiff::Timestamp::now();
    let out = s.k.ok(&["--context", "host", "scale", "fsts", "redis", "--replicas", "9"]);
    assert!(out.contains("federatedstatefulset.spanset.dev/redis scaled"), "{out}");
    s.settled(&[2, 2, 5], "nine replicas").await;
    s.audit_saw(scaled_from, 3).await;
    let added = s.seen_since(scaled_from);
    assert_eq!(names(&added), ["redis-6", "redis-7", "redis-8"], "{added:?}");
    assert!(added.iter().all(|i| i.member == "central"), "{added:?}");
    for pair in added.windows(2) {
        assert!(
            pair[1].seen >= pair[0].ready.expect("Ready"),
            "OrderedReady: {:?} before {:?} was Ready",
            pair[1],
            pair[0]
        );
    }
    let scale: Value = serde_json::from_str(&s.k.ok(&[
        "--context",
        "host",
        "get",
        "fsts",
        "redis",
        "--subresource",
        "scale",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(
        (scale["status"]["replicas"].as_i64(), scale["status"]["selector"].as_str()),
        (Some(9), Some("app=redis"))
    );
    s.k.ok(&["--context", "host", "scale", "fsts", "redis", "--replicas", "6"]);
    s.settled(&[2, 2, 2], "six again").await;
    assert_eq!(s.judged(), 31, "28 + the three added, none moved");
    let left = s.volumes().await;
    assert_eq!(left.len(), 25, "the three added ordinals' volumes, kept by the default retention policy: {left:?}");

    // Each guard `spanset join` wrote refuses what it is meant to, in the real apiserver's
    // words, which the sandbox's must match (`admission::kubectl_meets_the_members_guards`).
    let west = s.kubectl("west");
    let set: Value = serde_json::from_str(&west.ok(&["get", "sts", "redis", "-o", "json"])).unwrap();
    let term = set["metadata"]["annotations"]["spanset.dev/term"].as_str().unwrap().to_string();
    let pod =
        west.ok(&["get", "pods", "-l", "spanset.dev/federation=redis", "-o", "jsonpath={.items[0].metadata.name}"]);
    member_guards::provoke(&west, &term, &pod, &format!("a real {release} member"));

    // The audit proven by its failure: a second redis-0 started in central while east runs
    // the first, by the one writer the identity gate lets through (the member's StatefulSet
    // controller, whose credentials the administrator borrows: a controller gone wrong), with
    // spanset stopped (it would delete it) and outside the selector of central's StatefulSet
    // (which would adopt and delete it). The audit names it, live and from its recording.
    for c in &mut s.controllers {
        c.kill();
    }
    let first = s.audit.timeline().incarnations().find(|i| i.name == "redis-0" && i.gone.is_none()).cloned();
    let first = first.expect("redis-0 runs");
    let central = s.kubectl("central");
    let twin = r#"{"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "redis-0", "labels": {"spanset.dev/federation": "redis"}},
        "spec": {"containers": [{"name": "redis", "image": "redis:7"}]}}"#;
    let controller = "system:serviceaccount:kube-system:statefulset-controller";
    central.ok_with_stdin(&["create", "--as", controller, "-f", "-"], twin);
    let deadline = Instant::now() + STEP;
    let overlap = loop {
        let found = s.audit.timeline().overlaps().into_iter().find(|o| o.name == "redis-0");
        if let Some(o) = found {
            break o;
        }
        assert!(Instant::now() < deadline, "the audit never saw redis-0 run twice");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let members = [overlap.first.0.as_str(), overlap.second.0.as_str()];
    assert_eq!(members, ["central", &first.member], "{overlap:?}");
    let out =
        Command::new(env!("CARGO_BIN_EXE_spanset")).args(["audit", "redis", "--from"]).arg(&s.record).output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "an identity ran twice: exit 1\n{report}");
    assert!(report.contains("RAN TWICE redis-0: in central (uid "), "{report}");
    assert!(report.contains(&format!("and {} (uid {})", first.member, first.uid)), "{report}");
}

/// The tour, a cut-off member and a killed leader on members of the oldest release built.
#[tokio::test(flavor = "multi_thread")]
async fn on_real_1_34_members_the_tour_a_cut_off_member_and_a_killed_leader_run_no_identity_twice() {
    tour(real_kube::OLDEST).await;
}

/// The same on members of the newest release built.
#[tokio::test(flavor = "multi_thread")]
async fn on_real_1_37_members_the_tour_a_cut_off_member_and_a_killed_leader_run_no_identity_twice() {
    tour(real_kube::NEWEST).await;
}

/// The blog's migration between members of different releases (the oldest and the newest
/// built, each way round), with the volumes handed over and without.
#[tokio::test(flavor = "multi_thread")]
async fn the_blogs_migration_between_a_1_34_and_a_1_37_member_moves_each_volume_with_its_data_or_detaches_it() {
    let (old, new) = (real_kube::OLDEST, real_kube::NEWEST);
    for (storage, east, west) in [("Move", new, old), ("Detached", old, new)] {
        let Some(s) = install(new, &[("east", east), ("west", west)]).await else { return };
        s.create(|f| f["spec"]["migration"]["storage"] = storage.into());
        s.settled(&[3, 3], "halves").await;
        let mut marked = vec![];
        let volumes = s.volumes().await;
        for k in 3..6 {
            let pv = s.volume_of("west", k).await.expect("west's claim is bound");
            let (_, _, _, path) = volumes.iter().find(|v| v.0 == "west" && v.1 == pv).expect("the volume").clone();
            std::fs::write(path.join("marker"), format!("ordinal-{k}")).unwrap();
            marked.push((k, pv, path));
        }
        s.place(&[1, 0]);
        s.settled(&[6, 0], &format!("{storage}: everything in east")).await;
        let volumes = s.volumes().await;
        for (k, pv, path) in &marked {
            let now = s.volume_of("east", *k).await.expect("east's claim is bound");
            let (_, _, _, there) = volumes.iter().find(|v| v.0 == "east" && v.1 == now).expect("the volume").clone();
            let data = std::fs::read_to_string(there.join("marker")).unwrap_or_default();
            if storage == "Move" {
                assert_eq!(&now, pv, "ordinal {k} kept its volume");
                assert_eq!(&there, path, "the same directory behind it");
                assert_eq!(data, format!("ordinal-{k}"), "ordinal {k}'s data arrived with it");
                let west = volumes.iter().find(|v| v.0 == "west" && &v.1 == pv).expect("west keeps the volume");
                let client = s.fleet.cluster("west").unwrap().client().await.unwrap();
                let policy = Api::<PersistentVolume>::all(client).get(pv).await.unwrap().spec.unwrap();
                assert_eq!(policy.persistent_volume_reclaim_policy.as_deref(), Some("Retain"), "{west:?}");
            } else {
                assert_ne!(&now, pv, "ordinal {k} got a new volume");
                assert_eq!(data, "", "with no data");
            }
        }
        // Six pods, and one more for each ordinal that moved; nothing ran twice.
        assert_eq!(s.judged(), 9, "{storage}, west {west} to east {east}: 6 + 3 pods");
        // What it left: east's six volumes Bound, and west's three, whatever their phase.
        assert_eq!(count(&volumes, "east", "Bound"), 6, "{storage}: {volumes:?}");
        assert_eq!(volumes.iter().filter(|v| v.0 == "west").count(), 3, "{storage}: {volumes:?}");
    }
}

/// `kubectl drain` of a node of a 1.34 member, then of a 1.37 member, two nodes each, under the
/// federation's disruption budget (`spec.disruption.maxUnavailable: 1`, which spanset shares
/// out as a PodDisruptionBudget in each member): the real eviction API holds each drain to its
/// member's share, each drain finishes, its pods run again on the member's other node, and the
/// federation never has two ordinals down at once.
#[tokio::test(flavor = "multi_thread")]
async fn kubectl_drain_of_a_1_34_and_a_1_37_members_node_keeps_the_federations_disruption_budget() {
    let (old, new) = (real_kube::OLDEST, real_kube::NEWEST);
    let members = [("east", old), ("west", new), ("central", new)];
    let Some(s) = install_with_nodes(new, &members, 2).await else { return };
    // Each member's two pods on its first node (the scheduler would spread them), so that a
    // drain of it evicts both and the budget must hold the second back.
    let nodes = |member: &str| {
        let listed = s.kubectl(member).ok(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"]);
        let mut names: Vec<String> = listed.split_whitespace().map(str::to_string).collect();
        names.sort();
        names
    };
    for member in ["east", "west"] {
        assert_eq!(nodes(member).len(), 2, "{member}: two nodes");
        s.kubectl(member).ok(&["cordon", &nodes(member)[1]]);
    }
    s.create(|f| f["spec"]["disruption"] = serde_json::json!({"maxUnavailable": 1}));
    s.settled(&[2, 2, 2], "the example").await;
    for member in ["east", "west"] {
        s.kubectl(member).ok(&["uncordon", &nodes(member)[1]]);
    }
    let since = jiff::Timestamp::now();
    let mut evicted = 0;
    for member in ["east", "west"] {
        let k = s.kubectl(member);
        let placed = |k: &Kubectl| {
            k.ok(&["get", "pods", "-l", "app=redis", "-o", "jsonpath={.items[*].spec.nodeName}"])
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let before = placed(&k);
        let node = nodes(member)[0].clone();
        assert_eq!(before, [node.clone(), node.clone()], "{member}: both pods on {node}");
        evicted += 2;
        let budgets: Value = serde_json::from_str(&k.ok(&["get", "pdb", "-o", "json"])).unwrap();
        let budgets = budgets["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(budgets.len(), 1, "{member}: spanset's PodDisruptionBudget is there: {budgets:?}");
        k.ok(&["drain", &node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=240s"]);
        s.settled(&[2, 2, 2], &format!("{member} after the drain of {node}")).await;
        let after = placed(&k);
        assert!(!after.contains(&node), "{member}: a pod still on the drained {node}: {after:?}");
        k.ok(&["uncordon", &node]);
    }
    s.audit_saw(since, evicted).await;
    s.never_two_down_since(since);
    assert_eq!(s.judged(), 6 + evicted, "each evicted pod started again once, nothing else");
}

/// A member's nodes lost, then a member lost whole, on real control planes (central on the
/// oldest release, east and west on the newest):
/// - east's machines lose power (its kwok killed: no heartbeat, nothing plays its kubelet): its
///   real node controller marks its pods not Ready, and spanset, which still reaches east's API,
///   moves nothing, writes nothing to its StatefulSet, and counts them down; powered on again,
///   the same pods are Ready;
/// - central lost whole (every process killed, its data kept): fenced by an operator, its
///   ordinals re-homed to east and west, `unfence` refused while central was never shrunk; its
///   API back with its machines still off, as the failover runbook says: spanset shrinks it and
///   deletes its pods (its real StatefulSet controller, under OrderedReady, would delete one and
///   wait for a kubelet to confirm it); its machines back, nothing of central runs again; then
///   unfenced, and 1:1:1 again.
///
/// The audit is told when machines are off and on (what no pod status can say), and judges the
/// whole run: red if a returning member's undeleted pod ran again beside its re-homed twin.
#[tokio::test(flavor = "multi_thread")]
async fn a_real_members_nodes_lost_move_nothing_and_a_member_lost_whole_is_fenced_re_homed_and_shrunk_on_its_return() {
    let (old, new) = (real_kube::OLDEST, real_kube::NEWEST);
    let members = [("east", new), ("west", new), ("central", old)];
    let Some(mut s) = install(new, &members).await else { return };
    s.create(|f| f["spec"]["failover"] = serde_json::json!({"policy": "Manual", "unreachableAfterSeconds": 6}));
    s.settled(&[2, 2, 2], "the example").await;
    let set = |k: Kubectl| -> Value { serde_json::from_str(&k.ok(&["get", "sts", "redis", "-o", "json"])).unwrap() };
    let generation = set(s.kubectl("east"))["metadata"]["generation"].clone();

    // East's machines lose power.
    assert!(s.fleet.cluster_mut("east").unwrap().kill("kwok"));
    s.audit.machines_off("east");
    let deadline = Instant::now() + STEP;
    while s.federation()["status"]["ready"] != "4/6" {
        assert!(Instant::now() < deadline, "east's pods never counted down: {}", s.federation()["status"]);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let not_ready = s.kubectl("east").ok(&[
        "get",
        "pods",
        "-l",
        "app=redis",
        "-o",
        "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\" \"}{end}",
    ]);
    assert_eq!(not_ready.split_whitespace().collect::<Vec<_>>(), ["False", "False"], "the node controller's word");
    let status = &s.federation()["status"];
    assert!(status["moves"].as_array().is_none_or(|m| m.is_empty()), "nothing moves: {status}");
    assert_eq!(set(s.kubectl("east"))["metadata"]["generation"], generation, "east's StatefulSet untouched");
    s.fleet.cluster_mut("east").unwrap().restart().await.unwrap();
    s.audit.machines_on("east");
    // A returning kubelet reports its pods' readiness afresh; kwok marks a pod Ready only once,
    // when it first runs it, so the test writes what the kubelet would.
    let east = s.kubectl("east");
    for pod in ["redis-0", "redis-1"] {
        let ready = r#"{"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}]}}"#;
        east.ok(&["patch", "pod", pod, "--subresource", "status", "-p", ready]);
    }
    s.settled(&[2, 2, 2], "east's machines back").await;
    assert_eq!(s.judged(), 6, "the same six pods, none replaced");
    assert_eq!(set(s.kubectl("east"))["metadata"]["generation"], generation, "east's StatefulSet untouched");

    // Central lost whole.
    s.fleet.cluster_mut("central").unwrap().kill_all();
    s.audit.machines_off("central");
    s.unreachable("central", "spanset never saw central lost").await;
    let config = s.fleet.proxied_kubeconfig().display().to_string();
    let host = ["--kubeconfig", config.as_str(), "--context", "host"];
    let fenced = spanset(&[&["fence", "central", "--reason", "its datacenter lost power"][..], &host].concat());
    assert!(fenced.contains("membercluster/central fenced"), "{fenced}");
    let deadline = Instant::now() + STEP;
    loop {
        let mut ready = 0;
        for member in ["east", "west"] {
            let theirs = set(s.kubectl(member));
            ready += theirs["status"]["readyReplicas"].as_i64().unwrap_or(0);
        }
        if ready == 6 {
            break;
        }
        assert!(Instant::now() < deadline, "central's ordinals never re-homed: {}", s.federation()["status"]);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args([&["unfence", "central"][..], &host].concat())
        .output()
        .unwrap();
    let refusal = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{refusal}");
    assert!(refusal.contains("default/redis ordinals 4-5"), "{refusal}");

    // Central's API back, its machines still off: shrunk, and each of its pods being deleted.
    s.fleet
        .cluster_mut("central")
        .unwrap()
        .restart_only(&["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"])
        .await
        .unwrap();
    let deadline = Instant::now() + STEP;
    loop {
        let pods: Value =
            serde_json::from_str(&s.kubectl("central").ok(&["get", "pods", "-l", "app=redis", "-o", "json"])).unwrap();
        let pods = pods["items"].as_array().cloned().unwrap_or_default();
        let deleting = pods.iter().all(|p| p["metadata"]["deletionTimestamp"].is_string());
        if set(s.kubectl("central"))["spec"]["replicas"] == 0 && deleting {
            assert_eq!(pods.len(), 2, "no kubelet confirms their end while the machines are off");
            break;
        }
        assert!(Instant::now() < deadline, "central never shrunk: {pods:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Its machines back once the audit too has seen them being deleted (its watch of central
    // resumes on its own backoff): the pods being deleted are deleted, none runs.
    let deadline = Instant::now() + STEP;
    loop {
        let timeline = s.audit.timeline();
        let old: Vec<_> = timeline.incarnations().filter(|i| i.member == "central" && i.gone.is_none()).collect();
        if old.len() == 2 && old.iter().all(|i| i.deleting.is_some()) {
            break;
        }
        assert!(Instant::now() < deadline, "the audit never saw central's pods being deleted: {old:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    s.fleet.cluster_mut("central").unwrap().restart().await.unwrap();
    s.audit.machines_on("central");
    let deadline = Instant::now() + STEP;
    while !s.kubectl("central").ok(&["get", "pods", "-l", "app=redis", "-o", "name"]).trim().is_empty() {
        assert!(Instant::now() < deadline, "central's pods never went");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Re-homed 1:1 over east and west (east 0-2, west 3-5): 4 and 5 to west, 2 moved to east.
    let all = || format!("{:#?}", s.audit.timeline().incarnations().collect::<Vec<_>>());
    assert_eq!(s.judged(), 9, "6 + the two re-homed + redis-2 moved: {}", all());
    let unfenced = spanset(&[&["unfence", "central"][..], &host].concat());
    assert!(unfenced.contains("unfenced"), "{unfenced}");
    s.settled(&[2, 2, 2], "1:1:1 after the unfence").await;
    assert_eq!(s.judged(), 12, "9 + 4 and 5 back in central and 2 in west, none twice: {}", all());
    let left = s.volumes().await;
    // What it cost: a volume per pod (each new pod got fresh claims: central's old ones were
    // older than the re-homed pods' data, and retired), and one Released for each of the six
    // departures (redis-2 west → east → west, 4 and 5 central → west → central).
    assert_eq!(left.iter().filter(|v| v.2 == "Bound").count(), 6, "{left:?}");
    assert_eq!(left.iter().filter(|v| v.2 == "Released").count(), 6, "{left:?}");
    assert_eq!(left.len(), 12, "a volume per pod, no other: {left:?}");
}

/// `spanset sandbox --control-plane DIR` as a user runs it: the sandbox's own steps (CRDs, the
/// shipped identities, `spanset join`'s work, the example, the controller) on real control
/// planes (west on a release of its own: `--control-plane DIR,west=DIR`), `ready` printed,
/// kubectl answered by each cluster's real release, and nothing left running after SIGTERM.
#[test]
fn spanset_sandbox_on_real_control_planes_places_the_example_and_stops_them_all() {
    use std::io::BufRead;
    let Some(binaries) = real_kube::binaries(real_kube::NEWEST) else { return };
    let Some(older) = real_kube::binaries(real_kube::OLDEST) else { return };
    let mut turn = real_kube::fleet_turn_blocking();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("sandbox.kubeconfig");
    let plane = binaries.dir().display().to_string();
    let west_plane = older.dir().display().to_string();
    let planes = format!("{plane},west={west_plane}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_spanset"))
        .args(["sandbox", "--clusters", "east,west", "--metrics-addr", "127.0.0.1:0", "--control-plane", &planes])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spanset sandbox starts");
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    let row = |cluster: &str, ordinals: &str| {
        lines.lock().unwrap().iter().any(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells.len() >= 4 && cells[..4] == ["default/redis", cluster, ordinals, "3/3"]
        })
    };
    let deadline = Instant::now() + STEP;
    while !(row("east", "0-2") && row("west", "3-5")) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the sandbox exited with {status}: {:?}", lines.lock().unwrap());
        }
        assert!(Instant::now() < deadline, "the example never placed: {:?}", lines.lock().unwrap());
        std::thread::sleep(Duration::from_millis(200));
    }
    turn.started();
    let printed = lines.lock().unwrap().clone();
    assert!(printed.iter().any(|l| l == "ready"), "{printed:?}");
    assert!(
        printed.iter().any(|l| l.starts_with("cluster west: https://127.0.0.1:") && l.contains(&west_plane)),
        "{printed:?}"
    );

    let k = Kubectl::at(binaries.program("kubectl"), kubeconfig.clone(), dir.path().join("kubectl-cache"));
    for (cluster, dir) in [("east", &plane), ("west", &west_plane), ("host", &plane)] {
        let version: Value = serde_json::from_str(&k.ok(&["--context", cluster, "version", "-o", "json"])).unwrap();
        assert!(dir.contains(version["serverVersion"]["gitVersion"].as_str().unwrap()), "{cluster}: {version}");
    }
    let start = k.ok(&["--context", "west", "get", "sts", "redis", "-o", "jsonpath={.spec.ordinals.start}"]);
    assert_eq!(start, "3", "west's StatefulSet selects ordinals 3-5");
    // The member's own guard, in the real apiserver's words.
    let out = k.run(&["--context", "west", "scale", "sts", "redis", "--replicas", "1"]);
    let refusal = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && refusal.contains("spanset-owner-scale"), "{refusal}");

    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + STEP;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the sandbox stops on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    let clusters = kubeconfig.with_extension("clusters").display().to_string();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&clusters))
        .collect();
    assert!(left.is_empty(), "processes of the sandbox's clusters left: {left:?}");
}

/// What only a simulated cluster can do is refused with `--control-plane`, naming the flag,
/// before anything starts; so is a directory without the programs.
#[test]
fn spanset_sandbox_refuses_simulated_only_flags_and_a_bare_directory_with_control_planes() {
    let dir = tempfile::tempdir().unwrap();
    let run = |flags: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_spanset"))
            .args(["sandbox", "--kubeconfig"])
            .arg(dir.path().join("k"))
            .args(flags)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let empty = dir.path().display().to_string();
    let (code, err) = run(&["--control-plane", &empty, "--time-factor", "0.5"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--time-factor cannot be combined with --control-plane"), "{err}");
    let (code, err) = run(&["--control-plane", &empty, "--example", "redis-cluster", "--clusters", "east,west"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--run-images cannot be combined with --control-plane"), "{err}");
    let (code, err) = run(&["--control-plane", &empty]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("--control-plane {empty}: {empty}: no etcd")), "{err}");
    let (code, err) = run(&["--control-plane", &format!("north={empty}")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("\"north\" is neither \"host\" nor one of --clusters"), "{err}");
    assert!(!dir.path().join("k").exists(), "no kubeconfig written");
}
