//! Leader election with fencing terms against the sandbox, with real kube clients: one leader
//! in term 1, take-over in term 2 only after the lease duration (and only once the old leader
//! has stopped by its own clock), release on shutdown, no displacement of a renewing leader,
//! step-down, lapses while cut off, and 409s from conflicting writes.
//!
//! Durations are short (a lease of a few seconds) but every wait is on a condition with a
//! generous deadline; nothing asserts how long anything took.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::json;
use spanset_controller::leadership::leader::{Leadership, LeaseSettings, run_elector};
use spanset_sim::{
    cluster::{ClusterConfig, faults::Partition},
    sandbox::fleet::Fleet,
};
use support::{DEADLINE, eventually};
use tokio::{sync::oneshot, task::JoinHandle};

use crate::support;

const LEASE: &str = "spanset-leader";

async fn host() -> (Fleet, Client) {
    let config = ClusterConfig { nodes: 0, time_factor: 0.01, ..ClusterConfig::named("host") };
    let fleet = Fleet::start(vec![config], None).await.expect("sandbox starts");
    let client = Client::try_from(kube::Config::new(fleet.servers[0].url().parse().unwrap())).expect("client");
    (fleet, client)
}

/// Lease `lease`, renew deadline `deadline`, retry 100 ms.
fn settings(identity: &str, lease: Duration, deadline: Duration) -> LeaseSettings {
    LeaseSettings {
        lease_duration: lease,
        renew_deadline: deadline,
        retry_period: Duration::from_millis(100),
        ..LeaseSettings::new("default", LEASE, identity)
    }
}

/// Short enough to keep tests quick, long enough that a loaded machine does not make the
/// leader miss its renew deadline.
fn short(identity: &str) -> LeaseSettings {
    settings(identity, Duration::from_secs(2), Duration::from_millis(1200))
}

/// A running elector: its leadership, the task, and the shutdown trigger.
struct Running {
    leadership: Leadership,
    task: JoinHandle<()>,
    shutdown: Option<oneshot::Sender<()>>,
}

fn start(client: &Client, s: LeaseSettings) -> Running {
    let leadership = Leadership::new();
    let (tx, rx) = oneshot::channel::<()>();
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    let task = tokio::spawn(run_elector(api, s, leadership.clone(), async move {
        let _ = rx.await;
    }));
    Running { leadership, task, shutdown: Some(tx) }
}

