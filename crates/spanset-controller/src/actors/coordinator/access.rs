//! A member's 401 or 403 to one of spanset's writes, told apart by the apiserver's words. A 403
//! is not always a missing permission: an admission policy's denial is one too (`... is
//! forbidden: ValidatingAdmissionPolicy 'P' with binding 'B' denied request: ...`), and so is a
//! create in a namespace being deleted (`... is forbidden: unable to create new content in
//! namespace NS because it is being terminated`). Only RBAC's own refusal (`... is forbidden:
//! User "U" cannot VERB resource "R" ...`) is `MemberForbidden`; each other is reported for
//! what it is.
//!
//! A refusal that lasts until someone acts (a permission, credentials, a policy) is *held*:
//! the federation stays `Blocked` with nothing written, and every [`ACCESS_RECHECK`] one round
//! tries the writes again while the condition stays, until a round gets no refusal from that
//! member (its write succeeded, or nothing there needs writing any more). A terminating
//! namespace passes by itself, so it is shown for the round it was met in and not held.

use std::time::{Duration, Instant};

/// How long a held refusal blocks the federation before one round tries the member again:
/// a refused member gets a handful of attempts a minute, not one per reconcile, and an operator
/// who granted the permission sees it taken up soon.
pub const ACCESS_RECHECK: Duration = Duration::from_secs(30);

/// What a member's 401 or 403 means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// RBAC refused the request: spanset's identity lacks the permission the message names.
    Permission,
    /// 401: the member rejected the credentials.
    Credentials,
    /// An admission policy or webhook denied the request; the message names it.
    Admission,
    /// The namespace is being deleted: nothing new may be created in it until it is gone.
    NamespaceTerminating,
    /// Another 403 (the message says why).
    Other,
}

/// What a refusal with this status code and message means; `None` unless 401 or 403.
pub fn classify(code: u16, message: &str) -> Option<Denial> {
    Some(match code {
        401 => Denial::Credentials,
        403 if is_rbac(message) => Denial::Permission,
        403 if is_admission(message) => Denial::Admission,
        403 if message.contains("because it is being terminated") => Denial::NamespaceTerminating,
        403 => Denial::Other,
        _ => return None,
    })
}

/// The apiserver's `forbiddenMessage`: `RESOURCE ["NAME"] is forbidden: User "U" cannot VERB
/// resource "R" ...` (`path "P"` for a non-resource URL, `forbidden: User ...` then). Only the
/// text right after the first `forbidden: ` counts, so a policy's message quoting those words
/// is not taken for RBAC.
fn is_rbac(message: &str) -> bool {
    let Some((_, reason)) = message.split_once("forbidden: ") else { return false };
    reason.starts_with("User \"") && reason.contains("\" cannot ")
}

/// A ValidatingAdmissionPolicy's denial (`ValidatingAdmissionPolicy 'P' with binding 'B'
/// denied request: ...`) or an admission webhook's (`admission webhook "W" denied the
/// request: ...`).
fn is_admission(message: &str) -> bool {
    let reason = message.split_once("forbidden: ").map_or(message, |(_, r)| r);
    (reason.starts_with("ValidatingAdmissionPolicy '") && reason.contains("denied request"))
        || (message.contains("admission webhook \"") && message.contains("denied the request"))
}

/// A member's refusal of one of spanset's writes, as the `Blocked` condition shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessRefusal {
    /// The member.
    pub cluster: String,
    /// The condition's reason: `MemberForbidden` (RBAC), `MemberUnauthorized`,
    /// `MemberAdmissionDenied`, `MemberNamespaceTerminating` or `MemberRefused`.
    pub reason: &'static str,
    /// The condition's message: the member and its own words.
    pub message: String,
    /// Held until a round gets no refusal from the member (see the module's doc).
    pub held: bool,
}

