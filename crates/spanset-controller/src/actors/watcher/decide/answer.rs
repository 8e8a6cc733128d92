//! How a member call that failed is read: whether the member answered at all (contact), whether
//! its no is definite (the write was not applied), and what the coordinator is told.

use crate::actors::messages::WriteError;

/// A member call that failed, as the decisions read it: no client types, so that the rules
/// can be tested on plain values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFailure {
    /// The HTTP status the member answered with; `None`: no answer (timeout, connection).
    pub code: Option<u16>,
    /// The member's own words (its Status message), or the client's when it did not answer.
    pub message: String,
    /// The whole error as the client prints it.
    pub text: String,
}

impl CallFailure {
    /// Reads a client error.
    pub fn of(e: &kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => Self { code: Some(s.code), message: s.message.clone(), text: e.to_string() },
            other => Self { code: None, message: other.to_string(), text: other.to_string() },
        }
    }

    /// Whether the member answered `code`.
    pub fn is(&self, code: u16) -> bool {
        self.code == Some(code)
    }

    /// Whether the failure is still contact with the member: a refusal it answered (a 4xx
    /// other than 401/403). Anything else counts against its health.
    pub fn is_contact(&self) -> bool {
        matches!(self.code, Some(c) if c < 500 && c != 401 && c != 403)
    }

    /// Whether the member said a definite no (an answer below 500): the write was not
    /// applied. No answer, or a server error, leaves it open whether it was.
    pub fn is_definite(&self) -> bool {
        matches!(self.code, Some(c) if c < 500)
    }

    /// Whether the member does not serve the resource at all (404 "the server could not find
    /// the requested resource"), rather than a missing object or namespace (404 naming it).
    pub fn resource_missing(&self) -> bool {
        self.is(404) && self.message.contains("could not find the requested resource")
    }

    /// What the coordinator is told: a conflict plans again, a refusal names the member's
    /// words, anything else (429, 5xx, no answer) is the member not answering.
    pub fn reply(&self, cluster: &str) -> WriteError {
        match self.code {
            Some(409) => WriteError::Conflict,
            Some(code) if (400..500).contains(&code) && code != 429 => {
                WriteError::Refused { cluster: cluster.to_string(), code, message: self.message.clone() }
            }
            _ => WriteError::Unavailable { cluster: cluster.to_string(), message: self.text.clone() },
        }
    }
}

/// Hands a call's result to a decision: the value answered, or the failure read from its error.
pub fn reading<T, R>(res: &Result<T, kube::Error>, decide: impl FnOnce(Result<&T, &CallFailure>) -> R) -> R {
    match res {
        Ok(v) => decide(Ok(v)),
        Err(e) => decide(Err(&CallFailure::of(e))),
    }
}

/// How one delete of a precondition'ed object ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The member deleted it.
    Deleted,
    /// Nothing of it is left to delete: gone already (404), or another incarnation is there
    /// by now (409, the uid precondition failed).
    NothingLeft,
    /// The delete failed: the whole operation stops with this error.
    Failed,
}

/// Reads a delete's end. `conflict_is_gone`: the delete carried a uid precondition, so a 409
/// means the object named is gone (another one took its name).
pub fn delete_outcome(failure: Option<&CallFailure>, conflict_is_gone: bool) -> DeleteOutcome {
    match failure {
        None => DeleteOutcome::Deleted,
        Some(f) if f.is(404) || (conflict_is_gone && f.is(409)) => DeleteOutcome::NothingLeft,
        Some(_) => DeleteOutcome::Failed,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A failure the member answered with `code`.
    pub fn answered(code: u16, message: &str) -> CallFailure {
        CallFailure { code: Some(code), message: message.into(), text: format!("ApiError: {message}") }
    }

    /// A call that got no answer.
    pub fn silent() -> CallFailure {
        CallFailure { code: None, message: "operation timed out".into(), text: "operation timed out".into() }
    }

    #[test]
    fn a_conflict_plans_again_a_refusal_names_the_member_s_words_and_the_rest_is_unavailable() {
        assert_eq!(answered(409, "changed").reply("east"), WriteError::Conflict);
        assert_eq!(
            answered(422, "bad template").reply("east"),
            WriteError::Refused { cluster: "east".into(), code: 422, message: "bad template".into() }
        );
        for f in [answered(429, "slow down"), answered(500, "etcd"), silent()] {
            assert!(matches!(f.reply("east"), WriteError::Unavailable { .. }), "{f:?}");
        }
    }

    #[test]
    fn only_a_refusal_below_500_other_than_401_and_403_is_contact() {
        assert!(answered(409, "").is_contact());
        assert!(answered(422, "").is_contact());
        assert!(!answered(401, "").is_contact(), "rejected credentials count against the member");
        assert!(!answered(403, "").is_contact());
        assert!(!answered(503, "").is_contact());
        assert!(!silent().is_contact());
        assert!(answered(403, "").is_definite(), "but a 403 is a definite no: nothing was written");
        assert!(!answered(500, "").is_definite(), "a server error may have stored the write");
        assert!(!silent().is_definite());
    }

    #[test]
    fn a_client_error_is_read_as_the_member_s_status_or_as_no_answer() {
        let api = kube::Error::Api(kube::core::Status::failure("too old", "Gone").with_code(410).boxed());
        let f = CallFailure::of(&api);
        assert_eq!((f.code, f.message.as_str()), (Some(410), "too old"));
        let silent = CallFailure::of(&kube::Error::LinesCodecMaxLineLengthExceeded);
        assert_eq!(silent.code, None);
        assert!(!silent.is_definite());
    }

    #[test]
    fn a_missing_resource_is_told_from_a_missing_object() {
        assert!(answered(404, "the server could not find the requested resource").resource_missing());
        assert!(!answered(404, "statefulsets \"db\" not found").resource_missing());
    }

    #[test]
    fn a_conditional_delete_that_meets_another_incarnation_leaves_nothing_to_delete() {
        assert_eq!(delete_outcome(None, true), DeleteOutcome::Deleted);
        assert_eq!(delete_outcome(Some(&answered(404, "")), false), DeleteOutcome::NothingLeft);
        assert_eq!(delete_outcome(Some(&answered(409, "")), true), DeleteOutcome::NothingLeft);
        assert_eq!(delete_outcome(Some(&answered(409, "")), false), DeleteOutcome::Failed);
        assert_eq!(delete_outcome(Some(&silent()), true), DeleteOutcome::Failed);
    }
}
