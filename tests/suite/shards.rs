//! Federations sharded over several `spanset run --shards 4` replicas: each shard led by one
//! replica at a time through its own Lease, each replica holding its fair share, and shards
//! handed over when replicas are killed and added — while ordinals move, with the sandbox's
//! ledger (no ordinal ever running in two clusters) clean over the whole run, and every
//! federation's fencing token raised before anything is written under it.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::{apps::v1::StatefulSet, coordination::v1::Lease};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;
use spanset::cli::join;
use spanset_api::{FederatedStatefulSet, labels::TERM};
use spanset_controller::{actors::coordinator::ownership::OWNER_TERM, leadership::shards::shard_of};
use support::{
    eventually,
    federation::{Controller, Federation},
};

use crate::support;

pub(crate) const SHARDS: u32 = 4;
const NAMES: [&str; 6] = ["s0", "s1", "s2", "s3", "s4", "s5"];

fn federation(name: &str, east: i32, west: i32) -> FederatedStatefulSet {
    serde_json::from_value(json!({
        "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 4,
            "template": {
                "selector": {"matchLabels": {"app": name}},
                "serviceName": name,
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
            },
            "placement": {"clusters": [{"name": "east", "weight": east}, {"name": "west", "weight": west}]},
            "migration": {"storage": "Move"},
        },
    }))
    .expect("a valid federation")
}

fn start(f: &Federation, name: &str) -> Controller {
    Controller::start_full(&f.sandbox, name, &[], &["--shards", &SHARDS.to_string()])
}

/// The holder of each shard's Lease (absent: vacant), by shard.
async fn holders(f: &Federation) -> BTreeMap<u32, String> {
    let leases: Api<Lease> = Api::namespaced(f.host.clone(), f.lease_namespace());
    let list = leases.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    let mut out = BTreeMap::new();
    for shard in 0..SHARDS {
        let name = format!("spanset-leader-shard-{shard}-of-{SHARDS}");
        let holder = list
            .iter()
            .find(|l| l.name_any() == name)
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty());
        if let Some(h) = holder {
            out.insert(shard, h);
        }
    }
    out
}

/// How many shards each replica holds, when every shard is held.
pub(crate) async fn shares(f: &Federation) -> Option<BTreeMap<String, usize>> {
    let held = holders(f).await;
    if held.len() != SHARDS as usize {
        return None;
    }
    let mut out = BTreeMap::new();
    for h in held.values() {
        *out.entry(h.clone()).or_default() += 1;
    }
    Some(out)
}

/// Waits until exactly `replicas` hold two shards each.
async fn wait_fair(f: &Federation, replicas: &[&str]) {
    let want: BTreeMap<String, usize> = replicas.iter().map(|r| (r.to_string(), 2)).collect();
    eventually(&format!("{replicas:?} hold two shards each"), || async { shares(f).await.as_ref() == Some(&want) })
        .await;
}

async fn wait_all(f: &Federation, want: &[(&str, i32, i32)], what: &str) {
    for name in NAMES {
        f.wait_settled(name, want, what).await;
    }
}

async fn place(f: &Federation, east: i32, west: i32) {
    for name in NAMES {
        let patch = json!({"spec": {"placement": {"clusters": [{"name": "east", "weight": east}, {"name": "west", "weight": west}]}}});
        f.api().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("placement changed");
    }
}

async fn moving(f: &Federation) -> bool {
    for name in NAMES {
        if !f.status(name).await.moves.is_empty() {
            return true;
        }
    }
    false
}

