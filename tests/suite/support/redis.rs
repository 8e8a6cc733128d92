//! Real Redis in the sandbox, as the Redis tests see it: `redis-cli`, the federation's Ready
//! nodes, `redis-cli --cluster check`, a client that writes and reads keys throughout and keeps
//! its history, and what each node says when a step is stuck.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt, api::ListParams};
use parking_lot::Mutex;

use super::federation::Federation;

/// `redis-cli ARGS` (no cluster redirects unless asked), stdout and whether it exited 0; a
/// call that hangs counts as failed after a few seconds.
pub async fn redis_cli(args: &[&str]) -> (String, bool) {
    let mut cmd = tokio::process::Command::new("redis-cli");
    cmd.args(args).kill_on_drop(true).stdin(std::process::Stdio::null());
    match tokio::time::timeout(Duration::from_secs(5), cmd.output()).await {
        Ok(Ok(out)) => (String::from_utf8_lossy(&out.stdout).trim().to_string(), out.status.success()),
        _ => (String::new(), false),
    }
}

/// `redis-cli ARGS` reading its commands from `input`: its stdout (empty when it hangs).
pub async fn redis_cli_stdin(args: &[&str], input: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let mut cmd = tokio::process::Command::new("redis-cli");
    cmd.args(args)
        .kill_on_drop(true)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let Ok(mut child) = cmd.spawn() else { return String::new() };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes()).await;
    }
    match tokio::time::timeout(Duration::from_secs(8), child.wait_with_output()).await {
        Ok(Ok(out)) => String::from_utf8_lossy(&out.stdout).to_string(),
        _ => String::new(),
    }
}

/// Ordinal → pod IP of the federation's Ready pods in one member.
pub async fn ready_ips(f: &Federation, member: &str) -> BTreeMap<u32, String> {
    let pods: Api<Pod> = Api::namespaced(f.member(member).await, "default");
    let list = pods.list(&ListParams::default().labels("app=redis-cluster")).await.map(|l| l.items).unwrap_or_default();
    list.into_iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                && p.metadata.deletion_timestamp.is_none()
        })
        .filter_map(|p| {
            let ordinal = p.name_any().rsplit('-').next()?.parse().ok()?;
            Some((ordinal, p.status?.pod_ip?))
        })
        .collect()
}

/// Every Ready node's IP, in all of `members` together.
pub async fn all_ips(f: &Federation, members: &[&str]) -> BTreeMap<u32, String> {
    let mut ips = BTreeMap::new();
    for m in members {
        ips.extend(ready_ips(f, m).await);
    }
    ips
}

