//! The API server of one simulated cluster, from the wire inwards: [`server`] (loopback
//! listeners, connections) → [`routes`] (paths to resources) → [`handlers`] (HTTP verbs,
//! bodies, content negotiation through [`negotiate`] and [`protobuf`]) → the verbs' own
//! modules: [`discovery`], [`list`], [`watch`], [`scale`], [`patch`], [`logs`], [`exec`],
//! [`eviction`]; and on the way out [`render`] and [`table`] (what `kubectl get` prints) and
//! [`response`].
//! Everything kept and every per-kind rule is below, in [`crate::store`].

pub mod auth;
pub mod discovery;
pub mod eviction;
pub mod exec;
pub mod handlers;
pub mod impersonation;
pub mod list;
pub mod logs;
pub mod negotiate;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod query;
pub mod render;
pub mod response;
pub mod reviews;
pub mod routes;
pub mod scale;
pub mod server;
pub mod table;
pub mod watch;
