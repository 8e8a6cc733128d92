//! A stateright model of spanset: two controller replicas contending for a Lease with terms,
//! two member clusters (API servers with resourceVersions and term stamps, StatefulSet
//! controllers, kubelets whose node can lose its network or power), and a network that loses
//! answers (the request may still land, late, once) and partitions. The controllers decide
//! with the real `reconcile::decide`; everything else is the world around it.
//!
//! Worlds a search asks for (each a parameter, off in the default searches so that they keep
//! their size): StatefulSet controllers that stop mid-sync and finish late on an old copy
//! ([`Fault::PausedSync`]), Lease holders frozen past their Lease ([`Fault::Freeze`]), ends of
//! pauses placed anywhere ([`Spanset::place_resumptions`]), partitions that last
//! ([`Spanset::long_partitions`]), clusters that return all at once with their pods never
//! evicted ([`Spanset::unevicted_returns`]), members without the admission policy
//! ([`Spanset::without_admission`]), pod leases with time, drifting clocks, guards and host
//! outages ([`Spanset::with_pod_leases`], see [`lease`]).

pub mod controller;
pub mod lease;
pub mod member;
pub mod state;
pub mod trace;

use std::time::{Duration, Instant};

use spanset_api::FederatedStatefulSet;
use spanset_controller::{
    decisions::safety::{Rules, TermRefusal, term_allows},
    member::{cache::UncertainWrite, objects::gated},
};
use stateright::{Model, Property};

use self::{
    controller::Fixed,
    lease::{ControllerLeases, InFlight, LeaseWorld, Leases},
    state::{CONTROLLERS, Controller, Effect, Host, HostCopy, MEMBERS, Member, Node, REPLICAS, Rehomed, View, World},
};

/// One step of the world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Controller `c` wins the free Lease (a new term).
    Acquire(u8),
    /// Controller `c` learns it no longer holds the Lease and stops.
    StepDown(u8),
    /// Controller `c` reads the federation and the fences.
    ReadHost(u8),
    /// Controller `c`'s watcher lists member `m` (or finds it unreachable).
    Observe(u8, u8),
    /// Fault: controller `c`'s watch of member `m` stalls.
    StallWatch(u8, u8),
    /// Controller `c`'s watch of member `m` resumes (the stream is cut and watched again).
    ResumeWatch(u8, u8),
    /// Fault: member `m`'s kubelet falls behind.
    StallKubelet(u8),
    /// Member `m`'s kubelet catches up.
    ResumeKubelet(u8),
    /// Controller `c` decides (the real `decide`).
    Decide(u8),
    /// Controller `c` carries out its next effect and gets the answer.
    Perform(u8),
    /// Fault: controller `c` sends its next effect and the answer is lost (it may land later).
    PerformLost(u8),
    /// A request whose answer was lost lands now.
    Land(usize),
    /// A request whose answer was lost never lands.
    Vanish(usize),
    /// Member `m`'s StatefulSet controller acts.
    StatefulSet(u8),
    /// Member `m`'s kubelet acts.
    Kubelet(u8),
    /// Member `m`'s node controller evicts the pods of its lost node.
    Evict(u8),
    /// Fault: controller `c` crashes (it restarts with nothing in memory).
    Crash(u8),
    /// Controller `c` starts again.
    Restart(u8),
    /// The Lease expires: its holder crashed, or (a fault) it is paused past it.
    Expire,
    /// Fault: member `m`'s API server stops answering.
    Partition(u8),
    /// Member `m`'s API server answers again.
    Heal(u8),
    /// Fault: member `m`'s node is lost (`true`: it powered off).
    LoseNode(u8, bool),
    /// Member `m`'s node returns.
    ReturnNode(u8),
    /// The operator fences member `m` (only once its machine really is off).
    Fence(u8),
    /// The operator unfences member `m` (once it answers and runs nothing).
    Unfence(u8),
    /// The user edits the federation to spec `s`.
    Edit(u8),
    /// Fault: the Lease holder `c` freezes past its Lease (which expires).
    Freeze(u8),
    /// Frozen controller `c` resumes where it stopped, with what it knew then.
    Thaw(u8),
    /// Fault: member `m`'s StatefulSet controller stops in the middle of a sync.
    PauseSync(u8),
    /// Member `m`'s paused StatefulSet controller finishes its sync on the copy it read.
    FinishSync(u8),
    /// The fair scheduler's next step (fault-placement search).
    Fair,
    /// Pod leases: one tick of real time passes (every clock advances at its rate).
    Tick,
    /// Pod leases: member `m`'s guards poll their Lease (its node's clock says a poll is due)
    /// and stop what they must.
    PollLease(u8),
    /// Pod leases: controller `c` extends member `m`'s lease (due every R, or the ordinals to
    /// name changed), and gets the answer (or a refused connection).
    Extend(u8, u8),
    /// Fault (`LostAnswer`): controller `c` extends member `m`'s lease and the answer is lost.
    ExtendLost(u8, u8),
    /// An extension whose answer was lost lands now (if the Lease is still as it was).
    LandExtension(usize),
    /// An extension whose answer was lost never lands.
    VanishExtension(usize),
    /// Pod leases: controller `c` fences member `m`, whose lease has lapsed on its clock.
    LeaseFence(u8, u8),
    /// Fault: the host's controllers all go down for longer than the lease.
    HostOutage,
    /// Fault: member `m`'s guards' next poll comes at the end of their period.
    LateGuard(u8),
    /// Fault: member `m`'s pods' watches go down (crash, back-off, SIGSTOP): they poll and
    /// stop nothing until they come back.
    WatchDown(u8),
    /// Member `m`'s watches come back, each going on from the state it posted.
    WatchUp(u8),
}

/// How the checker explores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// Every interleaving of every action, to a bounded depth.
    Interleavings,
    /// Every placement of the faults along fair schedules: between faults, only the fair
    /// scheduler's next step happens. Deep, and it checks that every schedule converges once
    /// the faults stop.
    FaultPlacements,
}

/// The kinds of fault a schedule may inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A controller crashes.
    Crash,
    /// A request's answer is lost (the request may land later).
    LostAnswer,
    /// The Lease holder is paused past its Lease.
    Pause,
    /// A member's API server stops answering.
    Partition,
    /// A member's node loses its network or power.
    NodeLoss,
    /// A controller's watch of a member stalls (its events stop arriving; its writes go on).
    WatchStall,
    /// A member's kubelet is slow (it starts and stops nothing until it catches up).
    SlowKubelet,
    /// The Lease holder's process is frozen past its Lease (SIGSTOP, a VM stall): it does
    /// nothing, and learns nothing, until it resumes where it stopped, which may be at any
    /// later point (the fair scheduler resumes it only once nothing else can happen). Unlike
    /// `Pause`, which only lets the Lease expire under a holder that goes on working.
    Freeze,
    /// A member's StatefulSet controller stops in the middle of a sync, holding the copy of the
    /// StatefulSet it read, and finishes that sync on that copy at any later point (the fair
    /// scheduler only once nothing else can happen): a stale view acting late.
    PausedSync,
    /// Every controller goes down at once and stays down longer than the pod lease (pod-lease
    /// world only).
    HostOutage,
    /// A member's guards poll late, at the end of the period P they are bound to (on time,
    /// they poll a second into it, on their clock). Pod-lease world only.
    LateGuard,
    /// A member's pods' watches stop (crashed, OOM-killed, waiting out CrashLoopBackOff,
    /// SIGSTOPped) and come back at any later point. Pod-lease world only.
    WatchDown,
}

