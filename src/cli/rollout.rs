//! `spanset rollout status NS/NAME` (or `NAME` with `-n NS`): waits for a federation's rollout
//! and reports it the way `kubectl rollout status` reports a StatefulSet's, from the
//! federation-wide status the controller writes (`observedGeneration`, `readyReplicas`,
//! `updatedReplicas`, `currentRevision`, `updateRevision`) and its `Updating` condition.
//!
//! The lines are kubectl's, saying "federation" where "statefulset" would mislead; spanset adds
//! the `Updating` condition's message (the pod waited on, its cluster and its state) under a
//! line while the rollout waits. Differences from kubectl, each because the federation can say
//! more than a StatefulSet:
//! - "complete" also needs the `Updating` condition not True (kubectl counts updated pods,
//!   which may not be Ready yet);
//! - the partitioned lines are used only for a partition above `spec.ordinals.start` (kubectl
//!   uses them whenever `rollingUpdate` is set, which the apiserver always defaults);
//! - a rollout the controller reports stuck (`Updating` reason `RolloutStuck`: an updated pod
//!   that cannot become Ready by itself) ends the wait with exit 1 and the condition's message,
//!   once the next read (a second later) says the same: a condition seen once may be a moment's.
//!
//! Exit codes: 0 complete (or, with `--watch=false`, the state printed); 1 stuck, timed out
//! (`--timeout`), not found, `updateStrategy: OnDelete` (as kubectl: "rollout status is only
//! available for RollingUpdate strategy type") or the cluster could not be read; 2 bad flags.
//! It polls the object once a second; it never writes.

use std::{path::PathBuf, time::Duration};

use kube::{Api, api::DynamicObject, discovery::ApiResource};
use serde_json::Value;
use spanset_api::FederatedStatefulSet;
use spanset_controller::runtime::host_client;

/// How often the object is read while waiting.
const POLL: Duration = Duration::from_secs(1);

/// Flags of `spanset rollout`.
#[derive(Debug, clap::Args)]
pub struct RolloutArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: RolloutCommand,
}

/// The subcommands of `spanset rollout`.
#[derive(Debug, clap::Subcommand)]
pub enum RolloutCommand {
    /// Wait for a federation's rolling update and report it, like `kubectl rollout status`.
    Status(StatusArgs),
}

/// Flags of `spanset rollout status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The FederatedStatefulSet, as NAMESPACE/NAME or NAME.
    #[arg(value_name = "NS/NAME")]
    pub target: String,
    /// Namespace of a NAME given without one (default: the context's namespace).
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Wait until the rollout is complete (`--watch=false`: print its state once and exit 0).
    #[arg(short = 'w', long, value_name = "BOOL", default_value_t = true, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub watch: bool,
    /// Give up after this long (`30s`, `5m`, `1h`; `0`, the default, waits forever).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// Kubeconfig of the host cluster (default: $KUBECONFIG, then ~/.kube/config, then
    /// in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig (default: its current context).
    #[arg(long, value_name = "CTX")]
    pub context: Option<String>,
}

/// `30s`, `5m`, `1h30m`, `250ms`, or a bare number of seconds (`0`: no timeout).
fn parse_timeout(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let d: jiff::SignedDuration =
        text.parse().map_err(|_| format!("invalid --timeout {text:?}: expected a duration such as 30s, 5m or 1h"))?;
    Duration::try_from(d).map_err(|_| format!("invalid --timeout {text:?}: must not be negative"))
}

/// Runs `spanset rollout …`; returns the exit code.
pub async fn run(args: RolloutArgs) -> i32 {
    match args.command {
        RolloutCommand::Status(args) => status(args).await,
    }
}

/// Where the rollout stands, as one read of the object says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Still rolling: kubectl's waiting line and, when the controller names it, what the
    /// rollout waits on.
    Waiting {
        /// kubectl's line.
        line: String,
        /// The `Updating` condition's message.
        detail: Option<String>,
    },
    /// Complete: kubectl's line.
    Done(String),
    /// The controller says the rollout cannot go on by itself: the condition's message.
    Stuck(String),
}

