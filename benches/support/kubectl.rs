//! kubectl driven as a script drives it: the benchmarks that replay the start-ordinal blog's
//! procedure by hand run the real binary against the sandbox, so its cost is the script's.

use std::{
    path::PathBuf,
    process::Stdio,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::DEADLINE;

/// `kubectl.1.33` beside the `kubectl` on PATH (what the tests use), else that `kubectl`.
pub fn kubectl_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let on_path = std::env::split_paths(&path).map(|d| d.join("kubectl")).find(|p| p.is_file())?;
    let pinned = std::fs::canonicalize(&on_path).ok().and_then(|p| p.parent().map(|d| d.join("kubectl.1.33")));
    Some(pinned.filter(|p| p.is_file()).unwrap_or(on_path))
}

/// kubectl for one context of a kubeconfig, counting its calls.
pub struct Kubectl {
    /// The binary.
    pub bin: PathBuf,
    /// The sandbox's kubeconfig.
    pub kubeconfig: PathBuf,
    /// kubectl's discovery cache, shared by the script's calls as on a workstation.
    pub cache: PathBuf,
    /// The context every call uses.
    pub context: String,
    /// Calls so far.
    pub calls: AtomicU64,
}

impl Kubectl {
    /// kubectl for `context` of `kubeconfig`, its cache in `cache`.
    pub fn new(bin: &std::path::Path, kubeconfig: &std::path::Path, cache: PathBuf, context: &str) -> Self {
        Self {
            bin: bin.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
            cache,
            context: context.into(),
            calls: Default::default(),
        }
    }

    /// Calls so far.
    pub fn count(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Runs kubectl with these arguments (and `stdin`), whatever its exit.
    pub async fn run(&self, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).arg("--cache-dir").arg(&self.cache);
        cmd.args(["--request-timeout=30s", "--context", &self.context]).args(args);
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let mut child = cmd.spawn().expect("kubectl runs");
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("piped stdin");
            pipe.write_all(input.as_bytes()).await.expect("stdin written");
        }
        child.wait_with_output().await.expect("kubectl finishes")
    }

    /// Runs kubectl and answers its stdout; panics naming the call if it failed.
    pub async fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, None).await
    }

    /// [`Kubectl::ok`] with `stdin`.
    pub async fn ok_with(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl … -o json`, parsed.
    pub async fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&self.ok(&a).await).expect("kubectl -o json")
    }

    /// Whether the pod is Running and Ready.
    pub async fn pod_ready(&self, pod: &str) -> bool {
        let jp = "jsonpath={.status.phase} {.status.conditions[?(@.type==\"Ready\")].status}";
        let out = self.run(&["get", "pod", pod, "-o", jp], None).await;
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "Running True"
    }

    /// Whether the pod is gone.
    pub async fn pod_gone(&self, pod: &str) -> bool {
        let out = self.run(&["get", "pod", pod, "-o", "name", "--ignore-not-found"], None).await;
        out.status.success() && out.stdout.is_empty()
    }

    /// Polls `what` with kubectl until it holds (a script's loop: no pause beyond kubectl's own
    /// time, which is tens of milliseconds).
    pub async fn until(&self, what: &str, pod: &str, ready: bool) {
        let start = Instant::now();
        loop {
            let ok = if ready { self.pod_ready(pod).await } else { self.pod_gone(pod).await };
            if ok {
                return;
            }
            assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Removes what the blog removes before re-creating an object in another cluster.
pub fn strip(mut obj: Value) -> Value {
    let meta = obj["metadata"].as_object_mut().expect("metadata");
    for k in ["uid", "resourceVersion", "creationTimestamp", "managedFields", "annotations"] {
        meta.remove(k);
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(claim) = spec.get_mut("claimRef").and_then(Value::as_object_mut)
    {
        claim.remove("uid");
        claim.remove("resourceVersion");
    }
    obj.as_object_mut().expect("object").remove("status");
    obj
}

/// The start-ordinal blog's steps for one ordinal, highest first, between a StatefulSet
/// `sts` of `total` replicas in the source and its namesake in the destination (the blog's
/// procedure, shared by the benchmarks that replay it).
pub struct BlogSteps<'a> {
    /// kubectl for the source cluster.
    pub src: &'a Kubectl,
    /// kubectl for the destination cluster.
    pub dst: &'a Kubectl,
    /// The StatefulSet's name in both.
    pub sts: &'a str,
    /// Its claim template's name (the claims are `<template>-<sts>-<ordinal>`).
    pub claim_template: &'a str,
    /// Its replicas, all told.
    pub total: u32,
}

impl BlogSteps<'_> {
    fn pod(&self, k: u32) -> String {
        format!("{}-{k}", self.sts)
    }

    /// Scales the source down to `k` replicas and waits for ordinal `k`'s pod to go.
    pub async fn scale_down(&self, k: u32) {
        let down = format!(r#"{{"spec": {{"replicas": {k}}}}}"#);
        self.src.ok(&["patch", "sts", self.sts, "-p", &down]).await;
        self.src.until("the source pod to terminate", &self.pod(k), false).await;
    }

    /// Ordinal `k`'s volume `pv` set to `Retain`, then it and its claim re-created in the
    /// destination (the PV's `claimRef` naming the claim).
    pub async fn hand_over(&self, k: u32, pv: &str) {
        let retain = r#"{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}"#;
        self.src.ok(&["patch", "pv", pv, "-p", retain]).await;
        let pv = strip(self.src.json(&["get", "pv", pv]).await);
        self.dst.ok_with(&["create", "-f", "-"], Some(&pv.to_string())).await;
        let claim = format!("{}-{}", self.claim_template, self.pod(k));
        let pvc = strip(self.src.json(&["get", "pvc", &claim]).await);
        self.dst.ok_with(&["create", "-f", "-"], Some(&pvc.to_string())).await;
    }

    /// Grows the destination down to ordinal `k` (`ordinals.start`) and waits for its pod Ready.
    pub async fn grow(&self, k: u32) {
        let grow = format!(r#"{{"spec": {{"ordinals": {{"start": {k}}}, "replicas": {}}}}}"#, self.total - k);
        self.dst.ok(&["patch", "sts", self.sts, "-p", &grow]).await;
        self.dst.until("the destination pod to be ready", &self.pod(k), true).await;
    }
}
