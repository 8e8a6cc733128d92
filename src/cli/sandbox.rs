//! `spanset sandbox`: the whole product on its embedded default. Starts simulated clusters
//! (`host` plus the members), installs the CRDs, one MemberCluster per member and an example
//! federation `redis`, runs the controller in-process, writes a kubeconfig for kubectl, and
//! shows a live table of slices and moves until Ctrl-C.

use std::{io::Write, net::SocketAddr, path::PathBuf, time::Duration};

use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use spanset_api::{FederatedStatefulSet, MemberCluster, MemberClusterSpec, decode::Undecodable};
use spanset_controller::{
    leadership::leader::LeaseSettings,
    runtime::app::{self, RunOptions},
};
use spanset_sim::{
    cluster::ClusterConfig,
    sandbox::{fleet::Fleet, kubeconfig},
};

/// The host cluster's name in the sandbox.
pub const HOST: &str = "host";

/// Flags of `spanset sandbox`.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxArgs {
    /// Member clusters, comma-separated (DNS labels, unique, not `host`).
    #[arg(long, value_delimiter = ',', default_value = "east,west,central")]
    pub clusters: Vec<String>,
    /// Where to write the kubeconfig (contexts `host` and one per member).
    #[arg(long, default_value = "./spanset-sandbox.kubeconfig")]
    pub kubeconfig: PathBuf,
    /// Real seconds per simulated second (e.g. 0.1 runs pod starts and grace periods 10x faster).
    #[arg(long, default_value_t = 1.0)]
    pub time_factor: f64,
    /// Where the controller's /metrics, /healthz and /readyz listen.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub metrics_addr: SocketAddr,
    /// Do not create the example federation.
    #[arg(long)]
    pub no_example: bool,
    /// Which example federation to create: `redis` (six simulated pods over the members,
    /// weights 1:1:1); `redis-cluster`, the start-ordinal blog's Redis Cluster of six real
    /// `redis-server` processes in `east` (`examples/redis-cluster.yaml`; implies
    /// `--run-images redis`, needs Debian's redis-server and redis-tools); or `etcd`, three real
    /// etcd members, one per cluster (`examples/etcd.yaml`; implies `--run-images etcd`, needs
    /// etcd-server and etcd-client).
    #[arg(long, value_enum, default_value_t = Example::Redis)]
    pub example: Example,
    /// Run no controller in the sandbox: for `spanset drill chaos --controllers N`, which starts
    /// (and kills and pauses) its own, or for controllers started by hand with `spanset run`.
    #[arg(long)]
    pub no_controller: bool,
    /// Serve every cluster without authentication or RBAC, the controller running as the
    /// administrator and each member registered without `spanset join` (so without its
    /// admission guards): for a test that needs an open API. By default every request needs a
    /// token (the kubeconfig's administrator has one), the controller runs with exactly the
    /// shipped permissions (`deploy/rbac.yaml` in the host, and each member joined with
    /// `spanset join`: `deploy/member/rbac.yaml` and `deploy/member/admission.yaml`), as
    /// deployed. Refused with real processes (`--run-images`, `--example redis-cluster` or
    /// `etcd`).
    #[arg(long)]
    pub no_auth: bool,
    /// Install a simulated OpenKruise in the members (alone: every member; with names,
    /// `--kruise east,west`: those), and give the example federation `backend:
    /// AdvancedStatefulSet`, so that any ordinal moves straight to any cluster. A member left
    /// without it gets no slice, and the federation's Degraded condition says why.
    #[arg(long, value_name = "CLUSTERS", num_args = 0..=1, value_delimiter = ',')]
    pub kruise: Option<Vec<String>>,
    /// Install the Multi-Cluster Services API's CRDs (ServiceExport, ServiceImport) in the
    /// members (alone: every member; with names, `--mcs east,west`: those).
    #[arg(long, value_name = "CLUSTERS", num_args = 0..=1, value_delimiter = ',')]
    pub mcs: Option<Vec<String>>,
    /// Images whose containers run real processes on this machine (as `spanset sim
    /// --run-images`), comma-separated bare names, e.g. `redis,etcd`.
    #[arg(long, value_name = "IMAGES", value_delimiter = ',')]
    pub run_images: Vec<String>,
    /// Keep the kubelet's restart back-off for real processes (10 s doubling to 5 min) in real
    /// seconds, whatever --time-factor (as `spanset sim --real-back-off`); without it the
    /// back-off is scaled like every other delay.
    #[arg(long)]
    pub real_back_off: bool,
    /// The Kubernetes release a cluster answers as (as `spanset sim --cluster-version`),
    /// comma-separated `NAME=1.MINOR.PATCH`, e.g. `east=1.29.8`: a member before 1.30 gets
    /// no admission policies, and MemberCluster status says which guards it lacks.
    #[arg(long, value_name = "NAME=VERSION", value_delimiter = ',')]
    pub cluster_version: Vec<String>,
    /// Run real Kubernetes control planes instead of simulated clusters (etcd, kube-apiserver,
    /// kube-controller-manager, kube-scheduler, and kwok in place of kubelets): DIR holds the
    /// programs `tests/kube/build RELEASE` builds (it prints DIR). Comma-separated; a
    /// `NAME=DIR` entry gives that cluster its own release, e.g. `--control-plane
    /// DIR37,east=DIR34`. Their logs, data and volumes are kept in `<kubeconfig>.clusters/`
    /// until the next start. Pods are kwok's: Running and Ready, but no program runs.
    #[arg(long, value_name = "DIR", value_delimiter = ',')]
    pub control_plane: Vec<String>,
}

