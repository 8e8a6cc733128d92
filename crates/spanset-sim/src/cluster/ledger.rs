//! The identity ledger: every pod incarnation across all simulated clusters of one sandbox, so
//! a test can check the at-most-one rule over a whole run, not only at the end.
//!
//! An incarnation runs from the moment its kubelet starts it until its containers really
//! stop, which is what a StatefulSet fears (the book's at-most-one chapter):
//! - the kubelet ends a graceful termination, or kills the containers of a pod whose object is
//!   gone (force-deleted) — at once on a healthy node;
//! - a node that lost its network or its kubelet keeps its containers running: its runs stay
//!   open (a node declared NotReady, an eviction or a force delete end nothing) until the
//!   returning kubelet stops them, or forever if it never returns;
//! - a node that powers off stops them at that instant; when it powers on, its kubelet starts
//!   new runs for the pods still bound to it and not being deleted.
//!
//! - a pod of real processes runs while its workload does (the sandbox sees its processes):
//!   a run ends when every process of its containers has ended, or when what runs is only a
//!   pod guard's (its own containers, or `spanset-guard-exec` waiting to start a container's
//!   command), and a new run of the same pod begins, from the kernel's record of when the
//!   process started, when one runs again.
//!
//! Pods of StatefulSets with the same name in the same namespace count as one identity per
//! ordinal, whatever cluster they run in. A pod carries an identity whoever made it: a pod its
//! StatefulSet owns, one labelled with a federation (`spanset.dev/federation`) and named as its
//! pods are (a copied manifest, a restore), and one with neither that bears the name of a
//! StatefulSet's pod seen anywhere in the sandbox (its labels removed, created by hand). The
//! ledger judges what ran, not who owned it.

use std::collections::BTreeMap;

use parking_lot::Mutex;
use serde::Serialize;

/// A StatefulSet pod identity: namespace, StatefulSet name and ordinal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Identity {
    /// Namespace of the StatefulSet.
    pub namespace: String,
    /// StatefulSet name.
    pub statefulset: String,
    /// Ordinal.
    pub ordinal: u32,
}

/// One pod incarnation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Incarnation {
    /// Simulated cluster the pod ran in.
    pub cluster: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Pod uid.
    pub uid: String,
    /// Node it ran on.
    pub node: String,
    /// Its StatefulSet identity, if it belongs to one.
    pub identity: Option<Identity>,
    /// When it started running (RFC 3339 with microseconds).
    pub running_from: jiff::Timestamp,
    /// When it stopped, if it has.
    pub running_until: Option<jiff::Timestamp>,
    /// Its containers' images when it started (an in-place update keeps the incarnation).
    #[serde(default)]
    pub images: Vec<String>,
    /// The spans during which its Ready condition was True (the last one open while it is),
    /// so that a test can count the identities unavailable at every instant of a rollout.
    #[serde(default)]
    pub ready_periods: Vec<Period>,
    /// In-place updates: when its containers were restarted with other images, and which.
    #[serde(default)]
    pub image_changes: Vec<ImageChange>,
}

/// An in-place update of a running pod's images.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImageChange {
    /// When its containers restarted with them.
    pub at: jiff::Timestamp,
    /// Its containers' images from then on.
    pub images: Vec<String>,
}

/// A span of time, open while it lasts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Period {
    /// Start.
    pub from: jiff::Timestamp,
    /// End, once it ended.
    pub until: Option<jiff::Timestamp>,
}

impl Incarnation {
    /// Its run ends at `at` (and its readiness with it).
    fn end(&mut self, at: jiff::Timestamp) {
        self.running_until = Some(at);
        if let Some(p) = self.ready_periods.last_mut().filter(|p| p.until.is_none()) {
            p.until = Some(at);
        }
    }
}

/// Two incarnations of one identity that ran at the same time.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overlap {
    /// The identity.
    pub identity: Identity,
    /// The earlier incarnation.
    pub first: Incarnation,
    /// The one that started while the first still ran.
    pub second: Incarnation,
}

impl std::fmt::Display for Overlap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let until = |i: &Incarnation| i.running_until.map(|t| t.to_string()).unwrap_or_else(|| "now".into());
        write!(
            f,
            "{}/{} ordinal {} ran in two places at once: {} pod {} ({} to {}) and {} pod {} ({} to {})",
            self.identity.namespace,
            self.identity.statefulset,
            self.identity.ordinal,
            self.first.cluster,
            self.first.pod,
            self.first.running_from,
            until(&self.first),
            self.second.cluster,
            self.second.pod,
            self.second.running_from,
            until(&self.second),
        )
    }
}

