//! Names that follow ordinals (`spec.network`): in every member, spanset publishes the pods
//! that run in the *other* members as EndpointSlices of the federation's headless Service, so
//! that cluster DNS answers `<pod>.<serviceName>.<namespace>.svc.<zone>` in every member,
//! wherever the ordinal runs. Pure: from what the watchers report, the slices each member
//! should hold, the writes that get them there, and the rule that keeps one name from ever
//! answering with two addresses.
//!
//! That rule: a pod of ordinal k never starts in a member whose spanset slices still name k.
//! A member's own EndpointSlice controller lists its own pods; spanset's slices there list
//! only pods elsewhere. So a name could answer twice in member B only when B runs k while
//! spanset's slice in B still carries k's old address. The old pod is gone before k starts in
//! B (the at-most-one rule), its address leaves B's slice in the next write, and k's pod in B
//! is released (its identity gate removed; with the gate disabled, B's slice grown) only once
//! B's watch shows that write. Every other member swaps the old address for the new one in
//! one write of one object: an ordinal's endpoint always lives in the slice of its chunk
//! ([`ENDPOINTS_PER_SLICE`] ordinals each), whichever member runs it.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use k8s_openapi::{
    api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::ResourceExt;

/// The change a [`SliceWrite`] makes, carried to the watcher in
/// [`crate::actors::messages::WriteEndpointSlice`].
pub use crate::actors::messages::SliceChange;
use crate::{
    actors::messages::MemberView,
    member::{
        endpoints::{EndpointRecord, SERVICE_NAME, SLICE_MANAGED_BY, SLICE_MANAGER, SliceRecord},
        objects::{headless_service, ownership_labels},
        supporting::service_export_resource,
    },
};
use spanset_api::{FederatedStatefulSet, Network, NetworkMode};
use spanset_plan::{Observed, Ordinal};

/// Ordinals per published slice: the API's limit on endpoints in one EndpointSlice.
pub const ENDPOINTS_PER_SLICE: u32 = 1000;

/// The name of spanset's slice holding ordinals `[chunk * ENDPOINTS_PER_SLICE, …)`.
pub fn slice_name(federation: &str, chunk: u32) -> String {
    format!("{federation}-spanset-{chunk}")
}

/// The name of ordinal k's pod (also its DNS hostname).
pub fn pod_name(fsts: &FederatedStatefulSet, k: Ordinal) -> String {
    format!("{}-{k}", fsts.name_any())
}

/// A slice write decided by a reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceWrite {
    /// The member.
    pub cluster: String,
    /// The slice's name.
    pub name: String,
    /// What to do there.
    pub change: SliceChange,
}

/// The endpoint of ordinal k published in `target`: the pod of k that runs in another member,
/// if exactly one is to be named. Candidates are pods with an IP, past their identity gate,
/// not ended, in observed members that are not fenced (a fenced member's pods leave every
/// record). None when `target` runs k itself (its own EndpointSlice controller lists it), and
/// none when two members report k and not exactly one of them holds it in its written slice:
/// a name never answers twice because spanset guessed.
fn endpoint_for(
    publish_not_ready: bool,
    target: &str,
    k: Ordinal,
    views: &BTreeMap<String, Arc<MemberView>>,
    obs: &Observed,
) -> Option<EndpointRecord> {
    let runs_here = views.get(target).is_some_and(|v| v.federation.pods.get(&k).is_some_and(|p| !p.gated()));
    if runs_here {
        return None;
    }
    let candidates: Vec<(&String, &crate::member::cache::PodRecord)> = obs
        .iter()
        .filter(|(name, o)| name.as_str() != target && !o.fenced)
        .filter_map(|(name, _)| Some((name, views.get(name)?.federation.pods.get(&k)?)))
        .filter(|(_, p)| !p.gated() && p.ip.is_some() && p.phase != crate::member::cache::PodPhase::Ended)
        .collect();
    let (_, pod) = match candidates.as_slice() {
        [one] => *one,
        many => {
            let holding: Vec<_> = many.iter().filter(|(n, _)| obs[n.as_str()].written.contains(k)).collect();
            match holding.as_slice() {
                [one] => **one,
                _ => return None,
            }
        }
    };
    // As a member's EndpointSlice controller writes its own pods: `ready` never while
    // terminating, unless the Service publishes not-ready addresses.
    Some(EndpointRecord {
        ip: pod.ip.clone().unwrap_or_default(),
        ready: publish_not_ready || (pod.ready && !pod.deleting),
        serving: pod.ready,
        terminating: pod.deleting,
    })
}

