//! Several real clusters side by side, as spanset meets them: a host and its members, each of
//! the release asked for, started together, reached through one kubeconfig with a context per
//! cluster (as a user's would be), and each given a provisioner whose volumes live under one
//! root, so that a volume handed between clusters is one directory seen by both.

use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;

use crate::{Binaries, ClusterOptions, Error, RealCluster, Result, io, provisioner::Provisioner};

/// A running fleet; dropping it stops every cluster.
pub struct RealFleet {
    clusters: Vec<RealCluster>,
    kubeconfig: PathBuf,
    volumes: PathBuf,
    _provisioners: Vec<Provisioner>,
}

impl RealFleet {
    /// Starts one cluster per `(name, binaries)` in `dir/NAME/`, together, and writes
    /// `dir/kubeconfig` with a context of each name. Each cluster gets a pod network of its own
    /// (`10.244.N.0/24`, N its place in the list, from 1).
    pub async fn start(clusters: &[(&str, &Binaries)], dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let starts = clusters.iter().enumerate().map(|(i, (name, binaries))| {
            let options = ClusterOptions::named(name, (i + 1) as u8);
            let dir = dir.join(name);
            async move { RealCluster::start(binaries, &options, &dir).await }
        });
        let clusters = futures::future::try_join_all(starts).await?;
        let kubeconfig = dir.join("kubeconfig");
        write_merged(&clusters, &kubeconfig)?;
        let volumes = dir.join("volumes");
        std::fs::create_dir_all(&volumes).map_err(io(format!("creating {}", volumes.display())))?;
        let mut provisioners = Vec::new();
        for c in &clusters {
            provisioners.push(Provisioner::start(c.name(), c.client().await?, volumes.clone()));
        }
        Ok(Self { clusters, kubeconfig, volumes, _provisioners: provisioners })
    }

    /// The kubeconfig with one context per cluster, each as that cluster's administrator.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The directory every volume of the fleet lives under, one directory per volume named as
    /// it is.
    pub fn volumes(&self) -> &Path {
        &self.volumes
    }

    /// The cluster of that name.
    pub fn cluster(&self, name: &str) -> Option<&RealCluster> {
        self.clusters.iter().find(|c| c.name() == name)
    }

    /// Every cluster, in the order started.
    pub fn clusters(&self) -> &[RealCluster] {
        &self.clusters
    }

    /// Stops every cluster, the last started first.
    pub fn stop(&mut self) {
        while let Some(mut c) = self.clusters.pop() {
            c.stop();
        }
    }
}

/// One kubeconfig from each cluster's: JSON, which every kubeconfig reader takes as YAML.
fn write_merged(clusters: &[RealCluster], path: &Path) -> Result<()> {
    let mut merged: Option<Kubeconfig> = None;
    for c in clusters {
        let read = Kubeconfig::read_from(c.kubeconfig()).map_err(|e| Error::Io {
            what: format!("reading {}", c.kubeconfig().display()),
            source: std::io::Error::other(e),
        })?;
        merged = Some(match merged {
            None => read,
            Some(m) => m
                .merge(read)
                .map_err(|e| Error::Io { what: "merging kubeconfigs".into(), source: std::io::Error::other(e) })?,
        });
    }
    let text = serde_json::to_string_pretty(&merged.unwrap_or_default())
        .map_err(|e| Error::Io { what: format!("writing {}", path.display()), source: std::io::Error::other(e) })?;
    std::fs::write(path, text).map_err(io(format!("writing {}", path.display())))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io(format!("writing {}", path.display())))
}
