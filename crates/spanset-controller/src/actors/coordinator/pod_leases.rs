//! The coordinator's side of self-fencing pods (`spec.failover.podLease`): it keeps the
//! federation's pod Lease in every member that answers, through the member's watcher, and a
//! member whose lease lapsed (its pods have stopped themselves) counts as fenced for this
//! federation until it answers again and holds nothing of it. The decisions are
//! [`crate::pod_lease::keeper`]'s; this is when they are asked and carried out.
//!
//! - A keeper belongs to one term: a new leader starts afresh, assuming whatever was sent
//!   before may still land within the send window and the write deadline. A new lease length
//!   keeps the keeper and what it sent, measured with the new length from then on.
//! - The length is the longest any pod may hold: the spec's, or the longer one stored in
//!   `status.podLeaseSeconds` while pods made with it may still run (a shorter lease reaches
//!   pods only as they are replaced; a partitioned member's never). Without `podLease` any more,
//!   the leases are still extended while that is stored: pods not yet rolled keep their guard.
//! - Extensions are sent only once a reconcile of this term has run (the federation as read
//!   from the host, its token raised), and never while this process does not lead, nor once
//!   the federation is being deleted (its teardown deletes the Lease).
//! - A lapse fences a member only when everything of the federation seen there is guarded: a
//!   pod from before the guard was added does not stop itself, so its member waits for an
//!   operator's (or the automatic policy's) fence as without a pod lease.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use actix::prelude::*;
use spanset_plan::Ordinals;

use super::{Coordinator, ownership};
use crate::{
    actors::messages::{ExtendPodLease, LeaseWritten, MemberView},
    decisions::{
        reconcile::{self, MemberInput},
        safety::Rules,
    },
    host::events::Note,
    pod_lease::{
        Timing,
        keeper::{Keeper, Sent, Stored},
        send_window,
        settings::settings,
    },
};

/// A federation's keeper, with the term it was made for and the lease length it measures.
pub(super) struct PodLeases {
    term: u64,
    seconds: i32,
    keeper: Keeper,
    /// When the keeper's timer is set for, if it is.
    timer_at: Option<Instant>,
}

/// The spans of a federation's lease, if any pod of it may hold one (an invalid length names
/// the field): the longest of the spec's and the one stored as still in force.
fn timing(fsts: &spanset_api::FederatedStatefulSet) -> Option<Result<(i32, Timing), String>> {
    let spec = fsts.spec.failover.pod_lease.map(|p| p.seconds);
    let seconds = spec.max(fsts.status.as_ref().and_then(|s| s.pod_lease_seconds))?;
    let grace =
        fsts.spec.template.template.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(30).max(0)
            as u64;
    let s = settings();
    Some(
        Timing::new(Duration::from_secs(seconds.max(0) as u64), s.drift, s.write_deadline, Duration::from_secs(grace))
            .map(|t| (seconds, t)),
    )
}

/// Whether everything of the federation last seen in a member stops itself when its lease
/// lapses: its StatefulSet's template and every pod carry the whole guard for this federation,
/// and every pod that may run was seen with its watch reading its Lease
/// ([`crate::pod_lease::seen`]).
fn guarded(view: &MemberView, name: &str, uid: Option<&str>) -> bool {
    view.federation.unguarded(name, uid).is_empty()
}

/// Whether a member whose lease lapsed at `lapse` answered since and holds nothing of the
/// federation any more: its StatefulSet (if any) shrunk to nothing, no pod left, and the list
/// that shows it made after that write.
fn cleared(view: &MemberView, lapse: Instant) -> bool {
    let f = &view.federation;
    view.synced
        && view.last_contact.is_some_and(|t| t > lapse)
        && f.sts.as_ref().is_none_or(|s| !s.deleting && s.slice.replicas == 0)
        && f.pods.is_empty()
        && f.confirmed()
}

