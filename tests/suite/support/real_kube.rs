//! Real Kubernetes control planes for the suite: the binaries `tests/kube/build` makes (a no-op
//! once cached; `.ci/run` builds them first), counted in the tally as `kube-RELEASE` like any
//! external program, so that under `CI` a missing Go or a failed build fails the test.

use std::{path::PathBuf, process::Command};

use spanset_control_plane::Binaries;

use super::tally;

/// How many fleets of real control planes run at once. Each test holding one waits mostly on
/// its scenario's clocks; one at a time left the suite's other threads blocked behind the
/// fleets' tests, which come one after another in its order.
const FLEETS_AT_ONCE: usize = 2;

static FLEETS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(FLEETS_AT_ONCE);

/// Held while a fleet starts: four apiservers with their etcds take most of a 2-core machine
/// for their first seconds, so two never start together.
static STARTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A test's turn to run a fleet of real control planes: one of [`FLEETS_AT_ONCE`], and the
/// start until [`FleetTurn::started`].
pub struct FleetTurn {
    _running: tokio::sync::SemaphorePermit<'static>,
    starting: Option<tokio::sync::MutexGuard<'static, ()>>,
}

impl FleetTurn {
    /// The fleet is up and installed: the next one may start.
    pub fn started(&mut self) {
        self.starting = None;
    }
}

/// Waits for a turn to run a fleet (and to start it); held for the test's whole run.
pub async fn fleet_turn() -> FleetTurn {
    let running = FLEETS.acquire().await.expect("the fleets' semaphore is never closed");
    FleetTurn { _running: running, starting: Some(STARTING.lock().await) }
}

/// [`fleet_turn`], for a test that is not async.
pub fn fleet_turn_blocking() -> FleetTurn {
    tokio::runtime::Builder::new_current_thread().build().expect("a runtime").block_on(fleet_turn())
}

/// The oldest release the repository builds (`tests/kube/kubernetes-*`).
pub const OLDEST: &str = "1.34";

/// The newest release the repository builds.
pub const NEWEST: &str = "1.37";

/// The control plane of `release`, built if need be; `None` (a loud skip, or a failure under
/// `CI`) when it cannot be.
pub fn binaries(release: &str) -> Option<Binaries> {
    let program = format!("kube-{release}");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kube/build");
    let out = match Command::new(&script).arg(release).output() {
        Ok(out) if out.status.success() => out,
        Ok(out) => {
            tally::missing(
                &program,
                &format!("tests/kube/build {release} failed: {}", String::from_utf8_lossy(&out.stderr)),
            );
            return None;
        }
        Err(e) => {
            tally::missing(&program, &format!("tests/kube/build did not run: {e}"));
            return None;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout.lines().last().unwrap_or_default().to_string();
    match Binaries::at(&dir) {
        Ok(b) => {
            tally::found(&program);
            Some(b)
        }
        Err(e) => {
            tally::missing(&program, &e.to_string());
            None
        }
    }
}
