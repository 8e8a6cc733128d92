//! `spanset sim`: starts simulated clusters, writes their kubeconfig, prints `cluster NAME: URL`,
//! `admin: URL`, `dns NAME: 127.0.0.1:PORT` and `ready`, and runs until SIGINT or SIGTERM.
//!
//! The simulated components of an idle cluster sleep (they wake on a change, a fault, or a
//! deadline of their own), so `--nodes 1` and a hundred clusters cost little while nothing
//! happens; `--tls` (or `--auth`) serves HTTPS with HTTP/2 offered by ALPN.

use std::{io::Write, path::PathBuf};

use crate::{
    cluster::{ClusterConfig, release::Release},
    sandbox::{fleet::Fleet, kubeconfig},
};

/// Flags of `spanset sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Names of the clusters to simulate, comma-separated (DNS labels, unique).
    #[arg(long, value_delimiter = ',', required = true)]
    pub clusters: Vec<String>,
    /// Where to write the kubeconfig (one context per cluster; the first is current).
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Listen on ports N, N+1, ... (one per cluster's API, then the admin API, then one per
    /// cluster's DNS, UDP and TCP: cluster i's DNS is on N+n+1+i for n clusters); free ports if
    /// unset.
    #[arg(long)]
    pub port_base: Option<u16>,
    /// Real seconds per simulated second (e.g. 0.01 runs grace periods and node timeouts 100x faster).
    #[arg(long, default_value_t = 1.0)]
    pub time_factor: f64,
    /// Worker nodes per cluster.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Seed of every random choice (injected errors, generated names).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Enforce authentication and RBAC: requests need a bearer token (the kubeconfig's user
    /// gets an administrator's token; ServiceAccounts get theirs from TokenRequest) and pass
    /// the Roles and ClusterRoles bound to their user.
    #[arg(long)]
    pub auth: bool,
    /// Serve HTTPS without enforcing authentication (`--auth` implies it): HTTP/2 or HTTP/1.1
    /// as the client offers by ALPN, like kube-apiserver; the kubeconfig carries the CA.
    #[arg(long)]
    pub tls: bool,
    /// Install a simulated OpenKruise: Advanced StatefulSets (`statefulsets.apps.kruise.io`,
    /// `asts`) with `reserveOrdinals`, `scaleStrategy.maxUnavailable`, specified deletion and
    /// in-place update. Alone, in every cluster; with names (`--kruise east,west`), in those.
    #[arg(long, value_name = "CLUSTERS", num_args = 0..=1, require_equals = false, value_delimiter = ',')]
    pub kruise: Option<Vec<String>>,
    /// Install the Multi-Cluster Services API's CRDs (`serviceexports` and `serviceimports`,
    /// `multicluster.x-k8s.io/v1alpha1`; nothing acts on them). Alone, in every cluster; with
    /// names (`--mcs east,west`), in those.
    #[arg(long, value_name = "CLUSTERS", num_args = 0..=1, require_equals = false, value_delimiter = ',')]
    pub mcs: Option<Vec<String>>,
    /// Images whose containers run real processes on this machine, comma-separated, by bare
    /// name (`redis` runs `redis:7` and `docker.io/library/redis`): each in its own mount, PID
    /// and UTS namespaces, its volume mounts the directories of its volumes, its pod IP in a
    /// network namespace of the pod's own (from 100.64.0.0/10, routed from this machine), never
    /// root on this machine (each pod gets a user namespace mapping its users to IDs from
    /// 1,000,000,000; the machine's directories are seen through a writable layer of the
    /// container's own). Needs `--auth`, root and the programs on PATH; every other image stays
    /// simulated.
    #[arg(long, value_name = "IMAGES", value_delimiter = ',')]
    pub run_images: Vec<String>,
    /// Keep the kubelet's restart back-off for real processes (10 s doubling to 5 min) in real
    /// seconds, whatever --time-factor: a crashing container then waits in CrashLoopBackOff as
    /// on a real node, while every other delay is still scaled. Without it the back-off is
    /// scaled too (at --time-factor 0.01 a crashed container restarts within a tenth of a
    /// second).
    #[arg(long)]
    pub real_back_off: bool,
    /// The Kubernetes release a cluster answers as, comma-separated `NAME=1.MINOR.PATCH`
    /// (`east=1.27.16,west=1.37.2`; 1.27 to 1.37, others v1.33.1): its `/version`, the API
    /// versions discovery lists (no ValidatingAdmissionPolicy before 1.30) and the behaviour
    /// it keeps, as docs/version-skew.md lists.
    #[arg(long, value_name = "NAME=VERSION", value_delimiter = ',')]
    pub cluster_version: Vec<String>,
}