/// The kinds of fault the searches inject unless told otherwise (`Freeze` and `PausedSync`
/// are asked for by the tests that need them, so that these searches keep their size).
pub const DEFAULT_FAULTS: &[Fault] = &[
    Fault::Crash,
    Fault::LostAnswer,
    Fault::Pause,
    Fault::Partition,
    Fault::NodeLoss,
    Fault::WatchStall,
    Fault::SlowKubelet,
];

/// Fair steps after the last fault within which the federation must have converged.
pub const CONVERGE_WITHIN: u32 = 600;

/// The model: its fixed specs and clocks, and the budgets of a schedule.
pub struct Spanset {
    /// Specs and clocks.
    pub fixed: Fixed,
    /// The states schedules start from: the settled start, and every state of a fault-free
    /// move to each other spec (so that a bounded search injects its faults at every point of
    /// a move, not only near the start).
    pub starts: Vec<World>,
    /// How the checker explores.
    pub search: Search,
    /// The kinds of fault schedules inject.
    pub kinds: &'static [Fault],
    /// The fault-placement search also places the ends of pauses (a thaw, a finished sync)
    /// at every point, not only where nothing else can happen.
    pub place_resumptions: bool,
    /// A partition lasts until nothing else can happen, instead of healing at the fair
    /// scheduler's next turn.
    pub long_partitions: bool,
    /// A lost node's pods are never evicted (its cluster's control plane went down with it),
    /// and the node returns wherever the search places it (or once nothing else can happen):
    /// a powered-off cluster that returns all at once, after its ordinals were re-homed.
    pub unevicted_returns: bool,
    /// Pod leases ([`lease`]): time in ticks, clocks, the members' pod Leases, the guards; the
    /// lapse fences a member (no operator fences, and a powered-off member may return before
    /// its shrink).
    pub pod_leases: Option<LeaseWorld>,
    /// Decisions already made, by what they were made on.
    decisions: dashmap::DashMap<(u64, HostCopy, [View; MEMBERS.len()]), Vec<Effect>>,
}

/// A federation of `REPLICAS` over the model's members with these weights; `gated`: its pods
/// carry spanset's identity gate (`spec.identityGate`, `Disabled` otherwise).
pub fn spec(weights: [i32; 2], gated: bool) -> FederatedStatefulSet {
    let names: Vec<String> = MEMBERS.iter().map(|m| m.to_string()).collect();
    let mut f = spanset_api::example(&names);
    f.spec.replicas = REPLICAS as i32;
    for (p, w) in f.spec.placement.clusters.iter_mut().zip(weights) {
        p.weight = Some(w);
    }
    f.spec.template.pod_management_policy = Some("Parallel".into());
    f.spec.migration.storage = Some(spanset_api::StorageMode::Move);
    if !gated {
        f.spec.identity_gate = Some(spanset_api::IdentityGate::Disabled);
    }
    f.spec.network = Some(serde_json::from_value(serde_json::json!({"mode": "None"})).expect("a network spec"));
    f.metadata.uid = Some("uid-1".into());
    f.metadata.finalizers = Some(vec![spanset_api::labels::FINALIZER.into()]);
    f
}

impl Spanset {
    /// The model over these specs (the first is the one the world starts settled on).
    pub fn new(specs: Vec<FederatedStatefulSet>, faults: u8, edits: u8, rules: Rules, search: Search) -> Spanset {
        Spanset::build(specs, faults, edits, rules, search, None)
    }

    /// [`Self::new`] in the pod-lease world `leases`.
    pub fn with_pod_leases(
        specs: Vec<FederatedStatefulSet>,
        faults: u8,
        edits: u8,
        rules: Rules,
        search: Search,
        leases: LeaseWorld,
    ) -> Spanset {
        Spanset::build(specs, faults, edits, rules, search, Some(leases))
    }

    fn build(
        specs: Vec<FederatedStatefulSet>,
        faults: u8,
        edits: u8,
        rules: Rules,
        search: Search,
        pod_leases: Option<LeaseWorld>,
    ) -> Spanset {
        let fixed = Fixed {
            specs,
            now: Instant::now() + Duration::from_secs(3 * 3600),
            wall: jiff::Timestamp::from_second(1_800_000_000).expect("a time"),
            rules,
        };
        let empty = World {
            host: Host { spec: 0, generation: 1, status: String::new(), rv: 1, holder: None, term: 0 },
            members: std::array::from_fn(|_| Member::empty()),
            controllers: std::array::from_fn(|_| Controller::fresh(true)),
            in_flight: vec![],
            faults_left: 0,
            edits_left: 0,
            broken: None,
            lost_data: None,
            data: Default::default(),
            ran_on: Default::default(),
            retired_data: None,
            rehomed: Default::default(),
            next_volume: 0,
            turn: 0,
            since_fault: 0,
            leases: pod_leases.map(|l| Leases::new(&l, rules)),
        };
        let mut model = Spanset {
            fixed,
            starts: vec![],
            search,
            kinds: DEFAULT_FAULTS,
            place_resumptions: false,
            long_partitions: false,
            unevicted_returns: false,
            pod_leases,
            decisions: Default::default(),
        };
        let settled =
            model.settle(empty, 5_000).unwrap_or_else(|e| panic!("the start does not settle: {}\n{:#?}", e.1, e.0));
        let mut starts = match search {
            Search::Interleavings => vec![World { faults_left: faults, edits_left: edits, ..settled.clone() }],
            Search::FaultPlacements => vec![],
        };
        for s in 1..model.fixed.specs.len() as u8 {
            let edited = model.step(&World { edits_left: 1, ..settled.clone() }, &Action::Edit(s)).expect("an edit");
            if search == Search::FaultPlacements {
                // The faults (and a second edit) are placed along the fair schedule from here.
                starts.push(World { faults_left: faults, edits_left: edits, ..edited });
                continue;
            }
            let path = model
                .fair_run(edited, 5_000)
                .unwrap_or_else(|e| panic!("spec {s} does not settle: {}\n{:#?}", e.1, e.0));
            starts.extend(path.into_iter().map(|w| World { faults_left: faults, edits_left: edits, ..w }));
        }
        model.starts = starts;
        model
    }

    /// The same model whose members' API servers lack spanset's admission policy: nothing there
    /// refuses a write of a lower term, and only the controllers' own term checks and the
    /// resourceVersion preconditions stand between a stale leader and the members.
    pub fn without_admission(mut self) -> Spanset {
        for w in &mut self.starts {
            for m in &mut w.members {
                m.admission = false;
            }
        }
        self
    }

