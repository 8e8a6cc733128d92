//! The chaos drill's schedule: a pure function from a seed and the shape of the fleet (members,
//! their nodes, the controllers the drill started, the federation's base replicas and image)
//! to a list of timed steps. Nothing here touches a cluster, so `--plan` prints exactly what a
//! run with the same seed will do, and the schedule is unit-tested without a sandbox.
//!
//! Every lasting fault is paired with its end (heal, node up, restart, resume) at a random
//! while after it; one whose end would fall after the end of the run is left to the drill's
//! final heal, so that the time to converge after it measures a real recovery. A member carries at most one API fault at
//! a time (the sandbox's `heal` clears partition, latency and errors together), and at most one
//! of its nodes is down at a time, so that its pods can always be rescheduled.

use std::{collections::BTreeMap, fmt, time::Duration};

use serde::Serialize;

/// SplitMix64: a tiny generator with a fixed algorithm, so that a seed gives the same schedule
/// in every build and on every machine (the `rand` crate does not promise that for its
/// standard generator across versions).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// One of `items` (which must not be empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() as u64 - 1) as usize]
    }
}

/// What the schedule is drawn over.
#[derive(Debug, Clone)]
pub struct Shape {
    /// The seed.
    pub seed: u64,
    /// How long faults and spec changes are injected.
    pub duration: Duration,
    /// The federation's members, with their simulated nodes.
    pub members: BTreeMap<String, Vec<String>>,
    /// How many controllers the drill started (only those are killed or paused).
    pub controllers: usize,
    /// The controllers' lease duration: a pause lasts longer than it.
    pub lease: Duration,
    /// The federation's replicas when the drill began.
    pub replicas: i32,
    /// The federation's first container image when the drill began.
    pub image: String,
    /// Mean time between two injections.
    pub pace: Duration,
}

/// One thing the drill does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "action")]
pub enum Action {
    /// Spec change: new placement weights (member, weight).
    Weights {
        /// Member and weight, in member order.
        weights: Vec<(String, i32)>,
    },
    /// Spec change: new replicas.
    Replicas {
        /// The replicas.
        replicas: i32,
    },
    /// Spec change: new image of the first container (a rolling update).
    Image {
        /// The image.
        image: String,
    },
    /// A member's API refuses connections, or (`hang`) accepts and never answers.
    Partition {
        /// The member.
        cluster: String,
        /// Hung rather than refused.
        hang: bool,
    },
    /// A member's API answers every request late.
    Latency {
        /// The member.
        cluster: String,
        /// Added milliseconds.
        ms: u64,
    },
    /// A member's API answers a share of requests with HTTP 500.
    Errors {
        /// The member.
        cluster: String,
        /// Percent of requests that fail.
        percent: u64,
    },
    /// Ends a member's partition, latency or errors.
    Heal {
        /// The member.
        cluster: String,
    },
    /// Ends every open watch on a member.
    CutWatches {
        /// The member.
        cluster: String,
    },
    /// Compacts a member's history and ends its watches: they resume with 410 Gone.
    ExpireWatches {
        /// The member.
        cluster: String,
    },
    /// A node is lost: unreachable (its containers keep running) or powered off.
    NodeDown {
        /// The member.
        cluster: String,
        /// The node.
        node: String,
        /// Powered off rather than cut off.
        power_off: bool,
    },
    /// A node returns.
    NodeUp {
        /// The member.
        cluster: String,
        /// The node.
        node: String,
    },
    /// SIGKILL of a controller the drill started.
    Kill {
        /// Its index.
        controller: usize,
    },
    /// A killed controller starts again.
    Restart {
        /// Its index.
        controller: usize,
    },
    /// SIGSTOP of a controller the drill started, for longer than the lease.
    Pause {
        /// Its index.
        controller: usize,
    },
    /// SIGCONT of a paused controller.
    Resume {
        /// Its index.
        controller: usize,
    },
}

