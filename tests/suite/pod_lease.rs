//! Self-fencing pods end to end, on real processes: a federation with `spec.failover.podLease`
//! whose pods carry the guard (the real `spanset guard`, which the sandbox runs for spanset's
//! image) beside a real main process, under the real controller. Judged at every look over
//! the whole timeline: no ordinal's main process runs in two members at once, a cut-off
//! member's processes are gone before their ordinals start elsewhere, the ledger is clean, and
//! nothing but the lease fenced anything (the Automatic policy's own fence is an hour away).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Pod};
use kube::api::Api;
use serde_json::json;
use spanset_api::{FederatedStatefulSet, MemberCluster};

use crate::support::{
    DEADLINE,
    federation::{Controller, Federation},
    program,
};

pub(crate) const MEMBERS: &[&str] = &["east", "west", "central"];
/// The shortest lease spanset takes, to keep the tests short.
pub(crate) const LEASE_SECONDS: i32 = 10;
/// Where `placed` puts the six ordinals.
pub(crate) const THIRDS: [(&str, i32, i32); 3] = [("east", 0, 2), ("west", 2, 2), ("central", 4, 2)];
/// What the main process's command line carries, with its federation's name, then its pod's
/// name and uid after it. Each test names its federation differently: the sandboxes of tests
/// that run at once make the same uids in the same order (their generators share a seed), and
/// every test sees every process of the machine.
const MARKER: &str = "pod-lease-main";

/// Six ordinals in thirds (east 0-1, west 2-3, central 4-5), each pod a real process tagged
/// with its pod's name and node, Automatic failover whose own fence waits an hour, and a pod
/// lease of ten seconds.
pub(crate) fn leased(name: &str, seconds: i32) -> FederatedStatefulSet {
    let marker = format!("{MARKER}-{name}:$(POD_NAME):$(POD_UID)");
    serde_json::from_value(json!({
        "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 6,
            "placement": {"clusters": [{"name": "east", "weight": 1}, {"name": "west", "weight": 1}, {"name": "central", "weight": 1}]},
            "failover": {"policy": "Automatic", "unreachableAfterSeconds": 6, "fenceAfterSeconds": 3600,
                "podLease": {"seconds": seconds}},
            "template": {"serviceName": name, "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {
                    "terminationGracePeriodSeconds": 2,
                    // They tolerate an unreachable node, as databases do: nothing evicts them.
                    "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}],
                    "containers": [{"name": "db", "image": "busybox",
                        "command": ["sh", "-c", "while :; do sleep 0.1; done", marker],
                        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]}]}}}
        }
    }))
    .expect("the federation parses")
}