    /// The effects controller `ctl` decides on what it knows. `decide` is pure, so its answer
    /// is remembered by what it was given: many states differ only in what no controller saw.
    fn decided(&self, ctl: &Controller) -> Option<Vec<Effect>> {
        let key = (ctl.term?, ctl.host.clone()?, ctl.views.clone());
        if let Some(hit) = self.decisions.get(&key) {
            return Some(hit.clone());
        }
        let (fsts, decision) = controller::decide(&self.fixed, ctl)?;
        let fenced = key.1.fenced;
        let effects = controller::effects(&fsts, &decision, key.0, &fenced, &self.fixed.rules);
        self.decisions.insert(key, effects.clone());
        Some(effects)
    }

    fn gated(&self, w: &World) -> bool {
        gated(&self.fixed.specs[w.host.spec as usize])
    }

    /// Whether the federation's storage is `Detached` (every spec of a model has the same).
    fn detached(&self) -> bool {
        self.fixed.specs[0].spec.migration.storage == Some(spanset_api::StorageMode::Detached)
    }

    /// The actions that are not faults, in a fixed order (the fair scheduler's).
    fn progress(&self, w: &World, out: &mut Vec<Action>) {
        for c in 0..CONTROLLERS as u8 {
            let ctl = &w.controllers[c as usize];
            if !ctl.up {
                out.push(Action::Restart(c));
                continue;
            }
            if ctl.frozen {
                continue;
            }
            if w.host.holder.is_none() && ctl.term.is_none() {
                out.push(Action::Acquire(c));
            }
            if ctl.term.is_some() && (w.host.holder != Some(c) || ctl.term != Some(w.host.term)) {
                out.push(Action::StepDown(c));
            }
            out.push(Action::ReadHost(c));
            for m in 0..MEMBERS.len() as u8 {
                if ctl.stalled[m as usize] {
                    out.push(Action::ResumeWatch(c, m));
                } else {
                    out.push(Action::Observe(c, m));
                }
            }
            if ctl.term.is_some() && ctl.pending.is_empty() && ctl.host.is_some() {
                out.push(Action::Decide(c));
            }
            if !ctl.pending.is_empty() {
                out.push(Action::Perform(c));
            }
        }
        // A holder that crashed, or restarted without knowing it held the Lease, does not renew it.
        if let Some(h) = w.host.holder
            && (!w.controllers[h as usize].up || w.controllers[h as usize].term.is_none())
        {
            out.push(Action::Expire);
        }
        // With the ends of pauses placed anywhere, so is the late landing of a request whose
        // answer was lost (a fair schedule lands it at once).
        if !self.place_resumptions {
            for i in 0..w.in_flight.len() {
                out.push(Action::Land(i));
                out.push(Action::Vanish(i));
            }
            for i in 0..w.leases.as_ref().map_or(0, |l| l.in_flight.len()) {
                out.push(Action::LandExtension(i));
                out.push(Action::VanishExtension(i));
            }
        }
        for m in 0..MEMBERS.len() as u8 {
            let mem = &w.members[m as usize];
            if w.leases.is_some() {
                out.push(Action::PollLease(m));
            }
            out.push(Action::StatefulSet(m));
            if mem.kubelet_stalled {
                out.push(Action::ResumeKubelet(m));
            } else {
                out.push(Action::Kubelet(m));
            }
            if mem.node != Node::Up && !self.unevicted_returns {
                out.push(Action::Evict(m));
            }
            if !mem.api_up && !self.long_partitions {
                out.push(Action::Heal(m));
            }
            if mem.node != Node::Up && !self.unevicted_returns {
                out.push(Action::ReturnNode(m));
            }
            if !mem.fenced && mem.node == Node::PoweredOff && self.pod_leases.is_none() {
                out.push(Action::Fence(m));
            }
            if mem.fenced
                && mem.api_up
                && mem.node == Node::Up
                && mem.pods.is_empty()
                && mem.sts.as_ref().is_none_or(|s| s.replicas == 0)
            {
                out.push(Action::Unfence(m));
            }
        }
        // The pod-lease writers come last in a round: a member's StatefulSet controller and
        // its guards may act on a write before the extension that names its ordinals lands.
        for c in 0..CONTROLLERS as u8 {
            let ctl = &w.controllers[c as usize];
            if ctl.up && !ctl.frozen && ctl.leases.is_some() {
                for m in 0..MEMBERS.len() as u8 {
                    out.push(Action::Extend(c, m));
                    out.push(Action::LeaseFence(c, m));
                }
            }
        }
    }

    /// The ends of pauses that the search places anywhere: a frozen controller thaws, a paused
    /// StatefulSet controller finishes its sync, a request whose answer was lost lands or
    /// vanishes (with [`Self::place_resumptions`]), a lost node returns (with
    /// [`Self::unevicted_returns`]). `all`: every end, whatever the parameters.
    fn resumptions(&self, w: &World, out: &mut Vec<Action>, all: bool) {
        let pauses = all || self.place_resumptions;
        for m in 0..MEMBERS.len() as u8 {
            if pauses && w.members[m as usize].paused_sync.is_some() {
                out.push(Action::FinishSync(m));
            }
        }
        for c in 0..CONTROLLERS as u8 {
            if pauses && w.controllers[c as usize].frozen {
                out.push(Action::Thaw(c));
            }
        }
        if self.place_resumptions {
            for i in 0..w.in_flight.len() {
                out.push(Action::Land(i));
                out.push(Action::Vanish(i));
            }
            for i in 0..w.leases.as_ref().map_or(0, |l| l.in_flight.len()) {
                out.push(Action::LandExtension(i));
                out.push(Action::VanishExtension(i));
            }
        }
        for m in 0..MEMBERS.len() as u8 {
            if self.unevicted_returns && w.members[m as usize].node != Node::Up {
                out.push(Action::ReturnNode(m));
            }
            // With pod leases, a partition that lasts ends anywhere too (time passes meanwhile).
            if self.place_resumptions && self.long_partitions && w.leases.is_some() && !w.members[m as usize].api_up {
                out.push(Action::Heal(m));
            }
            // A watch that went down comes back once nothing else can happen: the longest
            // outage is the one that hurts (one that ends earlier only resumes the same guard).
            if all && w.leases.as_ref().is_some_and(|l| l.watch_down[m as usize]) {
                out.push(Action::WatchUp(m));
            }
        }
    }

    /// What ends when nothing else can happen, in this order: a long partition heals, a paused
    /// StatefulSet controller finishes its sync, a frozen controller thaws, an unevicted node
    /// returns (the longest pause is the one that hurts).
    fn last_resorts(&self, w: &World, out: &mut Vec<Action>) {
        // With pod leases time passes before a pause ends, as long as something waits on it
        // (a lease to lapse, an outage, an extension in flight, a pod waiting for its guard);
        // then whenever nothing else can happen.
        if w.leases.is_some() && self.time_pending(w) {
            out.push(Action::Tick);
        }
        for m in 0..MEMBERS.len() as u8 {
            if self.long_partitions && !w.members[m as usize].api_up {
                out.push(Action::Heal(m));
            }
        }
        self.resumptions(w, out, true);
        if w.leases.is_some() && !self.time_pending(w) {
            out.push(Action::Tick);
        }
    }

