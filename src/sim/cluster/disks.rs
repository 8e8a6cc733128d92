//! The disks of a sandbox: volumes shared by every simulated cluster, each with an identity and
//! a data marker that the admin API reads and writes, so a test can prove the same data arrived
//! after a move. Apart from the PersistentVolume controller ([`super::volumes`]) so that a
//! cluster can hold the shared store without depending on its controller.

use std::collections::BTreeMap;

use parking_lot::Mutex;
use serde::Serialize;

/// One volume of the sandbox.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// The volume identity (the PV's `csi.volumeHandle`).
    pub id: String,
    /// The data marker: what a test wrote, to prove the same data arrived after a move.
    pub data: String,
    /// The cluster and node a local volume lives on.
    pub local_to: Option<(String, String)>,
}

/// Volumes of one sandbox, shared by all its clusters.
#[derive(Debug, Default)]
pub struct VolumeStore {
    volumes: Mutex<BTreeMap<String, Volume>>,
    next: Mutex<u64>,
}

impl VolumeStore {
    /// Creates a volume and returns its identity.
    pub fn provision(&self, local_to: Option<(String, String)>) -> String {
        let mut next = self.next.lock();
        *next += 1;
        let id = format!("vol-{:05}", *next);
        self.volumes.lock().insert(id.clone(), Volume { id: id.clone(), data: String::new(), local_to });
        id
    }

    /// Removes a volume (reclaim policy Delete).
    pub fn destroy(&self, id: &str) {
        self.volumes.lock().remove(id);
    }

    /// One volume.
    pub fn get(&self, id: &str) -> Option<Volume> {
        self.volumes.lock().get(id).cloned()
    }

    /// Writes a volume's data marker; false if there is no such volume.
    pub fn write(&self, id: &str, data: &str) -> bool {
        match self.volumes.lock().get_mut(id) {
            Some(v) => {
                v.data = data.to_string();
                true
            }
            None => false,
        }
    }

    /// Every volume.
    pub fn all(&self) -> Vec<Volume> {
        self.volumes.lock().values().cloned().collect()
    }
}