impl Coordinator {
    /// The keeper of this term, made afresh for a new term and retimed for a new lease length;
    /// `None` for a federation whose pods hold no lease (or with an invalid one, which the
    /// reconcile refuses).
    fn pod_lease_keeper(&mut self, term: u64) -> Option<&mut PodLeases> {
        let Some(Ok((seconds, timing))) = timing(&self.fsts) else {
            self.pod_leases = None;
            return None;
        };
        match self.pod_leases.as_mut() {
            Some(p) if p.term == term => {
                if p.seconds != seconds {
                    p.keeper.retime(timing);
                    p.seconds = seconds;
                }
            }
            _ => {
                let began = self.leadership.leading_since().unwrap_or_else(Instant::now).min(Instant::now());
                self.pod_leases =
                    Some(PodLeases { term, seconds, keeper: Keeper::new(began, timing, Rules::ALL), timer_at: None });
            }
        }
        self.pod_leases.as_mut()
    }

    /// Before a reconcile of `term`: notes the members' lapses (guarded ones only), ends those
    /// of members that answered again and hold nothing, and counts each member whose lapse
    /// stands as fenced for this federation.
    pub(super) fn apply_pod_leases(&mut self, term: u64, members: &mut BTreeMap<String, MemberInput>, now: Instant) {
        let key = self.key.to_string();
        let (name, uid) = (self.key.name.clone(), self.fsts.metadata.uid.clone());
        let Some(p) = self.pod_lease_keeper(term) else { return };
        let candidates: Vec<&str> = members
            .iter()
            .filter(|(_, m)| m.view.as_deref().is_some_and(|v| guarded(v, &name, uid.as_deref())))
            .map(|(n, _)| n.as_str())
            .collect();
        for member in p.keeper.note_lapses(candidates, now) {
            tracing::warn!(
                federation = %key, cluster = %member,
                "pod lease lapsed: the member's pods have stopped themselves; its ordinals may be re-homed"
            );
        }
        for (name, m) in members.iter_mut() {
            let Some(lapse) = p.keeper.lapse(name) else { continue };
            if m.view.as_deref().is_some_and(|v| cleared(v, lapse)) {
                tracing::info!(federation = %key, cluster = %name, "member back after its pod lease lapsed, holding nothing: no longer fenced");
                p.keeper.end_lapse(name);
                continue;
            }
            if !m.fenced {
                m.fenced = true;
                m.answered_since_fence = m.view.as_ref().and_then(|v| v.last_contact).is_some_and(|t| t > lapse);
            }
        }
    }

