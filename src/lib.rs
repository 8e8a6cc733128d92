//! spanset: one StatefulSet across several Kubernetes clusters, each pod identity running in at
//! most one cluster at a time. This package is the `spanset` binary and what only it needs:
//! [`cli`] the command line, [`audit`] the at-most-one audit of a federation's pods, [`guard`] the `spanset guard` loops a pod runs to stop itself before
//! its pod lease lapses. The rest is in the workspace's crates: `spanset-plan` (the pure
//! planner), `spanset-api` (the CRDs and the names on member objects), `spanset-controller`
//! (supervisor, watchers, coordinators, leadership) and, only with the cargo feature `sim`,
//! `spanset-sim` (the sandbox, a Kubernetes API simulator on loopback).
#![forbid(unsafe_code)]

pub mod audit;
pub mod cli;
pub mod guard;
