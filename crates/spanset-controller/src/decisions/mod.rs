//! The pure decisions: from a federation, its members' reports, the term and the clock to the
//! next writes. Nothing here holds an actor, a client or a clock of its own, so every rule is
//! tested on values and model-checked (`tests/layering.rs` holds this folder to it).
//!
//! | module | one reason to change |
//! |---|---|
//! | [`reconcile`] | what one round decides, step by step |
//! | [`order_gates`] | which of the planner's steps one StatefulSet would allow now |
//! | [`rollout`] | how a template change rolls across members |
//! | [`disruption`] | how one disruption budget is shared between members |
//! | [`network`] | which names follow ordinals across members |
//! | [`move_phase`] | the phases of a move and their transitions |
//! | [`holds`] | what a federation still holds in one member |
//! | [`bounds`] | the bounds on a mistyped `spec.replicas` |
//! | [`safety`] | the at-most-one and volume rules, named one by one |
//! | [`effects`] | the order in which one decision is carried out |
//! | [`status`] | the conditions a federation reports |

pub mod bounds;
pub mod disruption;
pub mod effects;
pub mod holds;
pub mod move_phase;
pub mod network;
pub mod order_gates;
pub mod reconcile;
pub mod rollout;
pub mod safety;
pub mod status;
