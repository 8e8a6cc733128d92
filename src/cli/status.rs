//! `spanset status [NS/NAME] [-n NS | -A] [-o table|wide|json|yaml|name] [--kubeconfig FILE] [--context CTX]`: what the
//! controller last recorded in the status of FederatedStatefulSets in the host cluster — one
//! (`NAMESPACE/NAME`, or `NAME` in the context's namespace), or all in all namespaces.
//!
//! Per federation: READY (`status.ready`), the conditions, per cluster its slice (start,
//! replicas, reserved ordinals and the ordinals it owns, e.g. `0-2,5`) with its ready pods
//! (`ready/replicas`), and the moves in flight with the age of their phase. It reads only; it
//! never writes.
//!
//! `-o json` prints one document of this shape, whether one federation or all were asked for
//! (keys are always present; `null` when the status does not say):
//!
//! ```json
//! {
//!   "federations": [
//!     {
//!       "namespace": "default",
//!       "name": "redis",
//!       "replicas": 6,                  // spec.replicas
//!       "ready": "5/6",                 // status.ready
//!       "readyReplicas": 5,             // status.readyReplicas
//!       "generation": 2,                // metadata.generation
//!       "observedGeneration": 2,        // status.observedGeneration
//!       "conditions": [
//!         {"type": "Ready", "status": "False", "reason": "Moving", "message": "...",
//!          "lastTransitionTime": "2025-01-01T00:00:00Z"}
//!       ],
//!       "clusters": [
//!         {"cluster": "source", "start": 0, "replicas": 5, "reservedOrdinals": [],
//!          "ordinals": "0-4", "readyReplicas": 5}
//!       ],
//!       "moves": [
//!         {"ordinal": 5, "from": "source", "to": "destination", "phase": "Starting",
//!          "since": "2025-01-01T00:00:00Z", "ageSeconds": 42}
//!       ],
//!       "problems": []                  // parts of the object that could not be read
//!     }
//!   ]
//! }
//! ```
//!
//! `ordinals` is `"-"` for an empty slice; `ageSeconds` is `null` when `since` is not an
//! RFC 3339 time. Exit codes: 0 shown, 1 not found or the cluster could not be read (one line
//! on stderr), 2 bad flags.

use std::path::PathBuf;

use kube::{
    Api, Client,
    api::{DynamicObject, ListParams},
    discovery::ApiResource,
};
use serde::Deserialize;
use serde_json::{Value, json};
use spanset_api::FederatedStatefulSet;
use spanset_controller::runtime::host_client;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text, one block per federation.
    Table,
    /// One JSON document `{"federations": [...]}` (shape in the module doc).
    Json,
    /// The same document as YAML.
    Yaml,
    /// The table, with the rollout's revisions and counts too.
    Wide,
    /// `federatedstatefulset.spanset.dev/NAME`, one line each (as `kubectl get -o name`).
    Name,
}

/// Flags of `spanset status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The FederatedStatefulSet, as NAMESPACE/NAME or NAME (in the context's namespace); all
    /// of them in all namespaces when absent.
    #[arg(value_name = "NS/NAME")]
    pub target: Option<String>,
    /// Namespace: of NAME, or (without one) of every federation shown.
    #[arg(short = 'n', long = "namespace", value_name = "NS")]
    pub namespace: Option<String>,
    /// Every namespace (the default without NAME or -n; as `kubectl get -A`).
    #[arg(short = 'A', long = "all-namespaces", conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// Kubeconfig of the host cluster (default: $KUBECONFIG, then ~/.kube/config, then
    /// in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig (default: its current context).
    #[arg(long, value_name = "CTX")]
    pub context: Option<String>,
}

/// What to read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// Every FederatedStatefulSet in every namespace.
    All,
    /// Every FederatedStatefulSet in one namespace.
    InNamespace(String),
    /// One, in the namespace given or (`None`) the context's.
    One { namespace: Option<String>, name: String },
}

