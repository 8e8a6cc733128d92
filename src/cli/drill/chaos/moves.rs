//! The moves the sandbox's ledger shows: an ordinal whose run starts in another member than
//! its previous run moved there. The ledger records every incarnation, so no move is missed
//! however quickly it passes through the federation's `status.moves` (at a time factor of 0.01
//! a move can begin and end between two reads of the status).

use std::collections::BTreeMap;

use serde_json::Value;

/// One arrival of an ordinal in another member.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Arrival {
    /// The ordinal.
    pub ordinal: i32,
    /// The member it left.
    pub from: String,
    /// The member it arrived in.
    pub to: String,
    /// When its run there began.
    pub at: jiff::Timestamp,
}

/// The arrivals of `namespace/statefulset`'s ordinals at or after `since`, from the admin API's
/// ledger document (`{"incarnations": [...]}`).
pub fn arrivals(ledger: &Value, namespace: &str, statefulset: &str, since: jiff::Timestamp) -> Vec<Arrival> {
    let mut runs: BTreeMap<i32, Vec<(jiff::Timestamp, String)>> = BTreeMap::new();
    for inc in ledger["incarnations"].as_array().into_iter().flatten() {
        let id = &inc["identity"];
        if id["namespace"] != namespace || id["statefulset"] != statefulset {
            continue;
        }
        let (Some(k), Some(from), Some(cluster)) =
            (id["ordinal"].as_i64(), inc["runningFrom"].as_str(), inc["cluster"].as_str())
        else {
            continue;
        };
        let Ok(from) = from.parse::<jiff::Timestamp>() else { continue };
        runs.entry(k as i32).or_default().push((from, cluster.to_string()));
    }
    let mut out = Vec::new();
    for (k, mut list) in runs {
        list.sort();
        for pair in list.windows(2) {
            let ((_, before), (at, after)) = (&pair[0], &pair[1]);
            if before != after && *at >= since {
                out.push(Arrival { ordinal: k, from: before.clone(), to: after.clone(), at: *at });
            }
        }
    }
    out.sort_by_key(|a| a.at);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn inc(k: i64, cluster: &str, from: &str) -> Value {
        json!({"cluster": cluster, "runningFrom": from,
               "identity": {"namespace": "default", "statefulset": "chaos", "ordinal": k}})
    }

    #[test]
    fn a_run_in_another_member_is_an_arrival_and_a_restart_in_the_same_member_is_not() {
        let ledger = json!({"incarnations": [
            inc(0, "east", "2026-01-01T00:00:01Z"),
            inc(1, "east", "2026-01-01T00:00:01Z"),
            inc(0, "east", "2026-01-01T00:00:05Z"),
            inc(0, "west", "2026-01-01T00:00:09Z"),
            inc(1, "west", "2026-01-01T00:00:03Z"),
            // Another federation's pods, and a pod of no StatefulSet.
            {"cluster": "west", "runningFrom": "2026-01-01T00:00:04Z",
             "identity": {"namespace": "default", "statefulset": "redis", "ordinal": 0}},
            {"cluster": "west", "runningFrom": "2026-01-01T00:00:04Z", "identity": null},
        ]});
        let since: jiff::Timestamp = "2026-01-01T00:00:02Z".parse().unwrap();
        let got: Vec<(i32, String, String)> =
            arrivals(&ledger, "default", "chaos", since).into_iter().map(|a| (a.ordinal, a.from, a.to)).collect();
        let want = |k: i32| (k, "east".to_string(), "west".to_string());
        assert_eq!(got, [want(1), want(0)], "in time order");
        let later: jiff::Timestamp = "2026-01-01T00:00:04Z".parse().unwrap();
        assert_eq!(arrivals(&ledger, "default", "chaos", later).len(), 1, "only arrivals since");
    }
}
