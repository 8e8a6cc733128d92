//! Pod leases, the pure part: the decisions spanset and the pods' guards make, and why they keep
//! each pod identity single when a member is cut off with its pods alive. No actor, no I/O:
//! the controller's actors and the `spanset guard` binary feed these with their clocks and
//! their answers.
//!
//! spanset keeps extending one Lease per member that names the ordinals allowed there (an
//! *extension*: the annotation [`EXTENSION`] changed, in the same write as [`ORDINALS`]). A
//! guard in every pod stops it before the lease can have lapsed, measured on its own monotonic
//! clock; spanset takes an unreachable member's pods as stopped only once the lease has lapsed
//! on *its* monotonic clock. No wall clock is compared across machines: each side measures a
//! span on its own clock, and the two spans are chosen so that, whatever the clocks' rate errors
//! within ρ, the guard's ends first in real time.
//!
//! With L the lease, ρ the bound on any clock's rate error, P the guard's loop period (on its
//! clock), K what a SIGKILL takes to end the processes, and `T` the real instant an extension
//! landed in the member:
//!
//! - The guard's `valid_from` is on or before `T` (its clock): it is the send instant of the
//!   poll before the one that saw the extension ([`guard`]). It stops the pod (SIGKILL) at
//!   `valid_from + L·(1−ρ)/(1+ρ) − K`, checked at least every P, so the pod is gone, in real
//!   time, by `T + (L·(1−ρ)/(1+ρ) + P)/(1−ρ) = T + L/(1+ρ) + P/(1−ρ)`.
//! - spanset's `latest_landing` is on or after `T` (its clock): an answered extension landed by
//!   its answer, one without an answer by `sent + W` ([`clock`]). The lease lapses at
//!   `latest_landing + (L + P)·(1+ρ)/(1−ρ)`, which in real time is at least
//!   `T + (L + P)/(1−ρ)`.
//! - `L/(1+ρ) + P/(1−ρ) ≤ (L + P)/(1−ρ)`: the pod is gone before the lapse, by `2ρL/(1−ρ²)`.
//!   Each side's factor alone would cover both clocks' drift; the two together leave that
//!   margin for a clock that drifts beyond its stated bound.
//!
//! The other rules the sides keep are in [`clock`] (what counts as landed, when to extend) and
//! [`guard`] (when a pod may start, what stops it at once).

pub mod clock;
pub mod guard;
pub mod in_force;
pub mod inject;
pub mod keeper;
pub mod object;
pub mod seen;
pub mod settings;

use std::time::Duration;

use spanset_plan::{Ordinals, ordinal_runs, parse_ordinal_runs};

/// The annotation on a member's pod Lease that names the ordinals allowed to run there, as
/// runs (`0-1,4`): written in the same request as every extension, so that a guard never sees
/// an extension naming an ordinal spanset has taken away.
pub const ORDINALS: &str = "spanset.dev/ordinals";

/// The annotation on a member's pod Lease that spanset changes on every write: a guard only
/// compares it for change (a change means an extension landed since its previous poll).
pub const EXTENSION: &str = "spanset.dev/extension";

/// The annotation on a member's pod Lease that releases its pods (`"true"`): spanset let the
/// federation go (its CRD is being deleted, an uninstall) and will never extend the lease
/// again, so every guard that reads it lets its pod run on with no deadline, for good.
pub const RELEASED: &str = "spanset.dev/released";

/// The first process of every guarded container, as a pure decision (`spanset-guard-exec`'s).
pub use spanset_guard_exec::decision as exec;
/// K: how long before its deadline a guard ends its pod, for the processes to be gone by it.
pub use spanset_guard_exec::decision::KILL_MARGIN;

/// The shortest lease spanset accepts: a guard must be able to poll several times within it.
pub const MIN_LEASE: Duration = Duration::from_secs(10);

/// Whether any pod of the federation may hold a pod lease: `spec.failover.podLease`, or a
/// length still in force in `status.podLeaseSeconds` (pods made with it may still run).
pub fn leased(fsts: &spanset_api::FederatedStatefulSet) -> bool {
    fsts.spec.failover.pod_lease.is_some() || fsts.status.as_ref().is_some_and(|s| s.pod_lease_seconds.is_some())
}

