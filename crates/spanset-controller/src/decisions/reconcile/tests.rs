use std::collections::BTreeMap;

use spanset_api::{MoveStatus, SliceStatus, StorageMode, labels::IDENTITY_GATE};
use spanset_plan::Slice;

use super::*;
use crate::{
    decisions::status::types,
    member::{
        cache::{FederationCache, PodPhase, PodRecord, StsRecord, StsState},
        objects::template_hash,
    },
};

fn fsts(weights: &[(&str, i32)]) -> FederatedStatefulSet {
    let clusters: Vec<String> = weights.iter().map(|(c, _)| c.to_string()).collect();
    let mut f = spanset_api::example(&clusters);
    for (p, (_, w)) in f.spec.placement.clusters.iter_mut().zip(weights) {
        p.weight = Some(*w);
    }
    f.metadata.uid = Some("uid-1".into());
    f.metadata.generation = Some(1);
    f.metadata.finalizers = Some(vec![spanset_api::labels::FINALIZER.into()]);
    f
}

/// A member that runs `[start, start+replicas)`, all Ready, written in `term`, confirmed.
fn settled(f: &FederatedStatefulSet, start: u32, replicas: u32, term: u64) -> MemberInput {
    let sts = StsRecord {
        kind: crate::member::objects::backend(f),
        uid: format!("sts-{start}"),
        rv: 10,
        generation: 2,
        observed_generation: 2,
        slice: Slice { start, replicas, ..Slice::empty() },
        has_ordinals: true,
        term: Some(term),
        template_hash: Some(template_hash(f)),
        federation_uid: Some("uid-1".into()),
        deleting: false,
        partition: 0,
        update_revision: Some("rev-1".into()),
        ungated_template: None,
        ungated_revision: None,
        guard: None,
    };
    let pods = (start..start + replicas)
        .map(|k| {
            let p = PodRecord {
                uid: format!("p{k}"),
                node: None,
                phase: PodPhase::Running,
                ready: true,
                deleting: false,
                rv: 5,
                gates: vec![],
                revision: Some("rev-1".into()),
                ready_since: Some(jiff::Timestamp::UNIX_EPOCH),
                ready_seen: Instant::now().checked_sub(Duration::from_secs(3600)),
                trouble: None,
                ip: None,
                owner: Some(format!("sts-{start}")),
                labelled: true,
                guard: None,
            };
            (k, p)
        })
        .collect();
    let federation = FederationCache {
        confirmed_for: Some(StsState::Present { uid: sts.uid.clone(), generation: 2 }),
        written_generation: Some((sts.uid.clone(), 2)),
        sts: Some(Box::new(sts)),
        pods,
        floor_rv: 11,
        gone: Default::default(),
        uncertain_write: None,
        other_kind: None,
        budget: None,
        published: Default::default(),
    };
    let view = MemberView {
        synced: true,
        slices_known: true,
        federation: federation.into(),
        last_contact: Some(Instant::now()),
        keeps_ordinals: Some(true),
        ..Default::default()
    };
    MemberInput {
        exists: true,
        unusable: None,
        fenced: false,
        answered_since_fence: false,
        view: Some(Arc::new(view)),
        duplicate: None,
    }
}

fn decide_now(f: &FederatedStatefulSet, members: &BTreeMap<String, MemberInput>, term: u64) -> Decision {
    decide(&Inputs {
        fsts: f,
        members,
        term,
        template_refusal: None,
        bounds: Default::default(),
        access_refusal: None,
        handover_refusals: BTreeMap::new(),
        rules: Default::default(),
        now: Instant::now(),
        leading_since: Instant::now() - Duration::from_secs(3600),
        wall: jiff::Timestamp::from_second(1_800_000_000).unwrap(),
    })
}

fn written_slices(d: &Decision) -> Vec<(String, Option<i32>, Option<i32>)> {
    d.writes
        .iter()
        .map(|w| {
            let spec = &w.object.data["spec"];
            let int = |v: &serde_json::Value| v.as_i64().map(|n| n as i32);
            (w.cluster.clone(), int(&spec["ordinals"]["start"]), int(&spec["replicas"]))
        })
        .collect()
}

/// A stored status in which `cluster` was last seen holding `[start, start+replicas)`, Ready.
fn status_holding(cluster: &str, start: i32, replicas: i32) -> FederatedStatefulSetStatus {
    FederatedStatefulSetStatus {
        slices: vec![SliceStatus {
            cluster: cluster.into(),
            start,
            replicas,
            reserved_ordinals: vec![],
            ready_replicas: replicas,
        }],
        ..Default::default()
    }
}

#[test]
fn nothing_new_is_created_anywhere_while_a_member_is_starting() {
    let f = fsts(&[("east", 1), ("west", 1)]);
    let fresh = |synced: bool| MemberInput {
        exists: true,
        view: Some(Arc::new(MemberView {
            synced,
            slices_known: true,
            last_contact: Some(Instant::now()),
            keeps_ordinals: Some(true),
            ..Default::default()
        })),
        ..Default::default()
    };
    let members = BTreeMap::from([("east".into(), fresh(true)), ("west".into(), fresh(false))]);
    let d = decide_now(&f, &members, 1);
    assert!(d.writes.is_empty() && d.supporting.is_empty(), "{:?}", written_slices(&d));
    assert_eq!(d.starting, vec!["west".to_string()]);
    let members = BTreeMap::from([
        ("east".into(), fresh(true)),
        ("west".into(), MemberInput { exists: true, ..Default::default() }),
    ]);
    assert_eq!(decide_now(&f, &members, 1).starting, vec!["west".to_string()], "no report at all");
    // A member whose calls fail is not starting: it gets nothing, the others go on.
    let mut failing = MemberView { synced: false, ..Default::default() };
    failing.failure = Some((crate::member::health::Failure::Refused, "connection refused".into()));
    let members = BTreeMap::from([
        ("east".into(), fresh(true)),
        ("west".into(), MemberInput { exists: true, view: Some(Arc::new(failing)), ..Default::default() }),
    ]);
    let d = decide_now(&f, &members, 1);
    assert!(d.starting.is_empty());
    assert_eq!(written_slices(&d).iter().map(|(c, ..)| c.as_str()).collect::<Vec<_>>(), ["east"]);
    let members = BTreeMap::from([("east".into(), fresh(true)), ("west".into(), fresh(true))]);
    assert_eq!(decide_now(&f, &members, 1).supporting, vec!["east".to_string(), "west".to_string()]);
}

#[test]
fn nothing_grows_over_a_member_that_has_not_reported_yet() {
    // A new leader, after stamping east: west (which runs 3-5) has not reported yet, so
    // what it runs is unknown and east must not take its ordinals. This grew east to 0-6
    // before (an at-most-one violation seen once in CI after a controller restart).
    let mut f = fsts(&[("east", 1), ("west", 0)]);
    f.status = Some(status_holding("west", 3, 3));
    let mut west = settled(&f, 3, 3, 7);
    west.view = None;
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), west)]);
    let d = decide_now(&f, &members, 8);
    assert!(written_slices(&d).is_empty(), "nothing is written: {:?}", written_slices(&d));
    assert!(d.status.conditions.iter().any(|c| c.reason == "WaitingForMembers" && c.message.contains("west")));
    // The status keeps what west was last seen to hold, so that the next reconcile (west
    // still silent) knows it too.
    let kept = d.status.slices.iter().find(|s| s.cluster == "west").map(|s| (s.start, s.replicas));
    assert_eq!(kept, Some((3, 3)), "{:?}", d.status.slices);
    let mut again = f.clone();
    again.status = Some(d.status.clone());
    let d2 = decide_now(&again, &members, 8);
    assert!(written_slices(&d2).is_empty(), "still nothing: {:?}", written_slices(&d2));
    // Once west reports, the move starts with west's release, not east's grow.
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), settled(&f, 3, 3, 8))]);
    let d = decide_now(&f, &members, 8);
    assert!(written_slices(&d).iter().all(|(c, _, r)| c != "east" || *r == Some(3)), "{:?}", written_slices(&d));
}

#[test]
fn a_fenced_member_that_answers_again_is_shrunk_then_its_remaining_pods_are_deleted() {
    // West was fenced and its ordinals 3-5 re-homed to east; west answers again. Its own
    // StatefulSet controller (OrderedReady) would delete one pod at a time and wait on one
    // stuck Terminating on a dead node: spanset deletes the others itself, once the shrink
    // is stored, each by uid.
    let f = fsts(&[("east", 1), ("west", 0)]);
    let mut west = settled(&f, 3, 3, 8);
    west.fenced = true;
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 6, 8)), ("west".into(), west)]);
    let d = decide_now(&f, &members, 8);
    assert_eq!(written_slices(&d), vec![("west".to_string(), Some(0), Some(0))], "the shrink first");
    assert!(d.pod_deletes.is_empty(), "no pod goes before the shrink is stored: {:?}", d.pod_deletes);
    let shrunk = reporting(settled(&f, 3, 3, 8), |v| {
        let sts = Arc::make_mut(&mut v.federation).sts.as_mut().unwrap();
        sts.slice = Slice::empty();
        Arc::make_mut(&mut v.federation).pods.get_mut(&5).unwrap().deleting = true;
    });
    let mut west = shrunk;
    west.fenced = true;
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 6, 8)), ("west".into(), west)]);
    let d = decide_now(&f, &members, 8);
    let deletes: Vec<(&str, &str, &str)> =
        d.pod_deletes.iter().map(|p| (p.cluster.as_str(), p.name.as_str(), p.uid.as_str())).collect();
    assert_eq!(deletes, vec![("west", "redis-3", "p3"), ("west", "redis-4", "p4")], "not the one already deleting");
    assert!(!d.done, "not done while pods are left there");
}