/// The example federations `spanset sandbox` can start with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Example {
    /// Six simulated pods, spread 1:1:1.
    Redis,
    /// The blog's Redis Cluster: six real Redis nodes in `east`.
    RedisCluster,
    /// An etcd quorum: three real etcd members, one in each of `east`, `west`, `central`.
    Etcd,
}

impl Example {
    /// Images the example runs for real.
    pub fn run_images(self) -> &'static [&'static str] {
        match self {
            Example::Redis => &[],
            Example::RedisCluster => &["redis"],
            Example::Etcd => &["etcd"],
        }
    }

    /// The members the example places ordinals on by name.
    pub fn members(self) -> &'static [&'static str] {
        match self {
            Example::Redis => &[],
            Example::RedisCluster => &["east", "west"],
            Example::Etcd => &["east", "west", "central"],
        }
    }

    /// The example's manifest, if it is one of `examples/`.
    pub fn manifest(self) -> Option<&'static str> {
        match self {
            Example::Redis => None,
            Example::RedisCluster => Some(include_str!("../../examples/redis-cluster.yaml")),
            Example::Etcd => Some(include_str!("../../examples/etcd.yaml")),
        }
    }
}

/// The ServiceAccount the controller runs as in the host (`deploy/rbac.yaml`).
pub const CONTROLLER_ACCOUNT: &str = "spanset";
/// The leader Lease's name (`deploy/rbac.yaml` allows only this one).
pub const LEASE_NAME: &str = "spanset-leader";