    /// Pod leases: the schedule reached the world's horizon ([`LeaseWorld::horizon`]).
    fn past_horizon(&self, w: &World) -> bool {
        let (Some(lw), Some(leases)) = (self.pod_leases, &w.leases) else { return false };
        lw.horizon
            .is_some_and(|h| leases.now >= self.starts.first().and_then(|s| s.leases.as_ref()).map_or(0, |l| l.now) + h)
    }

    /// Pod leases: something waits on time (see [`Self::last_resorts`]).
    fn time_pending(&self, w: &World) -> bool {
        let Some(leases) = &w.leases else { return false };
        // A pod on a live node that waits for its guard: extensions and polls take time.
        let waiting = |m: &Member| m.node == Node::Up && m.pods.values().any(|p| !p.running && !p.gated && !p.deleting);
        leases.outage_until.is_some()
            || !leases.in_flight.is_empty()
            || leases.watch_down.iter().any(|d| *d)
            || w.members.iter().any(|m| (!m.api_up && !m.fenced) || waiting(m))
    }

    /// Controller `c`'s clock at the world's tick.
    fn controller_clock(&self, w: &World) -> Option<Instant> {
        Some(self.pod_leases?.controller_clock(self.fixed.now, w.leases.as_ref()?.now))
    }

    /// Member `m`'s node's clock at the world's tick.
    fn node_clock(&self, w: &World, m: usize) -> Option<Duration> {
        Some(self.pod_leases?.node_clock(w.leases.as_ref()?.now, m))
    }

    /// Whether controller `c` may write pod leases: it holds the leader Lease (a process sends
    /// an extension only while its leadership is valid on its clock) and read the host since.
    fn lease_writer(w: &World, c: u8) -> bool {
        let ctl = &w.controllers[c as usize];
        ctl.up
            && !ctl.frozen
            && ctl.term.is_some()
            && w.host.holder == Some(c)
            && ctl.term == Some(w.host.term)
            && ctl.host.is_some()
            && ctl.leases.as_ref().is_some_and(|l| l.read_in_term)
    }

    /// The ordinals controller `c` names in member `m`'s lease: its StatefulSet's slice as the
    /// controller last saw it, none while it is fenced.
    fn names(w: &World, c: u8, m: usize) -> lease::Names {
        let ctl = &w.controllers[c as usize];
        if ctl.host.as_ref().is_none_or(|h| h.fenced[m]) {
            return 0;
        }
        ctl.views[m]
            .sts
            .as_ref()
            .map_or(0, |s| (0..REPLICAS).filter(|&k| s.holds(k)).fold(0, |bits, k| bits | (1 << k)))
    }

    /// Pod leases: one of the actions on time, leases and guards.
    fn lease_step(&self, w: &mut World, action: &Action) -> Option<()> {
        let lw = self.pod_leases?;
        let rules = self.fixed.rules;
        match *action {
            Action::Tick => {
                let leases = w.leases.as_mut()?;
                leases.now += 1;
                let now = leases.now;
                leases.in_flight.retain(|f| f.until >= now);
                if leases.outage_until.is_some_and(|u| u <= now) {
                    leases.outage_until = None;
                }
                // Every container's first process checks its deadline far more often than a tick.
                for mi in 0..MEMBERS.len() {
                    let at = self.node_clock(w, mi)?;
                    let leases = w.leases.as_ref()?;
                    if w.members[mi].node != Node::PoweredOff {
                        lease::enforce(leases, &mut w.members[mi], mi, at, rules);
                    }
                }
            }
            Action::PollLease(m) => {
                let at = self.node_clock(w, m as usize)?;
                let leases = w.leases.as_mut()?;
                let mi = m as usize;
                let member = &mut w.members[mi];
                let period = if leases.late[mi] { lw.timing.poll } else { Duration::from_secs(1) };
                if member.node == Node::PoweredOff
                    || leases.watch_down[mi]
                    || leases.last_poll[mi].is_some_and(|last| at < last + period)
                {
                    return None;
                }
                leases.late[mi] = false;
                lease::poll(leases, member, mi, at, &lw, rules);
            }
            Action::Extend(c, m) | Action::ExtendLost(c, m) => {
                let lost = matches!(action, Action::ExtendLost(..));
                let now_c = self.controller_clock(w)?;
                let mi = m as usize;
                if !Self::lease_writer(w, c) || (lost && (w.faults_left == 0 || !w.members[mi].api_up)) {
                    return None;
                }
                let names = Self::names(w, c, mi);
                let leases = w.leases.as_mut()?;
                let cl = w.controllers[c as usize].leases.as_mut()?;
                if cl.tried[mi] == Some(now_c) || !cl.due(mi, names, now_c) {
                    return None;
                }
                let outcome = if lost {
                    w.faults_left -= 1;
                    let over = leases.objects[mi].extension;
                    let until = leases.now + lw.timing.landing_deadline().as_secs() as u32;
                    leases.in_flight.push(InFlight { member: m, names, over, until });
                    lease::Outcome::Lost
                } else if w.members[mi].api_up {
                    lease::land(&mut leases.objects[mi], names);
                    lease::Outcome::Answered(now_c)
                } else {
                    lease::Outcome::NotSent
                };
                cl.extended(mi, names, now_c, outcome);
            }
            Action::LandExtension(i) => {
                let leases = w.leases.as_mut()?;
                let f = leases.in_flight.get(i)?.clone();
                leases.in_flight.remove(i);
                let object = &mut leases.objects[f.member as usize];
                // Conditional on the resourceVersion it was written over.
                if object.extension == f.over {
                    lease::land(object, f.names);
                }
            }
            Action::VanishExtension(i) => {
                let leases = w.leases.as_mut()?;
                leases.in_flight.get(i)?;
                leases.in_flight.remove(i);
            }
            Action::LeaseFence(c, m) => {
                let now_c = self.controller_clock(w)?;
                let mi = m as usize;
                // Only a member that does not answer: one that answers again is extended (and
                // its pods, stopped by their guards, restart only under a fresh extension).
                if !Self::lease_writer(w, c) || w.members[mi].fenced || w.controllers[c as usize].views[mi].reachable {
                    return None;
                }
                if !w.controllers[c as usize].leases.as_ref()?.clocks[mi].lapsed(now_c) {
                    return None;
                }
                w.members[mi].fenced = true;
                w.members[mi].shrunk_since_fence = false;
            }
            Action::WatchDown(m) => {
                let leases = w.leases.as_mut()?;
                if w.faults_left == 0 || leases.watch_down[m as usize] {
                    return None;
                }
                w.faults_left -= 1;
                leases.watch_down[m as usize] = true;
            }
            Action::WatchUp(m) => {
                let leases = w.leases.as_mut()?;
                if !leases.watch_down[m as usize] {
                    return None;
                }
                leases.watch_down[m as usize] = false;
            }
            Action::LateGuard(m) => {
                let leases = w.leases.as_mut()?;
                if w.faults_left == 0 || leases.late[m as usize] {
                    return None;
                }
                w.faults_left -= 1;
                leases.late[m as usize] = true;
            }
            Action::HostOutage => {
                let leases = w.leases.as_mut()?;
                if w.faults_left == 0 || leases.outage_until.is_some() {
                    return None;
                }
                w.faults_left -= 1;
                leases.outage_until = Some(leases.now + lw.outage);
                for c in &mut w.controllers {
                    *c = Controller::fresh(false);
                }
            }
            _ => return None,
        }
        Some(())
    }

