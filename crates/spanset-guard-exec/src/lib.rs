//! The part of a spanset pod guard that runs in every container of a guarded pod but the
//! guard's own: `spanset-guard-exec`, the container's first process, which starts the
//! container's command only under a valid lease and ends the container by the lease's deadline
//! whatever becomes of the guard's watch ([`decision`] decides, [`run`] carries it out). The
//! guard's state file ([`state`]) and the node's clock ([`boot`]) are shared with `spanset guard`,
//! which writes the file.
#![forbid(unsafe_code)]

pub mod boot;
pub mod decision;
pub mod run;
pub mod state;

/// The program's file name, beside `spanset` in its image and in the directory `spanset guard
/// wait` copies it to.
pub const PROGRAM: &str = "spanset-guard-exec";