impl AccessRefusal {
    /// The refusal of a write to `cluster` answered with `code` and `message`, if a 401 or 403.
    pub fn of(cluster: &str, code: u16, message: &str) -> Option<Self> {
        let denial = classify(code, message)?;
        let (reason, what, held) = match denial {
            Denial::Permission => ("MemberForbidden", "lacks a permission", true),
            Denial::Credentials => ("MemberUnauthorized", "rejected spanset's credentials", true),
            Denial::Admission => ("MemberAdmissionDenied", "an admission policy denied spanset's write", true),
            Denial::NamespaceTerminating => ("MemberNamespaceTerminating", "the namespace is being deleted", false),
            Denial::Other => ("MemberRefused", "refused spanset's write", false),
        };
        let message = format!("member {cluster}: {what} ({code}): {message}");
        Some(Self { cluster: cluster.to_string(), reason, message, held })
    }
}

/// The refusal a coordinator holds, and what its next round does about it.
#[derive(Debug, Default)]
pub struct Held {
    refusal: Option<(AccessRefusal, Instant)>,
    /// The round under way tries the member again (its writes are not held back).
    rechecking: bool,
}

/// What a round's end tells about the members' refusals.
#[derive(Debug, Default)]
pub struct RoundEnd<'a> {
    /// The refusal met, if any.
    pub refused: Option<AccessRefusal>,
    /// The members written to successfully.
    pub wrote_to: &'a [String],
    /// Whether the round ended without an error.
    pub ok: bool,
}

/// How a round treats the refusal held, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct ForRound {
    /// The refusal to show as `Blocked`.
    pub refusal: AccessRefusal,
    /// Whether nothing is written this round (false: the round tries the writes again, the
    /// condition staying).
    pub blocks: bool,
}

impl Held {
    /// What the next round shows and whether it writes; a refusal not held is shown once.
    pub fn for_round(&mut self, now: Instant) -> Option<ForRound> {
        let (refusal, at) = self.refusal.as_ref()?;
        let refusal = refusal.clone();
        if !refusal.held {
            self.refusal = None;
            self.rechecking = false;
            return Some(ForRound { refusal, blocks: true });
        }
        let blocks = now.saturating_duration_since(*at) < ACCESS_RECHECK;
        self.rechecking = !blocks;
        Some(ForRound { refusal, blocks })
    }

