//! The guard's state file, in a memory-backed `emptyDir` every container of the pod mounts: the
//! one place where the pod's guard keeps what it knows, all on the node's CLOCK_BOOTTIME — sound
//! because every container of a pod runs on one node, and only within one boot (a file written
//! before a reboot is refused: its instants mean nothing on the new clock).
//!
//! - `spanset guard wait` (the first init container) writes it once its lease lets the pod run;
//! - `spanset guard watch` (the sidecar) rewrites it after every poll, so that a restarted watch
//!   goes on from the latest extension, and so that what it concludes reaches the containers;
//! - `spanset-guard-exec` (the first process of every other container) reads it to start its
//!   command and to stop it by the deadline ([`crate::decision`]);
//! - `spanset-guard-exec ready` (the watch's probes) reads when the watch last read its Lease.
//!
//! The file is written whole or not at all (a temporary file renamed over it), and readable by
//! every user, since the containers of a pod may run as different users.

use std::{path::Path, time::Duration};

use serde::{Deserialize, Serialize};

use crate::decision::{Phase, Posted};

/// A pod's ordinal, as StatefulSets number them.
pub type Ordinal = u32;

/// What the guard keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardState {
    /// The boot the instants are from ([`crate::boot::boot_id`]).
    pub boot_id: String,
    /// The Lease read, `NAMESPACE/NAME`.
    pub lease: String,
    /// The ordinal guarded.
    pub ordinal: Ordinal,
    /// Incremented each time the watch stops the pod: a container started in an earlier epoch
    /// missed a stop.
    pub epoch: u64,
    /// What the guard says of the lease now.
    pub phase: Phase,
    /// The guard's `valid_from`, in nanoseconds since boot (with a valid lease).
    pub valid_from_nanos: Option<u64>,
    /// The latest successful poll: its send instant, in nanoseconds since boot.
    pub last_sent_nanos: Option<u64>,
    /// The extension counter that poll saw.
    pub extension: Option<u64>,
    /// The deadline: the containers are gone by then (with a valid lease).
    pub deadline_nanos: Option<u64>,
    /// When the containers' commands are asked to stop (the deadline less the stop budget).
    pub term_nanos: Option<u64>,
    /// Why the latest poll failed, if it did (cleared by a successful one): what the probes say.
    pub last_error: Option<String>,
}

/// Nanoseconds of a duration, saturating.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl GuardState {
    /// The guard's `valid_from`.
    pub fn valid_from(&self) -> Option<Duration> {
        self.valid_from_nanos.map(Duration::from_nanos)
    }

    /// The latest successful poll: its send instant and the counter it saw.
    pub fn last_poll(&self) -> Option<(Duration, u64)> {
        Some((Duration::from_nanos(self.last_sent_nanos?), self.extension?))
    }

    /// What the containers' first processes act on.
    pub fn posted(&self) -> Posted {
        Posted {
            epoch: self.epoch,
            phase: self.phase,
            deadline: self.deadline_nanos.map(Duration::from_nanos),
            term_at: self.term_nanos.map(Duration::from_nanos),
        }
    }

    /// Writes the file whole or not at all, readable by every user of the pod.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        let at = |e: std::io::Error| format!("state file {}: {e}", path.display());
        let text = serde_json::to_string(self).map_err(|e| format!("state file {}: {e}", path.display()))?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).map_err(at)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).map_err(at)?;
        std::fs::rename(&tmp, path).map_err(at)
    }

    /// Reads the file and checks it was written in this boot (`boot_id`); an error says why it
    /// cannot be used.
    pub fn read_any(path: &Path, boot_id: &str) -> Result<GuardState, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| format!("state file {shown}: {e}"))?;
        let s: GuardState = serde_json::from_str(&text).map_err(|e| format!("state file {shown}: {e}"))?;
        if s.boot_id != boot_id {
            return Err(format!(
                "state file {shown}: written in boot {}, not this one ({boot_id}): its instants mean nothing now",
                s.boot_id
            ));
        }
        if let (Some(from), Some(sent)) = (s.valid_from_nanos, s.last_sent_nanos)
            && from > sent
        {
            return Err(format!("state file {shown}: validFromNanos is after lastSentNanos"));
        }
        if s.phase == Phase::Valid && (s.deadline_nanos.is_none() || s.valid_from_nanos.is_none()) {
            return Err(format!("state file {shown}: a valid lease without its deadline"));
        }
        Ok(s)
    }

    /// [`GuardState::read_any`], for the same Lease and ordinal.
    pub fn read(path: &Path, boot_id: &str, lease: &str, ordinal: Ordinal) -> Result<GuardState, String> {
        let s = Self::read_any(path, boot_id)?;
        if s.lease != lease || s.ordinal != ordinal {
            return Err(format!(
                "state file {}: guards ordinal {} of lease {}, not ordinal {ordinal} of {lease}",
                path.display(),
                s.ordinal,
                s.lease
            ));
        }
        Ok(s)
    }
}

