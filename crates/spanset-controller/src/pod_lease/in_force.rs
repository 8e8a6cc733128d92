//! The longest pod lease any pod of a federation may still hold (`status.podLeaseSeconds`).
//!
//! A guard takes its length from the template its pod was made from, so a new
//! `spec.failover.podLease.seconds` reaches a member's pods only as they are replaced, and a
//! cut-off member's not at all. spanset must measure every lapse with the longest length any
//! running pod may hold, or it would re-home a cut-off member's ordinals while pods made with a
//! longer lease still run there. So the length in force:
//!
//! - rises at once to a longer spec (stored before any member is written with it);
//! - falls to a shorter spec (or to none, once `podLease` is removed) only when every member
//!   that may hold something of the federation answers, is not fenced, has been seen since
//!   spanset's last write there, and holds no StatefulSet or pod whose guard is longer.

/// One member, as the rule needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberLeases {
    /// It answers, is not fenced, and was seen since spanset's last write there: what it
    /// holds is known.
    pub known: bool,
    /// The guard's lease length of its StatefulSet's template and of each of its pods
    /// (`None`: no guard).
    pub guards: Vec<Option<i32>>,
}

/// The lease length in force after this round, from the spec's, the one stored, and every
/// member that may hold something of the federation.
pub fn in_force(spec: Option<i32>, stored: Option<i32>, members: &[MemberLeases]) -> Option<i32> {
    let longest_held = members.iter().flat_map(|m| m.guards.iter().copied()).max().flatten();
    let settled = members.iter().all(|m| m.known) && longest_held.is_none_or(|l| spec.is_some_and(|s| l <= s));
    if settled { spec } else { spec.max(stored).max(longest_held) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(guards: &[Option<i32>]) -> MemberLeases {
        MemberLeases { known: true, guards: guards.to_vec() }
    }

    #[test]
    fn a_longer_lease_is_in_force_at_once() {
        assert_eq!(in_force(Some(60), Some(30), &[known(&[Some(30), Some(30)])]), Some(60));
        assert_eq!(in_force(Some(30), None, &[]), Some(30));
    }

    #[test]
    fn a_shorter_lease_only_once_no_pod_holds_the_longer_and_every_member_is_known() {
        let rolled = known(&[Some(10), Some(10)]);
        let rolling = known(&[Some(10), Some(30)]);
        assert_eq!(in_force(Some(10), Some(30), &[rolled.clone(), rolling.clone()]), Some(30), "a pod still holds 30");
        let cut_off = MemberLeases { known: false, guards: vec![Some(10)] };
        assert_eq!(in_force(Some(10), Some(30), &[rolled.clone(), cut_off]), Some(30), "a member not known");
        assert_eq!(in_force(Some(10), Some(30), &[rolled.clone(), rolled.clone()]), Some(10));
        // A pod made from a longer template than the one stored still counts.
        assert_eq!(in_force(Some(10), Some(10), &[known(&[Some(40)])]), Some(40));
    }

    #[test]
    fn without_a_pod_lease_it_stays_while_a_guarded_pod_may_run() {
        assert_eq!(in_force(None, Some(30), &[known(&[Some(30), None])]), Some(30), "not rolled yet");
        assert_eq!(in_force(None, Some(30), &[MemberLeases { known: false, guards: vec![] }]), Some(30));
        assert_eq!(in_force(None, Some(30), &[known(&[None, None])]), None, "every guard gone");
        assert_eq!(in_force(None, None, &[known(&[None])]), None);
    }
}
