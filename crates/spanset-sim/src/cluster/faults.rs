//! Faults injected into one simulated cluster through the admin API: network partitions
//! (refused or hung), latency, error responses, a server that silently drops `.spec.ordinals`
//! (one without the StatefulSetStartOrdinal feature), node outages (a lost network or kubelet,
//! or a power-off), failing readiness and images marked (un)pullable.
//!
//! Owned by the [`crate::cluster::Cluster`]; read on every request by the server and handlers,
//! written only by the admin API. Every random choice of the cluster comes from its seeded
//! generators, so a run with the same seed repeats: injected errors from one, uids and generated
//! names from another, so that how many objects a run creates does not change which requests
//! fail, nor the reverse.

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering},
    time::Instant,
};

use parking_lot::Mutex;
use rand::{Rng, SeedableRng, rngs::StdRng};
use tokio::sync::watch;

/// How the cluster's network behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// Normal service.
    None,
    /// Connections are refused (the listener is closed) and open ones are cut.
    Refuse,
    /// Connections are accepted and requests are never answered; open watches stall.
    Hang,
}

/// An error response injected at some rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorRate {
    /// Probability of answering a request with the error, 0.0 to 1.0.
    pub rate: f64,
    /// The HTTP code to answer with.
    pub code: u16,
    /// Which requests get it.
    pub spread: Spread,
}

/// How injected errors fall among the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// Each request draws from the cluster's seeded error generator: a chaos run's errors,
    /// repeatable by seed.
    Seeded,
    /// Evenly, with no chance in it, starting with an error: at 0.5 every other request
    /// fails, at 0.25 every fourth. For tests whose claim must not rest on a lucky draw.
    Even,
}

impl ErrorRate {
    /// Errors drawn from the cluster's seeded error generator.
    pub fn seeded(rate: f64, code: u16) -> Self {
        Self { rate, code, spread: Spread::Seeded }
    }

    /// Errors spread evenly (see [`Spread::Even`]).
    pub fn even(rate: f64, code: u16) -> Self {
        Self { rate, code, spread: Spread::Even }
    }
}

/// How a node is out: what a StatefulSet fears depends on it (the book's at-most-one chapter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeOutage {
    /// The node lost its network or its kubelet: nothing on it can be observed or changed
    /// through the API, but its containers keep running until the kubelet returns and stops
    /// them (or forever, if it never returns).
    Unreachable,
    /// The machine powered off: its containers stopped at that instant; when it powers on, its
    /// kubelet restarts the containers of the pods still bound to it and not being deleted.
    PoweredOff,
}

/// One node's outage: its kind and when it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    /// Network/kubelet loss or power-off.
    pub kind: NodeOutage,
    /// When it began (monotonic, for the node controller's grace periods).
    pub since: Instant,
    /// When it began (wall clock, for the ledger).
    pub at: jiff::Timestamp,
}

/// The fault state of one cluster.
pub struct Faults {
    partition: AtomicU8,
    /// A refused partition cuts only clients from outside the cluster: its own pods still reach
    /// its API through the in-cluster listener (the network between a controller and a member
    /// fails, not the member's own).
    outside_only: AtomicBool,
    latency_ms: AtomicU64,
    errors: Mutex<Option<ErrorRate>>,
    drop_ordinals: AtomicBool,
    kruise_drops_ordinals: AtomicBool,
    /// Uids, generated names and ClusterIPs.
    rng: Mutex<StdRng>,
    /// Injected errors ([`Spread::Seeded`]), kept apart from `rng`.
    error_rng: Mutex<StdRng>,
    /// Requests that drew an error since the rate was set (for [`Spread::Even`]).
    error_draws: AtomicU64,
    /// Errors injected since the cluster started.
    injected: AtomicU64,
    /// Bumped whenever the partition changes, so connections and watches can react.
    changed: watch::Sender<Partition>,
    /// Bumped on every fault change the simulated components act on (outages, forced
    /// readiness, image pulls, partitions), so that their loops, asleep while nothing changes,
    /// wake for it (see [`crate::cluster::controller_loop`]).
    pokes: watch::Sender<u64>,
    /// Nodes that are out, with how and since when.
    nodes_down: Mutex<BTreeMap<String, Outage>>,
    /// Outages that ended and that the kubelet task has not handled yet (its returning
    /// kubelets), in the order they ended.
    returned: Mutex<Vec<(String, Outage)>>,
    /// Pods whose readiness probe is forced, by namespace and name.
    pod_ready: Mutex<BTreeMap<(String, String), bool>>,
    /// Images marked pullable or not, by qualified reference (see
    /// [`crate::cluster::images`]).
    images: Mutex<BTreeMap<String, bool>>,
    /// Requests a hang holds now (`METHOD PATH`), by arrival number: what a hung member will
    /// still serve when it heals (a write in flight), for tests to see.
    held: Mutex<BTreeMap<u64, String>>,
    arrivals: AtomicU64,
    /// How far the cluster's clock runs ahead (negative: behind) of the sandbox's, in
    /// milliseconds (see [`crate::cluster::Cluster::clock`]).
    clock_offset_ms: AtomicI64,
}

