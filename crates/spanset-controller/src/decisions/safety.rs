//! The rules that keep each pod identity single and each volume whole, named one by one so
//! that the model checker (`crates/spanset-controller/tests/model_check/model_check.rs`) can switch one off and show the violation
//! it prevents. `spanset run` always runs with [`Rules::ALL`]: no flag, file or field builds
//! another set; only the model's planted-bug tests do.

/// Which safety rules hold. Each field names one rule and where it lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rules {
    /// A move is recorded in `status.moves` before the member writes that act on it
    /// ([`crate::decisions::effects`]): a controller that restarts between the two resumes the move
    /// instead of forgetting that a source gave an ordinal up.
    pub status_before_write: bool,
    /// A new leader stamps its term on every member StatefulSet before it moves anything, and
    /// a watcher writes only in the term its process leads in and stops at a member that
    /// carries a newer one ([`term_allows`]): a stale leader's writes fail.
    pub term_check: bool,
    /// A member's absences confirm nothing until a list made after its last write, once its
    /// StatefulSet controller observed that write: an ordinal grows elsewhere only then.
    pub confirmation: bool,
    /// A moved ordinal grows in its destination only once its storage was dealt with
    /// ([`crate::decisions::reconcile::move_storage::gate`]): it never starts on a fresh volume beside its own.
    pub handover_gate: bool,
    /// An ordinal whose volumes are in another member is grown only through a recorded move,
    /// so that the handover gate holds it (a move cancelled after its source gave the ordinal
    /// up, or forgotten in a crash, is recorded again). Found by the model checker.
    pub orphan_moves: bool,
    /// A fenced member that answers again gets its StatefulSet shrunk to nothing before any
    /// other write, then its pods deleted.
    pub shrink_first: bool,
    /// A StatefulSet write that got no answer makes the member's observation unconfirmed
    /// until the object is read again: the write may have landed.
    pub uncertain_writes: bool,
    /// With `storage: Detached` the claims an ordinal leaves in its source are retired only
    /// once it is Ready elsewhere ([`crate::decisions::reconcile::move_storage::left_behind`]), never
    /// before its grow: until then they are its data, and its way back.
    pub retire_after_ready: bool,
    /// A retirement deletes exactly the claim its decision observed, by uid and
    /// resourceVersion ([`claim_precondition`]): a retirement that lands late (its answer
    /// lost) never deletes a claim made since, that the ordinal runs on.
    pub exact_claim_versions: bool,
    /// With pod leases, a pod's guard stops it by its deadline, before the lease can have
    /// lapsed ([`crate::pod_lease::guard`]); without it the guard stops a pod only when the
    /// lease no longer names it.
    pub lease_deadline: bool,
    /// With pod leases, spanset takes an unreachable member's pods as stopped only once the
    /// lease has lapsed on its own clock with the drift of both clocks and the guard's poll
    /// counted ([`crate::pod_lease::clock`]), not at `latest_landing + L`.
    pub lease_drift_margin: bool,
    /// With pod leases, an extension that got no answer counts as landing as late as it may
    /// (`sent + W`), not as never sent: the lapse is measured from it.
    pub lease_lost_extensions: bool,
    /// With pod leases, the first process of every guarded container ends it by the deadline
    /// the pod's watch last posted ([`crate::pod_lease::exec`]), whatever became of the watch
    /// since (crashed, stopped, backing off); without it a container stops only when a running
    /// watch says so.
    pub exec_deadline: bool,
}

impl Rules {
    /// Every rule: what `spanset run` runs with.
    pub const ALL: Rules = Rules {
        status_before_write: true,
        term_check: true,
        confirmation: true,
        handover_gate: true,
        orphan_moves: true,
        shrink_first: true,
        uncertain_writes: true,
        retire_after_ready: true,
        exact_claim_versions: true,
        lease_deadline: true,
        lease_drift_margin: true,
        lease_lost_extensions: true,
        exec_deadline: true,
    };
}

impl Default for Rules {
    fn default() -> Self {
        Rules::ALL
    }
}

/// Why a watcher refuses to send a write of `term`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermRefusal {
    /// This process does not lead in `term` (any more).
    NotLeading,
    /// The member carries a newer term: a newer leader stamped it; this one must step down.
    Superseded {
        /// The newest term seen on the member's objects.
        newest: u64,
    },
}

/// The watcher's term check before a member write: the process leads in `term` (`leading`
/// is the term it leads in now, if any), and the member carries no newer term than `term`.
pub fn term_allows(rules: &Rules, leading: Option<u64>, member_newest: u64, term: u64) -> Result<(), TermRefusal> {
    if !rules.term_check {
        return Ok(());
    }
    if leading != Some(term) {
        return Err(TermRefusal::NotLeading);
    }
    if member_newest > term {
        return Err(TermRefusal::Superseded { newest: member_newest });
    }
    Ok(())
}

/// The preconditions a claim's retirement is sent with: the uid and resourceVersion of the
/// claim as its decision observed it; none (whatever claim bears the name when the request
/// lands) only in the model's planted-bug test.
pub fn claim_precondition(rules: &Rules, uid: &str, rv: u64) -> Option<(String, u64)> {
    rules.exact_claim_versions.then(|| (uid.to_string(), rv))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_goes_only_in_the_term_this_process_leads_in_and_no_newer_one_seen() {
        let all = Rules::ALL;
        assert_eq!(term_allows(&all, Some(3), 3, 3), Ok(()));
        assert_eq!(term_allows(&all, Some(4), 3, 3), Err(TermRefusal::NotLeading));
        assert_eq!(term_allows(&all, None, 0, 3), Err(TermRefusal::NotLeading));
        assert_eq!(term_allows(&all, Some(3), 4, 3), Err(TermRefusal::Superseded { newest: 4 }));
        let off = Rules { term_check: false, ..Rules::ALL };
        assert_eq!(term_allows(&off, None, 9, 3), Ok(()));
    }
}
