//! Who writes to a simulated cluster, in the resource account's words: spanset, one of the
//! sandbox's own components (each names itself at its writes), or any other API caller
//! (`user:<program>`, after its User-Agent). The account needs this to tell spanset's cost
//! from the cluster's own churn and from the test's or the operator's own commands.

use std::{fmt, sync::Arc};

use super::tokens::UserInfo;

/// The name the account gives spanset's controller.
pub const SPANSET: &str = "spanset";

/// The ServiceAccounts spanset's controller runs as under `--auth` (`deploy/rbac.yaml` in the
/// host, `deploy/member/rbac.yaml` in each member).
pub const SPANSET_SERVICE_ACCOUNTS: &[&str] =
    &["system:serviceaccount:spanset-system:spanset", "system:serviceaccount:spanset-system:spanset-member"];

/// The program name spanset's controller sends as its User-Agent (`spanset/<version>`), which is
/// how it is told apart without `--auth`, where every caller is the administrator.
pub const SPANSET_AGENT: &str = "spanset";

/// A simulated component of a cluster, as the account names its writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Component {
    /// A write whose call site named no component (a unit test's, or a missed one: tests look
    /// for this name to find writes nobody owns).
    #[default]
    Unattributed,
    /// The cluster's bootstrap objects (namespaces, nodes' furniture, StorageClasses, CRDs).
    Sandbox,
    /// The StatefulSet controller (apps/v1).
    StatefulSetController,
    /// OpenKruise's controller, running Advanced StatefulSets.
    Kruise,
    /// The PersistentVolume controller: provisioning, binding and reclaim.
    PersistentVolumeController,
    /// The garbage collector (owner references, finalizers, terminating namespaces).
    GarbageCollector,
    /// The scheduler (binding pods to nodes).
    Scheduler,
    /// The kubelets (node registration, pod status, pod removal after their grace period).
    Kubelet,
    /// Node lifecycle (node conditions and taints, eviction of pods from lost nodes).
    NodeLifecycle,
    /// The EndpointSlice controller.
    EndpointSliceController,
    /// The disruption controller (PodDisruptionBudget status).
    DisruptionController,
    /// The API server's eviction subresource (its budget bookkeeping).
    Eviction,
    /// The apiextensions API server's finalizer of a deleted CustomResourceDefinition (its
    /// objects deleted, its conditions, its own finalizer removed).
    CrdFinalizer,
    /// The ServiceAccount controller (every namespace's `default` ServiceAccount).
    ServiceAccountController,
}

impl Component {
    /// The name the account prints.
    pub fn name(self) -> &'static str {
        match self {
            Component::Unattributed => "unattributed",
            Component::Sandbox => "sandbox",
            Component::StatefulSetController => "statefulset-controller",
            Component::Kruise => "kruise",
            Component::PersistentVolumeController => "persistentvolume-controller",
            Component::GarbageCollector => "garbage-collector",
            Component::Scheduler => "scheduler",
            Component::Kubelet => "kubelet",
            Component::NodeLifecycle => "node-lifecycle",
            Component::EndpointSliceController => "endpointslice-controller",
            Component::DisruptionController => "disruption-controller",
            Component::Eviction => "eviction",
            Component::CrdFinalizer => "crd-finalizer",
            Component::ServiceAccountController => "serviceaccount-controller",
        }
    }
}

/// Who made a write.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Actor {
    /// One of the sandbox's own components.
    Component(Component),
    /// A caller of the API: [`SPANSET`] or `user:<program>`.
    Caller(Arc<str>),
}

impl Default for Actor {
    fn default() -> Self {
        Actor::Component(Component::Unattributed)
    }
}

impl From<Component> for Actor {
    fn from(c: Component) -> Self {
        Actor::Component(c)
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Component(c) => f.write_str(c.name()),
            Actor::Caller(name) => f.write_str(name),
        }
    }
}

impl Actor {
    /// The actor of an API request: spanset when it runs as one of spanset's ServiceAccounts
    /// or sends spanset's User-Agent, else `user:<program>` after the User-Agent's program
    /// (`kubectl/v1.33.1 (linux/amd64) …` is `user:kubectl`), or `user:<user name>` when the
    /// caller sends none (kube-rs sends none unless told).
    pub fn of_request(user: &UserInfo, user_agent: Option<&str>) -> Self {
        let program = user_agent.and_then(|ua| ua.split(['/', ' ']).next()).map(str::trim).filter(|p| !p.is_empty());
        if program == Some(SPANSET_AGENT) || SPANSET_SERVICE_ACCOUNTS.contains(&user.name.as_str()) {
            return Actor::Caller(SPANSET.into());
        }
        Actor::Caller(format!("user:{}", program.unwrap_or(&user.name)).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_are_named_after_their_program_or_their_identity() {
        let admin = UserInfo::admin();
        let kubectl = "kubectl/v1.33.1 (linux/amd64) kubernetes/8adc0f0";
        assert_eq!(Actor::of_request(&admin, Some(kubectl)).to_string(), "user:kubectl");
        assert_eq!(Actor::of_request(&admin, Some("spanset/0.1.0")).to_string(), "spanset");
        assert_eq!(Actor::of_request(&admin, Some("spanset-cli/0.1.0")).to_string(), "user:spanset-cli");
        assert_eq!(Actor::of_request(&admin, None).to_string(), "user:kubernetes-admin");
        assert_eq!(Actor::of_request(&admin, Some("  ")).to_string(), "user:kubernetes-admin");
        for sa in SPANSET_SERVICE_ACCOUNTS {
            let who = UserInfo::named(sa, vec![]);
            assert_eq!(Actor::of_request(&who, Some("kube-rs")).to_string(), "spanset", "{sa}");
        }
        assert_eq!(Actor::default().to_string(), "unattributed");
    }
}
