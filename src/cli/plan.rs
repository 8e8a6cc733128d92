//! `spanset plan -f FSTS.yaml [--current CURRENT.yaml] [-o table|wide|json|yaml]`: prints the target
//! slices and every step to reach them, without touching any cluster.
//!
//! CURRENT.yaml describes what the member clusters hold now (see `examples/current.yaml`):
//!
//! ```yaml
//! clusters:
//!   source: {start: 0, replicas: 6}
//!   destination: {start: 6, replicas: 0, reachable: true, fenced: false, keepsOrdinals: true}
//! ```
//!
//! Absent clusters hold nothing and are reachable.
//!
//! With `spec.placement.onScale: Keep` (the default) a change of replicas keeps every surviving
//! ordinal where CURRENT.yaml has it only if the file's `status.balancedPlacement` (as `kubectl
//! get fsts -o yaml` prints it) is the placement of its spec, as the controller decides; without
//! it the plan divides by weight, as the controller does for a federation never laid out.

use std::{collections::BTreeMap, path::PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;
use spanset_api::FederatedStatefulSet;
use spanset_plan as plan;
use spanset_plan::{ClusterObservation, Observed, Ordinals, Slice, Step};

use super::output::{self, Format};

/// Flags of `spanset plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The FederatedStatefulSet (YAML or JSON).
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// What the member clusters hold now (default: nothing anywhere).
    #[arg(long)]
    pub current: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// Most steps the table lists: beyond it, the first and last halves with the number left
    /// out between them (0 lists every step; `-o json` and `-o yaml` always have every step). A migration of
    /// n ordinals between apps/v1 slices takes 2n steps.
    #[arg(long, default_value_t = 40)]
    pub max_steps: usize,
}

/// One cluster in CURRENT.yaml.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CurrentCluster {
    /// `.spec.ordinals.start` written there.
    #[serde(default)]
    pub start: u32,
    /// `.spec.replicas` written there.
    #[serde(default)]
    pub replicas: u32,
    /// `reserveOrdinals` (Advanced StatefulSet).
    #[serde(default)]
    pub reserved_ordinals: Vec<u32>,
    /// Whether the member answers (default true).
    #[serde(default = "yes")]
    pub reachable: bool,
    /// Whether it is fenced (default false).
    #[serde(default)]
    pub fenced: bool,
    /// Whether it keeps `.spec.ordinals` (default true).
    #[serde(default = "yes")]
    pub keeps_ordinals: bool,
}

fn yes() -> bool {
    true
}

/// CURRENT.yaml.
#[derive(Debug, Clone, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Current {
    /// Clusters by name.
    #[serde(default)]
    pub clusters: BTreeMap<String, CurrentCluster>,
}

fn read<T: serde::de::DeserializeOwned>(path: &PathBuf, what: &str) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))?;
    serde_yaml::from_str(&text).map_err(|e| format!("{what} {} is not valid: {e}", path.display()))
}

fn observed(d: &plan::Desired, current: &Current) -> Observed {
    let mut obs: Observed =
        d.clusters.iter().map(|c| (c.name.clone(), ClusterObservation::settled(Slice::empty()))).collect();
    for (name, c) in &current.clusters {
        let written =
            Slice { start: c.start, replicas: c.replicas, reserved: c.reserved_ordinals.iter().copied().collect() };
        let mut o = ClusterObservation::settled(written);
        // A fenced cluster's pods are declared dead.
        if c.fenced {
            o.pods.clear();
            o.ready.clear();
        }
        o.reachable = c.reachable;
        o.fenced = c.fenced;
        o.compatible = c.keeps_ordinals;
        obs.insert(name.clone(), o);
    }
    obs
}

/// A set of ordinals for people, as runs: `[5]`, `[0-99999]`, `[1, 3-5]` (the range notation
/// of Kruise's `reserveOrdinals`), so that a step moving many ordinals stays one short line.
fn ordinals_text(set: &Ordinals) -> String {
    format!("[{}]", spanset_plan::ordinal_runs(set).join(", "))
}

