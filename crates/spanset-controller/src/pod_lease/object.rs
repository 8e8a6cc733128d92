//! The member's pod Lease as spanset writes it: `<federation>-pods` in the federation's
//! namespace, whose annotations name the ordinals allowed in that member and the extension
//! counter (see [`super`]), labelled with the federation's uid (a guard reads only its own
//! federation's), and released for good by an uninstall ([`super::RELEASED`]);
//! `holderIdentity`, `leaseDurationSeconds` and `renewTime` are written for people reading it,
//! and never read by a guard.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use spanset_api::labels::{FEDERATION, FEDERATION_UID, MANAGED_BY, MANAGER, TERM};
use spanset_plan::Ordinals;

use super::{EXTENSION, ORDINALS, RELEASED, render_ordinals};
use crate::leadership::written_by::{self, WRITTEN_BY};

/// The name of a federation's pod Lease in each member.
pub fn lease_name(federation: &str) -> String {
    format!("{federation}-pods")
}

/// What one write stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseWrite<'a> {
    /// The federation's name and namespace.
    pub federation: (&'a str, &'a str),
    /// The member it is written in (its `holderIdentity`).
    pub member: &'a str,
    /// The ordinals it names.
    pub ordinals: &'a Ordinals,
    /// The extension counter it carries.
    pub extension: u64,
    /// `spec.failover.podLease.seconds`.
    pub lease_seconds: i32,
    /// The writer's term.
    pub term: u64,
    /// The resourceVersion it replaces (`None`: a create).
    pub rv: Option<u64>,
    /// The federation's uid.
    pub federation_uid: &'a str,
    /// It releases the pods for good.
    pub release: bool,
}

/// The Lease one write stores.
pub fn lease(w: &LeaseWrite<'_>) -> Lease {
    let (name, namespace) = w.federation;
    let mut annotations = BTreeMap::from([
        (ORDINALS.to_string(), render_ordinals(w.ordinals)),
        (EXTENSION.to_string(), w.extension.to_string()),
        (TERM.to_string(), w.term.to_string()),
        (WRITTEN_BY.to_string(), written_by::version().to_string()),
    ]);
    if w.release {
        annotations.insert(RELEASED.to_string(), "true".to_string());
    }
    Lease {
        metadata: ObjectMeta {
            name: Some(lease_name(name)),
            namespace: Some(namespace.to_string()),
            resource_version: w.rv.map(|rv| rv.to_string()),
            labels: Some(BTreeMap::from([
                (FEDERATION.to_string(), name.to_string()),
                (FEDERATION_UID.to_string(), w.federation_uid.to_string()),
                (MANAGED_BY.to_string(), MANAGER.to_string()),
            ])),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(w.member.to_string()),
            lease_duration_seconds: Some(w.lease_seconds),
            renew_time: Some(MicroTime(jiff::Timestamp::now())),
            ..Default::default()
        }),
    }
}

/// The extension counter a stored Lease carries (0 for none or one that does not parse: the
/// next write carries 1, which differs from whatever a guard saw).
pub fn extension_of(lease: &Lease) -> u64 {
    lease.metadata.annotations.as_ref().and_then(|a| a.get(EXTENSION)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_names_its_ordinals_and_counter_and_replaces_on_its_version() {
        let ordinals: Ordinals = [0, 1, 4].into_iter().collect();
        let l = lease(&LeaseWrite {
            federation: ("db", "shop"),
            member: "east",
            ordinals: &ordinals,
            extension: 7,
            lease_seconds: 30,
            term: 3,
            rv: Some(42),
            federation_uid: "u1",
            release: false,
        });
        assert_eq!(l.metadata.name.as_deref(), Some("db-pods"));
        assert_eq!(l.metadata.resource_version.as_deref(), Some("42"));
        let a = l.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[ORDINALS], "0-1,4");
        assert_eq!(extension_of(&l), 7);
        assert_eq!(l.spec.as_ref().unwrap().holder_identity.as_deref(), Some("east"));
        assert_eq!(l.metadata.labels.as_ref().unwrap()[FEDERATION_UID], "u1");
        assert!(!a.contains_key(RELEASED));
    }
}