/// Polls, until stopped, what the fencing token promises over the whole run: a federation's
/// token never goes down, and no member StatefulSet of it ever carries a term above its token
/// (the stamps are read before the token, so a raise followed by a write between the two
/// reads cannot look like a violation). Also that no move stays in one phase past the
/// harness's deadline. Records every violation seen.
fn watch_tokens(
    host: Client,
    members: Vec<(String, Client)>,
    stop: Arc<AtomicBool>,
    violations: Violations,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<FederatedStatefulSet> = Api::namespaced(host, "default");
        let mut last: BTreeMap<String, u64> = BTreeMap::new();
        // When each (federation, ordinal, phase) of a move was first seen.
        let mut phases: BTreeMap<(String, i32, String), std::time::Instant> = BTreeMap::new();
        let mut said = std::collections::BTreeSet::new();
        while !stop.load(Ordering::SeqCst) {
            for name in NAMES {
                let mut stamps = Vec::new();
                for (member, client) in &members {
                    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
                    if let Ok(Some(s)) = sts.get_opt(name).await
                        && let Some(term) = s.annotations().get(TERM).and_then(|t| t.parse::<u64>().ok())
                    {
                        stamps.push((member.clone(), term));
                    }
                }
                let Ok(Some(fsts)) = api.get_opt(name).await else { continue };
                let token = fsts.annotations().get(OWNER_TERM).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
                if let Some(before) = last.get(name)
                    && token < *before
                {
                    violations.lock().unwrap().push(format!("{name}: token went down from {before} to {token}"));
                }
                last.insert(name.to_string(), token);
                // Liveness: a move phase lasting past the harness's deadline is waiting for the
                // controller's 5-minute safety resync, i.e. a wake-up was missed.
                let moves = fsts.status.as_ref().map(|s| s.moves.clone()).unwrap_or_default();
                let now = std::time::Instant::now();
                let current: Vec<(String, i32, String)> =
                    moves.iter().map(|m| (name.to_string(), m.ordinal, m.phase.clone())).collect();
                phases.retain(|k, _| k.0 != name || current.contains(k));
                for k in current {
                    let since = *phases.entry(k.clone()).or_insert(now);
                    if now.duration_since(since) > support::DEADLINE && said.insert(k.clone()) {
                        violations.lock().unwrap().push(format!(
                            "{name}: ordinal {} stayed {} for over {:?} (a missed wake-up)",
                            k.1,
                            k.2,
                            support::DEADLINE
                        ));
                    }
                }
                for (member, term) in stamps {
                    if term > token {
                        violations.lock().unwrap().push(format!(
                            "{name}: {member}'s StatefulSet carries term {term}, above the token {token}"
                        ));
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

/// What [`watch_tokens`] saw go wrong so far.
type Violations = Arc<std::sync::Mutex<Vec<String>>>;

fn assert_tokens_kept(violations: &Violations, when: &str) {
    let seen = violations.lock().unwrap().clone();
    assert!(seen.is_empty(), "{when}: the fencing token or a move's progress was not kept:\n{}", seen.join("\n"));
}

/// Every federation's owner record names the replica that holds its shard now.
async fn owners_follow_the_leases(f: &Federation) -> bool {
    let held = holders(f).await;
    for name in NAMES {
        let Ok(fsts) = f.api().get(name).await else { return false };
        let owner = fsts.annotations().get("spanset.dev/owner").cloned().unwrap_or_default();
        let shard = shard_of("default", name, SHARDS);
        let Some(holder) = held.get(&shard) else { return false };
        if owner != format!("{holder}, shard {shard} of {SHARDS}") {
            return false;
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_killed_and_added_while_ordinals_move_hand_shards_over_with_one_writer_per_federation() {
    let f = Federation::start(&["east", "west"]).await;
    if f.sandbox.controller_kubeconfig.is_some() {
        join::apply_manifest(&f.host, join::SHARDS_RBAC, "deploy/rbac-shards.yaml").await.expect("shard permissions");
    }
    // Six federations over four shards: every shard has at least one (the names are chosen so).
    let shards: std::collections::BTreeSet<u32> = NAMES.iter().map(|n| shard_of("default", n, SHARDS)).collect();
    assert_eq!(shards.len(), SHARDS as usize, "the test's federations cover every shard");
    let members = vec![("east".to_string(), f.member("east").await), ("west".to_string(), f.member("west").await)];
    let stop = Arc::new(AtomicBool::new(false));
    let violations = Violations::default();
    let tokens = watch_tokens(f.host.clone(), members, stop.clone(), violations.clone());

    let mut a = start(&f, "a");
    let mut b = start(&f, "b");
    for name in NAMES {
        f.create(&federation(name, 1, 1)).await;
    }
    wait_all(&f, &[("east", 0, 2), ("west", 2, 2)], "placed over both members").await;
    assert_tokens_kept(&violations, "placed");
    wait_fair(&f, &["a", "b"]).await;
    eventually("every federation's owner is its shard's holder", || owners_follow_the_leases(&f)).await;

    // Everything moves east, and while ordinals are in flight one replica dies: the other
    // takes its shards (each in a new term, above every stamp), then shares them with a
    // replica that joins.
    place(&f, 1, 0).await;
    eventually("ordinals are moving", || moving(&f)).await;
    a.kill();
    let c = start(&f, "c");
    wait_all(&f, &[("east", 0, 4)], "all east").await;
    assert_tokens_kept(&violations, "moved east");
    wait_fair(&f, &["b", "c"]).await;

    // And back west, the other replica killed mid-move and a fourth added.
    place(&f, 0, 1).await;
    eventually("ordinals are moving again", || moving(&f)).await;
    b.kill();
    let d = start(&f, "d");
    wait_all(&f, &[("west", 0, 4)], "all west").await;
    wait_fair(&f, &["c", "d"]).await;
    eventually("every federation's owner is its shard's holder, after the handovers", || owners_follow_the_leases(&f))
        .await;

    assert_tokens_kept(&violations, "moved west");

    // A replica paused mid-move (SIGSTOP: a long GC pause, a frozen VM) loses its shards to
    // the other; resumed past its deadline, it writes nothing in its old terms, and gets its
    // share back in new ones.
    place(&f, 1, 0).await;
    eventually("ordinals are moving a third time", || moving(&f)).await;
    c.signal("-STOP");
    eventually("d leads every shard while c is paused", || async {
        shares(&f).await == Some(BTreeMap::from([("d".to_string(), SHARDS as usize)]))
    })
    .await;
    c.signal("-CONT");
    wait_all(&f, &[("east", 0, 4)], "all east again").await;
    wait_fair(&f, &["c", "d"]).await;
    eventually("every federation's owner is its shard's holder, after the pause", || owners_follow_the_leases(&f))
        .await;

    stop.store(true, Ordering::SeqCst);
    tokens.await.expect("the token watch ran");
    assert_tokens_kept(&violations, "paused and resumed");
    f.assert_ledger_clean();
    drop((c, d));
}