/// Checks the flags beyond what clap can; the error is one line naming the flag.
pub fn check(args: &SimArgs) -> Result<(), String> {
    if !(args.time_factor > 0.0 && args.time_factor <= 100.0) {
        return Err(format!("--time-factor: must be above 0 and at most 100, not {}", args.time_factor));
    }
    for (i, name) in args.clusters.iter().enumerate() {
        // DNS labels, as `--clusters` says: the same rule as a namespace name.
        if let Some(why) = crate::store::validate::syntax::dns1123_label(name).first() {
            return Err(format!("--clusters: invalid cluster name {name:?}: {why}"));
        }
        if args.clusters[..i].contains(name) {
            return Err(format!("--clusters: cluster {name:?} is named twice"));
        }
    }
    for (flag, names) in [("--kruise", &args.kruise), ("--mcs", &args.mcs)] {
        for name in names.iter().flatten() {
            if !args.clusters.contains(name) {
                return Err(format!("{flag}: no cluster named {name:?} in --clusters"));
            }
        }
    }
    releases(&args.cluster_version, &args.clusters)?;
    for image in &args.run_images {
        if image.is_empty() || image.contains(['/', ':', '@']) {
            return Err(format!("--run-images: {image:?} is not a bare image name (like redis or etcd)"));
        }
    }
    if !args.run_images.is_empty() && !args.auth {
        return Err(REAL_PROCESSES_NEED_AUTH.into());
    }
    if let Some(base) = args.port_base
        && (base == 0 || usize::from(base) + 2 * args.clusters.len() > usize::from(u16::MAX))
    {
        return Err(format!("--port-base: {base} leaves no room for {} ports", 2 * args.clusters.len() + 1));
    }
    Ok(())
}

/// Why real processes need authentication: any account of the machine reaches a loopback port,
/// and an API that runs its pods' commands for real would run theirs.
pub const REAL_PROCESSES_NEED_AUTH: &str = "--run-images runs pods as real processes on this machine, so every request \
     must be authenticated: add --auth (without it any local account could create a pod and run commands in it)";

/// The release of each cluster `--cluster-version` names (`NAME=1.MINOR.PATCH`), checked
/// against the clusters there are; the error is one line naming the flag.
pub fn releases(entries: &[String], clusters: &[String]) -> Result<Vec<(String, Release)>, String> {
    let mut out: Vec<(String, Release)> = Vec::new();
    for entry in entries {
        let Some((name, version)) = entry.split_once('=') else {
            return Err(format!("--cluster-version: {entry:?} is not NAME=VERSION (like west=1.30.4)"));
        };
        if !clusters.iter().any(|c| c == name) {
            return Err(format!("--cluster-version: no cluster named {name:?} in --clusters"));
        }
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("--cluster-version: cluster {name:?} is given twice"));
        }
        let release = Release::parse(version).map_err(|e| format!("--cluster-version {name}: {e}"))?;
        out.push((name.to_string(), release));
    }
    Ok(out)
}

/// The release `--cluster-version` gives `cluster` (already checked), else the newest.
pub fn release_of(entries: &[String], cluster: &str) -> Release {
    entries
        .iter()
        .filter_map(|e| e.split_once('='))
        .find(|(name, _)| *name == cluster)
        .and_then(|(_, version)| Release::parse(version).ok())
        .unwrap_or_default()
}

