//! The sandbox around the clusters: a [`fleet`] of simulated clusters started together, the
//! [`admin`] API that injects faults and reads the ledger and disks, and the [`kubeconfig`]
//! that points kubectl and kube-rs at them.

pub mod admin;
pub mod fleet;
pub mod kubeconfig;
pub mod tls;