#[test]
fn a_fenced_member_counts_for_no_readiness_and_its_pods_are_named_in_degraded() {
    // East runs everything after the re-homing; fenced west still reports Ready pods 3-5
    // (it answers again, or its last report was from before the fence).
    let f = fsts(&[("east", 1), ("west", 0)]);
    let mut west = settled(&f, 3, 3, 8);
    west.fenced = true;
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 6, 8)), ("west".into(), west)]);
    let d = decide_now(&f, &members, 8);
    assert_eq!(d.status.ready_replicas, Some(6), "6/6, not 9/6: {:?}", d.status.slices);
    assert_eq!(d.status.ready.as_deref(), Some("6/6"));
    let west = d.status.slices.iter().find(|s| s.cluster == "west").expect("west listed");
    assert_eq!(west.ready_replicas, 0);
    let degraded = d.status.conditions.iter().find(|c| c.type_ == "Degraded").expect("Degraded");
    assert_eq!(degraded.status, "True");
    assert!(degraded.message.contains("west (Fenced; it still reports pods of ordinals 3-5"), "{degraded:?}");
}

#[test]
fn a_member_silent_since_its_watcher_started_is_fenced_automatically_but_not_one_that_answers() {
    let mut f = fsts(&[("east", 1), ("west", 1)]);
    f.spec.failover.policy = Some(FailoverPolicy::Automatic);
    f.spec.failover.fence_after_seconds = Some(10);
    f.status = Some(status_holding("west", 3, 3));
    let long_ago = Instant::now() - Duration::from_secs(60);
    // West never answered this process: its watcher reports, unsynced, since a minute.
    let silent = reporting(settled(&f, 3, 3, 7), |v| {
        *v = MemberView { synced: false, watching_since: Some(long_ago), ..Default::default() };
    });
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), silent)]);
    let d = decide_now(&f, &members, 8);
    assert_eq!(d.fence.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), ["west"]);
    assert!(written_slices(&d).iter().all(|(c, _, r)| c != "east" || *r == Some(3)), "nothing grows before the fence");
    let kept = d.status.slices.iter().find(|s| s.cluster == "west").map(|s| (s.start, s.replicas, s.ready_replicas));
    assert_eq!(kept, Some((3, 3, 0)), "what west holds stays in the status, none of it ready");
    // West answers probes but has not listed yet (a slow first list): not silent, not fenced.
    let answering = reporting(settled(&f, 3, 3, 7), |v| {
        *v = MemberView {
            synced: false,
            watching_since: Some(long_ago),
            last_contact: Some(Instant::now()),
            ..Default::default()
        };
    });
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), answering)]);
    assert!(decide_now(&f, &members, 8).fence.is_empty());
}

#[test]
fn a_new_leader_counts_silence_for_an_automatic_fence_only_from_its_own_leadership() {
    // This process's watcher has not reached west for a minute while it was a standby (the old
    // leader did); it has led for two seconds only.
    let mut f = fsts(&[("east", 1), ("west", 1)]);
    f.spec.failover.policy = Some(FailoverPolicy::Automatic);
    f.spec.failover.fence_after_seconds = Some(10);
    f.status = Some(status_holding("west", 3, 3));
    let now = Instant::now();
    let long_ago = now - Duration::from_secs(60);
    let silent = reporting(settled(&f, 3, 3, 7), |v| {
        *v = MemberView { synced: false, watching_since: Some(long_ago), ..Default::default() };
    });
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), silent)]);
    let at = |leading_since: Instant| {
        decide(&Inputs {
            fsts: &f,
            members: &members,
            term: 8,
            template_refusal: None,
            bounds: Default::default(),
            access_refusal: None,
            handover_refusals: BTreeMap::new(),
            rules: Default::default(),
            now,
            leading_since,
            wall: jiff::Timestamp::from_second(1_800_000_000).unwrap(),
        })
    };
    let d = at(now - Duration::from_secs(2));
    assert!(d.fence.is_empty(), "a standby's count of silence fences nothing: {:?}", d.fence);
    // Past unreachableAfterSeconds (10) + fenceAfterSeconds (10) of its own leadership, it fences.
    let d = at(now - Duration::from_secs(26));
    assert_eq!(d.fence.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), ["west"]);
}

#[test]
fn a_lost_member_removed_from_the_placement_is_still_fenced_automatically() {
    // Central holds 4-5 but is no longer in the placement; it was lost, and after a restart it
    // has never answered. Unfenced, it blocks every grow.
    let mut f = fsts(&[("east", 1), ("west", 1)]);
    f.spec.failover.policy = Some(FailoverPolicy::Automatic);
    f.spec.failover.fence_after_seconds = Some(10);
    f.status = Some(status_holding("central", 4, 2));
    let long_ago = Instant::now() - Duration::from_secs(60);
    let silent = reporting(settled(&f, 4, 2, 7), |v| {
        *v = MemberView { synced: false, watching_since: Some(long_ago), ..Default::default() };
    });
    let members = BTreeMap::from([
        ("east".into(), settled(&f, 0, 2, 8)),
        ("west".into(), settled(&f, 2, 2, 8)),
        ("central".into(), silent),
    ]);
    let d = decide_now(&f, &members, 8);
    assert_eq!(d.fence.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), ["central"]);
    assert!(
        written_slices(&d).iter().all(|(_, s, r)| s.unwrap_or(0) + r.unwrap_or(0) <= 4),
        "nothing grows into 4-5 before the fence: {:?}",
        written_slices(&d)
    );
    // A silent member that holds nothing of this federation is not fenced by it.
    let mut g = f.clone();
    g.status = Some(status_holding("east", 0, 2));
    let idle = reporting(settled(&g, 0, 0, 7), |v| {
        *v = MemberView { synced: false, watching_since: Some(long_ago), ..Default::default() };
    });
    let members = BTreeMap::from([
        ("east".into(), settled(&g, 0, 3, 8)),
        ("west".into(), settled(&g, 3, 3, 8)),
        ("central".into(), idle),
    ]);
    assert!(decide_now(&g, &members, 8).fence.is_empty());
}

#[test]
fn pods_of_a_fenced_member_that_answers_again_block_their_grow_elsewhere() {
    // West was fenced while lost, answers again and has been shrunk, but its pods 3-5 still
    // exist (still running, or terminating): east waits for them.
    let f = fsts(&[("east", 1), ("west", 1)]);
    let back = |pods: bool| {
        let mut m = reporting(settled(&f, 3, 3, 8), |v| {
            if let Some(sts) = Arc::make_mut(&mut v.federation).sts.as_mut() {
                sts.slice = Slice { start: 3, replicas: 0, ..Slice::empty() };
            }
            if !pods {
                Arc::make_mut(&mut v.federation).pods.clear();
            }
        });
        m.fenced = true;
        m
    };
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), back(true))]);
    let d = decide_now(&f, &members, 8);
    assert!(
        written_slices(&d).iter().all(|(c, _, r)| c != "east" || r.unwrap_or(0) <= 3),
        "east takes none of west's 3-5 while their pods exist there: {:?}",
        written_slices(&d)
    );
    // Once west's pods are gone, east takes the whole range.
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), back(false))]);
    let d = decide_now(&f, &members, 8);
    assert_eq!(written_slices(&d), vec![("east".to_string(), Some(0), Some(6))]);
    // A fenced member that does not answer counts for nothing: the fence stands for it.
    let mut lost = back(true);
    lost.view = Some(Arc::new(MemberView {
        last_contact: Some(Instant::now() - Duration::from_secs(60)),
        ..(**lost.view.as_ref().unwrap()).clone()
    }));
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), lost)]);
    let d = decide_now(&f, &members, 8);
    assert_eq!(written_slices(&d), vec![("east".to_string(), Some(0), Some(6))]);
}

#[test]
fn a_settled_federation_writes_nothing_and_its_status_is_stable() {
    let mut f = fsts(&[("east", 1), ("west", 1)]);
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
    let first = decide_now(&f, &members, 7);
    assert!(first.writes.is_empty() && first.done && !first.blocked);
    assert_eq!(first.status.ready.as_deref(), Some("6/6"));
    f.status = Some(first.status.clone());
    let second = decide_now(&f, &members, 7);
    assert!(second.writes.is_empty());
    assert_eq!(second.status, first.status, "a no-op reconcile leaves nothing to store");
}

/// `m` with its report changed by `edit`.
fn reporting(mut m: MemberInput, edit: impl FnOnce(&mut MemberView)) -> MemberInput {
    let mut view = (**m.view.as_ref().expect("a view")).clone();
    edit(&mut view);
    m.view = Some(Arc::new(view));
    m
}

#[test]
fn an_ordinal_running_in_two_members_is_named_with_both_in_a_condition() {
    let f = fsts(&[("east", 1), ("west", 1)]);
    // West runs redis-1 too (ungated): someone's own pod, or a member's stale slice.
    let west = reporting(settled(&f, 3, 3, 7), |v| {
        let mut p = Arc::make_mut(&mut v.federation).pods[&3].clone();
        p.uid = "stray-1".into();
        Arc::make_mut(&mut v.federation).pods.insert(1, p);
    });
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), west)]);
    let d = decide_now(&f, &members, 7);
    assert_eq!(d.conflicts, [Conflict { ordinal: 1, members: vec!["east".into(), "west".into()] }]);
    let c = d.status.conditions.iter().find(|c| c.type_ == types::IDENTITY_CONFLICT).expect("the condition");
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "RunningTwice"));
    assert_eq!(c.message, "redis-1 runs in east and west");
    // Settled members: the condition is False.
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
    let d = decide_now(&f, &members, 7);
    let c = d.status.conditions.iter().find(|c| c.type_ == types::IDENTITY_CONFLICT).expect("the condition");
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "NoConflict"));
}

