//! The federation controller: from one FederatedStatefulSet in the host cluster to sliced
//! StatefulSets in every member cluster.
//!
//! ```text
//!  host ──watch FSTS, MemberCluster──▶ Supervisor ──SpecChanged, MembersChanged──▶ Coordinator (one per FSTS)
//!                                        │  ▲                                        │  ▲   reconcile::decide (pure)
//!                         starts, Admitted  │ Identified                  writes, Subscribe  │ MemberObserved
//!                                        ▼  │                                        ▼  │
//!                                      ClusterWatcher (one per member) ──────▶ member API server
//! ```
//!
//! Every message, by sender and receiver, is in [`messages`]. The modules, by the one reason each
//! changes for (the pure ones use no actor, client or clock of their own):
//!
//! | role | modules | changes when |
//! |---|---|---|
//! | process wiring | [`app`], [`http`], [`connection`], [`host_client`], [`member_http`], [`crd_check`] | how the process starts, serves and connects |
//! | leadership | [`leader`], [`shards`], [`share`], [`shard_hash`], [`written_by`] | who may write, and in which term |
//! | actors | [`supervisor`], [`coordinator`], [`watcher`] (its pure half in `watcher::decide`), [`messages`] | the mailboxes, the I/O and the order of effects |
//! | decisions (pure) | [`reconcile`], [`order_gates`], [`rollout`], [`disruption`], [`network`], [`move_phase`], [`holds`], [`bounds`], [`safety`], [`effects`], [`fence_clock`], [`status`] | what a federation's next writes are |
//! | member side (pure) | [`member`] | what a member's objects say, and what spanset writes there |
//! | pod leases | [`pod_lease`] | how a pod is stopped before its lease lapses |
//! | host records | [`events`], [`fencing`], [`leftovers`], [`undecodable`], [`uninstall`] | what spanset writes in the host beside the status |
//! | telemetry | [`metrics`], [`runtime_metrics`], [`exposition`], [`spans`] | what an operator can see |
//!
//! The controller does not depend on the sandbox (`spanset-sim`): it meets it only over the
//! Kubernetes API, as it meets a real cluster.
#![forbid(unsafe_code)]

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
pub mod holds;
pub mod host_client;
pub mod http;
pub mod leader;
pub mod leftovers;
pub mod member;
pub mod member_http;
pub mod messages;
pub mod metrics;
pub mod move_phase;
pub mod network;
pub mod order_gates;
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