/// Sets up least-privilege identities in a sandbox that enforces RBAC: applies the host RBAC,
/// joins every member with [`super::join::join`], and writes `<kubeconfig>.controller`, a
/// kubeconfig whose `host` context is the controller's ServiceAccount. Answers its path.
pub async fn secure(host: &Client, kubeconfig: &std::path::Path, members: &[String]) -> anyhow::Result<PathBuf> {
    use super::join::{self, JoinArgs};
    join::apply_manifest(host, join::HOST_RBAC, "deploy/rbac.yaml").await.map_err(anyhow::Error::msg)?;
    // The examples carry objects from `default`: the operator's step of `deploy/rbac.yaml`.
    allow_carry(host, "default").await?;
    for m in members {
        let member = app::host_client(Some(kubeconfig), Some(m)).await?;
        let args = JoinArgs {
            name: m.clone(),
            kubeconfig: kubeconfig.to_path_buf(),
            context: m.clone(),
            host_kubeconfig: None,
            host_context: Some(HOST.into()),
            namespace: join::SYSTEM_NAMESPACE.into(),
            token_seconds: 365 * 24 * 3600,
            region: None,
        };
        let joined = join::join(host, &member, &args).await.map_err(|e| anyhow::anyhow!("join {m}: {e}"))?;
        for what in joined.not_installed {
            eprintln!("spanset: join {m}: not installed: {what}");
        }
    }
    let (token, _) = join::mint(host, CONTROLLER_ACCOUNT, 365 * 24 * 3600).await.map_err(anyhow::Error::msg)?;
    let cluster = join::cluster_entry(kubeconfig, HOST).map_err(anyhow::Error::msg)?;
    let path = kubeconfig.with_extension("controller");
    let text = join::identity_kubeconfig(HOST, cluster, CONTROLLER_ACCOUNT, &token);
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    file.open(&path)?.write_all(text.as_bytes())?;
    Ok(path)
}

/// Lets the controller read the objects federations of `namespace` carry, as an operator does
/// for each namespace whose federations carry any (`deploy/rbac.yaml`): a RoleBinding there to
/// ClusterRole `spanset-carry` for the controller's ServiceAccount. Its Secrets are carried only
/// if labelled `spanset.dev/carry=true`, all the same.
pub async fn allow_carry(host: &Client, namespace: &str) -> anyhow::Result<()> {
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": CARRY_ROLE, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CARRY_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": CONTROLLER_ACCOUNT, "namespace": super::join::SYSTEM_NAMESPACE}],
    }))?;
    let pp = PatchParams::apply("spanset-sandbox").force();
    Api::<RoleBinding>::namespaced(host.clone(), namespace).patch(CARRY_ROLE, &pp, &Patch::Apply(&binding)).await?;
    Ok(())
}

/// The ClusterRole of `deploy/rbac.yaml` that lets the controller read carried objects, bound
/// per namespace (and the name of the sandbox's bindings to it).
pub const CARRY_ROLE: &str = "spanset-carry";

/// The example federation (kept in [`spanset_api`], where the production build has it too).
pub use spanset_api::example;

