//! The audit log of a simulated cluster that enforces authorization: for every request, who
//! made it, what it asked (verb, group, resource, subresource, namespace, name or path), the
//! decision, and which RBAC rule allowed it (or which admission policy refused it). Tests read it to prove a permission set is
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
    /// What it asked (the path only for non-resource requests).
    #[serde(flatten)]
    pub request: Attributes,
    /// Whether the request was allowed.
    pub allowed: bool,
    /// The rule that allowed it (none for `system:masters` or a refusal).
    pub rule: Option<RuleRef>,
    /// For a request that RBAC allowed and an admission policy refused: which policy and
    /// binding (`ValidatingAdmissionPolicy 'P' with binding 'B'`), recorded as a refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denied_by: Option<String>,
}

/// What a request asks, in the authorizer's terms (`authorizer.Attributes`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`; for a
    /// non-resource request the lowercase HTTP method.
    pub verb: String,
    /// True for requests about API resources.
    pub resource_request: bool,
    /// API group (`""` for core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource, or empty.
    pub subresource: String,
    /// Namespace, or empty (for a namespace itself, its name).
    pub namespace: String,
    /// Object name, or empty.
    pub name: String,
    /// URL path.
    pub path: String,
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