impl Action {
    /// The kind counted in the report: a fault, a spec change, or `None` for a recovery.
    pub fn kind(&self) -> Option<(Category, &'static str)> {
        use Category::{Fault, Spec};
        Some(match self {
            Action::Weights { .. } => (Spec, "weights"),
            Action::Replicas { .. } => (Spec, "replicas"),
            Action::Image { .. } => (Spec, "image"),
            Action::Partition { hang: false, .. } => (Fault, "partition-refused"),
            Action::Partition { hang: true, .. } => (Fault, "partition-hung"),
            Action::Latency { .. } => (Fault, "latency"),
            Action::Errors { .. } => (Fault, "errors-5xx"),
            Action::CutWatches { .. } => (Fault, "cut-watches"),
            Action::ExpireWatches { .. } => (Fault, "expire-watches"),
            Action::NodeDown { power_off: false, .. } => (Fault, "node-lost"),
            Action::NodeDown { power_off: true, .. } => (Fault, "node-powered-off"),
            Action::Kill { .. } => (Fault, "controller-kill"),
            Action::Pause { .. } => (Fault, "controller-pause"),
            Action::Heal { .. } | Action::NodeUp { .. } | Action::Restart { .. } | Action::Resume { .. } => {
                return None;
            }
        })
    }
}

/// Whether an action is a fault or a spec change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// A fault injected.
    Fault,
    /// A change of the federation's spec.
    Spec,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Weights { weights } => {
                let w: Vec<String> = weights.iter().map(|(c, w)| format!("{c}={w}")).collect();
                write!(f, "weights {}", w.join(","))
            }
            Action::Replicas { replicas } => write!(f, "replicas {replicas}"),
            Action::Image { image } => write!(f, "image {image}"),
            Action::Partition { cluster, hang } => {
                write!(f, "partition {cluster} ({})", if *hang { "hung" } else { "refused" })
            }
            Action::Latency { cluster, ms } => write!(f, "latency {cluster} {ms}ms"),
            Action::Errors { cluster, percent } => write!(f, "errors {cluster} {percent}% 500"),
            Action::Heal { cluster } => write!(f, "heal {cluster}"),
            Action::CutWatches { cluster } => write!(f, "cut-watches {cluster}"),
            Action::ExpireWatches { cluster } => write!(f, "expire-watches {cluster}"),
            Action::NodeDown { cluster, node, power_off } => {
                write!(f, "node-down {cluster}/{node}{}", if *power_off { " (power off)" } else { "" })
            }
            Action::NodeUp { cluster, node } => write!(f, "node-up {cluster}/{node}"),
            Action::Kill { controller } => write!(f, "kill controller-{controller}"),
            Action::Restart { controller } => write!(f, "restart controller-{controller}"),
            Action::Pause { controller } => write!(f, "pause controller-{controller}"),
            Action::Resume { controller } => write!(f, "resume controller-{controller}"),
        }
    }
}

/// One timed step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Milliseconds from the start of the run.
    pub at_ms: u64,
    /// What to do.
    pub action: Action,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{:>7.1}s  {}", self.at_ms as f64 / 1000.0, self.action)
    }
}