    /// Applies one action; `None` when it changes nothing (or cannot happen).
    pub fn step(&self, w: &World, action: &Action) -> Option<World> {
        let mut w = w.clone();
        // A frozen process does nothing until it thaws (it may still crash).
        if let Some(c) = acting_controller(action)
            && w.controllers[c as usize].frozen
        {
            return None;
        }
        match *action {
            Action::Tick
            | Action::PollLease(_)
            | Action::Extend(..)
            | Action::ExtendLost(..)
            | Action::LandExtension(_)
            | Action::VanishExtension(_)
            | Action::LeaseFence(..)
            | Action::LateGuard(_)
            | Action::WatchDown(_)
            | Action::WatchUp(_)
            | Action::HostOutage => self.lease_step(&mut w, action)?,
            Action::Freeze(c) => {
                let ctl = &mut w.controllers[c as usize];
                if w.faults_left == 0 || !ctl.up || ctl.term.is_none() || w.host.holder != Some(c) {
                    return None;
                }
                ctl.frozen = true;
                w.host.holder = None;
                w.faults_left -= 1;
            }
            Action::Thaw(c) => {
                let ctl = &mut w.controllers[c as usize];
                if !ctl.frozen {
                    return None;
                }
                ctl.frozen = false;
            }
            Action::PauseSync(m) => {
                if w.faults_left == 0 {
                    return None;
                }
                w.members[m as usize].pause_sync()?;
                w.faults_left -= 1;
            }
            Action::FinishSync(m) => {
                let gated = self.gated(&w);
                w.members[m as usize].finish_sync(gated, &mut w.next_volume)?;
            }
            Action::Acquire(c) => {
                let now_c = self.controller_clock(&w);
                let ctl = &mut w.controllers[c as usize];
                if !ctl.up || w.host.holder.is_some() {
                    return None;
                }
                w.host.term += 1;
                w.host.holder = Some(c);
                ctl.term = Some(w.host.term);
                ctl.pending.clear();
                ctl.failed = false;
                // A new leader's lease clocks start with the unknown past.
                ctl.leases =
                    self.pod_leases.zip(now_c).map(|(l, now)| ControllerLeases::new(&l, self.fixed.rules, now));
            }
            Action::StepDown(c) => {
                let ctl = &mut w.controllers[c as usize];
                if ctl.term.is_none() || (w.host.holder == Some(c) && ctl.term == Some(w.host.term)) {
                    return None;
                }
                ctl.term = None;
                ctl.pending.clear();
                ctl.failed = false;
                ctl.leases = None;
            }
            Action::ReadHost(c) => {
                let copy = HostCopy {
                    spec: w.host.spec,
                    generation: w.host.generation,
                    status: w.host.status.clone(),
                    rv: w.host.rv,
                    fenced: std::array::from_fn(|m| w.members[m].fenced),
                };
                let ctl = &mut w.controllers[c as usize];
                // A new leader reads the host before it writes a pod lease.
                let first_in_term = ctl.leases.as_ref().is_some_and(|l| !l.read_in_term);
                if let Some(l) = ctl.leases.as_mut() {
                    l.read_in_term = true;
                }
                if !ctl.up || (ctl.host.as_ref() == Some(&copy) && !first_in_term) {
                    return None;
                }
                // A fence read for the first time (or lifted) starts the fence clock again.
                for (m, view) in ctl.views.iter_mut().enumerate() {
                    if ctl.host.as_ref().is_none_or(|h| h.fenced[m] != copy.fenced[m]) {
                        view.answered_since_fence = false;
                    }
                }
                ctl.host = Some(copy);
            }
            Action::StallWatch(c, m) => {
                let ctl = &mut w.controllers[c as usize];
                if w.faults_left == 0 || !ctl.up || ctl.stalled[m as usize] {
                    return None;
                }
                ctl.stalled[m as usize] = true;
                w.faults_left -= 1;
            }
            Action::StallKubelet(m) => {
                let mem = &mut w.members[m as usize];
                if w.faults_left == 0 || mem.kubelet_stalled {
                    return None;
                }
                mem.kubelet_stalled = true;
                w.faults_left -= 1;
            }
            Action::ResumeKubelet(m) => {
                let mem = &mut w.members[m as usize];
                if !mem.kubelet_stalled {
                    return None;
                }
                mem.kubelet_stalled = false;
            }
            Action::ResumeWatch(c, m) => {
                let ctl = &mut w.controllers[c as usize];
                if !ctl.stalled[m as usize] {
                    return None;
                }
                ctl.stalled[m as usize] = false;
            }
            Action::Observe(c, m) => {
                let member = &w.members[m as usize];
                let ctl = &mut w.controllers[c as usize];
                if !ctl.up || ctl.stalled[m as usize] {
                    return None;
                }
                let before = ctl.views[m as usize].clone();
                observe(&mut ctl.views[m as usize], member);
                if member.api_up && ctl.host.as_ref().is_some_and(|h| h.fenced[m as usize]) {
                    ctl.views[m as usize].answered_since_fence = true;
                }
                if ctl.views[m as usize] == before {
                    return None;
                }
            }
            Action::Decide(c) => {
                let ctl = &w.controllers[c as usize];
                if !ctl.up || !ctl.pending.is_empty() {
                    return None;
                }
                let mut effects = self.decided(ctl)?;
                if effects.is_empty() {
                    return None;
                }
                note_rehomed(&w, ctl, self.gated(&w), &mut effects);
                let ctl = &mut w.controllers[c as usize];
                ctl.pending = effects;
                ctl.failed = false;
            }
            Action::Perform(c) | Action::PerformLost(c) => {
                let lost = matches!(action, Action::PerformLost(_));
                if lost && w.faults_left == 0 {
                    return None;
                }
                if !w.controllers[c as usize].up || w.controllers[c as usize].pending.is_empty() {
                    return None;
                }
                let effect = w.controllers[c as usize].pending.remove(0);
                if lost && matches!(effect, Effect::Store { .. } | Effect::Handover { .. }) {
                    return None;
                }
                if lost {
                    w.faults_left -= 1;
                }
                perform(&mut w, c, effect, lost, &self.fixed.rules);
            }
            Action::Land(i) => {
                let (c, effect) = w.in_flight.get(i)?.clone();
                w.in_flight.remove(i);
                let m = effect_member(&effect)?;
                if w.members[m].api_up {
                    let _ = land(&mut w, m, &effect);
                } else {
                    return None;
                }
                let _ = c;
            }
            Action::Vanish(i) => {
                w.in_flight.get(i)?;
                w.in_flight.remove(i);
            }
            Action::StatefulSet(m) => {
                let gated = self.gated(&w);
                w.members[m as usize].statefulset_round(gated, &mut w.next_volume)?;
                rehomed_claims(&mut w, m);
            }
            Action::Kubelet(m) => {
                let detached = self.detached();
                let at = self.node_clock(&w, m as usize);
                let leases = &w.leases;
                let allowed =
                    |k: u32| leases.as_ref().zip(at).is_none_or(|(l, at)| lease::allows(l, m as usize, k, at));
                for (k, volume) in w.members[m as usize].kubelet_round(allowed)? {
                    let rehomed = matches!(
                        w.rehomed.remove(&k),
                        Some(Rehomed::On(v)) if v == volume
                    );
                    // Detached: a fresh claim is expected; a claim it ran on before, other than
                    // the one of its data, is older than its data.
                    if detached
                        && let Some((own, at)) = w.data.get(&k).copied()
                        && own != volume
                        && w.ran_on.contains(&(k, volume))
                    {
                        w.lost_data.get_or_insert_with(|| {
                            format!(
                                "ordinal {k} started in {} on volume {volume}, older than its data on volume {own} in {}",
                                MEMBERS[m as usize], MEMBERS[at as usize]
                            )
                        });
                    }
                    if detached {
                        w.ran_on.insert((k, volume));
                    }
                    if let Some((own, at)) = w.data.get(&k).copied()
                        && !detached
                        && own != volume
                        && !w.members[at as usize].fenced
                        && !rehomed
                    {
                        w.lost_data.get_or_insert_with(|| {
                            format!(
                                "ordinal {k} started in {} on volume {volume}; its data is on volume {own} in {}",
                                MEMBERS[m as usize], MEMBERS[at as usize]
                            )
                        });
                    }
                    w.data.insert(k, (volume, m));
                }
            }
            Action::Evict(m) => w.members[m as usize].evict()?,
            Action::Crash(c) => {
                if w.faults_left == 0 || !w.controllers[c as usize].up {
                    return None;
                }
                w.faults_left -= 1;
                w.controllers[c as usize] = Controller::fresh(false);
            }
            Action::Restart(c) => {
                if w.leases.as_ref().is_some_and(|l| l.outage_until.is_some()) {
                    return None;
                }
                let ctl = &mut w.controllers[c as usize];
                if ctl.up {
                    return None;
                }
                ctl.up = true;
            }
            Action::Expire => {
                let h = w.host.holder?;
                if w.controllers[h as usize].up && w.controllers[h as usize].term.is_some() {
                    if w.faults_left == 0 {
                        return None;
                    }
                    w.faults_left -= 1;
                }
                w.host.holder = None;
            }
            Action::Partition(m) => {
                if w.faults_left == 0 || !w.members[m as usize].api_up {
                    return None;
                }
                w.faults_left -= 1;
                w.members[m as usize].api_up = false;
            }
            Action::Heal(m) => {
                if w.members[m as usize].api_up {
                    return None;
                }
                w.members[m as usize].api_up = true;
            }
            Action::LoseNode(m, power_off) => {
                if w.faults_left == 0 || w.members[m as usize].node != Node::Up {
                    return None;
                }
                w.faults_left -= 1;
                w.members[m as usize].lose_node(power_off);
            }
            Action::ReturnNode(m) => {
                let mem = &w.members[m as usize];
                if mem.node == Node::Up {
                    return None;
                }
                // The fence's promise (docs/failover.md): the operator brings a fenced member's
                // machines back only once spanset has shrunk it, or once nothing there would run
                // on its own — every pod evicted (Terminating: its kubelet stops it), and with
                // identity gates off a slice holding nothing (its StatefulSet controller would
                // start the ordinals at once; with gates on, new pods wait to be released).
                let restarts = mem.pods.values().any(|p| !p.deleting)
                    || (!self.gated(&w) && mem.sts.as_ref().is_some_and(|s| s.replicas > 0));
                if mem.fenced && !mem.shrunk_since_fence && restarts && self.pod_leases.is_none() {
                    return None;
                }
                w.members[m as usize].return_node();
                // With pod leases a rebooted pod's containers wait for its (fresh) guard.
                if w.leases.is_some() {
                    for p in w.members[m as usize].pods.values_mut() {
                        p.running = false;
                    }
                }
            }
            Action::Fence(m) => {
                let mem = &mut w.members[m as usize];
                if mem.fenced || mem.node != Node::PoweredOff || self.pod_leases.is_some() {
                    return None;
                }
                mem.fenced = true;
                mem.shrunk_since_fence = false;
            }
            Action::Unfence(m) => {
                let mem = &mut w.members[m as usize];
                if !mem.fenced || !mem.api_up || mem.node != Node::Up || !mem.pods.is_empty() {
                    return None;
                }
                if mem.sts.as_ref().is_some_and(|s| s.replicas > 0) {
                    return None;
                }
                mem.fenced = false;
            }
            Action::Fair => {
                return self.fair_step(&w).or_else(|| {
                    // Nothing can change and it has not converged: stuck.
                    (!self.settled(&w))
                        .then(|| World { since_fault: CONVERGE_WITHIN, ..w.clone() })
                        .filter(|_| w.since_fault < CONVERGE_WITHIN)
                });
            }
            Action::Edit(s) => {
                if w.edits_left == 0 || w.host.spec == s {
                    return None;
                }
                w.edits_left -= 1;
                w.host.spec = s;
                w.host.generation += 1;
                w.host.rv += 1;
            }
        }
        if let (Some(lw), Some(leases)) = (self.pod_leases, w.leases.as_mut()) {
            lease::reset_guards(leases, &w.members, &lw, self.fixed.rules);
        }
        Some(w)
    }

