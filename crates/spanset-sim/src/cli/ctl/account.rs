//! `spanset sim-ctl account`: the sandbox's resource account as a table, as JSON, or checked
//! against budgets (`--check --max BUDGET`), so that a script or a test can hold a scenario to
//! its cost in one line.
//!
//! A budget is `CLUSTER:WHAT=N` (at most N), `CLUSTER` a cluster's name or `*` (each cluster
//! alone), `WHAT` one of:
//! - `ACTOR:VERB:RESOURCE`: an actor's writes (`spanset`, `user:kubectl`, a component's name,
//!   or `*` for every actor summed); `VERB` is `create`, `update`, `status`, `delete`,
//!   `removed` or `writes` (creates, updates, status updates and deletes); `RESOURCE` as the
//!   account names it (`persistentvolumeclaims`, `statefulsets.apps`) or `*` for all;
//! - `volumes:provisioned`, `volumes:released` (turned Released), `volumes:left:PHASE` (in
//!   that phase now, e.g. `volumes:left:Released`);
//! - `events:REASON`: Events of that reason created (`events:*`: of any reason).

use std::fmt::Write as _;

use crate::store::account::report::{AccountReport, ClusterAccount, WriteCounts};

/// What a budget bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Measure {
    /// Writes of an actor (`None`: every actor) to a resource (`None`: every resource).
    Writes { actor: Option<String>, verb: Verb, resource: Option<String> },
    /// Volumes provisioned.
    Provisioned,
    /// Volumes turned Released.
    Released,
    /// Volumes in a phase now.
    Left(String),
    /// Events of a reason (`None`: any) created.
    Events(Option<String>),
}

/// Which count of [`WriteCounts`] a budget bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Create,
    Update,
    Status,
    Delete,
    Removed,
    Writes,
}

const VERBS: &str = "create, update, status, delete, removed, writes";

impl Verb {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "create" => Verb::Create,
            "update" => Verb::Update,
            "status" => Verb::Status,
            "delete" => Verb::Delete,
            "removed" => Verb::Removed,
            "writes" => Verb::Writes,
            _ => return None,
        })
    }

    fn of(self, c: &WriteCounts) -> u64 {
        match self {
            Verb::Create => c.created,
            Verb::Update => c.updated,
            Verb::Status => c.status_updated,
            Verb::Delete => c.deleted,
            Verb::Removed => c.removed,
            Verb::Writes => c.writes(),
        }
    }
}

/// One `--max` budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// The flag as given, to name it in a verdict.
    text: String,
    /// The cluster (`None`: each cluster alone).
    cluster: Option<String>,
    what: Measure,
    limit: u64,
}

fn any(s: &str) -> Option<String> {
    (s != "*").then(|| s.to_string())
}

