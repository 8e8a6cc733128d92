//! The pod network of a simulated cluster: which pod CIDR each node gets, and which IP each new
//! pod gets from its node's CIDR.
//!
//! A flat multi-cluster network (VPC-native pods, Cilium ClusterMesh, Calico BGP) needs pod IPs
//! unique across clusters, so the clusters of one sandbox take disjoint `/16`s: cluster `i`
//! `10.(100+i).0.0/16` (see [`sandbox_pod_network`]), a cluster made alone `10.244.0.0/16`
//! (kubeadm's and kind's usual). Node `node-j` gets `10.x.j.0/24`, as the node IPAM controller
//! hands out `--node-cidr-mask-size=24` blocks.
//!
//! Addresses are handed out like the host-local IPAM plugin does: round-robin from the one after
//! the last given, skipping `.0`, `.1` (the bridge) and `.255`, and never an IP a pod of the
//! cluster still holds (a pod being deleted holds its IP until it is gone). A freed IP may be
//! given again later, as a real CNI does.

use std::{
    collections::{HashMap, HashSet},
    net::Ipv4Addr,
    sync::Arc,
};

use serde_json::Value;

/// The `/16` of a cluster made on its own (`Cluster::new`): kubeadm's and kind's default.
pub const DEFAULT_POD_NETWORK: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 0);

/// Lowest host number handed out in a node's `/24` (`.1` is the node's bridge).
const FIRST_HOST: u8 = 2;
/// Highest host number handed out (`.255` is the broadcast address).
const LAST_HOST: u8 = 254;

/// The pod `/16` of the `i`th cluster of a sandbox: `10.(100+i).0.0`, so that the clusters of
/// one sandbox never share a pod IP (wrapping after 156 clusters, far beyond any test). A
/// cluster whose pods run real processes takes a `/16` of `100.64.0.0/10` instead, routed from
/// this machine into the sandbox's pod network (see `processes::network`).
pub fn sandbox_pod_network(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 100 + (i % 156) as u8, 0, 0)
}

/// The `/24` pod CIDR of the node with index `node` (`node-j` → `j`) in the cluster's `/16`,
/// as `spec.podCIDR` spells it.
pub fn node_pod_cidr(network: Ipv4Addr, node: u32) -> String {
    let [a, b, ..] = network.octets();
    format!("{a}.{b}.{}.0/24", node % 256)
}

/// The `host`th address of a node's `/24`.
fn address(network: Ipv4Addr, node: u32, host: u8) -> Ipv4Addr {
    let [a, b, ..] = network.octets();
    Ipv4Addr::new(a, b, (node % 256) as u8, host)
}

/// The pod IPs of a cluster's nodes: who holds what, and where each node's round-robin stands.
/// Owned by the kubelet task; [`PodIps::refresh`] reads the pods at the start of each sweep.
#[derive(Debug)]
pub struct PodIps {
    /// The cluster's pod `/16`.
    network: Ipv4Addr,
    /// IPs held by pods that exist (their `status.podIP`), plus those handed out this sweep.
    held: HashSet<Ipv4Addr>,
    /// Node index → the host number handed out last.
    last: HashMap<u32, u8>,
}

impl PodIps {
    /// An allocator for the cluster's `/16`, nothing handed out yet.
    pub fn new(network: Ipv4Addr) -> Self {
        Self { network, held: HashSet::new(), last: HashMap::new() }
    }

    /// Takes note of the IPs the cluster's pods hold now; any other may be handed out again.
    pub fn refresh(&mut self, pods: &[Arc<Value>]) {
        self.held = pods
            .iter()
            .filter_map(|p| p.pointer("/status/podIP").and_then(Value::as_str))
            .filter_map(|ip| ip.parse().ok())
            .collect();
    }

