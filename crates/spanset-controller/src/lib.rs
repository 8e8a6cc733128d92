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
//! Every message, by sender and receiver, is in [`actors::messages`]. The folders, by the one
//! reason each changes for (each folder's own page has the table of its modules; the pure ones
//! use no actor, client or clock of their own, which `tests/layering.rs` checks):
//!
//! | folder | what it holds | changes when |
//! |---|---|---|
//! | [`runtime`] | the process: wiring, endpoints, the host's and members' HTTP clients, the CRD check | how the process starts, serves and connects |
//! | [`leadership`] | the leader Lease and its terms, the shards, the writer's version stamp | who may write, and in which term |
//! | [`actors`] | the supervisor, the coordinators, the watchers and their messages | the mailboxes, the I/O and the order of effects |
//! | [`decisions`] (pure) | one round's decision, the StatefulSet order, rollouts, budgets, moves, status | what a federation's next writes are |
//! | [`member`] | what a member's objects say, and what spanset writes and checks there | what spanset reads and writes in a member |
//! | [`pod_lease`] | the pod leases and the guard that stops a pod before its lease lapses | how a pod is stopped before its lease lapses |
//! | [`host`] | Events, fences, leftovers, the undecodable, the uninstall | what spanset writes in the host beside the status |
//! | [`telemetry`] | the Prometheus series, their exposition, the tracing spans | what an operator can see |
//!
//! The controller does not depend on the sandbox (`spanset-sim`): it meets it only over the
//! Kubernetes API, as it meets a real cluster.
#![forbid(unsafe_code)]

pub mod actors;
pub mod decisions;
pub mod host;
pub mod leadership;
pub mod member;
pub mod pod_lease;
pub mod runtime;
pub mod telemetry;