    /// Sends the extensions due now, and sets the timer for the next one (or the next lapse).
    pub(super) fn extend_pod_leases(&mut self, ctx: &mut Context<Self>) {
        let Some(term) = self.leadership.term() else { return };
        // A federation being deleted is not extended: its teardown deletes the Lease, which an
        // extension would create again (its pods stop by the lapse if they outlive it).
        if self.fsts.metadata.deletion_timestamp.is_some() {
            return;
        }
        if self.pod_leases.as_ref().is_none_or(|p| p.term != term)
            || ownership::standing(&self.fsts, term, &self.leadership.owner()) != ownership::TokenStanding::Owned
        {
            return;
        }
        let now = Instant::now();
        let grace = reconcile::unreachable_after(&self.fsts);
        let mut wanted = BTreeMap::new();
        for (name, m) in self.members.iter() {
            let Some(view) = self.views.get(name) else { continue };
            if m.watcher.is_err() || m.duplicate.is_some() {
                continue;
            }
            let heard = m.contact.freshest(view.last_contact);
            if !view.synced || heard.is_none_or(|t| now.saturating_duration_since(t) >= grace) {
                continue;
            }
            let ordinals: Ordinals = match &view.federation.sts {
                Some(s) if !s.deleting && !m.member.spec.fenced => s.slice.ordinals(),
                _ => Ordinals::new(),
            };
            wanted.insert(name.clone(), (ordinals, heard));
        }
        let Some(p) = self.pod_leases.as_mut() else { return };
        let views = &self.views;
        let (name, uid) = (&self.key.name, self.fsts.metadata.uid.as_deref());
        let candidates =
            self.members.keys().map(String::as_str).filter(|n| views.get(*n).is_some_and(|v| guarded(v, name, uid)));
        let new_lapse = p.keeper.note_lapses(candidates, now);
        let extensions = p.keeper.due(now, &wanted);
        let seconds = p.seconds;
        for ext in extensions {
            let Some(watcher) = self.watcher(&ext.member) else {
                if let Some(p) = self.pod_leases.as_mut() {
                    p.keeper.settled(&ext, Sent::NotSent, Instant::now());
                }
                continue;
            };
            let msg = ExtendPodLease {
                key: self.key.clone(),
                ordinals: ext.ordinals.clone(),
                known: ext.known.map(|k| (k.rv, k.extension)),
                lease_seconds: seconds,
                term,
                // After the send window the watcher does not send it: the keeper counts it as
                // landing, if at all, by the window's end + W.
                send_by: now + send_window(settings().write_deadline),
                federation_uid: self.fsts.metadata.uid.clone().unwrap_or_default(),
                release: false,
            };
            ctx.spawn(watcher.send(msg).into_actor(self).map(move |res, act, ctx| {
                let (res, refusal) = match res {
                    Ok((written, refusal)) => (Ok(written), refusal),
                    Err(e) => (Err(e), None),
                };
                let sent = match res {
                    Ok(LeaseWritten::Stored { rv, extension }) => Sent::Stored(Stored { rv, extension }),
                    Ok(LeaseWritten::Refused) => Sent::Refused,
                    Ok(LeaseWritten::NotSent) => Sent::NotSent,
                    // A mailbox failure: the watcher stopped, and with it whatever it was
                    // sending, which may still land.
                    Ok(LeaseWritten::Lost) | Err(_) => Sent::Lost,
                };
                if let Some(why) = refusal {
                    act.say_lease_refused(&ext.member, &why);
                }
                if let Some(p) = act.pod_leases.as_mut().filter(|p| p.term == term) {
                    p.keeper.settled(&ext, sent, Instant::now());
                }
                act.extend_pod_leases(ctx);
            }));
        }
        if !new_lapse.is_empty() {
            tracing::warn!(federation = %self.key, clusters = ?new_lapse, "pod lease lapsed: the members' pods have stopped themselves");
            self.schedule(ctx);
        }
        self.arm_pod_lease_timer(ctx);
    }

    /// Records a Warning Event `PodLeaseRefused` naming the member and its answer: a member
    /// that refuses its Lease's read or write is not extended, so its pods stop (or never
    /// start) once the lease lapses, which nothing else would explain. Repeats are folded by
    /// the recorder.
    fn say_lease_refused(&self, member: &str, why: &str) {
        let message = format!(
            "{member} refused its pod lease ({}/{}-pods): its pods stop, or do not start, once the lease lapses: {why}",
            self.key.namespace, self.key.name
        );
        let (recorder, fsts) = (self.recorder.clone(), self.fsts.clone());
        actix::spawn(async move {
            recorder.lock().await.record(&fsts, &Note::warning("PodLeaseRefused", message)).await;
        });
    }

    /// Sets the timer for the keeper's next wake, unless one is set for earlier.
    fn arm_pod_lease_timer(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        let Some(p) = self.pod_leases.as_mut() else { return };
        let Some(at) = p.keeper.next_wake(now) else { return };
        if p.timer_at.is_some_and(|t| t > now && t <= at) {
            return;
        }
        p.timer_at = Some(at);
        ctx.run_later(at.saturating_duration_since(now) + Duration::from_millis(1), move |act, ctx| {
            if let Some(p) = act.pod_leases.as_mut()
                && p.timer_at == Some(at)
            {
                p.timer_at = None;
            }
            act.extend_pod_leases(ctx);
        });
    }
}