/// The spans both sides agree on (the federation's lease and the controller's flags), and the
/// arithmetic that makes a span measured on one drifting clock safe against another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timing {
    /// L: `spec.failover.podLease.seconds`.
    pub lease: Duration,
    /// ρ in parts per million: the bound on the rate error of any clock involved
    /// (`--pod-lease-drift`).
    pub drift_ppm: u32,
    /// W: how late a write spanset gave up on may still land in a member
    /// (`--member-write-deadline`).
    pub write_deadline: Duration,
    /// R: how often spanset extends a member's lease (L/4).
    pub renew: Duration,
    /// P: the longest a guard goes between two of its checks, on its clock (L/10, at most
    /// 2 s, at least 200 ms).
    pub poll: Duration,
    /// K: how long before its deadline a guard sends SIGKILL, for the processes to be gone by it.
    pub kill: Duration,
    /// S: how long before its deadline a guard sends SIGTERM (the pod's grace period, at most
    /// L/3).
    pub stop_budget: Duration,
}

const MILLION: u128 = 1_000_000;

impl Timing {
    /// The timing of a lease of `lease` with clocks within `drift` (a fraction, `0.01` for 1 %),
    /// writes landing within `write_deadline`, and pods granted `grace` to stop. Errors name
    /// the field or flag at fault.
    pub fn new(lease: Duration, drift: f64, write_deadline: Duration, grace: Duration) -> Result<Timing, String> {
        if lease < MIN_LEASE {
            return Err(format!(
                "spec.failover.podLease.seconds: {} s is shorter than the {} s a guard needs to poll within it",
                lease.as_secs_f64(),
                MIN_LEASE.as_secs()
            ));
        }
        if !(0.0..0.5).contains(&drift) {
            return Err(format!("--pod-lease-drift: {drift} is not a fraction in [0, 0.5)"));
        }
        let poll = (lease / 10).clamp(Duration::from_millis(200), Duration::from_secs(2));
        let kill = KILL_MARGIN;
        Ok(Timing {
            lease,
            drift_ppm: (drift * MILLION as f64).round() as u32,
            write_deadline,
            renew: lease / 4,
            poll,
            kill,
            stop_budget: grace.min(lease / 3).max(kill),
        })
    }

    fn scale(span: Duration, num: u128, den: u128, round_up: bool) -> Duration {
        let n = span.as_nanos() * num;
        let q = if round_up { n.div_ceil(den) } else { n / den };
        Duration::from_nanos(u64::try_from(q).unwrap_or(u64::MAX))
    }

    /// `span·(1−ρ)/(1+ρ)`, rounded down: a span a guard measures on its clock so that it is
    /// over, in real time, before `span/(1+ρ)` whatever its own drift.
    pub fn slowed(&self, span: Duration) -> Duration {
        let p = u128::from(self.drift_ppm);
        Self::scale(span, MILLION - p, MILLION + p, false)
    }

    /// `span·(1+ρ)/(1−ρ)`, rounded up: a span spanset measures on its clock so that at least
    /// `span/(1−ρ)` has passed in real time whatever its own drift.
    pub fn hastened(&self, span: Duration) -> Duration {
        let p = u128::from(self.drift_ppm);
        Self::scale(span, MILLION + p, MILLION - p, true)
    }

    /// How long after spanset counts an extension as sent its member's watcher may still send
    /// it (a quarter of W; a later one is not sent at all): the write may be made that much later
    /// than counted, so it may land until `counted + send_window + W`.
    pub fn send_window(&self) -> Duration {
        send_window(self.write_deadline)
    }

    /// The latest a write counted as sent now may land, in real time after now: the send window
    /// and then W.
    pub fn landing_deadline(&self) -> Duration {
        self.send_window() + self.write_deadline
    }

    /// `span·(1+ρ)`, rounded up: the most a clock within ρ counts while `span` passes in real
    /// time (a write's deadline W, measured from its send instant on spanset's clock).
    pub fn stretched(&self, span: Duration) -> Duration {
        Self::scale(span, MILLION + u128::from(self.drift_ppm), MILLION, true)
    }
}

/// The send window for a write deadline `w` (see [`Timing::send_window`]): shared by the
/// keeper, which counts it, and the coordinator, which tells the watcher when it is over.
pub fn send_window(w: Duration) -> Duration {
    w / 4
}