impl Budget {
    /// Parses `CLUSTER:WHAT=N` (see the module's doc); the error names the flag and the part
    /// that is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: String| format!("--max {text}: {why}");
        let (spec, limit) =
            text.rsplit_once('=').ok_or_else(|| bad("expected CLUSTER:WHAT=N (no \"=N\" limit)".into()))?;
        let limit = limit
            .trim()
            .parse::<u64>()
            .map_err(|_| bad(format!("the limit {limit:?} is not a whole number of 0 or more")))?;
        let parts: Vec<&str> = spec.split(':').collect();
        if let Some(i) = parts.iter().position(|p| p.trim().is_empty()) {
            let which = ["the cluster", "the actor or kind of count", "a part"][i.min(2)];
            return Err(bad(format!("{which} (part {} of {spec:?}) is empty", i + 1)));
        }
        if parts.len() < 3 {
            return Err(bad(format!(
                "{spec:?} has {} part(s); expected CLUSTER:ACTOR:VERB:RESOURCE, CLUSTER:volumes:WHICH or CLUSTER:events:REASON",
                parts.len()
            )));
        }
        let what = match parts[1] {
            "volumes" => match &parts[2..] {
                ["provisioned"] => Measure::Provisioned,
                ["released"] => Measure::Released,
                ["left", phase] => Measure::Left(phase.to_string()),
                _ => {
                    return Err(bad(format!(
                        "the volumes' count {:?} is not one of provisioned, released, left:PHASE",
                        parts[2..].join(":")
                    )));
                }
            },
            "events" if parts.len() == 3 => Measure::Events(any(parts[2])),
            "events" => {
                return Err(bad(format!(
                    "the event reason {:?} has a ':' (expected events:REASON)",
                    parts[2..].join(":")
                )));
            }
            _ if parts.len() < 4 => {
                return Err(bad(format!(
                    "{spec:?} names an actor's writes without a verb and a resource (expected CLUSTER:ACTOR:VERB:RESOURCE)"
                )));
            }
            _ => {
                let n = parts.len();
                let verb = parts[n - 2];
                let verb = Verb::parse(verb).ok_or_else(|| bad(format!("the verb {verb:?} is not one of {VERBS}")))?;
                Measure::Writes { actor: any(&parts[1..n - 2].join(":")), verb, resource: any(parts[n - 1]) }
            }
        };
        Ok(Self { text: text.to_string(), cluster: any(parts[0]), what, limit })
    }

    /// What the budget measures in one cluster.
    fn measure(&self, a: &ClusterAccount) -> u64 {
        match &self.what {
            Measure::Writes { actor, verb, resource } => a
                .writes
                .iter()
                .filter(|(name, _)| actor.as_ref().is_none_or(|want| want == *name))
                .flat_map(|(_, resources)| resources.iter())
                .filter(|(name, _)| resource.as_ref().is_none_or(|want| want == *name))
                .map(|(_, counts)| verb.of(counts))
                .sum(),
            Measure::Provisioned => a.provisioned(),
            Measure::Released => a.released(),
            Measure::Left(phase) => a.left(phase),
            Measure::Events(None) => a.events_created(),
            Measure::Events(Some(reason)) => a.events_of(reason),
        }
    }

    /// The budgets this one exceeds in `report`, one line each (a cluster it names that the
    /// sandbox does not have is one too).
    pub fn exceeded(&self, report: &AccountReport) -> Vec<String> {
        let clusters: Vec<(&String, &ClusterAccount)> = match &self.cluster {
            None => report.clusters.iter().collect(),
            Some(name) => match report.clusters.get_key_value(name) {
                Some(one) => vec![one],
                None => {
                    let have: Vec<&str> = report.clusters.keys().map(String::as_str).collect();
                    return vec![format!("--max {}: no cluster named {name:?} (have: {})", self.text, have.join(", "))];
                }
            },
        };
        clusters
            .into_iter()
            .filter_map(|(name, a)| {
                let n = self.measure(a);
                (n > self.limit).then(|| format!("{name}: {n} over the budget of {} (--max {})", self.limit, self.text))
            })
            .collect()
    }
}

/// Checks every budget; the lines of those exceeded (empty: all held).
pub fn check(report: &AccountReport, budgets: &[Budget]) -> Vec<String> {
    budgets.iter().flat_map(|b| b.exceeded(report)).collect()
}