/// Waits until `redis-cli --cluster check` through `ip` passes and shows three primaries with a
/// replica each; answers its output.
pub async fn cluster_check_passes(ip: &str) -> String {
    let start = Instant::now();
    loop {
        let (out, ok) = redis_cli(&["--cluster", "check", &format!("{ip}:6379")]).await;
        let pairs = out.lines().filter(|l| l.contains(" slots | 1 slaves.")).count();
        if ok && pairs == 3 && out.contains("[OK] All 16384 slots covered.") && !out.contains("[ERR]") {
            return out;
        }
        assert!(start.elapsed() < super::DEADLINE, "redis-cli --cluster check through {ip} never passed:\n{out}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the client did: each write's key and whether it was acknowledged, and reads that
/// returned something other than the value written.
#[derive(Default)]
pub struct History {
    /// Keys whose write was acknowledged.
    pub acked: Vec<u64>,
    /// Writes refused or lost in flight.
    pub failed: u64,
    /// Reads that returned another value or nothing.
    pub wrong_reads: Vec<String>,
    /// Reads answered.
    pub reads: u64,
    /// Reads refused.
    pub failed_reads: u64,
}

/// Writes `key:i = value-i` for i = 0, 1, … through any known node (following cluster
/// redirects), and reads back an earlier acknowledged key after each write, until `stop`.
///
/// With `replicas` above 0 a write counts as acknowledged only once `WAIT` says that many
/// replicas have it: Redis replicates asynchronously, so a primary lost at once (its machine
/// powered off) may take writes it alone acknowledged with it, which Redis does not promise to
/// keep.
pub async fn client(
    seeds: Arc<Mutex<Vec<String>>>,
    history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
    replicas: u32,
) {
    let mut i: u64 = 0;
    while !stop.load(Ordering::SeqCst) {
        let seed = {
            let seeds = seeds.lock();
            if seeds.is_empty() { None } else { Some(seeds[(i as usize) % seeds.len()].clone()) }
        };
        let Some(seed) = seed else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let acked = if replicas == 0 {
            let (out, _) = redis_cli(&["-c", "-h", &seed, "set", &format!("key:{i}"), &format!("value-{i}")]).await;
            out == "OK"
        } else {
            // One connection: after a redirect, WAIT goes to the primary that took the write.
            let script = format!("SET key:{i} value-{i}\nWAIT {replicas} 2000\n");
            let out = redis_cli_stdin(&["-c", "-h", &seed], &script).await;
            let mut lines = out.lines().map(str::trim);
            lines.next() == Some("OK")
                && lines.next().and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n >= replicas)
        };
        let earlier = {
            let mut h = history.lock();
            if acked {
                h.acked.push(i);
            } else {
                h.failed += 1;
            }
            h.acked.get(h.acked.len() / 2).copied()
        };
        if let Some(k) = earlier {
            let (got, ok) = redis_cli(&["-c", "-h", &seed, "get", &format!("key:{k}")]).await;
            let mut h = history.lock();
            // An answer is the value, another value, or nil (printed as nothing): the last two
            // lose an acknowledged write. Anything else is an error (the cluster refusing while
            // a node moves), which is a failed read, not a wrong one.
            if is_answer(&got, ok) {
                h.reads += 1;
                if got != format!("value-{k}") {
                    h.wrong_reads.push(format!("key:{k} read {got:?}"));
                }
            } else {
                h.failed_reads += 1;
            }
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether `redis-cli get` answered (`ok`, printing `got`): a value, or nil (printed as
/// nothing). Anything else is an error reply or no reply at all (the cluster refusing while a
/// node moves, a redirect to a node still joining), which says nothing of the data.
fn is_answer(got: &str, ok: bool) -> bool {
    ok && (got.is_empty() || got.starts_with("value-"))
}

/// Prints what each node says of the cluster and its last log lines: why a step is stuck.
pub async fn diagnose(kubeconfig: &std::path::Path, members: &[&str]) {
    for member in members {
        let client = super::federation::client_for(kubeconfig, member).await;
        let pods: Api<Pod> = Api::namespaced(client, "default");
        for p in pods.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
            let ip = p.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap_or_default();
            let (nodes, _) = redis_cli(&["-h", &ip, "cluster", "nodes"]).await;
            let log = pods.logs(&p.name_any(), &Default::default()).await.unwrap_or_default();
            let tail: Vec<&str> = log.lines().filter(|l| !l.contains("WARNING")).collect();
            let tail = tail[tail.len().saturating_sub(25)..].join("\n");
            eprintln!("==== {member}/{} {ip}\n{nodes}\n---- log\n{tail}", p.name_any());
        }
    }
}

/// Whether `redis-server` and `redis-cli` are here (else the test is skipped, or fails under CI).
pub fn programs() -> bool {
    super::program("redis-server", "redis-server").is_some() && super::program("redis-cli", "redis-tools").is_some()
}

/// Waits until six nodes of the federation are Ready in `members`; answers ordinal → IP.
pub async fn six_ready(f: &Federation, members: &[&str], what: &str) -> BTreeMap<u32, String> {
    super::until(what, || async {
        let ips = all_ips(f, members).await;
        (ips.len() == 6).then_some(ips)
    })
    .await
}

impl History {
    /// No read returned another value, and every acknowledged write reads back through `seed`.
    pub async fn assert_every_acknowledged_write_reads_back(&self, seed: &str) {
        assert!(self.wrong_reads.is_empty(), "reads returned other values: {:?}", self.wrong_reads);
        for k in &self.acked {
            // As in the client: nil (nothing) or another value loses the write; an error (a
            // redirect to a node still joining, a refused connection) is asked again.
            let start = Instant::now();
            let v = loop {
                let (v, ok) = redis_cli(&["-c", "-h", seed, "get", &format!("key:{k}")]).await;
                if is_answer(&v, ok) {
                    break v;
                }
                assert!(start.elapsed() < super::DEADLINE, "key:{k} never read back through {seed}: {v:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            };
            assert_eq!(v, format!("value-{k}"), "acknowledged key:{k} reads back");
        }
    }
}