/// Every endpoint `target` should list, by ordinal: one per ordinal that runs elsewhere.
/// `ready` follows the headless Service's `publishNotReadyAddresses`, read once here.
pub fn foreign_endpoints(
    fsts: &FederatedStatefulSet,
    target: &str,
    views: &BTreeMap<String, Arc<MemberView>>,
    obs: &Observed,
) -> BTreeMap<Ordinal, EndpointRecord> {
    let ordinals: BTreeSet<Ordinal> = obs
        .iter()
        .filter(|(name, o)| name.as_str() != target && !o.fenced)
        .filter_map(|(name, _)| views.get(name))
        .flat_map(|v| v.federation.pods.keys().copied())
        .collect();
    let publish_not_ready = headless_service(fsts).spec.and_then(|s| s.publish_not_ready_addresses).unwrap_or(false);
    ordinals.into_iter().filter_map(|k| Some((k, endpoint_for(publish_not_ready, target, k, views, obs)?))).collect()
}

/// Ports of the published slices: the headless Service's, with the protocol the apiserver
/// would default (so that a stored slice compares equal to the one spanset would write).
fn ports(fsts: &FederatedStatefulSet) -> Option<Vec<EndpointPort>> {
    let ports = headless_service(fsts).spec.and_then(|s| s.ports)?;
    Some(
        ports
            .into_iter()
            .map(|p| EndpointPort {
                name: p.name,
                port: Some(p.port),
                protocol: Some(p.protocol.unwrap_or_else(|| "TCP".into())),
                app_protocol: p.app_protocol,
            })
            .collect(),
    )
}

/// spanset's slice of chunk `chunk` in a member, listing `endpoints` (ordinal → endpoint):
/// labelled as the headless Service's (`kubernetes.io/service-name`), managed by spanset (so
/// the member's EndpointSlice controller leaves it alone), with spanset's ownership labels and
/// the writer's term (which the member's admission policy holds stale writers to).
pub fn endpoint_slice(
    fsts: &FederatedStatefulSet,
    chunk: u32,
    endpoints: &BTreeMap<Ordinal, EndpointRecord>,
    term: u64,
) -> EndpointSlice {
    let mut labels = ownership_labels(fsts);
    labels.insert(SERVICE_NAME.into(), fsts.spec.template.service_name.clone());
    labels.insert(SLICE_MANAGED_BY.into(), SLICE_MANAGER.into());
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(slice_name(&fsts.name_any(), chunk)),
            namespace: fsts.namespace(),
            labels: Some(labels),
            annotations: Some(crate::leadership::written_by::stamps(term)),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: endpoints
            .iter()
            .map(|(k, e)| Endpoint {
                addresses: vec![e.ip.clone()],
                hostname: Some(pod_name(fsts, *k)),
                conditions: Some(EndpointConditions {
                    ready: Some(e.ready),
                    serving: Some(e.serving),
                    terminating: Some(e.terminating),
                }),
                ..Default::default()
            })
            .collect(),
        ports: ports(fsts),
    }
}

/// The slice writes of one reconcile. In each member that answers, is not fenced and whose
/// published slices are known: with `EndpointSlices` and the member in `placed` (it holds the
/// Service), the slices of [`foreign_endpoints`], chunked; otherwise none, so that spanset's
/// slices are deleted (mode `None` or `MultiClusterServices`, a member left the placement).
/// A slice is written only when its endpoints or ports differ from what is stored (never
/// only to carry a newer term), and an IPv6 pod (not published: one address type per slice)
/// is left out.
pub fn slice_writes(
    fsts: &FederatedStatefulSet,
    views: &BTreeMap<String, Arc<MemberView>>,
    obs: &Observed,
    placed: &[String],
    term: u64,
) -> Vec<SliceWrite> {
    let publish = Network::mode(fsts.spec.network.as_ref()) == NetworkMode::EndpointSlices;
    let mut out = Vec::new();
    for (target, o) in obs {
        let Some(view) = views.get(target).filter(|v| v.synced && v.slices_known) else { continue };
        if !o.reachable || o.fenced {
            continue;
        }
        let mut chunks: BTreeMap<u32, BTreeMap<Ordinal, EndpointRecord>> = BTreeMap::new();
        if publish && placed.contains(target) {
            for (k, e) in foreign_endpoints(fsts, target, views, obs) {
                if e.ip.parse::<std::net::Ipv4Addr>().is_ok() {
                    chunks.entry(k / ENDPOINTS_PER_SLICE).or_default().insert(k, e);
                }
            }
        }
        let stored = &view.federation.published;
        for (chunk, endpoints) in &chunks {
            let slice = endpoint_slice(fsts, *chunk, endpoints, term);
            let name = slice.name_any();
            let change = match stored.get(&name) {
                None => SliceChange::Create(Box::new(slice)),
                Some(s) if s.deleting => continue,
                Some(s) if is_current(s, &slice) => continue,
                Some(s) => SliceChange::Replace { slice: Box::new(slice), rv: s.rv },
            };
            out.push(SliceWrite { cluster: target.clone(), name, change });
        }
        for (name, s) in stored {
            let wanted = chunks.keys().any(|c| slice_name(&fsts.name_any(), *c) == *name);
            if !wanted && !s.deleting {
                out.push(SliceWrite {
                    cluster: target.clone(),
                    name: name.clone(),
                    change: SliceChange::Delete { uid: s.uid.clone() },
                });
            }
        }
    }
    out
}

