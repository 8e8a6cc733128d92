//! The measured phases of one cell, in the order they run: converge, idle, resources, spec
//! changes, detection of a lost member, fence. Each waits on conditions with generous
//! deadlines and answers `Err(what it was waiting for)` when one passes, so that the cell can
//! report it and the grid go on.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;
use spanset::cli::sandbox::example;
use spanset_api::{FederatedStatefulSet, MemberCluster};
use spanset_controller::host::{events::Recorder, fencing};

use crate::{
    processes::{ControllerProcess, SimProcess, scrape, series_sum},
    procfs,
    support::{light_template, settled},
    watches::{MemberWatches, REV, Seen},
};

/// Replicas of every federation.
pub const REPLICAS: i32 = 10;
/// Federations created at once while converging.
const CREATE_CONCURRENCY: usize = 8;
/// How long converging may go without one more federation settling (from nothing, 1,000
/// federations progress in step and the first settles late).
const STALL: Duration = Duration::from_secs(600);
/// How long one spec change or one detection may take.
const PHASE_DEADLINE: Duration = Duration::from_secs(120);
/// How long the fence's re-homing writes may take.
const FENCE_DEADLINE: Duration = Duration::from_secs(300);

/// How many members a federation's placement lists: its 10 replicas' members and two more to
/// re-home to. A placement member is written the federation's published EndpointSlices (the
/// network identity), so a placement of every member would cost every pod change one write
/// per member of the cell: 100 at 100 members, whatever holds replicas.
pub const PLACED: usize = 12;

/// The federation `i` of a cell: 10 replicas placed over [`PLACED`] consecutive members from
/// member `i` (mod M; all M when fewer), weight 1 each: ties go to the earlier cluster in
/// placement order, so members `i`…`i+9` hold one replica each and the two after them none,
/// until a fence re-homes there. Every member holds about F×10/M pods.
pub fn federation(i: usize, members: &[String]) -> FederatedStatefulSet {
    let name = federation_name(i);
    let k = i % members.len();
    let rotated: Vec<String> =
        members[k..].iter().chain(&members[..k]).take(PLACED.min(members.len())).cloned().collect();
    let mut f = example(&rotated);
    f.metadata.name = Some(name.clone());
    f.spec.replicas = REPLICAS;
    f.spec.template = serde_json::from_value(light_template(&name)).expect("a valid template");
    f
}

/// The name of federation `i`.
pub fn federation_name(i: usize) -> String {
    format!("fed-{i:04}")
}

// ---------------------------------------------------------------------------------------------
// Converge.

/// Creates `n` federations as fast as the host takes them and answers how long until every
/// one is [`settled`] (seen by a watch on the host).
pub async fn converge(host: &Client, members: &[String], n: usize) -> Result<Duration, String> {
    let api: Api<FederatedStatefulSet> = Api::namespaced(host.clone(), "default");
    let mut events = watcher(api.clone(), watcher::Config::default()).default_backoff().boxed();
    let t0 = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &federation(i, members)).await }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .map_err(|e| format!("creating {n} federations: {e}"))?;
    eprintln!("    created {n} federations in {:.1} s", t0.elapsed().as_secs_f64());
    let (mut done, mut progress, mut printed) = (BTreeSet::new(), Instant::now(), Instant::now());
    while done.len() < n {
        if progress.elapsed() > STALL {
            return Err(format!("all {n} federations settled ({} were; none more for {STALL:?})", done.len()));
        }
        if printed.elapsed() > Duration::from_secs(10) {
            eprintln!("    {}/{n} settled after {:.0} s", done.len(), t0.elapsed().as_secs_f64());
            printed = Instant::now();
        }
        let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(1), events.next()).await else { continue };
        let (watcher::Event::Apply(f) | watcher::Event::InitApply(f)) = ev.map_err(|e| format!("host watch: {e}"))?
        else {
            continue;
        };
        let before = done.len();
        if settled(&f, REPLICAS) {
            done.insert(f.name_any());
        } else {
            done.remove(&f.name_any());
        }
        if done.len() > before {
            progress = Instant::now();
        }
    }
    Ok(t0.elapsed())
}

// ---------------------------------------------------------------------------------------------
// Idle and resources.

/// What the controller (and the sandbox) did over an idle window.
pub struct Idle {
    /// The controller's CPU, % of one core.
    pub cpu: f64,
    /// The sandbox process's CPU, % of one core.
    pub sim_cpu: f64,
    /// Reconciles per second (`spanset_reconciles_total`).
    pub reconciles: f64,
    /// Member writes in the window (`spanset_member_writes_total`).
    pub writes: f64,
    /// The window.
    pub window: Duration,
}