/// Installs the CRDs and waits until the host serves them.
pub async fn install_crds(host: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(host.clone());
    for (_, yaml) in spanset_api::crd_files() {
        let crd: CustomResourceDefinition = serde_yaml::from_str(&yaml)?;
        match api.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Creates one MemberCluster per member, reached through the context of the same name.
pub async fn join_members(host: &Client, members: &[String]) -> anyhow::Result<()> {
    let api: Api<MemberCluster> = Api::all(host.clone());
    for m in members {
        let mc = MemberCluster::new(
            m,
            MemberClusterSpec { kubeconfig_secret: None, context: Some(m.clone()), region: None, fenced: false },
        );
        match api.create(&PostParams::default(), &mc).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The images run for real: those asked for, and those the example needs.
fn run_images(args: &SandboxArgs) -> Vec<String> {
    let mut images = args.run_images.clone();
    if !args.no_example {
        for image in args.example.run_images() {
            if !images.iter().any(|i| i == image) {
                images.push(image.to_string());
            }
        }
    }
    images
}

fn check(args: &SandboxArgs) -> Result<(), String> {
    if args.clusters.is_empty() {
        return Err("--clusters: at least one member is required".into());
    }
    if args.clusters.iter().any(|c| c == HOST) {
        return Err(format!("--clusters: {HOST:?} is the host cluster's name"));
    }
    if !args.no_example {
        for m in args.example.members() {
            if !args.clusters.iter().any(|c| c == m) {
                return Err(format!(
                    "--example {}: places its nodes on {}; --clusters must name {m}",
                    clap::ValueEnum::to_possible_value(&args.example)
                        .map(|v| v.get_name().to_string())
                        .unwrap_or_default(),
                    args.example.members().join(" and ")
                ));
            }
        }
    }
    if args.no_auth && !run_images(args).is_empty() {
        return Err(format!(
            "--no-auth: the sandbox runs pods of {} as real processes on this machine, which needs every request \
             authenticated (without it any local account could create a pod and run commands in it); drop --no-auth",
            run_images(args).join(",")
        ));
    }
    if !args.control_plane.is_empty() {
        return check_real(args);
    }
    let mut all = vec![HOST.to_string()];
    all.extend(args.clusters.iter().cloned());
    spanset_sim::cli::serve::check(&spanset_sim::cli::serve::SimArgs {
        clusters: all,
        kubeconfig: args.kubeconfig.clone(),
        port_base: None,
        time_factor: args.time_factor,
        nodes: 3,
        seed: 1,
        auth: !args.no_auth,
        tls: false,
        kruise: args.kruise.clone(),
        mcs: args.mcs.clone(),
        run_images: run_images(args),
        real_back_off: args.real_back_off,
        cluster_version: args.cluster_version.clone(),
    })
}

/// The flags only a simulated cluster can honour, refused with `--control-plane`, and the
/// cluster names checked as `spanset sim` checks them.
fn check_real(args: &SandboxArgs) -> Result<(), String> {
    const SIMULATED: &str = "it changes a simulated cluster, and real ones are Kubernetes' own";
    let simulated_only = [
        ("--time-factor", args.time_factor != 1.0, SIMULATED),
        ("--no-auth", args.no_auth, SIMULATED),
        ("--kruise", args.kruise.is_some(), SIMULATED),
        ("--mcs", args.mcs.is_some(), SIMULATED),
        (
            "--run-images",
            !run_images(args).is_empty(),
            "kwok plays each pod's kubelet and runs no program (an --example other than redis runs programs)",
        ),
        ("--real-back-off", args.real_back_off, SIMULATED),
        (
            "--cluster-version",
            !args.cluster_version.is_empty(),
            "each control plane answers as the release it was built from; give a cluster its own with NAME=DIR",
        ),
    ];
    if let Some((flag, _, why)) = simulated_only.iter().find(|(_, set, _)| *set) {
        return Err(format!("{flag} cannot be combined with --control-plane: {why}"));
    }
    for name in &args.clusters {
        if let Some(why) = super::bad_cluster_name(name) {
            return Err(format!("--clusters: {name:?} {why}"));
        }
    }
    control_planes(args).map(|_| ())
}

/// Each cluster's control plane from `--control-plane`: the bare DIR for every cluster not
/// named, `NAME=DIR` for that one. The error names the entry.
fn control_planes(args: &SandboxArgs) -> Result<Vec<(String, spanset_control_plane::Binaries)>, String> {
    let mut default = None;
    let mut named = std::collections::BTreeMap::new();
    for entry in &args.control_plane {
        match entry.split_once('=') {
            Some((name, dir)) => {
                if name != HOST && !args.clusters.iter().any(|c| c == name) {
                    return Err(format!("--control-plane {entry}: {name:?} is neither {HOST:?} nor one of --clusters"));
                }
                if named.insert(name.to_string(), dir.to_string()).is_some() {
                    return Err(format!("--control-plane {entry}: {name:?} is given twice"));
                }
            }
            None if default.is_some() => {
                return Err(format!("--control-plane {entry}: only one DIR may be given without NAME="));
            }
            None => default = Some(entry.clone()),
        }
    }
    std::iter::once(HOST.to_string())
        .chain(args.clusters.iter().cloned())
        .map(|name| {
            let dir = named.get(&name).or(default.as_ref()).ok_or_else(|| {
                format!("--control-plane: no DIR for cluster {name:?} (give a bare DIR, or {name}=DIR)")
            })?;
            let binaries =
                spanset_control_plane::Binaries::at(dir).map_err(|e| format!("--control-plane {dir}: {e}"))?;
            Ok((name, binaries))
        })
        .collect()
}

/// Runs the sandbox until a signal; returns the exit code.
pub fn run(args: SandboxArgs) -> i32 {
    if let Err(e) = check(&args) {
        super::usage_error(&e);
    }
    actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
    })
    .block_on(async move {
        match sandbox(args).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("spanset: {e:#}");
                1
            }
        }
    })
}

