//! What spanset writes in the host cluster beside the federation's status: Events, fences,
//! what a deleted federation left behind, what cannot be decoded, and the uninstall.
//!
//! | module | one reason to change |
//! |---|---|
//! | [`events`] | which Events are recorded, and how repeats fold |
//! | [`fencing`] | how a member is fenced and unfenced |
//! | [`leftovers`] | what a teardown that could not finish records |
//! | [`undecodable`] | what is said about a federation that does not decode |
//! | [`uninstall`] | what deleting the CRD does (never the workloads) |

pub mod events;
pub mod fencing;
pub mod leftovers;
pub mod undecodable;
pub mod uninstall;
