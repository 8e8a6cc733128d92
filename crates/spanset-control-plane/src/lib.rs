//! Real Kubernetes control planes on one machine, for the tests and for a user who wants to see
//! spanset against Kubernetes itself rather than against its simulator: each cluster is an etcd,
//! a kube-apiserver with TLS, RBAC and ServiceAccount tokens, a kube-controller-manager with its
//! default controllers, a kube-scheduler and kwok, which keeps Node objects Ready and plays the
//! kubelet's part for the pods scheduled to them. The binaries come from `tests/kube/build`,
//! which builds them from Kubernetes' Go modules; nothing here knows spanset, so that what these
//! clusters answer is Kubernetes' word, not this repository's reading of it.
//!
//! | module | one reason to change |
//! |---|---|
//! | [`binaries`] | which programs a control plane needs and how a directory of them is checked |
//! | [`pki`] | the certificates and keys a cluster's components trust each other with |
//! | [`cluster`] | how one cluster's processes are started, awaited and stopped |
//! | [`fleet`] | how several clusters are started together and reached through one kubeconfig |
//! | [`provisioner`] | how a claim gets a volume where no storage driver runs |
//! | [`proxy`] | how one client is cut off from a cluster that runs on |
//! | `spawn` | how a child process is tied to this one, so that none outlives it |

#![forbid(unsafe_code)]

pub mod binaries;
pub mod cluster;
pub mod fleet;
pub mod pki;
pub mod provisioner;
pub mod proxy;
mod spawn;

pub use binaries::Binaries;
pub use cluster::{ClusterOptions, RealCluster};
pub use fleet::RealFleet;
pub use proxy::{Fault, FaultProxy};

/// Why a control plane could not be had.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A binary is missing from the directory given.
    #[error("{dir}: no {program} (build the control plane with tests/kube/build)")]
    MissingBinary {
        /// The directory searched.
        dir: std::path::PathBuf,
        /// The program not found there.
        program: &'static str,
    },
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating system's answer.
        #[source]
        source: std::io::Error,
    },
    /// Certificates could not be made.
    #[error("cannot make the cluster's certificates: {0}")]
    Pki(#[from] rcgen::Error),
    /// A component exited or never became ready; `log` is the end of its log.
    #[error("{component} of cluster {cluster} {problem}; the end of its log:\n{log}")]
    Component {
        /// The cluster.
        cluster: String,
        /// `etcd`, `kube-apiserver`, …
        component: &'static str,
        /// "exited with …" or "was not ready within …".
        problem: String,
        /// The last lines it logged.
        log: String,
    },
    /// The apiserver refused or failed a request the harness needs.
    #[error("cluster {cluster}: {what}: {source}")]
    Api {
        /// The cluster.
        cluster: String,
        /// The request.
        what: String,
        /// kube-rs's error.
        #[source]
        source: kube::Error,
    },
}

/// The harness's result.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}
