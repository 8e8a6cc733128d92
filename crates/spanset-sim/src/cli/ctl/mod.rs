//! `spanset sim-ctl`: drives a running sandbox's admin API (the URL `spanset sim` prints):
//! lists clusters and injects or heals faults, prints the ledger and the resource
//! [`account`]. Errors are one line; exit 1.

pub mod account;

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use crate::store::account::report::AccountReport;

/// Flags of `spanset sim-ctl`.
#[derive(Debug, clap::Args)]
pub struct SimCtlArgs {
    /// The admin URL printed by `spanset sim` and `spanset sandbox` (`admin:
    /// http://sandbox:TOKEN@127.0.0.1:PORT`, also written to `KUBECONFIG.admin`): it carries the
    /// token the admin API requires.
    #[arg(long, env = "SPANSET_SIM_ADMIN")]
    pub admin: String,
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// Admin commands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List the simulated clusters, their API servers, DNS addresses and faults.
    Clusters,
    /// Cut a cluster off: connections refused, or accepted and never answered (`--hang`), or
    /// refused from outside the cluster only (`--outside-only`: its pods still reach its API).
    Partition {
        /// Cluster name.
        cluster: String,
        /// Accept connections but never answer, instead of refusing them.
        #[arg(long, conflicts_with = "outside_only")]
        hang: bool,
        /// Refuse only clients from outside the cluster: its own pods (their `kubernetes`
        /// Service) still reach its API, as when the network between a controller and a member
        /// fails but not the member's own.
        #[arg(long)]
        outside_only: bool,
    },
    /// Clear a cluster's partition, latency and error injection.
    Heal {
        /// Cluster name.
        cluster: String,
    },
    /// Wake a cluster's simulated controllers for one sweep though nothing changed (they sleep
    /// while idle; tests count sweeps to see that nothing happened).
    Resync {
        /// Cluster name.
        cluster: String,
    },
    /// Set a cluster's clock ahead of the sandbox's (negative: behind): the times its kubelets
    /// write on pods' readiness conditions, and its StatefulSet controller's reading of them.
    Clock {
        /// Cluster name.
        cluster: String,
        /// Seconds ahead (negative: behind; 0 puts it right).
        #[arg(allow_hyphen_values = true)]
        offset_seconds: f64,
    },
    /// Delay every request to a cluster.
    Latency {
        /// Cluster name.
        cluster: String,
        /// Milliseconds added to each request (0 clears).
        ms: u64,
    },
    /// Answer a fraction of a cluster's requests with an error.
    Errors {
        /// Cluster name.
        cluster: String,
        /// Fraction of requests that fail, 0 to 1 (0 clears).
        rate: f64,
        /// HTTP code of the injected errors (500, 503, 429, ...). kube-rs retries 429/503/504.
        #[arg(long, default_value_t = 500)]
        code: u16,
    },
    /// End every open watch on a cluster (clients re-watch).
    CutWatches {
        /// Cluster name.
        cluster: String,
    },
    /// Forget a cluster's watch history: watches from before now get 410 Gone and relist.
    ExpireWatches {
        /// Cluster name.
        cluster: String,
    },
    /// Take a node out: no heartbeats; after the grace period the node goes Unknown and its
    /// pods are evicted but stay Terminating until force-deleted. Without `--power-off` the node
    /// lost its network or kubelet: its containers keep running (in the ledger too) until it
    /// returns; with it, the machine powered off and its containers stopped at once.
    NodeDown {
        /// Cluster name.
        cluster: String,
        /// Node name (`node-1`, ...).
        node: String,
        /// The machine powers off (its containers stop now) rather than losing its network.
        #[arg(long)]
        power_off: bool,
    },
    /// Bring a node back: its kubelet returns (or its machine powers on and restarts the
    /// containers of the pods still bound to it and not being deleted).
    NodeUp {
        /// Cluster name.
        cluster: String,
        /// Node name.
        node: String,
    },
    /// Force a pod's readiness (`auto` returns it to the kubelet's own timing).
    PodReady {
        /// Cluster name.
        cluster: String,
        /// Pod name.
        pod: String,
        /// `true`, `false` or `auto`.
        ready: String,
        /// Pod namespace.
        #[arg(long, default_value = "default")]
        namespace: String,
    },
    /// Make an image impossible to pull in a cluster: new pods of it wait in `ErrImagePull`
    /// and `ImagePullBackOff` (images whose reference contains `doesnotexist` or
    /// `does-not-exist` are so already).
    ImageUnpullable {
        /// Cluster name.
        cluster: String,
        /// Image reference (`nginx:1.25`; `nginx` is `docker.io/library/nginx:latest`).
        image: String,
    },
    /// Make an image pullable again (or at all, for a `doesnotexist` one): its waiting pods
    /// start on their next back-off retry.
    ImagePullable {
        /// Cluster name.
        cluster: String,
        /// Image reference.
        image: String,
    },
    /// Print the identity ledger as JSON; with `--check`, exit 1 naming every identity that ran
    /// in two places at once.
    Ledger {
        /// Check the at-most-one rule instead of printing the ledger.
        #[arg(long)]
        check: bool,
    },
    /// Print the resource account: per cluster, what each actor (spanset, a simulated
    /// component, `user:<program>`) created, updated and deleted, by resource; volumes
    /// provisioned, released and left by phase; Events by reason. With `--check`, exit 1
    /// naming every `--max` budget exceeded.
    Account {
        /// `json` for the admin API's JSON instead of the table.
        #[arg(short = 'o', long = "output", value_parser = ["json", "table"], default_value = "table")]
        output: String,
        /// Check the `--max` budgets instead of printing the account.
        #[arg(long, requires = "max")]
        check: bool,
        /// A budget, `CLUSTER:ACTOR:VERB:RESOURCE=N`, `CLUSTER:volumes:provisioned|released|left:PHASE=N`
        /// or `CLUSTER:events:REASON=N` (`*` for every cluster, actor, resource or reason;
        /// verbs: create, update, status, delete, removed, writes). Repeatable.
        #[arg(long, requires = "check", value_name = "BUDGET")]
        max: Vec<String>,
    },
    /// Read (or with `--write`, set) the data marker of the volume behind a PersistentVolume.
    Volume {
        /// Cluster name.
        cluster: String,
        /// PersistentVolume name.
        pv: String,
        /// New data marker.
        #[arg(long)]
        write: Option<String>,
    },
    /// Make a cluster silently drop `.spec.ordinals` from StatefulSets (or stop doing so).
    DropOrdinals {
        /// Cluster name.
        cluster: String,
        /// `true` or `false`.
        #[arg(action = clap::ArgAction::Set)]
        on: bool,
        /// Only from Advanced StatefulSets (an OpenKruise too old for `.spec.ordinals`).
        #[arg(long)]
        kruise: bool,
    },
}

