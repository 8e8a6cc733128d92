//! Image pulls as a kubelet and containerd do them, for images that cannot be pulled: which
//! images those are, the runtime's error, and the kubelet's per-container back-off
//! (`pkg/kubelet/images`: 10 s doubling to 5 min, keyed by pod and image), so that a pod shows
//! `ErrImagePull`, then `ImagePullBackOff`, and starts on the first retry after its image
//! became pullable.
//!
//! Which images cannot be pulled: any whose reference contains [`UNPULLABLE_MARKERS`]
//! (`nginx:doesnotexist`, `example.com/does-not-exist/app:1`), unless the admin API marked it
//! pullable; and any the admin API marked unpullable (`sim-ctl image-unpullable`). Marks are
//! per cluster and compare references as containerd does (`nginx` is
//! `docker.io/library/nginx:latest`).
//!
//! Pure bookkeeping: the kubelet task owns a [`Pulls`], asks it on each sweep, and writes the
//! statuses and Events it answers.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use super::faults::Faults;

/// Substrings that make an image unpullable unless it was marked pullable.
pub const UNPULLABLE_MARKERS: [&str; 2] = ["doesnotexist", "does-not-exist"];

/// The kubelet's first image pull back-off (`backOffPeriod`).
const BACK_OFF_INITIAL: Duration = Duration::from_secs(10);
/// The kubelet's longest image pull back-off (`MaxContainerBackOff`).
const BACK_OFF_MAX: Duration = Duration::from_secs(300);
/// Simulated time from a failed pull to the sync that reports the back-off.
const RESYNC_AFTER_FAILURE: Duration = Duration::from_secs(1);
/// Simulated time between two syncs of a pod whose image pull is backing off (the pod
/// worker's retry after a failed sync): each reports the back-off again.
const RESYNC_IN_BACK_OFF: Duration = Duration::from_secs(10);

/// The waiting reason of a container whose last pull failed.
pub const ERR_IMAGE_PULL: &str = "ErrImagePull";
/// The waiting reason of a container whose image pull is backing off.
pub const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";

/// The last path component of a reference (after the registry and repository path).
fn last_component(image: &str) -> &str {
    image.rsplit('/').next().unwrap_or(image)
}

/// The image as the kubelet names it in its messages: `:latest` added when the reference has
/// neither tag nor digest (`applyDefaultImageTag`).
pub fn with_default_tag(image: &str) -> String {
    let last = last_component(image);
    if last.contains(':') || image.contains('@') { image.to_string() } else { format!("{image}:latest") }
}

/// The fully qualified reference containerd resolves: `docker.io` for a reference without a
/// registry, `library/` for an official image, `:latest` when untagged
/// (`nginx` → `docker.io/library/nginx:latest`).
pub fn qualified(image: &str) -> String {
    let tagged = with_default_tag(image);
    let (first, rest) = match tagged.split_once('/') {
        Some((first, rest)) => (first, Some(rest)),
        None => (tagged.as_str(), None),
    };
    let is_registry = |c: &str| c.contains('.') || c.contains(':') || c == "localhost";
    match rest {
        Some(_) if is_registry(first) => tagged.clone(),
        Some(_) => format!("docker.io/{tagged}"),
        None => format!("docker.io/library/{tagged}"),
    }
}

/// Whether the name rule alone makes an image unpullable.
pub fn unpullable_by_name(image: &str) -> bool {
    let lower = image.to_ascii_lowercase();
    UNPULLABLE_MARKERS.iter().any(|m| lower.contains(m))
}

/// Whether a cluster's kubelets can pull `image` now: the admin API's mark if any, else the
/// name rule.
pub fn pullable(faults: &Faults, image: &str) -> bool {
    faults.image_pullable(image).unwrap_or(!unpullable_by_name(image))
}

/// The error containerd returns for a reference its registry does not know, as the kubelet
/// reports it (`Failed to pull image "…": <this>`).
pub fn not_found(image: &str) -> String {
    let q = qualified(image);
    format!(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{q}\": failed to resolve reference \"{q}\": {q}: not found"
    )
}

/// The back-off after `failures` failed pulls: 10 s, doubling, at most 5 min (simulated).
fn back_off(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    BACK_OFF_INITIAL.saturating_mul(1 << doublings).min(BACK_OFF_MAX)
}

