//! `spanset guard`: what runs inside a pod of a federation with pod leases, so that the pod stops
//! on its own before spanset may take its ordinal as stopped — even when the pod's member has
//! lost touch with spanset. The decisions are [`crate::controller::pod_lease::guard`]'s; this
//! module does the I/O around them: reading the member's pod Lease ([`lease`]), the node's
//! clock ([`boot`]), the hand-over from the init container to the sidecar ([`handoff`]) and
//! stopping the pod's processes ([`pod`]), in the two loops of [`run`].

pub mod boot;
pub mod handoff;
pub mod lease;
pub mod pod;
pub mod run;