/// Draws the schedule for `shape`: the same shape gives the same steps, sorted by time.
pub fn schedule(shape: &Shape) -> Vec<Step> {
    let mut rng = Rng::new(shape.seed);
    let end = shape.duration.as_millis() as u64;
    let pace = (shape.pace.as_millis() as u64).max(100);
    let members: Vec<&String> = shape.members.keys().collect();
    // Until when each member's API, each member's nodes and each controller are taken.
    let mut api_busy: BTreeMap<&str, u64> = BTreeMap::new();
    let mut node_busy: BTreeMap<&str, u64> = BTreeMap::new();
    let mut ctl_busy = vec![0u64; shape.controllers];
    let mut steps = Vec::new();
    let mut image = shape.image.clone();
    let mut t = rng.range(pace / 2, pace * 3 / 2);
    while t < end {
        // A lasting fault holds 1 to 6 paces.
        let hold = |rng: &mut Rng| t + rng.range(pace, pace * 6);
        let roll = rng.range(0, 99);
        if roll < 25 || members.is_empty() {
            steps.push(Step { at_ms: t, action: spec_change(&mut rng, shape, &mut image) });
        } else if roll < 80 || shape.controllers == 0 {
            let cluster = rng.pick(&members).as_str();
            let nodes = &shape.members[cluster];
            let kind = rng.range(0, 9);
            let api_free = api_busy.get(cluster).is_none_or(|&u| u <= t);
            let node_free = !nodes.is_empty() && node_busy.get(cluster).is_none_or(|&u| u <= t);
            let c = cluster.to_string();
            match kind {
                0..=4 if api_free => {
                    let action = match kind {
                        0 => Action::Partition { cluster: c.clone(), hang: false },
                        1 => Action::Partition { cluster: c.clone(), hang: true },
                        2 => Action::Latency { cluster: c.clone(), ms: rng.range(50, 400) },
                        _ => Action::Errors { cluster: c.clone(), percent: rng.range(10, 50) },
                    };
                    let until = hold(&mut rng);
                    api_busy.insert(cluster, until);
                    steps.push(Step { at_ms: t, action });
                    steps.push(Step { at_ms: until, action: Action::Heal { cluster: c } });
                }
                5 | 6 if node_free => {
                    let node = rng.pick(nodes).clone();
                    let until = hold(&mut rng);
                    node_busy.insert(cluster, until);
                    let power_off = kind == 6;
                    steps.push(Step {
                        at_ms: t,
                        action: Action::NodeDown { cluster: c.clone(), node: node.clone(), power_off },
                    });
                    steps.push(Step { at_ms: until, action: Action::NodeUp { cluster: c, node } });
                }
                7 => steps.push(Step { at_ms: t, action: Action::ExpireWatches { cluster: c } }),
                _ => steps.push(Step { at_ms: t, action: Action::CutWatches { cluster: c } }),
            }
        } else {
            let i = rng.range(0, shape.controllers as u64 - 1) as usize;
            if ctl_busy[i] <= t {
                if rng.range(0, 1) == 0 {
                    let until = t + rng.range(pace / 4, pace);
                    steps.push(Step { at_ms: t, action: Action::Kill { controller: i } });
                    steps.push(Step { at_ms: until, action: Action::Restart { controller: i } });
                    ctl_busy[i] = until;
                } else {
                    // Past the lease, so that another replica takes over and this one wakes up
                    // believing it still leads.
                    let lease = shape.lease.as_millis() as u64;
                    let until = t + lease + rng.range(pace / 4, pace);
                    steps.push(Step { at_ms: t, action: Action::Pause { controller: i } });
                    steps.push(Step { at_ms: until, action: Action::Resume { controller: i } });
                    ctl_busy[i] = until;
                }
            } else {
                steps.push(Step { at_ms: t, action: spec_change(&mut rng, shape, &mut image) });
            }
        }
        t += rng.range(pace / 2, pace * 3 / 2);
    }
    // Ends past the end of the run are the final heal's. Stable: a fault and its end at the
    // same instant keep their order.
    steps.retain(|s| s.at_ms < end);
    steps.sort_by_key(|s| s.at_ms);
    steps
}