/// What one sync of a container's image found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pull {
    /// The image is there (or was just pulled): the container may start.
    Ready,
    /// This sync pulled and failed: the container is `ErrImagePull`; the kubelet records
    /// `Pulling`, `Failed` with the error, and `Failed` "Error: ErrImagePull".
    Failed,
    /// This sync found the pull backing off: the container is `ImagePullBackOff`; the kubelet
    /// records `BackOff` and `Failed` "Error: ImagePullBackOff".
    BackOff,
    /// No sync due yet: the container keeps waiting as last reported.
    Waiting,
}

/// A container's state while its image cannot be pulled, as `state.waiting` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// `ErrImagePull` or `ImagePullBackOff`.
    pub reason: &'static str,
    /// The kubelet's message.
    pub message: String,
}

#[derive(Debug)]
struct Failing {
    image: String,
    failures: u32,
    last_failure: Instant,
    next_sync: Instant,
    backing_off: bool,
}

/// A kubelet's memory of the pulls that failed, by pod uid and container name.
#[derive(Debug, Default)]
pub struct Pulls {
    failing: HashMap<(String, String), Failing>,
}

impl Pulls {
    /// Syncs one container's image at `now`: pulls it when no back-off holds the pull (`pullable`
    /// decides the outcome), otherwise reports the back-off when a sync is due. `real` turns
    /// simulated durations into real ones.
    pub fn sync(
        &mut self,
        uid: &str,
        container: &str,
        image: &str,
        pullable: bool,
        now: Instant,
        real: impl Fn(Duration) -> Duration,
    ) -> Pull {
        let key = (uid.to_string(), container.to_string());
        // A new image for the container (the spec changed it) starts with no back-off, as the
        // kubelet's is keyed by image.
        if self.failing.get(&key).is_some_and(|f| f.image != image) {
            self.failing.remove(&key);
        }
        let Some(f) = self.failing.get_mut(&key) else {
            if pullable {
                return Pull::Ready;
            }
            let failing = Failing {
                image: image.to_string(),
                failures: 1,
                last_failure: now,
                next_sync: now + real(RESYNC_AFTER_FAILURE),
                backing_off: false,
            };
            self.failing.insert(key, failing);
            return Pull::Failed;
        };
        if now < f.next_sync {
            return Pull::Waiting;
        }
        let retry_at = f.last_failure + real(back_off(f.failures));
        if now < retry_at {
            f.backing_off = true;
            f.next_sync = (now + real(RESYNC_IN_BACK_OFF)).min(retry_at);
            return Pull::BackOff;
        }
        if pullable {
            self.failing.remove(&key);
            return Pull::Ready;
        }
        f.failures += 1;
        f.last_failure = now;
        f.next_sync = now + real(RESYNC_AFTER_FAILURE);
        f.backing_off = false;
        Pull::Failed
    }

    /// When the earliest failed pull is due to be synced again (its back-off reported, or
    /// retried), so the kubelet's loop can sleep until then.
    pub fn next_sync(&self) -> Option<Instant> {
        self.failing.values().map(|f| f.next_sync).min()
    }

    /// The waiting state of a container whose pull failed, if it did.
    pub fn waiting(&self, uid: &str, container: &str) -> Option<Waiting> {
        let f = self.failing.get(&(uid.to_string(), container.to_string()))?;
        let error = not_found(&f.image);
        Some(if f.backing_off {
            Waiting {
                reason: IMAGE_PULL_BACK_OFF,
                message: format!(
                    "Back-off pulling image \"{}\": {ERR_IMAGE_PULL}: {error}",
                    with_default_tag(&f.image)
                ),
            }
        } else {
            Waiting { reason: ERR_IMAGE_PULL, message: error }
        })
    }

