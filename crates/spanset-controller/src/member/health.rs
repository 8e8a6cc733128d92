//! A member's health as its watcher judges it: when it last answered, and why its latest call
//! failed. A member is Unreachable once it has not answered for the threshold; one failed
//! probe or a blip shorter than that never flips it, and a hung member (calls that never
//! return) counts as failing with `Timeout`, since only a successful answer is contact.

use std::time::{Duration, Instant};

/// Default of `failover.unreachableAfterSeconds`: how long a member may stay silent before it
/// counts as unreachable (also the MemberCluster's `Reachable` threshold). Ten seconds is five
/// probe periods and two probe timeouts, so one slow answer never flips it, and it leaves room
/// under the 15 s in which a lost member is promised to show (at 100 members too) for the
/// judgement's status write on a busy host. Unreachable only stops writes to the member; what
/// acts on a loss (a fence, by hand or after `fenceAfterSeconds`) waits longer.
pub const DEFAULT_UNREACHABLE_AFTER: Duration = Duration::from_secs(10);

/// Why the latest call to a member failed, as the `Reachable` condition's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The connection was refused or cut.
    Refused,
    /// No answer in time (a hung member, or a network that drops packets).
    Timeout,
    /// The member rejected the credentials (401).
    Unauthorized,
    /// The member refused the call for lack of permission (403).
    Forbidden,
    /// The member answered with a server error (5xx) or something unreadable.
    ServerError,
}

impl Failure {
    /// The condition reason.
    pub fn reason(self) -> &'static str {
        match self {
            Failure::Refused => "Refused",
            Failure::Timeout => "Timeout",
            Failure::Unauthorized => "Unauthorized",
            Failure::Forbidden => "Forbidden",
            Failure::ServerError => "ServerError",
        }
    }

    /// Classifies a client error.
    pub fn of(e: &kube::Error) -> Self {
        match e {
            kube::Error::Api(s) if s.code == 401 => Failure::Unauthorized,
            kube::Error::Api(s) if s.code == 403 => Failure::Forbidden,
            kube::Error::Api(s) if s.code == 408 || s.code == 504 => Failure::Timeout,
            kube::Error::Api(_) => Failure::ServerError,
            other => Self::of_text(&other.to_string(), source_chain(other)),
        }
    }

    /// Classifies by the words of an error and of its causes: hyper, tower and the OS say
    /// "timed out" or "refused" / "reset" / "closed", without a type that survives boxing.
    fn of_text(top: &str, causes: String) -> Self {
        let all = format!("{top}: {causes}").to_ascii_lowercase();
        if all.contains("timed out") || all.contains("timeout") || all.contains("elapsed") {
            Failure::Timeout
        } else if ["refused", "reset", "closed", "broken pipe", "connect", "unreachable", "dns"]
            .iter()
            .any(|w| all.contains(w))
        {
            Failure::Refused
        } else {
            Failure::ServerError
        }
    }
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = Vec::new();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push(s.to_string());
        cur = s.source();
    }
    out.join(": ")
}

/// What the watcher knows of a member's health.
#[derive(Debug, Clone, Default)]
pub struct Health {
    /// The last successful call (probe, list, or watch event).
    pub last_contact: Option<Instant>,
    /// Why the latest call failed, and its message, until a call succeeds.
    pub failure: Option<(Failure, String)>,
    /// Watched resources the member refuses to show (403), with the member's message (which
    /// names the missing permission), until a watch of that resource delivers again. A member
    /// can answer probes and still be unusable this way.
    pub denied: std::collections::BTreeMap<String, String>,
}

impl Health {
    /// A call succeeded at `now`.
    pub fn answered(&mut self, now: Instant) {
        self.last_contact = Some(now);
        self.failure = None;
    }

    /// A call failed.
    pub fn failed(&mut self, why: Failure, message: String) {
        self.failure = Some((why, message));
    }

    /// Whether the member answered within `after` of `now`.
    pub fn reachable(&self, now: Instant, after: Duration) -> bool {
        self.last_contact.is_some_and(|t| now.saturating_duration_since(t) < after)
    }

    /// The `Reachable` condition at `now`: status, reason and message. Credentials the member
    /// rejects (401) and permissions it refuses (403) show at once, whatever else answers:
    /// they are not a blip that waiting cures.
    pub fn condition(&self, now: Instant, after: Duration) -> (bool, &'static str, String) {
        if let Some((_, message)) = self.denied.iter().next() {
            let resources: Vec<&str> = self.denied.keys().map(String::as_str).collect();
            return (false, Failure::Forbidden.reason(), format!("cannot watch {}: {message}", resources.join(", ")));
        }
        if let Some((Failure::Unauthorized, message)) = &self.failure {
            return (false, Failure::Unauthorized.reason(), message.clone());
        }
        if self.reachable(now, after) {
            return (true, "Answering", String::new());
        }
        let silent = match self.last_contact {
            Some(t) => format!("no successful call for {}s", now.saturating_duration_since(t).as_secs()),
            None => "never answered".to_string(),
        };
        match &self.failure {
            Some((why, msg)) => (false, why.reason(), format!("{silent}: {msg}")),
            // Calls were made and none returned: a hung member.
            None => (false, Failure::Timeout.reason(), format!("{silent}: calls do not return")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_probe_or_a_blip_shorter_than_the_threshold_keeps_the_member_reachable() {
        let t0 = Instant::now();
        let after = Duration::from_secs(15);
        let mut h = Health::default();
        assert!(!h.reachable(t0, after), "never contacted");
        assert_eq!(h.condition(t0, after).1, "Timeout");
        h.answered(t0);
        h.failed(Failure::Refused, "connection refused".into());
        assert!(h.reachable(t0 + Duration::from_secs(14), after));
        assert_eq!(h.condition(t0 + Duration::from_secs(14), after).1, "Answering");
        let (up, reason, msg) = h.condition(t0 + Duration::from_secs(15), after);
        assert!(!up);
        assert_eq!(reason, "Refused");
        assert!(msg.contains("no successful call for 15s") && msg.contains("connection refused"), "{msg}");
        h.answered(t0 + Duration::from_secs(16));
        assert!(h.reachable(t0 + Duration::from_secs(16), after));
    }

    #[test]
    fn errors_are_classified_by_code_and_words() {
        let api = |code| kube::Error::Api(kube::core::Status::failure("m", "r").with_code(code).boxed());
        assert_eq!(Failure::of(&api(401)), Failure::Unauthorized);
        assert_eq!(Failure::of(&api(403)), Failure::Forbidden);
        assert_eq!(Failure::of(&api(500)), Failure::ServerError);
        assert_eq!(Failure::of(&api(504)), Failure::Timeout);
        assert_eq!(
            Failure::of_text("error trying to connect", "Connection refused (os error 111)".into()),
            Failure::Refused
        );
        assert_eq!(Failure::of_text("probe", "deadline has elapsed".into()), Failure::Timeout);
        assert_eq!(Failure::of_text("bad", "invalid JSON".into()), Failure::ServerError);
    }
}