/// Whether the stored slice lists what `wanted` lists (endpoints, ports, Service).
fn is_current(stored: &SliceRecord, wanted: &EndpointSlice) -> bool {
    SliceRecord::of(wanted).is_some_and(|(_, _, w)| {
        w.endpoints == stored.endpoints && w.ports == stored.ports && w.service == stored.service
    })
}

/// Whether spanset's slices in this member may still name ordinal k, which holds the start
/// of k's pod there (see the module doc). Unknown slices (their watch has not listed) count
/// as naming it while the federation publishes; with publishing off, only a slice seen
/// naming k holds it (one left over from before the mode changed, until it is deleted).
pub fn names_ordinal(fsts: &FederatedStatefulSet, view: &MemberView, k: Ordinal) -> bool {
    if !view.slices_known {
        return Network::mode(fsts.spec.network.as_ref()) == NetworkMode::EndpointSlices;
    }
    let name = pod_name(fsts, k);
    view.federation.published.values().any(|s| s.endpoints.contains_key(&name))
}

/// The ServiceExport of the headless Service (named like it), when the federation's mode is
/// `MultiClusterServices`; `None` otherwise (one spanset wrote earlier is then deleted).
pub fn service_export(fsts: &FederatedStatefulSet, term: u64) -> Option<kube::api::DynamicObject> {
    if Network::mode(fsts.spec.network.as_ref()) != NetworkMode::MultiClusterServices {
        return None;
    }
    let mut export = kube::api::DynamicObject::new(&fsts.spec.template.service_name, &service_export_resource());
    export.metadata.namespace = fsts.namespace();
    export.metadata.labels = Some(ownership_labels(fsts));
    export.metadata.annotations = Some(crate::leadership::written_by::stamps(term));
    Some(export)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::cache::{PodPhase, PodRecord};
    use spanset_plan::{ClusterObservation, Slice};

    fn pod(k: Ordinal, ready: bool) -> PodRecord {
        PodRecord {
            uid: format!("p{k}"),
            node: Some("node-1".into()),
            phase: PodPhase::Running,
            ready,
            deleting: false,
            rv: 5,
            gates: vec![],
            revision: None,
            ready_since: None,
            ready_seen: None,
            trouble: None,
            ip: Some(format!("10.0.0.{k}")),
            owner: None,
            labelled: true,
            guard: None,
        }
    }

    /// Members running `[start, start+n)` each, all Ready and reported, none published yet.
    struct World {
        fsts: FederatedStatefulSet,
        views: BTreeMap<String, MemberView>,
        obs: Observed,
    }

    impl World {
        fn new(slices: &[(&str, u32, u32)]) -> Self {
            let names: Vec<String> = slices.iter().map(|(n, ..)| n.to_string()).collect();
            let fsts = spanset_api::example(&names);
            let mut views = BTreeMap::new();
            let mut obs = Observed::new();
            for (name, start, n) in slices {
                let mut v = MemberView { synced: true, slices_known: true, ..Default::default() };
                Arc::make_mut(&mut v.federation).pods = (*start..start + n).map(|k| (k, pod(k, true))).collect();
                views.insert(name.to_string(), v);
                obs.insert(
                    name.to_string(),
                    ClusterObservation::settled(Slice { start: *start, replicas: *n, ..Slice::empty() }),
                );
            }
            Self { fsts, views, obs }
        }

        fn arcs(&self) -> BTreeMap<String, Arc<MemberView>> {
            self.views.iter().map(|(n, v)| (n.clone(), Arc::new(v.clone()))).collect()
        }

        fn placed(&self) -> Vec<String> {
            self.views.keys().cloned().collect()
        }

        fn writes(&self) -> Vec<SliceWrite> {
            slice_writes(&self.fsts, &self.arcs(), &self.obs, &self.placed(), 3)
        }

        /// Applies every write to the views, as the watchers would report them.
        fn apply(&mut self, writes: &[SliceWrite]) {
            for w in writes {
                let published = &mut Arc::make_mut(&mut self.views.get_mut(&w.cluster).unwrap().federation).published;
                match &w.change {
                    SliceChange::Create(s) | SliceChange::Replace { slice: s, .. } => {
                        let (_, name, mut r) = SliceRecord::of(s).unwrap();
                        r.uid = format!("uid-{name}");
                        r.rv += 1;
                        published.insert(name, r);
                    }
                    SliceChange::Delete { .. } => {
                        published.remove(&w.name);
                    }
                }
            }
        }

        /// `hostname → ip` of the ready endpoints spanset's slices list in `member`.
        fn listed(&self, member: &str) -> BTreeMap<String, String> {
            self.views[member]
                .federation
                .published
                .values()
                .flat_map(|s| s.endpoints.iter())
                .filter(|(_, e)| e.ready)
                .map(|(h, e)| (h.clone(), e.ip.clone()))
                .collect()
        }
    }

    #[test]
    fn each_member_lists_exactly_the_pods_of_the_others_and_a_settled_world_writes_nothing() {
        let mut w = World::new(&[("east", 0, 2), ("west", 2, 2), ("south", 4, 2)]);
        let writes = w.writes();
        assert_eq!(writes.len(), 3, "one slice per member: {writes:?}");
        let SliceChange::Create(slice) = &writes[0].change else { panic!("a create: {writes:?}") };
        let v = serde_json::to_value(slice).unwrap();
        assert_eq!(v["metadata"]["name"], "redis-spanset-0");
        assert_eq!(v["metadata"]["labels"]["kubernetes.io/service-name"], "redis");
        assert_eq!(v["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"], "spanset.dev");
        assert_eq!(v["metadata"]["labels"]["spanset.dev/federation"], "redis");
        assert_eq!(v["metadata"]["annotations"]["spanset.dev/term"], "3");
        assert_eq!(v["metadata"]["annotations"]["spanset.dev/written-by"], crate::leadership::written_by::version());
        assert_eq!(v["addressType"], "IPv4");
        assert_eq!(v["ports"], serde_json::json!([{"name": "redis", "port": 6379, "protocol": "TCP"}]));
        w.apply(&writes);
        let names = |m: &str| w.listed(m).into_keys().collect::<Vec<_>>();
        assert_eq!(names("east"), ["redis-2", "redis-3", "redis-4", "redis-5"]);
        assert_eq!(names("west"), ["redis-0", "redis-1", "redis-4", "redis-5"]);
        assert_eq!(w.listed("south")["redis-0"], "10.0.0.0");
        assert!(w.writes().is_empty(), "nothing changed, nothing is written: {:?}", w.writes());
    }

    #[test]
    fn a_fenced_member_s_pods_leave_every_record_and_it_is_not_written() {
        let mut w = World::new(&[("east", 0, 2), ("west", 2, 2)]);
        w.apply(&w.writes());
        w.obs.get_mut("west").unwrap().fenced = true;
        let writes = w.writes();
        assert!(writes.iter().all(|x| x.cluster == "east"), "{writes:?}");
        w.apply(&writes);
        assert!(w.listed("east").is_empty(), "{:?}", w.listed("east"));
    }

    #[test]
    fn a_moving_ordinal_swaps_address_in_one_write_and_never_lists_two() {
        let mut w = World::new(&[("east", 0, 2), ("west", 2, 2), ("south", 4, 2)]);
        w.apply(&w.writes());
        // redis-3 leaves west: terminating, then gone.
        Arc::make_mut(&mut w.views.get_mut("west").unwrap().federation).pods.get_mut(&3).unwrap().deleting = true;
        w.apply(&w.writes());
        Arc::make_mut(&mut w.views.get_mut("west").unwrap().federation).pods.remove(&3);
        let writes = w.writes();
        assert_eq!(writes.iter().filter(|x| x.cluster == "east").count(), 1);
        w.apply(&writes);
        assert!(!w.listed("east").contains_key("redis-3"));
        // It starts in east: east's records never name it (its own controller does).
        let mut p = pod(3, true);
        p.ip = Some("10.9.9.9".into());
        Arc::make_mut(&mut w.views.get_mut("east").unwrap().federation).pods.insert(3, p);
        let writes = w.writes();
        assert!(writes.iter().all(|x| x.cluster != "east"), "{writes:?}");
        w.apply(&writes);
        assert_eq!(w.listed("south")["redis-3"], "10.9.9.9");
        assert_eq!(w.listed("west")["redis-3"], "10.9.9.9");
        assert!(!w.listed("east").contains_key("redis-3"));
    }

    #[test]
    fn an_ordinal_reported_by_two_members_is_published_only_from_the_one_holding_it() {
        let mut w = World::new(&[("east", 0, 2), ("west", 2, 2), ("south", 4, 2)]);
        Arc::make_mut(&mut w.views.get_mut("east").unwrap().federation).pods.insert(3, pod(3, true));
        w.apply(&w.writes());
        assert_eq!(w.listed("south")["redis-3"], "10.0.0.3");
        // Neither holds it in its written slice: none is named.
        w.obs.get_mut("west").unwrap().written = Slice { start: 2, replicas: 1, ..Slice::empty() };
        w.apply(&w.writes());
        assert!(!w.listed("south").contains_key("redis-3"));
    }

    #[test]
    fn a_terminating_or_unready_pod_is_listed_as_its_member_would_list_it() {
        let mut w = World::new(&[("east", 0, 1), ("west", 1, 1)]);
        Arc::make_mut(&mut w.views.get_mut("west").unwrap().federation).pods.get_mut(&1).unwrap().deleting = true;
        w.apply(&w.writes());
        // spanset's headless Service publishes not-ready addresses, as StatefulSets' do.
        let e = &w.views["east"].federation.published["redis-spanset-0"].endpoints["redis-1"];
        assert!(e.ready && e.terminating, "{e:?}");
        let gated = Arc::make_mut(&mut w.views.get_mut("west").unwrap().federation).pods.get_mut(&1).unwrap();
        gated.deleting = false;
        gated.gates = vec![spanset_api::labels::IDENTITY_GATE.into()];
        w.apply(&w.writes());
        assert!(w.listed("east").is_empty(), "a gated pod is not published");
    }

    #[test]
    fn mode_none_deletes_what_was_published_and_a_member_left_out_of_the_placement_is_emptied() {
        let mut w = World::new(&[("east", 0, 2), ("west", 2, 2)]);
        w.apply(&w.writes());
        let writes = slice_writes(&w.fsts, &w.arcs(), &w.obs, &["east".to_string()], 3);
        assert_eq!(writes.len(), 1);
        assert!(
            matches!(&writes[0], SliceWrite { cluster, change: SliceChange::Delete { .. }, .. } if cluster == "west")
        );
        w.fsts.spec.network = Some(Network { mode: Some(NetworkMode::None) });
        let writes = w.writes();
        assert_eq!(writes.iter().filter(|x| matches!(x.change, SliceChange::Delete { .. })).count(), 2);
        w.apply(&writes);
        assert!(w.writes().is_empty());
    }

    #[test]
    fn an_ordinal_named_in_a_member_s_records_holds_its_start_there() {
        let mut w = World::new(&[("east", 0, 2), ("west", 2, 2)]);
        w.apply(&w.writes());
        assert!(names_ordinal(&w.fsts, &w.views["east"], 3));
        assert!(!names_ordinal(&w.fsts, &w.views["east"], 1));
        let mut unknown = w.views["east"].clone();
        unknown.slices_known = false;
        assert!(names_ordinal(&w.fsts, &unknown, 1), "unknown records may name anything");
        w.fsts.spec.network = Some(Network { mode: Some(NetworkMode::None) });
        assert!(!names_ordinal(&w.fsts, &unknown, 1), "with publishing off, only a seen record holds");
    }

    #[test]
    fn the_service_export_is_written_only_for_multi_cluster_services() {
        let mut f = spanset_api::example(&["east".into()]);
        assert!(service_export(&f, 1).is_none());
        f.spec.network = Some(Network { mode: Some(NetworkMode::MultiClusterServices) });
        let e = serde_json::to_value(service_export(&f, 4).unwrap()).unwrap();
        assert_eq!(
            (&e["apiVersion"], &e["kind"], &e["metadata"]["name"], &e["metadata"]["namespace"]),
            (&"multicluster.x-k8s.io/v1alpha1".into(), &"ServiceExport".into(), &"redis".into(), &"default".into())
        );
        assert_eq!(e["metadata"]["labels"]["spanset.dev/federation"], "redis");
    }
}
