//! What a watch event changes in the member cache and what it asks the watcher to do: which
//! federations to report, a term stamp to check, a member that drops `.spec.ordinals`, the
//! Advanced StatefulSet API gone. Relists (`Init` … `InitDone`) are buffered and applied whole.
//! Going back in time is the cache's to refuse ([`MemberCache`] keeps the newest version of
//! each object, and what was seen deleted); this only routes each event to it.

use k8s_openapi::api::{
    core::v1::{Node, PersistentVolumeClaim, Pod},
    discovery::v1::EndpointSlice,
    policy::v1::PodDisruptionBudget,
};
use kube::{ResourceExt, api::DynamicObject, runtime::watcher};
use spanset_api::labels::TERM;
use spanset_plan::Backend;

use crate::{
    leadership::written_by::{Newer, newer_than_this},
    member::{
        cache::{MemberCache, SeenPod},
        objects::FederationKey,
        workload,
    },
};

/// An event of one of the watcher's watches.
pub enum Watched {
    /// A StatefulSet watch: apps/v1, or Advanced StatefulSets where the member serves them.
    Sts(Backend, Box<Result<watcher::Event<DynamicObject>, watcher::Error>>),
    /// The pod watch.
    Pod(Box<Result<watcher::Event<Pod>, watcher::Error>>),
    /// The claim watch.
    Claim(Box<Result<watcher::Event<PersistentVolumeClaim>, watcher::Error>>),
    /// The watch of spanset's PodDisruptionBudgets.
    Budget(Box<Result<watcher::Event<PodDisruptionBudget>, watcher::Error>>),
    /// The node watch (only cordons are kept).
    Node(Box<Result<watcher::Event<Node>, watcher::Error>>),
    /// The watch of spanset's EndpointSlices (`spec.network`).
    Slice(Box<Result<watcher::Event<EndpointSlice>, watcher::Error>>),
}

/// Buffers of a relist in progress (watcher `Init` … `InitDone`): applied whole at the end.
#[derive(Default)]
pub struct Relists {
    sts: Option<Vec<DynamicObject>>,
    /// The Advanced StatefulSet watch's (dropped when that API goes).
    pub advanced: Option<Vec<DynamicObject>>,
    /// Pods as the cache keeps them (the watch sees every pod of the member: the objects of a
    /// relist are not held, only what spanset keeps of each).
    pods: Option<Vec<SeenPod>>,
    claims: Option<Vec<PersistentVolumeClaim>>,
    budgets: Option<Vec<PodDisruptionBudget>>,
    nodes: Option<Vec<Node>>,
    slices: Option<Vec<EndpointSlice>>,
}

/// The highest term a leader can hold: `spec.leaseTransitions` is an int32.
pub const MAX_TERM: u64 = i32::MAX as u64;

/// The term stamp on a managed StatefulSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stamp {
    /// A term no leader wrote (above [`MAX_TERM`]): named and left out, since taking a term
    /// above it would be impossible.
    Impossible {
        /// The term.
        term: u64,
        /// `namespace/name`.
        object: String,
    },
    /// A term to check: it raises the floor of the next term this process may take, and, if
    /// newer than its own or its own but not written by it, another process leads.
    Term {
        /// The term.
        term: u64,
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
    },
}

/// Which federations a watch event touched.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Touched {
    /// None.
    #[default]
    None,
    /// These.
    Keys(Vec<FederationKey>),
    /// Every subscribed federation of this namespace (claims carry no federation label).
    Namespace(String),
    /// Every subscribed federation.
    Subscribed,
}

/// What a watch event asks of the watcher, besides the cache change already made.
#[derive(Debug, Default)]
pub struct Seen {
    /// The member was heard on this resource (any event but `Init`, which kube's watcher yields
    /// before each list attempt, also when the list is then refused: it proves no contact).
    pub heard: Option<&'static str>,
    /// The federations to report.
    pub touched: Touched,
    /// A term stamp to check.
    pub stamp: Option<Stamp>,
    /// A StatefulSet written by a newer controller version (`namespace/name`, the versions):
    /// this process must stop leading before it writes there.
    pub newer: Option<(String, Newer)>,
    /// A StatefulSet of this API came back without `.spec.ordinals`: the member drops it.
    pub drops_ordinals: Option<Backend>,
    /// The Advanced StatefulSet watch found no such resource: OpenKruise was removed.
    pub advanced_gone: bool,
    /// The watch of this resource failed, with this error.
    pub failed: Option<(&'static str, watcher::Error)>,
}

/// What one watch event means for the cache, once relists are buffered.
#[derive(Debug, PartialEq)]
pub enum Step<K> {
    /// An object to apply now.
    Applied(K),
    /// An object gone.
    Deleted(K),
    /// A relist ended: these are all the objects.
    Relisted(Vec<K>),
    /// Part of a relist in progress.
    Buffered,
}

/// Buffers a relist (`Init` … `InitDone`) so that it is applied whole, and passes the rest on.
pub fn relist_step<K>(buffer: &mut Option<Vec<K>>, ev: watcher::Event<K>) -> Step<K> {
    use watcher::Event::*;
    match ev {
        Init => {
            *buffer = Some(Vec::new());
            Step::Buffered
        }
        InitDone => Step::Relisted(buffer.take().unwrap_or_default()),
        Apply(k) | InitApply(k) => match buffer.as_mut() {
            Some(b) => {
                b.push(k);
                Step::Buffered
            }
            None => Step::Applied(k),
        },
        Delete(k) => Step::Deleted(k),
    }
}

/// The StatefulSet watch's resource name of one API.
pub fn sts_resource(kind: Backend) -> &'static str {
    match kind {
        Backend::StatefulSet => "statefulsets",
        Backend::AdvancedStatefulSet => "statefulsets.apps.kruise.io",
    }
}

