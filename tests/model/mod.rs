//! A stateright model of spanset: two controller replicas contending for a Lease with terms,
//! two member clusters (API servers with resourceVersions and term stamps, StatefulSet
//! controllers, kubelets whose node can lose its network or power), and a network that loses
//! answers (the request may still land, late, once) and partitions. The controllers decide
//! with the real `reconcile::decide`; everything else is the world around it.

pub mod controller;
pub mod member;
pub mod state;

use std::time::{Duration, Instant};

use spanset::{api::FederatedStatefulSet, controller::member::objects::gated};
use stateright::{Model, Property};

use self::{
    controller::Fixed,
    state::{CONTROLLERS, Controller, Effect, Host, HostCopy, MEMBERS, Member, Node, REPLICAS, View, World},
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
}

/// The model: its fixed specs and clocks, and the budgets of a schedule.
pub struct Spanset {
    /// Specs and clocks.
    pub fixed: Fixed,
    /// The state every schedule starts from.
    pub start: World,
}

/// A federation of `REPLICAS` over the model's members with these weights.
pub fn spec(weights: [i32; 2]) -> FederatedStatefulSet {
    let names: Vec<String> = MEMBERS.iter().map(|m| m.to_string()).collect();
    let mut f = spanset::api::example(&names);
    f.spec.replicas = REPLICAS as i32;
    for (p, w) in f.spec.placement.clusters.iter_mut().zip(weights) {
        p.weight = Some(w);
    }
    f.spec.template.pod_management_policy = Some("Parallel".into());
    f.spec.network = Some(serde_json::from_value(serde_json::json!({"mode": "None"})).expect("a network spec"));
    f.metadata.uid = Some("uid-1".into());
    f.metadata.finalizers = Some(vec![spanset::controller::labels::FINALIZER.into()]);
    f
}

impl Spanset {
    /// The model over these specs (the first is the one the world starts settled on).
    pub fn new(specs: Vec<FederatedStatefulSet>, faults: u8, edits: u8) -> Spanset {
        let fixed = Fixed {
            specs,
            now: Instant::now() + Duration::from_secs(3 * 3600),
            wall: jiff::Timestamp::from_second(1_800_000_000).expect("a time"),
        };
        let empty = World {
            host: Host { spec: 0, generation: 1, status: String::new(), rv: 1, holder: None, term: 0 },
            members: std::array::from_fn(|_| Member::empty()),
            controllers: std::array::from_fn(|_| Controller {
                up: true,
                term: None,
                host: None,
                views: Default::default(),
                pending: vec![],
                failed: false,
            }),
            in_flight: vec![],
            faults_left: 0,
            edits_left: 0,
            broken: None,
        };
        let mut model = Spanset { fixed, start: empty.clone() };
        let settled =
            model.settle(empty, 5_000).unwrap_or_else(|(w, why)| panic!("the start does not settle: {why}\n{w:#?}"));
        model.start = World { faults_left: faults, edits_left: edits, ..settled };
        model
    }

    fn gated(&self, w: &World) -> bool {
        gated(&self.fixed.specs[w.host.spec as usize])
    }

