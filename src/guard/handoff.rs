//! The file in which `spanset guard wait` (the init container) hands its guard to `spanset guard
//! watch` (the sidecar) through an `emptyDir`: the instant the pod's lease counts from, and the
//! latest poll, all on the node's CLOCK_BOOTTIME — sound because both containers run on the
//! same node, and only within one boot: a file written before a reboot is refused (its
//! instants mean nothing on the new clock). The sidecar rewrites it as the lease is extended,
//! so that a restarted sidecar goes on from the latest extension.

use std::{path::Path, time::Duration};

use serde::{Deserialize, Serialize};

use crate::plan::Ordinal;

/// What one guard hands to the next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handoff {
    /// The boot the instants are from ([`super::boot::boot_id`]).
    pub boot_id: String,
    /// The Lease read, `NAMESPACE/NAME`.
    pub lease: String,
    /// The ordinal guarded.
    pub ordinal: Ordinal,
    /// The guard's `valid_from`, in nanoseconds since boot.
    pub valid_from_nanos: u64,
    /// The latest successful poll's send instant, in nanoseconds since boot.
    pub last_sent_nanos: u64,
    /// The extension counter that poll saw.
    pub extension: u64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Handoff {
    /// A hand-over of `valid_from` and the latest poll (`last_sent`, `extension`).
    pub fn new(
        boot_id: String,
        lease: String,
        ordinal: Ordinal,
        valid_from: Duration,
        last_sent: Duration,
        extension: u64,
    ) -> Handoff {
        Handoff {
            boot_id,
            lease,
            ordinal,
            valid_from_nanos: nanos(valid_from),
            last_sent_nanos: nanos(last_sent),
            extension,
        }
    }

    /// The guard's `valid_from`.
    pub fn valid_from(&self) -> Duration {
        Duration::from_nanos(self.valid_from_nanos)
    }

    /// The latest poll's send instant.
    pub fn last_sent(&self) -> Duration {
        Duration::from_nanos(self.last_sent_nanos)
    }

    /// Writes the file whole or not at all (a temporary file renamed over it), so that a reader
    /// never sees half of it.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let at = |e: std::io::Error| format!("state file {}: {e}", path.display());
        let text = serde_json::to_string(self).map_err(|e| format!("state file {}: {e}", path.display()))?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).map_err(at)?;
        std::fs::rename(&tmp, path).map_err(at)
    }

    /// Reads the file and checks it was written in this boot (`boot_id`) for the same Lease and
    /// ordinal; an error says why it cannot be used.
    pub fn read(path: &Path, boot_id: &str, lease: &str, ordinal: Ordinal) -> Result<Handoff, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| format!("state file {shown}: {e}"))?;
        let h: Handoff = serde_json::from_str(&text).map_err(|e| format!("state file {shown}: {e}"))?;
        if h.boot_id != boot_id {
            return Err(format!(
                "state file {shown}: written in boot {}, not this one ({boot_id}): its instants mean nothing now",
                h.boot_id
            ));
        }
        if h.lease != lease || h.ordinal != ordinal {
            return Err(format!(
                "state file {shown}: guards ordinal {} of lease {}, not ordinal {ordinal} of {lease}",
                h.ordinal, h.lease
            ));
        }
        if h.valid_from_nanos > h.last_sent_nanos {
            return Err(format!("state file {shown}: validFromNanos is after lastSentNanos"));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handoff_reads_back_only_in_the_same_boot_for_the_same_guard() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guard");
        let s = Duration::from_secs;
        let h = Handoff::new("boot-a".into(), "ns/fed-pods".into(), 4, s(100), s(101), 7);
        h.write(&path).unwrap();
        let back = Handoff::read(&path, "boot-a", "ns/fed-pods", 4).unwrap();
        assert_eq!((back.valid_from(), back.last_sent(), back.extension), (s(100), s(101), 7));
        let err = Handoff::read(&path, "boot-b", "ns/fed-pods", 4).unwrap_err();
        assert!(err.contains("boot-a") && err.contains("boot-b"), "{err}");
        assert!(Handoff::read(&path, "boot-a", "ns/fed-pods", 5).unwrap_err().contains("ordinal 4"));
        assert!(Handoff::read(&path, "boot-a", "ns/other", 4).is_err());
        std::fs::write(&path, "{").unwrap();
        assert!(Handoff::read(&path, "boot-a", "ns/fed-pods", 4).unwrap_err().contains("state file"));
        assert!(Handoff::read(&dir.path().join("none"), "boot-a", "ns/fed-pods", 4).is_err());
    }
}