fn spec_change(rng: &mut Rng, shape: &Shape, image: &mut String) -> Action {
    match rng.range(0, 2) {
        0 if !shape.members.is_empty() => {
            // Half the time one member is drained (weight 0, the others 1 to 3), which moves
            // whatever it holds; otherwise any weights from 0 to 3.
            let drained = (shape.members.len() > 1 && rng.range(0, 1) == 0)
                .then(|| rng.range(0, shape.members.len() as u64 - 1) as usize);
            let mut weights: Vec<(String, i32)> = shape
                .members
                .keys()
                .enumerate()
                .map(|(i, m)| {
                    let w = match drained {
                        Some(d) if d == i => 0,
                        Some(_) => rng.range(1, 3),
                        None => rng.range(0, 3),
                    };
                    (m.clone(), w as i32)
                })
                .collect();
            if weights.iter().all(|w| w.1 == 0) {
                let i = rng.range(0, weights.len() as u64 - 1) as usize;
                weights[i].1 = 1;
            }
            Action::Weights { weights }
        }
        1 => {
            let base = shape.replicas.max(1) as u64;
            let replicas = rng.range((base / 2).max(1), base + base / 2 + 1) as i32;
            Action::Replicas { replicas }
        }
        _ => {
            // The base image or one of two variants, never the current one.
            let variants = [shape.image.clone(), format!("{}-chaos1", shape.image), format!("{}-chaos2", shape.image)];
            let others: Vec<&String> = variants.iter().filter(|v| **v != *image).collect();
            *image = (*rng.pick(&others)).clone();
            Action::Image { image: image.clone() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(seed: u64) -> Shape {
        let nodes = vec!["node-1".to_string(), "node-2".into(), "node-3".into()];
        Shape {
            seed,
            duration: Duration::from_secs(600),
            members: ["east", "west", "central"].iter().map(|m| (m.to_string(), nodes.clone())).collect(),
            controllers: 2,
            lease: Duration::from_secs(3),
            replicas: 5,
            image: "redis:7".into(),
            pace: Duration::from_secs(3),
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
        assert_eq!(schedule(&shape(7)), schedule(&shape(7)));
        assert_ne!(schedule(&shape(7)), schedule(&shape(8)));
    }

    #[test]
    fn a_long_schedule_draws_every_kind_of_fault_and_spec_change() {
        let steps = schedule(&shape(1));
        let kinds: std::collections::BTreeSet<&str> =
            steps.iter().filter_map(|s| s.action.kind()).map(|k| k.1).collect();
        for k in [
            "weights",
            "replicas",
            "image",
            "partition-refused",
            "partition-hung",
            "latency",
            "errors-5xx",
            "cut-watches",
            "expire-watches",
            "node-lost",
            "node-powered-off",
            "controller-kill",
            "controller-pause",
        ] {
            assert!(kinds.contains(k), "{k} missing from {kinds:?}");
        }
    }

    #[test]
    fn no_lasting_fault_overlaps_another_on_the_same_target_and_some_are_left_to_the_final_heal() {
        let mut left = 0;
        for seed in 0..20 {
            let s = shape(seed);
            let steps = schedule(&s);
            let end = s.duration.as_millis() as u64;
            assert!(steps.windows(2).all(|w| w[0].at_ms <= w[1].at_ms), "sorted");
            // Replaying the steps, each target is faulted at most once at a time and free at the end.
            let mut open: BTreeMap<String, bool> = BTreeMap::new();
            for st in &steps {
                assert!(st.at_ms <= end);
                let (target, opens) = match &st.action {
                    Action::Partition { cluster, .. }
                    | Action::Latency { cluster, .. }
                    | Action::Errors { cluster, .. } => (format!("api {cluster}"), true),
                    Action::Heal { cluster } => (format!("api {cluster}"), false),
                    Action::NodeDown { cluster, .. } => (format!("nodes {cluster}"), true),
                    Action::NodeUp { cluster, .. } => (format!("nodes {cluster}"), false),
                    Action::Kill { controller } | Action::Pause { controller } => (format!("ctl {controller}"), true),
                    Action::Restart { controller } | Action::Resume { controller } => {
                        (format!("ctl {controller}"), false)
                    }
                    _ => continue,
                };
                let was = open.insert(target.clone(), opens).unwrap_or(false);
                assert_ne!(was, opens, "seed {seed}: {target} at {}: {}", st.at_ms, st.action);
            }
            left += open.values().filter(|o| **o).count();
        }
        assert!(left > 0, "some faults last past the end, for the final heal");
    }

    #[test]
    fn a_pause_outlasts_the_lease_and_weights_never_all_drop_to_zero() {
        let s = shape(3);
        let steps = schedule(&s);
        for (i, st) in steps.iter().enumerate() {
            if let Action::Pause { controller } = st.action {
                // A pause not resumed within the run is resumed by the final heal.
                let Some(resume) = steps[i..].iter().find(|r| r.action == Action::Resume { controller }) else {
                    continue;
                };
                assert!(resume.at_ms - st.at_ms > 3000);
            }
            if let Action::Weights { weights } = &st.action {
                assert!(weights.iter().any(|w| w.1 > 0), "{weights:?}");
            }
        }
    }

    #[test]
    fn without_controllers_of_its_own_the_drill_never_kills_or_pauses_one() {
        let mut s = shape(5);
        s.controllers = 0;
        assert!(schedule(&s).iter().all(|st| !matches!(st.action, Action::Kill { .. } | Action::Pause { .. })));
    }
}