/// Whether a per-cluster flag (`--kruise`, `--mcs`) applies to `cluster`: alone it means every
/// cluster.
pub fn named_in(flag: &Option<Vec<String>>, cluster: &str) -> bool {
    flag.as_ref().is_some_and(|names| names.is_empty() || names.iter().any(|n| n == cluster))
}

/// The configuration of each cluster the flags ask for, in their order.
fn configs(args: &SimArgs) -> Vec<ClusterConfig> {
    args.clusters
        .iter()
        .map(|n| ClusterConfig {
            time_factor: args.time_factor,
            nodes: args.nodes,
            seed: args.seed,
            auth: args.auth,
            tls: args.tls,
            kruise: named_in(&args.kruise, n),
            mcs: named_in(&args.mcs, n),
            run_images: args.run_images.clone(),
            real_back_off: args.real_back_off,
            release: release_of(&args.cluster_version, n),
            ..ClusterConfig::named(n)
        })
        .collect()
}

/// Runs the sandbox until `stop` resolves (the command line's SIGINT or SIGTERM); returns the
/// process exit code, 2 for flags [`check`] refuses.
pub async fn run(args: SimArgs, stop: impl std::future::Future<Output = ()>) -> i32 {
    if let Err(e) = check(&args) {
        eprintln!("spanset: {e} (see --help)");
        return 2;
    }
    let fleet = match Fleet::start(configs(&args), args.port_base).await {
        Ok(f) => f,
        Err(e) => {
            eprintln!("spanset: {e}");
            return 1;
        }
    };
    if let Err(e) = kubeconfig::write(&args.kubeconfig, &fleet.access()) {
        eprintln!("spanset: cannot write kubeconfig {}: {e}", args.kubeconfig.display());
        return 1;
    }
    if let Err(e) = fleet.write_admin_url(&args.kubeconfig) {
        eprintln!("spanset: cannot write the admin URL beside kubeconfig {}: {e}", args.kubeconfig.display());
        return 1;
    }
    let mut out = std::io::stdout().lock();
    for (name, url) in fleet.endpoints() {
        let _ = writeln!(out, "cluster {name}: {url}");
    }
    let _ = writeln!(out, "admin: {}", fleet.admin_url());
    for (name, addr) in fleet.dns_endpoints() {
        let _ = writeln!(out, "dns {name}: {addr}");
    }
    // Listeners were bound before this point, so every one of them accepts now.
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    drop(out);
    stop.await;
    tracing::info!("signal received, stopping");
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(clusters: &[&str], port_base: Option<u16>) -> SimArgs {
        SimArgs {
            clusters: clusters.iter().map(|s| s.to_string()).collect(),
            kubeconfig: "k".into(),
            port_base,
            time_factor: 1.0,
            nodes: 3,
            seed: 1,
            auth: false,
            tls: false,
            kruise: None,
            mcs: None,
            run_images: Vec::new(),
            real_back_off: false,
            cluster_version: Vec::new(),
        }
    }

    #[test]
    fn cluster_versions_name_a_cluster_once_and_a_supported_release() {
        let mut a = args(&["east", "west"], None);
        a.cluster_version = vec!["east=1.27.16".into(), "west=v1.30.4".into()];
        assert!(check(&a).is_ok());
        let configs = configs(&a);
        assert_eq!(configs[0].release.git_version(), "v1.27.16");
        assert_eq!(configs[1].release.git_version(), "v1.30.4");
        a.cluster_version = vec!["east=1.29.1".into()];
        assert_eq!(configs_of(&a), ["v1.29.1", "v1.33.1"], "a cluster not named answers as the default");
        let refused = |entries: &[&str]| {
            let mut a = args(&["east", "west"], None);
            a.cluster_version = entries.iter().map(|e| e.to_string()).collect();
            check(&a).unwrap_err()
        };
        assert_eq!(refused(&["north=1.30.0"]), "--cluster-version: no cluster named \"north\" in --clusters");
        assert!(refused(&["east=1.26.15"]).starts_with("--cluster-version east: 1.26.15: only releases 1.27 to 1.37"));
        assert!(refused(&["east=1.38.0"]).contains("only releases 1.27 to 1.37"));
        assert!(refused(&["east"]).contains("is not NAME=VERSION"));
        assert!(refused(&["east=1.30.0", "east=1.31.0"]).contains("given twice"));
    }

    fn configs_of(a: &SimArgs) -> Vec<String> {
        configs(a).iter().map(|c| c.release.git_version()).collect()
    }

    #[test]
    fn kruise_and_mcs_alone_mean_every_cluster_and_with_names_only_those() {
        let mut a = args(&["east", "west"], None);
        assert!(!named_in(&a.kruise, "east"));
        a.kruise = Some(vec![]);
        assert!(named_in(&a.kruise, "east") && named_in(&a.kruise, "west"));
        a.kruise = Some(vec!["west".into()]);
        assert!(!named_in(&a.kruise, "east") && named_in(&a.kruise, "west"));
        a.kruise = Some(vec!["north".into()]);
        assert_eq!(check(&a).unwrap_err(), "--kruise: no cluster named \"north\" in --clusters");
        a.kruise = None;
        a.mcs = Some(vec!["west".into()]);
        assert!(!named_in(&a.mcs, "east") && named_in(&a.mcs, "west"));
        a.mcs = Some(vec!["south".into()]);
        assert_eq!(check(&a).unwrap_err(), "--mcs: no cluster named \"south\" in --clusters");
    }

    /// The uid of namespace `kube-system` in each cluster `spanset sim` would start, which is
    /// how spanset tells member clusters apart.
    fn kube_system_uids(seed: u64, clusters: &[&str]) -> Vec<String> {
        let mut a = args(clusters, None);
        a.seed = seed;
        configs(&a)
            .into_iter()
            .map(|config| {
                let cluster = crate::cluster::Cluster::new(config);
                let ns = cluster.resources.by_plural("", "namespaces").expect("namespaces are built in");
                let object = cluster.get(&ns, "", "kube-system").expect("every cluster has kube-system");
                object["metadata"]["uid"].as_str().expect("a uid").to_string()
            })
            .collect()
    }

    #[test]
    fn every_cluster_of_a_seeded_sandbox_has_its_own_kube_system_uid_and_a_seed_repeats_them() {
        let clusters = ["host", "a", "b", "c"];
        // Seeds that once gave two of these clusters one uid (a and c for 7 and 11, b and c for 4242),
        // then a sweep of others.
        for seed in [7, 11, 4242].into_iter().chain(0..300).chain([u64::MAX - 3, u64::MAX]) {
            let uids = kube_system_uids(seed, &clusters);
            let distinct: std::collections::BTreeSet<_> = uids.iter().collect();
            assert_eq!(distinct.len(), clusters.len(), "seed {seed}: kube-system uids {uids:?} of {clusters:?}");
        }
        assert_eq!(kube_system_uids(7, &clusters), kube_system_uids(7, &clusters), "a seed gives the same uids");
        assert_ne!(kube_system_uids(7, &clusters), kube_system_uids(8, &clusters), "another seed, other uids");
    }

    #[test]
    fn refuses_bad_and_duplicate_names() {
        assert!(check(&args(&["a", "b"], None)).is_ok());
        assert!(check(&args(&["a", "a"], None)).unwrap_err().contains("named twice"));
        assert!(check(&args(&["Bad_Name"], None)).unwrap_err().contains("RFC 1123 label"));
        assert!(check(&args(&["a"], Some(65535))).unwrap_err().contains("--port-base"));
        let mut slow = args(&["a"], None);
        slow.time_factor = 0.0;
        assert!(check(&slow).unwrap_err().contains("--time-factor"));
    }
}
