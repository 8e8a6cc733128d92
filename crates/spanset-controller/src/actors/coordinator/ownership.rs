//! A federation's fencing token: before a coordinator writes anything for its federation in a
//! term, it raises the federation's token (`spanset.dev/owner-term`) to that term, in a write
//! conditional on the resourceVersion it read, and names itself (`spanset.dev/owner`).
//!
//! The token is the term of the owner's shard Lease, the same number every member object it
//! writes carries in `spanset.dev/term`. So when federations change hands between replicas
//! (a shard's Lease taken over, or `--shards` changed so that a federation falls in another
//! shard), the new owner's first write is the token raise, and from then on:
//! - a stale owner's write of the federation's status is refused (its resourceVersion is
//!   older than the raise);
//! - a stale owner's member writes are refused by each member's gate, which sees the newer
//!   term on the federation's objects there, as a stale leader's are;
//! - a stale owner that reads the federation sees a token above its own term and stops acting
//!   for its shard (it steps down, and takes any later term above the token).

use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams},
};
use serde_json::json;
use spanset_api::{FederatedStatefulSet, labels::FINALIZER};

use crate::leadership::written_by::{self, WRITTEN_BY};

/// Annotation on a FederatedStatefulSet: the term of the process that acts for it.
pub const OWNER_TERM: &str = "spanset.dev/owner-term";

/// Annotation on a FederatedStatefulSet: who acts for it (identity and shard), for people.
pub const OWNER: &str = "spanset.dev/owner";

/// The federation's token, if it has one that reads as a number.
pub fn token(fsts: &FederatedStatefulSet) -> Option<u64> {
    fsts.annotations().get(OWNER_TERM)?.parse().ok()
}

/// What a coordinator leading in `term`, as `owner`, must do before it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenStanding {
    /// The token is this term, raised by this owner: write on.
    Owned,
    /// Raise the token first.
    Raise,
    /// Another owner holds a token at or above `term`: this process's shard leadership is
    /// stale (or another layout's owner took the federation); it must not write.
    Superseded {
        /// The token found.
        token: u64,
        /// Who holds it, as recorded.
        owner: String,
    },
}

/// Judges the federation's token against `term` and `owner` (pure).
pub fn standing(fsts: &FederatedStatefulSet, term: u64, owner: &str) -> TokenStanding {
    let recorded = fsts.annotations().get(OWNER).cloned().unwrap_or_default();
    match token(fsts) {
        Some(t) if t == term && recorded == owner => TokenStanding::Owned,
        Some(t) if t >= term => TokenStanding::Superseded { token: t, owner: recorded },
        _ => TokenStanding::Raise,
    }
}

/// How a raise ended.
#[derive(Debug)]
pub enum Raised {
    /// The federation as stored with the new token.
    Stored(Box<FederatedStatefulSet>),
    /// The federation changed since it was read (409): read the newer one and judge again.
    Conflict,
    /// Any other failure, said.
    Failed(String),
}

/// The patch that raises the token to `term`, naming `owner`, conditional on the
/// resourceVersion `fsts` was read at. A federation not being deleted that lacks spanset's
/// finalizer gets it in the same write (the first reconcile would add it next: one write
/// instead of two for each new federation).
pub fn raise_patch(fsts: &FederatedStatefulSet, term: u64, owner: &str) -> serde_json::Value {
    let mut patch = json!({"metadata": {
        "resourceVersion": fsts.resource_version(),
        "annotations": {OWNER_TERM: term.to_string(), OWNER: owner, WRITTEN_BY: written_by::version()},
    }});
    let has = fsts.finalizers().iter().any(|f| f == FINALIZER);
    if fsts.metadata.deletion_timestamp.is_none() && !has {
        let mut finalizers = fsts.finalizers().to_vec();
        finalizers.push(FINALIZER.to_string());
        patch["metadata"]["finalizers"] = json!(finalizers);
    }
    patch
}

/// Raises the token (see [`raise_patch`]).
pub async fn raise(host: &Client, fsts: &FederatedStatefulSet, term: u64, owner: &str) -> Raised {
    let api: Api<FederatedStatefulSet> = Api::namespaced(host.clone(), &fsts.namespace().unwrap_or_default());
    let patch = raise_patch(fsts, term, owner);
    match api.patch(&fsts.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(stored) => Raised::Stored(Box::new(stored)),
        Err(kube::Error::Api(s)) if s.code == 409 => Raised::Conflict,
        Err(e) => Raised::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fsts(annotations: &[(&str, &str)]) -> FederatedStatefulSet {
        let spec: spanset_api::FederatedStatefulSetSpec = serde_yaml::from_str(
            "replicas: 1\ntemplate:\n  selector: {matchLabels: {app: r}}\n  serviceName: r\n  template:\n    \
             metadata: {labels: {app: r}}\n    spec: {containers: [{name: r, image: r}]}\nplacement:\n  \
             clusters: [{name: a}]\n",
        )
        .expect("a spec");
        let mut f = FederatedStatefulSet::new("redis", spec);
        f.metadata.namespace = Some("db".into());
        f.metadata.annotations = Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        f
    }

    #[test]
    fn a_federation_without_a_token_is_raised_first() {
        assert_eq!(standing(&fsts(&[]), 3, "me"), TokenStanding::Raise);
        assert_eq!(standing(&fsts(&[(OWNER_TERM, "junk")]), 3, "me"), TokenStanding::Raise);
    }

    #[test]
    fn an_older_token_is_raised_and_its_own_is_written_on() {
        assert_eq!(standing(&fsts(&[(OWNER_TERM, "2"), (OWNER, "other")]), 3, "me"), TokenStanding::Raise);
        assert_eq!(standing(&fsts(&[(OWNER_TERM, "3"), (OWNER, "me")]), 3, "me"), TokenStanding::Owned);
    }

    #[test]
    fn a_token_at_or_above_the_term_held_by_another_stops_the_writer() {
        let newer = fsts(&[(OWNER_TERM, "9"), (OWNER, "other")]);
        assert_eq!(standing(&newer, 3, "me"), TokenStanding::Superseded { token: 9, owner: "other".into() });
        // The same number under another owner (another shard layout's Lease): not this one's.
        let same = fsts(&[(OWNER_TERM, "3"), (OWNER, "other")]);
        assert_eq!(standing(&same, 3, "me"), TokenStanding::Superseded { token: 3, owner: "other".into() });
    }

    #[test]
    fn a_new_federation_gets_its_finalizer_in_the_raise_and_a_deleted_one_does_not() {
        let new = fsts(&[]);
        let p = raise_patch(&new, 4, "me");
        assert_eq!(p["metadata"]["annotations"][OWNER_TERM], "4");
        assert_eq!(p["metadata"]["annotations"][WRITTEN_BY], written_by::version());
        assert_eq!(p["metadata"]["finalizers"], json!([FINALIZER]));
        let mut deleting = fsts(&[]);
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()));
        assert!(raise_patch(&deleting, 4, "me")["metadata"].get("finalizers").is_none());
        let mut kept = fsts(&[]);
        kept.metadata.finalizers = Some(vec!["other".into(), FINALIZER.into()]);
        assert!(raise_patch(&kept, 4, "me")["metadata"].get("finalizers").is_none(), "already there");
    }
}
