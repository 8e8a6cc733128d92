//! One cluster, one MemberCluster. A member's identity is the uid of its `kube-system`
//! Namespace, the cluster id of the multi-cluster Services API (KEP-2149). Two MemberClusters
//! that reach the same cluster would each write the same StatefulSet with a different slice (it
//! flaps) and each report the other's pods as its own (identity conflicts), so only one of them
//! is used; the other is refused (`DuplicateCluster`).
//!
//! Which one is kept, deterministically and without ever switching a member in use:
//! 1. one already in use (admitted in this process) is never displaced;
//! 2. otherwise the first by rank: a member not recorded as refused before (so that a restart
//!    keeps what the previous leader kept), then the older `creationTimestamp`, then the name;
//! 3. a member waits (unused, not refused) while one ranked before it has not had its first
//!    probe yet, or, its identity not read yet, last recorded the same id: the one before is
//!    kept if it answers with it. One whose first probe found it silent does not hold others
//!    back (and is refused if it answers later with an id in use).
//!
//! A member whose identity cannot be read (the member refuses to show `kube-system`, or has
//! none) is used without an id, with a warning: refusing it would stop every member whose RBAC
//! predates the rule, and it is no worse than before identities were read.
//!
//! Pure: no I/O, no actors.

/// One MemberCluster as the supervisor knows it, for the admission of identities.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claimant {
    /// Its name.
    pub name: String,
    /// Its `creationTimestamp` (RFC 3339; absent sorts last).
    pub created: Option<String>,
    /// The id its current watcher read: `None` not read yet, `Some(None)` unreadable.
    pub read: Option<Option<String>>,
    /// `status.clusterID` as last recorded (by this or an earlier process).
    pub recorded: Option<String>,
    /// Its status says it was refused as a duplicate.
    pub recorded_refused: bool,
    /// In use in this process.
    pub admitted: bool,
    /// Refused in this process.
    pub refused: bool,
    /// Its first probe is over (answered or not), or it has no watcher to probe it.
    pub probed: bool,
}

impl Claimant {
    fn rank(&self) -> (bool, bool, &str, &str) {
        (self.recorded_refused, self.created.is_none(), self.created.as_deref().unwrap_or(""), self.name.as_str())
    }

    /// The id this member claims: the one read, else the one recorded.
    fn claim(&self) -> Option<&str> {
        match &self.read {
            Some(read) => read.as_deref(),
            None => self.recorded.as_deref(),
        }
    }
}

/// What becomes of a member whose identity was read.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Used.
    Admit,
    /// Not used, ever, while the other lives: the message names the other and the id.
    Refuse(String),
    /// Not used yet: the message names the member it waits for.
    Wait(String),
}

/// Decides every member whose identity is read and that is neither admitted nor refused, in
/// rank order (each decision sees the ones before it): `(name, admission)`.
pub fn settle(members: &mut [Claimant]) -> Vec<(String, Admission)> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|a, b| members[*a].rank().cmp(&members[*b].rank()));
    let mut out = Vec::new();
    for i in order {
        let m = &members[i];
        if m.admitted || m.refused {
            continue;
        }
        let Some(read) = &m.read else { continue };
        let decision = admission(m, read.as_deref(), members);
        match &decision {
            Admission::Admit => members[i].admitted = true,
            Admission::Refuse(_) => members[i].refused = true,
            Admission::Wait(_) => {}
        }
        out.push((members[i].name.clone(), decision));
    }
    out
}

