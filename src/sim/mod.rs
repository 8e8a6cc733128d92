//! The sandbox: a Kubernetes API simulator that serves the real HTTP API on loopback, so that
//! the real `kubectl` and kube-rs clients work against it unchanged.
//!
//! Layers, from the wire inwards: [`server`] (listeners, connections) → [`handlers`] (HTTP
//! decoding, content negotiation) → [`registry`] (per-kind rules: defaults, validation,
//! generation, deletion) → [`storage`] (versioned map, history, watch fan-out).

pub mod admin;
pub mod cluster;
pub mod controller_loop;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod faults;
pub mod fleet;
pub mod gc;
pub mod handlers;
pub mod kubeconfig;
pub mod kubelet;
pub mod ledger;
pub mod list;
pub mod negotiate;
pub mod object;
pub mod patch;
pub mod protobuf;
pub mod query;
pub mod registry;
pub mod render;
pub mod resources;
pub mod response;
pub mod routes;
pub mod scale;
pub mod selector;
pub mod server;
pub mod statefulset;
pub mod storage;
pub mod table;
pub mod validate;
pub mod volumes;
pub mod watch;