    /// Takes in a round's end: a new refusal is held from `now`; a held one ends when the
    /// round tried the member again without a refusal from it and either wrote there or ended
    /// without an error (a round cut short before its writes proves nothing). Answers how long
    /// until the next recheck is due, if a refusal is held.
    pub fn round_ended(&mut self, end: RoundEnd, now: Instant) -> Option<Duration> {
        let rechecked = std::mem::take(&mut self.rechecking);
        let wrote = |r: &AccessRefusal| end.wrote_to.contains(&r.cluster);
        match end.refused {
            Some(r) => self.refusal = Some((r, now)),
            None if rechecked && (end.ok || self.refusal.as_ref().is_some_and(|(r, _)| wrote(r))) => {
                self.refusal = None
            }
            None => {}
        }
        let (r, at) = self.refusal.as_ref()?;
        r.held.then(|| ACCESS_RECHECK.saturating_sub(now.saturating_duration_since(*at)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RBAC: &str = r#"namespaces is forbidden: User "system:serviceaccount:spanset-system:spanset-member" cannot create resource "namespaces" in API group "" at the cluster scope"#;
    const RBAC_PATH: &str = r#"forbidden: User "alice" cannot get path "/metrics""#;
    const POLICY: &str = r#"statefulsets.apps "redis" is forbidden: ValidatingAdmissionPolicy 'spanset-member-term' with binding 'spanset-member-term' denied request: a write of an older term"#;
    const WEBHOOK: &str = r#"admission webhook "validate.example.com" denied the request: no"#;
    const TERMINATING: &str = r#"services "redis" is forbidden: unable to create new content in namespace shop because it is being terminated"#;

    fn refused(r: &AccessRefusal) -> RoundEnd<'static> {
        RoundEnd { refused: Some(r.clone()), ..Default::default() }
    }

    fn ok() -> RoundEnd<'static> {
        RoundEnd { ok: true, ..Default::default() }
    }

    #[test]
    fn only_rbacs_own_words_are_a_missing_permission() {
        assert_eq!(classify(403, RBAC), Some(Denial::Permission));
        assert_eq!(classify(403, RBAC_PATH), Some(Denial::Permission));
        assert_eq!(classify(403, POLICY), Some(Denial::Admission));
        assert_eq!(classify(403, WEBHOOK), Some(Denial::Admission));
        assert_eq!(classify(403, TERMINATING), Some(Denial::NamespaceTerminating));
        assert_eq!(classify(403, r#"pods "p" is forbidden: something else"#), Some(Denial::Other));
        assert_eq!(classify(401, "Unauthorized"), Some(Denial::Credentials));
        assert_eq!(classify(422, RBAC), None);
        // A policy whose own message quotes RBAC's words is still a policy.
        let quoting = r#"statefulsets.apps "r" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: User "x" cannot write"#;
        assert_eq!(classify(403, quoting), Some(Denial::Admission));
    }

    #[test]
    fn each_refusal_says_what_it_is_and_names_the_member() {
        let r = AccessRefusal::of("east", 403, RBAC).unwrap();
        assert_eq!((r.reason, r.held), ("MemberForbidden", true));
        assert!(r.message.starts_with("member east: lacks a permission (403): ") && r.message.ends_with(RBAC));
        let p = AccessRefusal::of("east", 403, POLICY).unwrap();
        assert_eq!(p.reason, "MemberAdmissionDenied");
        assert!(p.message.contains("ValidatingAdmissionPolicy 'spanset-member-term'"), "{}", p.message);
        let t = AccessRefusal::of("east", 403, TERMINATING).unwrap();
        assert_eq!((t.reason, t.held), ("MemberNamespaceTerminating", false));
        assert!(t.message.contains("being terminated"));
    }

    #[test]
    fn a_held_refusal_blocks_then_rechecks_and_ends_only_when_a_recheck_is_not_refused() {
        let t0 = Instant::now();
        let mut held = Held::default();
        assert_eq!(held.for_round(t0), None);
        let r = AccessRefusal::of("east", 403, RBAC).unwrap();
        assert_eq!(held.round_ended(refused(&r), t0), Some(ACCESS_RECHECK));
        // Rounds before the recheck block, and a blocked round's end changes nothing.
        for s in [1, 10, 29] {
            let now = t0 + Duration::from_secs(s);
            assert_eq!(held.for_round(now), Some(ForRound { refusal: r.clone(), blocks: true }));
            assert!(held.round_ended(ok(), now).is_some(), "still held at {s}s");
        }
        // The recheck writes, the condition staying; refused again, it is held anew.
        let t30 = t0 + ACCESS_RECHECK;
        assert_eq!(held.for_round(t30), Some(ForRound { refusal: r.clone(), blocks: false }));
        assert_eq!(held.round_ended(refused(&r), t30), Some(ACCESS_RECHECK));
        assert!(held.for_round(t30 + Duration::from_secs(1)).unwrap().blocks);
        held.round_ended(ok(), t30 + Duration::from_secs(1));
        // A recheck cut short by an error elsewhere, with no write there, proves nothing.
        let t60 = t30 + ACCESS_RECHECK;
        assert!(!held.for_round(t60).unwrap().blocks);
        assert!(held.round_ended(RoundEnd { ok: false, ..Default::default() }, t60).is_some());
        // A recheck that wrote there ends it, error elsewhere or not.
        assert!(!held.for_round(t60).unwrap().blocks);
        let east = ["east".to_string()];
        assert_eq!(held.round_ended(RoundEnd { wrote_to: &east, ..Default::default() }, t60), None);
        assert_eq!(held.for_round(t60), None);
        // So does one that ended well (nothing there needed writing any more).
        held.round_ended(refused(&r), t60);
        let t90 = t60 + ACCESS_RECHECK;
        assert!(!held.for_round(t90).unwrap().blocks);
        assert_eq!(held.round_ended(ok(), t90), None);
    }

    #[test]
    fn a_terminating_namespace_is_shown_for_one_round_only() {
        let t0 = Instant::now();
        let mut held = Held::default();
        let r = AccessRefusal::of("east", 403, TERMINATING).unwrap();
        assert_eq!(held.round_ended(refused(&r), t0), None);
        assert_eq!(held.for_round(t0), Some(ForRound { refusal: r, blocks: true }));
        assert_eq!(held.round_ended(ok(), t0), None);
        assert_eq!(held.for_round(t0), None);
    }
}
