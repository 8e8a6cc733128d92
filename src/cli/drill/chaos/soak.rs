//! The soak's state and its moves: performs the schedule's steps through the admin API, the
//! host and the controllers the drill started, follows the federation's status and the
//! ledger's arrivals, runs the marker rounds, heals everything at the end and waits for the
//! federation to settle. Owned by the drill's one task.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::json;
use spanset_api::FederatedStatefulSet;
use spanset_sim::cli::ctl::Action as Admin;

use super::{
    controllers::Controllers,
    markers::Markers,
    moves,
    schedule::{Action, Category, Step},
};
use crate::cli::drill::admin;

/// What the drill has seen and done so far.
pub struct Soak {
    /// The federations of its namespace in the host.
    pub api: Api<FederatedStatefulSet>,
    /// The federation.
    pub name: String,
    /// The sandbox admin API.
    pub admin: String,
    /// A client of each member (its context of the kubeconfig).
    pub members: BTreeMap<String, Client>,
    /// The data markers.
    pub markers: Markers,
    /// The controllers the drill started, if any.
    pub controllers: Option<Controllers>,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Spec changes made, by kind.
    pub spec: BTreeMap<String, u64>,
    /// Steps that failed.
    pub errors: Vec<String>,
    /// Members whose API is under a fault now (not read for markers).
    pub api_faulted: BTreeSet<String>,
    /// Nodes down now.
    pub nodes_down: BTreeSet<(String, String)>,
    /// Moves in the status at the last look: ordinal → destination.
    pub moving: BTreeMap<i32, String>,
    /// From when the ledger's arrivals count (the soak's start).
    pub since: Option<jiff::Timestamp>,
    /// Arrivals counted: ordinal and start of its run.
    pub arrived: BTreeSet<(i32, jiff::Timestamp)>,
    /// The replicas the drill last set (or found).
    pub replicas: i32,
    /// The last progress line printed (each is printed once).
    pub last_line: String,
}

impl Soak {
    /// Performs one step; a failure is recorded, not fatal.
    pub async fn perform(&mut self, step: &Step) {
        eprintln!("{step}");
        if let Some((cat, kind)) = step.action.kind() {
            let counts = if cat == Category::Fault { &mut self.faults } else { &mut self.spec };
            *counts.entry(kind.to_string()).or_default() += 1;
        }
        if let Err(e) = self.act(&step.action).await {
            eprintln!("  failed: {e}");
            self.errors.push(format!("{step}: {e}"));
        }
    }

    async fn act(&mut self, action: &Action) -> Result<(), String> {
        let post = |action: Admin| admin(&self.admin, action);
        match action {
            Action::Weights { weights } => {
                let f = self.api.get(&self.name).await.map_err(|e| e.to_string())?;
                let mut clusters = f.spec.placement.clusters.clone();
                for c in &mut clusters {
                    if let Some((_, w)) = weights.iter().find(|(n, _)| *n == c.name) {
                        c.weight = Some(*w);
                    }
                }
                self.patch(json!({"spec": {"placement": {"clusters": clusters}}})).await?;
            }
            Action::Replicas { replicas } => {
                self.patch(json!({"spec": {"replicas": replicas}})).await?;
                self.replicas = *replicas;
                self.markers.scaled_to(*replicas);
            }
            Action::Image { image } => {
                let f = self.api.get(&self.name).await.map_err(|e| e.to_string())?;
                let v = serde_json::to_value(&f).map_err(|e| e.to_string())?;
                let mut containers = v
                    .pointer("/spec/template/template/spec/containers")
                    .cloned()
                    .ok_or("the template has no containers")?;
                containers[0]["image"] = image.as_str().into();
                self.patch(json!({"spec": {"template": {"template": {"spec": {"containers": containers}}}}})).await?;
            }
            Action::Partition { cluster, hang } => {
                self.api_faulted.insert(cluster.clone());
                post(Admin::Partition { cluster: cluster.clone(), hang: *hang, outside_only: false }).await?;
            }
            Action::Latency { cluster, ms } => {
                self.api_faulted.insert(cluster.clone());
                post(Admin::Latency { cluster: cluster.clone(), ms: *ms }).await?;
            }
            Action::Errors { cluster, percent } => {
                self.api_faulted.insert(cluster.clone());
                let rate = *percent as f64 / 100.0;
                post(Admin::Errors { cluster: cluster.clone(), rate, code: 500 }).await?;
            }
            Action::Heal { cluster } => {
                post(Admin::Heal { cluster: cluster.clone() }).await?;
                self.api_faulted.remove(cluster);
            }
            Action::CutWatches { cluster } => {
                post(Admin::CutWatches { cluster: cluster.clone() }).await?;
            }
            Action::ExpireWatches { cluster } => {
                post(Admin::ExpireWatches { cluster: cluster.clone() }).await?;
            }
            Action::NodeDown { cluster, node, power_off } => {
                post(Admin::NodeDown { cluster: cluster.clone(), node: node.clone(), power_off: *power_off }).await?;
                self.nodes_down.insert((cluster.clone(), node.clone()));
            }
            Action::NodeUp { cluster, node } => {
                post(Admin::NodeUp { cluster: cluster.clone(), node: node.clone() }).await?;
                self.nodes_down.remove(&(cluster.clone(), node.clone()));
            }
            Action::Kill { controller } => self.controllers()?.kill(*controller),
            Action::Restart { controller } => self.controllers()?.restart(*controller)?,
            Action::Pause { controller } => self.controllers()?.pause(*controller),
            Action::Resume { controller } => self.controllers()?.resume(*controller),
        }
        Ok(())
    }

