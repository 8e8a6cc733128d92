//! The sandbox's resource account, read for tests: what each cluster was asked to create,
//! update and delete, by whom, with its volumes and Events. The types and their accessors are
//! the library's own (`ClusterAccount::of`, `by_actor`, `by_resource`, `created`, `deleted`,
//! `provisioned`, `released`, `left`, `events_of`), and `since` is the diff of two snapshots:
//! the cost of one phase of a test.

pub use spanset::sim::store::account::report::{AccountReport, ClusterAccount, WriteCounts};

use super::Sandbox;

/// The account of every cluster of the sandbox behind an admin URL.
pub fn read(admin: &str) -> AccountReport {
    let body = spanset::cli::sim_ctl::request(admin, "GET", "/account").expect("the admin API serves the account");
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

    /// The account of one cluster now.
    pub fn account_of(&self, cluster: &str) -> ClusterAccount {
        let report = self.account();
        assert!(report.clusters.contains_key(cluster), "the sandbox has no cluster {cluster:?}: {report:?}");
        report.cluster(cluster)
    }
}