#[test]
fn pods_outside_spanset_s_guards_are_counted_and_named() {
    let f = fsts(&[("east", 1), ("west", 1)]);
    // West runs a bare redis-1 (nobody's StatefulSet made it); east's redis-4 lost its label.
    let west = reporting(settled(&f, 3, 3, 7), |v| {
        let fed = Arc::make_mut(&mut v.federation);
        let mut p = fed.pods[&3].clone();
        p.uid = "bare-1".into();
        p.owner = None;
        fed.pods.insert(1, p);
        fed.pods.get_mut(&4).unwrap().labelled = false;
    });
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), west)]);
    let d = decide_now(&f, &members, 7);
    assert_eq!(d.conflicts, [Conflict { ordinal: 1, members: vec!["east".into(), "west".into()] }]);
    let c = d.status.conditions.iter().find(|c| c.type_ == types::IDENTITY_CONFLICT).expect("the condition");
    assert_eq!(c.message, "redis-1 runs in east and west (in west: not made by a StatefulSet)");
    let c = d.status.conditions.iter().find(|c| c.type_ == types::DEGRADED).expect("Degraded");
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "StrayPods"));
    assert!(
        c.message.contains("redis-1 in west (not made by a StatefulSet)")
            && c.message.contains("redis-4 in west (its spanset.dev/federation label was removed)"),
        "{}",
        c.message
    );
}

#[test]
fn a_duplicate_member_gets_no_slice_is_not_observed_and_is_named_in_degraded() {
    let f = fsts(&[("east", 1), ("east-2", 1), ("west", 1)]);
    let why = r#"reaches the same cluster as MemberCluster "east" (clusterID u1)"#;
    // east-2 reaches east's cluster: what it would report is east's StatefulSet and pods.
    let members = BTreeMap::from([
        ("east".into(), settled(&f, 0, 3, 7)),
        ("east-2".into(), MemberInput { duplicate: Some(why.into()), ..settled(&f, 0, 3, 7) }),
        ("west".into(), settled(&f, 3, 3, 7)),
    ]);
    let d = decide_now(&f, &members, 7);
    assert!(!d.blocked);
    assert!(d.writes.iter().all(|w| w.cluster != "east-2"), "{:?}", written_slices(&d));
    assert!(!d.writable.contains(&"east-2".to_string()) && !d.supporting.contains(&"east-2".to_string()));
    assert!(d.conflicts.is_empty(), "its pods are east's, not a second copy: {:?}", d.conflicts);
    assert!(d.status.slices.iter().all(|s| s.cluster != "east-2"));
    assert!(d.done, "settled on east and west");
    let degraded = d.status.conditions.iter().find(|c| c.type_ == types::DEGRADED).expect("Degraded");
    assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("True", "MembersExcluded"));
    assert!(degraded.message.contains(&format!("east-2 (DuplicateCluster: {why})")), "{}", degraded.message);
    // Placed on duplicates only: blocked, naming them.
    let only = fsts(&[("east-2", 1)]);
    let d = decide_now(&only, &members, 7);
    assert!(d.blocked && d.writes.is_empty());
    let blocked = d.status.conditions.iter().find(|c| c.type_ == types::BLOCKED).expect("Blocked");
    assert_eq!(blocked.reason, "DuplicateCluster");
    assert!(blocked.message.contains("east-2 (DuplicateCluster"), "{}", blocked.message);
}

#[test]
fn an_advanced_federation_gives_no_slice_to_a_member_without_openkruise_and_says_so() {
    let mut f = fsts(&[("east", 1), ("west", 1)]);
    f.spec.backend = spanset_api::Backend::AdvancedStatefulSet;
    let east = reporting(settled(&f, 0, 2, 7), |v| v.serves_advanced = Some(true));
    let west = reporting(settled(&f, 0, 0, 7), |v| {
        v.serves_advanced = Some(false);
        v.federation = Default::default();
    });
    let members = BTreeMap::from([("east".into(), east), ("west".into(), west)]);
    let d = decide_now(&f, &members, 7);
    assert!(d.writes.iter().all(|w| w.cluster == "east"), "nothing is written in west: {:?}", written_slices(&d));
    assert!(!d.writable.contains(&"west".to_string()));
    let degraded = d.status.conditions.iter().find(|c| c.type_ == types::DEGRADED).expect("Degraded");
    assert_eq!(degraded.status, "True");
    assert!(
        degraded.message.contains("west (Incompatible: spec.backend is AdvancedStatefulSet and the member does not serve statefulsets.apps.kruise.io/v1beta1"),
        "{}",
        degraded.message
    );
    // The same member runs apps/v1 federations.
    let mut plain = fsts(&[("east", 1), ("west", 1)]);
    plain.spec.replicas = 2;
    let members = BTreeMap::from([
        ("east".into(), settled(&plain, 0, 1, 7)),
        ("west".into(), reporting(settled(&plain, 1, 1, 7), |v| v.serves_advanced = Some(false))),
    ]);
    let d = decide_now(&plain, &members, 7);
    assert!(d.writable.contains(&"west".to_string()));
    assert!(d.done, "an apps/v1 federation is settled there");
}

#[test]
fn a_statefulset_of_the_other_api_blocks_every_write() {
    let plain = fsts(&[("east", 1), ("west", 1)]);
    let members =
        BTreeMap::from([("east".into(), settled(&plain, 0, 1, 7)), ("west".into(), settled(&plain, 1, 1, 7))]);
    let mut f = plain.clone();
    f.spec.backend = spanset_api::Backend::AdvancedStatefulSet;
    f.spec.replicas = 4;
    let d = decide_now(&f, &members, 7);
    assert!(d.blocked && d.writes.is_empty());
    let blocked = d.status.conditions.iter().find(|c| c.type_ == types::BLOCKED).expect("Blocked");
    assert_eq!(blocked.reason, "BackendMismatch");
    assert!(blocked.message.starts_with("spec.backend: AdvancedStatefulSet, but"), "{}", blocked.message);
    assert!(blocked.message.contains("east (apps/v1 StatefulSet), west (apps/v1 StatefulSet)"), "{}", blocked.message);
}

#[test]
fn a_new_term_stamps_every_member_with_its_stored_slice_before_any_step() {
    let f = fsts(&[("east", 1), ("west", 0)]);
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
    let d = decide_now(&f, &members, 8);
    assert_eq!(
        written_slices(&d),
        vec![("east".to_string(), Some(0), Some(3)), ("west".to_string(), Some(3), Some(3))]
    );
    assert!(d.writes.iter().all(|w| w.expected_rv == Some(10)), "conditional on the version read");
    assert!(d.status.moves.is_empty(), "nothing moves before the stamps land");
}

#[test]
fn a_shrink_records_its_move_first_and_a_release_is_stored_before_the_grow() {
    let mut f = fsts(&[("east", 1), ("west", 0)]);
    let mut members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
    let d = decide_now(&f, &members, 7);
    assert_eq!(written_slices(&d), vec![("west".to_string(), Some(4), Some(2))], "west gives up its bottom");
    assert!(d.persist_first);
    assert_eq!(d.status.moves.len(), 1);
    assert_eq!((d.status.moves[0].ordinal, d.status.moves[0].phase.as_str()), (3, phases::DRAINING));
    f.status = Some(d.status);
    // West shrank and its pod 3 is gone, confirmed by a list after the write.
    members.insert("west".into(), settled(&f, 4, 2, 7));
    let d = decide_now(&f, &members, 7);
    assert_eq!(d.status.moves[0].phase, phases::RELEASED);
    assert!(d.persist_first && d.writes.iter().all(|w| w.cluster != "east"), "east grows only next round");
    f.status = Some(d.status);
    let d = decide_now(&f, &members, 7);
    assert_eq!(d.status.moves[0].phase, phases::STARTING);
    assert!(written_slices(&d).contains(&("east".to_string(), Some(0), Some(4))));
}

/// `m` whose spanset EndpointSlices name ordinal `k` (another member's pod of it), or not.
fn naming(m: MemberInput, k: Option<u32>) -> MemberInput {
    use crate::member::endpoints::{EndpointRecord, SliceRecord};
    reporting(m, |v| {
        v.slices_known = true;
        Arc::make_mut(&mut v.federation).published.clear();
        if let Some(k) = k {
            let record = SliceRecord {
                uid: "s1".into(),
                rv: 3,
                endpoints: BTreeMap::from([(
                    format!("redis-{k}"),
                    EndpointRecord { ip: "10.101.0.9".into(), ready: true, serving: true, terminating: false },
                )]),
                ports: String::new(),
                service: "redis".into(),
                deleting: false,
            };
            Arc::make_mut(&mut v.federation).published.insert("redis-spanset-0".into(), record);
        }
    })
}

#[test]
fn a_gated_pod_waits_while_its_member_s_records_name_its_ordinal() {
    let f = fsts(&[("east", 1), ("west", 1)]);
    let west = settled(&f, 3, 3, 7);
    let east = |named| naming(gated_pod(settled(&f, 0, 3, 7), 2, &[]), named);
    let members = BTreeMap::from([("east".into(), east(Some(2))), ("west".into(), west.clone())]);
    assert!(decide_now(&f, &members, 7).releases.is_empty(), "east's records still give redis-2 another address");
    let members = BTreeMap::from([("east".into(), east(Some(4))), ("west".into(), west.clone())]);
    assert_eq!(
        released(&decide_now(&f, &members, 7)),
        vec![("east".to_string(), 2)],
        "another ordinal named: no matter"
    );
    let mut unknown = east(None);
    Arc::make_mut(unknown.view.as_mut().unwrap()).slices_known = false;
    let members = BTreeMap::from([("east".into(), unknown), ("west".into(), west)]);
    assert!(decide_now(&f, &members, 7).releases.is_empty(), "east's records not listed yet");
}

