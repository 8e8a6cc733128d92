//! What the API server keeps and the rules it keeps it by: [`storage`] (an etcd-like versioned
//! map with history and watch fan-out), [`object`] (metadata accessors), [`resources`] (the
//! served resource table, built-in and custom), and [`registry`] (per-kind rules: [`defaults`],
//! [`validate`], generation, deletion), with [`selector`] and the API's [`error`]s.

pub mod defaults;
pub mod error;
pub mod object;
pub mod registry;
pub mod resources;
pub mod selector;
pub mod storage;
pub mod validate;
