//! Failover figures (`cargo bench --bench failover`, about a minute): the cluster-loss drill
//! on an in-process sandbox (3 members, 30 replicas, `Parallel`, time factor 0.01, the default
//! `unreachableAfterSeconds` (10 s) and the Manual policy), printing detection time, the
//! drill's stages, and the controller's own share of the re-home: from the fence being stored
//! to the last destination StatefulSet write that takes the lost member's ordinals, per
//! re-homed ordinal. Pod starts and readiness, which are the members', are not in that share.
//!
//! Targets: detection within one probe period (2 s) of the threshold; the controller's share
//! ≤ 100 ms per ordinal.

mod support;

use std::{
    sync::{Arc, Mutex},
    time::Instant,
};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::{
    Api, Client,
    api::PostParams,
    runtime::{WatchStreamExt, watcher},
};
use spanset::cli::{
    drill::{DrillOn, Format, LossArgs, cluster_loss},
    sandbox::example,
};
use spanset_api::{FederatedStatefulSet, MemberCluster};
use spanset_controller::decisions::reconcile::DEFAULT_UNREACHABLE_AFTER as THRESHOLD;

use support::{Sandbox, client};

const TIME_FACTOR: f64 = 0.01;
const REPLICAS: i32 = 30;

/// A member StatefulSet's slices `(when seen, start, replicas)`, in the order seen.
type Slices = Arc<Mutex<Vec<(Instant, i32, i32)>>>;

/// Records each change of a destination StatefulSet's slice `(start, replicas)`.
fn follow(client: Client, name: &'static str, writes: Slices) {
    tokio::spawn(async move {
        let api: Api<StatefulSet> = Api::namespaced(client, "default");
        let mut stream = watcher(api, watcher::Config::default()).applied_objects().boxed();
        let mut last = None;
        while let Some(Ok(sts)) = stream.next().await {
            let spec = sts.spec.as_ref();
            let replicas = spec.and_then(|s| s.replicas).unwrap_or(0);
            let start = spec.and_then(|s| s.ordinals.as_ref()).and_then(|o| o.start).unwrap_or(0);
            if sts.metadata.name.as_deref() == Some("redis") && last != Some((start, replicas)) {
                last = Some((start, replicas));
                writes.lock().unwrap().push((Instant::now(), start, replicas));
            }
        }
        eprintln!("{name}: watch ended");
    });
}

fn main() {
    actix::System::with_tokio_rt(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime"))
        .block_on(figures());
}

async fn figures() {
    let members: Vec<String> = ["east", "west", "central"].iter().map(|s| s.to_string()).collect();
    let sb = Sandbox::start(&members, TIME_FACTOR, true).await;
    let (host, kubeconfig) = (sb.host.clone(), sb.kubeconfig.clone());
    let running = sb.controller().await;
    let mut f: FederatedStatefulSet = example(&members);
    f.spec.replicas = REPLICAS;
    f.spec.migration.max_concurrent_moves = Some(REPLICAS);
    // Parallel: under OrderedReady each re-homed ordinal waits until the one below it is Ready
    // (one StatefulSet's order across the members), so the last write would time the members'
    // pod starts, not the controller's share.
    f.spec.template.pod_management_policy = Some("Parallel".into());
    let api: Api<FederatedStatefulSet> = Api::namespaced(host.clone(), "default");
    api.create(&PostParams::default(), &f).await.expect("federation created");

    // The fence's moment, and every destination write after it.
    let fenced_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    {
        let fenced_at = fenced_at.clone();
        let mcs: Api<MemberCluster> = Api::all(host.clone());
        tokio::spawn(async move {
            let mut stream = watcher(mcs, watcher::Config::default()).applied_objects().boxed();
            while let Some(Ok(mc)) = stream.next().await {
                if mc.metadata.name.as_deref() == Some("central") && mc.spec.fenced {
                    fenced_at.lock().unwrap().get_or_insert(Instant::now());
                }
            }
        });
    }
    let east = Arc::new(Mutex::new(Vec::new()));
    let west = Arc::new(Mutex::new(Vec::new()));
    follow(client(&kubeconfig, "east").await, "east", east.clone());
    follow(client(&kubeconfig, "west").await, "west", west.clone());

    let args = LossArgs {
        cluster: "central".into(),
        admin: format!("http://{}", sb.fleet.admin_addr),
        report: None,
        on: DrillOn {
            fsts: "default/redis".into(),
            output: Format::Json,
            timeout: 300,
            kubeconfig: Some(kubeconfig.clone()),
            context: Some("host".into()),
        },
    };
    let (report, _) = cluster_loss(&host, &args).await.expect("the drill completes");
    let fence = fenced_at.lock().unwrap().expect("the fence was seen");
    // The lost member held the top third: its share of the re-home ends at the first
    // destination write whose slice takes the last of those ordinals.
    let lost: Vec<i32> = ((REPLICAS / 3) * 2..REPLICAS).collect();
    let takes_lost = |w: &Slices| -> Option<Instant> {
        w.lock()
            .unwrap()
            .iter()
            .find(|(t, s, r)| *t > fence && lost.iter().any(|k| *k >= *s && *k < s + r))
            .map(|w| w.0)
    };
    let landed = [takes_lost(&east), takes_lost(&west)].into_iter().flatten().max().expect("a destination took them");
    let rehomed = lost.len() as u32;
    let share = landed.duration_since(fence);
    println!(
        "failover figures (3 members, {REPLICAS} replicas, time factor {TIME_FACTOR}, Parallel, Manual, defaults)"
    );
    println!(
        "  detection (partition → ClusterUnreachable)      {:>8.2} s   target ≤ {} s (threshold + one probe)",
        report.detection_seconds,
        THRESHOLD.as_secs() + 2
    );
    println!(
        "  fenced (partition → fence; MemberCluster at {} s) {:>6.2} s",
        THRESHOLD.as_secs(),
        report.fenced_seconds
    );
    println!("  re-homed (fence → all Ready elsewhere)           {:>8.2} s", report.rehome_seconds);
    println!(
        "  controller's share of the re-home                {:>8.1} ms for {rehomed} ordinals",
        share.as_secs_f64() * 1e3
    );
    println!(
        "  … per re-homed ordinal                           {:>8.2} ms   target ≤ 100 ms",
        share.as_secs_f64() * 1e3 / f64::from(rehomed)
    );
    println!("  shrink on return (heal → StatefulSet at 0)        {:>7.2} s", report.shrink_on_return_seconds);
    println!("  back (unfence → settled)                         {:>8.2} s", report.back_seconds);
    println!("  ledger violations                                {:>8}", report.ledger_violations.len());
    running.stop().await;
}
