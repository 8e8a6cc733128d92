//! Pod leases in the model: real time in integer ticks (one second each), a monotonic clock per
//! controller process and per member node that runs at its own rate within ρ, each member's pod
//! Lease (its extension counter and the ordinals it names), every pod's guard (the library's
//! [`Guard`], polling once its node's clock says a poll is due and stopping its pod as it
//! says), and each leading controller's [`LeaseClock`] per member. The controller extends
//! every R (and at once when the ordinals to name change) while it holds the leader Lease;
//! once a member's lease has lapsed on its clock it fences the member (`spec.fenced`, as the
//! `Automatic` policy does), which is how `decide` learns that the member's ordinals may be
//! re-homed: no new input to `decide`.
//!
//! What the model takes as given (the bounds the rules rely on): every clock's rate is within
//! ρ (here a fixed rate per schedule, the extremes being the worst case); a write lands within
//! W of its send or never; a guard polls at least every P on its clock; a controller sends an
//! extension only while it holds the leader Lease (a frozen one that thaws finds it lost), and
//! a new leader's first act is to read the host.
//!
//! Every container of a pod ends itself by the deadline its pod's watch last posted (its first
//! process, the library's [`Exec`]): so a watch that stops (`WatchDown`: crashed, backing off,
//! SIGSTOPped) stops nothing itself, and its pods still stop, by that deadline, checked as each
//! tick begins (the first process checks ten times a second).
//!
//! What the model does not show: spanset lapsing at `latest_landing + L` without its drift
//! margin. Each side's drift factor alone covers both clocks, so that mutation is unsafe only
//! by the guard's poll period P; in whole ticks a late guard's kill comes at most a tick after
//! the lapse, and a re-homed pod's guard needs a tick (a poll after the extension naming it)
//! before it starts, so the window is empty. The library's proof (`pod_lease`, continuous time)
//! shows that mutation red.

use std::time::Duration;

pub use spanset_controller::pod_lease::clock::Outcome;
use spanset_controller::{
    decisions::safety::Rules,
    pod_lease::{
        Timing,
        clock::{LeaseClock, Next},
        exec::{Exec, Phase, Posted, Step},
        guard::{Action as GuardAction, Guard, Poll},
    },
};
use spanset_plan::Ordinals;

use super::state::{MEMBERS, Member, Node, REPLICAS};

/// A clock's rate, in parts per million of real time.
pub type Rate = u32;

/// The pod-lease world a search asks for ([`super::Spanset::pod_leases`]).
#[derive(Debug, Clone, Copy)]
pub struct LeaseWorld {
    /// L, ρ, W, R, P in the model's seconds (one tick each).
    pub timing: Timing,
    /// The controllers' clocks' rate.
    pub controller_rate: Rate,
    /// Each member node's clock's rate.
    pub node_rates: [Rate; MEMBERS.len()],
    /// How long a host outage keeps every controller down, in ticks.
    pub outage: u32,
    /// Where a schedule ends, in ticks after its start (`None`: once it converged): a hunt
    /// for a planted bug looks at the ticks around the faults, not at the convergence after.
    pub horizon: Option<u32>,
}

impl LeaseWorld {
    /// The model's lease: L 10 s, ρ 10 % (so that drift shows within a few ticks), W 10 s,
    /// R = L/4, P 2 s (a node's guards poll once a second on their clock, a tick may pass
    /// before they do, and a fault makes one poll as late as P); controllers' and nodes' clocks
    /// at these rates; outages of 2L.
    pub fn new(controller_rate: Rate, node_rate: Rate) -> LeaseWorld {
        let lease = Duration::from_secs(10);
        let timing = Timing {
            lease,
            drift_ppm: 100_000,
            write_deadline: Duration::from_secs(10),
            renew: lease / 4,
            poll: Duration::from_secs(2),
            kill: Duration::ZERO,
            stop_budget: Duration::ZERO,
        };
        LeaseWorld { timing, controller_rate, node_rates: [node_rate; MEMBERS.len()], outage: 20, horizon: None }
    }

    /// The fastest rate a clock may run at.
    pub fn fast(&self) -> Rate {
        1_000_000 + self.timing.drift_ppm
    }

    /// The slowest.
    pub fn slow(&self) -> Rate {
        1_000_000 - self.timing.drift_ppm
    }

