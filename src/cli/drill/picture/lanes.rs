//! The lanes of a drill's picture, read from the sandbox's ledger: each incarnation of the
//! federation's ordinals becomes a segment in its ordinal's lane, clipped to the window, with
//! its Ready spans; a run that began while another of the same ordinal still ran is flagged.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde_json::Value;

use super::{Lane, Segment};

/// The lanes of `namespace/statefulset` between `from` and `until`: one for each of
/// `ordinals` and for every other ordinal that ran in the window, in ordinal order.
pub fn lanes(
    ledger: &Value,
    namespace: &str,
    statefulset: &str,
    (from, until): (Timestamp, Timestamp),
    ordinals: impl IntoIterator<Item = u32>,
) -> Vec<Lane> {
    let ts = |v: &Value| v.as_str().and_then(|s| s.parse::<Timestamp>().ok());
    let clip = |t: Timestamp| t.clamp(from, until);
    let mut runs: BTreeMap<u32, Vec<Segment>> = ordinals.into_iter().map(|k| (k, Vec::new())).collect();
    for inc in ledger["incarnations"].as_array().into_iter().flatten() {
        let id = &inc["identity"];
        if id["namespace"] != namespace || id["statefulset"] != statefulset {
            continue;
        }
        let (Some(k), Some(cluster), Some(start)) =
            (id["ordinal"].as_u64(), inc["cluster"].as_str(), ts(&inc["runningFrom"]))
        else {
            continue;
        };
        // An open run lasts to the window's end.
        let end = ts(&inc["runningUntil"]).unwrap_or(until);
        if end < from || start > until {
            continue;
        }
        let ready = inc["readyPeriods"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((ts(&p["from"])?, ts(&p["until"]).unwrap_or(end))))
            .filter(|(a, b)| *b >= from && *a <= until)
            .map(|(a, b)| (clip(a), clip(b)))
            .collect();
        let segment =
            Segment { cluster: cluster.to_string(), from: clip(start), until: clip(end), ready, overlap: false };
        runs.entry(k as u32).or_default().push(segment);
    }
    runs.into_iter()
        .map(|(ordinal, mut segments)| {
            segments.sort_by_key(|s| (s.from, s.until));
            let mut latest_end: Option<Timestamp> = None;
            for s in &mut segments {
                s.overlap = latest_end.is_some_and(|end| s.from < end);
                latest_end = Some(latest_end.map_or(s.until, |end| end.max(s.until)));
            }
            Lane { ordinal, segments }
        })
        .collect()
}

/// The members the lanes show, in order of first appearance.
pub fn clusters_in(lanes: &[Lane]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for s in lanes.iter().flat_map(|l| &l.segments) {
        if seen.insert(s.cluster.as_str()) {
            out.push(s.cluster.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn t(s: u32) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + i64::from(s)).unwrap()
    }

    fn inc(k: u32, cluster: &str, from: u32, until: Option<u32>, ready: &[(u32, Option<u32>)]) -> Value {
        json!({"cluster": cluster, "runningFrom": t(from).to_string(), "runningUntil": until.map(|u| t(u).to_string()),
               "readyPeriods": ready.iter().map(|(a, b)| json!({"from": t(*a).to_string(), "until": b.map(|b| t(b).to_string())})).collect::<Vec<_>>(),
               "identity": {"namespace": "default", "statefulset": "redis", "ordinal": k}})
    }

    #[test]
    fn each_run_is_a_segment_in_its_ordinals_lane_clipped_to_the_window() {
        let ledger = json!({"incarnations": [
            // Ordinal 0 runs in central since before the window, dies, runs in west, comes back.
            inc(0, "central", 0, Some(20), &[(1, Some(20))]),
            inc(0, "west", 30, Some(60), &[(32, None)]),
            inc(0, "central", 70, None, &[(75, None)]),
            // Ordinal 1 ran only before the window: no segment.
            inc(1, "east", 0, Some(5), &[]),
            // Ordinal 3 appears (a scale-up): a lane of its own.
            inc(3, "east", 40, None, &[]),
            // Another federation's pod, and a pod of no StatefulSet.
            {"cluster": "east", "runningFrom": t(12).to_string(), "identity": {"namespace": "default", "statefulset": "other", "ordinal": 0}},
            {"cluster": "east", "runningFrom": t(12).to_string(), "identity": null},
        ]});
        let lanes = lanes(&ledger, "default", "redis", (t(10), t(100)), 0..3);
        let ordinals: Vec<u32> = lanes.iter().map(|l| l.ordinal).collect();
        assert_eq!(ordinals, [0, 1, 2, 3], "one lane per ordinal, empty ones too");
        let zero: Vec<(&str, Timestamp, Timestamp)> =
            lanes[0].segments.iter().map(|s| (s.cluster.as_str(), s.from, s.until)).collect();
        assert_eq!(zero, [("central", t(10), t(20)), ("west", t(30), t(60)), ("central", t(70), t(100))]);
        assert_eq!(lanes[0].segments[0].ready, [(t(10), t(20))], "Ready spans are clipped too");
        assert_eq!(lanes[0].segments[1].ready, [(t(32), t(60))], "an open Ready span ends with its run");
        assert!(lanes[1].segments.is_empty() && lanes[2].segments.is_empty());
        assert_eq!(lanes[3].segments.len(), 1);
        assert!(lanes.iter().flat_map(|l| &l.segments).all(|s| !s.overlap));
        assert_eq!(clusters_in(&lanes), ["central", "west", "east"]);
    }

    #[test]
    fn a_run_that_starts_while_another_of_its_ordinal_runs_is_flagged() {
        let ledger = json!({"incarnations": [
            inc(0, "east", 0, Some(50), &[]),
            inc(0, "west", 40, Some(60), &[]),
            inc(0, "east", 60, None, &[]),
        ]});
        let lanes = lanes(&ledger, "default", "redis", (t(0), t(100)), [0]);
        let flags: Vec<bool> = lanes[0].segments.iter().map(|s| s.overlap).collect();
        assert_eq!(flags, [false, true, false], "only the second run overlapped another");
    }
}
