//! Self-fencing pods when a part of the guard fails, end to end on real processes under the
//! real controller: the watch stopped (SIGSTOP) or crash-looping, a workload running as another
//! user than the guard, a guard that cannot read its Lease, an uninstall. Judged at every look
//! over the whole timeline (no ordinal's main process runs in two members at once) and by the
//! sandbox's ledger at the end.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::json;
use spanset_api::FederatedStatefulSet;

use crate::{
    pod_lease::{LEASE_SECONDS, MEMBERS, leased, placed, placed_as, programs, running},
    support::{DEADLINE, Kubectl, federation::Federation},
};

/// The processes of the pods' watches (`spanset guard watch`) of federation `name` in the pods
/// named `pods`, by their command line and the POD_NAME in their environment, and, given
/// `api_host`, only those of the member whose API pods reach there (`KUBERNETES_SERVICE_HOST`,
/// its gateway in the pod network: pods of other members may bear the same names).
fn watch_pids_in(name: &str, pods: &[String], api_host: Option<&str>) -> Vec<i32> {
    let lease = format!("--lease=default/{name}-pods");
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let watch = args.windows(2).any(|w| w[0] == b"guard" && w[1] == b"watch");
            if !watch || !args.contains(&lease.as_bytes()) {
                return None;
            }
            let environ = std::fs::read(e.path().join("environ")).ok()?;
            let var = |key: &[u8]| environ.split(|b| *b == 0).find_map(|v| v.strip_prefix(key)).map(<[u8]>::to_vec);
            let pod = var(b"POD_NAME=")?;
            if let Some(host) = api_host
                && var(b"KUBERNETES_SERVICE_HOST=").as_deref() != Some(host.as_bytes())
            {
                return None;
            }
            pods.iter().any(|p| p.as_bytes() == pod.as_slice()).then_some(pid)
        })
        .collect()
}

/// [`watch_pids_in`] whatever the member.
fn watch_pids(name: &str, pods: &[String]) -> Vec<i32> {
    watch_pids_in(name, pods, None)
}

/// The address central's pods reach their API at (`KUBERNETES_SERVICE_HOST`: their cluster's
/// gateway), read from the watches of central's pods while they are the only pods of their names.
fn central_api_host(name: &str) -> String {
    let pids = watch_pids(name, &central_pods(name));
    let environ = std::fs::read(format!("/proc/{}/environ", pids.first().expect("a watch of central's"))).unwrap();
    let host = environ.split(|b| *b == 0).find_map(|v| v.strip_prefix(b"KUBERNETES_SERVICE_HOST=")).expect("the host");
    String::from_utf8_lossy(host).into_owned()
}

fn central_pods(name: &str) -> Vec<String> {
    vec![format!("{name}-4"), format!("{name}-5")]
}

/// Signals processes; answers how many it reached.
fn signal(pids: &[i32], signal: rustix::process::Signal) -> usize {
    pids.iter()
        .filter_map(|p| rustix::process::Pid::from_raw(*p))
        .filter(|p| rustix::process::kill_process(*p, signal).is_ok())
        .count()
}

/// The federation's condition of `type_`, if set.
async fn condition(f: &Federation, name: &str, type_: &str) -> Option<(String, String, String)> {
    f.status(name).await.conditions.into_iter().find(|c| c.type_ == type_).map(|c| (c.status, c.reason, c.message))
}

