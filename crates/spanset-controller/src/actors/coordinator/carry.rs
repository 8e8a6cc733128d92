//! The objects a federation carries into its members (`spec.migration.carry`), read from the
//! host and relabelled for the members, and what refuses a carry before anything is written:
//!
//! - a Secret without its owner's consent, the label [`CARRY`]` = "true"`. spanset's host
//!   identity may read the Secrets a federation names; the federation's author need not. Without
//!   the consent, an author who may create federations but not read a Secret could have it
//!   copied into a member and mount it there. The label is read from the Secret itself, with its
//!   data, on every copy: removing it stops the next one. ConfigMaps need no consent (they are
//!   not for confidential data, and Kubernetes' own `view` role reads them, not Secrets).
//! - an object spanset's host identity may not read (403): the host's RBAC grants it
//!   ClusterRole `spanset-carry` only in the namespaces an administrator chose (`deploy/rbac.yaml`).
//!
//! Either refusal is the federation's `Blocked` condition, naming the field, the object and
//! what is missing, and nothing is written in any member while it stands (as for a member's
//! refusal, it is checked again after [`super::REFUSAL_RECHECK`]).

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client, ResourceExt};
use spanset_api::{FederatedStatefulSet, labels::CARRY};

use crate::{actors::messages::Carried, decisions::reconcile::Refusal, member::objects::ownership_labels};

/// The `Blocked` reason of a Secret its owner did not let federations carry.
pub const NOT_ALLOWED: &str = "CarryNotAllowed";
/// The `Blocked` reason of a carried object spanset's host identity may not read.
pub const UNREADABLE: &str = "CarryUnreadable";

/// Why the carried objects cannot be had.
#[derive(Debug)]
pub enum Unavailable {
    /// The federation may not carry one: it is refused, nothing is written anywhere.
    Refused(Refusal),
    /// A read failed otherwise (a missing object, a host that does not answer): the round ends
    /// and is tried again.
    Failed(String),
}

/// Whether a Secret's owner lets federations carry it.
pub fn may_carry(secret: &Secret) -> bool {
    secret.labels().get(CARRY).is_some_and(|v| v == "true")
}

/// The refusal of `spec.migration.carry[i]`, a Secret without its owner's consent.
pub fn not_allowed(i: usize, ns: &str, name: &str) -> Refusal {
    Refusal {
        reason: NOT_ALLOWED,
        message: format!(
            "spec.migration.carry[{i}]: Secret {ns}/{name} is not marked for carrying: spanset copies a Secret into \
             the members only when it is labelled {CARRY}=true, which only someone who may change the Secret can set \
             (kubectl -n {ns} label secret {name} {CARRY}=true); nothing is written in any member"
        ),
    }
}

/// The refusal of `spec.migration.carry[i]`, an object the host refuses spanset to read.
pub fn unreadable(i: usize, kind: &str, ns: &str, name: &str, why: &str) -> Refusal {
    Refusal {
        reason: UNREADABLE,
        message: format!(
            "spec.migration.carry[{i}]: spanset may not read {kind} {ns}/{name} in the host ({why}): bind ClusterRole \
             spanset-carry to spanset's ServiceAccount in namespace {ns} (kubectl -n {ns} create rolebinding \
             spanset-carry --clusterrole=spanset-carry --serviceaccount=spanset-system:spanset); nothing is written \
             in any member"
        ),
    }
}

/// A failed read of `spec.migration.carry[i]`: refused if the host forbids it, failed otherwise.
fn read_failed(i: usize, kind: &str, ns: &str, name: &str, e: kube::Error) -> Unavailable {
    match e {
        kube::Error::Api(s) if s.code == 403 => Unavailable::Refused(unreadable(i, kind, ns, name, &s.message)),
        e => Unavailable::Failed(format!("spec.migration.carry: {kind} {ns}/{name}: {e}")),
    }
}

/// The carried Secrets and ConfigMaps, read from the host and relabelled for members, or why
/// they cannot be.
pub async fn carried(host: &Client, fsts: &FederatedStatefulSet) -> Result<Vec<Carried>, Unavailable> {
    let ns = fsts.namespace().unwrap_or_default();
    let mut out = Vec::new();
    for (i, c) in fsts.spec.migration.carry.iter().enumerate() {
        let labels = ownership_labels(fsts);
        match c.kind.as_str() {
            "Secret" => {
                let s = Api::<Secret>::namespaced(host.clone(), &ns)
                    .get(&c.name)
                    .await
                    .map_err(|e| read_failed(i, "Secret", &ns, &c.name, e))?;
                if !may_carry(&s) {
                    return Err(Unavailable::Refused(not_allowed(i, &ns, &c.name)));
                }
                let mut copy =
                    Secret { data: s.data, type_: s.type_, string_data: s.string_data, ..Default::default() };
                copy.metadata.name = Some(c.name.clone());
                copy.metadata.namespace = Some(ns.clone());
                copy.metadata.labels = Some(labels);
                out.push(Carried::Secret(copy));
            }
            "ConfigMap" => {
                let m = Api::<ConfigMap>::namespaced(host.clone(), &ns)
                    .get(&c.name)
                    .await
                    .map_err(|e| read_failed(i, "ConfigMap", &ns, &c.name, e))?;
                let mut copy = ConfigMap { data: m.data, binary_data: m.binary_data, ..Default::default() };
                copy.metadata.name = Some(c.name.clone());
                copy.metadata.namespace = Some(ns.clone());
                copy.metadata.labels = Some(labels);
                out.push(Carried::ConfigMap(copy));
            }
            other => {
                return Err(Unavailable::Failed(format!(
                    "spec.migration.carry: kind {other:?} cannot be carried (Secret or ConfigMap)"
                )));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(labels: &[(&str, &str)]) -> Secret {
        let mut s = Secret::default();
        s.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        s
    }

    #[test]
    fn only_a_secret_its_owner_labelled_is_carried() {
        assert!(may_carry(&secret(&[(CARRY, "true")])));
        for no in [secret(&[]), secret(&[(CARRY, "false")]), secret(&[(CARRY, "yes")]), Secret::default()] {
            assert!(!may_carry(&no), "{:?}", no.metadata.labels);
        }
    }

    #[test]
    fn a_refusal_names_the_field_the_object_and_what_it_lacks() {
        let r = not_allowed(1, "shop", "creds");
        assert_eq!(r.reason, "CarryNotAllowed");
        assert!(r.message.starts_with("spec.migration.carry[1]: Secret shop/creds is not marked for carrying"));
        assert!(r.message.contains("kubectl -n shop label secret creds spanset.dev/carry=true"), "{}", r.message);
        let r = unreadable(0, "ConfigMap", "shop", "conf", "configmaps \"conf\" is forbidden: …");
        assert_eq!(r.reason, "CarryUnreadable");
        assert!(r.message.starts_with("spec.migration.carry[0]: spanset may not read ConfigMap shop/conf in the host"));
        assert!(r.message.contains("kubectl -n shop create rolebinding spanset-carry --clusterrole=spanset-carry"));
    }
}