/// Judges one read of a FederatedStatefulSet (its JSON), as kubectl's StatefulSet status
/// viewer judges a StatefulSet; `Err` for a federation whose rollout status means nothing
/// (`updateStrategy: OnDelete`).
pub fn judge(object: &Value) -> Result<Verdict, String> {
    let int = |path: &str| object.pointer(path).and_then(Value::as_i64);
    let text = |path: &str| object.pointer(path).and_then(Value::as_str);
    let strategy = text("/spec/template/updateStrategy/type").unwrap_or("RollingUpdate");
    if strategy != "RollingUpdate" {
        return Err("rollout status is only available for RollingUpdate strategy type".into());
    }
    let generation = int("/metadata/generation").unwrap_or(0);
    let observed = int("/status/observedGeneration").unwrap_or(0);
    if observed == 0 || generation > observed {
        return Ok(waiting("Waiting for federation spec update to be observed...".into(), None));
    }
    let updating = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Updating");
    let updating_true = updating.is_some_and(|c| c["status"] == "True");
    let reason = updating.and_then(|c| c["reason"].as_str()).unwrap_or("");
    let message = updating.and_then(|c| c["message"].as_str()).filter(|m| !m.is_empty()).map(str::to_string);
    if updating_true && reason == "RolloutStuck" {
        return Ok(Verdict::Stuck(message.unwrap_or_else(|| "the controller reports the rollout stuck".into())));
    }
    let detail = if updating_true { message } else { None };
    let replicas = int("/spec/replicas").unwrap_or(0);
    let ready = int("/status/readyReplicas").unwrap_or(0);
    if ready < replicas {
        return Ok(waiting(format!("Waiting for {} pods to be ready...", replicas - ready), detail));
    }
    let updated = int("/status/updatedReplicas").unwrap_or(0);
    let start = int("/spec/ordinals/start").unwrap_or(0);
    let partition = int("/spec/template/updateStrategy/rollingUpdate/partition")
        .map(|p| p.clamp(start, start + replicas))
        .filter(|p| *p > start);
    if let Some(p) = partition {
        let new_pods = replicas - (p - start);
        if updated < new_pods || updating_true {
            let line = format!(
                "Waiting for partitioned roll out to finish: {updated} out of {new_pods} new pods have been updated..."
            );
            return Ok(waiting(line, detail));
        }
        return Ok(Verdict::Done(format!("partitioned roll out complete: {updated} new pods have been updated...")));
    }
    let update_revision = text("/status/updateRevision").unwrap_or("");
    let current_revision = text("/status/currentRevision").unwrap_or("");
    if update_revision != current_revision || updating_true {
        let line = format!(
            "waiting for federation rolling update to complete {updated} pods at revision {update_revision}..."
        );
        return Ok(waiting(line, detail));
    }
    let current = int("/status/currentReplicas").unwrap_or(0);
    Ok(Verdict::Done(format!("federation rolling update complete {current} pods at revision {current_revision}...")))
}

fn waiting(line: String, detail: Option<String>) -> Verdict {
    Verdict::Waiting { line, detail }
}

/// The watch loop's memory: what it printed last, and whether the last read said stuck.
#[derive(Debug, Default)]
struct Follower {
    watch: bool,
    shown: Option<Verdict>,
    stuck_before: bool,
}

/// What to do after one read.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Print these lines (none when nothing changed) and read again.
    Print(Vec<String>),
    /// Print this line; exit 0.
    Done(String),
    /// Exit 1 with this message.
    Stuck(String),
}

impl Follower {
    /// A waiting state is printed when it differs from the last one printed. While watching,
    /// a stuck verdict ends the wait only when the next read says stuck again (a second later,
    /// the state's wording may differ: ErrImagePull, ImagePullBackOff): a condition seen once
    /// may be a moment's.
    fn next(&mut self, verdict: Verdict) -> Step {
        match verdict {
            Verdict::Done(line) => Step::Done(line),
            Verdict::Stuck(message) if !self.watch || self.stuck_before => Step::Stuck(message),
            Verdict::Stuck(_) => {
                self.stuck_before = true;
                Step::Print(vec![])
            }
            Verdict::Waiting { .. } if self.shown.as_ref() == Some(&verdict) => {
                self.stuck_before = false;
                Step::Print(vec![])
            }
            Verdict::Waiting { ref line, ref detail } => {
                self.stuck_before = false;
                let lines = std::iter::once(line.clone()).chain(detail.iter().map(|d| format!("  {d}"))).collect();
                self.shown = Some(verdict);
                Step::Print(lines)
            }
        }
    }
}

