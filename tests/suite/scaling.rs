//! Scaling keeps survivors, end to end on the sandbox with both backends: with
//! `spec.placement.onScale: Keep` (the default) a scale-down of 6 to 2 at weights 1:1:1 removes
//! ordinals 2-5 where they run and restarts nothing — ordinals 0 and 1 keep their pods, watched
//! in every member at every poll, and no move is ever recorded — and a scale back to 6 adds 2-5
//! without moving anything; with `Rebalance` the weights are followed again by moves, recorded
//! in `status.moves` and Events. Every run ends with the ledger: no ordinal ran in two clusters
//! at once, and the survivors ran as one incarnation each.

use std::collections::BTreeMap;

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use spanset_api::{Backend, FederatedStatefulSet, OnScale};
use support::federation::{Controller, Federation};

use crate::support;

const ORDER: [&str; 3] = ["east", "west", "central"];

/// A federation of `replicas` over east, west, central (weight 1 each), without claims.
fn federation(f: &Federation, name: &str, backend: Backend, on_scale: Option<OnScale>) -> FederatedStatefulSet {
    let mut fsts = f.placing(name, &ORDER);
    fsts.spec.replicas = 6;
    fsts.spec.backend = backend;
    fsts.spec.placement.on_scale = on_scale;
    fsts.spec.template.volume_claim_templates.clear();
    fsts
}

async fn scale(f: &Federation, name: &str, replicas: i32) {
    let patch = json!({"spec": {"replicas": replicas}});
    f.api().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("replicas patched");
}

/// Whether each member runs exactly the ordinals `want` gives it, every one Ready, and the
/// status says so with nothing moving.
async fn running(f: &Federation, name: &str, want: &[(&str, &[u32])]) -> bool {
    let total: usize = want.iter().map(|w| w.1.len()).sum();
    let status = f.status(name).await;
    let ready = status.ready.as_deref() == Some(format!("{total}/{total}").as_str()) && status.moves.is_empty();
    let now = f.placement(name).await;
    ready
        && f.members.iter().all(|m| {
            let wanted: Vec<u32> = want.iter().find(|w| w.0 == m).map(|w| w.1.to_vec()).unwrap_or_default();
            now[m].keys().copied().collect::<Vec<_>>() == wanted
        })
}

