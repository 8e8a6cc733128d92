//! What a coordinator keeps and does once a round ended, decided without actix: which object it
//! now holds, what it remembers of the members (ensured, cleaned, awaited), which refusal holds
//! the federation, whether and how soon it plans again, when to wake, what to log and to count.
//! The actor only carries the answer out (its timers, the Events, the metrics), so that these
//! rules are tested here on values.

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use spanset_api::FederatedStatefulSet;

use super::{REFUSAL_RECHECK, access, failures::Failures, newer, round_error::RoundError};
use crate::{decisions::reconcile::Refusal, host::events::Note};

/// What a reconcile did, for the coordinator to remember.
#[derive(Default)]
pub(super) struct RoundOutcome {
    /// The FederatedStatefulSet as last stored by the reconcile, if it wrote one.
    pub stored: Option<FederatedStatefulSet>,
    /// Members whose supporting objects were ensured in this term, for [`Self::ensured_for`].
    pub ensured: Vec<String>,
    /// The hash of the template the round's supporting objects were made from (the headless
    /// Service's ports come from it). Not the hash of the object the coordinator holds once the
    /// round ended: a spec edited while the round ran comes back with the round's status
    /// write, and its Service was never ensured.
    pub ensured_for: Option<String>,
    /// A digest of what the supporting objects depend on besides the template, as read in
    /// this reconcile: the carried objects' content and the network mode (the ServiceExport).
    pub supporting_digest: Option<String>,
    /// A member refused, in a dry run, the template or what it writes with it:
    /// `(template hash, refusal)`.
    pub refusal: Option<(String, Refusal)>,
    /// Ordinals whose storage a member refused to hand over, with why.
    pub handover_refused: Vec<(u32, String)>,
    /// Members the automatic policy fenced.
    pub fenced: Vec<String>,
    /// Member writes were made (or failed): reconcile again to see their effect.
    pub again: bool,
    /// What failed, if anything.
    pub error: Option<RoundError>,
    /// A member refused a write (401 or 403), with what the refusal means.
    pub access_refused: Option<access::AccessRefusal>,
    /// Moves whose end was stored, with their durations.
    pub finished: Vec<(u32, f64)>,
    /// Events whose facts were stored: to record.
    pub notes: Vec<Note>,
    /// Member StatefulSets written, with their new resourceVersions.
    pub written: Vec<(String, u64)>,
    /// Moves whose destination's grow was written, with when that write landed.
    pub grown: Vec<(u32, Instant)>,
    /// Events of the storage steps carried out (claims retired), recorded whatever else is.
    pub storage_notes: Vec<Note>,
    /// Plan again after this long (a pod becomes available by time alone).
    pub wake_after: Option<Duration>,
    /// Members whose teardown answered clean (the federation is being deleted).
    pub cleaned: Vec<String>,
    /// Each member's count of supporting objects found missing, as the round began: an ensure
    /// made in this round covers the losses up to it.
    pub lost: BTreeMap<String, u64>,
}

/// What a coordinator keeps from one round to the next, as the rounds' outcomes change it.
#[derive(Default)]
pub(super) struct Kept {
    /// The members whose supporting objects were ensured: `(member, term, template hash,
    /// ensured digest)`; a member is due again when any of those changes.
    pub ensured: HashSet<(String, u64, String, String)>,
    /// Digest of the carried Secrets' and ConfigMaps' content last read from the host, and of
    /// the network mode: a change makes every member's supporting objects due again, so
    /// carried data follows its edits and a ServiceExport follows the mode.
    pub supporting_digest: String,
    /// Members whose teardown answered clean while the federation is being deleted: not asked
    /// again (in memory only: a restarted controller asks each once more).
    pub cleaned: BTreeSet<String>,
    /// Ordinals whose storage cannot be handed over (a volume tied to a node), with why; kept
    /// while their move is recorded.
    pub handover_refusals: BTreeMap<u32, String>,
    /// A member's refusal (dry run) of this template or of what it writes with it, and when it
    /// was seen: `(template hash, refusal, at)`. It holds every write until the template changes
    /// or [`REFUSAL_RECHECK`] passed, when the dry runs are made again (a member's policy or a
    /// carried object may have been fixed meanwhile, which no watch here announces).
    pub template_refusal: Option<(String, Refusal, Instant)>,
    /// The reconciles failed since the last that finished, for the log.
    pub failures: Failures,
    /// A member's 401/403 to spanset's writes, shown as `Blocked` while held (see [`access`]).
    pub access: access::Held,
    /// Writes whose report has not come yet: planning on an older report would only meet
    /// 409s. Forgotten after [`super::AWAIT_REPORT`].
    pub awaiting: BTreeMap<String, (u64, Instant)>,
    /// When the release of each moving ordinal was first observed (for
    /// `spanset_move_handoff_seconds`); in memory only, so a restart loses the samples in flight.
    pub released_at: BTreeMap<u32, Instant>,
}