    /// A controller's clock at tick `now` (its instant).
    pub fn controller_clock(&self, base: std::time::Instant, now: u32) -> std::time::Instant {
        base + ticks(now, self.controller_rate)
    }

    /// Member `m`'s node's clock at tick `now` (since its boot at tick 0).
    pub fn node_clock(&self, now: u32, m: usize) -> Duration {
        ticks(now, self.node_rates[m])
    }
}

fn ticks(now: u32, rate: Rate) -> Duration {
    Duration::from_nanos(u64::from(now) * u64::from(rate) * 1_000)
}

/// The ordinals named, as a bit per ordinal.
pub type Names = u8;

/// [`Names`] as the library's set.
pub fn ordinals(names: Names) -> Ordinals {
    (0..REPLICAS).filter(|k| names & (1 << k) != 0).collect()
}

/// A member's pod Lease object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LeaseObject {
    /// The extension counter (every landing write changes it).
    pub extension: u64,
    /// The ordinals named.
    pub names: Names,
}

/// An extension whose answer was lost: it may land until `until` (its send + the send window + W), if the
/// Lease is still as it was when it was sent (the write is conditional on the resourceVersion).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    /// Member index.
    pub member: u8,
    /// The ordinals it names.
    pub names: Names,
    /// The extension it was written over (its precondition).
    pub over: u64,
    /// The last tick it may land in.
    pub until: u32,
}

/// The pod-lease part of the world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Leases {
    /// Real time, in ticks.
    pub now: u32,
    /// Each member's pod Lease.
    pub objects: [LeaseObject; MEMBERS.len()],
    /// Each member's pods' guards, by ordinal (a pod that does not exist has a fresh one).
    pub guards: [[Guard; REPLICAS as usize]; MEMBERS.len()],
    /// Each member node's clock at its guards' last poll.
    pub last_poll: [Option<Duration>; MEMBERS.len()],
    /// Extensions whose answer was lost.
    pub in_flight: Vec<InFlight>,
    /// A host outage keeps every controller down until this tick.
    pub outage_until: Option<u32>,
    /// Each member's guards' next poll comes at the end of their period P.
    pub late: [bool; MEMBERS.len()],
    /// Each member's pods' watches are down (crashed, backing off, stopped): they neither
    /// poll nor stop anything, until they come back.
    pub watch_down: [bool; MEMBERS.len()],
    /// The deadline each pod's watch last posted (`None`: nothing lets it run).
    pub posted: [[Option<Duration>; REPLICAS as usize]; MEMBERS.len()],
}

impl Leases {
    /// Nothing written yet, fresh guards, at tick 0.
    pub fn new(world: &LeaseWorld, rules: Rules) -> Leases {
        Leases {
            now: 0,
            objects: Default::default(),
            guards: std::array::from_fn(|_| std::array::from_fn(|k| Guard::new(k as u32, world.timing, rules))),
            last_poll: [None; MEMBERS.len()],
            in_flight: vec![],
            outage_until: None,
            late: [false; MEMBERS.len()],
            watch_down: [false; MEMBERS.len()],
            posted: [[None; REPLICAS as usize]; MEMBERS.len()],
        }
    }
}

/// What a leading controller keeps of the members' pod leases.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ControllerLeases {
    /// Each member's lease, on this process's clock.
    pub clocks: [LeaseClock; MEMBERS.len()],
    /// The ordinals last named in each member.
    pub named: [Option<Names>; MEMBERS.len()],
    /// The process read the host since it started leading.
    pub read_in_term: bool,
    /// When it last tried each member (one attempt per member per instant).
    pub tried: [Option<std::time::Instant>; MEMBERS.len()],
}

impl ControllerLeases {
    /// As a process starts leading at `now` (its clock).
    pub fn new(world: &LeaseWorld, rules: Rules, now: std::time::Instant) -> ControllerLeases {
        ControllerLeases {
            clocks: std::array::from_fn(|_| LeaseClock::new(now, world.timing, rules)),
            named: [None; MEMBERS.len()],
            read_in_term: false,
            tried: [None; MEMBERS.len()],
        }
    }