    /// Whether the federation is settled on the spec: the status says Ready for this
    /// generation with no move, and each ordinal runs exactly once, where the status says.
    pub fn converged(&self, w: &World) -> bool {
        if w.host.status.is_empty() {
            return false;
        }
        let status: spanset_api::FederatedStatefulSetStatus = serde_json::from_str(&w.host.status).expect("a status");
        let ready = status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        ready
            && status.observed_generation == Some(w.host.generation)
            && status.moves.is_empty()
            && (0..REPLICAS).all(|k| {
                w.members.iter().filter(|m| m.pods.get(&k).is_some_and(|p| p.running && p.ready && !p.deleting)).count()
                    == 1
            })
    }

    /// Heals every fault and runs the fair scheduler (each enabled action in turn) until the
    /// federation converges, for at most `steps`: the liveness check. Answers the settled
    /// world, or the world where it gave up and why.
    pub fn settle(&self, w: World, steps: usize) -> Result<World, Box<(World, String)>> {
        self.fair_run(w, steps).map(|mut path| path.pop().expect("a run has a state"))
    }

    /// [`Self::settle`], answering every state of the run.
    pub fn fair_run(&self, mut w: World, steps: usize) -> Result<Vec<World>, Box<(World, String)>> {
        w.faults_left = 0;
        w.edits_left = 0;
        let mut path = vec![w.clone()];
        for _ in 0..steps {
            if self.settled(&w) {
                return Ok(path);
            }
            match self.fair_step(&w) {
                Some(next) => {
                    w = next;
                    path.push(w.clone());
                }
                None => return Err(Box::new((w, "nothing left to do, and not converged".into()))),
            }
        }
        Err(Box::new((w, format!("not converged after {steps} fair steps"))))
    }