/// Applies one watch event to the cache (and the relist buffers) and says what else it asks.
pub fn on_watched(cache: &mut MemberCache, relists: &mut Relists, item: Watched) -> Seen {
    match item {
        Watched::Sts(kind, res) => match *res {
            Ok(ev) => sts_event(cache, relists, kind, ev),
            Err(e) if kind == Backend::AdvancedStatefulSet && not_found(&e) => {
                Seen { advanced_gone: true, ..Seen::default() }
            }
            Err(e) => failed(sts_resource(kind), e),
        },
        Watched::Pod(res) => match *res {
            Ok(ev) => pod_event(cache, relists, ev),
            Err(e) => failed("pods", e),
        },
        Watched::Budget(res) => {
            let calls = Keyed {
                applied: MemberCache::budget_applied,
                deleted: MemberCache::budget_deleted,
                relisted: MemberCache::budgets_relisted,
            };
            keyed(cache, &mut relists.budgets, "poddisruptionbudgets", *res, calls)
        }
        Watched::Slice(res) => {
            let calls = Keyed {
                applied: MemberCache::slice_applied,
                deleted: MemberCache::slice_deleted,
                relisted: MemberCache::slices_relisted,
            };
            keyed(cache, &mut relists.slices, "endpointslices", *res, calls)
        }
        Watched::Claim(res) => match *res {
            Ok(ev) => {
                let heard = heard("persistentvolumeclaims", &ev);
                let touched = match relist_step(&mut relists.claims, ev) {
                    Step::Applied(c) => Touched::Namespace(cache.claim_event(&c, false)),
                    Step::Deleted(c) => Touched::Namespace(cache.claim_event(&c, true)),
                    Step::Relisted(listed) => {
                        cache.claims_relisted(&listed);
                        Touched::Subscribed
                    }
                    Step::Buffered => Touched::None,
                };
                Seen { heard, touched, ..Seen::default() }
            }
            Err(e) => failed("persistentvolumeclaims", e),
        },
        Watched::Node(res) => match *res {
            Ok(ev) => {
                let heard = heard("nodes", &ev);
                // Node status heartbeats change nothing spanset keeps: only cordons tell.
                let changed = match relist_step(&mut relists.nodes, ev) {
                    Step::Applied(n) => cache.node_event(&n, false),
                    Step::Deleted(n) => cache.node_event(&n, true),
                    Step::Relisted(listed) => cache.nodes_relisted(&listed),
                    Step::Buffered => false,
                };
                Seen { heard, touched: if changed { Touched::Subscribed } else { Touched::None }, ..Seen::default() }
            }
            Err(e) => failed("nodes", e),
        },
    }
}

/// How the cache takes one object of a kind filed under its federation.
struct Keyed<K> {
    applied: fn(&mut MemberCache, &K) -> Option<FederationKey>,
    deleted: fn(&mut MemberCache, &K) -> Option<FederationKey>,
    relisted: fn(&mut MemberCache, &[K]) -> Vec<FederationKey>,
}

/// An event of a watch whose objects are filed under their federation (pods, budgets, slices).
fn keyed<K>(
    cache: &mut MemberCache,
    buffer: &mut Option<Vec<K>>,
    resource: &'static str,
    res: Result<watcher::Event<K>, watcher::Error>,
    calls: Keyed<K>,
) -> Seen {
    let ev = match res {
        Ok(ev) => ev,
        Err(e) => return failed(resource, e),
    };
    let heard = heard(resource, &ev);
    let touched = match relist_step(buffer, ev) {
        Step::Applied(k) => Touched::Keys((calls.applied)(cache, &k).into_iter().collect()),
        Step::Deleted(k) => Touched::Keys((calls.deleted)(cache, &k).into_iter().collect()),
        Step::Relisted(listed) => Touched::Keys((calls.relisted)(cache, &listed)),
        Step::Buffered => Touched::None,
    };
    Seen { heard, touched, ..Seen::default() }
}