#[test]
fn without_identity_gates_a_grow_waits_while_the_destination_s_records_name_the_ordinal() {
    let mut f = fsts(&[("east", 1), ("west", 0)]);
    f.spec.identity_gate = Some(spanset_api::IdentityGate::Disabled);
    f.status = Some(FederatedStatefulSetStatus {
        moves: moving(&[3], "west", "east", phases::RELEASED),
        ..status_holding("west", 4, 2)
    });
    let west = settled(&f, 4, 2, 7);
    let members =
        BTreeMap::from([("east".into(), naming(settled(&f, 0, 3, 7), Some(3))), ("west".into(), west.clone())]);
    let d = decide_now(&f, &members, 7);
    assert!(
        d.writes.iter().all(|w| w.cluster != "east"),
        "east grew over its own record of redis-3: {:?}",
        written_slices(&d)
    );
    let members = BTreeMap::from([("east".into(), naming(settled(&f, 0, 3, 7), None)), ("west".into(), west)]);
    let d = decide_now(&f, &members, 7);
    assert!(written_slices(&d).contains(&("east".to_string(), Some(0), Some(4))), "{:?}", written_slices(&d));
}

#[test]
fn the_release_and_the_grow_it_allows_are_reported_for_the_handoff_timing() {
    let mut f = fsts(&[("east", 1), ("west", 0)]);
    let mut members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
    let d = decide_now(&f, &members, 7);
    assert!(d.released.is_empty() && d.grows.is_empty(), "draining is neither");
    f.status = Some(d.status);
    members.insert("west".into(), settled(&f, 4, 2, 7));
    let d = decide_now(&f, &members, 7);
    assert_eq!((d.released.as_slice(), d.grows.as_slice()), (&[3][..], &[][..]), "released, not yet grown");
    f.status = Some(d.status);
    let d = decide_now(&f, &members, 7);
    assert_eq!((d.released.as_slice(), d.grows.as_slice()), (&[][..], &[3][..]), "the grow of the next round");
    // A grow written again (its first write failed) is reported again; the coordinator
    // times only the first one that lands.
    f.status = Some(d.status);
    let d = decide_now(&f, &members, 7);
    assert_eq!(d.grows, vec![3]);
    assert!(d.released.is_empty());
}

#[test]
fn an_unknown_member_blocks_everything_with_the_field_named() {
    let f = fsts(&[("east", 1), ("nowhere", 1)]);
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 0, 7))]);
    let d = decide_now(&f, &members, 7);
    assert!(d.blocked && d.writes.is_empty());
    let blocked = d.status.conditions.iter().find(|c| c.type_ == types::BLOCKED).unwrap();
    assert_eq!((blocked.status.as_str(), blocked.reason.as_str()), ("True", "UnknownCluster"));
    assert!(blocked.message.starts_with("spec.placement.clusters[1].name"));
}

#[test]
fn a_silent_member_is_reported_unreachable_and_holds_its_own_ordinals_only() {
    let f = fsts(&[("east", 1), ("west", 1)]);
    let silent = |start, replicas| {
        let mut west = settled(&f, start, replicas, 7);
        let mut view = (**west.view.as_ref().unwrap()).clone();
        view.last_contact = Some(Instant::now() - Duration::from_secs(31));
        view.failure = Some((crate::member::health::Failure::Refused, "connection refused".into()));
        west.view = Some(Arc::new(view));
        west
    };
    // West holds 3-5: nothing of it may start in east while west cannot confirm.
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), silent(3, 3))]);
    let d = decide_now(&f, &members, 7);
    let c = d.status.conditions.iter().find(|c| c.type_ == types::CLUSTER_UNREACHABLE).unwrap();
    assert_eq!((c.status.as_str(), c.message.as_str()), ("True", "not answering: west (Refused)"));
    assert!(d.writes.is_empty(), "no grow of what west may run: {:?}", written_slices(&d));
    assert_eq!(d.writable, vec!["east".to_string()], "nothing is sent to west");
    // West was last seen holding nothing: east takes the whole range meanwhile.
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), silent(3, 0))]);
    let d = decide_now(&f, &members, 7);
    assert_eq!(written_slices(&d), vec![("east".to_string(), Some(0), Some(6))]);
}
/// `m` with pod `k` (created if missing) waiting for spanset's release: gated, Pending.
fn gated_pod(m: MemberInput, k: u32, other_gates: &[&str]) -> MemberInput {
    reporting(m, |v| {
        let mut gates = vec![IDENTITY_GATE.to_string()];
        gates.extend(other_gates.iter().map(|g| g.to_string()));
        let owner = v.federation.sts.as_ref().map(|s| s.uid.clone());
        Arc::make_mut(&mut v.federation).pods.insert(
            k,
            PodRecord {
                uid: format!("gated-{k}"),
                node: None,
                phase: PodPhase::Pending,
                ready: false,
                deleting: false,
                rv: 12,
                gates,
                revision: Some("rev-1".into()),
                ready_since: None,
                ready_seen: None,
                trouble: None,
                ip: None,
                owner,
                labelled: true,
                guard: None,
            },
        );
    })
}

fn released(d: &Decision) -> Vec<(String, u32)> {
    d.releases.iter().map(|r| (r.cluster.clone(), r.ordinal)).collect()
}

#[test]
fn a_gated_pod_is_released_once_no_other_member_holds_or_runs_its_ordinal() {
    let f = fsts(&[("east", 1), ("west", 1)]);
    let east = gated_pod(settled(&f, 0, 3, 7), 2, &["example.com/users-own"]);
    let members = BTreeMap::from([("east".into(), east), ("west".into(), settled(&f, 3, 3, 7))]);
    let d = decide_now(&f, &members, 7);
    assert_eq!(
        d.releases,
        vec![PodRelease {
            cluster: "east".into(),
            ordinal: 2,
            uid: "gated-2".into(),
            rv: 12,
            remaining: vec!["example.com/users-own".into()],
        }],
        "released on the uid and version it was judged at; the user's own gate stays"
    );
    assert!(d.conflicts.is_empty());
    // Written in an older term (a new leader that has not stamped yet): not released.
    assert!(decide_now(&f, &members, 8).releases.is_empty());
    // Fenced, or being deleted: never.
    let mut fenced = members.clone();
    fenced.get_mut("east").unwrap().fenced = true;
    assert!(decide_now(&f, &fenced, 7).releases.is_empty());
    let deleting = reporting(members["east"].clone(), |v| {
        Arc::make_mut(&mut v.federation).pods.get_mut(&2).unwrap().deleting = true;
    });
    let members_deleting = BTreeMap::from([("east".into(), deleting), ("west".into(), settled(&f, 3, 3, 7))]);
    assert!(decide_now(&f, &members_deleting, 7).releases.is_empty());
    // Not made by east's StatefulSet (a copied manifest that carried the gate): never.
    let bare = reporting(members["east"].clone(), |v| {
        Arc::make_mut(&mut v.federation).pods.get_mut(&2).unwrap().owner = None;
    });
    let members_bare = BTreeMap::from([("east".into(), bare), ("west".into(), settled(&f, 3, 3, 7))]);
    assert!(decide_now(&f, &members_bare, 7).releases.is_empty());
    // Beyond the federation's range (a drift stamped as spanset's own): waits for the shrink.
    assert_eq!(f.spec.replicas, 6);
    let beyond = gated_pod(
        reporting(settled(&f, 3, 3, 7), |v| Arc::make_mut(&mut v.federation).sts.as_mut().unwrap().slice.replicas = 4),
        6,
        &[],
    );
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), beyond)]);
    assert!(decide_now(&f, &members, 7).releases.is_empty());
}

/// The partition written to each member, by member.
fn partitions(d: &Decision) -> Vec<(String, Option<i64>)> {
    d.writes
        .iter()
        .map(|w| (w.cluster.clone(), w.object.data["spec"]["updateStrategy"]["rollingUpdate"]["partition"].as_i64()))
        .collect()
}

/// East, west and central, each settled on two of six ordinals in term 7.
fn two_each(f: &FederatedStatefulSet) -> BTreeMap<String, MemberInput> {
    BTreeMap::from([
        ("east".into(), settled(f, 0, 2, 7)),
        ("west".into(), settled(f, 2, 2, 7)),
        ("central".into(), settled(f, 4, 2, 7)),
    ])
}

#[test]
fn a_new_template_lets_only_the_highest_ordinal_through_and_the_cursor_is_stored_first() {
    let mut f = fsts(&[("east", 1), ("west", 1), ("central", 1)]);
    let members = two_each(&f);
    // Settled: every pod runs the current template, the cursor rests at the partition.
    let d = decide_now(&f, &members, 7);
    assert!(d.writes.is_empty(), "{:?}", partitions(&d));
    assert_eq!(d.status.update_partition, Some(0));
    f.status = Some(d.status);
    // A new image: every member gets it, partitioned so that only redis-5 (central's index
    // 1) may be replaced: every pod is available, so the cursor comes down by one at once.
    f.spec.template.template.spec.as_mut().unwrap().containers[0].image = Some("redis:8".into());
    let d = decide_now(&f, &members, 7);
    assert_eq!(
        partitions(&d),
        [("central".to_string(), Some(1)), ("east".to_string(), Some(2)), ("west".to_string(), Some(2))]
    );
    assert!(d.writes.iter().all(|w| w.new_template));
    assert_eq!(d.status.update_partition, Some(5));
    assert!(d.persist_first, "the cursor is stored before the members are written with it");
    assert_ne!(d.status.update_revision, f.status.as_ref().unwrap().update_revision);
}

