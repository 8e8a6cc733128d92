//! Unit tests of [`super`]: watch events into the cache.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::{api::DynamicObject, runtime::watcher::Event};
use spanset_api::labels::{FEDERATION, TERM};

use super::*;

fn key() -> FederationKey {
    FederationKey { namespace: "db".into(), name: "redis".into() }
}

fn pod(uid: &str, rv: u64, ready: bool) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "redis-0", "namespace": "db", "uid": uid,
            "resourceVersion": rv.to_string(), "labels": {FEDERATION: "redis"}},
        "spec": {"nodeName": "node-1", "containers": []},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
    }))
    .expect("a pod")
}

fn sts(term: &str, ordinals: bool) -> DynamicObject {
    let mut spec = serde_json::json!({"replicas": 1, "selector": {}, "serviceName": "redis", "template": {}});
    if ordinals {
        spec["ordinals"] = serde_json::json!({"start": 0});
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "redis", "namespace": "db", "uid": "s-1", "generation": 1, "resourceVersion": "5",
            "labels": {FEDERATION: "redis"}, "annotations": {TERM: term}},
        "spec": spec,
    }))
    .expect("a StatefulSet")
}

fn pod_event(cache: &mut MemberCache, relists: &mut Relists, ev: Event<Pod>) -> Seen {
    on_watched(cache, relists, Watched::Pod(Box::new(Ok(ev))))
}

fn not_found_error() -> watcher::Error {
    watcher::Error::WatchError(Box::new(
        kube::core::Status::failure("the server could not find it", "NotFound").with_code(404),
    ))
}

#[test]
fn a_relist_is_applied_whole_at_its_end() {
    let mut buffer = None;
    assert_eq!(relist_step(&mut buffer, Event::Apply(1)), Step::Applied(1));
    assert_eq!(relist_step(&mut buffer, Event::Init), Step::Buffered);
    assert_eq!(relist_step(&mut buffer, Event::InitApply(2)), Step::Buffered);
    assert_eq!(relist_step(&mut buffer, Event::InitApply(3)), Step::Buffered);
    assert_eq!(relist_step(&mut buffer, Event::Delete(4)), Step::Deleted(4));
    assert_eq!(relist_step(&mut buffer, Event::InitDone), Step::Relisted(vec![2, 3]));
    assert_eq!(buffer, None);
}

#[test]
fn an_init_proves_no_contact_but_any_other_event_does() {
    let (mut cache, mut relists) = (MemberCache::default(), Relists::default());
    assert_eq!(pod_event(&mut cache, &mut relists, Event::Init).heard, None);
    assert_eq!(pod_event(&mut cache, &mut relists, Event::InitDone).heard, Some("pods"));
}

#[test]
fn a_pod_event_older_than_the_cache_does_not_go_back_in_time() {
    let (mut cache, mut relists) = (MemberCache::default(), Relists::default());
    let seen = pod_event(&mut cache, &mut relists, Event::Apply(pod("p-1", 10, true)));
    assert_eq!(seen.touched, Touched::Keys(vec![key()]));
    pod_event(&mut cache, &mut relists, Event::Apply(pod("p-1", 8, false)));
    let record = &cache.federations[&key()].pods[&0];
    assert_eq!((record.rv, record.ready), (10, true), "the stale event is ignored");
}

#[test]
fn a_pod_seen_deleted_is_not_brought_back_by_an_older_event() {
    let (mut cache, mut relists) = (MemberCache::default(), Relists::default());
    pod_event(&mut cache, &mut relists, Event::Apply(pod("p-1", 10, true)));
    pod_event(&mut cache, &mut relists, Event::Delete(pod("p-1", 12, true)));
    pod_event(&mut cache, &mut relists, Event::Apply(pod("p-1", 11, true)));
    assert!(cache.federations[&key()].pods.is_empty());
}

#[test]
fn a_statefulset_s_term_stamp_is_checked_and_an_impossible_one_named() {
    let (mut cache, mut relists) = (MemberCache::default(), Relists::default());
    let item = |s| Watched::Sts(Backend::StatefulSet, Box::new(Ok(Event::Apply(s))));
    let seen = on_watched(&mut cache, &mut relists, item(sts("7", true)));
    assert_eq!(seen.stamp, Some(Stamp::Term { term: 7, namespace: "db".into(), name: "redis".into() }));
    assert_eq!(seen.heard, Some("statefulsets"));
    assert_eq!(seen.drops_ordinals, None);
    assert_eq!(cache.newest_term, 7);
    let beyond = (MAX_TERM + 1).to_string();
    let seen = on_watched(&mut cache, &mut relists, item(sts(&beyond, true)));
    assert_eq!(seen.stamp, Some(Stamp::Impossible { term: MAX_TERM + 1, object: "db/redis".into() }));
}