/// Parses `NS/NAME` or `NAME`; the error is one line for [`super::usage_error`].
fn parse_target(target: Option<&str>) -> Result<Target, String> {
    let Some(text) = target else { return Ok(Target::All) };
    let (namespace, name) = match text.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, text),
    };
    let valid = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    if namespace.is_some_and(|ns| !valid(ns)) || !valid(name) {
        return Err(format!(
            "invalid federation {text:?}: expected NAMESPACE/NAME or NAME (lowercase letters, digits, '-' and '.')"
        ));
    }
    Ok(Target::One { namespace: namespace.map(str::to_string), name: name.to_string() })
}

/// The target from NS/NAME, `-n` and `-A` together (a namespace given twice must agree).
fn resolve_target(args: &StatusArgs) -> Result<Target, String> {
    if args.all_namespaces && args.target.is_some() {
        return Err("-A/--all-namespaces lists every federation: give no NS/NAME with it".into());
    }
    match (parse_target(args.target.as_deref())?, &args.namespace) {
        (Target::All, Some(ns)) => Ok(Target::InNamespace(ns.clone())),
        (Target::One { namespace: Some(given), name }, Some(ns)) if given != *ns => {
            Err(format!("{given}/{name} is not in namespace {ns} (-n): give one namespace"))
        }
        (Target::One { name, .. }, Some(ns)) => Ok(Target::One { namespace: Some(ns.clone()), name }),
        (t, _) => Ok(t),
    }
}

/// Runs `spanset status`; returns the exit code.
pub async fn run(args: StatusArgs) -> i32 {
    let target = match resolve_target(&args) {
        Ok(t) => t,
        Err(e) => super::usage_error(&e),
    };
    match status(&args, &target).await {
        Ok(out) => {
            print!("{out}");
            0
        }
        Err(line) => {
            eprintln!("spanset: {line}");
            1
        }
    }
}

async fn status(args: &StatusArgs, target: &Target) -> Result<String, String> {
    let client =
        host_client::client(args.kubeconfig.as_deref(), args.context.as_deref()).await.map_err(|e| e.to_string())?;
    let objects = fetch(&client, target).await?;
    let now = jiff::Timestamp::now();
    let federations: Vec<Federation> = objects.iter().map(|o| Federation::read(o, now)).collect();
    Ok(match args.output {
        Format::Json => {
            let doc = json!({"federations": federations.iter().map(Federation::to_json).collect::<Vec<_>>()});
            super::output::json(&doc)
        }
        Format::Yaml => {
            let doc = json!({"federations": federations.iter().map(Federation::to_json).collect::<Vec<_>>()});
            super::output::yaml(&doc)
        }
        Format::Name => federations.iter().map(|f| format!("federatedstatefulset.spanset.dev/{}\n", f.name)).collect(),
        Format::Table | Format::Wide if federations.is_empty() => {
            match target {
                Target::InNamespace(ns) => eprintln!("spanset: no FederatedStatefulSets found in namespace {ns}"),
                _ => eprintln!("spanset: no FederatedStatefulSets found in any namespace"),
            }
            String::new()
        }
        Format::Table => federations.iter().map(Federation::to_table).collect::<Vec<_>>().join("\n"),
        Format::Wide => federations.iter().map(Federation::to_wide).collect::<Vec<_>>().join("\n"),
    })
}

/// Reads the objects as untyped JSON, so one object with an unexpected status cannot hide the
/// others: each is read leniently, and what cannot be read is reported with it.
async fn fetch(client: &Client, target: &Target) -> Result<Vec<DynamicObject>, String> {
    let resource = ApiResource::erase::<FederatedStatefulSet>(&());
    match target {
        Target::All => {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let mut list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| describe_api_error(e, "cannot list federatedstatefulsets"))?;
            list.items.sort_by(|a, b| {
                (a.metadata.namespace.as_deref(), a.metadata.name.as_deref())
                    .cmp(&(b.metadata.namespace.as_deref(), b.metadata.name.as_deref()))
            });
            Ok(list.items)
        }
        Target::InNamespace(ns) => {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
            let mut list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| describe_api_error(e, &format!("cannot list federatedstatefulsets in {ns}")))?;
            list.items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            Ok(list.items)
        }
        Target::One { namespace, name } => {
            let ns = namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
            match api.get_opt(name).await {
                Ok(Some(o)) => Ok(vec![o]),
                Ok(None) => Err(format!("federatedstatefulset {ns}/{name} not found")),
                Err(e) => Err(describe_api_error(e, &format!("cannot read federatedstatefulset {ns}/{name}"))),
            }
        }
    }
}

