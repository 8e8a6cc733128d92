//! The federation controller: from one FederatedStatefulSet in the host cluster to sliced
//! StatefulSets in every member cluster.
//!
//! ```text
//!  host ──watch FSTS/MemberCluster──▶ Supervisor ──starts──▶ Coordinator (one per FSTS) ──▶ plan (pure)
//!                                        │                        │ ▲
//!                                        └──starts──▶ ClusterWatcher (one per member) ──▶ member API server
//! ```
//!
//! The actors ([`supervisor`], [`coordinator`], [`watcher`]) are thin shells; what they decide
//! lives in plain modules: [`member`] (objects, compact caches), [`reconcile`] (the coordinator's
//! decisions), [`status`]. The controller never imports the sandbox.

pub mod app;
pub mod bounds;
pub mod connection;
pub mod coordinator;
pub mod crd_check;
pub mod disruption;
pub mod effects;
pub mod events;
pub mod exposition;
pub mod fence_clock;
pub mod fencing;
pub mod gates;
pub mod holds;
pub mod host_client;
pub mod http;
pub mod labels;
pub mod leader;
pub mod leftovers;
pub mod member;
pub mod member_http;
pub mod messages;
pub mod metrics;
pub mod move_phase;
pub mod network;
pub mod pod_lease;
pub mod reconcile;
pub mod rollout;
pub mod runtime_metrics;
pub mod safety;
pub mod shard_hash;
pub mod shards;
pub mod share;
pub mod spans;
pub mod status;
pub mod supervisor;
pub mod undecodable;
pub mod uninstall;
pub mod watcher;
pub mod written_by;
