//! spanset: one StatefulSet across several Kubernetes clusters, each pod identity running in at
//! most one cluster at a time.
//!
//! Modules: [`sim`] is the sandbox (a Kubernetes API simulator on loopback); [`cli`] the
//! command line; [`controller`] the controller (supervisor, watchers, coordinators, leadership);
//! [`plan`] the pure planner; [`api`] the CRDs.
#![forbid(unsafe_code)]

pub mod api;
pub mod cli;
pub mod controller;
pub mod plan;
pub mod sim;