/// One line for an API error, with a hint when the CRD is not served.
fn describe_api_error(e: kube::Error, doing: &str) -> String {
    match e {
        kube::Error::Api(s) if s.code == 404 => {
            format!(
                "{doing}: the host cluster does not serve spanset.dev/v1alpha1 (install the CRDs: spanset crd | kubectl apply -f -)"
            )
        }
        kube::Error::Api(s) => format!("{doing}: {} ({})", s.message, s.code),
        other => format!("{doing}: {other}"),
    }
}

// === Reading one object ===

/// The status as written by the controller, read leniently: absent parts are empty.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct StatusView {
    observed_generation: Option<i64>,
    conditions: Vec<ConditionView>,
    slices: Vec<SliceView>,
    moves: Vec<MoveView>,
    ready_replicas: Option<i64>,
    ready: Option<String>,
    current_revision: Option<String>,
    update_revision: Option<String>,
    updated_replicas: Option<i64>,
    available_replicas: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ConditionView {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    reason: String,
    message: String,
    last_transition_time: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct SliceView {
    cluster: String,
    start: i64,
    replicas: i64,
    reserved_ordinals: Vec<i64>,
    ready_replicas: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct MoveView {
    ordinal: i64,
    from: String,
    to: String,
    phase: String,
    since: String,
}

/// One federation, ready to print.
struct Federation {
    namespace: String,
    name: String,
    replicas: Option<i64>,
    generation: Option<i64>,
    status: StatusView,
    /// Per move: its age in whole seconds, if `since` parses.
    move_ages: Vec<Option<i64>>,
    problems: Vec<String>,
}

impl Federation {
    fn read(o: &DynamicObject, now: jiff::Timestamp) -> Self {
        let mut problems = Vec::new();
        let status = match o.data.get("status") {
            None | Some(Value::Null) => StatusView::default(),
            Some(v) => StatusView::deserialize(v).unwrap_or_else(|e| {
                problems.push(format!("status cannot be read: {e}"));
                StatusView::default()
            }),
        };
        let move_ages = status
            .moves
            .iter()
            .map(|m| m.since.parse::<jiff::Timestamp>().ok().map(|t| now.duration_since(t).as_secs()))
            .collect();
        Self {
            namespace: o.metadata.namespace.clone().unwrap_or_default(),
            name: o.metadata.name.clone().unwrap_or_default(),
            replicas: o.data.pointer("/spec/replicas").and_then(Value::as_i64),
            generation: o.metadata.generation,
            status,
            move_ages,
            problems,
        }
    }

    fn to_json(&self) -> Value {
        let s = &self.status;
        json!({
            "namespace": self.namespace,
            "name": self.name,
            "replicas": self.replicas,
            "ready": s.ready,
            "readyReplicas": s.ready_replicas,
            "generation": self.generation,
            "observedGeneration": s.observed_generation,
            "conditions": s.conditions.iter().map(|c| json!({
                "type": c.type_, "status": c.status, "reason": c.reason, "message": c.message,
                "lastTransitionTime": c.last_transition_time,
            })).collect::<Vec<_>>(),
            "clusters": s.slices.iter().map(|sl| json!({
                "cluster": sl.cluster, "start": sl.start, "replicas": sl.replicas,
                "reservedOrdinals": sl.reserved_ordinals, "ordinals": owned_ordinals(sl),
                "readyReplicas": sl.ready_replicas,
            })).collect::<Vec<_>>(),
            "moves": s.moves.iter().zip(&self.move_ages).map(|(m, age)| json!({
                "ordinal": m.ordinal, "from": m.from, "to": m.to, "phase": m.phase, "since": m.since,
                "ageSeconds": age,
            })).collect::<Vec<_>>(),
            "problems": self.problems,
        })
    }

    /// The table with the rollout's line: revisions, updated and available pods.
    fn to_wide(&self) -> String {
        let s = &self.status;
        let table = self.to_table();
        let n = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        let revisions = match (&s.current_revision, &s.update_revision) {
            (Some(c), Some(u)) if c == u => c.clone(),
            (Some(c), Some(u)) => format!("{c} -> {u}"),
            _ => "-".into(),
        };
        let line = format!(
            "ROLLOUT    revision {revisions}, {} updated, {} available\n",
            n(s.updated_replicas),
            n(s.available_replicas)
        );
        // Right after the OBSERVED line.
        match table.find("\n\nCONDITIONS") {
            Some(at) => format!("{}\n{}{}", &table[..at], line.trim_end_matches('\n'), &table[at..]),
            None => table + &line,
        }
    }

    fn to_table(&self) -> String {
        let s = &self.status;
        let mut out = format!("FEDERATION {}/{}\n", self.namespace, self.name);
        let ready = s.ready.clone().unwrap_or_else(|| "-".into());
        out.push_str(&format!("READY      {ready}\n"));
        let observed = match (self.generation, s.observed_generation) {
            (Some(g), Some(o)) if g != o => format!("generation {g}, status describes {o}"),
            (Some(g), Some(_)) => format!("generation {g}, up to date"),
            (Some(g), None) => format!("generation {g}, not yet observed by the controller"),
            _ => "-".into(),
        };
        out.push_str(&format!("OBSERVED   {observed}\n"));
        for p in &self.problems {
            out.push_str(&format!("PROBLEM    {p}\n"));
        }
        out.push_str("\nCONDITIONS\n");
        if s.conditions.is_empty() {
            out.push_str("  (none)\n");
        } else {
            let rows = s
                .conditions
                .iter()
                .map(|c| vec![c.type_.clone(), c.status.clone(), dash(&c.reason), dash(&c.message)])
                .collect();
            out.push_str(&table(&["TYPE", "STATUS", "REASON", "MESSAGE"], rows));
        }
        out.push_str("\nCLUSTERS\n");
        if s.slices.is_empty() {
            out.push_str("  (no slices recorded)\n");
        } else {
            let rows = s
                .slices
                .iter()
                .map(|sl| {
                    let reserved = if sl.reserved_ordinals.is_empty() {
                        "-".to_string()
                    } else {
                        sl.reserved_ordinals.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
                    };
                    vec![
                        sl.cluster.clone(),
                        sl.start.to_string(),
                        sl.replicas.to_string(),
                        reserved,
                        owned_ordinals(sl),
                        format!("{}/{}", sl.ready_replicas, sl.replicas),
                    ]
                })
                .collect();
            out.push_str(&table(&["CLUSTER", "START", "REPLICAS", "RESERVED", "ORDINALS", "READY"], rows));
        }
        out.push_str("\nMOVES\n");
        if s.moves.is_empty() {
            out.push_str("  (none in flight)\n");
        } else {
            let rows = s
                .moves
                .iter()
                .zip(&self.move_ages)
                .map(|(m, age)| {
                    let since = match age {
                        Some(secs) => spanset_api::human::human_duration(jiff::SignedDuration::from_secs(*secs)),
                        None => format!("? ({})", dash(&m.since)),
                    };
                    vec![m.ordinal.to_string(), format!("{} -> {}", m.from, m.to), m.phase.clone(), since]
                })
                .collect();
            out.push_str(&table(&["ORDINAL", "FROM -> TO", "PHASE", "SINCE"], rows));
        }
        out
    }
}

fn dash(s: &str) -> String {
    if s.is_empty() { "-".into() } else { s.to_string() }
}

/// Left-aligned columns two spaces apart, indented by two.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let n = cells.len();
        let mut l = String::from("  ");
        for (i, (cell, w)) in cells.into_iter().zip(&widths).enumerate() {
            if i + 1 == n {
                l.push_str(&cell);
            } else {
                let pad = w - cell.chars().count();
                l.push_str(&cell);
                l.push_str(&" ".repeat(pad + 2));
            }
        }
        l.push('\n');
        l
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// The ordinals a slice owns, as ranges (`0-2,5`): the first `replicas` ordinals from `start`
/// that are not reserved (Advanced StatefulSet `reserveOrdinals`). Computed from the reserved
/// list alone, so a huge `replicas` costs nothing; `"-"` when empty, `"invalid"` for negative
/// numbers.
fn owned_ordinals(slice: &SliceView) -> String {
    spanset_plan::stored_slice_text(slice.start, slice.replicas, slice.reserved_ordinals.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(start: i64, replicas: i64, reserved: &[i64]) -> SliceView {
        SliceView { cluster: "c".into(), start, replicas, reserved_ordinals: reserved.to_vec(), ready_replicas: 0 }
    }

    #[test]
    fn owned_ordinals_skip_reserved_ones() {
        assert_eq!(owned_ordinals(&slice(2, 2, &[])), "2-3");
        assert_eq!(owned_ordinals(&slice(0, 1, &[])), "0");
        assert_eq!(owned_ordinals(&slice(5, 0, &[])), "-");
        assert_eq!(owned_ordinals(&slice(0, 4, &[1, 2])), "0,3-5");
        assert_eq!(owned_ordinals(&slice(0, 3, &[0, 9])), "1-3");
        assert_eq!(owned_ordinals(&slice(3, 2, &[1, 3, 3])), "4-5", "reservations below start or twice");
        assert_eq!(owned_ordinals(&slice(0, 2_000_000_000, &[])), "0-1999999999", "no list is built");
        assert_eq!(owned_ordinals(&slice(-1, 2, &[])), "invalid");
    }

    #[test]
    fn targets_are_namespace_slash_name_or_a_name() {
        assert_eq!(parse_target(None), Ok(Target::All));
        assert_eq!(
            parse_target(Some("prod/redis")),
            Ok(Target::One { namespace: Some("prod".into()), name: "redis".into() })
        );
        assert_eq!(parse_target(Some("redis")), Ok(Target::One { namespace: None, name: "redis".into() }));
        for bad in ["a/b/c", "/x", "x/", "Redis", ""] {
            assert!(parse_target(Some(bad)).unwrap_err().contains("expected NAMESPACE/NAME"), "{bad}");
        }
    }

    #[test]
    fn an_unreadable_status_is_reported_not_fatal() {
        let o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
            "metadata": {"name": "x", "namespace": "ns", "generation": 1},
            "spec": {"replicas": 3},
            "status": {"slices": "not a list"},
        }))
        .unwrap();
        let f = Federation::read(&o, jiff::Timestamp::now());
        assert_eq!(f.problems.len(), 1, "{:?}", f.problems);
        assert!(f.to_table().contains("PROBLEM    status cannot be read"));
        assert_eq!(f.to_json()["replicas"], 3);
    }

    #[test]
    fn a_move_with_an_unparsable_since_shows_it_raw() {
        let o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "spanset.dev/v1alpha1", "kind": "FederatedStatefulSet",
            "metadata": {"name": "x", "namespace": "ns"},
            "status": {"moves": [{"ordinal": 1, "from": "a", "to": "b", "phase": "Draining", "since": "yesterday"}]},
        }))
        .unwrap();
        let f = Federation::read(&o, jiff::Timestamp::now());
        assert!(f.to_table().contains("? (yesterday)"), "{}", f.to_table());
        assert_eq!(f.to_json()["moves"][0]["ageSeconds"], Value::Null);
    }
}
