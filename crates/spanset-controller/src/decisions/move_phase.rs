//! The phases of a recorded move (`status.moves[].phase`) and every transition between them,
//! each a pure function of what it needs that answers the new phase (or `None`: no change), so
//! that what a reconcile may do to a move is in one place and tested one transition at a time.
//!
//! | transition | from | to | when |
//! |---|---|---|---|
//! | [`started`] | (no move) | `Draining` | a shrink gives the ordinal up for another member |
//! | [`released`] | `Draining` | `Released` | the source is confirmed not to hold or run it |
//! | [`handing_over`] | `Released`, `Parked` | `Handover` | its storage is dealt with now |
//! | [`starting`] | any but `Starting` (a parked one: grown elsewhere) | `Starting` | a grow takes it |
//! | [`parked`] | any (a parked one: elsewhere) | `Parked` | the plan lands it short of its target |
//! | [`ended`] | any (`Landed`: `Parked`) | (gone) | Ready in its target, or where parked |
//! | [`cancelled`] | any but `Parked` | (gone) | a spec edit targets it back in its source |
//! | [`overtaken`] | `Starting` | (gone) | a spec edit targets it in a third member |
//!
//! The CRD keeps the phase a string. A string this controller does not know (a newer
//! controller's, a hand edit) is read as [`MovePhase::Released`] by every rule here
//! ([`MovePhase::read`]): that is how each rule treated it when phases were compared as strings
//! (none named it, and every comparison's other branch is Released's). It stays as stored
//! until a transition rewrites it.

use std::fmt;

/// The phase of a recorded move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MovePhase {
    /// The source's slice no longer holds the ordinal; its pod may still run.
    Draining,
    /// The source is confirmed not to run the ordinal.
    Released,
    /// The ordinal's storage is being dealt with: with `migration.storage: Move` its volumes are
    /// handed to the destination, with `Detached` its claims in the source are retired.
    Handover,
    /// The destination's slice holds the ordinal; waiting for its pod to be Ready.
    Starting,
    /// The ordinal lands in a neighbour (`to`), not in its target: its target could not take it
    /// next and `maxConcurrentMoves` left no room for the moves in its way (a spec edit
    /// retargeted it). Done once Ready there; it moves on later like any misplaced ordinal.
    Parked,
}

impl MovePhase {
    /// Every phase, in the order a move goes through them (`Parked` aside).
    pub const ALL: [MovePhase; 5] =
        [MovePhase::Draining, MovePhase::Released, MovePhase::Handover, MovePhase::Starting, MovePhase::Parked];

    /// The phase as `status.moves[].phase` stores it.
    pub const fn as_str(self) -> &'static str {
        match self {
            MovePhase::Draining => "Draining",
            MovePhase::Released => "Released",
            MovePhase::Handover => "Handover",
            MovePhase::Starting => "Starting",
            MovePhase::Parked => "Parked",
        }
    }

    /// The phase a stored string names, if it names one.
    pub fn parse(stored: &str) -> Option<MovePhase> {
        MovePhase::ALL.into_iter().find(|p| p.as_str() == stored)
    }

    /// The phase the rules read from a stored string: an unknown one as `Released` (see the
    /// module doc).
    pub fn read(stored: &str) -> MovePhase {
        MovePhase::parse(stored).unwrap_or(MovePhase::Released)
    }
}

impl fmt::Display for MovePhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a recorded move ends in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The ordinal is Ready where the plan targets it.
    Finished,
    /// A parked ordinal is Ready where it is parked: done there for now.
    Landed,
}

/// A shrink gives up an ordinal that the plan targets in another member: its move starts,
/// `Draining`, unless a move of it is recorded already (`recorded`: that move's phase).
pub fn started(recorded: Option<MovePhase>) -> Option<MovePhase> {
    recorded.is_none().then_some(MovePhase::Draining)
}

/// The source is confirmed not to hold or run the ordinal (`confirmed`): a `Draining` move is
/// `Released`. Nothing else is released.
pub fn released(phase: MovePhase, confirmed: bool) -> Option<MovePhase> {
    (phase == MovePhase::Draining && confirmed).then_some(MovePhase::Released)
}