/// Whether a process is the guard's first process of a container (`spanset-guard-exec`), or one
/// of the commands that start it: they carry its command's arguments (after its own name) but
/// run nothing of it by themselves.
pub(crate) fn is_guard_exec(proc_dir: &std::path::Path) -> bool {
    std::fs::read(proc_dir.join("cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a.ends_with(b"spanset-guard-exec")))
}

/// Every main process of federation `name` alive now, as (ordinal, pod uid) pairs, from the
/// command lines of the machine's processes (the sandbox runs each container as a real process).
/// The container's first process, `spanset-guard-exec`, carries the command line it may start
/// without running it: it is not counted.
pub(crate) fn running(name: &str) -> BTreeSet<(u32, String)> {
    let mut out = BTreeSet::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for entry in dir.flatten() {
        if is_guard_exec(&entry.path()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let text = String::from_utf8_lossy(&cmdline);
        for arg in text.split('\0') {
            let Some(rest) = arg.strip_prefix(&format!("{MARKER}-{name}:")) else { continue };
            let Some((pod, uid)) = rest.split_once(':') else { continue };
            if let Some(k) = pod.rsplit_once('-').and_then(|(_, k)| k.parse().ok()) {
                out.insert((k, uid.to_string()));
            }
        }
    }
    out
}

/// Which member each pod (by uid) of federation `name` is in, learnt from the members that
/// answer: a pod of a member cut off since was listed before it was.
pub(crate) struct Owners {
    name: String,
    pods: BTreeMap<String, String>,
}

impl Owners {
    /// The owners once every ordinal's main process runs (the pods listed in every member).
    pub(crate) async fn all_six_running(f: &Federation, name: &str) -> Owners {
        let mut owners = Owners { name: name.to_string(), pods: BTreeMap::new() };
        let deadline = Instant::now() + DEADLINE;
        while owners.homes(f, MEMBERS, "placed").await.len() < 6 {
            assert!(Instant::now() < deadline, "every ordinal's main process runs");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        owners
    }

    /// Waits until central is shrunk with no pod of the federation left, asserting at every look
    /// that it runs no ordinal.
    pub(crate) async fn central_emptied(&mut self, f: &Federation, at: &str) {
        let central = f.member("central").await;
        let sts: Api<k8s_openapi::api::apps::v1::StatefulSet> = Api::namespaced(central.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(central, "default");
        let deadline = Instant::now() + DEADLINE;
        loop {
            let now = self.homes(f, MEMBERS, at).await;
            assert!(now.values().all(|m| m != "central"), "{at}: central runs an ordinal again: {now:?}");
            let empty =
                sts.get_opt(&self.name).await.ok().flatten().and_then(|s| s.spec).and_then(|s| s.replicas) == Some(0);
            let none = pods.list(&Default::default()).await.is_ok_and(|l| l.items.is_empty());
            if empty && none {
                return;
            }
            assert!(Instant::now() < deadline, "{at}: central shrunk with no pod of {} left", self.name);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn learn(&mut self, f: &Federation, members: &[&str]) {
        for m in members {
            let pods: Api<Pod> = Api::namespaced(f.member(m).await, "default");
            if let Ok(list) = pods.list(&Default::default()).await {
                for p in list.items {
                    self.pods.insert(p.metadata.uid.unwrap_or_default(), m.to_string());
                }
            }
        }
    }

    /// Where each ordinal's main process runs now, asserting that none runs in two members at
    /// once (pods not listed yet are learnt from the members in `reachable` first).
    pub(crate) async fn homes(&mut self, f: &Federation, reachable: &[&str], at: &str) -> BTreeMap<u32, String> {
        let seen = running(&self.name);
        if seen.iter().any(|(_, uid)| !self.pods.contains_key(uid)) {
            self.learn(f, reachable).await;
        }
        let mut out: BTreeMap<u32, String> = BTreeMap::new();
        for (k, uid) in &seen {
            let Some(m) = self.pods.get(uid) else { continue };
            if let Some(other) = out.insert(*k, m.clone()) {
                panic!("{at}: ordinal {k} runs in {other} and {m} at once: {seen:?}");
            }
        }
        out
    }
}

/// The federation placed in thirds under a controller, every ordinal's main process running.
/// The sandbox answers or refuses a request within seconds even on a loaded machine: a write it
/// did not answer within twenty never lands (`--member-write-deadline 20`).
pub(crate) async fn placed(name: &str) -> (Federation, Controller, Owners) {
    placed_with(name, LEASE_SECONDS, 20).await
}

/// [`placed`] with a lease of `seconds` and a member write deadline of `w` seconds.
pub(crate) async fn placed_with(name: &str, seconds: i32, w: u32) -> (Federation, Controller, Owners) {
    placed_as(leased(name, seconds), &[], w).await
}

/// `fsts` placed in thirds in a sandbox started with `flags` too, under a controller whose member
/// write deadline is `w` seconds, every ordinal's main process running.
pub(crate) async fn placed_as(fsts: FederatedStatefulSet, flags: &[&str], w: u32) -> (Federation, Controller, Owners) {
    let name = fsts.metadata.name.clone().expect("a name");
    let f = Federation::start_secure_with(MEMBERS, &[&["--run-images", "busybox,spanset"], flags].concat()).await;
    let w = w.to_string();
    let c = Controller::start_full(&f.sandbox, "controller", &[], &["--member-write-deadline", &w]);
    f.create(&fsts).await;
    f.wait_settled(&name, &THIRDS, "thirds").await;
    let owners = Owners::all_six_running(&f, &name).await;
    (f, c, owners)
}

pub(crate) fn programs() -> bool {
    program("sh", "dash").is_some() && program("unshare", "util-linux").is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_member_stops_its_own_pods_before_automatic_failover_re_homes_them() {
    const NAME: &str = "partitioned";
    if !programs() {
        return;
    }
    let (f, _c, mut owners) = placed(NAME).await;
    let before = f.sandbox.account();

    // Central is cut off from everything outside it; its pods keep running, as they would, and
    // still reach central's own API: their guards keep reading a Lease nobody extends.
    let partitioned = Instant::now();
    f.sandbox.ctl_ok(&["partition", "central", "--outside-only"]);
    let mut stopped: Option<Duration> = None;
    let deadline = Instant::now() + 3 * DEADLINE;
    let elsewhere = loop {
        let now = owners.homes(&f, &["east", "west"], "after the partition").await;
        let central: Vec<u32> = now.iter().filter(|(_, m)| *m == "central").map(|(k, _)| *k).collect();
        if stopped.is_none() && central.is_empty() {
            stopped = Some(partitioned.elapsed());
        }
        let moved = [4, 5].iter().all(|k| now.get(k).is_some_and(|m| m != "central"));
        if moved {
            assert!(stopped.is_some(), "ordinals 4 and 5 started elsewhere while central still ran one: {now:?}");
        }
        let s = f.status(NAME).await;
        if moved && s.moves.is_empty() && s.ready.as_deref() == Some("6/6") {
            break partitioned.elapsed();
        }
        assert!(Instant::now() < deadline, "ordinals 4 and 5 Ready elsewhere: {now:?}, {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let stopped = stopped.unwrap();
    println!("partition → central's processes gone: {stopped:?}; → all six Ready elsewhere: {elsewhere:?}");
    let mcs: Api<MemberCluster> = Api::all(f.host.clone());
    assert!(!mcs.get("central").await.unwrap().spec.fenced, "no fence: the lease alone re-homed them");

    // Central returns all at once: its pods' guards see a lease that names nothing new, spanset
    // shrinks it, and none of its main processes runs again.
    f.sandbox.ctl_ok(&["heal", "central"]);
    owners.central_emptied(&f, "after the return").await;
    f.assert_ledger_clean();

    // What it cost: two pods created elsewhere for the two re-homed ordinals; no volume anywhere.
    let cost = f.sandbox.account().since(&before);
    for m in MEMBERS {
        let c = cost.cluster(m);
        assert_eq!((c.provisioned(), c.released()), (0, 0), "{m}: {cost:?}");
    }
}

/// Whether the `wait` of a guard of federation `name` runs: a pod whose main container has not
/// been let start.
fn a_guard_waits(name: &str) -> bool {
    let lease = format!("--lease=default/{name}-pods");
    let Ok(dir) = std::fs::read_dir("/proc") else { return false };
    dir.flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
            args.windows(2).any(|w| w[0] == b"guard" && w[1] == b"wait") && args.contains(&lease.as_bytes())
        })
    })
}

/// How many main containers of federation `name` have their first process
/// (`spanset-guard-exec`) running.
fn first_processes_waiting(name: &str) -> usize {
    let marker = format!("{MARKER}-{name}:");
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.flatten()
        .filter(|e| {
            std::fs::read_link(e.path().join("exe")).is_ok_and(|x| x.to_string_lossy().ends_with("spanset-guard-exec"))
        })
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a.starts_with(marker.as_bytes())))
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_member_powered_on_before_its_shrink_runs_nothing_its_lease_no_longer_names() {
    const NAME: &str = "powered";
    if !programs() {
        return;
    }
    let (f, _c, mut owners) = placed(NAME).await;
    let clusters: serde_json::Value = serde_json::from_str(&f.sandbox.ctl_ok(&["clusters"])).unwrap();
    let nodes: Vec<String> = clusters["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "central")
        .and_then(|c| c["nodes"].as_array())
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect();
    assert!(!nodes.is_empty(), "central's nodes: {clusters}");

    // Central is lost: its machines power off (its processes die at once), its API goes.
    for n in &nodes {
        f.sandbox.ctl_ok(&["node-down", "central", n, "--power-off"]);
    }
    f.sandbox.ctl_ok(&["partition", "central"]);
    let deadline = Instant::now() + 3 * DEADLINE;
    loop {
        let now = owners.homes(&f, &["east", "west"], "after the loss").await;
        let s = f.status(NAME).await;
        if [4, 5].iter().all(|k| now.get(k).is_some_and(|m| m != "central")) && s.ready.as_deref() == Some("6/6") {
            break;
        }
        assert!(Instant::now() < deadline, "ordinals 4 and 5 Ready elsewhere: {now:?}, {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Its machines come back before its API does, so before spanset can shrink it: its kubelets
    // start its pods again, whose guards wait for an extension spanset cannot make. Watched for
    // twice the lease from the moment a guard is seen waiting, then the partition heals and
    // spanset shrinks central; at no look does central run an ordinal.
    for n in &nodes {
        f.sandbox.ctl_ok(&["node-up", "central", n]);
    }
    let deadline = Instant::now() + DEADLINE;
    while !a_guard_waits(NAME) {
        let now = owners.homes(&f, &["east", "west"], "powered on").await;
        assert!(now.values().all(|m| m != "central"), "central runs an ordinal again: {now:?}");
        assert!(Instant::now() < deadline, "central's pods started again, their guards waiting");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(2 * LEASE_SECONDS as u64) {
        let now = owners.homes(&f, &["east", "west"], "powered on, still cut off").await;
        assert!(now.values().all(|m| m != "central"), "central runs an ordinal again: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    f.sandbox.ctl_ok(&["heal", "central"]);
    owners.central_emptied(&f, "healed").await;
    let mcs: Api<MemberCluster> = Api::all(f.host.clone());
    assert!(!mcs.get("central").await.unwrap().spec.fenced, "no fence: the lease alone re-homed them");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_outage_longer_than_the_lease_stops_every_pod_until_spanset_returns() {
    const NAME: &str = "outage";
    if !programs() {
        return;
    }
    let (f, _c, mut owners) = placed(NAME).await;
    let pods_before: BTreeSet<String> = running(NAME).into_iter().map(|(_, uid)| uid).collect();
    // Nobody but spanset extends a pod lease (the member's admission policy): not even the
    // member's administrator, who would otherwise keep the pods running through the outage.
    let leases: Api<Lease> = Api::namespaced(f.member("east").await, "default");
    let extension = json!({"metadata": {"annotations": {"spanset.dev/extension": "999999"}}});
    let err = leases
        .patch(&format!("{NAME}-pods"), &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&extension))
        .await
        .expect_err("an administrator's extension is refused");
    assert!(err.to_string().contains("spanset-owner-leases"), "{err}");
    let before = f.sandbox.account();

    // The host cluster goes: spanset keeps running but cannot lead (its leader Lease is there),
    // so nothing extends the members' leases, although every member answers.
    let outage = Instant::now();
    f.sandbox.ctl_ok(&["partition", "host"]);
    let mut first_stop: Option<Duration> = None;
    let deadline = Instant::now() + 3 * DEADLINE;
    let all_stopped = loop {
        let now = owners.homes(&f, MEMBERS, "during the host outage").await;
        if first_stop.is_none() && now.len() < 6 {
            first_stop = Some(outage.elapsed());
        }
        if now.is_empty() {
            break outage.elapsed();
        }
        assert!(Instant::now() < deadline, "every pod stops itself without spanset: still running {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Each stopped pod stays, its containers' first processes waiting for a fresh extension:
    // watched for a whole lease, none of them runs its main process meanwhile.
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(LEASE_SECONDS as u64) {
        let now = owners.homes(&f, MEMBERS, "stopped, before the host returns").await;
        assert!(now.is_empty(), "a main process runs again without spanset: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(first_processes_waiting(NAME), 6, "every pod's first process waits for a fresh extension");
    // The host returns: spanset leads again, extends every member's lease, and each pod's guard
    // lets its main process start again, in the same pod.
    f.sandbox.ctl_ok(&["heal", "host"]);
    let healed = Instant::now();
    let deadline = Instant::now() + 3 * DEADLINE;
    let back = loop {
        let now = owners.homes(&f, MEMBERS, "after the host returned").await;
        if now.len() == 6 && f.status(NAME).await.ready.as_deref() == Some("6/6") {
            break healed.elapsed();
        }
        assert!(Instant::now() < deadline, "all six run again once spanset returns: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let first_stop = first_stop.unwrap();
    println!(
        "host outage of {:?} (lease {LEASE_SECONDS} s): the main processes stopped {first_stop:?} to \
         {all_stopped:?} after it began; all six Ready again {back:?} after the host returned",
        healed.duration_since(outage)
    );

    // Restarted in place: the same pods, placed as before; nothing created or deleted, no
    // volume touched, every identity single throughout.
    let pods_after: BTreeSet<String> = running(NAME).into_iter().map(|(_, uid)| uid).collect();
    assert_eq!(pods_after, pods_before, "the same six pods run again");
    let cost = f.sandbox.account().since(&before);
    for m in MEMBERS {
        let c = cost.cluster(m);
        let pods = c.by_resource("pods");
        assert_eq!((pods.created, pods.deleted), (0, 0), "{m}: no pod made or deleted: {cost:?}");
        assert_eq!((c.provisioned(), c.released()), (0, 0), "{m}: {cost:?}");
    }
    f.wait_settled(NAME, &THIRDS, "thirds still").await;
    f.assert_ledger_clean();
}

/// Sets the federation's pod lease to `seconds`.
async fn set_lease(f: &Federation, name: &str, seconds: i32) {
    let patch = json!({"spec": {"failover": {"podLease": {"seconds": seconds}}}});
    f.api().patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.expect("patched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_longer_lease_rolls_the_pods_one_at_a_time_and_stops_none_of_them_otherwise() {
    const NAME: &str = "longer";
    if !programs() {
        return;
    }
    // A write deadline of 5 s: the leader's first lease clocks take anything sent before it led
    // as landed within 6.25 s of its start, so once it has led for the lease after that, a clock
    // made afresh would take every member as lapsed at once. The change comes after that.
    let started = Instant::now();
    let (f, _c, mut owners) = placed_with(NAME, LEASE_SECONDS, 5).await;
    let ripe = started + Duration::from_secs(30);
    while Instant::now() < ripe {
        let now = owners.homes(&f, MEMBERS, "before the change").await;
        assert_eq!(now.len(), 6, "all six run before the change: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let before = f.sandbox.account();
    let old = f.status(NAME).await;
    assert_eq!(old.pod_lease_seconds, Some(LEASE_SECONDS));
    set_lease(&f, NAME, 20).await;
    let generation = f.api().get(NAME).await.unwrap().metadata.generation;

    // The template changed (the guards' length is in it): the pods are replaced one at a
    // time, and no other pod stops meanwhile.
    let deadline = Instant::now() + 3 * DEADLINE;
    loop {
        let now = owners.homes(&f, MEMBERS, "rolling to the longer lease").await;
        assert!(now.len() >= 5, "at most one ordinal down at a time: {now:?}");
        let s = f.status(NAME).await;
        let rolled = s.observed_generation == generation && s.update_revision != old.update_revision;
        if rolled && s.updated_replicas == Some(6) && s.ready.as_deref() == Some("6/6") && now.len() == 6 {
            assert_eq!(s.pod_lease_seconds, Some(20), "the longer lease is in force: {s:?}");
            break;
        }
        assert!(Instant::now() < deadline, "the six pods rolled to the longer lease: {now:?} {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // What it cost: each pod replaced once, in its own member; no volume.
    let cost = f.sandbox.account().since(&before);
    for m in MEMBERS {
        let c = cost.cluster(m);
        let pods = c.by_resource("pods");
        assert_eq!((pods.created, pods.deleted), (2, 2), "{m}: each of its two pods replaced once: {cost:?}");
        assert_eq!((c.provisioned(), c.released()), (0, 0), "{m}: {cost:?}");
    }
    let mcs: Api<MemberCluster> = Api::all(f.host.clone());
    for m in MEMBERS {
        assert!(!mcs.get(m).await.unwrap().spec.fenced, "{m} not fenced");
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_lease_set_while_a_member_is_cut_off_waits_for_the_longer_one_its_pods_hold() {
    const NAME: &str = "shorter";
    if !programs() {
        return;
    }
    // Forty seconds: well after spanset would re-home central's ordinals had it measured with
    // the shorter lease (seen about twenty seconds after the partition when it did).
    let (f, _c, mut owners) = placed_with(NAME, 40, 20).await;

    // Central is cut off with its pods alive, whose guards hold 40 s; the lease is then
    // shortened to 10 s, which central's pods can never learn.
    let partitioned = Instant::now();
    f.sandbox.ctl_ok(&["partition", "central"]);
    set_lease(&f, NAME, 10).await;
    let mut stopped: Option<Duration> = None;
    let deadline = Instant::now() + 3 * DEADLINE;
    let elsewhere = loop {
        let now = owners.homes(&f, &["east", "west"], "after the partition").await;
        if stopped.is_none() && now.values().all(|m| m != "central") {
            stopped = Some(partitioned.elapsed());
        }
        let moved = [4, 5].iter().all(|k| now.get(k).is_some_and(|m| m != "central"));
        let s = f.status(NAME).await;
        if moved && s.moves.is_empty() && s.ready.as_deref() == Some("6/6") {
            assert_eq!(s.pod_lease_seconds, Some(40), "central may still hold 40 s pods: {s:?}");
            break partitioned.elapsed();
        }
        assert!(Instant::now() < deadline, "ordinals 4 and 5 Ready elsewhere: {now:?}, {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "lease 40 s shortened to 10 s while central was cut off: central's processes gone after {:?}, \
         its ordinals Ready elsewhere after {elsewhere:?}",
        stopped.unwrap()
    );
    // Central returns: shrunk and emptied, and then the shorter lease is in force.
    f.sandbox.ctl_ok(&["heal", "central"]);
    owners.central_emptied(&f, "after the return").await;
    let deadline = Instant::now() + 3 * DEADLINE;
    while f.status(NAME).await.pod_lease_seconds != Some(10) {
        owners.homes(&f, MEMBERS, "settling on the shorter lease").await;
        assert!(Instant::now() < deadline, "the shorter lease in force once every pod holds it");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_set_while_a_member_is_cut_off_does_not_fence_it_its_pods_have_no_guard() {
    const NAME: &str = "unguarded";
    if !programs() {
        return;
    }
    // Placed without a pod lease: no pod has a guard.
    let f = Federation::start_secure_with(MEMBERS, &["--run-images", "busybox,spanset"]).await;
    let _c = Controller::start_full(&f.sandbox, "controller", &[], &["--member-write-deadline", "5"]);
    let mut fsts = leased(NAME, LEASE_SECONDS);
    fsts.spec.failover.pod_lease = None;
    f.create(&fsts).await;
    f.wait_settled(NAME, &THIRDS, "thirds").await;
    let mut owners = Owners::all_six_running(&f, NAME).await;

    // Central is cut off before the lease is set: its pods can never get the guard, so no lapse
    // of its lease says they stopped. They keep running, and so must stay its alone (the
    // Automatic policy's own fence is an hour away).
    f.sandbox.ctl_ok(&["partition", "central"]);
    set_lease(&f, NAME, LEASE_SECONDS).await;
    let generation = f.api().get(NAME).await.unwrap().metadata.generation;
    let deadline = Instant::now() + DEADLINE;
    while f.status(NAME).await.observed_generation != generation {
        assert!(Instant::now() < deadline, "the lease is seen");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Three times what a lapse takes here (L/4 + W/4 + W + L, with L 10 s and W 5 s: 25 s).
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(75) {
        let now = owners.homes(&f, &["east", "west"], "central cut off, its pods unguarded").await;
        assert_eq!(
            [4, 5].map(|k| now.get(&k).map(String::as_str)),
            [Some("central"); 2],
            "ordinals 4 and 5 run in central only"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let s = f.status(NAME).await;
    assert!(s.homes.iter().any(|h| h.cluster == "central" && h.ordinals == "4-5"), "still central's: {s:?}");
    f.assert_ledger_clean();
}