    /// Converged, with nothing left in progress (nor paused).
    pub fn settled(&self, w: &World) -> bool {
        self.converged(w)
            && w.controllers.iter().all(|c| c.pending.is_empty() && !c.frozen)
            && w.in_flight.is_empty()
            && w.leases.as_ref().is_none_or(|l| l.in_flight.is_empty() && l.outage_until.is_none())
            && w.members.iter().all(|m| m.paused_sync.is_none())
    }

    /// One step of the fair scheduler: the first action, from its turn on, that changes
    /// something; the turn moves past it. `None` when nothing can change.
    pub fn fair_step(&self, w: &World) -> Option<World> {
        self.fair_choice(w).map(|(_, next)| next)
    }

    /// [`Self::fair_step`], with the action it took.
    pub fn fair_choice(&self, w: &World) -> Option<(Action, World)> {
        let mut actions = Vec::new();
        self.progress(w, &mut actions);
        let n = actions.len();
        let turn = w.turn as usize;
        let fair = (0..n).find_map(|i| {
            let action = actions[(turn + i) % n].clone();
            let mut next = self.step(w, &action)?;
            next.turn = ((turn + i + 1) % n.max(1)) as u32;
            next.since_fault = w.since_fault.saturating_add(1);
            Some((action, next))
        });
        fair.or_else(|| {
            let mut last = Vec::new();
            self.last_resorts(w, &mut last);
            last.into_iter().find_map(|action| {
                let mut next = self.step(w, &action)?;
                next.since_fault = w.since_fault.saturating_add(1);
                Some((action, next))
            })
        })
    }

    /// One line of a counterexample: what the action did, and the world after it.
    pub fn describe(&self, before: &World, action: &Action, after: &World) -> String {
        let what = match action {
            Action::Fair => match self.fair_choice(before) {
                Some((inner, _)) => return self.describe(before, &inner, after),
                None => "fair: nothing can change".to_string(),
            },
            Action::Perform(c) | Action::PerformLost(c) => {
                let effect = before.controllers[*c as usize].pending.first().map(trace::effect).unwrap_or_default();
                format!("{action:?}: {effect}")
            }
            Action::Decide(c) => {
                let effects = self.decided(&before.controllers[*c as usize]).unwrap_or_default();
                format!("{action:?}: {}", effects.iter().map(trace::effect).collect::<Vec<_>>().join("; "))
            }
            _ => format!("{action:?}"),
        };
        format!("{what}\n      => {}", trace::world(after))
    }
}

/// The controller whose process takes `action`, for the actions a frozen process cannot take.
fn acting_controller(action: &Action) -> Option<u8> {
    match *action {
        Action::Acquire(c)
        | Action::StepDown(c)
        | Action::ReadHost(c)
        | Action::Observe(c, _)
        | Action::ResumeWatch(c, _)
        | Action::Decide(c)
        | Action::Perform(c)
        | Action::PerformLost(c)
        | Action::Extend(c, _)
        | Action::ExtendLost(c, _)
        | Action::LeaseFence(c, _)
        | Action::Freeze(c) => Some(c),
        _ => None,
    }
}

fn effect_member(e: &Effect) -> Option<usize> {
    match e {
        Effect::Store { .. } | Effect::Handover { .. } => None,
        Effect::Write { member, .. }
        | Effect::Release { member, .. }
        | Effect::DeletePod { member, .. }
        | Effect::Retire { member, .. } => Some(*member as usize),
    }
}

/// A watcher lists a member: a consistent snapshot, confirming absences for the StatefulSet's
/// state if its controller has observed it, and settling an uncertain write (the object is read
/// again). An unreachable member only makes the view unreachable.
fn observe(view: &mut View, member: &Member) {
    if !member.api_up {
        view.reachable = false;
        return;
    }
    view.synced = true;
    view.reachable = true;
    // The watcher's settling read: only a read past the write's precondition voids it.
    if let Some(expected_rv) = view.uncertain {
        let uncertain = UncertainWrite { kind: spanset_plan::Backend::StatefulSet, expected_rv };
        if uncertain.settled_by(member.sts.as_ref().map(|s| s.rv)) {
            view.uncertain = None;
        }
    }
    view.sts = member.sts.clone();
    view.pods = member.pods.clone();
    view.claims = member.claims.clone();
    match &member.sts {
        None => view.confirmed = Some(state::Confirmed::Absent),
        Some(s) if s.observed >= s.generation => view.confirmed = Some(state::Confirmed::Present(s.uid, s.generation)),
        Some(_) => {}
    }
    if let Some(s) = &member.sts {
        view.newest_term = view.newest_term.max(s.term);
    }
}

/// The oracle's note on a decision (see [`World::rehomed`]): which of its writes and releases
/// let an ordinal run away from its data, in a member the deciding controller knew fenced (a
/// write does only with the identity gate off: with it on, the release does).
fn note_rehomed(w: &World, ctl: &Controller, gated: bool, effects: &mut [Effect]) {
    let Some(host) = ctl.host.as_ref() else { return };
    let written_off = |k: u32, here: u8| w.data.get(&k).is_some_and(|&(_, at)| at != here && host.fenced[at as usize]);
    for effect in effects {
        match effect {
            Effect::Write { member, start, replicas, rehomed, .. } if !gated => {
                *rehomed = (*start..*start + *replicas).filter(|&k| written_off(k, *member)).collect();
            }
            Effect::Release { member, ordinal, rehomed, .. } => *rehomed = written_off(*ordinal, *member),
            _ => {}
        }
    }
}

/// A re-homed ordinal's fresh claim, once member `m` has made it.
fn rehomed_claims(w: &mut World, m: u8) {
    for (k, r) in w.rehomed.iter_mut() {
        if *r == Rehomed::In(m)
            && let Some(&v) = w.members[m as usize].claims.get(k)
        {
            *r = Rehomed::On(v);
        }
    }
}

