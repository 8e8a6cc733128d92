//! The disks of a sandbox: volumes shared by every simulated cluster, each with an identity and
//! a data marker that the admin API reads and writes, so a test can prove the same data arrived
//! after a move. Apart from the PersistentVolume controller ([`super::volumes`]) so that a
//! cluster can hold the shared store without depending on its controller.
//!
//! A volume mounted by a container that runs a real process (see [`super::processes`]) also
//! has a directory on this machine, made when first asked for: since the volume identity
//! travels with a PersistentVolume handed to another cluster (`storage: Move`), so does the
//! directory and what the process wrote there.

use std::{collections::BTreeMap, path::PathBuf};

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
    /// Where volume directories live, made on first use and removed with the store.
    dir: Mutex<Option<tempfile::TempDir>>,
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

    /// Removes a volume (reclaim policy Delete), with its directory if it has one.
    pub fn destroy(&self, id: &str) {
        self.volumes.lock().remove(id);
        if let Some(dir) = self.dir.lock().as_ref() {
            let _ = std::fs::remove_dir_all(dir.path().join(id));
        }
    }

    /// The directory holding a volume's files, made if it is not there yet; an error if there
    /// is no such volume or the directory cannot be made.
    pub fn directory(&self, id: &str) -> std::io::Result<PathBuf> {
        if !self.volumes.lock().contains_key(id) {
            return Err(std::io::Error::new(std::io::ErrorKind::NotFound, format!("no volume {id}")));
        }
        let mut dir = self.dir.lock();
        if dir.is_none() {
            let made = crate::scratch::make("volumes")?;
            // The containers' roots reach their volumes in it; no one else may.
            crate::cluster::processes::launch::give_to_containers(made.path())?;
            *dir = Some(made);
        }
        let path = dir.as_ref().map(|d| d.path().join(id)).unwrap_or_default();
        crate::cluster::processes::launch::make_dir_for_containers(&path)?;
        Ok(path)
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