/// Whether the ordinal's volumes may be touched in this phase: not before the release is
/// confirmed (`Draining`), and not after the grow (`Starting`: nothing is left to hand over).
pub fn storage_may_be_touched(phase: MovePhase) -> bool {
    !matches!(phase, MovePhase::Draining | MovePhase::Starting)
}

/// The ordinal's storage is dealt with now: the move is in `Handover`. Refused where the
/// volumes may not be touched ([`storage_may_be_touched`]); no change when in `Handover`
/// already. A parked move's storage follows it where it is parked.
pub fn handing_over(phase: MovePhase) -> Option<MovePhase> {
    (storage_may_be_touched(phase) && phase != MovePhase::Handover).then_some(MovePhase::Handover)
}

/// The plan lands the ordinal in a member that is not its target (a grow outside the
/// grower's target): the move is `Parked` there. No change when it is parked there already
/// (`at_to`: the landing is the move's `to`).
pub fn parked(phase: MovePhase, at_to: bool) -> Option<MovePhase> {
    (phase != MovePhase::Parked || !at_to).then_some(MovePhase::Parked)
}

/// A grow takes the ordinal (`at_to`: into the move's `to`): the move is `Starting`. No change
/// when `Starting` already, nor for a parked move grown where it is parked (that grow is its
/// landing); a parked move grown elsewhere goes on to its target.
pub fn starting(phase: MovePhase, at_to: bool) -> Option<MovePhase> {
    match phase {
        MovePhase::Starting => None,
        MovePhase::Parked if at_to => None,
        _ => Some(MovePhase::Starting),
    }
}

/// Whether the move ends: its ordinal is Ready where the plan targets it (any phase), or a
/// parked one is Ready where it is parked (`ready_at_to`).
pub fn ended(phase: MovePhase, ready_in_target: bool, ready_at_to: bool) -> Option<Ending> {
    if ready_in_target {
        Some(Ending::Finished)
    } else if phase == MovePhase::Parked && ready_at_to {
        Some(Ending::Landed)
    } else {
        None
    }
}

/// Whether a spec edit that targets the ordinal back in its source (`back_at_source`) cancels
/// the move (a move from a member to itself is never recorded). A parked move is not
/// cancelled: it runs in its landing, not in its source.
pub fn cancelled(phase: MovePhase, back_at_source: bool) -> bool {
    phase != MovePhase::Parked && back_at_source
}

/// Whether a spec edit that targets the ordinal in a member other than its source and its
/// destination (`elsewhere`) ends the move: once grown (`Starting`) the destination holds it,
/// so it moves on from there as a move of its own, recorded (with what its new destination
/// holds of it) when the destination gives it up. Before the grow the move simply follows the
/// target ([`follows_target`]).
pub fn overtaken(phase: MovePhase, elsewhere: bool) -> bool {
    phase == MovePhase::Starting && elsewhere
}

/// Whether the move follows the plan's target when a spec edit changes it (its `to` is the
/// target), and counts among the planner's moves in flight. A parked move does neither: its
/// `to` is where it landed, and the planner treats it as parked.
pub fn follows_target(phase: MovePhase) -> bool {
    phase != MovePhase::Parked
}

/// Whether a grow into the destination still waits until spanset's records there no longer
/// name the ordinal (when pods have no identity gate): until the move is `Starting`.
pub fn grow_waits_for_records(phase: MovePhase) -> bool {
    phase != MovePhase::Starting
}

#[cfg(test)]
mod tests {
    use super::{MovePhase::*, *};

    #[test]
    fn every_phase_round_trips_through_its_stored_string() {
        for p in MovePhase::ALL {
            assert_eq!(MovePhase::parse(p.as_str()), Some(p));
            assert_eq!(p.to_string(), p.as_str());
        }
        assert_eq!(MovePhase::ALL.map(MovePhase::as_str), ["Draining", "Released", "Handover", "Starting", "Parked"]);
    }