/// Measures the idle controller over `window`, after a short pause for trailing work.
pub async fn idle(ctrl: &ControllerProcess, sim: &SimProcess, window: Duration) -> Idle {
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (cpu0, sim0, m0, t0) =
        (procfs::cpu_seconds(ctrl.pid()), procfs::cpu_seconds(sim.pid()), scrape(ctrl.metrics).await, Instant::now());
    tokio::time::sleep(window).await;
    let (cpu1, sim1, m1) =
        (procfs::cpu_seconds(ctrl.pid()), procfs::cpu_seconds(sim.pid()), scrape(ctrl.metrics).await);
    let window = t0.elapsed();
    let secs = window.as_secs_f64();
    let d = |name: &str| series_sum(&m1, name) - series_sum(&m0, name);
    Idle {
        cpu: (cpu1 - cpu0) / secs * 100.0,
        sim_cpu: (sim1 - sim0) / secs * 100.0,
        reconciles: d("spanset_reconciles_total") / secs,
        writes: d("spanset_member_writes_total"),
        window,
    }
}

/// The controller's memory and descriptors.
pub struct Resources {
    /// Resident set, bytes.
    pub rss: u64,
    /// Every open descriptor.
    pub fds: usize,
    /// TCP sockets to each member's API (every member listed, zeros included).
    pub per_member: Vec<usize>,
    /// TCP sockets to the host's API.
    pub host: usize,
    /// Other sockets and TCP connections elsewhere (listeners, loopback pairs…).
    pub other_sockets: usize,
}

impl Resources {
    /// Mean sockets per member.
    pub fn mean_per_member(&self) -> f64 {
        self.per_member.iter().sum::<usize>() as f64 / self.per_member.len().max(1) as f64
    }

    /// Most sockets to one member.
    pub fn max_per_member(&self) -> usize {
        self.per_member.iter().copied().max().unwrap_or(0)
    }
}

/// Reads the controller's resources now; `members` in order, `sim.ports` maps their ports.
pub fn resources(ctrl: &ControllerProcess, sim: &SimProcess, members: &[String]) -> Resources {
    let d = procfs::descriptors(ctrl.pid());
    let mut per_member = vec![0; members.len()];
    let (mut host, mut other) = (0, d.other_sockets);
    for (port, n) in &d.tcp_by_remote_port {
        match sim.ports.get(port).map(String::as_str) {
            Some("host") => host += n,
            Some(m) => match members.iter().position(|x| x == m) {
                Some(i) => per_member[i] += n,
                None => other += n,
            },
            None => other += n,
        }
    }
    Resources { rss: procfs::rss_bytes(ctrl.pid()), fds: d.total, per_member, host, other_sockets: other }
}

// ---------------------------------------------------------------------------------------------
// Spec change → every member written.

/// Patches the pod template of `samples` different federations, one after another, and
/// answers, sorted, the time from each patch until every member StatefulSet of that federation
/// carries it (as the member watches saw it).
pub async fn spec_changes(
    host: &Client,
    watches: &MemberWatches,
    n: usize,
    samples: usize,
) -> Result<Vec<Duration>, String> {
    let api: Api<FederatedStatefulSet> = Api::namespaced(host.clone(), "default");
    let mut latencies = Vec::with_capacity(samples);
    for s in 0..samples {
        let name = federation_name(s * n / samples);
        let rev = format!("s{s}");
        let patch = json!({"spec": {"template": {"template": {"metadata": {"annotations": {REV: rev}}}}}});
        let t0 = Instant::now();
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("patching {name}: {e}"))?;
        let written = watches
            .wait_for(PHASE_DEADLINE, |seen| {
                let mine: Vec<_> = seen.iter().filter(|((f, _), _)| *f == name).map(|(_, v)| v).collect();
                let all = !mine.is_empty() && mine.iter().all(|v| v.rev.as_deref() == Some(rev.as_str()));
                all.then(|| mine.iter().map(|v| v.rev_since).max().expect("not empty"))
            })
            .await
            .ok_or_else(|| format!("every member StatefulSet of {name} carrying {REV}={rev} (change {s})"))?;
        latencies.push(written.saturating_duration_since(t0));
    }
    latencies.sort();
    Ok(latencies)
}

/// Changes every federation's template at once and answers how long until every member
/// StatefulSet of every one carries the change: the controllers' throughput.
pub async fn burst(host: &Client, watches: &MemberWatches, n: usize) -> Result<Duration, String> {
    let api: Api<FederatedStatefulSet> = Api::namespaced(host.clone(), "default");
    let rev = "burst";
    let t0 = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let patch = json!({"spec": {"template": {"template": {"metadata": {"annotations": {REV: rev}}}}}});
            async move { api.patch(&federation_name(i), &PatchParams::default(), &Patch::Merge(&patch)).await }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .map_err(|e| format!("changing {n} federations: {e}"))?;
    watches
        .wait_for(PHASE_DEADLINE, |seen| {
            let changed: BTreeSet<&String> =
                seen.iter().filter(|(_, v)| v.rev.as_deref() == Some(rev)).map(|((f, _), _)| f).collect();
            let all = seen.iter().all(|(_, v)| v.rev.as_deref() == Some(rev));
            (all && changed.len() == n).then_some(())
        })
        .await
        .ok_or_else(|| format!("every member StatefulSet of all {n} federations carrying {REV}={rev}"))?;
    Ok(t0.elapsed())
}