/// The ledger, shared by every cluster of a sandbox.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Incarnations by pod uid, in start order.
    entries: Mutex<Vec<Incarnation>>,
}

impl Ledger {
    /// Records that a pod started running.
    pub fn started(&self, inc: Incarnation) {
        let mut entries = self.entries.lock();
        // A pod already running (not ended) is not started twice.
        if !entries.iter().any(|e| e.uid == inc.uid && e.cluster == inc.cluster && e.running_until.is_none()) {
            entries.push(inc);
        }
    }

    /// Records that a pod whose workload was seen gone runs again, from `inc.running_from` (the
    /// kernel's record of its first process's start). The sweep that ended its previous run saw
    /// nothing running before this process began, so that run ended by then: an end recorded
    /// later (the instant the sweep wrote it, which a loaded machine delays past the new start)
    /// is brought back to it, and one pod's runs never overlap each other.
    pub fn resumed(&self, inc: Incarnation) {
        {
            let mut entries = self.entries.lock();
            let last = entries
                .iter_mut()
                .filter(|e| e.uid == inc.uid && e.cluster == inc.cluster)
                .max_by_key(|e| e.running_from);
            if let Some(e) = last
                && let Some(until) = e.running_until
                && until > inc.running_from
            {
                e.end(inc.running_from.max(e.running_from));
            }
        }
        self.started(inc);
    }

    /// Whether a pod of a cluster runs now, as recorded.
    pub fn is_open(&self, cluster: &str, uid: &str) -> bool {
        self.entries.lock().iter().any(|e| e.uid == uid && e.cluster == cluster && e.running_until.is_none())
    }

    /// Records that a pod stopped (terminated, or its node was declared dead).
    pub fn stopped(&self, cluster: &str, uid: &str, at: jiff::Timestamp) {
        let mut entries = self.entries.lock();
        if let Some(e) = entries.iter_mut().find(|e| e.uid == uid && e.cluster == cluster && e.running_until.is_none())
        {
            e.end(at);
        }
    }

    /// Records that a running pod's Ready condition became `ready` at `at`.
    pub fn readiness(&self, cluster: &str, uid: &str, ready: bool, at: jiff::Timestamp) {
        let mut entries = self.entries.lock();
        let Some(e) = entries.iter_mut().find(|e| e.uid == uid && e.cluster == cluster && e.running_until.is_none())
        else {
            return;
        };
        let open = e.ready_periods.last_mut().filter(|p| p.until.is_none());
        match (open, ready) {
            (None, true) => e.ready_periods.push(Period { from: at, until: None }),
            (Some(p), false) => p.until = Some(at),
            _ => {}
        }
    }

    /// Records that a running pod's containers restarted with `images` (an in-place update).
    pub fn images_changed(&self, cluster: &str, uid: &str, images: Vec<String>, at: jiff::Timestamp) {
        let mut entries = self.entries.lock();
        if let Some(e) = entries.iter_mut().find(|e| e.uid == uid && e.cluster == cluster && e.running_until.is_none())
        {
            e.image_changes.push(ImageChange { at, images });
        }
    }

    /// Ends every open run on a node of a cluster (its machine powered off at `at`).
    pub fn stop_on_node(&self, cluster: &str, node: &str, at: jiff::Timestamp) {
        let mut entries = self.entries.lock();
        for e in entries.iter_mut().filter(|e| e.cluster == cluster && e.node == node && e.running_until.is_none()) {
            e.end(at);
        }
    }

    /// The open runs of a cluster, as (pod uid, node): what its kubelets believe they run.
    pub fn open_in(&self, cluster: &str) -> Vec<(String, String)> {
        let entries = self.entries.lock();
        entries
            .iter()
            .filter(|e| e.cluster == cluster && e.running_until.is_none())
            .map(|e| (e.uid.clone(), e.node.clone()))
            .collect()
    }

    /// Every incarnation so far, each with the identity its name gives it where nothing else
    /// did ([`resolve_by_name`]).
    pub fn entries(&self) -> Vec<Incarnation> {
        let mut entries = self.entries.lock().clone();
        resolve_by_name(&mut entries);
        entries
    }

    /// Every pair of incarnations of one identity whose running intervals overlap.
    pub fn overlaps(&self) -> Vec<Overlap> {
        let entries = self.entries();
        let mut by_identity: BTreeMap<&Identity, Vec<&Incarnation>> = BTreeMap::new();
        for e in &entries {
            if let Some(id) = &e.identity {
                by_identity.entry(id).or_default().push(e);
            }
        }
        let mut out = Vec::new();
        for (id, mut incs) in by_identity {
            incs.sort_by_key(|i| i.running_from);
            for (i, a) in incs.iter().enumerate() {
                for b in &incs[i + 1..] {
                    let a_until = a.running_until.unwrap_or(jiff::Timestamp::MAX);
                    if b.running_from < a_until {
                        out.push(Overlap { identity: id.clone(), first: (*a).clone(), second: (*b).clone() });
                    }
                }
            }
        }
        out
    }
}

