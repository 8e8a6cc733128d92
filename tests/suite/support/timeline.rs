//! The sandbox ledger read as a timeline of availability: every pod incarnation with its
//! images and the spans it was Ready, across all clusters, timed by the sandbox's own clock.
//! A rollout test counts the identities unavailable at *every* instant from it, exactly —
//! never by polling, which misses short gaps.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::Sandbox;

/// One incarnation from the ledger.
#[derive(Debug, Clone)]
pub struct Run {
    /// Its cluster.
    pub cluster: String,
    /// Its pod uid.
    pub uid: String,
    /// Its ordinal.
    pub ordinal: u32,
    /// Its images when it started.
    pub images: Vec<String>,
    /// When it started running.
    pub from: Timestamp,
    /// When it stopped, if it did.
    pub until: Option<Timestamp>,
    /// Its Ready spans.
    pub ready: Vec<(Timestamp, Option<Timestamp>)>,
    /// In-place updates: when its containers restarted with which images.
    pub image_changes: Vec<(Timestamp, Vec<String>)>,
}

/// Every incarnation of StatefulSet identity `set` (any cluster), in start order.
pub fn runs(sandbox: &Sandbox, set: &str) -> Vec<Run> {
    let url = format!("{}/ledger", sandbox.admin);
    let out = std::process::Command::new("curl").args(["-sf", &url]).output().expect("curl runs");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the ledger is JSON");
    runs_in(&doc, set)
}

/// Like [`runs`], from the ledger of a sandbox running inside the test (a `Fleet`'s), read
/// as the admin API serves it.
pub fn runs_of(ledger: &spanset_sim::cluster::ledger::Ledger, set: &str) -> Vec<Run> {
    let doc = serde_json::json!({ "incarnations": ledger.entries() });
    runs_in(&doc, set)
}

/// The runs of `set` in a ledger document (`{"incarnations": [...]}`).
fn runs_in(doc: &serde_json::Value, set: &str) -> Vec<Run> {
    let ts = |v: &serde_json::Value| v.as_str().and_then(|s| s.parse::<Timestamp>().ok());
    let mut out: Vec<Run> = doc["incarnations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["identity"]["statefulset"] == set)
        .map(|i| Run {
            cluster: i["cluster"].as_str().unwrap_or_default().to_string(),
            uid: i["uid"].as_str().unwrap_or_default().to_string(),
            ordinal: i["identity"]["ordinal"].as_u64().unwrap_or_default() as u32,
            images: i["images"].as_array().into_iter().flatten().filter_map(|s| s.as_str().map(String::from)).collect(),
            from: ts(&i["runningFrom"]).expect("runningFrom"),
            until: ts(&i["runningUntil"]),
            ready: i["readyPeriods"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| (ts(&p["from"]).expect("from"), ts(&p["until"])))
                .collect(),
            image_changes: i["imageChanges"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let images = c["images"].as_array().into_iter().flatten();
                    (ts(&c["at"]).expect("at"), images.filter_map(|s| s.as_str().map(String::from)).collect())
                })
                .collect(),
        })
        .collect();
    out.sort_by_key(|r| r.from);
    out
}

/// The most ordinals of `ordinals` not Ready at one instant within `[from, to]`, with the
/// first instant it happened and which ordinals. An ordinal is available while one of its
/// incarnations is within a Ready span.
pub fn most_unavailable(
    runs: &[Run],
    ordinals: std::ops::Range<u32>,
    from: Timestamp,
    to: Timestamp,
) -> (usize, Timestamp, Vec<u32>) {
    most_down(runs, ordinals, from, to, |r| r.ready.iter().map(|(a, b)| (*a, b.unwrap_or(Timestamp::MAX))).collect())
}

/// The most ordinals of `ordinals` taken down at one instant within `[from, to]`, with the
/// first instant it happened and which ordinals. An incarnation is up from its first Ready
/// until it stops: a workload whose readiness follows its peers (etcd's `/health` fails on
/// every member while they elect a leader) goes not Ready without anything being taken down,
/// and what a rollout or a move may not do is stop a second member before the first is back.
pub fn most_taken_down(
    runs: &[Run],
    ordinals: std::ops::Range<u32>,
    from: Timestamp,
    to: Timestamp,
) -> (usize, Timestamp, Vec<u32>) {
    most_down(runs, ordinals, from, to, |r| {
        r.ready.first().map(|(a, _)| (*a, r.until.unwrap_or(Timestamp::MAX))).into_iter().collect()
    })
}

/// The most ordinals of `ordinals` outside every one of their incarnations' `up` spans at one
/// instant within `[from, to]`.
fn most_down(
    runs: &[Run],
    ordinals: std::ops::Range<u32>,
    from: Timestamp,
    to: Timestamp,
    up: impl Fn(&Run) -> Vec<(Timestamp, Timestamp)>,
) -> (usize, Timestamp, Vec<u32>) {
    let mut spans: BTreeMap<u32, Vec<(Timestamp, Timestamp)>> = ordinals.clone().map(|k| (k, vec![])).collect();
    let mut instants = vec![from];
    for r in runs.iter().filter(|r| ordinals.contains(&r.ordinal)) {
        for (a, b) in up(r) {
            spans.get_mut(&r.ordinal).expect("in range").push((a, b));
            instants.extend([a, b].into_iter().filter(|t| *t >= from && *t <= to));
        }
    }
    instants.sort();
    let mut worst = (0, from, vec![]);
    for t in instants {
        let down: Vec<u32> =
            spans.iter().filter(|(_, s)| !s.iter().any(|(a, b)| *a <= t && t < *b)).map(|(k, _)| *k).collect();
        if down.len() > worst.0 {
            worst = (down.len(), t, down);
        }
    }
    worst
}

/// The ordinals in the order they first ran `image` after `since`: a new incarnation with it,
/// or an in-place update of a running one to it.
pub fn update_order(runs: &[Run], image: &str, since: Timestamp) -> Vec<u32> {
    let mut events: Vec<(Timestamp, u32)> = Vec::new();
    for r in runs {
        if r.from >= since && r.images.iter().any(|i| i == image) {
            events.push((r.from, r.ordinal));
        }
        for (at, images) in &r.image_changes {
            if *at >= since && images.iter().any(|i| i == image) {
                events.push((*at, r.ordinal));
            }
        }
    }
    events.sort();
    let mut seen = Vec::new();
    for (_, k) in events {
        if !seen.contains(&k) {
            seen.push(k);
        }
    }
    seen
}

/// When the first incarnation of `ordinal` with `image` first became Ready.
pub fn ready_with(runs: &[Run], ordinal: u32, image: &str) -> Option<Timestamp> {
    runs.iter()
        .filter(|r| r.ordinal == ordinal && r.images.iter().any(|i| i == image))
        .find_map(|r| r.ready.first().map(|p| p.0))
}

/// The incarnations of `ordinals` that ran outside `cluster` and started before `t`: a test
/// of "that member's ordinals start nowhere else until X" expects none, over the whole run.
pub fn started_elsewhere_before<'r>(runs: &'r [Run], cluster: &str, ordinals: &[u32], t: Timestamp) -> Vec<&'r Run> {
    runs.iter().filter(|r| r.cluster != cluster && ordinals.contains(&r.ordinal) && r.from < t).collect()
}