/// The account as aligned text: per cluster, each actor's writes by resource, the volumes,
/// and the Events by reason.
pub fn table(report: &AccountReport) -> String {
    let mut out = String::new();
    for (name, a) in &report.clusters {
        let _ = writeln!(out, "CLUSTER {name}");
        let _ = writeln!(
            out,
            "  {:<28} {:<40} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
            "ACTOR", "RESOURCE", "CREATED", "UPDATED", "STATUS", "DELETED", "REMOVED", "NO-OP"
        );
        for (actor, resources) in &a.writes {
            for (resource, c) in resources {
                let _ = writeln!(
                    out,
                    "  {actor:<28} {resource:<40} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
                    c.created, c.updated, c.status_updated, c.deleted, c.removed, c.unchanged
                );
            }
        }
        let left: Vec<String> = a.volumes.by_phase.iter().map(|(phase, n)| format!("{phase} {n}")).collect();
        let _ = writeln!(
            out,
            "  volumes: {} provisioned, {} released; now: {}",
            a.provisioned(),
            a.released(),
            if left.is_empty() { "none".to_string() } else { left.join(", ") }
        );
        if a.events.is_empty() {
            let _ = writeln!(out, "  events: none");
        } else {
            let _ = writeln!(out, "  {:<40} {:>7} {:>7}", "EVENT REASON", "CREATED", "UPDATED");
            for (reason, e) in &a.events {
                let _ = writeln!(out, "  {reason:<40} {:>7} {:>7}", e.created, e.updated);
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::account::report::{EventCounts, VolumeCounts};

    fn report() -> AccountReport {
        let mut east = ClusterAccount::default();
        let spanset = east.writes.entry("spanset".into()).or_default();
        spanset.insert("persistentvolumeclaims".into(), WriteCounts { created: 2, deleted: 6, ..Default::default() });
        spanset.insert("statefulsets.apps".into(), WriteCounts { updated: 3, ..Default::default() });
        east.writes
            .entry("user:kubectl".into())
            .or_default()
            .insert("configmaps".into(), WriteCounts { created: 2, deleted: 1, ..Default::default() });
        east.volumes = VolumeCounts { provisioned: 6, released: 3, by_phase: [("Released".to_string(), 3)].into() };
        east.events.insert("StaleClaimRetired".into(), EventCounts { created: 13, updated: 0 });
        let west = ClusterAccount::default();
        AccountReport { clusters: [("east".to_string(), east), ("west".to_string(), west)].into() }
    }

    fn verdict(budgets: &[&str]) -> Vec<String> {
        let budgets: Vec<Budget> = budgets.iter().map(|b| Budget::parse(b).unwrap()).collect();
        check(&report(), &budgets)
    }

    #[test]
    fn budgets_within_their_limits_hold() {
        let held = [
            "east:spanset:delete:persistentvolumeclaims=6",
            "east:user:kubectl:create:configmaps=2",
            "*:user:kubectl:delete:configmaps=1",
            "east:spanset:writes:*=11",
            "east:*:create:*=4",
            "*:volumes:provisioned=6",
            "east:volumes:left:Released=3",
            "west:volumes:left:Released=0",
            "*:events:StaleClaimRetired=13",
            "east:events:*=13",
            "east:nobody:create:pods=0",
        ];
        assert_eq!(verdict(&held), Vec::<String>::new());
    }

    #[test]
    fn each_exceeded_budget_is_named_with_its_cluster_and_count() {
        let lines = verdict(&[
            "east:spanset:delete:persistentvolumeclaims=4",
            "*:volumes:released=0",
            "*:events:StaleClaimRetired=12",
            "east:user:kubectl:writes:configmaps=2",
            "north:volumes:provisioned=1",
        ]);
        assert_eq!(
            lines,
            vec![
                "east: 6 over the budget of 4 (--max east:spanset:delete:persistentvolumeclaims=4)",
                "east: 3 over the budget of 0 (--max *:volumes:released=0)",
                "east: 13 over the budget of 12 (--max *:events:StaleClaimRetired=12)",
                "east: 3 over the budget of 2 (--max east:user:kubectl:writes:configmaps=2)",
                "--max north:volumes:provisioned=1: no cluster named \"north\" (have: east, west)",
            ]
        );
    }

    #[test]
    fn a_bad_budget_names_the_flag_and_the_wrong_part() {
        let cases = [
            ("east:spanset:delete:pods", "no \"=N\" limit"),
            ("east:spanset:delete:pods=-1", "the limit \"-1\" is not a whole number"),
            ("east:spanset:delete:pods=many", "the limit \"many\""),
            ("east:spanset:destroy:pods=1", "the verb \"destroy\" is not one of create, update"),
            ("east:spanset:pods=1", "without a verb and a resource"),
            ("east:pods=1", "has 2 part(s)"),
            (":spanset:delete:pods=1", "the cluster (part 1"),
            ("east::delete:pods=1", "part 2"),
            ("east:volumes:gone=1", "the volumes' count \"gone\" is not one of"),
            ("east:volumes:left=1", "the volumes' count \"left\""),
            ("east:events:a:b=1", "the event reason \"a:b\""),
        ];
        for (flag, part) in cases {
            let e = Budget::parse(flag).unwrap_err();
            assert!(e.starts_with(&format!("--max {flag}: ")), "{flag}: {e}");
            assert!(e.contains(part), "{flag}: {e} (expected to mention {part:?})");
        }
    }

    #[test]
    fn actors_with_colons_are_read_whole() {
        let b = Budget::parse("east:user:kubectl:create:configmaps=2").unwrap();
        assert_eq!(
            b.what,
            Measure::Writes {
                actor: Some("user:kubectl".into()),
                verb: Verb::Create,
                resource: Some("configmaps".into())
            }
        );
    }

    #[test]
    fn the_table_shows_every_actor_volumes_and_events() {
        let t = table(&report());
        assert!(t.contains("CLUSTER east"), "{t}");
        let row = t.lines().find(|l| l.contains("persistentvolumeclaims")).unwrap();
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["spanset", "persistentvolumeclaims", "2", "0", "0", "6", "0", "0"]
        );
        assert!(t.contains("volumes: 6 provisioned, 3 released; now: Released 3"), "{t}");
        assert!(t.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["StaleClaimRetired", "13", "0"]), "{t}");
        assert!(t.contains("CLUSTER west\n") && t.contains("volumes: 0 provisioned, 0 released; now: none"), "{t}");
    }
}
