//! The chaos drill's data markers: each ordinal's volume carries a marker naming that ordinal
//! (written through the sandbox's admin API), and wherever the ordinal's pod runs — after every
//! move the drill sees complete, and for every ordinal at the end — its volume must still carry
//! it. A pod on a volume with another ordinal's marker, or with none, means data was lost or
//! mixed up by a move.
//!
//! An ordinal is marked when it first runs outside any move. One removed by a scale-down is
//! forgotten (its next life may rightly start on a fresh volume) and marked anew when it returns.
//! Members under an API fault are not read; their checks wait until they answer.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::{Api, Client};
use spanset_sim::cli::ctl::Action as Admin;

use super::admin;

/// How long one read of a member may take before the check is retried later.
const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// Where an ordinal runs: the member and the PersistentVolume its pod's claim is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    cluster: String,
    pv: String,
}

/// The marker bookkeeping of one federation.
#[derive(Debug)]
pub struct Markers {
    admin: String,
    namespace: String,
    name: String,
    /// The name of the federation's first volume claim template (`data`).
    claim: String,
    /// Ordinals whose volume carries their marker.
    marked: BTreeSet<i32>,
    /// Ordinals to check, with the member to look in first.
    pending: BTreeMap<i32, Option<String>>,
    /// Ordinals found on a wrong volume (each reported once).
    wrong: BTreeSet<i32>,
    /// Checks done (one per ordinal found running and read).
    pub checked: u64,
    /// One line per ordinal found on a volume without its own marker.
    pub violations: Vec<String>,
}

impl Markers {
    /// Markers for the federation `namespace/name` with claim template `claim`.
    pub fn new(admin: &str, namespace: &str, name: &str, claim: &str) -> Self {
        Self {
            admin: admin.into(),
            namespace: namespace.into(),
            name: name.into(),
            claim: claim.into(),
            marked: BTreeSet::new(),
            pending: BTreeMap::new(),
            wrong: BTreeSet::new(),
            checked: 0,
            violations: Vec::new(),
        }
    }

    /// The marker of ordinal `k`.
    pub fn marker(&self, k: i32) -> String {
        format!("spanset-chaos:{}/{}-{k}", self.namespace, self.name)
    }

    /// How many ordinals carry their marker now.
    pub fn marked(&self) -> usize {
        self.marked.len()
    }

    /// Whether checks are still waiting.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Ordinal `k` finished a move to `to`: check it.
    pub fn moved(&mut self, k: i32, to: &str) {
        if self.marked.contains(&k) {
            self.pending.insert(k, Some(to.to_string()));
        }
    }

    /// The replicas dropped to `replicas`: forget the ordinals above.
    pub fn scaled_to(&mut self, replicas: i32) {
        self.marked.retain(|k| *k < replicas);
        self.pending.retain(|k, _| *k < replicas);
    }

    /// Every marked ordinal below `replicas` is to be checked (the final round).
    pub fn check_all(&mut self, replicas: i32) {
        for k in self.marked.iter().copied().filter(|k| *k < replicas) {
            self.pending.entry(k).or_insert(None);
        }
    }

    /// One round: marks unmarked ordinals below `replicas` that run outside a move, and runs
    /// the pending checks; members in `unreadable` are skipped.
    pub async fn round(
        &mut self,
        members: &BTreeMap<String, Client>,
        unreadable: &BTreeSet<String>,
        replicas: i32,
        moving: &BTreeSet<i32>,
    ) {
        let unmarked: Vec<i32> = (0..replicas).filter(|k| !self.marked.contains(k) && !moving.contains(k)).collect();
        for k in unmarked {
            let Ok(places) = self.locate(members, unreadable, k, None).await else { continue };
            if let [place] = places.as_slice()
                && self.write(place, k).await.is_ok()
            {
                self.marked.insert(k);
            }
        }
        let pending: Vec<(i32, Option<String>)> = self.pending.iter().map(|(k, h)| (*k, h.clone())).collect();
        for (k, hint) in pending {
            let Ok(places) = self.locate(members, unreadable, k, hint.as_deref()).await else { continue };
            if places.is_empty() {
                continue;
            }
            let mut read_all = true;
            for p in &places {
                match self.read(p).await {
                    Ok(data) => {
                        self.checked += 1;
                        let want = self.marker(k);
                        if data != want && self.wrong.insert(k) {
                            self.violations.push(format!(
                                "ordinal {k} runs in {} on PersistentVolume {} holding {data:?}, not its own {want:?}",
                                p.cluster, p.pv
                            ));
                        }
                    }
                    Err(_) => read_all = false,
                }
            }
            if read_all {
                self.pending.remove(&k);
            }
        }
    }