#[test]
fn a_change_beyond_the_step_is_planned_at_the_accepted_replicas_and_a_new_one_is_stored_first() {
    let mut f = fsts(&[("east", 1), ("west", 1), ("central", 1)]);
    let members = two_each(&f);
    let d = decide_now(&f, &members, 7);
    assert_eq!(d.status.accepted_replicas, Some(6));
    assert!(d.persist_first, "the replicas accepted are stored before any write for them");
    f.status = Some(d.status);
    f.spec.replicas = 600;
    let d = decide_now(&f, &members, 7);
    assert!(d.writes.is_empty(), "nothing is written for a held change: {:?}", written_slices(&d));
    assert_eq!(d.status.accepted_replicas, Some(6));
    assert_eq!(d.status.ready.as_deref(), Some("6/6"));
    let held = d.status.conditions.iter().find(|c| c.type_ == "ReplicasHeld").unwrap();
    assert_eq!((held.status.as_str(), held.reason.as_str()), ("True", "StepTooLarge"));
    assert_eq!(d.notes.iter().filter(|n| n.reason == "StepTooLarge").count(), 1);
    // Approved: planned, and the new figure is stored before the members are written.
    f.metadata.annotations = Some([(crate::decisions::bounds::APPROVE_REPLICAS.to_string(), "600".into())].into());
    let d = decide_now(&f, &members, 7);
    assert_eq!(d.status.accepted_replicas, Some(600));
    assert!(d.persist_first);
    assert!(!d.writes.is_empty());
}

#[test]
fn a_hand_scaled_member_gets_no_release_and_its_extra_pod_holds_the_others_back() {
    // Nine replicas 3/3/3; someone scales west to 5: its own StatefulSet controller makes
    // pods 6 and 7, gated, while central runs 6-8.
    let mut f = fsts(&[("east", 1), ("west", 1), ("central", 1)]);
    f.spec.replicas = 9;
    let west = reporting(gated_pod(gated_pod(settled(&f, 3, 3, 7), 6, &[]), 7, &[]), |v| {
        let sts = Arc::make_mut(&mut v.federation).sts.as_mut().unwrap();
        sts.slice.replicas = 5;
        sts.generation = 3;
    });
    let members = BTreeMap::from([
        ("east".into(), settled(&f, 0, 3, 7)),
        ("west".into(), west),
        ("central".into(), settled(&f, 6, 3, 7)),
    ]);
    let d = decide_now(&f, &members, 7);
    assert!(d.releases.is_empty(), "{:?}", released(&d));
    assert!(d.conflicts.is_empty(), "gated pods run nowhere: {:?}", d.conflicts);
    // The stamp writes what west stores, as spanset's own (the next plan shrinks it): pods 6
    // and 7 are still held back, by central's spec and pods.
    assert_eq!(written_slices(&d), vec![("west".to_string(), Some(3), Some(5))]);
    let stamped = reporting(members["west"].clone(), |v| {
        Arc::make_mut(&mut v.federation).written_generation = Some(("sts-3".into(), 3))
    });
    let mut after = members.clone();
    after.insert("west".into(), stamped);
    assert!(decide_now(&f, &after, 7).releases.is_empty());
    // Central's own pod 6 recreated meanwhile (gated) waits while west still has a pod 6.
    let members = BTreeMap::from([
        ("east".into(), settled(&f, 0, 3, 7)),
        ("west".into(), members["west"].clone()),
        ("central".into(), gated_pod(settled(&f, 6, 3, 7), 6, &[])),
    ]);
    assert_eq!(released(&decide_now(&f, &members, 7)), vec![]);
}

#[test]
fn a_member_not_confirmed_since_its_last_write_blocks_every_release() {
    let f = fsts(&[("east", 1), ("west", 1)]);
    let unconfirmed = reporting(settled(&f, 3, 3, 7), |v| Arc::make_mut(&mut v.federation).confirmed_for = None);
    let members =
        BTreeMap::from([("east".into(), gated_pod(settled(&f, 0, 3, 7), 1, &[])), ("west".into(), unconfirmed)]);
    assert!(decide_now(&f, &members, 7).releases.is_empty());
    // Fenced but answering, west still counts; fenced and silent, its spec and pods no
    // longer do: east's pod goes.
    let mut fenced = members.clone();
    fenced.get_mut("west").unwrap().fenced = true;
    assert!(decide_now(&f, &fenced, 7).releases.is_empty());
    let silent = reporting(fenced["west"].clone(), |v| v.last_contact = Some(Instant::now() - Duration::from_secs(60)));
    fenced.insert("west".into(), silent);
    assert_eq!(released(&decide_now(&f, &fenced, 7)), vec![("east".to_string(), 1)]);
}

#[test]
fn a_federation_with_a_silent_member_holding_a_slice_is_not_ready() {
    // Central hangs with its slice (and whatever template it runs); everything else is as
    // targeted. The status must not say Ready, nor count its pods.
    let f = fsts(&[("east", 1), ("central", 1)]);
    let mut central = settled(&f, 3, 3, 7);
    let mut view = (**central.view.as_ref().unwrap()).clone();
    view.last_contact = Some(Instant::now() - Duration::from_secs(31));
    central.view = Some(Arc::new(view));
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("central".into(), central)]);
    let d = decide_now(&f, &members, 7);
    assert!(!d.done);
    let ready = d.status.conditions.iter().find(|c| c.type_ == types::READY).unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "MembersUnreachable"));
    assert!(ready.message.starts_with("central cannot be reached"), "{}", ready.message);
    assert_eq!(d.status.ready.as_deref(), Some("3/6"), "central's pods are not counted");
}

#[test]
fn a_silent_member_not_yet_stamped_by_this_leader_holds_every_grow() {
    // West was last seen holding nothing, but in term 6; the leader of term 6 may have sent it
    // a grow that has not landed yet. Term 7 cannot stamp west, so nothing it saw there
    // confirms anything.
    let f = fsts(&[("east", 1), ("west", 1)]);
    let mut west = settled(&f, 3, 0, 6);
    let mut view = (**west.view.as_ref().unwrap()).clone();
    view.last_contact = Some(Instant::now() - Duration::from_secs(31));
    west.view = Some(Arc::new(view));
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), west.clone())]);
    let d = decide_now(&f, &members, 7);
    assert!(d.writes.is_empty(), "no grow while west may still take an earlier term's write: {:?}", written_slices(&d));
    let p = d.status.conditions.iter().find(|c| c.type_ == types::PROGRESSING).unwrap();
    assert_eq!(p.reason, "MembersUnconfirmed");
    assert!(p.message.starts_with("west cannot be reached and does not carry term 7"), "{}", p.message);
    // Fenced, west's workloads are dead by the operator's word: east takes everything.
    west.fenced = true;
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), west)]);
    let d = decide_now(&f, &members, 7);
    assert_eq!(written_slices(&d), vec![("east".to_string(), Some(0), Some(6))]);
}

// === storage of recorded moves: volumes handed over, left claims, unreachable sources ===

/// `m` with claims `data-redis-k` for `ordinals`, bound to `vol-<prefix>-k`.
fn with_claims(m: MemberInput, ordinals: &[u32], prefix: &str) -> MemberInput {
    reporting(m, |v| {
        for &k in ordinals {
            let claim = crate::member::cache::ClaimRecord {
                name: format!("data-redis-{k}"),
                uid: format!("{prefix}-{k}"),
                phase: "Bound".into(),
                volume: Some(format!("vol-{prefix}-{k}")),
                deleting: false,
                rv: 3,
            };
            v.claims.insert(k, vec![claim]);
        }
    })
}

/// `m`, silent for longer than the grace: unreachable, its last observation kept.
fn unreachable(m: MemberInput) -> MemberInput {
    reporting(m, |v| {
        v.last_contact = Some(Instant::now() - Duration::from_secs(31));
        v.failure = Some((crate::member::health::Failure::Refused, "connection refused".into()));
    })
}

fn moving(ordinals: &[i32], from: &str, to: &str, phase: &str) -> Vec<MoveStatus> {
    let at = "2027-01-15T08:00:00Z".to_string();
    ordinals
        .iter()
        .map(|&k| MoveStatus {
            ordinal: k,
            from: from.into(),
            to: to.into(),
            phase: phase.into(),
            since: at.clone(),
            stale_claims: Some(Vec::new()),
        })
        .collect()
}

/// Four replicas over a (weight 0), b and c, `storage` set; 0-1 recorded moving a → b.
fn four_over_abc(storage: StorageMode, phase: &str) -> FederatedStatefulSet {
    let mut f = fsts(&[("a", 0), ("b", 1), ("c", 1)]);
    f.spec.replicas = 4;
    f.spec.migration.storage = Some(storage);
    f.status = Some(FederatedStatefulSetStatus { moves: moving(&[0, 1], "a", "b", phase), ..Default::default() });
    f
}

fn phases_of(d: &Decision) -> Vec<&str> {
    d.status.moves.iter().map(|m| m.phase.as_str()).collect()
}

fn grows_b(d: &Decision) -> bool {
    written_slices(d).iter().any(|(c, _, r)| c == "b" && r.unwrap_or(0) > 0)
}

