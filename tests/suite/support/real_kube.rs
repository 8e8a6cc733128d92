//! Real Kubernetes control planes for the suite: the binaries `tests/kube/build` makes (a no-op
//! once cached; `.ci/run` builds them first), counted in the tally as `kube-RELEASE` like any
//! external program, so that under `CI` a missing Go or a failed build fails the test.

use std::{path::PathBuf, process::Command};

use spanset_control_plane::Binaries;

use super::tally;

/// Held by each test that starts a fleet of real control planes, so that they run one at a
/// time: four apiservers with their etcds take most of a 2-core machine for their first
/// seconds, and the other tests of the suite run beside them.
static FLEETS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits for the other fleets' tests to end; the guard lets the next one start.
pub async fn one_fleet_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    FLEETS.lock().await
}

/// [`one_fleet_at_a_time`], for a test that is not async.
pub fn one_fleet_at_a_time_blocking() -> tokio::sync::MutexGuard<'static, ()> {
    FLEETS.blocking_lock()
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