/// What the coordinator does once a round ended.
#[derive(Debug, Default, PartialEq)]
pub(super) struct FollowUps {
    /// Plan again (after [`Self::pause`]), whatever else arrives.
    pub again: bool,
    /// How long to wait before planning again: a failing member is not hammered.
    pub pause: Duration,
    /// Wake-ups to ask for, from now.
    pub wakes: Vec<Duration>,
    /// The Events to record on the federation, in order.
    pub notes: Vec<Note>,
    /// What to log.
    pub said: Vec<Said>,
    /// Members fenced automatically: a failover each.
    pub failovers: Vec<String>,
    /// Ordinals handed off, with the seconds from their release to their destination's grow.
    pub handoffs: Vec<(u32, f64)>,
    /// Moves finished, with their seconds.
    pub finished: Vec<(u32, f64)>,
    /// The failure's category, if the round failed.
    pub failed: Option<&'static str>,
}

/// One thing the coordinator logs after a round.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Said {
    /// An ordinal's storage cannot be handed over; its move holds.
    HandoverRefused { ordinal: u32, why: String },
    /// A refusal seen before, seen again (debug).
    StillRefused { message: String },
    /// A new refusal of the template or of a carried object.
    Refused { carried: bool, message: String },
    /// The round failed; `warn` once per distinct failure, else debug.
    Failed { error: String, warn: bool },
    /// A round finished after `failed` failed ones.
    FinishedAfter { failed: u64 },
    /// A member refuses spanset's writes.
    AccessRefused { reason: &'static str, message: String },
    /// An ordinal was handed off.
    HandedOff { ordinal: u32, seconds: f64 },
    /// A move finished.
    MoveFinished { ordinal: u32, seconds: f64 },
}

impl Said {
    /// Writes this line to the log, for `federation`.
    pub fn log(&self, federation: &dyn std::fmt::Display) {
        match self {
            Said::HandoverRefused { ordinal, why } => tracing::warn!(
                federation = %federation, ordinal, refusal = %why, "storage cannot be handed over; the move holds"
            ),
            Said::StillRefused { message } => tracing::debug!(
                federation = %federation, refusal = %message, "still refused; nothing written in any member"
            ),
            Said::Refused { carried: true, message } => tracing::warn!(
                federation = %federation, refusal = %message,
                "a carried object cannot be carried; nothing written in any member"
            ),
            Said::Refused { carried: false, message } => tracing::warn!(
                federation = %federation, refusal = %message,
                "a member refused the template; nothing written in any member"
            ),
            Said::Failed { error, warn: true } => {
                tracing::warn!(federation = %federation, error = %error, "reconcile did not finish; retrying")
            }
            Said::Failed { error, warn: false } => {
                tracing::debug!(federation = %federation, error = %error, "reconcile did not finish again; retrying")
            }
            Said::FinishedAfter { failed } => {
                tracing::info!(federation = %federation, failed, "reconcile finished after failures")
            }
            Said::AccessRefused { reason, message } => tracing::warn!(
                federation = %federation, reason, refusal = %message,
                "a member refuses spanset's writes; nothing moves there"
            ),
            Said::HandedOff { ordinal, seconds } => {
                tracing::info!(federation = %federation, ordinal, seconds, "ordinal handed off")
            }
            Said::MoveFinished { ordinal, seconds } => {
                tracing::info!(federation = %federation, ordinal, seconds, "move finished")
            }
        }
    }
}