/// The [`ORDINALS`] annotation for `set`: its runs, `0-1,4` (empty for none).
pub fn render_ordinals(set: &Ordinals) -> String {
    ordinal_runs(set).join(",")
}

/// The ordinals an [`ORDINALS`] annotation names; an error naming the annotation if it does
/// not parse (a guard that cannot read it stops its pod, as if it were not named).
pub fn parse_ordinals(text: &str) -> Result<Ordinals, String> {
    parse_ordinal_runs(text).ok_or_else(|| format!("annotation {ORDINALS}: {text:?} is not a list of ordinal runs"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ordinals_annotation_is_runs_and_reads_back() {
        let set = Ordinals::from_iter([0, 1, 4, 6, 7, 8]);
        assert_eq!(render_ordinals(&set), "0-1,4,6-8");
        assert_eq!(parse_ordinals("0-1,4,6-8"), Ok(set));
        assert_eq!(render_ordinals(&Ordinals::new()), "");
        assert_eq!(parse_ordinals(""), Ok(Ordinals::new()));
        assert_eq!(parse_ordinals(" 3 , 1-2 "), Ok(Ordinals::from_iter([1, 2, 3])));
        for bad in ["x", "3-1", "1-", "-1", "1,,a"] {
            let err = parse_ordinals(bad).expect_err(bad);
            assert!(err.contains(ORDINALS), "{err}");
        }
    }

    #[test]
    fn timing_follows_the_lease_and_refuses_what_cannot_be_kept() {
        let t = Timing::new(Duration::from_secs(40), 0.01, Duration::from_secs(60), Duration::from_secs(30)).unwrap();
        assert_eq!(t.renew, Duration::from_secs(10));
        assert_eq!(t.poll, Duration::from_secs(2));
        assert_eq!(t.stop_budget, Duration::from_nanos(13_333_333_333));
        assert_eq!(t.drift_ppm, 10_000);
        let short = Timing::new(Duration::from_secs(10), 0.0, Duration::from_secs(60), Duration::ZERO).unwrap();
        assert_eq!(short.poll, Duration::from_secs(1));
        assert_eq!(short.stop_budget, short.kill, "SIGTERM never comes after SIGKILL");
        let err = Timing::new(Duration::from_secs(9), 0.01, Duration::from_secs(60), Duration::ZERO).unwrap_err();
        assert!(err.contains("podLease.seconds"), "{err}");
        let err = Timing::new(Duration::from_secs(10), 0.7, Duration::from_secs(60), Duration::ZERO).unwrap_err();
        assert!(err.contains("--pod-lease-drift"), "{err}");
    }

    #[test]
    fn drift_factors_round_towards_safety() {
        let t = Timing {
            drift_ppm: 200_000,
            ..Timing::new(Duration::from_secs(10), 0.0, Duration::ZERO, Duration::ZERO).unwrap()
        };
        assert_eq!(t.slowed(Duration::from_secs(12)), Duration::from_secs(8));
        assert_eq!(t.hastened(Duration::from_secs(8)), Duration::from_secs(12));
        assert_eq!(t.stretched(Duration::from_secs(5)), Duration::from_secs(6));
        // 10·0.8/1.2 = 6.666…: down for the guard, up for spanset.
        assert_eq!(t.slowed(Duration::from_secs(10)), Duration::from_nanos(6_666_666_666));
        assert_eq!(t.hastened(Duration::from_secs(1)), Duration::from_millis(1500));
        assert_eq!(t.hastened(Duration::from_nanos(1)), Duration::from_nanos(2));
    }
}

/// The proof, by random search: whatever the clocks' rates within ρ (changing as they like),
/// the delays of writes, answers and polls, lost answers and failed polls, a guard following
/// [`guard`]'s rules has stopped its pod, in real time, before spanset's clock reaches
/// [`clock::LeaseClock::lapsed_at`].
#[cfg(test)]
mod proof {
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::{
        Timing,
        clock::{LeaseClock, Outcome},
        guard::{Action, Guard, Poll},
    };
    use crate::decisions::safety::Rules;
    use spanset_plan::Ordinals;

    /// A clock whose rate changes every `SEGMENT` seconds of real time, each rate within ρ.
    struct Clock {
        rates: Vec<f64>,
    }

    const SEGMENT: f64 = 1.7;

    impl Clock {
        fn new(drift: f64, errors: &[f64]) -> Clock {
            Clock { rates: errors.iter().map(|e| 1.0 + drift * e).collect() }
        }

        fn rate(&self, i: usize) -> f64 {
            self.rates[i % self.rates.len()]
        }

        /// The clock's reading at real time `t` (it reads 0 at 0).
        fn local(&self, t: f64) -> f64 {
            let (mut at, mut reading, mut i) = (0.0, 0.0, 0);
            while at + SEGMENT <= t {
                reading += SEGMENT * self.rate(i);
                at += SEGMENT;
                i += 1;
            }
            reading + (t - at) * self.rate(i)
        }

        /// The real time at which the clock reads `x`.
        fn real(&self, x: f64) -> f64 {
            let (mut at, mut reading, mut i) = (0.0, 0.0, 0);
            while reading + SEGMENT * self.rate(i) <= x {
                reading += SEGMENT * self.rate(i);
                at += SEGMENT;
                i += 1;
            }
            at + (x - reading) / self.rate(i)
        }
    }

    /// One extension attempt's fate: 0 answered, 1 lost (lands or not), 2 never sent; the
    /// fractions place its landing and answer.
    type Fate = (u8, f64, f64, bool);

    #[derive(Debug, Clone)]
    struct World {
        drift_ppm: u32,
        lease: u64,
        write_deadline: u64,
        controller_errors: Vec<f64>,
        guard_errors: Vec<f64>,
        fates: Vec<Fate>,
        cut_at: f64,
        polls: Vec<(f64, f64, bool)>,
        kill_takes: f64,
    }

    /// A fraction in `[low, high]`, one of its ends half the time: the worst cases (a clock at
    /// its drift bound, an answer at once, a poll at the end of its period) are at the ends.
    fn extreme(low: f64, high: f64) -> impl Strategy<Value = f64> {
        prop_oneof![Just(low), Just(high), low..=high]
    }

    fn world() -> impl Strategy<Value = World> {
        (
            // Drift too at its ends a third of the time each: a world that needs the drift
            // margin needs the drift near its bound, about one in 1,800 when drawn uniformly.
            (prop_oneof![Just(0u32), Just(300_000), 0u32..=300_000], 10u64..=40, 1u64..=30),
            prop::collection::vec(extreme(-1.0, 1.0), 1..24),
            prop::collection::vec(extreme(-1.0, 1.0), 1..24),
            prop::collection::vec((0u8..3, extreme(0.0, 1.0), extreme(0.0, 1.0), any::<bool>()), 1..40),
            0.0f64..120.0,
            prop::collection::vec((extreme(0.05, 1.0), extreme(0.0, 0.999), prop::bool::weighted(0.2)), 1..64),
            extreme(0.0, 1.0),
        )
            .prop_map(|((drift_ppm, lease, write_deadline), c, g, fates, cut_at, polls, kill_takes)| World {
                drift_ppm,
                lease,
                write_deadline,
                controller_errors: c,
                guard_errors: g,
                fates,
                cut_at,
                polls,
                kill_takes,
            })
    }

    /// Runs the world; answers the real instants each run of the pod ended (`None`: it was
    /// still running at the end) and the real instant of the lapse.
    fn run(w: &World, rules: Rules) -> (Vec<(f64, Option<f64>)>, f64) {
        let drift = f64::from(w.drift_ppm) / 1e6;
        let timing = Timing {
            drift_ppm: w.drift_ppm,
            ..Timing::new(Duration::from_secs(w.lease), 0.0, Duration::from_secs(w.write_deadline), Duration::ZERO)
                .expect("a valid lease")
        };
        let (cc, gc) = (Clock::new(drift, &w.controller_errors), Clock::new(drift, &w.guard_errors));
        let base = Instant::now();
        let at = |x: f64| base + Duration::from_secs_f64(x);
        let secs = |d: Duration| d.as_secs_f64();
        let wdl = w.write_deadline as f64;
        // spanset: an attempt every R on its clock until the member is cut off; an answer
        // that would come after the cut is lost.
        let mut clock = LeaseClock::new(base, timing, rules);
        let mut landings = Vec::new();
        let mut sent_local = 0.0;
        for (n, &(kind, x, y, lands)) in w.fates.iter().enumerate() {
            let sent = cc.real(sent_local);
            if sent >= w.cut_at {
                break;
            }
            let attempt = clock.send(at(sent_local));
            let landing = sent + x * wdl;
            let outcome = match kind {
                0 => {
                    let answer = landing + y * (sent + wdl - landing);
                    landings.push((landing, n as u64 + 1));
                    if answer < w.cut_at { Outcome::Answered(at(cc.local(answer))) } else { Outcome::Lost }
                }
                1 => {
                    if lands {
                        landings.push((landing, n as u64 + 1));
                    }
                    Outcome::Lost
                }
                _ => Outcome::NotSent,
            };
            clock.settle(attempt, outcome);
            sent_local += secs(timing.renew);
        }
        let lapse = gc.real(0.0).max(cc.real(secs(clock.lapsed_at() - base)));
        let counter =
            |t: f64| landings.iter().filter(|(l, _)| *l <= t).max_by(|a, b| a.0.total_cmp(&b.0)).map_or(0, |l| l.1);
        // The guard: a loop at most P apart on its clock; each turn it acts on its last
        // answer, then polls (served somewhere before the next turn, answered by then).
        let named = Ordinals::from_iter([0]);
        let mut guard = Guard::new(0, timing, rules);
        let mut runs: Vec<(f64, Option<f64>)> = Vec::new();
        let mut now = 0.0;
        let mut turn = 0;
        let end = lapse + 2.0 * w.lease as f64;
        let mut pending: Option<(f64, u64, bool)> = None;
        while gc.real(now) < end {
            let (gap, serve, fails) = w.polls[turn % w.polls.len()];
            turn += 1;
            if let Some((sent, extension, failed)) = pending.take() {
                let poll =
                    if failed { Poll::Failed } else { Poll::Read { extension, ordinals: &named, released: false } };
                guard.polled(Duration::from_secs_f64(sent), poll);
            }
            let real_now = gc.real(now);
            match guard.action(Duration::from_secs_f64(now)) {
                Action::Run | Action::Term if runs.last().is_none_or(|r| r.1.is_some()) => runs.push((real_now, None)),
                Action::Kill => {
                    if let Some(run) = runs.last_mut().filter(|r| r.1.is_none()) {
                        run.1 = Some(gc.real(now + w.kill_takes * secs(timing.kill)));
                    }
                    guard.stop();
                    // The sandbox restarts with a fresh guard.
                    guard = Guard::new(0, timing, rules);
                }
                _ => {}
            }
            let next = now + gap * secs(timing.poll);
            let served = real_now + serve * (gc.real(next) - real_now);
            pending = Some((now, counter(served), fails));
            now = next;
        }
        (runs, lapse)
    }

    fn violation(w: &World, rules: Rules) -> Option<String> {
        let (runs, lapse) = run(w, rules);
        runs.iter()
            .find(|(_, ended)| ended.is_none_or(|e| e > lapse + 1e-6))
            .map(|r| format!("the pod ran {r:?}, past the lapse at {lapse}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn a_guard_stops_its_pod_before_the_lease_lapses(w in world()) {
            if let Some(v) = violation(&w, Rules::ALL) {
                prop_assert!(false, "{v}");
            }
        }
    }

    /// Each rule of the pair is needed: with it off, some world runs a pod past the lapse.
    #[test]
    fn without_each_rule_some_pod_runs_past_the_lapse() {
        use proptest::test_runner::{Config, TestRunner};
        let off = [
            ("the guard's deadline", Rules { lease_deadline: false, ..Rules::ALL }),
            ("the drift margin", Rules { lease_drift_margin: false, ..Rules::ALL }),
            ("lost extensions", Rules { lease_lost_extensions: false, ..Rules::ALL }),
        ];
        for (name, rules) in off {
            let mut runner = TestRunner::new(Config { cases: 4096, failure_persistence: None, ..Config::default() });
            let found = runner.run(&world(), |w| {
                prop_assert!(violation(&w, rules).is_none());
                Ok(())
            });
            assert!(found.is_err(), "without {name} no world ran a pod past the lapse");
        }
    }
}