    fn controllers(&mut self) -> Result<&mut Controllers, String> {
        self.controllers.as_mut().ok_or_else(|| "the drill started no controllers".to_string())
    }

    async fn patch(&self, body: serde_json::Value) -> Result<(), String> {
        self.api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Reads the federation: counts the moves finished since the last look, and answers
    /// whether it is settled (current, Ready, nothing moving, every replica ready).
    pub async fn observe(&mut self) -> bool {
        let Ok(f) = self.api.get(&self.name).await else { return false };
        let generation = f.metadata.generation;
        let replicas = f.spec.replicas;
        let status = f.status.unwrap_or_default();
        self.moving = status.moves.iter().map(|m| (m.ordinal, m.to.clone())).collect();
        let ready = status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        let line = format!(
            "status: {} moving, ready {}, {} moves completed",
            status.moves.len(),
            status.ready.as_deref().unwrap_or("-"),
            self.arrived.len()
        );
        if line != self.last_line {
            eprintln!("{line}");
            self.last_line = line;
        }
        status.observed_generation == generation
            && ready
            && status.moves.is_empty()
            && status.ready.as_deref() == Some(format!("{replicas}/{replicas}").as_str())
    }

    /// Reads the ledger's arrivals since the soak began: each is a completed move, whose
    /// marker is then checked.
    async fn arrivals(&mut self) {
        let Some(since) = self.since else { return };
        let Ok(doc) = admin(&self.admin, Admin::Ledger { check: false }).await else { return };
        let Ok(ledger) = serde_json::from_str::<serde_json::Value>(&doc) else { return };
        for a in moves::arrivals(&ledger, self.api.namespace().unwrap_or("default"), &self.name, since) {
            if self.arrived.insert((a.ordinal, a.at)) {
                eprintln!("moved: ordinal {} from {} to {}", a.ordinal, a.from, a.to);
                self.markers.moved(a.ordinal, &a.to);
            }
        }
    }

    pub async fn markers_round(&mut self) {
        self.arrivals().await;
        let moving: BTreeSet<i32> = self.moving.keys().copied().collect();
        self.markers.round(&self.members, &self.api_faulted, self.replicas, &moving).await;
    }

    /// Heals every member, returns every node, resumes and restarts every controller.
    pub async fn heal_all(&mut self) {
        let clusters: Vec<String> = self.members.keys().cloned().collect();
        for c in clusters {
            let step = Step { at_ms: 0, action: Action::Heal { cluster: c } };
            if let Err(e) = self.act(&step.action).await {
                self.errors.push(format!("final {}: {e}", step.action));
            }
        }
        for (cluster, node) in self.nodes_down.clone() {
            if let Err(e) = self.act(&Action::NodeUp { cluster, node }).await {
                self.errors.push(format!("final node-up: {e}"));
            }
        }
        if let Some(c) = self.controllers.as_mut()
            && let Err(e) = c.heal()
        {
            self.errors.push(format!("final restart of the controllers: {e}"));
        }
    }

    /// Waits until settled (the status says so, and the members run each ordinal once, Ready)
    /// with every marker check done, observing; answers the seconds taken.
    pub async fn settle(&mut self, timeout: Duration) -> Option<f64> {
        let start = Instant::now();
        let mut last_round = Instant::now().checked_sub(Duration::from_secs(10)).unwrap_or_else(Instant::now);
        loop {
            let settled = self.observe().await;
            if settled || last_round.elapsed() > Duration::from_secs(1) {
                self.markers_round().await;
                last_round = Instant::now();
            }
            let marked = !self.markers.has_pending() && self.markers.marked() >= self.replicas.max(0) as usize;
            if settled && marked && self.markers.census(&self.members, self.replicas).await == Ok(true) {
                return Some(start.elapsed().as_secs_f64());
            }
            if start.elapsed() > timeout {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
