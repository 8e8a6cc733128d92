//! The gate every write passes before anything is sent: the member is admitted, this process
//! leads in the write's term, and the member carries no newer term
//! ([`crate::decisions::safety::term_allows`]).

use crate::{
    actors::messages::WriteError,
    decisions::safety::{self, Rules, TermRefusal},
};

/// What the watcher knows when a write arrives, for the gate.
#[derive(Debug, Clone, Copy)]
pub struct WriterStanding<'a> {
    /// Whether the supervisor lets this member be used, or why not yet.
    pub admission: &'a Result<(), String>,
    /// The term this process leads in now, if any.
    pub leading: Option<u64>,
    /// The newest term seen stamped on the member's objects.
    pub member_newest: u64,
}

/// Why a write is not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteRefusal {
    /// The member is not admitted (it may reach another member's cluster): why.
    NotAdmitted(String),
    /// This process does not lead in the write's term (any more).
    NotLeading,
    /// The member carries a newer term: this process is a stale leader and steps down.
    Superseded {
        /// The newest term seen on the member's objects.
        newest: u64,
    },
}

impl WriteRefusal {
    /// What the coordinator is told.
    pub fn reply(&self, cluster: &str, term: u64) -> WriteError {
        match self {
            WriteRefusal::NotAdmitted(why) => {
                WriteError::Unavailable { cluster: cluster.to_string(), message: format!("not used: {why}") }
            }
            WriteRefusal::NotLeading | WriteRefusal::Superseded { .. } => WriteError::NotLeader(term),
        }
    }
}

/// Whether a write of `term` may be sent to the member.
pub fn admit(standing: &WriterStanding<'_>, term: u64) -> Result<(), WriteRefusal> {
    // Nothing is written through a member not admitted (it may reach another's cluster).
    if let Err(why) = standing.admission {
        return Err(WriteRefusal::NotAdmitted(why.clone()));
    }
    safety::term_allows(&Rules::ALL, standing.leading, standing.member_newest, term).map_err(|r| match r {
        TermRefusal::NotLeading => WriteRefusal::NotLeading,
        TermRefusal::Superseded { newest } => WriteRefusal::Superseded { newest },
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    static ADMITTED: Result<(), String> = Ok(());

    /// An admitted member, this process leading in `leading`, the member's newest term `newest`.
    pub fn standing(leading: Option<u64>, newest: u64) -> WriterStanding<'static> {
        WriterStanding { admission: &ADMITTED, leading, member_newest: newest }
    }

    #[test]
    fn a_write_of_a_term_this_process_does_not_lead_in_is_refused() {
        assert_eq!(admit(&standing(Some(5), 0), 4), Err(WriteRefusal::NotLeading));
        assert_eq!(admit(&standing(None, 0), 4), Err(WriteRefusal::NotLeading));
        assert_eq!(admit(&standing(Some(5), 5), 5), Ok(()));
        assert_eq!(WriteRefusal::NotLeading.reply("east", 4), WriteError::NotLeader(4));
    }

    #[test]
    fn a_member_carrying_a_newer_term_supersedes_the_writer() {
        assert_eq!(admit(&standing(Some(5), 6), 5), Err(WriteRefusal::Superseded { newest: 6 }));
        assert_eq!(WriteRefusal::Superseded { newest: 6 }.reply("east", 5), WriteError::NotLeader(5));
    }

    #[test]
    fn nothing_is_written_through_a_member_not_admitted() {
        let waiting = Err("its cluster identity is not read yet".to_string());
        let s = WriterStanding { admission: &waiting, leading: Some(5), member_newest: 0 };
        assert_eq!(admit(&s, 5), Err(WriteRefusal::NotAdmitted("its cluster identity is not read yet".into())));
        assert_eq!(
            WriteRefusal::NotAdmitted("x".into()).reply("east", 5),
            WriteError::Unavailable { cluster: "east".into(), message: "not used: x".into() }
        );
    }
}
