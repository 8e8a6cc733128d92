//! The names spanset stamps on the objects it writes in member clusters: how a watcher finds
//! them, how a coordinator knows they are its own, and the fencing term of the writer.

/// Marks every member object spanset manages (the watchers select on it).
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY`].
pub const MANAGER: &str = "spanset";
/// The federation's name (also the member StatefulSet's name); on pods too, so that a watcher
/// can file a pod under its federation without reading its owner.
pub const FEDERATION: &str = "spanset.dev/federation";
/// The federation's namespace (member objects live in the same namespace).
pub const FEDERATION_NAMESPACE: &str = "spanset.dev/federation-namespace";
/// The federation's uid: tells this federation's objects from a deleted namesake's.
pub const FEDERATION_UID: &str = "spanset.dev/federation-uid";
/// Annotation on a member object several federations of one namespace may share (the headless
/// Service, a carried Secret or ConfigMap): the names of the federations that keep it, sorted
/// and comma-separated. A federation's teardown deletes it only when no other one keeps it.
/// An object without it (written before it existed) is kept by its [`FEDERATION`] alone.
pub const CARRIED_BY: &str = "spanset.dev/carried-by";
/// Label on a host Secret, set by someone who may change it, that lets federations of its
/// namespace carry it into their members (`spec.migration.carry`); its value must be `true`.
/// Without it a federation naming the Secret is refused: spanset may read every Secret a
/// federation names, the federation's author need not, and a copy in a member could be
/// mounted by the author's pods there (a confused deputy). Only an editor of the Secret can
/// label it, so the label is its owner's consent, read with the Secret on every copy.
pub const CARRY: &str = "spanset.dev/carry";
/// Annotation: the leader term that last wrote the object (the fencing token). A writer that
/// reads a newer term than its own stops writing at once.
pub const TERM: &str = "spanset.dev/term";
/// Annotation: a hash of what spanset wrote besides the slice (template and labels), so that a
/// changed template is seen without comparing defaulted specs.
pub const TEMPLATE_HASH: &str = "spanset.dev/template-hash";
/// The scheduling gate every pod of a federation is created with (`spec.identityGate`): the
/// member's scheduler leaves the pod alone until spanset, having confirmed that no other member
/// runs or may run its ordinal, removes it from that very pod (and stamps [`TERM`] on it).
pub const IDENTITY_GATE: &str = "spanset.dev/identity";
/// The finalizer that holds a FederatedStatefulSet until its member objects are removed.
pub const FINALIZER: &str = "spanset.dev/cleanup";
/// The finalizer that holds a MemberCluster while a federation still has a slice, pods or moves
/// in that member (unless it is fenced and silent): deleting it must not erase what spanset
/// knows there (the controller's `holds` module decides when it goes).
pub const MEMBER_FINALIZER: &str = "spanset.dev/member-in-use";
/// The field manager of spanset's writes.
pub const FIELD_MANAGER: &str = "spanset";
/// Label selector of every member object spanset manages, pods included: the federation label
/// (not `managed-by`, which a user's pod template may already set, e.g. to Helm).
pub const MANAGED_SELECTOR: &str = FEDERATION;
/// MemberCluster annotation: who fenced it (`spanset fence` or the automatic policy).
pub const FENCED_BY: &str = "spanset.dev/fenced-by";
/// MemberCluster annotation: when it was fenced (RFC 3339).
pub const FENCED_AT: &str = "spanset.dev/fenced-at";
/// MemberCluster annotation: why it was fenced.
pub const FENCE_REASON: &str = "spanset.dev/fence-reason";
/// MemberCluster annotation: who unfenced it last.
pub const UNFENCED_BY: &str = "spanset.dev/unfenced-by";
/// MemberCluster annotation: when it was unfenced last.
pub const UNFENCED_AT: &str = "spanset.dev/unfenced-at";
/// FederatedStatefulSet annotation: the last `spanset drill` report's figures (JSON: `drill`,
/// `cluster`, `at`, `stages` in seconds), which the controller exposes as
/// `spanset_drill_seconds`.
pub const LAST_DRILL: &str = "spanset.dev/last-drill";