/// Removes a held request from the list when it is served or its connection goes.
struct Held<'a> {
    faults: &'a Faults,
    id: u64,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.faults.held.lock().remove(&self.id);
    }
}

/// The key of a cluster's generator: the sandbox's seed, then the cluster's name.
///
/// Clusters of one sandbox share a seed and differ by name, so the key must keep every name
/// apart: names up to 16 bytes are copied whole (a DNS label holds no NUL, so the zero padding
/// cannot make two of them equal); a longer one keeps its first 8 bytes and ends in a 64-bit
/// hash of the whole name. Distinct keys give independent ChaCha streams, hence distinct uids.
/// Folding the name into the seed by arithmetic did not: `(seed ^ byte) * prime` sends seed 8
/// with "a" and seed 10 with "c" to one value.
fn generator_key(seed: u64, name: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let name = name.as_bytes();
    if name.len() <= 16 {
        key[8..8 + name.len()].copy_from_slice(name);
    } else {
        key[8..16].copy_from_slice(&name[..8]);
        // FNV-1a over the whole name, its length mixed in; never all zero for a real name.
        let hash =
            name.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
        key[16..24].copy_from_slice(&hash.to_le_bytes());
        key[24..32].copy_from_slice(&(name.len() as u64).to_le_bytes());
    }
    key
}

/// Mixed into a plain seed for the error generator, so that it and the other generator of
/// [`Faults::new`] start from different seeds.
const ERROR_STREAM: u64 = 0x6572_726f_7273_0001;

/// The error generator's key, from the cluster's [`generator_key`]: its last byte flipped,
/// which no key of `generator_key` has set (it is zero padding, or the top byte of a name's
/// length), so it is no other cluster's key either.
fn error_key(mut key: [u8; 32]) -> [u8; 32] {
    key[31] ^= 0x80;
    key
}

impl Faults {
    /// No faults; random choices drawn from `seed`.
    pub fn new(seed: u64) -> Self {
        Self::with_rngs(StdRng::seed_from_u64(seed), StdRng::seed_from_u64(seed ^ ERROR_STREAM))
    }

    /// No faults; the random choices of cluster `name` in a sandbox seeded with `seed`, which
    /// repeat run to run and differ from those of every other cluster of the sandbox.
    pub fn for_cluster(seed: u64, name: &str) -> Self {
        let key = generator_key(seed, name);
        Self::with_rngs(StdRng::from_seed(key), StdRng::from_seed(error_key(key)))
    }

    fn with_rngs(rng: StdRng, error_rng: StdRng) -> Self {
        Self {
            partition: AtomicU8::new(0),
            outside_only: AtomicBool::new(false),
            latency_ms: AtomicU64::new(0),
            errors: Mutex::new(None),
            drop_ordinals: AtomicBool::new(false),
            kruise_drops_ordinals: AtomicBool::new(false),
            rng: Mutex::new(rng),
            error_rng: Mutex::new(error_rng),
            error_draws: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            changed: watch::channel(Partition::None).0,
            pokes: watch::channel(0).0,
            nodes_down: Mutex::new(BTreeMap::new()),
            returned: Mutex::new(Vec::new()),
            pod_ready: Mutex::new(BTreeMap::new()),
            images: Mutex::new(BTreeMap::new()),
            held: Mutex::new(BTreeMap::new()),
            arrivals: AtomicU64::new(0),
            clock_offset_ms: AtomicI64::new(0),
        }
    }

