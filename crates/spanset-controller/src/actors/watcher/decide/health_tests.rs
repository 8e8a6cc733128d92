//! Unit tests of [`super`]: probes, failed watches, the member's status.

use super::*;
use crate::actors::watcher::decide::answer::tests::{answered, silent};

fn api_error(code: u16, message: &str) -> kube::Error {
    kube::Error::Api(kube::core::Status::failure(message, "Reason").with_code(code).boxed())
}

#[test]
fn a_probe_asks_the_identity_and_the_ordinals_once_and_kruise_again_now_and_then() {
    let first = probe_asks(false, None, None, 0);
    assert_eq!(first, ProbeAsks { identity: true, ordinals: true, advanced: true });
    let known = probe_asks(true, Some(true), Some(true), 1);
    assert_eq!(known, ProbeAsks { identity: false, ordinals: false, advanced: false });
    assert!(!probe_asks(true, Some(true), Some(false), 1).advanced);
    assert!(probe_asks(true, Some(true), Some(false), ADVANCED_RECHECK_PROBES).advanced, "OpenKruise may come later");
}

#[test]
fn an_identity_the_member_does_not_show_is_an_answer_a_silent_one_is_not() {
    let mut ns = Namespace::default();
    ns.metadata.uid = Some("u-1".into());
    assert_eq!(identity_of(&ns), Ok("u-1".into()));
    assert_eq!(identity_of(&Namespace::default()), Err("kube-system has no uid".into()));
    assert!(identity_unshown(&answered(403, "forbidden")).is_some_and(|why| why.contains("403")));
    assert_eq!(identity_unshown(&answered(500, "etcd")), None);
    assert_eq!(identity_unshown(&silent()), None);
}

#[test]
fn the_ordinals_probe_reads_the_stored_start_and_counts_a_refusal_as_kept() {
    let stored = |start: Option<i32>| StatefulSet {
        spec: Some(k8s_openapi::api::apps::v1::StatefulSetSpec {
            ordinals: start.map(|start| k8s_openapi::api::apps::v1::StatefulSetOrdinals { start: Some(start) }),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(ordinals_kept(&stored(Some(1))));
    assert!(!ordinals_kept(&stored(None)), "the member dropped it");
    assert!(ordinals_probe_settled(&answered(409, "")));
    assert!(!ordinals_probe_settled(&answered(500, "")));
}

#[test]
fn a_failing_discovery_of_kruise_is_not_the_member_failing() {
    let names = ["statefulsets".to_string(), "daemonsets".to_string()];
    assert!(advanced_served(&names));
    assert!(!advanced_served(&names[1..]));
    assert!(advanced_failure_answers(&answered(503, "")));
    assert!(!advanced_failure_answers(&silent()));
}

#[test]
fn rejected_credentials_name_where_they_come_from() {
    assert_eq!(
        failure_message(&answered(401, "Unauthorized"), "Secret spanset/east"),
        "the member rejects the credentials of Secret spanset/east: Unauthorized"
    );
    assert_eq!(failure_message(&answered(500, "etcd down"), "x"), "etcd down");
    let watch = watch_failure(&watcher::Error::InitialListFailed(api_error(401, "Unauthorized")), "context east");
    assert_eq!(watch.cause, Failure::Unauthorized);
    assert!(watch.message.contains("context east") && watch.denied.is_none());
}

#[test]
fn a_denied_watch_keeps_the_member_s_words() {
    let denied = watch_failure(&watcher::Error::WatchStartFailed(api_error(403, "cannot watch nodes")), "x");
    assert_eq!(denied.cause, Failure::Forbidden);
    assert_eq!(denied.denied.as_deref(), Some("cannot watch nodes"));
    let failed = watch_failure(&watcher::Error::WatchFailed(api_error(500, "boom")), "x");
    assert_eq!((failed.cause, failed.denied), (Failure::ServerError, None));
}

#[test]
fn reachability_is_said_once_per_change_and_not_at_the_first_probe() {
    assert_eq!(reachability_change(None, false), Some(Reachability::First));
    assert_eq!(reachability_change(Some(true), true), None);
    assert_eq!(reachability_change(Some(true), false), Some(Reachability::Unreachable));
    assert_eq!(reachability_change(Some(false), true), Some(Reachability::Answers));
}

#[test]
fn a_member_reaching_another_s_cluster_is_reported_as_a_duplicate() {
    let identity = Some(Some("u-1".to_string()));
    let duplicate = Err("it reaches the same cluster as west".to_string());
    let version = Some("v1.31.0".to_string());
    let facts = |admission| {
        member_facts(&MemberFacts {
            condition: (true, "Answers", "ok".into()),
            identity: &identity,
            admission,
            server_version: &version,
            keeps_ordinals: Some(true),
            serves_advanced: Some(false),
            guards: GuardFacts {
                minor: Some(31),
                serves_policies: Some(true),
                installed: Some(std::sync::Arc::new(crate::member::policies::Readback::AsShipped)),
                keeps_ordinals: Some(true),
            },
        })
    };
    let dup = facts(&duplicate);
    assert_eq!(dup["conditions"][0]["status"], "False");
    assert_eq!(dup["conditions"][0]["reason"], "DuplicateCluster");
    let fine = facts(&Ok(()));
    assert_eq!(fine["conditions"][0]["status"], "True");
    assert_eq!(fine["clusterID"], "u-1");
    let said: Vec<(&str, bool)> = fine["guards"]
        .as_array()
        .expect("the guards")
        .iter()
        .map(|g| (g["name"].as_str().unwrap_or(""), g["inForce"] == true))
        .collect();
    assert_eq!(said, [("AdmissionPolicies", true), ("IdentityGate", true), ("StartOrdinals", true)]);
    assert!(condition_turns(Some(&fine), &dup));
    assert!(!report_due(Some(&fine), &fine, true), "unchanged and fresh: not written again");
    assert!(report_due(Some(&fine), &fine, false), "the last contact is refreshed");
    assert!(report_due(None, &fine, true));
}

#[test]
fn the_guards_are_read_back_once_served_every_period_and_sooner_after_a_failure() {
    let (period, probe) = (Duration::from_secs(30), Duration::from_secs(2));
    let due = |served, reading, since: Option<u64>, failures| {
        read_back_due(served, reading, since.map(Duration::from_secs), failures, period, probe)
    };
    assert!(due(Some(true), false, None, 0), "at once when first served");
    assert!(!due(None, false, None, 0) && !due(Some(false), false, None, 0), "nothing served, nothing read");
    assert!(!due(Some(true), true, None, 0), "one at a time");
    assert!(!due(Some(true), false, Some(29), 0) && due(Some(true), false, Some(30), 0), "every period");
    // After failures: 2 s, 4 s, 8 s, 16 s, then the period.
    assert!(due(Some(true), false, Some(2), 1) && !due(Some(true), false, Some(3), 2));
    assert!(due(Some(true), false, Some(16), 4) && !due(Some(true), false, Some(29), 5));
    assert!(due(Some(true), false, Some(30), 40), "no overflow, capped at the period");
}