fn admission(m: &Claimant, id: Option<&str>, members: &[Claimant]) -> Admission {
    let Some(id) = id else { return Admission::Admit };
    let others = || members.iter().filter(|o| o.name != m.name && !o.refused);
    if let Some(kept) = others().find(|o| o.admitted && o.read.as_ref().and_then(|r| r.as_deref()) == Some(id)) {
        return Admission::Refuse(format!(
            "reaches the same cluster as MemberCluster {:?} (clusterID {id}, the uid of its kube-system \
             Namespace), which is in use: nothing is written through {:?}; delete one of the two \
             MemberClusters (the other is used after a fresh probe)",
            kept.name, m.name
        ));
    }
    let before = others().filter(|o| o.rank() < m.rank() && !o.admitted);
    if let Some(first) = before.clone().find(|o| o.read.is_none() && !o.probed) {
        return Admission::Wait(format!(
            "waits for the first probe of MemberCluster {:?}, which ranks first (older, or kept before) and \
             may reach the same cluster",
            first.name
        ));
    }
    if let Some(before) = before.into_iter().find(|o| o.claim() == Some(id)) {
        return Admission::Wait(format!(
            "reaches the cluster MemberCluster {:?} last reached (clusterID {id}); {:?} ranks first \
             (older, or kept before) and is kept if it answers with that id, so {:?} waits for it",
            before.name, before.name, m.name
        ));
    }
    Admission::Admit
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, created: &str, read: Option<Option<&str>>) -> Claimant {
        Claimant {
            name: name.into(),
            created: Some(created.into()),
            probed: read.is_some(),
            read: read.map(|r| r.map(str::to_string)),
            ..Default::default()
        }
    }

    #[test]
    fn of_two_members_reaching_one_cluster_the_older_is_kept_whichever_answers_first() {
        let mut ms = vec![
            member("east", "2026-01-01T00:00:00Z", None),
            member("east-2", "2026-01-02T00:00:00Z", Some(Some("uid-e"))),
        ];
        assert!(matches!(&settle(&mut ms)[..], [(_, Admission::Wait(_))]));
        ms[0].read = Some(Some("uid-e".into()));
        ms[0].probed = true;
        let out = settle(&mut ms);
        assert_eq!(out[0], ("east".to_string(), Admission::Admit));
        assert!(matches!(&out[1], (n, Admission::Refuse(_)) if n == "east-2"), "{out:?}");
    }

    #[test]
    fn of_two_members_reaching_one_cluster_the_older_is_kept_and_the_other_refused_naming_it() {
        let mut ms = vec![
            member("east-2", "2026-01-02T00:00:00Z", Some(Some("uid-e"))),
            member("east", "2026-01-01T00:00:00Z", Some(Some("uid-e"))),
            member("west", "2026-01-03T00:00:00Z", Some(Some("uid-w"))),
        ];
        let out = settle(&mut ms);
        assert_eq!(out[0], ("east".to_string(), Admission::Admit));
        let (name, Admission::Refuse(why)) = &out[1] else { panic!("{out:?}") };
        assert_eq!(name, "east-2");
        assert!(why.contains(r#"MemberCluster "east""#) && why.contains("clusterID uid-e"), "{why}");
        assert_eq!(out[2], ("west".to_string(), Admission::Admit));
        // Deciding again changes nothing.
        assert!(settle(&mut ms).is_empty());
    }

    #[test]
    fn a_member_in_use_is_never_displaced_by_an_older_one_that_answers_later() {
        let mut ms = vec![
            member("east", "2026-01-01T00:00:00Z", None),
            member("east-2", "2026-01-02T00:00:00Z", Some(Some("uid-e"))),
        ];
        // The younger waits for the older's first probe...
        let out = settle(&mut ms);
        assert!(
            matches!(&out[..], [(n, Admission::Wait(why))] if n == "east-2" && why.contains("\"east\"")),
            "{out:?}"
        );
        // ... which found east silent: east-2 is used, and east is refused when it answers.
        ms[0].probed = true;
        assert_eq!(settle(&mut ms), vec![("east-2".to_string(), Admission::Admit)]);
        ms[0].read = Some(Some("uid-e".into()));
        let out = settle(&mut ms);
        assert!(
            matches!(&out[..], [(n, Admission::Refuse(why))] if n == "east" && why.contains("\"east-2\"")),
            "{out:?}"
        );
    }

    #[test]
    fn after_a_restart_the_member_kept_before_is_kept_again_whichever_answers_first() {
        // east-2 is older but was refused before: east, kept before, ranks first.
        let mut ms = vec![
            Claimant { recorded: Some("uid-e".into()), ..member("east", "2026-01-02T00:00:00Z", None) },
            Claimant {
                recorded: Some("uid-e".into()),
                recorded_refused: true,
                ..member("east-2", "2026-01-01T00:00:00Z", Some(Some("uid-e")))
            },
        ];
        let out = settle(&mut ms);
        assert!(
            matches!(&out[..], [(n, Admission::Wait(why))] if n == "east-2" && why.contains("\"east\"")),
            "{out:?}"
        );
        ms[0].read = Some(Some("uid-e".into()));
        let out = settle(&mut ms);
        assert_eq!(out[0], ("east".to_string(), Admission::Admit));
        assert!(matches!(&out[1], (n, Admission::Refuse(_)) if n == "east-2"), "{out:?}");
    }

    #[test]
    fn a_waiting_member_is_used_when_the_one_before_it_answers_with_another_id() {
        let mut ms = vec![
            Claimant { recorded: Some("old".into()), ..member("a", "2026-01-01T00:00:00Z", None) },
            member("b", "2026-01-02T00:00:00Z", Some(Some("old"))),
        ];
        assert!(matches!(&settle(&mut ms)[..], [(_, Admission::Wait(_))]));
        ms[0].read = Some(Some("rebuilt".into()));
        assert_eq!(settle(&mut ms), vec![("a".to_string(), Admission::Admit), ("b".to_string(), Admission::Admit)]);
    }

    #[test]
    fn a_member_whose_identity_cannot_be_read_is_used_without_an_id() {
        let mut ms =
            vec![member("a", "2026-01-01T00:00:00Z", Some(None)), member("b", "2026-01-02T00:00:00Z", Some(None))];
        assert_eq!(settle(&mut ms), vec![("a".to_string(), Admission::Admit), ("b".to_string(), Admission::Admit)]);
    }
}