impl Running {
    /// Triggers a graceful shutdown and waits for the elector to return.
    async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        tokio::time::timeout(DEADLINE, &mut self.task).await.expect("the elector returns after shutdown").unwrap();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn lease(client: &Client) -> Lease {
    Api::<Lease>::namespaced(client.clone(), "default").get(LEASE).await.expect("the lease exists")
}

fn holder(l: &Lease) -> Option<String> {
    l.spec.as_ref().and_then(|s| s.holder_identity.clone())
}

fn transitions(l: &Lease) -> Option<i32> {
    l.spec.as_ref().and_then(|s| s.lease_transitions)
}

/// One span an elector was seen leading: its name, term, first and last instant seen.
type Span = (&'static str, u64, Instant, Instant);

/// Each elector's leadership over time, from `term()` asked of every elector at once about
/// every millisecond (as a writer asks it before each write). Two spans of different electors
/// that share an instant mean both led then; a span may start a little late or end a little
/// early, so a recording can miss the briefest overlap but never invents one.
struct Leaderships {
    spans: Arc<std::sync::Mutex<Vec<Span>>>,
    task: JoinHandle<()>,
}

impl Leaderships {
    fn record(electors: &[(&'static str, &Leadership)]) -> Self {
        let electors: Vec<(&'static str, Leadership)> = electors.iter().map(|(n, l)| (*n, (*l).clone())).collect();
        let spans = Arc::new(std::sync::Mutex::new(Vec::<Span>::new()));
        let sink = spans.clone();
        let task = tokio::spawn(async move {
            let mut open: Vec<Option<usize>> = vec![None; electors.len()];
            loop {
                for (i, (name, l)) in electors.iter().enumerate() {
                    let (term, now) = (l.term(), Instant::now());
                    let mut spans = sink.lock().expect("spans lock");
                    match (term, open[i]) {
                        (Some(t), Some(j)) if spans[j].1 == t => spans[j].3 = now,
                        (Some(t), _) => {
                            spans.push((*name, t, now, now));
                            open[i] = Some(spans.len() - 1);
                        }
                        (None, _) => open[i] = None,
                    }
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        Self { spans, task }
    }

    /// Stops recording; asserts that no two electors were ever seen leading at one instant,
    /// and answers the spans in the order they began.
    fn never_two_leaders(self) -> Vec<Span> {
        self.task.abort();
        let spans = self.spans.lock().expect("spans lock").clone();
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                assert!(
                    a.0 == b.0 || a.3 < b.2 || b.3 < a.2,
                    "never two leaders: {} (term {}) and {} (term {}) both led at once: {spans:?}",
                    a.0,
                    a.1,
                    b.0,
                    b.1
                );
            }
        }
        spans
    }
}

/// Waits until `l` leads and returns its term.
async fn leads(what: &str, l: &Leadership) -> u64 {
    eventually(what, || async { l.term().is_some() }).await;
    l.term().expect("still leading")
}

/// Waits for the leadership channel to carry `Some(term)` and returns it.
async fn next_term(rx: &mut tokio::sync::watch::Receiver<Option<u64>>) -> u64 {
    let got = tokio::time::timeout(DEADLINE, rx.wait_for(Option::is_some)).await.expect("a term in time");
    got.expect("the leadership is alive").expect("waited for Some")
}

/// Waits until the lease has been written `n` more times (its resourceVersion changed `n`
/// times, seen by polling).
async fn renewals(client: &Client, n: usize) {
    let started = Instant::now();
    let mut last = lease(client).await.metadata.resource_version;
    let mut seen = 0;
    while seen < n {
        assert!(started.elapsed() < DEADLINE, "timed out after {DEADLINE:?} waiting for {n} lease writes");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let rv = lease(client).await.metadata.resource_version;
        if rv != last {
            seen += 1;
            last = rv;
        }
    }
}

#[tokio::test]
async fn one_of_two_electors_leads_in_term_one_and_the_other_takes_over_in_term_two_after_it_dies() {
    let (_fleet, client) = host().await;
    let a = start(&client, short("a"));
    let b = start(&client, short("b"));
    let seen = Leaderships::record(&[("a", &a.leadership), ("b", &b.leadership)]);
    eventually("someone leads", || async { a.leadership.term().is_some() || b.leadership.term().is_some() }).await;
    // The other campaigns while the leader renews: both get rounds to take the Lease wrongly in.
    renewals(&client, 10).await;
    let (leader, follower, leader_id, follower_id) =
        if a.leadership.term().is_some() { (a, b, "a", "b") } else { (b, a, "b", "a") };
    assert_eq!(leader.leadership.term(), Some(1));
    assert_eq!(follower.leadership.term(), None, "never two leaders");
    let l = lease(&client).await;
    assert_eq!((holder(&l).as_deref(), transitions(&l)), (Some(leader_id), Some(1)));

    // The leader's process dies (its elector stops without releasing).
    let old = leader.leadership.clone();
    let mut old_rx = old.subscribe();
    let mut rx = follower.leadership.subscribe();
    leader.task.abort();
    let term = next_term(&mut rx).await;
    assert_eq!(term, 2);
    let l = lease(&client).await;
    assert_eq!((holder(&l).as_deref(), transitions(&l)), (Some(follower_id), Some(2)));
    // Its subscribers were told too, though its elector task is gone.
    tokio::time::timeout(DEADLINE, old_rx.wait_for(Option::is_none)).await.expect("told in time").unwrap();
    // The successor renews on; the recording then shows that the old leader had stopped by its
    // own clock before the successor led.
    renewals(&client, 5).await;
    let spans = seen.never_two_leaders();
    let order: Vec<(&str, u64)> = spans.iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(order, [(leader_id, 1), (follower_id, 2)], "one leader, then the other: {spans:?}");
    drop(leader);
}

#[tokio::test]
async fn a_graceful_shutdown_releases_the_lease_and_a_waiting_successor_takes_over_without_the_lease_duration() {
    let (_fleet, client) = host().await;
    // A lease far longer than the test's deadline: only a release lets the successor in.
    let long = |id: &str| settings(id, Duration::from_secs(600), Duration::from_secs(300));
    let mut a = start(&client, long("a"));
    assert_eq!(leads("a leads", &a.leadership).await, 1);
    let b = start(&client, long("b"));
    renewals(&client, 3).await;
    assert_eq!(b.leadership.term(), None);

    let mut a_rx = a.leadership.subscribe();
    a.stop().await;
    assert_eq!(a.leadership.term(), None);
    assert_eq!(*a_rx.borrow_and_update(), None, "subscribers are told of the release");
    let l = lease(&client).await;
    assert!(
        holder(&l).is_none() || holder(&l).as_deref() == Some("b"),
        "released (or already taken by b): {:?}",
        l.spec
    );
    assert_eq!(leads("b takes over", &b.leadership).await, 2);
}

#[tokio::test]
async fn a_released_lease_keeps_its_transitions_and_has_no_holder() {
    let (_fleet, client) = host().await;
    let mut a = start(&client, short("a"));
    assert_eq!(leads("a leads", &a.leadership).await, 1);
    a.stop().await;
    let l = lease(&client).await;
    assert_eq!((holder(&l), transitions(&l)), (None, Some(1)));
    // The next one comes in at once, in term 2.
    let c = start(&client, settings("c", Duration::from_secs(600), Duration::from_secs(300)));
    assert_eq!(leads("c leads", &c.leadership).await, 2);
}

#[tokio::test]
async fn a_leader_that_keeps_renewing_is_never_displaced() {
    let (_fleet, client) = host().await;
    let a = start(&client, short("a"));
    assert_eq!(leads("a leads", &a.leadership).await, 1);
    let b = start(&client, short("b"));
    let mut b_rx = b.leadership.subscribe();
    // 40 renewals every 100 ms or more: at least twice the lease duration of 2 s.
    renewals(&client, 40).await;
    assert_eq!(a.leadership.term(), Some(1));
    assert_eq!(b.leadership.term(), None);
    assert!(!b_rx.has_changed().unwrap(), "b never led: {:?}", *b_rx.borrow_and_update());
    let l = lease(&client).await;
    assert_eq!((holder(&l).as_deref(), transitions(&l)), (Some("a"), Some(1)));
}

#[tokio::test]
async fn step_down_ends_leadership_at_once_and_the_lease_passes_on_in_a_higher_term() {
    let (_fleet, client) = host().await;
    let a = start(&client, short("a"));
    assert_eq!(leads("a leads", &a.leadership).await, 1);
    let b = start(&client, short("b"));
    let seen = Leaderships::record(&[("a", &a.leadership), ("b", &b.leadership)]);
    let mut rx = a.leadership.subscribe();
    a.leadership.step_down("member object default/web carries term 2");
    assert_eq!(a.leadership.term(), None, "immediately, before any task runs");
    assert_eq!(*rx.borrow_and_update(), None);
    // a waits the lease duration like any candidate; whoever wins does so in term 2.
    eventually("someone leads again", || async { a.leadership.term().is_some() || b.leadership.term().is_some() })
        .await;
    assert_eq!(a.leadership.term().or(b.leadership.term()), Some(2));
    // Both campaign on while the winner renews, then the whole recording is judged.
    renewals(&client, 10).await;
    let spans = seen.never_two_leaders();
    assert_eq!(spans.last().map(|s| s.1), Some(2), "term 2 leads at the end: {spans:?}");
}

#[tokio::test]
async fn a_leader_superseded_by_a_newer_version_releases_the_lease_and_never_campaigns_again() {
    let (_fleet, client) = host().await;
    let mut a = start(&client, short("a"));
    assert_eq!(leads("a leads", &a.leadership).await, 1);
    let seen = Leaderships::record(&[("a", &a.leadership)]);
    a.leadership
        .supersede("east: StatefulSet default/web was written by spanset 9.0.0, newer than this process's 0.1.0");
    assert_eq!(a.leadership.term(), None, "immediately, before any task runs");
    eventually("the lease is released", || async { holder(&lease(&client).await).is_none() }).await;
    // A successor takes the released Lease at once; `a` stays out through its renewals.
    let b = start(&client, short("b"));
    assert_eq!(leads("b leads", &b.leadership).await, 2);
    renewals(&client, 10).await;
    assert_eq!(holder(&lease(&client).await).as_deref(), Some("b"));
    let spans = seen.never_two_leaders();
    assert!(spans.iter().all(|s| s.1 == 1), "a led in no later term: {spans:?}");
    a.stop().await;
}

#[tokio::test]
async fn a_leader_cut_off_from_the_api_stops_by_its_deadline_and_comes_back_in_a_new_term() {
    let (fleet, client) = host().await;
    let a = start(&client, short("a"));
    assert_eq!(leads("a leads", &a.leadership).await, 1);
    let mut rx = a.leadership.subscribe();
    fleet.servers[0].cluster.faults.set_partition(Partition::Refuse);
    tokio::time::timeout(DEADLINE, rx.wait_for(Option::is_none)).await.expect("told in time").unwrap();
    assert_eq!(a.leadership.term(), None);
    fleet.servers[0].cluster.faults.set_partition(Partition::None);
    // Nobody took over, so it takes its own record back at once, in a new term.
    assert_eq!(next_term(&mut rx).await, 2);
    let l = lease(&client).await;
    assert_eq!((holder(&l).as_deref(), transitions(&l)), (Some("a"), Some(2)));
}

#[tokio::test]
async fn a_renewal_that_conflicts_with_another_write_is_re_read_and_the_leader_keeps_its_term() {
    let (_fleet, client) = host().await;
    // `a` talks through a client that, when armed, lets someone else write the Lease just
    // before a's next PUT reaches the server, so that PUT carries a stale resourceVersion.
    let armed = Arc::new(AtomicBool::new(false));
    let conflicts = Arc::new(AtomicUsize::new(0));
    let service = {
        let (inner, armed, conflicts) = (client.clone(), armed.clone(), conflicts.clone());
        tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let (inner, armed, conflicts) = (inner.clone(), armed.clone(), conflicts.clone());
            async move {
                if req.method() == http::Method::PUT && armed.swap(false, Ordering::SeqCst) {
                    let other: Api<Lease> = Api::namespaced(inner.clone(), "default");
                    // A new value each time: a patch that changes nothing writes nothing.
                    let n = conflicts.load(Ordering::SeqCst);
                    let touch = json!({"metadata": {"annotations": {"touched-by": format!("someone-else-{n}")}}});
                    other.patch(LEASE, &PatchParams::default(), &Patch::Merge(&touch)).await?;
                }
                let response = inner.send(req).await?;
                if response.status() == http::StatusCode::CONFLICT {
                    conflicts.fetch_add(1, Ordering::SeqCst);
                }
                Ok::<_, kube::Error>(response)
            }
        })
    };
    let a_client = Client::new(service, "default");
    let a = start(&a_client, short("a"));
    assert_eq!(leads("a leads", &a.leadership).await, 1);
    for round in 1..=5 {
        armed.store(true, Ordering::SeqCst);
        eventually("the armed write happened", || async { !armed.load(Ordering::SeqCst) }).await;
        eventually("the renewal after the other write conflicted", || async {
            conflicts.load(Ordering::SeqCst) >= round
        })
        .await;
        // And a renewal succeeded after it.
        renewals(&client, 2).await;
    }
    assert_eq!(a.leadership.term(), Some(1));
    let l = lease(&client).await;
    assert_eq!((holder(&l).as_deref(), transitions(&l)), (Some("a"), Some(1)));
    assert_eq!(
        l.metadata.annotations.unwrap_or_default().get("touched-by").map(String::as_str),
        Some("someone-else-4")
    );
}
