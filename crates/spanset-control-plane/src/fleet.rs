//! Several real clusters side by side, as spanset meets them: a host and its members, each of
//! the release asked for, started together, reached through one kubeconfig with a context per
//! cluster (as a user's would be), and each given a provisioner whose volumes live under one
//! root, so that a volume handed between clusters is one directory seen by both. Each cluster
//! also has a [`FaultProxy`] in front of its apiserver and a second kubeconfig that goes
//! through them: whoever is given that one (spanset) can be cut off from a cluster while
//! everyone else still reaches it.

use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;

use crate::{
    Binaries, ClusterOptions, Error, RealCluster, Result, io,
    provisioner::Provisioner,
    proxy::{Fault, FaultProxy},
};

/// A running fleet; dropping it stops every cluster.
pub struct RealFleet {
    clusters: Vec<RealCluster>,
    kubeconfig: PathBuf,
    proxied_kubeconfig: PathBuf,
    proxies: Vec<FaultProxy>,
    volumes: PathBuf,
    _provisioners: Vec<Provisioner>,
}

impl RealFleet {
    /// Starts one cluster per `(name, binaries)` in `dir/NAME/`, together, and writes
    /// `dir/kubeconfig` with a context of each name, and `dir/proxied.kubeconfig`, the same
    /// through each cluster's proxy. Each cluster gets a pod network of its own
    /// (`10.244.N.0/24`, N its place in the list, from 1) and one node.
    pub async fn start(clusters: &[(&str, &Binaries)], dir: &Path) -> Result<Self> {
        Self::start_with_nodes(clusters, dir, 1).await
    }

    /// [`Self::start`], each cluster with `nodes` kwok nodes (a drain needs another node for
    /// the pods it evicts).
    pub async fn start_with_nodes(clusters: &[(&str, &Binaries)], dir: &Path, nodes: usize) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let starts = clusters.iter().enumerate().map(|(i, (name, binaries))| {
            let options = ClusterOptions { nodes, ..ClusterOptions::named(name, (i + 1) as u8) };
            let dir = dir.join(name);
            async move { RealCluster::start(binaries, &options, &dir).await }
        });
        let clusters = futures::future::try_join_all(starts).await?;
        let mut proxies = Vec::new();
        for c in &clusters {
            let target = c.server().trim_start_matches("https://").parse().map_err(|e| Error::Io {
                what: format!("the address of {}", c.server()),
                source: std::io::Error::other(e),
            })?;
            proxies.push(FaultProxy::start(target).await.map_err(io("starting a proxy"))?);
        }
        let kubeconfig = dir.join("kubeconfig");
        write_merged(&clusters, &kubeconfig, &[])?;
        let proxied_kubeconfig = dir.join("proxied.kubeconfig");
        let through: Vec<(String, String)> = clusters
            .iter()
            .zip(&proxies)
            .map(|(c, p)| (c.name().to_string(), format!("https://{}", p.addr())))
            .collect();
        write_merged(&clusters, &proxied_kubeconfig, &through)?;
        let volumes = dir.join("volumes");
        std::fs::create_dir_all(&volumes).map_err(io(format!("creating {}", volumes.display())))?;
        let mut provisioners = Vec::new();
        for c in &clusters {
            provisioners.push(Provisioner::start(c.name(), c.client().await?, volumes.clone()));
        }
        Ok(Self { clusters, kubeconfig, proxied_kubeconfig, proxies, volumes, _provisioners: provisioners })
    }

    /// The kubeconfig whose every cluster is reached through its proxy, for the one client that
    /// faults are to cut off.
    pub fn proxied_kubeconfig(&self) -> &Path {
        &self.proxied_kubeconfig
    }

    /// Sets the fault of `cluster`'s proxy; `false` if there is no such cluster.
    pub fn fault(&self, cluster: &str, fault: Fault) -> bool {
        match self.clusters.iter().position(|c| c.name() == cluster) {
            Some(i) => {
                self.proxies[i].set(fault);
                true
            }
            None => false,
        }
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

    /// The cluster of that name, to kill and restart its components.
    pub fn cluster_mut(&mut self, name: &str) -> Option<&mut RealCluster> {
        self.clusters.iter_mut().find(|c| c.name() == name)
    }

    /// Every cluster, in the order started.
    pub fn clusters(&self) -> &[RealCluster] {
        &self.clusters
    }

    /// Stops every cluster, all at once (see [`RealCluster::stop_together`]).
    pub fn stop(&mut self) {
        RealCluster::stop_together(&mut self.clusters);
        self.clusters.clear();
    }
}

/// One kubeconfig from each cluster's, the server of each cluster named in `servers` replaced:
/// JSON, which every kubeconfig reader takes as YAML.
fn write_merged(clusters: &[RealCluster], path: &Path, servers: &[(String, String)]) -> Result<()> {
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
    let mut merged = merged.unwrap_or_default();
    for named in &mut merged.clusters {
        if let (Some(cluster), Some((_, server))) =
            (named.cluster.as_mut(), servers.iter().find(|(name, _)| *name == named.name))
        {
            cluster.server = Some(server.clone());
        }
    }
    let text = serde_json::to_string_pretty(&merged)
        .map_err(|e| Error::Io { what: format!("writing {}", path.display()), source: std::io::Error::other(e) })?;
    std::fs::write(path, text).map_err(io(format!("writing {}", path.display())))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io(format!("writing {}", path.display())))
}