    /// Whether the members run exactly ordinals `0..replicas`, each once, Running and Ready and
    /// not being deleted: the ground truth behind a status that says Ready (which a paused
    /// leader leaves stale).
    pub async fn census(&self, members: &BTreeMap<String, Client>, replicas: i32) -> Result<bool, String> {
        let lp = kube::api::ListParams::default().labels(&format!("spanset.dev/federation={}", self.name));
        let mut seen: BTreeMap<i32, usize> = BTreeMap::new();
        for client in members.values() {
            let pods: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
            for p in timed(pods.list(&lp)).await?.items {
                let Some(k) = p.metadata.name.as_deref().and_then(|n| n.strip_prefix(&format!("{}-", self.name)))
                else {
                    continue;
                };
                let Ok(k) = k.parse::<i32>() else { continue };
                let status = p.status.unwrap_or_default();
                let ready =
                    status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True");
                let running = status.phase.as_deref() == Some("Running") && p.metadata.deletion_timestamp.is_none();
                if running && ready {
                    *seen.entry(k).or_default() += 1;
                } else {
                    // A pod starting, stopping or stuck: not settled yet.
                    return Ok(false);
                }
            }
        }
        Ok((0..replicas).all(|k| seen.get(&k) == Some(&1)) && seen.keys().all(|k| *k < replicas))
    }

    /// Where ordinal `k` runs now (a Running pod not being deleted, and its claim's PV), in
    /// every readable member; `Err` when a member could not be read.
    async fn locate(
        &self,
        members: &BTreeMap<String, Client>,
        unreadable: &BTreeSet<String>,
        k: i32,
        hint: Option<&str>,
    ) -> Result<Vec<Place>, String> {
        let pod_name = format!("{}-{k}", self.name);
        let claim = format!("{}-{}-{k}", self.claim, self.name);
        let mut order: Vec<&String> = members.keys().collect();
        order.sort_by_key(|c| Some(c.as_str()) != hint);
        let mut out = Vec::new();
        for cluster in order {
            if unreadable.contains(cluster) {
                return Err(format!("{cluster} is under a fault"));
            }
            let client = &members[cluster];
            let pods: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
            let pod = timed(pods.get_opt(&pod_name)).await?;
            let running = pod.is_some_and(|p| {
                p.metadata.deletion_timestamp.is_none() && p.status.and_then(|s| s.phase).as_deref() == Some("Running")
            });
            if !running {
                continue;
            }
            let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &self.namespace);
            let pv = timed(pvcs.get_opt(&claim)).await?.and_then(|c| c.spec?.volume_name);
            match pv {
                Some(pv) => out.push(Place { cluster: cluster.clone(), pv }),
                None => return Err(format!("{claim} in {cluster} is not bound")),
            }
        }
        Ok(out)
    }

    async fn read(&self, p: &Place) -> Result<String, String> {
        let doc =
            admin(&self.admin, Admin::Volume { cluster: p.cluster.clone(), pv: p.pv.clone(), write: None }).await?;
        let v: serde_json::Value = serde_json::from_str(&doc).map_err(|e| format!("volume answer: {e}"))?;
        Ok(v["volume"]["data"].as_str().unwrap_or_default().to_string())
    }

    async fn write(&self, p: &Place, k: i32) -> Result<(), String> {
        let write = Some(self.marker(k));
        admin(&self.admin, Admin::Volume { cluster: p.cluster.clone(), pv: p.pv.clone(), write }).await.map(drop)
    }
}

async fn timed<T>(fut: impl std::future::Future<Output = Result<T, kube::Error>>) -> Result<T, String> {
    match tokio::time::timeout(READ_TIMEOUT, fut).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}