fn describe(step: &Step) -> String {
    let slice = |s: &Slice| {
        let mut t = format!("start={} replicas={}", s.start, s.replicas);
        if !s.reserved.is_empty() {
            t.push_str(&format!(" reserveOrdinals={}", ordinals_text(&s.reserved)));
        }
        t
    };
    match step {
        Step::Shrink { cluster, to, releases } => {
            format!("shrink {cluster} to {} (releases {})", slice(to), ordinals_text(releases))
        }
        Step::Grow { cluster, to, acquires } => {
            format!("grow {cluster} to {} (acquires {})", slice(to), ordinals_text(acquires))
        }
    }
}

/// Which of `n` steps the table lists under `max` (0: all): those before the first index and
/// from the second on, so that a long migration shows how it starts and how it ends.
fn listed(n: usize, max: usize) -> (usize, usize) {
    if max == 0 || n <= max { (n, n) } else { (max.div_ceil(2), n - max / 2) }
}

/// Runs `spanset plan`; returns the exit code (1 for an invalid file).
pub fn run(args: PlanArgs) -> i32 {
    match plan_files(&args) {
        Ok(out) => {
            print!("{out}");
            0
        }
        Err(lines) => {
            for l in lines {
                eprintln!("spanset: {l}");
            }
            1
        }
    }
}

fn plan_files(args: &PlanArgs) -> Result<String, Vec<String>> {
    let fsts: FederatedStatefulSet = read(&args.file, "FederatedStatefulSet").map_err(|e| vec![e])?;
    let current: Current = match &args.current {
        Some(p) => read(p, "current state").map_err(|e| vec![e])?,
        None => Current::default(),
    };
    let desired = fsts
        .spec
        .to_desired()
        .map_err(|errs| errs.iter().map(|e| format!("{}: {e}", args.file.display())).collect::<Vec<_>>())?;
    let obs = observed(&desired, &current);
    // The file's status (as `kubectl get fsts -o yaml` prints it) says which placement the
    // layout was divided for, which `onScale: Keep` needs to keep it.
    let balanced = fsts.status.as_ref().and_then(|s| s.balanced_placement.as_deref());
    let (target, steps) =
        plan::plan_to_completion_balanced(&desired, &obs, balanced).map_err(|e| vec![e.to_string()])?;
    let document = || {
        let slices: Vec<_> = target
            .target
            .iter()
            .map(|(cluster, s)| {
                let mut v = json!({"cluster": cluster, "start": s.start, "replicas": s.replicas});
                if !s.reserved.is_empty() {
                    v["reservedOrdinals"] = json!(s.reserved.iter().collect::<Vec<_>>());
                }
                v
            })
            .collect();
        let excluded: Vec<_> =
            target.excluded.iter().map(|(c, why)| json!({"cluster": c, "reason": format!("{why:?}")})).collect();
        json!({"slices": slices, "excluded": excluded, "steps": steps})
    };
    Ok(match args.output {
        Format::Json => output::json(&document()),
        Format::Yaml => output::yaml(&document()),
        // A plan has no columns beyond its table.
        Format::Table | Format::Wide => {
            let mut out = String::from("CLUSTER          START  REPLICAS  RESERVED\n");
            for (cluster, s) in &target.target {
                let reserved = if s.reserved.is_empty() { "-".to_string() } else { ordinals_text(&s.reserved) };
                out.push_str(&format!("{cluster:<16} {:<6} {:<9} {reserved}\n", s.start, s.replicas));
            }
            for (cluster, why) in &target.excluded {
                out.push_str(&format!("{cluster:<16} excluded: {why:?}\n"));
            }
            out.push_str(&format!("\n{} steps:\n", steps.len()));
            let (head, tail) = listed(steps.len(), args.max_steps);
            for (i, s) in steps.iter().enumerate() {
                if i == head && head < tail {
                    out.push_str(&format!(
                        "     … {} more steps (--max-steps 0 lists them all; -o json has every step)\n",
                        tail - head
                    ));
                }
                if i < head || i >= tail {
                    out.push_str(&format!("{:>3}. {}\n", i + 1, describe(s)));
                }
            }
            out
        }
    })
}
