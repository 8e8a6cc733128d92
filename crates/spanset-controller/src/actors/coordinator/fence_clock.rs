//! When this process learned of each member's fence: a fenced member that its watcher heard
//! from after that moment broke the fence's promise (its workloads stay dead until the shrink)
//! where spanset could see it, so what it was last seen to hold keeps counting, silent or
//! not, instead of the fence standing in for it again (found by the model checker: a cluster
//! that came back all at once after its fence, pods never evicted, then fell silent before its
//! shrink landed, and its ordinals grew elsewhere beside its running pods). A fence set anew
//! (`spanset.dev/fenced-at` changed) starts the clock again.

use std::{collections::BTreeMap, time::Instant};

use kube::ResourceExt;
use spanset_api::labels::FENCED_AT;

use crate::actors::watcher::MemberHandle;

/// Per fenced member: its `fenced-at` annotation and when this process first saw that fence.
#[derive(Debug, Default)]
pub struct FenceClock {
    seen: BTreeMap<String, (Option<String>, Instant)>,
}

impl FenceClock {
    /// Notes the members' fences as of `now` (a fence already noted keeps its time).
    pub fn note(&mut self, members: &BTreeMap<String, MemberHandle>, now: Instant) {
        self.seen.retain(|name, _| members.get(name).is_some_and(|m| m.member.spec.fenced));
        for (name, m) in members.iter().filter(|(_, m)| m.member.spec.fenced) {
            let at = m.member.annotations().get(FENCED_AT).cloned();
            match self.seen.get(name) {
                Some((noted, _)) if *noted == at => {}
                _ => {
                    self.seen.insert(name.clone(), (at, now));
                }
            }
        }
    }

    /// Whether fenced member `name` was heard from after its fence (`last_contact`).
    pub fn answered_since(&self, name: &str, last_contact: Option<Instant>) -> bool {
        self.seen.get(name).zip(last_contact).is_some_and(|((_, since), contact)| contact > *since)
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use super::*;
    use spanset_api::{MemberCluster, MemberClusterSpec};

    fn handle(fenced: bool, at: &str) -> MemberHandle {
        let mut mc = MemberCluster::new(
            "a",
            MemberClusterSpec { kubeconfig_secret: None, context: Some("a".into()), region: None, fenced },
        );
        mc.annotations_mut().insert(FENCED_AT.into(), at.into());
        MemberHandle {
            member: Arc::new(mc),
            watcher: Err("test".into()),
            connecting: false,
            duplicate: None,
            contact: Default::default(),
        }
    }

    #[test]
    fn only_contact_after_the_fence_was_seen_counts_and_a_new_fence_starts_again() {
        let t0 = Instant::now();
        let mut clock = FenceClock::default();
        clock.note(&BTreeMap::from([("a".into(), handle(true, "t1"))]), t0);
        assert!(!clock.answered_since("a", Some(t0 - Duration::from_secs(1))), "heard before the fence");
        assert!(!clock.answered_since("a", None));
        assert!(clock.answered_since("a", Some(t0 + Duration::from_secs(1))));
        // Noted again later, same fence: the time stays.
        clock.note(&BTreeMap::from([("a".into(), handle(true, "t1"))]), t0 + Duration::from_secs(5));
        assert!(clock.answered_since("a", Some(t0 + Duration::from_secs(1))));
        // Fenced anew: contact before the new fence no longer counts.
        clock.note(&BTreeMap::from([("a".into(), handle(true, "t2"))]), t0 + Duration::from_secs(5));
        assert!(!clock.answered_since("a", Some(t0 + Duration::from_secs(1))));
        // Unfenced: forgotten.
        clock.note(&BTreeMap::from([("a".into(), handle(false, "t2"))]), t0 + Duration::from_secs(6));
        assert!(!clock.answered_since("a", Some(t0 + Duration::from_secs(9))));
    }
}