/// The watch's probe: whether the watch's latest successful read of its Lease was sent within
/// `fresh` before `now` (both on the node's boot clock); a sentence either way (the kubelet
/// repeats a failing probe's in the pod's Events).
pub fn ready(state: &GuardState, now: Duration, fresh: Duration) -> Result<String, String> {
    let age = state.last_poll().map(|(sent, _)| now.saturating_sub(sent));
    match (age, &state.last_error) {
        (Some(age), _) if age <= fresh => {
            Ok(format!("lease {} read {} ms ago ({:?})", state.lease, age.as_millis(), state.phase))
        }
        (_, Some(e)) => Err(format!("lease {} unreadable: {e}", state.lease)),
        (Some(age), None) => Err(format!("lease {} not read for {} ms", state.lease, age.as_millis())),
        (None, None) => Err(format!("lease {} never read", state.lease)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(phase: Phase) -> GuardState {
        GuardState {
            boot_id: "boot-a".into(),
            lease: "ns/fed-pods".into(),
            ordinal: 4,
            epoch: 2,
            phase,
            valid_from_nanos: Some(100),
            last_sent_nanos: Some(101),
            extension: Some(7),
            deadline_nanos: Some(200),
            term_nanos: Some(180),
            last_error: None,
        }
    }

    #[test]
    fn the_watch_is_ready_while_its_reads_are_fresh_and_says_why_not() {
        let s = state(Phase::Valid);
        let at = |n: u64| Duration::from_nanos(n);
        assert!(ready(&s, at(150), at(100)).unwrap().contains("ms ago"));
        assert_eq!(ready(&s, at(300), at(100)).unwrap_err(), "lease ns/fed-pods not read for 0 ms");
        let failing = GuardState { last_error: Some("forbidden".into()), ..s.clone() };
        assert_eq!(ready(&failing, at(300), at(100)).unwrap_err(), "lease ns/fed-pods unreadable: forbidden");
        let never = GuardState { last_sent_nanos: None, ..s };
        assert_eq!(ready(&never, at(300), at(100)).unwrap_err(), "lease ns/fed-pods never read");
    }

    #[test]
    fn a_state_reads_back_only_in_the_same_boot_for_the_same_guard() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        let s = state(Phase::Valid);
        s.write(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644, "readable by every user");
        let back = GuardState::read(&path, "boot-a", "ns/fed-pods", 4).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.last_poll(), Some((Duration::from_nanos(101), 7)));
        assert_eq!(back.posted().deadline, Some(Duration::from_nanos(200)));
        let err = GuardState::read(&path, "boot-b", "ns/fed-pods", 4).unwrap_err();
        assert!(err.contains("boot-a") && err.contains("boot-b"), "{err}");
        assert!(GuardState::read(&path, "boot-a", "ns/fed-pods", 5).unwrap_err().contains("ordinal 4"));
        assert!(GuardState::read(&path, "boot-a", "ns/other", 4).is_err());
        GuardState { deadline_nanos: None, ..s.clone() }.write(&path).unwrap();
        assert!(GuardState::read_any(&path, "boot-a").unwrap_err().contains("deadline"));
        std::fs::write(&path, "{").unwrap();
        assert!(GuardState::read_any(&path, "boot-a").unwrap_err().contains("state file"));
        assert!(GuardState::read_any(&dir.path().join("none"), "boot-a").is_err());
    }
}