/// Parses `NS/NAME`, or `NAME` with the namespace of `-n` (or `None`: the context's).
fn parse_target(target: &str, namespace: Option<&str>) -> Result<(Option<String>, String), String> {
    let (ns, name) = match target.split_once('/') {
        Some((ns, name)) => {
            if let Some(flag) = namespace.filter(|n| *n != ns) {
                return Err(format!("{target:?} names namespace {ns:?} but -n says {flag:?}"));
            }
            (Some(ns), name)
        }
        None => (namespace, target),
    };
    let valid = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    if ns.is_some_and(|ns| !valid(ns)) || !valid(name) {
        return Err(format!(
            "invalid federation {target:?}: expected NAMESPACE/NAME or NAME (lowercase letters, digits, '-' and '.')"
        ));
    }
    Ok((ns.map(str::to_string), name.to_string()))
}

async fn status(args: StatusArgs) -> i32 {
    let (namespace, name) = match parse_target(&args.target, args.namespace.as_deref()) {
        Ok(t) => t,
        Err(e) => super::usage_error(&e),
    };
    let client = match host_client::client(args.kubeconfig.as_deref(), args.context.as_deref()).await {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string()),
    };
    let ns = namespace.unwrap_or_else(|| client.default_namespace().to_string());
    let api: Api<DynamicObject> = Api::namespaced_with(client, &ns, &ApiResource::erase::<FederatedStatefulSet>(&()));
    let deadline = (!args.timeout.is_zero()).then(|| tokio::time::Instant::now() + args.timeout);
    let mut follower = Follower { watch: args.watch, ..Default::default() };
    let mut read_error_shown = false;
    loop {
        // A read that hangs counts against the timeout too.
        let answer = match deadline {
            Some(d) => match tokio::time::timeout_at(d, read(&api, &ns, &name)).await {
                Ok(answer) => answer,
                Err(_) => return timed_out(&args, &ns, &name, &follower),
            },
            None => read(&api, &ns, &name).await,
        };
        match answer {
            Ok(object) => {
                read_error_shown = false;
                let verdict = match judge(&object) {
                    Ok(v) => v,
                    Err(e) => return fail(&e),
                };
                match follower.next(verdict) {
                    Step::Print(lines) => lines.iter().for_each(|l| println!("{l}")),
                    Step::Done(line) => {
                        println!("{line}");
                        return 0;
                    }
                    Step::Stuck(message) => {
                        return fail(&format!("rollout of federatedstatefulset {ns}/{name} is stuck: {message}"));
                    }
                }
                if !args.watch {
                    return 0;
                }
            }
            // Gone or never there, or refused: waiting will not help.
            Err(Read::Final(e)) => return fail(&e),
            Err(Read::Transient(e)) if !args.watch => return fail(&e),
            Err(Read::Transient(e)) => {
                if !read_error_shown {
                    eprintln!("spanset: {e} (retrying)");
                    read_error_shown = true;
                }
            }
        }
        let next = tokio::time::Instant::now() + POLL;
        if let Some(d) = deadline.filter(|d| next >= *d) {
            tokio::time::sleep_until(d).await;
            return timed_out(&args, &ns, &name, &follower);
        }
        tokio::time::sleep_until(next).await;
    }
}

fn timed_out(args: &StatusArgs, ns: &str, name: &str, follower: &Follower) -> i32 {
    let last = match &follower.shown {
        Some(Verdict::Waiting { line, .. }) => format!(" ({line})"),
        _ => String::new(),
    };
    // `1s`, `250ms`, `300s`: as precise as the flag was.
    let after = format!("{:?}", args.timeout);
    fail(&format!("timed out after {after} waiting for the rollout of federatedstatefulset {ns}/{name}{last}"))
}

/// Why a read failed: for good, or worth another try while watching.
enum Read {
    Final(String),
    Transient(String),
}

