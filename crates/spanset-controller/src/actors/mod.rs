//! The mailboxes and the I/O: one supervisor, one coordinator per federation, one watcher per
//! member, and the messages between them. What they decide is in [`crate::decisions`] and
//! [`crate::member`]; here is the order of effects and what is remembered between rounds.
//!
//! | module | one reason to change |
//! |---|---|
//! | [`supervisor`] | which watchers and coordinators exist, and when they start and stop |
//! | [`coordinator`] | how one federation's rounds are scheduled, carried out and followed up |
//! | [`watcher`] | how one member is watched, written and reported on |
//! | [`messages`] | what the actors say to each other |

pub mod coordinator;
pub mod messages;
pub mod supervisor;
pub mod watcher;
