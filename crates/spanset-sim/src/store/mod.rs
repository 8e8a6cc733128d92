//! What the API server keeps and the rules it keeps it by: [`storage`] (an etcd-like versioned
//! map with history and watch fan-out), [`object`] (metadata accessors), [`resources`] (the
//! served resource table, built-in and custom), and [`registry`] (per-kind rules: [`defaults`],
//! [`validate`], generation, deletion), with [`selector`], the API's [`error`]s, and
//! [`views`] (one stored resource served under two groups); and, for a cluster that enforces
//! authentication, its [`tokens`], its [`rbac`] rules, their [`escalation`] prevention and
//! the [`audit`] log; every write is counted in the
//! [`account`], by [`actor`]; Services get their addresses from
//! [`service_ips`]; [`admission`] runs the validating
//! admission policies on every write that comes through the API; a CRD is deleted in two
//! phases as [`crd_deletion`] says.

pub mod account;
pub mod actor;
pub mod admission;
pub mod audit;
pub mod crd_deletion;
pub mod defaults;
pub mod error;
pub mod escalation;
pub mod object;
pub mod rbac;
pub mod registry;
pub mod resources;
pub mod schema;
pub mod selector;
pub mod service_ips;
pub mod storage;
pub mod tokens;
pub mod validate;
pub mod views;