#[test]
fn a_statefulset_written_by_a_newer_version_is_named_even_in_a_relist() {
    use crate::leadership::written_by::{Newer, WRITTEN_BY, version};
    let (mut cache, mut relists) = (MemberCache::default(), Relists::default());
    let by = |v: &str| {
        let mut s = sts("3", true);
        s.annotations_mut().insert(WRITTEN_BY.into(), v.into());
        s
    };
    let item = |ev| Watched::Sts(Backend::StatefulSet, Box::new(Ok(ev)));
    let seen = on_watched(&mut cache, &mut relists, item(Event::Apply(by(version()))));
    assert_eq!(seen.newer, None, "its own version");
    let seen = on_watched(&mut cache, &mut relists, item(Event::Apply(sts("3", true))));
    assert_eq!(seen.newer, None, "written before the stamp existed");
    let seen = on_watched(&mut cache, &mut relists, item(Event::InitApply(by("999.0.0"))));
    let newer = Newer { theirs: "999.0.0".into(), mine: version().into() };
    assert_eq!(seen.newer, Some(("db/redis".into(), newer)), "seen while listing, before any campaign");
}

#[test]
fn a_statefulset_without_its_ordinals_shows_the_member_drops_them() {
    let (mut cache, mut relists) = (MemberCache::default(), Relists::default());
    let item = |e| Watched::Sts(Backend::AdvancedStatefulSet, Box::new(Ok(e)));
    on_watched(&mut cache, &mut relists, item(Event::Init));
    let seen = on_watched(&mut cache, &mut relists, item(Event::InitApply(sts("1", false))));
    assert_eq!(seen.drops_ordinals, Some(Backend::AdvancedStatefulSet), "seen as soon as listed");
    assert_eq!(seen.touched, Touched::None, "buffered in the relist");
    let seen = on_watched(&mut cache, &mut relists, item(Event::InitDone));
    assert_eq!(seen.touched, Touched::Keys(vec![key()]));
}

#[test]
fn a_404_on_the_advanced_watch_means_the_api_is_gone_elsewhere_a_failure() {
    let (mut cache, mut relists) = (MemberCache::default(), Relists::default());
    let gone = Watched::Sts(Backend::AdvancedStatefulSet, Box::new(Err(not_found_error())));
    let seen = on_watched(&mut cache, &mut relists, gone);
    assert!(seen.advanced_gone && seen.failed.is_none() && seen.heard.is_none());
    let failed = Watched::Sts(Backend::StatefulSet, Box::new(Err(not_found_error())));
    let seen = on_watched(&mut cache, &mut relists, failed);
    assert!(!seen.advanced_gone);
    assert_eq!(seen.failed.map(|(r, _)| r), Some("statefulsets"));
}

#[test]
fn a_claim_touches_its_namespace_and_a_claim_relist_every_federation() {
    let (mut cache, mut relists) = (MemberCache::default(), Relists::default());
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "data-redis-0", "namespace": "db", "uid": "c-1", "resourceVersion": "3"},
    }))
    .expect("a claim");
    let ev = |e| Watched::Claim(Box::new(Ok(e)));
    assert_eq!(on_watched(&mut cache, &mut relists, ev(Event::Apply(claim))).touched, Touched::Namespace("db".into()));
    on_watched(&mut cache, &mut relists, ev(Event::Init));
    assert_eq!(on_watched(&mut cache, &mut relists, ev(Event::InitDone)).touched, Touched::Subscribed);
}

#[test]
fn the_advanced_api_is_dropped_once_and_watched_again_only_when_newly_served() {
    let (mut cache, mut relists) = (MemberCache::default(), Relists::default());
    assert_eq!(advanced_discovered(&mut cache, false), Discovered::Noted { watch: false });
    assert_eq!(advanced_discovered(&mut cache, false), Discovered::Known);
    assert_eq!(advanced_gone(&mut cache, &mut relists), None, "known unserved already");
    assert_eq!(advanced_discovered(&mut cache, true), Discovered::Noted { watch: true });
    assert!(!cache.advanced_synced, "a fresh watch's first list marks them synced");
    assert_eq!(advanced_discovered(&mut cache, false), Discovered::Known, "only a 404 drops a served API");
    relists.advanced = Some(vec![]);
    assert_eq!(advanced_gone(&mut cache, &mut relists), Some(vec![]));
    assert!(relists.advanced.is_none());
    assert_eq!(cache.serves_advanced, Some(false));
}