async fn read(api: &Api<DynamicObject>, ns: &str, name: &str) -> Result<Value, Read> {
    match api.get_opt(name).await {
        Ok(Some(o)) => serde_json::to_value(&o).map_err(|e| Read::Final(format!("cannot read {ns}/{name}: {e}"))),
        Ok(None) => Err(Read::Final(format!("federatedstatefulset {ns}/{name} not found"))),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(Read::Final(format!(
            "cannot read federatedstatefulset {ns}/{name}: the host cluster does not serve spanset.dev/v1alpha1 (install the CRDs: spanset crd | kubectl apply -f -)"
        ))),
        Err(kube::Error::Api(s)) if s.code == 401 || s.code == 403 => {
            Err(Read::Final(format!("cannot read federatedstatefulset {ns}/{name}: {} ({})", s.message, s.code)))
        }
        Err(e) => Err(Read::Transient(format!("cannot read federatedstatefulset {ns}/{name}: {e}"))),
    }
}

fn fail(line: &str) -> i32 {
    eprintln!("spanset: {line}");
    1
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A federation of 6 at generation 2, observed, all Ready, every pod at `rev`.
    fn fsts() -> Value {
        json!({
            "metadata": {"generation": 2},
            "spec": {"replicas": 6, "template": {}},
            "status": {
                "observedGeneration": 2, "readyReplicas": 6, "updatedReplicas": 6, "currentReplicas": 6,
                "currentRevision": "redis-a", "updateRevision": "redis-a",
                "conditions": [{"type": "Updating", "status": "False", "reason": "Updated", "message": "every pod runs revision redis-a"}]
            }
        })
    }

    fn updating(o: &mut Value, status: &str, reason: &str, message: &str) {
        o["status"]["conditions"] =
            json!([{"type": "Updating", "status": status, "reason": reason, "message": message}]);
    }

    fn line(v: Verdict) -> String {
        match v {
            Verdict::Waiting { line, .. } | Verdict::Done(line) | Verdict::Stuck(line) => line,
        }
    }

    #[test]
    fn a_complete_rollout_reports_kubectls_complete_line_with_the_revision() {
        assert_eq!(
            judge(&fsts()).unwrap(),
            Verdict::Done("federation rolling update complete 6 pods at revision redis-a...".into())
        );
    }

    #[test]
    fn an_unobserved_spec_change_is_waited_for_first() {
        let mut o = fsts();
        o["metadata"]["generation"] = json!(3);
        assert_eq!(line(judge(&o).unwrap()), "Waiting for federation spec update to be observed...");
        let mut o = fsts();
        o["status"] = json!({});
        assert_eq!(line(judge(&o).unwrap()), "Waiting for federation spec update to be observed...");
    }

    #[test]
    fn pods_not_ready_are_counted_and_the_pod_waited_on_is_named() {
        let mut o = fsts();
        o["status"]["readyReplicas"] = json!(5);
        o["status"]["updateRevision"] = json!("redis-b");
        o["status"]["updatedReplicas"] = json!(1);
        updating(
            &mut o,
            "True",
            "RollingUpdate",
            "1 pod(s) updated to revision redis-b; updating: redis-5 in west is not Ready yet",
        );
        assert_eq!(
            judge(&o).unwrap(),
            Verdict::Waiting {
                line: "Waiting for 1 pods to be ready...".into(),
                detail: Some("1 pod(s) updated to revision redis-b; updating: redis-5 in west is not Ready yet".into()),
            }
        );
        o["status"]["readyReplicas"] = json!(6);
        assert_eq!(
            line(judge(&o).unwrap()),
            "waiting for federation rolling update to complete 1 pods at revision redis-b..."
        );
    }

    #[test]
    fn counts_alone_do_not_complete_a_rollout_the_controller_still_runs() {
        // Every pod counted updated and Ready, revisions equal, but the controller still waits
        // (e.g. minReadySeconds): not complete.
        let mut o = fsts();
        updating(
            &mut o,
            "True",
            "RollingUpdate",
            "6 pod(s) updated; updating: redis-0 in east is Ready, not yet for minReadySeconds",
        );
        assert!(matches!(judge(&o).unwrap(), Verdict::Waiting { .. }));
    }

    #[test]
    fn a_global_partition_counts_the_new_pods_from_the_partition_up() {
        let mut o = fsts();
        o["spec"]["ordinals"] = json!({"start": 10});
        o["spec"]["template"]["updateStrategy"] = json!({"rollingUpdate": {"partition": 14}});
        o["status"]["updatedReplicas"] = json!(1);
        o["status"]["updateRevision"] = json!("redis-b");
        updating(&mut o, "True", "RollingUpdate", "updating: redis-14 in central runs the old template");
        assert_eq!(
            line(judge(&o).unwrap()),
            "Waiting for partitioned roll out to finish: 1 out of 2 new pods have been updated..."
        );
        o["status"]["updatedReplicas"] = json!(2);
        updating(&mut o, "False", "Updated", "");
        assert_eq!(
            judge(&o).unwrap(),
            Verdict::Done("partitioned roll out complete: 2 new pods have been updated...".into())
        );
        // A partition at or below the range's start is no partition: the revisions decide.
        o["spec"]["template"]["updateStrategy"] = json!({"rollingUpdate": {"partition": 3}});
        assert_eq!(
            line(judge(&o).unwrap()),
            "waiting for federation rolling update to complete 2 pods at revision redis-b..."
        );
    }

    #[test]
    fn a_stuck_rollout_ends_the_wait_with_the_conditions_message() {
        let mut o = fsts();
        o["status"]["readyReplicas"] = json!(5);
        let msg = "1 pod(s) updated to revision redis-b; updating: redis-5 in central is not Ready: container redis: waiting: ErrImagePull";
        updating(&mut o, "True", "RolloutStuck", msg);
        assert_eq!(judge(&o).unwrap(), Verdict::Stuck(msg.into()));
        // ... but not a stale one, from a generation the controller has not observed yet.
        o["metadata"]["generation"] = json!(3);
        assert!(matches!(judge(&o).unwrap(), Verdict::Waiting { .. }));
    }

    #[test]
    fn on_delete_has_no_rollout_status_as_with_kubectl() {
        let mut o = fsts();
        o["spec"]["template"]["updateStrategy"] = json!({"type": "OnDelete"});
        assert_eq!(judge(&o).unwrap_err(), "rollout status is only available for RollingUpdate strategy type");
    }

    #[test]
    fn surprising_status_shapes_do_not_panic() {
        for status in [json!(null), json!("x"), json!({"conditions": "no"}), json!({"readyReplicas": "6"})] {
            let mut o = fsts();
            o["status"] = status;
            assert!(judge(&o).is_ok());
        }
    }

    #[test]
    fn the_watch_prints_each_state_once_and_believes_stuck_on_the_second_read() {
        let w = |line: &str| Verdict::Waiting { line: line.into(), detail: Some("updating: redis-2 in west".into()) };
        let mut f = Follower { watch: true, ..Default::default() };
        assert_eq!(f.next(w("a")), Step::Print(vec!["a".into(), "  updating: redis-2 in west".into()]));
        assert_eq!(f.next(w("a")), Step::Print(vec![]), "unchanged: nothing printed");
        // One stuck read between waiting ones (a moment's condition) does not end the wait.
        assert_eq!(f.next(Verdict::Stuck("x".into())), Step::Print(vec![]));
        assert_eq!(f.next(w("a")), Step::Print(vec![]));
        assert_eq!(f.next(Verdict::Stuck("ErrImagePull".into())), Step::Print(vec![]));
        assert_eq!(f.next(Verdict::Stuck("ImagePullBackOff".into())), Step::Stuck("ImagePullBackOff".into()));
        // Printing once: a stuck read is final.
        let mut once = Follower::default();
        assert_eq!(once.next(Verdict::Stuck("x".into())), Step::Stuck("x".into()));
        assert_eq!(once.next(Verdict::Done("ok".into())), Step::Done("ok".into()));
    }

    #[test]
    fn targets_and_timeouts_parse_as_kubectl_takes_them() {
        assert_eq!(parse_target("db/redis", None).unwrap(), (Some("db".into()), "redis".into()));
        assert_eq!(parse_target("redis", Some("db")).unwrap(), (Some("db".into()), "redis".into()));
        assert_eq!(parse_target("redis", None).unwrap(), (None, "redis".into()));
        assert!(parse_target("db/redis", Some("other")).unwrap_err().contains("-n says"));
        assert!(parse_target("Redis", None).is_err());
        assert_eq!(parse_timeout("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_timeout("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_timeout("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_timeout("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_timeout("soon").unwrap_err().contains("--timeout"));
    }
}