/// The label spanset puts on every pod of a federation: the federation's (and its member
/// StatefulSets') name.
const FEDERATION_LABEL: &str = "spanset.dev/federation";

/// The StatefulSet identity of a pod when it starts: its controller owner is a StatefulSet, or
/// it carries a federation's label, and its name ends in `-<ordinal>` after that name. A pod
/// with neither is given its identity by name later ([`resolve_by_name`]).
pub fn identity_of(pod: &serde_json::Value) -> Option<Identity> {
    let owner = pod.pointer("/metadata/ownerReferences").and_then(|r| r.as_array()).and_then(|refs| {
        refs.iter().find(|r| {
            r.get("kind").and_then(|k| k.as_str()) == Some("StatefulSet")
                && r.get("controller").and_then(|c| c.as_bool()) == Some(true)
        })
    });
    let set = match owner {
        Some(owner) => owner.get("name")?.as_str()?,
        None => pod.pointer("/metadata/labels")?.get(FEDERATION_LABEL)?.as_str()?,
    };
    let (named, ordinal) = crate::pod_name::statefulset_pod(pod.pointer("/metadata/name")?.as_str()?)?;
    (named == set).then(|| Identity {
        namespace: pod.pointer("/metadata/namespace").and_then(|n| n.as_str()).unwrap_or("").to_string(),
        statefulset: set.to_string(),
        ordinal,
    })
}

