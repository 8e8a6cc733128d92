//! The directory of programs one release's control plane is made of, as `tests/kube/build`
//! leaves it, checked before anything starts so that a missing one is named rather than found
//! by a failed spawn halfway through a cluster.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Every program a cluster runs, and kubectl, which users and tests drive it with.
pub const PROGRAMS: [&str; 6] =
    ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl"];

/// The stages kwok plays the kubelet's part by (from kwok's module, written by the build).
pub const KWOK_STAGES: &str = "kwok-stages.yaml";

/// A directory holding [`PROGRAMS`] and [`KWOK_STAGES`].
#[derive(Debug, Clone)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// The directory, once every program and the stages are found in it.
    pub fn at(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        for program in PROGRAMS.into_iter().chain([KWOK_STAGES]) {
            if !dir.join(program).is_file() {
                return Err(Error::MissingBinary { dir, program });
            }
        }
        Ok(Self { dir })
    }

    /// The path of one of [`PROGRAMS`].
    pub fn program(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The kwok stages file.
    pub fn kwok_stages(&self) -> PathBuf {
        self.dir.join(KWOK_STAGES)
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_lacking_one_program_is_refused_naming_it() {
        let dir = std::env::temp_dir().join(format!("spanset-binaries-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for program in PROGRAMS.into_iter().chain([KWOK_STAGES]).filter(|p| *p != "kube-scheduler") {
            std::fs::write(dir.join(program), "").unwrap();
        }
        let err = Binaries::at(&dir).unwrap_err().to_string();
        assert!(err.contains("no kube-scheduler"), "{err}");
        std::fs::write(dir.join("kube-scheduler"), "").unwrap();
        assert_eq!(Binaries::at(&dir).unwrap().program("etcd"), dir.join("etcd"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