    /// The current partition.
    pub fn partition(&self) -> Partition {
        match self.partition.load(Ordering::SeqCst) {
            1 => Partition::Refuse,
            2 => Partition::Hang,
            _ => Partition::None,
        }
    }

    /// The partition as a client sees it: one of the cluster's own pods (`in_cluster`) is not
    /// cut off by a partition from the outside only.
    pub fn partition_for(&self, in_cluster: bool) -> Partition {
        match self.partition() {
            Partition::Refuse if in_cluster && self.outside_only.load(Ordering::SeqCst) => Partition::None,
            p => p,
        }
    }

    /// Refuses connections from outside the cluster only (see `outside_only`); its pods keep
    /// reaching its API.
    pub fn set_partition_outside(&self) {
        self.store_partition(Partition::Refuse, true);
    }

    /// Sets the partition (`Partition::None` heals), for every client alike.
    pub fn set_partition(&self, p: Partition) {
        self.store_partition(p, false);
    }

    fn store_partition(&self, p: Partition, outside_only: bool) {
        self.outside_only.store(outside_only, Ordering::SeqCst);
        let code = match p {
            Partition::None => 0,
            Partition::Refuse => 1,
            Partition::Hang => 2,
        };
        self.partition.store(code, Ordering::SeqCst);
        self.changed.send_replace(p);
        self.poke();
    }

    /// Wakes every simulated component of the cluster for one sweep, though nothing changed
    /// (`spanset sim-ctl resync`): tests count sweeps to make "nothing happened" a fact, and
    /// idle components sleep (see [`crate::cluster::controller_loop`]).
    pub fn resync(&self) {
        self.poke();
    }

    /// Wakes the cluster's components: a fault they act on changed.
    fn poke(&self) {
        self.pokes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Follows the fault changes the components act on (see `pokes`).
    pub fn pokes(&self) -> watch::Receiver<u64> {
        self.pokes.subscribe()
    }

    /// Follows partition changes.
    pub fn subscribe(&self) -> watch::Receiver<Partition> {
        self.changed.subscribe()
    }

    /// Waits while the cluster is hung (a request or watch that arrives during a hang never
    /// completes before the heal).
    pub async fn wait_while_hung(&self) {
        let mut rx = self.subscribe();
        let _ = rx.wait_for(|p| *p != Partition::Hang).await;
    }

    /// Like [`Faults::wait_while_hung`], listing `request` (`METHOD PATH`) among the held
    /// requests meanwhile (see [`Faults::held`]).
    pub async fn hold_while_hung(&self, request: &str) {
        if self.partition() != Partition::Hang {
            return;
        }
        let id = self.arrivals.fetch_add(1, Ordering::SeqCst);
        self.held.lock().insert(id, request.to_string());
        let _held = Held { faults: self, id };
        self.wait_while_hung().await;
    }

    /// The requests a hang holds now, oldest first, as `METHOD PATH`.
    pub fn held(&self) -> Vec<String> {
        self.held.lock().values().cloned().collect()
    }

    /// Added delay per request.
    pub fn latency(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.latency_ms.load(Ordering::SeqCst))
    }

    /// Sets how far the cluster's clock runs ahead of the sandbox's (negative: behind). Kept
    /// by a heal: a skewed clock is a property of the cluster, not a fault of its network.
    pub fn set_clock_offset(&self, offset: std::time::Duration, behind: bool) {
        let ms = i64::try_from(offset.as_millis()).unwrap_or(i64::MAX);
        self.clock_offset_ms.store(if behind { -ms } else { ms }, Ordering::SeqCst);
    }

    /// How far the cluster's clock runs ahead of the sandbox's, in milliseconds.
    pub fn clock_offset_ms(&self) -> i64 {
        self.clock_offset_ms.load(Ordering::SeqCst)
    }