#[test]
fn a_moved_ordinal_is_handed_its_volumes_while_an_unrelated_member_is_unreachable() {
    // Member c (unreachable, observed since its last write) takes no part in the move of 0-1
    // from a to b. The planner lets b grow past c; the move went straight from Draining to
    // Starting and b's pods started on empty claims.
    let mut f = four_over_abc(StorageMode::Move, phases::DRAINING);
    let a = with_claims(settled(&f, 0, 0, 7), &[0, 1], "a");
    let c = unreachable(settled(&f, 2, 2, 7));
    let mut members = BTreeMap::from([("a".into(), a), ("b".into(), settled(&f, 0, 0, 7)), ("c".into(), c)]);
    let d = decide_now(&f, &members, 7);
    assert!(!grows_b(&d), "no grow before the volumes: {:?}", written_slices(&d));
    assert_eq!(phases_of(&d), [phases::RELEASED, phases::RELEASED], "released on the planner's rule");
    f.status = Some(d.status);
    let d = decide_now(&f, &members, 7);
    assert!(!grows_b(&d), "{:?}", written_slices(&d));
    assert_eq!(phases_of(&d), [phases::HANDOVER, phases::HANDOVER]);
    let handed: Vec<(u32, &str, &str, HandoverKind)> =
        d.handovers.iter().map(|h| (h.ordinal, h.from.as_str(), h.to.as_str(), h.kind)).collect();
    assert_eq!(handed, [(0, "a", "b", HandoverKind::Move), (1, "a", "b", HandoverKind::Move)]);
    // The volumes arrived in b: b grows.
    f.status = Some(d.status);
    let b = members.remove("b").unwrap();
    members.insert("b".into(), with_claims(b, &[0, 1], "a"));
    let d = decide_now(&f, &members, 7);
    assert!(d.handovers.is_empty());
    assert!(written_slices(&d).contains(&("b".to_string(), Some(0), Some(2))), "{:?}", written_slices(&d));
}

#[test]
fn a_handover_from_an_unreachable_source_holds_only_its_ordinals_and_says_why() {
    // The source a stopped answering after the release. Nothing is sent to it (it would fail
    // every round), 0-1 wait, and c still grows into ordinal 4.
    let mut f = four_over_abc(StorageMode::Move, phases::RELEASED);
    f.spec.replicas = 5;
    f.spec.placement.clusters[1].max_replicas = Some(2);
    // Parallel: under OrderedReady ordinal 4 would rightly wait for 0 and 1 to be Ready.
    f.spec.template.pod_management_policy = Some("Parallel".into());
    let a = unreachable(with_claims(settled(&f, 0, 0, 7), &[0, 1], "a"));
    let members =
        BTreeMap::from([("a".into(), a), ("b".into(), settled(&f, 0, 0, 7)), ("c".into(), settled(&f, 2, 2, 7))]);
    let d = decide_now(&f, &members, 7);
    assert!(d.handovers.is_empty(), "nothing is asked of a: {:?}", d.handovers);
    assert!(!grows_b(&d), "{:?}", written_slices(&d));
    assert!(written_slices(&d).contains(&("c".to_string(), Some(2), Some(3))), "{:?}", written_slices(&d));
    let p = d.status.conditions.iter().find(|c| c.type_ == types::PROGRESSING).unwrap();
    assert_eq!(p.reason, "HandoverWaiting");
    assert!(p.message.contains("ordinal 0: a is unreachable (data-redis-0 wait there)"), "{}", p.message);
}

#[test]
fn a_fenced_source_keeps_its_volumes_by_the_rules_of_failover_and_a_condition_says_so() {
    // The source a is fenced: its workloads are declared dead and nothing is sent to it; 0-1
    // start in b on fresh claims, as a failover's re-homed ordinals do.
    let mut f = four_over_abc(StorageMode::Move, phases::RELEASED);
    let mut a = unreachable(with_claims(settled(&f, 0, 0, 7), &[0, 1], "a"));
    a.fenced = true;
    let members =
        BTreeMap::from([("a".into(), a), ("b".into(), settled(&f, 0, 0, 7)), ("c".into(), settled(&f, 2, 2, 7))]);
    let d = decide_now(&f, &members, 7);
    assert!(d.handovers.is_empty(), "{:?}", d.handovers);
    assert!(written_slices(&d).contains(&("b".to_string(), Some(0), Some(2))), "{:?}", written_slices(&d));
    let degraded = d.status.conditions.iter().find(|c| c.type_ == types::DEGRADED).unwrap();
    assert_eq!(degraded.status, "True");
    assert!(
        degraded.message.contains("ordinal 0: data-redis-0 left in fenced a (failover: it starts on fresh claims)"),
        "{}",
        degraded.message
    );
    assert!(d.notes.iter().any(|n| n.reason == "VolumesLeftBehind"), "{:?}", d.notes);
    // The condition stays while the move is recorded; the Event is not repeated.
    f.status = Some(d.status);
    let d = decide_now(&f, &members, 7);
    assert!(d.status.conditions.iter().any(|c| c.reason == "VolumesLeftBehind" || c.message.contains("left in")));
    assert!(!d.notes.iter().any(|n| n.reason == "VolumesLeftBehind"));
}

#[test]
fn a_detached_ordinal_keeps_the_claims_it_leaves_until_it_is_ready_elsewhere() {
    // Until the ordinal is Ready in its destination, a's claims are its way back (a move
    // rolled back runs on them again); once it is, a claim left in a would be bound again,
    // with older data, if it came back: it is retired then.
    let mut f = four_over_abc(StorageMode::Detached, phases::RELEASED);
    f.status.as_mut().unwrap().homes = homes(&[("a", "0-1"), ("c", "2-3")]);
    let a = with_claims(settled(&f, 0, 0, 7), &[0, 1], "a");
    let mut members =
        BTreeMap::from([("a".into(), a), ("b".into(), settled(&f, 0, 0, 7)), ("c".into(), settled(&f, 2, 2, 7))]);
    let d = decide_now(&f, &members, 7);
    assert!(d.handovers.is_empty(), "nothing retired before the ordinal runs elsewhere: {:?}", d.handovers);
    assert!(written_slices(&d).contains(&("b".to_string(), Some(0), Some(2))), "{:?}", written_slices(&d));
    // b runs 0-1, Ready: their home is b, the moves end, and a's claims are retired.
    f.status = Some(d.status);
    members.insert("b".into(), settled(&f, 0, 2, 7));
    let d = decide_now(&f, &members, 7);
    assert!(d.status.moves.is_empty(), "{:?}", d.status.moves);
    assert_eq!(d.status.homes, homes(&[("b", "0-1"), ("c", "2-3")]));
    let retire = HandoverKind::Retire { keep_volume: true, arrival: false };
    /// A retirement as decided: ordinal, where, for whom, how, and each claim's uid and version.
    type Retirement<'a> = (u32, &'a str, &'a str, HandoverKind, Vec<(String, u64)>);
    let steps: Vec<Retirement<'_>> = d
        .handovers
        .iter()
        .map(|h| {
            let claims = h.claims.iter().map(|c| (c.uid.clone(), c.rv)).collect();
            (h.ordinal, h.from.as_str(), h.to.as_str(), h.kind, claims)
        })
        .collect();
    assert_eq!(
        steps,
        [(0, "a", "b", retire, vec![("a-0".into(), 3)]), (1, "a", "b", retire, vec![("a-1".into(), 3)])],
        "staleClaims defaults to Release; each claim named as observed (uid, resourceVersion)"
    );
    f.spec.migration.stale_claims = Some(spanset_api::StaleClaims::Delete);
    let d = decide_now(&f, &members, 7);
    assert_eq!(d.handovers[0].kind, HandoverKind::Retire { keep_volume: false, arrival: false });
    // Claims being deleted count as gone.
    let a = reporting(members.remove("a").unwrap(), |v| {
        v.claims.values_mut().flatten().for_each(|c| c.deleting = true);
    });
    members.insert("a".into(), a);
    let d = decide_now(&f, &members, 7);
    assert!(d.handovers.is_empty(), "{:?}", d.handovers);
}

#[test]
fn a_detached_ordinal_arriving_where_an_older_claim_of_it_was_left_retires_that_claim_first() {
    // b kept a claim of ordinal 1 from a run before (a member fenced since, say): the
    // ordinal ran in a since, so that claim must not bind when it arrives.
    let mut f = four_over_abc(StorageMode::Detached, phases::RELEASED);
    f.status.as_mut().unwrap().moves[1].stale_claims = Some(vec!["b-1".into()]);
    let a = settled(&f, 0, 0, 7);
    let b = with_claims(settled(&f, 0, 0, 7), &[1], "b");
    let members = BTreeMap::from([("a".into(), a), ("b".into(), b), ("c".into(), settled(&f, 2, 2, 7))]);
    let d = decide_now(&f, &members, 7);
    assert!(!grows_b(&d), "{:?}", written_slices(&d));
    let steps: Vec<(u32, &str, HandoverKind)> =
        d.handovers.iter().map(|h| (h.ordinal, h.to.as_str(), h.kind)).collect();
    assert_eq!(steps, [(1, "b", HandoverKind::Retire { keep_volume: true, arrival: true })]);
}

#[test]
fn a_claim_the_destination_made_after_the_move_was_recorded_is_never_retired() {
    // The destination's StatefulSet controller makes the arriving ordinal's claim once its
    // slice holds it: that claim is the ordinal's own. Taking it for an older one deleted it,
    // the controller made it again, and so on until the pod happened to bind (hundreds of
    // Released volumes per member in the README's demo).
    let mut f = four_over_abc(StorageMode::Detached, phases::STARTING);
    f.status.as_mut().unwrap().homes = homes(&[("a", "0-1"), ("c", "2-3")]);
    let a = settled(&f, 0, 0, 7);
    // b's slice holds 0-1 and their claims were made since: the pods wait behind the gate.
    let b = with_claims(gated_pod(gated_pod(settled(&f, 0, 2, 7), 0, &[]), 1, &[]), &[0, 1], "b");
    let members = BTreeMap::from([("a".into(), a), ("b".into(), b), ("c".into(), settled(&f, 2, 2, 7))]);
    let d = decide_now(&f, &members, 7);
    assert!(d.handovers.is_empty(), "{:?}", d.handovers);
    assert_eq!(released(&d), [("b".to_string(), 0), ("b".to_string(), 1)]);
    // Recorded before the grow, a claim of b is retired once (before the grow), never after.
    f.status.as_mut().unwrap().moves[0].stale_claims = Some(vec!["b-0".into()]);
    let d = decide_now(&f, &members, 7);
    assert!(d.handovers.is_empty(), "nothing is retired after the grow: {:?}", d.handovers);
}

