//! spanset: one StatefulSet across several Kubernetes clusters.
pub mod sim;