    /// Sets the added delay per request.
    pub fn set_latency_ms(&self, ms: u64) {
        self.latency_ms.store(ms, Ordering::SeqCst);
    }

    /// Sets or clears the error injection; an even spread starts again with an error.
    pub fn set_errors(&self, errors: Option<ErrorRate>) {
        let mut current = self.errors.lock();
        self.error_draws.store(0, Ordering::SeqCst);
        *current = errors;
    }

    /// The injected error for this request, if one is drawn.
    pub fn draw_error(&self) -> Option<u16> {
        let e = (*self.errors.lock())?;
        let hit = match e.spread {
            Spread::Seeded => self.error_rng.lock().random::<f64>() < e.rate,
            Spread::Even => {
                // Request i fails when the running total of `rate` crosses an integer: the
                // first does (at any rate above zero), then one in every 1/rate.
                let i = self.error_draws.fetch_add(1, Ordering::SeqCst) as f64;
                ((i + 1.0) * e.rate).ceil() > (i * e.rate).ceil()
            }
        };
        hit.then(|| {
            self.injected.fetch_add(1, Ordering::SeqCst);
            e.code
        })
    }

    /// How many requests were answered with an injected error since the cluster started.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    /// Whether StatefulSet writes lose `.spec.ordinals`.
    pub fn drops_ordinals(&self) -> bool {
        self.drop_ordinals.load(Ordering::SeqCst)
    }

    /// Makes StatefulSet writes lose (or keep) `.spec.ordinals`.
    pub fn set_drop_ordinals(&self, on: bool) {
        self.drop_ordinals.store(on, Ordering::SeqCst);
    }

    /// Whether Advanced StatefulSet writes lose `.spec.ordinals` (an OpenKruise too old for
    /// them, whose schema prunes the field).
    pub fn kruise_drops_ordinals(&self) -> bool {
        self.kruise_drops_ordinals.load(Ordering::SeqCst)
    }

    /// Makes Advanced StatefulSet writes lose (or keep) `.spec.ordinals`.
    pub fn set_kruise_drops_ordinals(&self, on: bool) {
        self.kruise_drops_ordinals.store(on, Ordering::SeqCst);
    }

    /// Stops (or restarts) a node's kubelet: no heartbeats, no pod updates, and its
    /// containers keep running ([`NodeOutage::Unreachable`]).
    pub fn set_node_down(&self, node: &str, down: bool) {
        if down {
            self.node_out(node, NodeOutage::Unreachable);
        } else {
            self.node_back(node);
        }
    }

    /// Takes a node out in the given way; a node already out stays out as it was.
    pub fn node_out(&self, node: &str, kind: NodeOutage) {
        let outage = Outage { kind, since: Instant::now(), at: jiff::Timestamp::now() };
        self.nodes_down.lock().entry(node.to_string()).or_insert(outage);
        self.poke();
    }

    /// Brings a node back (its kubelet returns, or its machine powers on); the kubelet task
    /// handles the return on its next sweep.
    pub fn node_back(&self, node: &str) {
        if let Some(outage) = self.nodes_down.lock().remove(node) {
            self.returned.lock().push((node.to_string(), outage));
        }
        self.poke();
    }

    /// When a node went out, if it is out.
    pub fn node_down_since(&self, node: &str) -> Option<Instant> {
        self.nodes_down.lock().get(node).map(|o| o.since)
    }

    /// Every node that is out, with its outage.
    pub fn outages(&self) -> Vec<(String, Outage)> {
        self.nodes_down.lock().iter().map(|(n, o)| (n.clone(), *o)).collect()
    }

    /// The outages that ended since the last call, oldest first (for the returning kubelets).
    pub fn take_returned(&self) -> Vec<(String, Outage)> {
        std::mem::take(&mut *self.returned.lock())
    }

    /// Forces a pod's readiness probe result (`None` lets the kubelet decide).
    pub fn set_pod_ready(&self, namespace: &str, pod: &str, ready: Option<bool>) {
        let key = (namespace.to_string(), pod.to_string());
        match ready {
            Some(r) => self.pod_ready.lock().insert(key, r),
            None => self.pod_ready.lock().remove(&key),
        };
        self.poke();
    }