    /// The next free IP of the node's `/24`, now held; `None` when every address is taken (the
    /// CNI fails the sandbox and the pod stays Pending).
    pub fn allocate(&mut self, node: u32) -> Option<Ipv4Addr> {
        let span = u16::from(LAST_HOST - FIRST_HOST) + 1;
        let last = self.last.get(&node).copied().unwrap_or(LAST_HOST);
        let start = u16::from(last.clamp(FIRST_HOST, LAST_HOST) - FIRST_HOST) + 1;
        let host = (0..span)
            .map(|k| FIRST_HOST + ((start + k) % span) as u8)
            .find(|h| !self.held.contains(&address(self.network, node, *h)))?;
        let ip = address(self.network, node, host);
        self.held.insert(ip);
        self.last.insert(node, host);
        Some(ip)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod_with_ip(ip: &str) -> Arc<Value> {
        Arc::new(json!({"status": {"podIP": ip}}))
    }

    #[test]
    fn the_clusters_of_a_sandbox_get_disjoint_networks_and_nodes_their_own_24() {
        assert_eq!(sandbox_pod_network(0), Ipv4Addr::new(10, 100, 0, 0));
        assert_eq!(sandbox_pod_network(2), Ipv4Addr::new(10, 102, 0, 0));
        assert_eq!(node_pod_cidr(sandbox_pod_network(1), 3), "10.101.3.0/24");
        assert_eq!(node_pod_cidr(DEFAULT_POD_NETWORK, 2), "10.244.2.0/24");
        let mut east = PodIps::new(sandbox_pod_network(0));
        let mut west = PodIps::new(sandbox_pod_network(1));
        assert_eq!(east.allocate(1), Some("10.100.1.2".parse().unwrap()));
        assert_eq!(west.allocate(1), Some("10.101.1.2".parse().unwrap()));
    }

    #[test]
    fn a_held_ip_is_never_handed_out_and_a_freed_one_comes_round_again() {
        let mut ips = PodIps::new(DEFAULT_POD_NETWORK);
        let mut given = Vec::new();
        for _ in 0..253 {
            given.push(ips.allocate(1).expect("a /24 has 253 pod addresses"));
        }
        let unique: HashSet<_> = given.iter().collect();
        assert_eq!(unique.len(), 253, "every address once");
        assert!(given.iter().all(|ip| (2..=254).contains(&ip.octets()[3])));
        assert_eq!(ips.allocate(1), None, "a full node has nothing left");
        assert!(ips.allocate(2).is_some(), "another node has its own /24");

        // All but two pods are gone: only their addresses are skipped.
        ips.refresh(&[pod_with_ip("10.244.1.2"), pod_with_ip("10.244.1.4")]);
        let next: Vec<Ipv4Addr> = (0..3).filter_map(|_| ips.allocate(1)).collect();
        assert_eq!(next, ["10.244.1.3", "10.244.1.5", "10.244.1.6"].map(|s| s.parse::<Ipv4Addr>().unwrap()));
    }

    #[test]
    fn many_incarnations_never_share_an_ip_with_a_live_pod() {
        // 3 live pods on one node, each replaced 1000 times: the new incarnation never gets an
        // IP that one of the other live pods holds.
        let mut ips = PodIps::new(DEFAULT_POD_NETWORK);
        let mut live: Vec<Ipv4Addr> = (0..3).map(|_| ips.allocate(1).unwrap()).collect();
        for round in 0..3000 {
            let pods: Vec<Arc<Value>> = live.iter().map(|ip| pod_with_ip(&ip.to_string())).collect();
            let slot = round % 3;
            let others: Vec<Arc<Value>> =
                pods.iter().enumerate().filter(|(i, _)| *i != slot).map(|(_, p)| p.clone()).collect();
            ips.refresh(&others);
            let fresh = ips.allocate(1).unwrap();
            assert!(!live.iter().enumerate().any(|(i, ip)| i != slot && *ip == fresh), "round {round}: {fresh}");
            live[slot] = fresh;
        }
    }
}