    #[test]
    fn an_unknown_stored_phase_parses_to_none_and_is_read_as_released() {
        assert_eq!(MovePhase::parse("Teleporting"), None);
        assert_eq!(MovePhase::parse("draining"), None, "case matters, as in the CRD");
        assert_eq!(MovePhase::read("Teleporting"), Released);
        assert_eq!(MovePhase::read("Parked"), Parked);
    }

    #[test]
    fn only_a_grown_move_retargeted_to_a_third_member_is_overtaken() {
        assert!(overtaken(Starting, true));
        assert!(!overtaken(Starting, false));
        for p in [Draining, Released, Handover, Parked] {
            assert!(!overtaken(p, true), "{p}");
        }
    }

    #[test]
    fn a_move_starts_draining_only_when_none_is_recorded() {
        assert_eq!(started(None), Some(Draining));
        for p in MovePhase::ALL {
            assert_eq!(started(Some(p)), None, "{p}");
        }
    }

    #[test]
    fn only_a_draining_move_is_released_and_only_once_confirmed() {
        assert_eq!(released(Draining, true), Some(Released));
        assert_eq!(released(Draining, false), None);
        for p in [Released, Handover, Starting, Parked] {
            assert_eq!(released(p, true), None, "{p}");
        }
    }

    #[test]
    fn storage_is_handed_over_after_the_release_and_before_the_grow() {
        assert_eq!(handing_over(Released), Some(Handover));
        assert_eq!(handing_over(Parked), Some(Handover), "a parked move's storage follows it");
        assert_eq!(handing_over(Handover), None, "already there");
        assert_eq!(handing_over(Draining), None, "the source may still run the ordinal");
        assert_eq!(handing_over(Starting), None, "the destination runs it already");
        assert!(!storage_may_be_touched(Draining) && !storage_may_be_touched(Starting));
        assert!([Released, Handover, Parked].into_iter().all(storage_may_be_touched));
    }

    #[test]
    fn a_landing_parks_the_move_unless_it_is_parked_there_already() {
        for p in [Draining, Released, Handover, Starting] {
            assert_eq!(parked(p, true), Some(Parked), "{p}");
            assert_eq!(parked(p, false), Some(Parked), "{p}");
        }
        assert_eq!(parked(Parked, false), Some(Parked), "parked elsewhere: it lands again");
        assert_eq!(parked(Parked, true), None);
    }

    #[test]
    fn a_grow_starts_the_move_unless_starting_or_it_is_the_parked_move_s_landing() {
        for p in [Draining, Released, Handover] {
            assert_eq!(starting(p, true), Some(Starting), "{p}");
            assert_eq!(starting(p, false), Some(Starting), "{p}");
        }
        assert_eq!(starting(Starting, true), None);
        assert_eq!(starting(Starting, false), None);
        assert_eq!(starting(Parked, true), None, "the landing's own grow");
        assert_eq!(starting(Parked, false), Some(Starting), "its target takes it after all");
    }

    #[test]
    fn a_move_ends_when_ready_in_its_target_or_a_parked_one_where_it_is_parked() {
        for p in MovePhase::ALL {
            assert_eq!(ended(p, true, false), Some(Ending::Finished), "{p}");
            assert_eq!(ended(p, false, false), None, "{p}");
        }
        assert_eq!(ended(Parked, false, true), Some(Ending::Landed));
        for p in [Draining, Released, Handover, Starting] {
            assert_eq!(ended(p, false, true), None, "{p}: Ready at `to` that is not its target is not the end");
        }
    }

    #[test]
    fn a_return_to_the_source_cancels_every_move_but_a_parked_one() {
        for p in [Draining, Released, Handover, Starting] {
            assert!(cancelled(p, true), "{p}");
            assert!(!cancelled(p, false), "{p}");
        }
        assert!(!cancelled(Parked, true));
    }

    #[test]
    fn only_a_parked_move_keeps_its_landing_when_the_target_changes() {
        assert!(!follows_target(Parked));
        assert!([Draining, Released, Handover, Starting].into_iter().all(follows_target));
    }

    #[test]
    fn a_grow_waits_for_the_destination_s_records_until_the_move_is_starting() {
        assert!(!grow_waits_for_records(Starting));
        assert!([Draining, Released, Handover, Parked].into_iter().all(grow_waits_for_records));
    }
}