#[test]
fn a_move_records_what_its_destination_holds_of_the_ordinal_when_it_starts() {
    // b holds a claim of ordinal 2 from an earlier run; a moves 2-3 out (weights 1:1 → 0:1),
    // ordinal 2 first (b can take it next).
    let mut f = fsts(&[("a", 0), ("b", 1)]);
    f.spec.replicas = 4;
    f.spec.migration.storage = Some(StorageMode::Detached);
    let b = with_claims(settled(&f, 0, 2, 7), &[2], "b");
    let members = BTreeMap::from([("a".into(), settled(&f, 2, 2, 7)), ("b".into(), b)]);
    let d = decide_now(&f, &members, 7);
    let recorded: Vec<(i32, Option<Vec<String>>)> =
        d.status.moves.iter().map(|m| (m.ordinal, m.stale_claims.clone())).collect();
    assert_eq!(recorded, [(2, Some(vec!["b-2".to_string()]))], "{:?}", d.status.moves);
}

#[test]
fn an_ordinal_going_back_where_it_came_from_keeps_its_claims() {
    // The spec changed back before the grow: the source's claims are still the newest.
    let mut f = four_over_abc(StorageMode::Detached, phases::RELEASED);
    f.spec.placement.clusters[0].weight = Some(1);
    f.spec.placement.clusters[1].weight = Some(0);
    let a = with_claims(settled(&f, 0, 0, 7), &[0, 1], "a");
    let members =
        BTreeMap::from([("a".into(), a), ("b".into(), settled(&f, 0, 0, 7)), ("c".into(), settled(&f, 2, 2, 7))]);
    let d = decide_now(&f, &members, 7);
    assert!(d.handovers.is_empty(), "{:?}", d.handovers);
    // Its move ends: a move from a cluster to itself is never recorded.
    assert!(d.status.moves.is_empty(), "{:?}", d.status.moves);
    assert!(d.persist_first, "the end of the moves is stored first");
}

#[test]
fn storage_move_with_claims_deleted_on_scale_down_blocks_every_write_naming_both_fields() {
    // A federation stored before the CRD's rule. The source's shrink would garbage-collect the
    // moving ordinal's claim before its handover.
    let mut f = fsts(&[("east", 1), ("west", 0)]);
    f.spec.migration.storage = Some(StorageMode::Move);
    f.spec.template.persistent_volume_claim_retention_policy =
        Some(serde_json::from_value(serde_json::json!({"whenScaled": "Delete"})).unwrap());
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
    let d = decide_now(&f, &members, 7);
    assert!(d.blocked && d.writes.is_empty() && d.handovers.is_empty());
    let blocked = d.status.conditions.iter().find(|c| c.type_ == types::BLOCKED).unwrap();
    assert_eq!(blocked.reason, "InvalidSpec");
    assert!(
        blocked.message.contains(
            "spec.migration.storage: Move cannot be combined with \
             spec.template.persistentVolumeClaimRetentionPolicy.whenScaled: Delete"
        ),
        "{}",
        blocked.message
    );
}

#[test]
fn a_54_character_name_blocks_every_write_naming_the_label_limit() {
    // Stored without the CRD's rule, its member pods would fail the 63-character label limit.
    let mut f = fsts(&[("east", 1), ("west", 0)]);
    f.metadata.name = Some("a".repeat(54));
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
    let d = decide_now(&f, &members, 7);
    assert!(d.blocked && d.writes.is_empty() && d.handovers.is_empty());
    let blocked = d.status.conditions.iter().find(|c| c.type_ == types::BLOCKED).unwrap();
    assert_eq!(blocked.reason, "InvalidSpec");
    assert!(blocked.message.starts_with("metadata.name: 54 characters; at most 52"), "{}", blocked.message);
}

#[test]
fn an_unknown_stored_move_phase_is_handled_as_released_and_kept_until_a_transition_rewrites_it() {
    // The CRD keeps the phase a string: one this controller does not know (a newer
    // controller's, a hand edit) decides what Released decides, and is not rewritten by a
    // round that moves nothing.
    let decide_with = |phase: &str, source_unreachable: bool| {
        let f = four_over_abc(StorageMode::Move, phase);
        let mut a = with_claims(settled(&f, 0, 0, 7), &[0, 1], "a");
        if source_unreachable {
            // Unreachable source: its claims wait there and the move stays as it is.
            a = unreachable(a);
        }
        let members =
            BTreeMap::from([("a".into(), a), ("b".into(), settled(&f, 0, 0, 7)), ("c".into(), settled(&f, 2, 2, 7))]);
        decide_now(&f, &members, 7)
    };
    for waiting in [true, false] {
        let (known, unknown) = (decide_with(phases::RELEASED, waiting), decide_with("Teleporting", waiting));
        assert_eq!(written_slices(&unknown), written_slices(&known));
        assert_eq!(unknown.handovers, known.handovers);
        assert_eq!(unknown.persist_first, known.persist_first);
        let expected: Vec<&str> =
            phases_of(&known).iter().map(|p| if *p == phases::RELEASED { "Teleporting" } else { p }).collect();
        assert_eq!(phases_of(&unknown), expected, "waiting: {waiting}");
    }
    assert_eq!(phases_of(&decide_with("Teleporting", true)), ["Teleporting", "Teleporting"], "kept while held");
    assert_eq!(phases_of(&decide_with("Teleporting", false)), [phases::HANDOVER, phases::HANDOVER], "rewritten");
}

fn homes(entries: &[(&str, &str)]) -> Vec<spanset_api::HomeStatus> {
    entries.iter().map(|(c, o)| spanset_api::HomeStatus { cluster: c.to_string(), ordinals: o.to_string() }).collect()
}

/// b holds ordinals 0-1 (ordinal 1 re-homed there while a, its home, was fenced: gated, on a
/// fresh claim); a is back, unfenced, holds nothing and keeps ordinal 1's claim.
fn re_homed_while_fenced(b_claim: &str) -> (FederatedStatefulSet, BTreeMap<String, MemberInput>) {
    let mut f = fsts(&[("a", 0), ("b", 1)]);
    f.spec.replicas = 2;
    f.spec.migration.storage = Some(StorageMode::Move);
    f.status = Some(FederatedStatefulSetStatus { homes: homes(&[("a", "1"), ("b", "0")]), ..Default::default() });
    let a = with_claims(settled(&f, 0, 0, 7), &[1], "a");
    let b = with_claims(gated_pod(settled(&f, 0, 2, 7), 1, &[]), &[0, 1], "b");
    let b = reporting(b, |v| v.claims.get_mut(&1).unwrap()[0].volume = Some(b_claim.into()));
    (f, BTreeMap::from([("a".into(), a), ("b".into(), b)]))
}

#[test]
fn a_pod_re_homed_while_its_home_was_fenced_waits_for_its_home_s_claims() {
    // Found by the model checker: the pod was released on its fresh claim, and ordinal 1
    // started on an empty volume while its data sat in a.
    let (f, members) = re_homed_while_fenced("vol-b-1");
    let d = decide_now(&f, &members, 7);
    assert!(released(&d).is_empty(), "{:?}", released(&d));
    let fetched: Vec<_> = d.handovers.iter().map(|h| (h.ordinal, h.from.as_str(), h.to.as_str(), h.kind)).collect();
    assert_eq!(fetched, [(1, "a", "b", HandoverKind::Move)]);
    assert_eq!(d.status.homes, homes(&[("a", "1"), ("b", "0")]), "nothing let run yet");
    // Once a's volume is bound in b, the pod runs there; its home is b once it is Ready.
    let (mut f, mut members) = re_homed_while_fenced("vol-a-1");
    let d = decide_now(&f, &members, 7);
    assert_eq!(released(&d), [("b".to_string(), 1)]);
    assert!(d.handovers.is_empty(), "{:?}", d.handovers);
    assert_eq!(d.status.homes, homes(&[("a", "1"), ("b", "0")]), "let run is not run");
    f.status = Some(d.status);
    let b = with_claims(settled(&f, 0, 2, 7), &[0, 1], "b");
    members.insert("b".into(), reporting(b, |v| v.claims.get_mut(&1).unwrap()[0].volume = Some("vol-a-1".into())));
    let d = decide_now(&f, &members, 7);
    assert_eq!(d.status.homes, homes(&[("b", "0-1")]));
    assert!(d.persist_first, "a new home is stored before anything it makes stale is retired");
}

#[test]
fn a_pod_re_homed_while_its_home_is_fenced_runs_on_fresh_claims() {
    let (f, mut members) = re_homed_while_fenced("vol-b-1");
    members.get_mut("a").unwrap().fenced = true;
    let d = decide_now(&f, &members, 7);
    assert_eq!(released(&d), [("b".to_string(), 1)], "failover: its volumes stay behind");
    assert_eq!(d.status.homes, homes(&[("a", "1"), ("b", "0")]), "its home moves once it is Ready");
}

