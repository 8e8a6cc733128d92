//! The watcher's decisions, as plain functions: each takes what the watcher knows (the message,
//! the cached object and its resourceVersion, the term, an uncertain write…) and answers what
//! to do as data: the calls to send in order, or a refusal, and, once a call's outcome is
//! known, the cache change and the reply. No `async`, no client, no actor: the handlers in
//! [`super`] perform what these decide, and the unit tests here pin each rule down.
//!
//! ```text
//! message ─▶ decide::plan_* (pure) ─▶ calls ─▶ the handler sends them ─▶ outcome
//!         ─▶ decide::settle_* (pure) ─▶ cache change + reply
//! ```

pub mod admit;
pub mod answer;
pub mod claims;
pub mod health;
pub mod objects;
pub mod sts;
pub mod supporting;
pub mod teardown;
pub mod watch;

pub use admit::{WriteRefusal, WriterStanding};
pub use answer::{CallFailure, DeleteOutcome};