    /// Whether an extension of member `m` naming `names` is due at `now`.
    pub fn due(&self, m: usize, names: Names, now: std::time::Instant) -> bool {
        self.named[m] != Some(names) || self.clocks[m].next_extension(now) == Next::Now
    }

    /// Notes an extension of `m` sent at `now` with its outcome.
    pub fn extended(&mut self, m: usize, names: Names, now: std::time::Instant, outcome: Outcome) {
        self.tried[m] = Some(now);
        let attempt = self.clocks[m].send(now);
        self.clocks[m].settle(attempt, outcome);
        if outcome != Outcome::NotSent {
            self.named[m] = Some(names);
        }
    }
}

/// A write lands in a member's Lease.
pub fn land(object: &mut LeaseObject, names: Names) {
    object.extension += 1;
    object.names = names;
}

/// Member `m`'s guards poll at the node's clock `at` (their Lease, if the node reaches its API
/// server), then do what they say: a pod whose guard says kill stops (its sandbox restarts
/// with a fresh guard). Each posts the deadline its pod's containers keep. (Watches that are
/// down do not poll.)
pub fn poll(leases: &mut Leases, member: &mut Member, m: usize, at: Duration, world: &LeaseWorld, rules: Rules) {
    let object = leases.objects[m].clone();
    let names = ordinals(object.names);
    let read = member.node == Node::Up;
    for (k, guard) in leases.guards[m].iter_mut().enumerate() {
        let seen = if read {
            Poll::Read { extension: object.extension, ordinals: &names, released: false }
        } else {
            Poll::Failed
        };
        guard.polled(at, seen);
        if guard.action(at) == GuardAction::Kill {
            *guard = Guard::new(k as u32, world.timing, rules);
            stop_pod(member, k as u32);
        }
        leases.posted[m][k] = match guard.action(at) {
            GuardAction::Run | GuardAction::Term => guard.deadline(),
            _ => None,
        };
    }
    leases.last_poll[m] = Some(at);
}

/// The first process of each running pod of member `m` ends it if the deadline its watch last
/// posted has come on the node's clock `at` (as the library's [`Exec`] decides, from the posted
/// state alone), whether or not the watch runs.
pub fn enforce(leases: &Leases, member: &mut Member, m: usize, at: Duration, rules: Rules) {
    for k in 0..REPLICAS {
        if !member.pods.get(&k).is_some_and(|p| p.running) {
            continue;
        }
        let posted = leases.posted[m][k as usize];
        let mut exec = Exec::new(Duration::ZERO, rules.exec_deadline);
        exec.read(Some(Posted { epoch: 0, phase: Phase::Valid, deadline: posted, term_at: posted }));
        exec.started();
        if matches!(exec.step(at), Step::Stop(_)) {
            stop_pod(member, k);
        }
    }
}

/// A guard stops pod `k`'s containers; its kubelet reports it not Ready if it reaches the API.
fn stop_pod(member: &mut Member, k: u32) {
    let up = member.node == Node::Up;
    let Some(p) = member.pods.get(&k) else { return };
    if !p.running {
        return;
    }
    member.rv += 1;
    let rv = member.rv;
    let p = member.pods.get_mut(&k).expect("present");
    p.running = false;
    if up {
        p.ready = false;
        p.rv = rv;
    }
}

/// Whether member `m`'s guard lets pod `k` run now.
pub fn allows(leases: &Leases, m: usize, k: u32, at: Duration) -> bool {
    matches!(leases.guards[m][k as usize].action(at), GuardAction::Run | GuardAction::Term)
}

/// A pod that does not exist, or a node that powered off, has a fresh guard: the next pod (or
/// the rebooted one) starts with the init container's.
pub fn reset_guards(leases: &mut Leases, members: &[Member; MEMBERS.len()], world: &LeaseWorld, rules: Rules) {
    for (m, member) in members.iter().enumerate() {
        for k in 0..REPLICAS {
            if member.node == Node::PoweredOff || !member.pods.contains_key(&k) {
                let fresh = Guard::new(k, world.timing, rules);
                if leases.guards[m][k as usize] != fresh {
                    leases.guards[m][k as usize] = fresh;
                }
                leases.posted[m][k as usize] = None;
            }
        }
        if member.node == Node::PoweredOff {
            leases.last_poll[m] = None;
        }
    }
}