    /// Forgets the pods that are gone.
    pub fn retain(&mut self, live: &HashSet<&str>) {
        self.failing.retain(|(uid, _), _| live.contains(uid.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_qualified_as_containerd_resolves_them() {
        assert_eq!(qualified("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(qualified("nginx:doesnotexist"), "docker.io/library/nginx:doesnotexist");
        assert_eq!(qualified("bitnami/redis:7"), "docker.io/bitnami/redis:7");
        assert_eq!(qualified("registry.local:5000/app"), "registry.local:5000/app:latest");
        assert_eq!(qualified("localhost/app:1"), "localhost/app:1");
        assert_eq!(qualified("ghcr.io/o/app@sha256:abc"), "ghcr.io/o/app@sha256:abc");
        assert_eq!(with_default_tag("registry.local:5000/app"), "registry.local:5000/app:latest");
        assert_eq!(with_default_tag("nginx:1.25"), "nginx:1.25");
    }

    #[test]
    fn the_name_rule_and_the_marks_decide_what_can_be_pulled() {
        let faults = Faults::new(1);
        assert!(pullable(&faults, "nginx:1.25"));
        assert!(!pullable(&faults, "nginx:doesnotexist"));
        assert!(!pullable(&faults, "example.com/Does-Not-Exist/app:1"));
        faults.set_image_pullable("nginx:1.25", false);
        assert!(!pullable(&faults, "docker.io/library/nginx:1.25"), "marks compare qualified references");
        faults.set_image_pullable("docker.io/library/nginx:doesnotexist", true);
        assert!(pullable(&faults, "nginx:doesnotexist"), "a mark overrides the name rule");
        assert_eq!(
            not_found("nginx:doesnotexist"),
            "rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/nginx:doesnotexist\": \
             failed to resolve reference \"docker.io/library/nginx:doesnotexist\": docker.io/library/nginx:doesnotexist: not found"
        );
    }

    #[test]
    fn back_off_doubles_from_ten_seconds_to_five_minutes() {
        let secs: Vec<u64> = (1..=7).map(|n| back_off(n).as_secs()).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(back_off(u32::MAX), BACK_OFF_MAX);
    }

    #[test]
    fn a_failed_pull_backs_off_and_retries_once_the_back_off_expires() {
        let mut pulls = Pulls::default();
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let sync = |p: &mut Pulls, at: u64, pullable: bool| {
            p.sync("u", "c", "nginx:doesnotexist", pullable, t0 + s(at), |d| d)
        };
        assert_eq!(pulls.sync("u", "c", "nginx:1.25", true, t0, |d| d), Pull::Ready, "a pullable image has no state");
        assert_eq!(pulls.waiting("u", "c"), None);

        assert_eq!(sync(&mut pulls, 0, false), Pull::Failed);
        let w = pulls.waiting("u", "c").expect("waiting");
        assert_eq!((w.reason, w.message), (ERR_IMAGE_PULL, not_found("nginx:doesnotexist")));
        assert_eq!(sync(&mut pulls, 0, false), Pull::Waiting, "no sync due yet");
        assert_eq!(sync(&mut pulls, 1, true), Pull::BackOff, "pullable now, but the back-off holds the retry");
        let w = pulls.waiting("u", "c").expect("waiting");
        assert_eq!(w.reason, IMAGE_PULL_BACK_OFF);
        assert_eq!(
            w.message,
            format!("Back-off pulling image \"nginx:doesnotexist\": ErrImagePull: {}", not_found("nginx:doesnotexist"))
        );
        assert_eq!(sync(&mut pulls, 9, false), Pull::Waiting);
        assert_eq!(sync(&mut pulls, 10, false), Pull::Failed, "retried when the 10 s back-off ends");
        assert_eq!(sync(&mut pulls, 11, false), Pull::BackOff);
        assert_eq!(sync(&mut pulls, 21, false), Pull::BackOff, "reported again every 10 s");
        assert_eq!(sync(&mut pulls, 29, true), Pull::Waiting);
        assert_eq!(sync(&mut pulls, 30, true), Pull::Ready, "the 20 s back-off ends: the retry pulls it");
        assert_eq!(pulls.waiting("u", "c"), None);
    }

    #[test]
    fn a_new_image_for_the_container_starts_without_back_off() {
        let mut pulls = Pulls::default();
        let t0 = Instant::now();
        assert_eq!(pulls.sync("u", "c", "a:doesnotexist", false, t0, |d| d), Pull::Failed);
        assert_eq!(pulls.sync("u", "c", "a:1", true, t0, |d| d), Pull::Ready);
        assert_eq!(pulls.waiting("u", "c"), None);
        assert_eq!(pulls.sync("u", "c", "a:doesnotexist", false, t0, |d| d), Pull::Failed);
        pulls.retain(&HashSet::new());
        assert_eq!(pulls.waiting("u", "c"), None, "a pod gone is forgotten");
    }
}
