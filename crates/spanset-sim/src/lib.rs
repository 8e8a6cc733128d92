//! The sandbox: a Kubernetes API simulator that serves the real HTTP API on loopback, so that
//! the real `kubectl` and kube-rs clients work against it unchanged.
//!
//! Five layers, each a folder:
//! - [`api`]: the API server as seen on the wire — listeners, routes, negotiation, handlers,
//!   discovery, lists, watches, tables, patches.
//! - [`store`]: what the API server keeps and its per-kind rules — storage, objects, the served
//!   resource table, the registry with defaults, validation and selectors.
//! - [`cluster`]: the simulated cluster behind the API — its state, and the StatefulSet
//!   controller, kubelets, volumes, garbage collector, faults and the identity ledger.
//! - [`sandbox`]: several clusters started together, the admin API and the kubeconfig.
//! - [`dns`]: each cluster's DNS server, answering for `cluster.local` from its store as
//!   CoreDNS does.
//! - [`cli`]: its two commands, `spanset sim` and `spanset sim-ctl`.
//!
//! It depends on no other crate of spanset's: it is the independent oracle the controller is
//! tested against, as kwok and envtest share no code with the controllers they serve.
//!
//! Sized for 100 members beside the controller on one host: a cluster's simulated components
//! sleep until something changes, a fault is injected, or a deadline of their own comes due
//! ([`cluster::controller_loop`]), so an idle sandbox costs almost nothing whatever its size;
//! TLS listeners (`--tls`, `--auth`) offer HTTP/2 by ALPN, so one connection carries many
//! watches ([`api::server`]).

#![forbid(unsafe_code)]

pub mod api;
pub mod cli;
pub mod cluster;
pub mod dns;
mod human;
mod pod_name;
pub mod sandbox;
pub mod scratch;
pub mod store;