async fn sandbox(args: SandboxArgs) -> anyhow::Result<()> {
    if !args.control_plane.is_empty() {
        return real_sandbox(args).await;
    }
    let names: Vec<String> = std::iter::once(HOST.to_string()).chain(args.clusters.iter().cloned()).collect();
    let configs = names
        .iter()
        .map(|n| ClusterConfig {
            time_factor: args.time_factor,
            auth: !args.no_auth,
            kruise: n != HOST && spanset_sim::cli::serve::named_in(&args.kruise, n),
            mcs: n != HOST && spanset_sim::cli::serve::named_in(&args.mcs, n),
            run_images: run_images(&args),
            real_back_off: args.real_back_off,
            release: spanset_sim::cli::serve::release_of(&args.cluster_version, n),
            ..ClusterConfig::named(n)
        })
        .collect();
    let fleet = Fleet::start(configs, None).await?;
    // Every listener is bound before the kubeconfig is written: a taken port fails the start
    // with nothing written (and an earlier sandbox's kubeconfig left as it was).
    let metrics = std::net::TcpListener::bind(args.metrics_addr)
        .map_err(|e| anyhow::anyhow!("--metrics-addr {}: {e}", args.metrics_addr))?;
    kubeconfig::write(&args.kubeconfig, &fleet.access())
        .map_err(|e| anyhow::anyhow!("--kubeconfig {}: {e}", args.kubeconfig.display()))?;
    fleet
        .write_admin_url(&args.kubeconfig)
        .map_err(|e| anyhow::anyhow!("--kubeconfig {}.admin: {e}", args.kubeconfig.display()))?;
    let mut lines: Vec<String> =
        fleet.endpoints().into_iter().map(|(name, url)| format!("cluster {name}: {url}")).collect();
    lines.push(format!("admin: {}", fleet.admin_url()));
    lines.extend(fleet.dns_endpoints().into_iter().map(|(name, addr)| format!("dns {name}: {addr}")));
    serve(&args, metrics, &lines).await?;
    drop(fleet);
    Ok(())
}