/// Gives the incarnations without an identity the one their name bears, where a StatefulSet of
/// that name in that namespace has pods in the ledger (in any cluster): a pod whose labels
/// were removed and that no StatefulSet owns still runs the identity its name is.
fn resolve_by_name(entries: &mut [Incarnation]) {
    let sets: std::collections::BTreeSet<(String, String)> = entries
        .iter()
        .filter_map(|e| e.identity.as_ref())
        .map(|id| (id.namespace.clone(), id.statefulset.clone()))
        .collect();
    for e in entries.iter_mut().filter(|e| e.identity.is_none()) {
        if let Some((set, ordinal)) = crate::pod_name::statefulset_pod(&e.pod)
            && sets.contains(&(e.namespace.clone(), set.to_string()))
        {
            e.identity = Some(Identity { namespace: e.namespace.clone(), statefulset: set.to_string(), ordinal });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inc(cluster: &str, uid: &str, from: i64, until: Option<i64>) -> Incarnation {
        Incarnation {
            cluster: cluster.into(),
            namespace: "default".into(),
            pod: "web-1".into(),
            uid: uid.into(),
            node: "node-1".into(),
            identity: Some(Identity { namespace: "default".into(), statefulset: "web".into(), ordinal: 1 }),
            running_from: jiff::Timestamp::from_second(from).unwrap(),
            running_until: until.map(|u| jiff::Timestamp::from_second(u).unwrap()),
            images: vec![],
            ready_periods: vec![],
            image_changes: vec![],
        }
    }

    #[test]
    fn a_pod_that_runs_again_ends_its_previous_run_no_later_than_the_new_one_starts() {
        let l = Ledger::default();
        let t = |s| jiff::Timestamp::from_second(s).unwrap();
        l.started(inc("c", "u1", 10, None));
        l.stopped("c", "u1", t(20));
        // Its new process began at 19, before the sweep that saw the pod empty wrote 20.
        l.resumed(inc("c", "u1", 19, None));
        l.stopped("c", "u1", t(25));
        // Its successor (one identity), whose new run begins after the recorded end.
        l.started(inc("c", "u2", 30, None));
        l.stopped("c", "u2", t(35));
        l.resumed(inc("c", "u2", 40, None));
        let runs: Vec<_> = l.entries.lock().iter().map(|e| (e.uid.clone(), e.running_from, e.running_until)).collect();
        assert_eq!(
            runs,
            [
                ("u1".to_string(), t(10), Some(t(19))),
                ("u1".to_string(), t(19), Some(t(25))),
                ("u2".to_string(), t(30), Some(t(35))),
                ("u2".to_string(), t(40), None)
            ]
        );
        assert!(l.overlaps().is_empty(), "{:?}", l.overlaps());
    }

    #[test]
    fn readiness_is_recorded_in_periods_that_end_with_the_run() {
        let l = Ledger::default();
        let t = |s| jiff::Timestamp::from_second(s).unwrap();
        l.started(inc("c", "u1", 10, None));
        l.readiness("c", "u1", true, t(11));
        l.readiness("c", "u1", true, t(12));
        l.readiness("c", "u1", false, t(13));
        l.readiness("c", "u1", true, t(14));
        l.stopped("c", "u1", t(15));
        let periods: Vec<(jiff::Timestamp, Option<jiff::Timestamp>)> =
            l.entries()[0].ready_periods.iter().map(|p| (p.from, p.until)).collect();
        assert_eq!(periods, vec![(t(11), Some(t(13))), (t(14), Some(t(15)))]);
    }

    #[test]
    fn sequential_incarnations_across_clusters_do_not_overlap() {
        let l = Ledger::default();
        l.started(inc("source", "u1", 10, None));
        l.stopped("source", "u1", jiff::Timestamp::from_second(20).unwrap());
        l.started(inc("destination", "u2", 20, None));
        assert!(l.overlaps().is_empty());
    }

    #[test]
    fn an_identity_running_in_two_clusters_is_reported_with_both() {
        let l = Ledger::default();
        l.started(inc("source", "u1", 10, None));
        l.started(inc("destination", "u2", 15, None));
        let o = l.overlaps();
        assert_eq!(o.len(), 1);
        assert_eq!((o[0].first.cluster.as_str(), o[0].second.cluster.as_str()), ("source", "destination"));
        let text = o[0].to_string();
        assert!(
            text.contains("default/web ordinal 1") && text.contains("source") && text.contains("destination"),
            "{text}"
        );
    }

    #[test]
    fn a_power_off_ends_the_runs_on_that_node_only() {
        let l = Ledger::default();
        l.started(inc("source", "u1", 10, None));
        let mut other = inc("source", "u2", 10, None);
        other.node = "node-2".into();
        other.identity.as_mut().unwrap().ordinal = 2;
        l.started(other);
        l.stop_on_node("source", "node-1", jiff::Timestamp::from_second(12).unwrap());
        assert_eq!(l.open_in("source"), vec![("u2".to_string(), "node-2".to_string())]);
        l.started(inc("destination", "u3", 12, None));
        assert!(l.overlaps().is_empty(), "the run on the powered-off node ended at 12");
    }

    #[test]
    fn identity_needs_a_statefulset_controller_and_a_matching_name() {
        let pod = serde_json::json!({"metadata": {"name": "web-3", "namespace": "ns",
            "ownerReferences": [{"kind": "StatefulSet", "name": "web", "controller": true, "uid": "x", "apiVersion": "apps/v1"}]}});
        assert_eq!(identity_of(&pod), Some(Identity { namespace: "ns".into(), statefulset: "web".into(), ordinal: 3 }));
        let stray = serde_json::json!({"metadata": {"name": "web-3", "namespace": "ns"}});
        assert_eq!(identity_of(&stray), None);
        let other = serde_json::json!({"metadata": {"name": "web-3", "namespace": "ns",
            "ownerReferences": [{"kind": "StatefulSet", "name": "db", "controller": true, "uid": "x", "apiVersion": "apps/v1"}]}});
        assert_eq!(identity_of(&other), None, "a StatefulSet names only its own pods");
    }

    #[test]
    fn a_pod_labelled_with_a_federation_carries_its_identity_without_an_owner() {
        let bare = serde_json::json!({"metadata": {"name": "redis-0", "namespace": "default",
            "labels": {"spanset.dev/federation": "redis", "app": "redis"}}});
        let want = Identity { namespace: "default".into(), statefulset: "redis".into(), ordinal: 0 };
        assert_eq!(identity_of(&bare), Some(want));
        let misnamed = serde_json::json!({"metadata": {"name": "cache-0", "namespace": "default",
            "labels": {"spanset.dev/federation": "redis"}}});
        assert_eq!(identity_of(&misnamed), None);
    }

    #[test]
    fn a_bare_pod_bearing_an_identity_s_name_overlaps_the_pod_of_that_identity() {
        let l = Ledger::default();
        l.started(inc("east", "u1", 10, None));
        // Created by hand in west, no owner, no labels: named as east's pod.
        let mut bare = inc("west", "u2", 15, None);
        bare.identity = None;
        l.started(bare);
        // A pod of no StatefulSet the ledger knows stays without an identity.
        let mut other = inc("west", "u3", 15, None);
        (other.identity, other.pod) = (None, "job-1".into());
        l.started(other);
        let o = l.overlaps();
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!((o[0].first.uid.as_str(), o[0].second.uid.as_str()), ("u1", "u2"));
        assert_eq!(o[0].second.identity, o[0].first.identity);
        assert_eq!(l.entries().iter().filter(|e| e.identity.is_none()).count(), 1);
    }
}