/// Polls the federations until each runs as `want`, checking at every poll that the
/// survivors (name → ordinal → (cluster, uid)) run where they ran, as the same pod, and in no
/// other member, and that no move is recorded.
async fn keep_survivors(
    f: &Federation,
    survivors: &BTreeMap<&str, BTreeMap<u32, (String, String)>>,
    want: &[(&str, &[u32])],
    what: &str,
) {
    let start = std::time::Instant::now();
    loop {
        let mut done = true;
        for (name, kept) in survivors {
            let now = f.placement(name).await;
            for (k, (cluster, uid)) in kept {
                assert_eq!(now[cluster].get(k), Some(uid), "{what}: {name}-{k} was restarted or moved: {now:?}");
                for (m, there) in &now {
                    assert!(m == cluster || !there.contains_key(k), "{what}: {name}-{k} also in {m}: {now:?}");
                }
            }
            let status = f.status(name).await;
            assert!(status.moves.is_empty(), "{what}: {name} recorded moves {:?}", status.moves);
            done &= running(f, name, want).await;
        }
        if done {
            return;
        }
        assert!(start.elapsed() < support::DEADLINE * 2, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// How many incarnations of `pod` the ledger recorded.
fn incarnations(f: &Federation, pod: &str) -> usize {
    let ledger: Value = serde_json::from_str(&f.sandbox.ctl_ok(&["ledger"])).expect("ledger JSON");
    ledger["incarnations"].as_array().expect("incarnations").iter().filter(|i| i["pod"] == pod).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_down_and_back_up_restarts_and_moves_nothing_on_either_backend() {
    let f = Federation::start_flags(&ORDER, &["--kruise"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    f.create(&federation(&f, "plain", Backend::StatefulSet, None)).await;
    f.create(&federation(&f, "kv", Backend::AdvancedStatefulSet, None)).await;
    let thirds: &[(&str, &[u32])] = &[("east", &[0, 1]), ("west", &[2, 3]), ("central", &[4, 5])];
    for name in ["plain", "kv"] {
        support::eventually(&format!("{name} runs in thirds"), || running(&f, name, thirds)).await;
        // The layout divided by weight is remembered for the placement it was divided for.
        let status = f.status(name).await;
        assert_eq!(status.balanced_placement.as_deref(), Some("east:1,west:1,central:1"), "{name}");
    }
    let mut survivors = BTreeMap::new();
    for name in ["plain", "kv"] {
        let east = f.pod_uids("east", name).await;
        let kept: BTreeMap<u32, (String, String)> =
            [0, 1].into_iter().map(|k| (k, ("east".to_string(), east[&k].clone()))).collect();
        survivors.insert(name, kept);
    }

    // 6 → 2: ordinals 2-5 go where they run; 0 and 1 stay in east, untouched.
    for name in ["plain", "kv"] {
        scale(&f, name, 2).await;
    }
    keep_survivors(&f, &survivors, &[("east", &[0, 1])], "the scale-down to 2").await;

    // 2 → 6: 2-3 to west and 4-5 to central, where the weights lack them; nothing moves.
    for name in ["plain", "kv"] {
        scale(&f, name, 6).await;
    }
    keep_survivors(&f, &survivors, thirds, "the scale back to 6").await;

    for name in ["plain", "kv"] {
        let events = f.events(name).await;
        assert!(!events.iter().any(|e| e.1 == "MoveStarted"), "{name}: no move started: {events:?}");
        for k in [0, 1] {
            assert_eq!(incarnations(&f, &format!("{name}-{k}")), 1, "{name}-{k} ran as one pod all along");
        }
    }
    f.assert_ledger_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_rebalance_a_scale_down_follows_the_weights_through_recorded_moves() {
    let f = Federation::start_flags(&ORDER, &["--kruise"]).await;
    let _c = Controller::start(&f.sandbox, "controller");
    let rebalance = Some(OnScale::Rebalance);
    for (name, backend) in [("plain", Backend::StatefulSet), ("kv", Backend::AdvancedStatefulSet)] {
        // OrderedReady (the default): the scale-down's shrinks go one at a time while an
        // ordinal moves; a moving ordinal (no pod anywhere) does not hold them.
        f.create(&federation(&f, name, backend, rebalance)).await;
    }
    let thirds: &[(&str, &[u32])] = &[("east", &[0, 1]), ("west", &[2, 3]), ("central", &[4, 5])];
    for name in ["plain", "kv"] {
        support::eventually(&format!("{name} runs in thirds"), || running(&f, name, thirds)).await;
    }
    for name in ["plain", "kv"] {
        scale(&f, name, 2).await;
    }
    // One each at weights 1:1:1: ordinal 1 moves from east to west, and the status says so
    // while it moves.
    let mut seen: BTreeMap<&str, bool> = BTreeMap::new();
    let start = std::time::Instant::now();
    loop {
        let mut done = true;
        for name in ["plain", "kv"] {
            let status = f.status(name).await;
            let moving = status.moves.iter().any(|m| m.ordinal == 1 && m.from == "east" && m.to == "west");
            *seen.entry(name).or_default() |= moving;
            done &= running(&f, name, &[("east", &[0]), ("west", &[1])]).await;
        }
        if done {
            break;
        }
        assert!(start.elapsed() < support::DEADLINE * 2, "timed out waiting for the rebalance: {seen:?}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    for name in ["plain", "kv"] {
        assert_eq!(seen.get(name), Some(&true), "{name}: the move of ordinal 1 was in status.moves");
        let events = f.events(name).await;
        assert!(
            events.iter().any(|e| e.1 == "MoveStarted" && e.2.contains("ordinal 1: east → west")),
            "{name}: {events:?}"
        );
    }
    f.assert_ledger_clean();
}
