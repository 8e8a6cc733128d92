//! The sandbox's resource account, read for tests: what each cluster was asked to create,
//! update and delete, by whom, with its volumes and Events. The types and their accessors are
//! the library's own (`ClusterAccount::of`, `by_actor`, `by_resource`, `created`, `deleted`,
//! `provisioned`, `released`, `left`, `events_of`), and `since` is the diff of two snapshots:
//! the cost of one phase of a test.

pub use spanset_sim::store::account::report::{AccountReport, ClusterAccount, WriteCounts};

use super::Sandbox;

/// The account of every cluster of the sandbox behind an admin URL.
pub fn read(admin: &str) -> AccountReport {
    let body = spanset_sim::cli::ctl::request(admin, "GET", "/account").expect("the admin API serves the account");
    serde_json::from_str(&body).expect("the account reads back")
}

/// What happened between two snapshots (`after.since(before)`), cluster by cluster.
pub fn diff(before: &AccountReport, after: &AccountReport) -> AccountReport {
    after.since(before)
}

impl Sandbox {
    /// The account of every cluster now.
    pub fn account(&self) -> AccountReport {
        read(&self.admin)
    }

    /// What spanset's identity changed in each of `members` since `mark` (an earlier
    /// [`Sandbox::account`]): `(member, resource, counts)` for every resource it created,
    /// updated or deleted an object of (no-op updates and dry runs change nothing and are not
    /// counted). Empty when it wrote nothing there, whatever the end state looks like: a write
    /// undone later, or one to an object the test does not look at, still shows here.
    pub fn spanset_changes_since(
        &self,
        mark: &AccountReport,
        members: &[String],
    ) -> Vec<(String, String, WriteCounts)> {
        let changed = self.account().since(mark);
        let mut out = Vec::new();
        for m in members {
            let cluster = changed.cluster(m);
            for (resource, counts) in cluster.writes.get("spanset").into_iter().flatten() {
                if counts.writes() > 0 {
                    out.push((m.clone(), resource.clone(), *counts));
                }
            }
        }
        out
    }

    /// The account of one cluster now.
    pub fn account_of(&self, cluster: &str) -> ClusterAccount {
        let report = self.account();
        assert!(report.clusters.contains_key(cluster), "the sandbox has no cluster {cluster:?}: {report:?}");
        report.cluster(cluster)
    }
}