    /// The actions that are not faults, in a fixed order (the fair scheduler's).
    fn progress(&self, w: &World, out: &mut Vec<Action>) {
        for c in 0..CONTROLLERS as u8 {
            let ctl = &w.controllers[c as usize];
            if !ctl.up {
                out.push(Action::Restart(c));
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
                out.push(Action::Observe(c, m));
            }
            if ctl.term.is_some() && ctl.pending.is_empty() && ctl.host.is_some() {
                out.push(Action::Decide(c));
            }
            if !ctl.pending.is_empty() {
                out.push(Action::Perform(c));
            }
        }
        if let Some(h) = w.host.holder
            && !w.controllers[h as usize].up
        {
            out.push(Action::Expire);
        }
        for i in 0..w.in_flight.len() {
            out.push(Action::Land(i));
            out.push(Action::Vanish(i));
        }
        for m in 0..MEMBERS.len() as u8 {
            let mem = &w.members[m as usize];
            out.push(Action::StatefulSet(m));
            out.push(Action::Kubelet(m));
            if mem.node != Node::Up {
                out.push(Action::Evict(m));
            }
            if !mem.api_up {
                out.push(Action::Heal(m));
            }
            if mem.node != Node::Up {
                out.push(Action::ReturnNode(m));
            }
            if !mem.fenced && mem.node == Node::PoweredOff {
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
    }

    /// Applies one action; `None` when it changes nothing (or cannot happen).
    pub fn step(&self, w: &World, action: &Action) -> Option<World> {
        let mut w = w.clone();
        match *action {
            Action::Acquire(c) => {
                let ctl = &mut w.controllers[c as usize];
                if !ctl.up || w.host.holder.is_some() {
                    return None;
                }
                w.host.term += 1;
                w.host.holder = Some(c);
                ctl.term = Some(w.host.term);
                ctl.pending.clear();
                ctl.failed = false;
            }
            Action::StepDown(c) => {
                let ctl = &mut w.controllers[c as usize];
                if ctl.term.is_none() || (w.host.holder == Some(c) && ctl.term == Some(w.host.term)) {
                    return None;
                }
                ctl.term = None;
                ctl.pending.clear();
                ctl.failed = false;
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
                if !ctl.up || ctl.host.as_ref() == Some(&copy) {
                    return None;
                }
                ctl.host = Some(copy);
            }
            Action::Observe(c, m) => {
                let member = &w.members[m as usize];
                let ctl = &mut w.controllers[c as usize];
                if !ctl.up {
                    return None;
                }
                let before = ctl.views[m as usize].clone();
                observe(&mut ctl.views[m as usize], member);
                if ctl.views[m as usize] == before {
                    return None;
                }
            }
            Action::Decide(c) => {
                let ctl = &w.controllers[c as usize];
                if !ctl.up || !ctl.pending.is_empty() {
                    return None;
                }
                let (fsts, decision) = controller::decide(&self.fixed, ctl)?;
                let fenced = ctl.host.as_ref().expect("decided on it").fenced;
                let effects = controller::effects(&fsts, &decision, ctl.term.expect("leads"), &fenced);
                if effects.is_empty() {
                    return None;
                }
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
                if lost && matches!(effect, Effect::Store { .. }) {
                    return None;
                }
                if lost {
                    w.faults_left -= 1;
                }
                perform(&mut w, c, effect, lost);
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
                w.members[m as usize].statefulset_round(gated)?;
            }
            Action::Kubelet(m) => w.members[m as usize].kubelet_round()?,
            Action::Evict(m) => w.members[m as usize].evict()?,
            Action::Crash(c) => {
                if w.faults_left == 0 || !w.controllers[c as usize].up {
                    return None;
                }
                w.faults_left -= 1;
                let ctl = &mut w.controllers[c as usize];
                *ctl = Controller {
                    up: false,
                    term: None,
                    host: None,
                    views: Default::default(),
                    pending: vec![],
                    failed: false,
                };
            }
            Action::Restart(c) => {
                let ctl = &mut w.controllers[c as usize];
                if ctl.up {
                    return None;
                }
                ctl.up = true;
            }
            Action::Expire => {
                let h = w.host.holder?;
                if w.controllers[h as usize].up {
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
                if w.members[m as usize].node == Node::Up {
                    return None;
                }
                w.members[m as usize].return_node();
            }
            Action::Fence(m) => {
                let mem = &mut w.members[m as usize];
                if mem.fenced || mem.node != Node::PoweredOff {
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
        Some(w)
    }

    /// Whether the federation is settled on the spec: the status says Ready for this
    /// generation with no move, and each ordinal runs exactly once, where the status says.
    pub fn converged(&self, w: &World) -> bool {
        if w.host.status.is_empty() {
            return false;
        }
        let status: spanset::api::FederatedStatefulSetStatus = serde_json::from_str(&w.host.status).expect("a status");
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
    pub fn settle(&self, mut w: World, steps: usize) -> Result<World, (World, String)> {
        w.faults_left = 0;
        w.edits_left = 0;
        let mut turn = 0usize;
        for _ in 0..steps {
            if self.converged(&w) && w.controllers.iter().all(|c| c.pending.is_empty()) && w.in_flight.is_empty() {
                return Ok(w);
            }
            let mut actions = Vec::new();
            self.progress(&w, &mut actions);
            let n = actions.len();
            let next = (0..n).find_map(|i| {
                let a = &actions[(turn + i) % n];
                self.step(&w, a).map(|next| (i, next))
            });
            match next {
                Some((i, next)) => {
                    turn = turn + i + 1;
                    w = next;
                }
                None => return Err((w, "nothing left to do, and not converged".into())),
            }
        }
        Err((w, format!("not converged after {steps} fair steps")))
    }
}

fn effect_member(e: &Effect) -> Option<usize> {
    match e {
        Effect::Store { .. } => None,
        Effect::Write { member, .. } | Effect::Release { member, .. } | Effect::DeletePod { member, .. } => {
            Some(*member as usize)
        }
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
    view.uncertain = false;
    view.sts = member.sts.clone();
    view.pods = member.pods.clone();
    match &member.sts {
        None => view.confirmed = Some(state::Confirmed::Absent),
        Some(s) if s.observed >= s.generation => view.confirmed = Some(state::Confirmed::Present(s.uid, s.generation)),
        Some(_) => {}
    }
    if let Some(s) = &member.sts {
        view.newest_term = view.newest_term.max(s.term);
    }
}

/// A request reaches member `m` and is applied there (or refused); the rule that a fenced
/// member gets its shrink before anything else is checked as it lands.
fn land(w: &mut World, m: usize, effect: &Effect) -> Result<(), member::Refused> {
    let fenced_before_shrink = w.members[m].fenced && !w.members[m].shrunk_since_fence;
    w.members[m].apply(effect)?;
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
fn perform(w: &mut World, c: u8, effect: Effect, lost: bool) {
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
        Effect::Write { member, term, .. } | Effect::Release { member, term, .. } => {
            let m = *member as usize;
            // The watcher's term check: this process leads in the write's term, and the member
            // carries no newer one.
            let ctl = &mut w.controllers[ci];
            if ctl.term != Some(*term) || ctl.views[m].newest_term > *term {
                ctl.term = if ctl.views[m].newest_term > *term { None } else { ctl.term };
                ctl.pending.clear();
                return;
            }
            if !w.members[m].api_up {
                ctl.failed = true;
                return;
            }
            if lost {
                if matches!(effect, Effect::Write { .. }) {
                    ctl.views[m].uncertain = true;
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
                        view.newest_term = view.newest_term.max(sts.term);
                        view.sts = Some(sts);
                    }
                }
                Err(_) => w.controllers[ci].failed = true,
            }
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
        vec![self.start.clone()]
    }

    fn actions(&self, w: &World, out: &mut Vec<Action>) {
        if w.broken.is_some() || w.doubled().is_some() {
            return;
        }
        self.progress(w, out);
        if w.faults_left > 0 {
            for c in 0..CONTROLLERS as u8 {
                if w.controllers[c as usize].up {
                    out.push(Action::Crash(c));
                }
                if !w.controllers[c as usize].pending.is_empty() {
                    out.push(Action::PerformLost(c));
                }
            }
            if w.host.holder.is_some_and(|h| w.controllers[h as usize].up) {
                out.push(Action::Expire);
            }
            for m in 0..MEMBERS.len() as u8 {
                out.push(Action::Partition(m));
                out.push(Action::LoseNode(m, false));
                out.push(Action::LoseNode(m, true));
            }
        }
        if w.edits_left > 0 {
            for s in 0..self.fixed.specs.len() as u8 {
                out.push(Action::Edit(s));
            }
        }
    }

    fn next_state(&self, w: &World, action: Action) -> Option<World> {
        self.step(w, &action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("at most one running pod per ordinal", |_, w: &World| w.doubled().is_none()),
            Property::always("a fenced member gets its shrink before anything else", |_, w: &World| w.broken.is_none()),
            // The start runs everything in `a`: an ordinal Ready in `b` has moved.
            Property::sometimes("an ordinal moves and the federation settles", |m: &Spanset, w: &World| {
                m.converged(w) && w.members[1].pods.values().any(|p| p.running)
            }),
        ]
    }
}