/// A request reaches member `m` and is applied there (or refused); the rule that a fenced
/// member gets its shrink before anything else is checked as it lands.
fn land(w: &mut World, m: usize, effect: &Effect) -> Result<(), member::Refused> {
    let fenced_before_shrink = w.members[m].fenced && !w.members[m].shrunk_since_fence;
    let retiring = match effect {
        Effect::Retire { ordinal, .. } => w.members[m].claims.get(ordinal).map(|v| (*ordinal, *v)),
        _ => None,
    };
    w.members[m].apply(effect)?;
    if let Some((k, volume)) = retiring
        && w.data.get(&k) == Some(&(volume, m as u8))
    {
        w.retired_data.get_or_insert_with(|| {
            format!("the claim of ordinal {k} on volume {volume} in {} was deleted: it held its data", MEMBERS[m])
        });
    }
    match effect {
        Effect::Write { rehomed, .. } => {
            for &k in rehomed {
                w.rehomed.insert(k, Rehomed::In(m as u8));
            }
        }
        Effect::Release { ordinal, rehomed: true, .. } => {
            w.rehomed.insert(*ordinal, Rehomed::In(m as u8));
        }
        _ => {}
    }
    rehomed_claims(w, m as u8);
    if fenced_before_shrink {
        match effect {
            Effect::Write { replicas: 0, .. } => w.members[m].shrunk_since_fence = true,
            Effect::Write { to_fenced: true, .. } | Effect::Release { to_fenced: true, .. } => {
                w.broken.get_or_insert_with(|| format!("{effect:?} landed in fenced {} before its shrink", MEMBERS[m]));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Controller `c` carries out one effect.
fn perform(w: &mut World, c: u8, effect: Effect, lost: bool, rules: &Rules) {
    let ci = c as usize;
    match &effect {
        Effect::Store { status } => {
            let ctl = &mut w.controllers[ci];
            let Some(copy) = ctl.host.as_mut() else { return };
            if ctl.failed {
                return;
            }
            if copy.rv != w.host.rv {
                // 409: read again, decide again.
                ctl.host = None;
                ctl.pending.clear();
                return;
            }
            w.host.status = status.clone();
            w.host.rv += 1;
            copy.status = status.clone();
            copy.rv = w.host.rv;
        }
        Effect::Write { member, term, .. }
        | Effect::Release { member, term, .. }
        | Effect::Retire { member, term, .. } => {
            let m = *member as usize;
            // The watcher's term check: this process leads in the write's term, and the member
            // carries no newer one.
            let ctl = &mut w.controllers[ci];
            match term_allows(rules, ctl.term, ctl.views[m].newest_term, *term) {
                Ok(()) => {}
                Err(TermRefusal::NotLeading) => {
                    ctl.pending.clear();
                    return;
                }
                Err(TermRefusal::Superseded { .. }) => {
                    ctl.term = None;
                    ctl.pending.clear();
                    return;
                }
            }
            if !w.members[m].api_up {
                ctl.failed = true;
                return;
            }
            if lost {
                if let Effect::Write { expected_rv, .. } = &effect {
                    ctl.views[m].uncertain = Some(*expected_rv);
                }
                ctl.failed = true;
                w.in_flight.push((c, effect));
                return;
            }
            match land(w, m, &effect) {
                Ok(()) => {
                    if matches!(effect, Effect::Write { .. }) {
                        let sts = w.members[m].sts.clone().expect("written");
                        let view = &mut w.controllers[ci].views[m];
                        view.written = Some((sts.uid, sts.generation));
                        view.uncertain = None;
                        view.newest_term = view.newest_term.max(sts.term);
                        view.sts = Some(sts);
                    }
                }
                Err(_) => w.controllers[ci].failed = true,
            }
        }
        Effect::Handover { from, to, ordinal } => {
            let (from, to) = (*from as usize, *to as usize);
            let ctl = &mut w.controllers[ci];
            let Some(term) = ctl.term else { return };
            let allowed = |m: usize| term_allows(rules, ctl.term, ctl.views[m].newest_term, term).is_ok();
            if !allowed(from) || !allowed(to) || !w.members[from].api_up || !w.members[to].api_up {
                return;
            }
            let Some(volume) = w.members[from].claims.get(ordinal).copied() else { return };
            w.members[to].claims.insert(*ordinal, volume);
            w.members[to].rv += 1;
        }
        Effect::DeletePod { member, .. } => {
            let m = *member as usize;
            if w.controllers[ci].failed || !w.members[m].api_up {
                return;
            }
            if lost {
                w.in_flight.push((c, effect));
                return;
            }
            let _ = land(w, m, &effect);
        }
    }
}

impl Model for Spanset {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        self.starts.clone()
    }

    fn actions(&self, w: &World, out: &mut Vec<Action>) {
        if w.broken.is_some() || w.lost_data.is_some() || w.retired_data.is_some() || w.doubled().is_some() {
            return;
        }
        match self.search {
            Search::Interleavings => {
                self.progress(w, out);
                self.last_resorts(w, out);
            }
            Search::FaultPlacements if self.settled(w) || w.since_fault >= CONVERGE_WITHIN || self.past_horizon(w) => {}
            Search::FaultPlacements => {
                out.push(Action::Fair);
                self.resumptions(w, out, false);
            }
        }
        if w.faults_left > 0 {
            let on = |f: Fault| self.kinds.contains(&f);
            for c in 0..CONTROLLERS as u8 {
                if w.controllers[c as usize].up && on(Fault::Crash) {
                    out.push(Action::Crash(c));
                }
                if w.host.holder == Some(c) && on(Fault::Freeze) {
                    out.push(Action::Freeze(c));
                }
                if !w.controllers[c as usize].pending.is_empty() && on(Fault::LostAnswer) {
                    out.push(Action::PerformLost(c));
                }
                if w.controllers[c as usize].leases.is_some() && on(Fault::LostAnswer) {
                    for m in 0..MEMBERS.len() as u8 {
                        out.push(Action::ExtendLost(c, m));
                    }
                }
                if on(Fault::WatchStall) {
                    for m in 0..MEMBERS.len() as u8 {
                        out.push(Action::StallWatch(c, m));
                    }
                }
            }
            if on(Fault::Pause)
                && w.host
                    .holder
                    .is_some_and(|h| w.controllers[h as usize].up && w.controllers[h as usize].term.is_some())
            {
                out.push(Action::Expire);
            }
            if w.leases.is_some() && on(Fault::HostOutage) {
                out.push(Action::HostOutage);
            }
            if w.leases.is_some() && on(Fault::LateGuard) {
                for m in 0..MEMBERS.len() as u8 {
                    out.push(Action::LateGuard(m));
                }
            }
            if w.leases.is_some() && on(Fault::WatchDown) {
                for m in 0..MEMBERS.len() as u8 {
                    out.push(Action::WatchDown(m));
                }
            }
            for m in 0..MEMBERS.len() as u8 {
                if on(Fault::Partition) {
                    out.push(Action::Partition(m));
                }
                if on(Fault::NodeLoss) {
                    out.push(Action::LoseNode(m, false));
                    out.push(Action::LoseNode(m, true));
                }
                if on(Fault::SlowKubelet) {
                    out.push(Action::StallKubelet(m));
                }
                if on(Fault::PausedSync) {
                    out.push(Action::PauseSync(m));
                }
            }
        }
        if w.edits_left > 0 {
            for s in 0..self.fixed.specs.len() as u8 {
                out.push(Action::Edit(s));
            }
        }
    }

    fn next_state(&self, w: &World, action: Action) -> Option<World> {
        let mut next = self.step(w, &action)?;
        if next.faults_left < w.faults_left || next.edits_left < w.edits_left {
            next.since_fault = 0;
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("at most one running pod per ordinal", |_, w: &World| w.doubled().is_none()),
            Property::always("a fenced member gets its shrink before anything else", |_, w: &World| w.broken.is_none()),
            Property::always("a moved ordinal starts on its own volume", |_, w: &World| w.lost_data.is_none()),
            Property::always("a retired claim never holds its ordinal's data", |_, w: &World| w.retired_data.is_none()),
            // Liveness under fairness (fault-placement search): once the faults stop, the fair
            // scheduler converges.
            Property::always("every schedule converges once the faults stop", |_, w: &World| {
                w.since_fault < CONVERGE_WITHIN
            }),
            // The start runs everything in `a`: an ordinal Ready in `b` has moved.
            Property::sometimes("an ordinal moves and the federation settles", |m: &Spanset, w: &World| {
                m.converged(w) && w.members[1].pods.values().any(|p| p.running)
            }),
        ]
    }
}
