//! What runs inside a pod of a federation with pod leases, so that the pod stops on its own
//! before spanset may take its ordinal as stopped — even when the pod's member has lost touch
//! with spanset, and whatever becomes of any one of its parts. The decisions are
//! [`spanset_controller::pod_lease::guard`]'s and [`spanset_controller::pod_lease::exec`]'s; this
//! module does the I/O around them: reading the member's pod Lease ([`lease`]), the node's clock
//! ([`boot`]), the state file the parts share ([`state`]) and the `spanset guard` loops
//! ([`run`]: `wait`, `watch`, `ready`). The first process of every other container is the
//! `spanset-guard-exec` program, of the `spanset-guard-exec` crate, which also holds the state
//! file's format and the node's clock, shared here.

pub use spanset_guard_exec::{boot, state};
pub mod lease;
pub mod run;