/// The resource the member was heard on, unless the event is `Init`.
fn heard<K>(resource: &'static str, ev: &watcher::Event<K>) -> Option<&'static str> {
    (!matches!(ev, watcher::Event::Init)).then_some(resource)
}

fn failed(resource: &'static str, e: watcher::Error) -> Seen {
    Seen { failed: Some((resource, e)), ..Seen::default() }
}

/// An event of the pod watch, which sees every pod of the member: each pod is reduced at once
/// to what the cache keeps of it ([`MemberCache::seen_pod`]), so that a relist holds records,
/// not objects.
fn pod_event(cache: &mut MemberCache, relists: &mut Relists, ev: watcher::Event<Pod>) -> Seen {
    use watcher::Event::*;
    let heard = heard("pods", &ev);
    let ev = match ev {
        Init => Init,
        InitDone => InitDone,
        Apply(p) => Apply(cache.seen_pod(&p)),
        InitApply(p) => InitApply(cache.seen_pod(&p)),
        Delete(p) => Delete(cache.seen_pod(&p)),
    };
    let touched = match relist_step(&mut relists.pods, ev) {
        Step::Applied(p) => Touched::Keys(cache.pod_seen(p).into_iter().collect()),
        Step::Deleted(p) => Touched::Keys(cache.pod_gone(p).into_iter().collect()),
        Step::Relisted(listed) => Touched::Keys(cache.pods_seen_relisted(listed)),
        Step::Buffered => Touched::None,
    };
    Seen { heard, touched, ..Seen::default() }
}

fn sts_event(cache: &mut MemberCache, relists: &mut Relists, kind: Backend, ev: watcher::Event<DynamicObject>) -> Seen {
    let heard = heard(sts_resource(kind), &ev);
    let (mut stamp, mut drops_ordinals, mut newer) = (None, None, None);
    if let watcher::Event::Apply(s) | watcher::Event::InitApply(s) = &ev {
        stamp = stamp_of(s);
        newer = newer_than_this(s.annotations())
            .map(|n| (format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any()), n));
        // spanset always writes `.spec.ordinals`: one without it was dropped by the member.
        if workload::ordinals_start(s).is_none() {
            drops_ordinals = Some(kind);
        }
    }
    let buffer = match kind {
        Backend::StatefulSet => &mut relists.sts,
        Backend::AdvancedStatefulSet => &mut relists.advanced,
    };
    let touched = match relist_step(buffer, ev) {
        Step::Applied(s) => Touched::Keys(cache.sts_applied(&s, kind).into_iter().collect()),
        Step::Deleted(s) => Touched::Keys(cache.sts_deleted(&s, kind).into_iter().collect()),
        Step::Relisted(listed) => Touched::Keys(cache.sts_relisted(&listed, kind)),
        Step::Buffered => Touched::None,
    };
    Seen { heard, touched, stamp, newer, drops_ordinals, ..Seen::default() }
}

/// The term stamp a managed StatefulSet carries, if any.
pub fn stamp_of(s: &DynamicObject) -> Option<Stamp> {
    let term = s.annotations().get(TERM).and_then(|t| t.parse::<u64>().ok())?;
    let (namespace, name) = (s.namespace().unwrap_or_default(), s.name_any());
    Some(if term > MAX_TERM {
        Stamp::Impossible { term, object: format!("{namespace}/{name}") }
    } else {
        Stamp::Term { term, namespace, name }
    })
}

/// The Advanced StatefulSet API is gone (404 on its watch or a write): its records and its
/// relist go, and the cache notes it unserved. `None` when that was known already; else the
/// federations whose StatefulSets went.
pub fn advanced_gone(cache: &mut MemberCache, relists: &mut Relists) -> Option<Vec<FederationKey>> {
    if cache.serves_advanced == Some(false) {
        return None;
    }
    relists.advanced = None;
    cache.serves_advanced = Some(false);
    Some(cache.sts_relisted(&[], Backend::AdvancedStatefulSet))
}

/// What discovery's answer on Advanced StatefulSets changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discovered {
    /// Nothing: known already (or served: a served API is only dropped by a 404).
    Known,
    /// Noted; `watch`: they are newly served, to be watched with a fresh watch (its first
    /// list is what marks them synced).
    Noted {
        /// Start their watch.
        watch: bool,
    },
}

/// Notes discovery's answer on whether the member serves Advanced StatefulSets.
pub fn advanced_discovered(cache: &mut MemberCache, served: bool) -> Discovered {
    let before = cache.serves_advanced;
    if before == Some(served) || before == Some(true) {
        return Discovered::Known;
    }
    cache.serves_advanced = Some(served);
    if served {
        cache.advanced_synced = false;
    }
    Discovered::Noted { watch: served }
}

/// Whether a watch failed because its resource does not exist (404).
pub fn not_found(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s))
        | watcher::Error::WatchError(s) => s.code == 404,
        _ => false,
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