/// An admin URL split into its address and its credentials (`http://USER:TOKEN@HOST:PORT`, as
/// the sandbox prints it; `http://HOST:PORT` carries none).
fn parse_admin(admin: &str) -> Result<(&str, Option<&str>), String> {
    let rest = admin
        .strip_prefix("http://")
        .ok_or_else(|| format!("--admin must be an http:// URL, not {:?}", redacted(admin)))?
        .trim_end_matches('/');
    Ok(match rest.rsplit_once('@') {
        Some((userinfo, hostport)) => (hostport, Some(userinfo)),
        None => (rest, None),
    })
}

/// The admin URL without its credentials: what an error message may show.
pub fn redacted(admin: &str) -> String {
    match admin.split_once("://").and_then(|(scheme, rest)| rest.rsplit_once('@').map(|(_, host)| (scheme, host))) {
        Some((scheme, host)) => format!("{scheme}://{host}"),
        None => admin.to_string(),
    }
}

/// One request to the sandbox admin API, with the credentials its URL carries; the body, or the
/// error it answered.
pub fn request(admin: &str, method: &str, path_and_query: &str) -> Result<String, String> {
    use base64::Engine;
    let (hostport, userinfo) = parse_admin(admin)?;
    let mut stream = TcpStream::connect(hostport)
        .map_err(|e| format!("cannot reach the sandbox admin API at http://{hostport}: {e}"))?;
    let authorization = match userinfo {
        Some(u) => format!("Authorization: Basic {}\r\n", base64::engine::general_purpose::STANDARD.encode(u)),
        None => String::new(),
    };
    let timeout = Some(Duration::from_secs(5));
    stream.set_read_timeout(timeout).and_then(|_| stream.set_write_timeout(timeout)).map_err(|e| e.to_string())?;
    let req = format!(
        "{method} {path_and_query} HTTP/1.1\r\nHost: {hostport}\r\n{authorization}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(req.as_bytes()).map_err(|e| format!("admin request failed: {e}"))?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(|e| format!("admin response failed: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("malformed admin response")?;
    let status: u16 = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or("malformed admin response")?;
    let body =
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(body) } else { body.to_string() };
    if status >= 400 {
        let msg = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or(body);
        return Err(msg);
    }
    Ok(body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Prints the ledger's verdict: exit 0 when no identity ran twice at once, else 1 with one line
/// per violation naming the identity, the clusters and the times.
fn check_ledger(body: &str) -> i32 {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(body) else {
        eprintln!("spanset: the admin API returned a ledger that is not JSON");
        return 1;
    };
    let count = doc["incarnations"].as_array().map(Vec::len).unwrap_or(0);
    let violations: Vec<&str> =
        doc["violations"].as_array().map(|v| v.iter().filter_map(|s| s.as_str()).collect()).unwrap_or_default();
    if violations.is_empty() {
        println!("ledger ok: {count} pod incarnations, no identity ran in two places at once");
        0
    } else {
        for v in &violations {
            println!("{v}");
        }
        eprintln!("spanset: at-most-one violated {} time(s)", violations.len());
        1
    }
}

/// The admin API's method and path for one command: the one place that knows its routes
/// (`sim-ctl` and the sandbox drills send their commands through it).
pub fn route(action: &Action) -> (&'static str, String) {
    match action {
        Action::Clusters => ("GET", "/clusters".to_string()),
        Action::Partition { cluster, hang, outside_only } => {
            let mode = match (*hang, *outside_only) {
                (true, _) => "hang",
                (false, true) => "outside",
                (false, false) => "refuse",
            };
            ("POST", format!("/clusters/{cluster}/partition?mode={mode}"))
        }
        Action::Heal { cluster } => ("POST", format!("/clusters/{cluster}/heal")),
        Action::Resync { cluster } => ("POST", format!("/clusters/{cluster}/resync")),
        Action::Latency { cluster, ms } => ("POST", format!("/clusters/{cluster}/latency?ms={ms}")),
        Action::Clock { cluster, offset_seconds } => {
            ("POST", format!("/clusters/{cluster}/clock?offset-seconds={offset_seconds}"))
        }
        Action::Errors { cluster, rate, code } => {
            ("POST", format!("/clusters/{cluster}/errors?rate={rate}&code={code}"))
        }
        Action::CutWatches { cluster } => ("POST", format!("/clusters/{cluster}/cut-watches")),
        Action::ExpireWatches { cluster } => ("POST", format!("/clusters/{cluster}/expire-watches")),
        Action::DropOrdinals { cluster, on, kruise } => {
            let api = if *kruise { "kruise" } else { "apps" };
            ("POST", format!("/clusters/{cluster}/drop-ordinals?on={on}&api={api}"))
        }
        Action::NodeDown { cluster, node, power_off } => {
            ("POST", format!("/clusters/{cluster}/node-down?node={}&power-off={power_off}", enc(node)))
        }
        Action::NodeUp { cluster, node } => ("POST", format!("/clusters/{cluster}/node-up?node={}", enc(node))),
        Action::PodReady { cluster, pod, ready, namespace } => (
            "POST",
            format!("/clusters/{cluster}/pod-ready?pod={}&ready={}&namespace={}", enc(pod), enc(ready), enc(namespace)),
        ),
        Action::ImageUnpullable { cluster, image } => {
            ("POST", format!("/clusters/{cluster}/image-unpullable?image={}", enc(image)))
        }
        Action::ImagePullable { cluster, image } => {
            ("POST", format!("/clusters/{cluster}/image-pullable?image={}", enc(image)))
        }
        Action::Ledger { .. } => ("GET", "/ledger".to_string()),
        Action::Account { .. } => ("GET", "/account".to_string()),
        Action::Volume { cluster, pv, write: None } => ("GET", format!("/clusters/{cluster}/volumes/{}", enc(pv))),
        Action::Volume { cluster, pv, write: Some(data) } => {
            ("POST", format!("/clusters/{cluster}/volumes/{}?data={}", enc(pv), enc(data)))
        }
    }
}

/// Prints the account (table or JSON), or checks its budgets: exit 1 naming each one exceeded,
/// 2 for a budget that does not parse.
fn run_account(admin: &str, output: &str, check: bool, max: &[String]) -> i32 {
    let budgets = match max.iter().map(|b| account::Budget::parse(b)).collect::<Result<Vec<_>, _>>() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("spanset: {e}");
            return 2;
        }
    };
    let body = match request(admin, "GET", "/account") {
        Ok(body) => body,
        Err(e) => {
            eprintln!("spanset: {}", e.lines().next().unwrap_or("admin request failed"));
            return 1;
        }
    };
    let report: AccountReport = match serde_json::from_str(&body) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("spanset: the admin API returned an account that cannot be read: {e}");
            return 1;
        }
    };
    if !check {
        match output {
            "json" => println!("{}", body.trim()),
            _ => print!("{}", account::table(&report)),
        }
        return 0;
    }
    let exceeded = account::check(&report, &budgets);
    if exceeded.is_empty() {
        println!("account ok: {} budget(s) held", budgets.len());
        return 0;
    }
    for line in &exceeded {
        println!("{line}");
    }
    eprintln!("spanset: {} budget(s) exceeded", exceeded.len());
    1
}

/// Runs one admin command; returns the exit code.
pub fn run(args: SimCtlArgs) -> i32 {
    if let Action::Account { output, check, max } = &args.action {
        return run_account(&args.admin, output, *check, max);
    }
    let (method, path) = route(&args.action);
    if let Action::Ledger { check: true } = args.action {
        return match request(&args.admin, method, &path) {
            Ok(body) => check_ledger(&body),
            Err(e) => {
                eprintln!("spanset: {}", e.lines().next().unwrap_or("admin request failed"));
                1
            }
        };
    }
    match request(&args.admin, method, &path) {
        Ok(body) => {
            println!("{}", body.trim());
            0
        }
        Err(e) => {
            eprintln!("spanset: {}", e.lines().next().unwrap_or("admin request failed"));
            1
        }
    }
}