    /// The forced readiness of a pod, if any.
    pub fn pod_ready(&self, namespace: &str, pod: &str) -> Option<bool> {
        self.pod_ready.lock().get(&(namespace.to_string(), pod.to_string())).copied()
    }

    /// Marks an image pullable or not in this cluster, overriding the name rule of
    /// [`crate::cluster::images`] (`nginx` and `docker.io/library/nginx:latest` are one
    /// image).
    pub fn set_image_pullable(&self, image: &str, pullable: bool) {
        self.images.lock().insert(super::images::qualified(image), pullable);
        self.poke();
    }

    /// Whether an image was marked pullable (`Some(true)`) or unpullable, if it was marked.
    pub fn image_pullable(&self, image: &str) -> Option<bool> {
        self.images.lock().get(&super::images::qualified(image)).copied()
    }

    /// A random string over `alphabet` from the cluster's seeded generator (generateName).
    pub fn random_suffix(&self, alphabet: &[u8], len: usize) -> String {
        let mut rng = self.rng.lock();
        (0..len).map(|_| alphabet[rng.random_range(0..alphabet.len())] as char).collect()
    }

    /// A number below `n` (at least 1) from the cluster's seeded generator (a Service's
    /// ClusterIP).
    pub fn random_below(&self, n: u32) -> u32 {
        self.rng.lock().random_range(0..n.max(1))
    }

    /// A version-4 UUID from the cluster's seeded generator, so a run is reproducible.
    pub fn random_uid(&self) -> String {
        let bytes: [u8; 16] = self.rng.lock().random();
        uuid::Builder::from_random_bytes(bytes).into_uuid().to_string()
    }

    /// Clears every fault.
    pub fn heal(&self) {
        self.set_partition(Partition::None);
        self.set_latency_ms(0);
        self.set_errors(None);
    }

    /// A JSON summary for the admin API.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "partition": format!("{:?}", self.partition()),
            "outsideOnly": self.outside_only.load(Ordering::SeqCst),
            "latencyMs": self.latency_ms.load(Ordering::SeqCst),
            "clockOffsetMs": self.clock_offset_ms(),
            "errors": (*self.errors.lock()).map(|e| serde_json::json!({"rate": e.rate, "code": e.code, "spread": format!("{:?}", e.spread)})),
            "dropOrdinals": self.drops_ordinals(),
            "kruiseDropsOrdinals": self.kruise_drops_ordinals(),
            "nodesDown": self.nodes_down.lock().keys().cloned().collect::<Vec<_>>(),
            "held": self.held(),
            "nodesPoweredOff": self.nodes_down.lock().iter().filter(|(_, o)| o.kind == NodeOutage::PoweredOff).map(|(n, _)| n.clone()).collect::<Vec<_>>(),
            "images": self.images.lock().iter().map(|(i, p)| serde_json::json!({"image": i, "pullable": p})).collect::<Vec<_>>(),
            "podReady": self.pod_ready.lock().iter().map(|((ns, p), r)| serde_json::json!({"namespace": ns, "pod": p, "ready": r})).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_hang_lists_the_requests_it_holds_until_they_are_served() {
        let faults = Arc::new(Faults::new(1));
        faults.hold_while_hung("GET /version").await;
        assert!(faults.held().is_empty(), "no hang: served at once, never listed");
        faults.set_partition(Partition::Hang);
        let held = {
            let faults = faults.clone();
            tokio::spawn(async move {
                faults.hold_while_hung("PUT /apis/apps/v1/namespaces/default/statefulsets/web").await
            })
        };
        let mut rx = faults.subscribe();
        while faults.held().is_empty() {
            tokio::task::yield_now().await;
        }
        assert_eq!(faults.held(), vec!["PUT /apis/apps/v1/namespaces/default/statefulsets/web".to_string()]);
        assert_eq!(faults.describe()["held"][0], "PUT /apis/apps/v1/namespaces/default/statefulsets/web");
        faults.set_partition(Partition::None);
        let _ = rx.wait_for(|p| *p == Partition::None).await;
        held.await.unwrap();
        assert!(faults.held().is_empty(), "served: no longer held");
    }
}
