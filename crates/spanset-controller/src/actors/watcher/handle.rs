//! The handle on a member's watcher that the supervisor hands to coordinators: it names the
//! actor ([`ClusterWatcher`]), so it lives beside it and not in [`crate::actors::messages`],
//! which stays plain data.

use std::{collections::BTreeMap, sync::Arc};

use actix::prelude::*;
use spanset_api::MemberCluster;

use super::ClusterWatcher;
use crate::member::contact_clock::ContactClock;

/// A member as the supervisor knows it: its MemberCluster and its watcher, or why there is none.
#[derive(Clone)]
pub struct MemberHandle {
    /// The MemberCluster object.
    pub member: Arc<MemberCluster>,
    /// Its watcher, or why it could not be started (bad kubeconfig Secret…).
    pub watcher: Result<Addr<ClusterWatcher>, String>,
    /// Its client is being built: neither usable nor unusable yet.
    pub connecting: bool,
    /// It reaches the same cluster as another MemberCluster, which is used instead: why (its
    /// watcher is then `Err` with the same words). Such a member gets no slice and is not
    /// observed: the pods it would see are the other member's.
    pub duplicate: Option<String>,
    /// When the member last answered its watcher (fresher than the watcher's last report:
    /// probes note it here without reporting to every federation).
    pub contact: ContactClock,
}

/// The supervisor tells coordinators the current members (with their watchers' handles).
#[derive(Clone, Message)]
#[rtype(result = "()")]
pub struct MembersChanged {
    /// Members by name.
    pub members: Arc<BTreeMap<String, MemberHandle>>,
    /// The MemberCluster watch has listed once: a name missing here is truly unknown.
    pub listed: bool,
}