// ---------------------------------------------------------------------------------------------
// A lost member: detection, restoration, fence.

/// The status of a member's `Reachable` condition on the host, if it has one.
async fn reachable(host: &Client, member: &str) -> Option<String> {
    let mc = Api::<MemberCluster>::all(host.clone()).get(member).await.ok()?;
    mc.status?.conditions.into_iter().find(|c| c.type_ == "Reachable").map(|c| c.status)
}

/// Polls (every 100 ms) until the member's `Reachable` is `want`; answers the time taken.
async fn wait_reachable(host: &Client, member: &str, want: &str) -> Result<Duration, String> {
    let t0 = Instant::now();
    while reachable(host, member).await.as_deref() != Some(want) {
        if t0.elapsed() > PHASE_DEADLINE {
            return Err(format!("{member}'s Reachable condition {want} within {PHASE_DEADLINE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(t0.elapsed())
}

/// Hangs `member` (requests accepted, never answered: what `spanset drill` does to a lost
/// cluster), times until its `Reachable` is False, heals it and times until True again.
pub async fn detection(sim: &SimProcess, host: &Client, member: &str) -> Result<(Duration, Duration), String> {
    wait_reachable(host, member, "True").await?;
    sim.admin(member, "partition", "mode=hang").await?;
    let lost = wait_reachable(host, member, "False").await?;
    sim.admin(member, "heal", "").await?;
    let back = wait_reachable(host, member, "True").await?;
    Ok((lost, back))
}

/// When the other members' StatefulSets of `fed` came to hold all of `ordinals` (those
/// `index` held), if they do.
fn covered_since(seen: &Seen, fed: &str, index: usize, ordinals: &std::ops::Range<i32>) -> Option<Instant> {
    ordinals.clone().try_fold(None::<Instant>, |last, o| {
        let (_, v) = seen.iter().find(|((f, m), v)| f == fed && *m != index && v.ordinals().contains(&o))?;
        Some(Some(last.map_or(v.slice_since, |l| l.max(v.slice_since))))
    })?
}

/// What the fence figure found.
pub struct Fenced {
    /// From the fence until every re-homing slice was seen written.
    pub writes: Duration,
    /// Federations that had ordinals in the fenced member.
    pub federations: usize,
    /// Detection of this (refused) loss, the fence's precondition.
    pub detected: Duration,
}

/// Loses `members[index]` for real (its node powered off, then its API refused), waits until
/// it is unreachable, fences it as `spanset fence` does, and times until every federation
/// with ordinals there has them covered by the other members' StatefulSets.
pub async fn fence(
    sim: &SimProcess,
    host: &Client,
    watches: &MemberWatches,
    members: &[String],
    index: usize,
) -> Result<Fenced, String> {
    let member = &members[index];
    let held: Vec<(String, std::ops::Range<i32>)> = watches
        .snapshot()
        .into_iter()
        .filter(|((_, m), v)| *m == index && v.slice.1 > 0)
        .map(|((f, _), v)| (f, v.ordinals()))
        .collect();
    if held.is_empty() {
        return Err(format!("{member} holding ordinals of some federation"));
    }
    for node in sim.nodes(member).await {
        sim.admin(member, "node-down", &format!("node={node}&power-off=true")).await?;
    }
    sim.admin(member, "partition", "mode=refuse").await?;
    let detected = wait_reachable(host, member, "False").await?;
    let mut events = Recorder::for_component(host.clone(), "spanset.dev/cli", "bench".into());
    let t0 = Instant::now();
    fencing::fence(host, member, "scale benchmark", "bench", false, &mut events).await?;
    let mut printed = Instant::now();
    let covered = watches
        .wait_for(FENCE_DEADLINE, |seen| {
            let times: Vec<Option<Instant>> =
                held.iter().map(|(fed, ordinals)| covered_since(seen, fed, index, ordinals)).collect();
            if printed.elapsed() > Duration::from_secs(10) {
                let done = times.iter().flatten().count();
                eprintln!("    {done}/{} federations re-homed after {:.0} s", held.len(), t0.elapsed().as_secs_f64());
                printed = Instant::now();
            }
            times.into_iter().try_fold(t0, |last, t| Some(last.max(t?)))
        })
        .await
        .ok_or_else(|| format!("the ordinals {member} held in {} federations written elsewhere", held.len()))?;
    Ok(Fenced { writes: covered.saturating_duration_since(t0), federations: held.len(), detected })
}