/// The sandbox on real control planes: each cluster started from its `--control-plane`
/// programs in `<kubeconfig>.clusters/NAME/`, then the product installed and run on them as on
/// simulated ones.
async fn real_sandbox(args: SandboxArgs) -> anyhow::Result<()> {
    let planes = control_planes(&args).map_err(anyhow::Error::msg)?;
    let dir = args.kubeconfig.with_extension("clusters");
    let marker = dir.join(".spanset-sandbox");
    if dir.exists() {
        // Only a directory an earlier sandbox made is wiped: the path is derived from a flag.
        anyhow::ensure!(
            marker.exists(),
            "{} exists and is not a sandbox's (no {}): move it away or pick another --kubeconfig",
            dir.display(),
            marker.display()
        );
        std::fs::remove_dir_all(&dir).map_err(|e| anyhow::anyhow!("removing {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
    std::fs::write(&marker, "made by spanset sandbox --control-plane; removed by the next one\n")?;
    let metrics = std::net::TcpListener::bind(args.metrics_addr)
        .map_err(|e| anyhow::anyhow!("--metrics-addr {}: {e}", args.metrics_addr))?;
    let refs: Vec<(&str, &spanset_control_plane::Binaries)> = planes.iter().map(|(n, b)| (n.as_str(), b)).collect();
    let mut fleet = spanset_control_plane::RealFleet::start(&refs, &dir).await?;
    std::fs::copy(fleet.kubeconfig(), &args.kubeconfig)
        .map_err(|e| anyhow::anyhow!("--kubeconfig {}: {e}", args.kubeconfig.display()))?;
    let mut lines: Vec<String> = fleet
        .clusters()
        .iter()
        .zip(&planes)
        .map(|(c, (_, b))| format!("cluster {}: {} ({})", c.name(), c.server(), b.dir().display()))
        .collect();
    lines.push(format!("clusters: {} (each one's logs, etcd data; volumes/)", dir.display()));
    let served = serve(&args, metrics, &lines).await;
    fleet.stop();
    served
}

/// What every sandbox does once its clusters answer and the kubeconfig is written: installs
/// the CRDs, the shipped identities (or, under `--no-auth`, bare MemberClusters) and the
/// example, runs the controller, prints `lines`, the metrics address and `ready`, and shows
/// the live table until a signal.
async fn serve(args: &SandboxArgs, metrics: std::net::TcpListener, lines: &[String]) -> anyhow::Result<()> {
    let host = app::host_client(Some(&args.kubeconfig), Some(HOST)).await?;
    install_crds(&host).await?;
    // The controller runs as the shipped identities; under --no-auth as the administrator.
    let (controller_kubeconfig, lease_namespace) = if !args.no_auth {
        (secure(&host, &args.kubeconfig, &args.clusters).await?, super::join::SYSTEM_NAMESPACE)
    } else {
        join_members(&host, &args.clusters).await?;
        (args.kubeconfig.clone(), "default")
    };
    if !args.no_example {
        let api: Api<FederatedStatefulSet> = Api::namespaced(host.clone(), "default");
        let mut fsts = match args.example.manifest() {
            Some(yaml) => serde_yaml::from_str(yaml)?,
            None => example(&args.clusters),
        };
        if args.kruise.is_some() {
            fsts.spec.backend = spanset_api::Backend::AdvancedStatefulSet;
        }
        match api.create(&PostParams::default(), &fsts).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let opts = RunOptions {
        kubeconfig: Some(controller_kubeconfig.clone()),
        context: Some(HOST.into()),
        metrics_addr: args.metrics_addr,
        lease: Some(LeaseSettings::new(lease_namespace, LEASE_NAME, super::run::default_identity())),
        bounds: Default::default(),
        shards: 1,
    };
    let running = if args.no_controller { None } else { Some(app::start_on(opts, metrics).await?) };
    {
        let mut out = std::io::stdout().lock();
        for line in lines {
            writeln!(out, "{line}")?;
        }
        if let Some(running) = &running {
            writeln!(out, "metrics: http://{}/metrics", running.metrics_addr)?;
        }
        let path = std::fs::canonicalize(&args.kubeconfig).unwrap_or(args.kubeconfig.clone());
        writeln!(out, "kubeconfig: {}", path.display())?;
        if !args.no_auth {
            writeln!(out, "controller kubeconfig: {}", controller_kubeconfig.display())?;
        }
        writeln!(out, "ready")?;
        out.flush()?;
    }
    let table = live_table(host.clone());
    tokio::select! {
        _ = super::wait_for_signal() => {}
        _ = table => {}
    }
    tracing::info!("signal received, stopping");
    if let Some(running) = running {
        running.stop().await;
    }
    Ok(())
}

/// Prints the federations' slices and moves every second: in place on a terminal, and only
/// when they change otherwise (so that a log stays readable).
async fn live_table(host: Client) {
    use std::io::IsTerminal;
    let tty = std::io::stdout().is_terminal();
    let mut last = String::new();
    let mut last_lines = 0;
    loop {
        if let Ok((good, bad)) = spanset_api::decode::all_federations(&host).await {
            let text = render_table(&good, &bad);
            if text != last {
                let mut out = std::io::stdout().lock();
                if tty && last_lines > 0 {
                    let _ = write!(out, "\x1b[{last_lines}A\x1b[J");
                }
                let _ = write!(out, "{text}");
                let _ = out.flush();
                last_lines = text.lines().count();
                last = text;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The live table: one line per federation and slice, then the moves; a federation that cannot
/// be decoded gets one line saying why.
pub fn render_table(items: &[FederatedStatefulSet], undecodable: &[Undecodable]) -> String {
    let mut out = format!("{:<24} {:<12} {:<10} {:<8} {}\n", "FEDERATION", "CLUSTER", "ORDINALS", "READY", "MOVES");
    for u in undecodable {
        let name = u.key();
        out.push_str(&format!("{name:<24} {:<12} {:<10} {:<8} cannot be decoded: {u}\n", "-", "-", "-"));
    }
    for f in items {
        let name = format!("{}/{}", f.namespace().unwrap_or_default(), f.name_any());
        let status = f.status.clone().unwrap_or_default();
        if status.slices.is_empty() {
            out.push_str(&format!("{name:<24} {:<12} {:<10} {:<8} -\n", "-", "-", status.ready.unwrap_or_default()));
        }
        for s in &status.slices {
            let reserved = s.reserved_ordinals.iter().map(|k| i64::from(*k));
            let ordinals = spanset_plan::stored_slice_text(s.start.into(), s.replicas.into(), reserved);
            let moves: Vec<String> = status
                .moves
                .iter()
                .filter(|m| m.from == s.cluster || m.to == s.cluster)
                .map(|m| format!("{} {}→{} {}", m.ordinal, m.from, m.to, m.phase))
                .collect();
            let moves = if moves.is_empty() { "-".to_string() } else { moves.join(", ") };
            out.push_str(&format!(
                "{name:<24} {:<12} {ordinals:<10} {:<8} {moves}\n",
                s.cluster,
                format!("{}/{}", s.ready_replicas, s.replicas)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_the_ordinals_a_slice_selects_reservations_skipped() {
        let mut f = example(&["east".to_string(), "west".to_string()]);
        f.status = Some(serde_json::from_value(serde_json::json!({
            "ready": "6/6",
            "slices": [
                {"cluster": "east", "start": 0, "replicas": 3, "reservedOrdinals": [2, 3], "readyReplicas": 3},
                {"cluster": "west", "start": 2, "replicas": 3, "reservedOrdinals": [4], "readyReplicas": 3}
            ],
            "moves": [{"ordinal": 5, "from": "central", "to": "west", "phase": "Starting", "since": "2026-01-01T00:00:00Z"}]
        }))
        .unwrap());
        let table = render_table(&[f], &[]);
        let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[1][..4], ["default/redis", "east", "0-1,4", "3/3"], "{table}");
        assert_eq!(rows[2][..4], ["default/redis", "west", "2-3,5", "3/3"], "{table}");
    }

    #[test]
    fn a_federation_that_cannot_be_decoded_gets_a_line_saying_why() {
        let mut v = serde_json::to_value(example(&["east".to_string()])).unwrap();
        v["metadata"]["namespace"] = serde_json::json!("default");
        v["metadata"]["name"] = serde_json::json!("broken");
        v["spec"]["backend"] = serde_json::json!("Deployment");
        let bad = *spanset_api::decode::federation(&serde_json::from_value(v).unwrap()).unwrap_err();
        let table = render_table(&[example(&["east".to_string()])], &[bad]);
        let line = table.lines().find(|l| l.starts_with("default/broken")).expect(&table);
        assert!(line.contains("cannot be decoded: spec.backend: unknown variant `Deployment`"), "{table}");
        assert!(table.lines().any(|l| l.contains("redis")), "{table}");
    }
}
