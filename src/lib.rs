//! spanset: one StatefulSet across several Kubernetes clusters, each pod identity running in at
//! most one cluster at a time.
//!
//! Modules: `sim` is the sandbox (a Kubernetes API simulator on loopback; only with the cargo
//! feature `sim`, which the default build has and the production image leaves out); [`cli`] the
//! command line; [`controller`] the controller (supervisor, watchers, coordinators, leadership);
//! [`plan`] the pure planner; [`api`] the CRDs; [`human`] Kubernetes' human-readable durations;
//! [`pod_name`] the StatefulSet pod-name rule the controller and the sandbox share; [`guard`] the
//! `spanset guard` loops a pod runs to stop itself before its pod lease lapses.
#![forbid(unsafe_code)]

pub mod api;
pub mod cli;
pub mod controller;
pub mod guard;
pub mod human;
pub mod plan;
pub mod pod_name;
#[cfg(feature = "sim")]
pub mod sim;