/// Waits until ordinals 4 and 5 run elsewhere, Ready, with no move left, asserting at every look
/// that no ordinal runs twice and, once `central_gone` is set, that central runs none.
async fn rehomed(f: &Federation, owners: &mut crate::pod_lease::Owners, name: &str, at: &str) {
    let deadline = Instant::now() + 3 * DEADLINE;
    loop {
        let now = owners.homes(f, &["east", "west"], at).await;
        let s = f.status(name).await;
        if [4, 5].iter().all(|k| now.get(k).is_some_and(|m| m != "central"))
            && s.moves.is_empty()
            && s.ready.as_deref() == Some("6/6")
        {
            return;
        }
        assert!(Instant::now() < deadline, "{at}: ordinals 4 and 5 Ready elsewhere: {now:?}, {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until central runs no main process of the federation, asserting at every look that no
/// ordinal runs twice; answers how long it took.
async fn central_stops(f: &Federation, owners: &mut crate::pod_lease::Owners, at: &str) -> Duration {
    let start = Instant::now();
    loop {
        let now = owners.homes(f, &["east", "west"], at).await;
        if now.values().all(|m| m != "central") {
            return start.elapsed();
        }
        assert!(start.elapsed() < 2 * DEADLINE, "{at}: central's main processes stop: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_member_whose_watches_are_stopped_still_stops_its_pods_before_they_are_re_homed() {
    const NAME: &str = "sigstop";
    if !programs() {
        return;
    }
    let (f, _c, mut owners) = placed(NAME).await;
    // Central's watches are stopped (SIGSTOP: a debugger, a frozen cgroup, a stuck runtime), and
    // central is cut off from spanset at once: spanset last saw every guard reading its Lease.
    let watches = watch_pids(NAME, &central_pods(NAME));
    assert_eq!(watches.len(), 2, "central's two watches: {watches:?}");
    assert_eq!(signal(&watches, rustix::process::Signal::STOP), 2);
    f.sandbox.ctl_ok(&["partition", "central", "--outside-only"]);
    let stopped = central_stops(&f, &mut owners, "watches stopped, central cut off").await;
    rehomed(&f, &mut owners, NAME, "after the lapse").await;
    println!("central's main processes stopped {stopped:?} after its watches were (nothing else stopped them)");
    for pid in &watches {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).unwrap_or_default().to_string();
        assert_eq!(state, "T", "central's watch {pid} stayed stopped throughout: {stat}");
    }
    signal(&watches, rustix::process::Signal::CONT);
    f.sandbox.ctl_ok(&["heal", "central"]);
    owners.central_emptied(&f, "after the return").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_watch_is_not_counted_as_a_guard_and_its_pods_stop_all_the_same() {
    const NAME: &str = "crashloop";
    if !programs() {
        return;
    }
    // The kubelet's restart back-off in real seconds (10 s doubling), as a real kubelet's.
    let (f, _c, mut owners) = placed_as(leased(NAME, LEASE_SECONDS), &["--real-back-off"], 5).await;
    // Central's watches crash as soon as they start (an OOM kill, a bad node), again and again.
    let crashing = Arc::new(AtomicBool::new(true));
    let central_api = central_api_host(NAME);
    let killer = {
        let crashing = crashing.clone();
        std::thread::spawn(move || {
            while crashing.load(Ordering::Relaxed) {
                signal(&watch_pids_in(NAME, &central_pods(NAME), Some(&central_api)), rustix::process::Signal::KILL);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // Their pods stop by the deadline the watches last posted, and spanset says that it does not
    // count central's pods as guarded.
    let stopped = central_stops(&f, &mut owners, "central's watches crash-looping").await;
    println!("central's main processes stopped {stopped:?} after its watches began to crash");
    let deadline = Instant::now() + DEADLINE;
    let said = loop {
        if let Some((status, reason, message)) = condition(&f, NAME, "PodsUnguarded").await
            && status == "True"
            && message.contains(&format!("{NAME}-4"))
        {
            break (reason, message);
        }
        owners.homes(&f, MEMBERS, "crash-looping").await;
        assert!(Instant::now() < deadline, "PodsUnguarded names central's pods");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(said.1.contains("central") && said.1.contains("spanset-guard-watch"), "{said:?}");
    let events = f.events(NAME).await;
    assert!(
        events.iter().any(|(t, r, m)| t == "Warning" && r == "GuardsNotSeen" && m.contains(&format!("{NAME}-4"))),
        "a Warning Event says it too: {events:?}"
    );
    // Central is cut off: spanset does not fence it by the lapse of its lease (its guards were
    // not seen working); ordinals 4 and 5 stay central's, stopped, for three times a lapse.
    f.sandbox.ctl_ok(&["partition", "central"]);
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(60) {
        let now = owners.homes(&f, &["east", "west"], "central cut off, unguarded").await;
        assert!([4, 5].iter().all(|k| !now.contains_key(k)), "ordinals 4 and 5 run nowhere: {now:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let s = f.status(NAME).await;
    assert!(s.homes.iter().any(|h| h.cluster == "central" && h.ordinals == "4-5"), "still central's: {s:?}");
    // An operator's fence re-homes them.
    let out = f.spanset(&["fence", "central", "--reason", "its guards crash"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    rehomed(&f, &mut owners, NAME, "fenced").await;
    crashing.store(false, Ordering::Relaxed);
    killer.join().unwrap();
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_of_another_user_than_its_guard_is_stopped_all_the_same() {
    const NAME: &str = "otheruser";
    if !programs() || !rustix::process::geteuid().is_root() {
        // Users other than the sandbox's own need the sandbox to run as root.
        assert!(std::env::var_os("CI").is_none(), "this test needs root (CI runs as root)");
        return;
    }
    // The database runs as its own user (999, as postgres and redis images do); the guard's
    // containers as the image's (65532).
    let mut fsts = leased(NAME, LEASE_SECONDS);
    let pod = fsts.spec.template.template.spec.as_mut().unwrap();
    pod.containers[0].security_context =
        Some(serde_json::from_value(json!({"runAsUser": 999, "runAsGroup": 999})).unwrap());
    let (f, _c, mut owners) = placed_as(fsts, &[], 20).await;
    let marker = format!("pod-lease-main-{NAME}:");
    let uids: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| !crate::pod_lease::is_guard_exec(&e.path()))
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a.starts_with(marker.as_bytes())))
        })
        .filter_map(|e| {
            let status = std::fs::read_to_string(e.path().join("status")).ok()?;
            status.lines().find_map(|l| l.strip_prefix("Uid:")?.split_whitespace().next()?.parse().ok())
        })
        .collect();
    // User 999 of the pod's user namespace: 999 from the sandbox's first mapped ID.
    let outside = spanset_sim::cluster::processes::launch::ID_BASE + 999;
    assert!(!uids.is_empty() && uids.iter().all(|u| *u == outside), "the main processes run as 999: {uids:?}");
    f.sandbox.ctl_ok(&["partition", "central", "--outside-only"]);
    let stopped = central_stops(&f, &mut owners, "central cut off").await;
    rehomed(&f, &mut owners, NAME, "after the lapse").await;
    println!("central's main processes (uid 999) stopped {stopped:?} after the partition");
    f.sandbox.ctl_ok(&["heal", "central"]);
    owners.central_emptied(&f, "after the return").await;
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_that_cannot_read_its_lease_stops_its_pod_and_says_why() {
    const NAME: &str = "unreadable";
    if !programs() {
        return;
    }
    let (f, _c, mut owners) = placed(NAME).await;
    // Central's guards lose the right to read their Lease (someone deletes their Role).
    let central = f.member("central").await;
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(central.clone(), "default");
    let access = spanset_controller::member::guard_access::ACCESS_NAME;
    roles.delete(access, &Default::default()).await.expect("the guards' Role deleted");
    let stopped = central_stops(&f, &mut owners, "central's guards cannot read").await;
    println!("central's main processes stopped {stopped:?} after its guards lost their Lease");
    // Said in the guard's own words: in the pod's status, and in the federation's condition.
    let pods: Api<Pod> = Api::namespaced(central, "default");
    let deadline = Instant::now() + 2 * DEADLINE;
    loop {
        let pod = pods.get(&format!("{NAME}-4")).await.expect("the pod");
        let watch = pod
            .status
            .as_ref()
            .and_then(|s| s.init_container_statuses.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.name == "spanset-guard-watch").cloned());
        let message = watch
            .as_ref()
            .and_then(|w| w.last_state.as_ref()?.terminated.as_ref()?.message.clone())
            .unwrap_or_default();
        let cond = condition(&f, NAME, "PodsUnguarded").await.map(|c| c.2).unwrap_or_default();
        if message.contains("unreadable") && message.contains("forbidden") && cond.contains("forbidden") {
            break;
        }
        owners.homes(&f, MEMBERS, "guards failing").await;
        assert!(Instant::now() < deadline, "the guard says why in the pod and the federation: {message:?} / {cond:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // And in the pod's Events, in its probe's words (the kubelet's `Unhealthy`).
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(f.member("central").await, "default");
    let listed = events.list(&Default::default()).await.expect("central's Events");
    let unhealthy: Vec<String> = listed
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(&format!("{NAME}-4")) && e.reason.as_deref() == Some("Unhealthy")
        })
        .filter_map(|e| e.message)
        .collect();
    assert!(
        unhealthy.iter().any(|m| m.starts_with("Readiness probe failed: lease default/") && m.contains("forbidden")),
        "{unhealthy:?}"
    );
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_crds_of_a_leased_federation_releases_its_pods_which_run_on() {
    const NAME: &str = "uninstalled";
    if !programs() {
        return;
    }
    let (f, c, _owners) = placed(NAME).await;
    let Some(k) = Kubectl::new(33, &f.sandbox) else { return };
    let before: std::collections::BTreeSet<(u32, String)> = running(NAME);
    assert_eq!(before.len(), 6);
    let mark = f.sandbox.account();
    k.ok(&["delete", "-f", concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/crds/"), "--wait=false"]);
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(f.host.clone());
    let deadline = Instant::now() + DEADLINE;
    while crds.get_opt("federatedstatefulsets.spanset.dev").await.is_ok_and(|c| c.is_some()) {
        assert_eq!(running(NAME), before, "every pod runs on while spanset lets go");
        assert!(Instant::now() < deadline, "the CRD goes");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A minute later, and six leases after the last extension, every pod still runs: the same
    // six processes.
    let gone = Instant::now();
    while gone.elapsed() < Duration::from_secs(60) {
        assert_eq!(running(NAME), before, "every pod runs on after the uninstall");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(c);
    assert_eq!(running(NAME), before, "and after the controller is gone");
    for m in MEMBERS {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(f.member(m).await, "default");
        let l = leases.get(&format!("{NAME}-pods")).await.expect("the released Lease stays");
        let a = l.metadata.annotations.unwrap_or_default();
        assert_eq!(a.get("spanset.dev/released").map(String::as_str), Some("true"), "{m}: released");
    }
    // What letting go cost in the members: its Leases updated (the extensions until the
    // release, and the release), nothing else written, nothing created or deleted.
    let members: Vec<String> = MEMBERS.iter().map(|m| m.to_string()).collect();
    let mut released = Vec::new();
    for (m, resource, counts) in f.sandbox.spanset_changes_since(&mark, &members) {
        assert!(
            resource.contains("leases") && counts.created == 0 && counts.deleted == 0 && counts.updated >= 1,
            "{m}: spanset wrote only its Lease there while letting go, and released it: {resource} {counts:?}"
        );
        released.push(m);
    }
    assert_eq!(released, members, "the account saw each member's Lease written");
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_lease_the_pods_could_not_hold_is_refused_naming_the_field() {
    let f = Federation::start(&["east"]).await;
    let _c = crate::support::federation::Controller::start(&f.sandbox, "controller");
    let mut fsts: FederatedStatefulSet = leased("tokenless", LEASE_SECONDS);
    fsts.spec.placement.clusters.truncate(1);
    let pod = fsts.spec.template.template.spec.as_mut().unwrap();
    pod.automount_service_account_token = Some(false);
    pod.containers[0].command = None;
    f.create(&fsts).await;
    let deadline = Instant::now() + DEADLINE;
    let (reason, message) = loop {
        if let Some((status, reason, message)) = condition(&f, "tokenless", "Blocked").await
            && status == "True"
        {
            break (reason, message);
        }
        assert!(Instant::now() < deadline, "the federation is refused");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(reason, "InvalidSpec");
    for field in [
        "spec.template.template.spec.automountServiceAccountToken",
        "spec.template.template.spec.containers[0].command",
    ] {
        assert!(message.contains(field), "{message}");
    }
    assert_eq!(f.member_slice_now("east", "tokenless").await, None, "nothing written in the member");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_post_start_hook_does_not_keep_a_cut_off_member_s_pods_running_past_their_lease() {
    const NAME: &str = "poststart";
    if !programs() {
        return;
    }
    // Every pod's main container has a postStart hook that takes 40 s (a migration, a warm-up):
    // the kubelet starts none of the pod's later containers until it returns.
    let mut fsts = leased(NAME, LEASE_SECONDS);
    let main = &mut fsts.spec.template.template.spec.as_mut().unwrap().containers[0];
    main.lifecycle =
        Some(serde_json::from_value(json!({"postStart": {"exec": {"command": ["sh", "-c", "sleep 40"]}}})).unwrap());
    let f = Federation::start_secure_with(MEMBERS, &["--run-images", "busybox,spanset"]).await;
    let _c = crate::support::federation::Controller::start_full(
        &f.sandbox,
        "controller",
        &[],
        &["--member-write-deadline", "20"],
    );
    f.create(&fsts).await;
    let mut owners = crate::pod_lease::Owners::all_six_running(&f, NAME).await;
    // Central is cut off from spanset while its pods' hooks still run.
    f.sandbox.ctl_ok(&["partition", "central", "--outside-only"]);
    let stopped = central_stops(&f, &mut owners, "central cut off during the hooks").await;
    println!("central's main processes stopped {stopped:?} after the partition (the hooks take 40 s)");
    assert!(
        stopped < Duration::from_secs(2 * LEASE_SECONDS as u64),
        "central's main processes ran {stopped:?} after the partition, past their lease of {LEASE_SECONDS} s"
    );
    // Whatever spanset does meanwhile, nothing runs twice; central returns and is emptied or
    // runs its ordinals again alone.
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(30) {
        owners.homes(&f, &["east", "west"], "after central stopped").await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    f.sandbox.ctl_ok(&["heal", "central"]);
    let deadline = Instant::now() + 3 * DEADLINE;
    loop {
        let now = owners.homes(&f, MEMBERS, "after the return").await;
        if now.len() == 6 && f.status(NAME).await.ready.as_deref() == Some("6/6") {
            break;
        }
        assert!(Instant::now() < deadline, "all six run once central returned: {now:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    f.assert_ledger_clean();
}
