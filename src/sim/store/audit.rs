//! The audit log of a simulated cluster that enforces authorization: for every request, who
//! made it, what it asked (verb, group, resource, subresource, namespace, name or path), the
//! decision, and which RBAC rule allowed it. Tests read it to prove a permission set is
//! enough (nothing denied) and not too much (every granted rule used).

use parking_lot::Mutex;
use serde::Serialize;

/// The RBAC rule that allowed a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleRef {
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// Namespace of a Role; empty for a ClusterRole.
    pub namespace: String,
    /// Name of the role.
    pub name: String,
    /// Index of the rule in the role's `rules`.
    pub index: usize,
}

/// One authorized (or refused) request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    /// The user name.
    pub user: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or
    /// the HTTP verb of a non-resource request.
    pub verb: String,
    /// API group (`""` for core); empty for non-resource requests.
    pub group: String,
    /// Resource, empty for non-resource requests.
    pub resource: String,
    /// Subresource (`status`, `log`…), or empty.
    pub subresource: String,
    /// Namespace, or empty.
    pub namespace: String,
    /// Object name, or empty.
    pub name: String,
    /// The URL path of a non-resource request, or empty.
    pub path: String,
    /// Whether the request was allowed.
    pub allowed: bool,
    /// The rule that allowed it (none for `system:masters` or a refusal).
    pub rule: Option<RuleRef>,
}

/// The records of one cluster, oldest first, bounded.
#[derive(Debug, Default)]
pub struct AuditLog {
    records: Mutex<Vec<AuditRecord>>,
}

/// Records kept per cluster; older ones are dropped first.
const KEPT: usize = 200_000;

impl AuditLog {
    /// Appends a record.
    pub fn record(&self, r: AuditRecord) {
        let mut records = self.records.lock();
        if records.len() >= KEPT {
            records.drain(..KEPT / 10);
        }
        records.push(r);
    }

    /// Every record kept so far.
    pub fn all(&self) -> Vec<AuditRecord> {
        self.records.lock().clone()
    }
}