/// The pause before planning again after a round that finished, and after one that failed.
pub(super) const PAUSE: Duration = Duration::from_millis(1);
/// See [`PAUSE`].
pub(super) const PAUSE_AFTER_FAILURE: Duration = Duration::from_millis(250);

/// Takes in what round `term` did at `now`: updates `fsts` (only to a newer version) and `kept`,
/// and answers what the coordinator does next.
pub(super) fn after_round(
    fsts: &mut Arc<FederatedStatefulSet>,
    kept: &mut Kept,
    outcome: RoundOutcome,
    term: u64,
    now: Instant,
) -> FollowUps {
    let mut next = FollowUps::default();
    // The stored object replaces ours only if it is newer: a spec change may have arrived while
    // this reconcile ran.
    if let Some(f) = outcome.stored
        && newer(&f, fsts)
    {
        *fsts = Arc::new(f);
        // Plan once more on what was just stored: a step held until its record is stored (the
        // grow after a release recorded now) is due in the next reconcile, and the host's watch
        // event of this write wakes nothing once it is here (it is not newer): waiting for it
        // would depend on the event winning a race against this answer.
        next.again = true;
    }
    let digest = outcome.supporting_digest.unwrap_or_else(|| kept.supporting_digest.clone());
    if digest != kept.supporting_digest {
        kept.supporting_digest = digest.clone();
        next.again = true;
    }
    // The members this round wrote to, which may end a refusal held for one of them.
    let wrote_to: Vec<String> =
        outcome.written.iter().map(|(c, _)| c.clone()).chain(outcome.ensured.iter().cloned()).collect();
    if let Some(made_from) = &outcome.ensured_for {
        for c in outcome.ensured {
            let lost = outcome.lost.get(&c);
            kept.ensured.insert((c, term, made_from.clone(), ensured_digest(&digest, lost)));
        }
    }
    kept.cleaned.extend(outcome.cleaned);
    next.failovers = outcome.fenced;
    for (ordinal, why) in outcome.handover_refused {
        next.said.push(Said::HandoverRefused { ordinal, why: why.clone() });
        kept.handover_refusals.insert(ordinal, why);
    }
    if let Some((hash, r)) = outcome.refusal {
        let again = kept.template_refusal.as_ref().is_some_and(|(h, was, _)| *h == hash && *was == r);
        next.said.push(if again {
            Said::StillRefused { message: r.message.clone() }
        } else {
            Said::Refused { carried: r.reason.starts_with("Carry"), message: r.message.clone() }
        });
        kept.template_refusal = Some((hash, r, now));
        next.again = true;
        next.wakes.push(REFUSAL_RECHECK);
    }
    match &outcome.error {
        Some(e) => {
            let warn = kept.failures.failed(e, now);
            next.said.push(Said::Failed { error: e.to_string(), warn });
            next.failed = Some(e.category());
        }
        None => match kept.failures.finished() {
            0 => {}
            failed => next.said.push(Said::FinishedAfter { failed }),
        },
    }
    if let Some(r) = &outcome.access_refused {
        next.said.push(Said::AccessRefused { reason: r.reason, message: r.message.clone() });
        next.again = true;
    }
    let end = access::RoundEnd { refused: outcome.access_refused, wrote_to: &wrote_to, ok: outcome.error.is_none() };
    if let Some(recheck) = kept.access.round_ended(end, now) {
        next.wakes.push(recheck + Duration::from_millis(5));
    }
    next.again |= outcome.again;
    for (cluster, rv) in outcome.written {
        kept.awaiting.insert(cluster, (rv, now));
    }
    next.notes = outcome.notes.into_iter().chain(outcome.storage_notes).collect();
    for (k, at) in &outcome.grown {
        if let Some(released) = kept.released_at.remove(k) {
            let seconds = at.saturating_duration_since(released).as_secs_f64();
            next.said.push(Said::HandedOff { ordinal: *k, seconds });
            next.handoffs.push((*k, seconds));
        }
    }
    for &(ordinal, seconds) in &outcome.finished {
        next.said.push(Said::MoveFinished { ordinal, seconds });
    }
    next.finished = outcome.finished;
    next.pause = if next.failed.is_none() { PAUSE } else { PAUSE_AFTER_FAILURE };
    next.wakes.extend(outcome.wake_after);
    next
}