#[test]
fn a_move_to_where_the_ordinal_last_ran_hands_nothing_over() {
    // a's claims for 0-1 were made for a re-homing that never ran (b was fenced): b's are the
    // ordinals' data, and b keeps them.
    let mut f = four_over_abc(StorageMode::Move, phases::RELEASED);
    f.status.as_mut().unwrap().homes = homes(&[("b", "0-1"), ("c", "2-3")]);
    let a = with_claims(settled(&f, 0, 0, 7), &[0, 1], "a");
    let b = with_claims(settled(&f, 0, 0, 7), &[0, 1], "b");
    let members = BTreeMap::from([("a".into(), a), ("b".into(), b), ("c".into(), settled(&f, 2, 2, 7))]);
    let d = decide_now(&f, &members, 7);
    assert!(d.handovers.is_empty(), "{:?}", d.handovers);
    assert!(grows_b(&d), "{:?}", written_slices(&d));
    // Without the record, a's claims are handed over (and b's retired).
    f.status.as_mut().unwrap().homes.clear();
    let d = decide_now(&f, &members, 7);
    assert_eq!(d.handovers.iter().map(|h| (h.ordinal, h.from.as_str())).collect::<Vec<_>>(), [(0, "a"), (1, "a")]);
}

#[test]
fn an_ordinal_seen_running_where_no_home_is_recorded_is_recorded_there() {
    let f = fsts(&[("east", 1), ("west", 1)]);
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 7)), ("west".into(), settled(&f, 3, 3, 7))]);
    let d = decide_now(&f, &members, 7);
    assert_eq!(d.status.homes, homes(&[("east", "0-2"), ("west", "3-5")]));
}

#[test]
fn a_fenced_member_heard_from_since_its_fence_holds_what_it_ran_once_silent_again() {
    // West was fenced, then answered with its pods 3-5 running (its machines came back before
    // the shrink), then fell silent again. Found by the model checker: the fence stood in for
    // it once more and 3-5 grew in east beside them.
    let f = fsts(&[("east", 1), ("west", 0)]);
    let silent_west = |answered| {
        let mut west = unreachable(settled(&f, 3, 3, 8));
        west.fenced = true;
        west.answered_since_fence = answered;
        west
    };
    let grows_east = |d: &Decision| written_slices(d).iter().any(|(c, _, r)| c == "east" && r.unwrap_or(0) > 3);
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), silent_west(true))]);
    let d = decide_now(&f, &members, 8);
    assert!(!grows_east(&d), "{:?}", written_slices(&d));
    // Silent since its fence: the fence stands in, and 3-5 are re-homed.
    let members = BTreeMap::from([("east".into(), settled(&f, 0, 3, 8)), ("west".into(), silent_west(false))]);
    let d = decide_now(&f, &members, 8);
    assert!(grows_east(&d), "{:?}", written_slices(&d));
}

#[test]
fn a_grown_move_is_stuck_only_once_its_pod_cannot_run_not_while_it_starts() {
    // Ordinal 2 grown into east (released from the gate), the placement still 2:1:1.
    let mut f = fsts(&[("east", 2), ("west", 1), ("central", 1)]);
    f.status = Some(FederatedStatefulSetStatus {
        moves: moving(&[2], "west", "east", phases::STARTING),
        homes: homes(&[("central", "4-5"), ("east", "0-1"), ("west", "2-3")]),
        balanced_placement: None,
        ..Default::default()
    });
    let progressing = |trouble: &str| {
        let east = reporting(settled(&f, 0, 3, 7), |v| {
            let pod = Arc::make_mut(&mut v.federation).pods.get_mut(&2).unwrap();
            pod.ready = false;
            pod.phase = PodPhase::Pending;
            pod.trouble = Some(trouble.into());
        });
        let members = BTreeMap::from([
            ("east".into(), east),
            ("west".into(), settled(&f, 3, 1, 7)),
            ("central".into(), settled(&f, 4, 2, 7)),
        ]);
        let d = decide_now(&f, &members, 7);
        d.status.conditions.iter().find(|c| c.type_ == "Progressing").map(|c| c.reason.clone()).unwrap_or_default()
    };
    assert_ne!(progressing("phase Pending, not Ready"), "MoveStuck", "a pod starting is not stuck");
    assert_ne!(progressing("container redis: waiting: ContainerCreating"), "MoveStuck");
    assert_eq!(progressing("container redis: waiting: ImagePullBackOff: Back-off pulling image"), "MoveStuck");
    assert_eq!(progressing("container redis: waiting: CrashLoopBackOff"), "MoveStuck");
}

#[test]
fn a_grown_move_whose_pod_cannot_run_is_rolled_back_when_the_placement_returns() {
    // east 0-2 with ordinal 2 grown there (released from the gate, its image not pullable),
    // west 3, central 4-5; the placement goes back to 1:1:1.
    let mut f = fsts(&[("east", 1), ("west", 1), ("central", 1)]);
    f.status = Some(FederatedStatefulSetStatus {
        moves: moving(&[2], "west", "east", phases::STARTING),
        homes: homes(&[("central", "4-5"), ("east", "0-1"), ("west", "2-3")]),
        // The division for 2:1:1 wrote its first step: 1:1:1 is balanced no more.
        balanced_placement: None,
        ..Default::default()
    });
    let east = reporting(settled(&f, 0, 3, 7), |v| {
        let pod = Arc::make_mut(&mut v.federation).pods.get_mut(&2).unwrap();
        pod.ready = false;
        pod.phase = PodPhase::Pending;
        pod.trouble = Some("container redis: waiting: ImagePullBackOff".into());
    });
    let members = BTreeMap::from([
        ("east".into(), east),
        ("west".into(), settled(&f, 3, 1, 7)),
        ("central".into(), settled(&f, 4, 2, 7)),
    ]);
    let d = decide_now(&f, &members, 7);
    let recorded: Vec<(i32, &str, &str, &str)> =
        d.status.moves.iter().map(|m| (m.ordinal, m.from.as_str(), m.to.as_str(), m.phase.as_str())).collect();
    assert_eq!(recorded, [(2, "east", "west", phases::DRAINING)], "{:?}", d.notes);
    assert!(written_slices(&d).contains(&("east".to_string(), Some(0), Some(2))), "{:?}", written_slices(&d));
    assert!(d.notes.iter().any(|n| n.reason == "MoveCancelled"), "{:?}", d.notes);
    // East gave it up (its pod never ran): west takes it back, on its own claims, though
    // maxConcurrentMoves is 1 and nothing else needed to move.
    f.status = Some(d.status);
    let members = BTreeMap::from([
        ("east".into(), settled(&f, 0, 2, 7)),
        ("west".into(), with_claims(settled(&f, 3, 1, 7), &[2], "west")),
        ("central".into(), settled(&f, 4, 2, 7)),
    ]);
    let d = decide_now(&f, &members, 7);
    let recorded: Vec<(i32, &str)> = d.status.moves.iter().map(|m| (m.ordinal, m.phase.as_str())).collect();
    assert_eq!(recorded, [(2, phases::RELEASED)]);
    f.status = Some(d.status);
    let d = decide_now(&f, &members, 7);
    assert!(d.handovers.is_empty(), "west's claims are the ordinal's own: {:?}", d.handovers);
    assert!(written_slices(&d).contains(&("west".to_string(), Some(2), Some(2))), "{:?}", d.status.conditions);
}

#[test]
fn a_held_access_refusal_blocks_then_its_recheck_writes_while_the_condition_stays() {
    let mut f = fsts(&[("east", 1), ("west", 1)]);
    let fresh = || MemberInput {
        exists: true,
        view: Some(Arc::new(MemberView {
            synced: true,
            slices_known: true,
            last_contact: Some(Instant::now()),
            keeps_ordinals: Some(true),
            ..Default::default()
        })),
        ..Default::default()
    };
    let members = BTreeMap::from([("east".into(), fresh()), ("west".into(), fresh())]);
    let refusal = |blocks: bool| {
        AccessBlock {
        reason: "MemberForbidden",
        message: "member east: lacks a permission (403): namespaces is forbidden: User \"u\" cannot create resource \"namespaces\"".into(),
        blocks,
    }
    };
    let decide_at = |f: &FederatedStatefulSet, a: Option<AccessBlock>, second: i64| {
        decide(&Inputs {
            fsts: f,
            members: &members,
            term: 1,
            template_refusal: None,
            bounds: Default::default(),
            access_refusal: a,
            handover_refusals: BTreeMap::new(),
            rules: Default::default(),
            now: Instant::now(),
            leading_since: Instant::now() - Duration::from_secs(3600),
            wall: jiff::Timestamp::from_second(second).unwrap(),
        })
    };
    let blocked_since = |d: &Decision| {
        let c = d.status.conditions.iter().find(|c| c.type_ == types::BLOCKED && c.status == "True");
        c.map(|c| (c.reason.clone(), c.last_transition_time.clone()))
    };
    let held = decide_at(&f, Some(refusal(true)), 1_800_000_000);
    assert!(held.blocked && held.writes.is_empty() && held.supporting.is_empty());
    let (reason, since) = blocked_since(&held).expect("Blocked");
    assert_eq!(reason, "MemberForbidden");
    f.status = Some(held.status.clone());
    // The recheck plans the writes, and the condition stays, from the same time.
    let recheck = decide_at(&f, Some(refusal(false)), 1_800_000_030);
    assert!(!recheck.blocked && !recheck.supporting.is_empty(), "the recheck writes");
    assert_eq!(
        blocked_since(&recheck),
        Some(("MemberForbidden".to_string(), since)),
        "{:?}",
        recheck.status.conditions
    );
    let ready = recheck.status.conditions.iter().find(|c| c.type_ == types::READY).expect("Ready");
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "MemberForbidden"));
    // Once it is no longer held, the conditions are the plan's own.
    assert_eq!(blocked_since(&decide_at(&f, None, 1_800_000_031)), None);
}