/// What an ensure of a member's supporting objects covered besides the term and template: the
/// carried objects' digest, and how many of its supporting objects had been found missing there.
pub(super) fn ensured_digest(digest: &str, lost: Option<&u64>) -> String {
    format!("{digest}#{}", lost.copied().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::coordinator::round_error::{MemberFailure, MemberPart};
    use crate::member::objects::template_hash;

    fn at(rv: &str) -> Arc<FederatedStatefulSet> {
        let mut f = spanset_api::example(&["east".to_string()]);
        f.metadata.resource_version = Some(rv.into());
        Arc::new(f)
    }

    fn refused(message: &str) -> Refusal {
        Refusal { reason: "TemplateRefused", message: message.into() }
    }

    fn failed_in(cluster: &str) -> RoundError {
        RoundError::Members { part: MemberPart::Writes, failures: vec![MemberFailure::new(cluster, "no answer")] }
    }

    #[test]
    fn a_stored_object_replaces_the_kept_one_only_when_newer_and_plans_again() {
        let (mut fsts, mut kept, t) = (at("12"), Kept::default(), Instant::now());
        let older = RoundOutcome { stored: Some((*at("11")).clone()), ..Default::default() };
        let next = after_round(&mut fsts, &mut kept, older, 3, t);
        assert_eq!(fsts.metadata.resource_version.as_deref(), Some("12"), "a spec change that came meanwhile stays");
        assert!(!next.again);
        let newer = RoundOutcome { stored: Some((*at("13")).clone()), ..Default::default() };
        let next = after_round(&mut fsts, &mut kept, newer, 3, t);
        assert_eq!(fsts.metadata.resource_version.as_deref(), Some("13"));
        assert!(next.again, "a step held until its record is stored is due now");
        assert_eq!(next.pause, PAUSE);
    }

    #[test]
    fn a_new_refusal_is_warned_held_and_rechecked_and_its_repeat_said_at_debug() {
        let (mut fsts, mut kept, t) = (at("1"), Kept::default(), Instant::now());
        let round = || RoundOutcome { refusal: Some(("h".into(), refused("spec.template: no"))), ..Default::default() };
        let next = after_round(&mut fsts, &mut kept, round(), 3, t);
        assert_eq!(next.said, [Said::Refused { carried: false, message: "spec.template: no".into() }]);
        assert_eq!(next.wakes, [REFUSAL_RECHECK]);
        assert!(next.again);
        assert_eq!(kept.template_refusal.as_ref().map(|(h, _, at)| (h.as_str(), *at)), Some(("h", t)));
        let later = t + Duration::from_secs(31);
        let next = after_round(&mut fsts, &mut kept, round(), 3, later);
        assert_eq!(next.said, [Said::StillRefused { message: "spec.template: no".into() }]);
        assert_eq!(kept.template_refusal.as_ref().map(|(_, _, at)| *at), Some(later), "held from its last sighting");
    }

    #[test]
    fn a_failed_round_pauses_longer_names_its_part_and_warns_once_while_it_lasts() {
        let (mut fsts, mut kept, t) = (at("1"), Kept::default(), Instant::now());
        let round = |e: RoundError| RoundOutcome { error: Some(e), again: true, ..Default::default() };
        let next = after_round(&mut fsts, &mut kept, round(failed_in("east")), 3, t);
        assert_eq!((next.failed, next.pause, next.again), (Some("member_writes"), PAUSE_AFTER_FAILURE, true));
        assert_eq!(next.said, [Said::Failed { error: "east: no answer".into(), warn: true }]);
        let next = after_round(&mut fsts, &mut kept, round(failed_in("east")), 3, t + PAUSE_AFTER_FAILURE);
        assert_eq!(next.said, [Said::Failed { error: "east: no answer".into(), warn: false }]);
        let next = after_round(&mut fsts, &mut kept, RoundOutcome::default(), 3, t + PAUSE_AFTER_FAILURE * 2);
        assert_eq!((next.failed, next.pause), (None, PAUSE));
        assert_eq!(next.said, [Said::FinishedAfter { failed: 2 }]);
    }

    #[test]
    fn writes_are_awaited_and_a_handoff_is_timed_from_its_release() {
        let (mut fsts, mut kept, t) = (at("1"), Kept::default(), Instant::now());
        kept.released_at.insert(4, t);
        let round = RoundOutcome {
            written: vec![("west".into(), 41)],
            grown: vec![(4, t + Duration::from_secs(2))],
            finished: vec![(7, 9.5)],
            ..Default::default()
        };
        let next = after_round(&mut fsts, &mut kept, round, 3, t + Duration::from_secs(3));
        assert_eq!(kept.awaiting.get("west"), Some(&(41, t + Duration::from_secs(3))));
        assert_eq!(next.handoffs, [(4, 2.0)]);
        assert!(kept.released_at.is_empty(), "each handoff is timed once");
        assert_eq!(next.finished, [(7, 9.5)]);
        assert!(next.said.contains(&Said::MoveFinished { ordinal: 7, seconds: 9.5 }));
    }

    #[test]
    fn a_changed_supporting_digest_plans_again_and_ensures_count_in_this_term_and_template() {
        let (mut fsts, mut kept, t) = (at("1"), Kept::default(), Instant::now());
        let hash = template_hash(&fsts);
        let round = RoundOutcome {
            supporting_digest: Some("d1".into()),
            ensured: vec!["east".into()],
            ensured_for: Some(hash.clone()),
            lost: [("east".to_string(), 2)].into(),
            ..Default::default()
        };
        let next = after_round(&mut fsts, &mut kept, round, 3, t);
        assert!(next.again, "every member's supporting objects are due again");
        assert_eq!(kept.supporting_digest, "d1");
        assert!(kept.ensured.contains(&("east".to_string(), 3, hash, ensured_digest("d1", Some(&2)))));
        let same = RoundOutcome { supporting_digest: Some("d1".into()), ..Default::default() };
        assert!(!after_round(&mut fsts, &mut kept, same, 3, t).again, "the same digest asks nothing");
    }

    #[test]
    fn an_ensure_counts_for_the_template_it_was_made_from_not_one_edited_while_it_ran() {
        let (mut fsts, mut kept, t) = (at("1"), Kept::default(), Instant::now());
        let began_with = template_hash(&fsts);
        // The user adds a port while the round runs; its status write returns the new spec.
        let mut edited = (*fsts).clone();
        edited.metadata.resource_version = Some("2".into());
        edited.spec.template.template.spec.as_mut().unwrap().containers[0].ports =
            Some(vec![k8s_openapi::api::core::v1::ContainerPort { container_port: 9187, ..Default::default() }]);
        let round = RoundOutcome {
            stored: Some(edited),
            supporting_digest: Some("d1".into()),
            ensured: vec!["east".into()],
            ensured_for: Some(began_with.clone()),
            ..Default::default()
        };
        let next = after_round(&mut fsts, &mut kept, round, 3, t);
        assert!(next.again);
        assert_ne!(template_hash(&fsts), began_with, "the coordinator holds the edited spec");
        let digest = ensured_digest("d1", None);
        assert!(kept.ensured.contains(&("east".to_string(), 3, began_with, digest.clone())));
        assert!(
            !kept.ensured.contains(&("east".to_string(), 3, template_hash(&fsts), digest)),
            "east's Service was made from the template before the edit: it is due again"
        );
    }
}
