//! Member-side logic without actors: the objects spanset writes in a member, the compact
//! cache its watcher keeps, and its judgement of the member's health.

pub mod budget;
pub mod cache;
pub mod contact_clock;
pub mod endpoints;
pub mod guard_access;
pub mod health;
pub mod identity;
pub mod objects;
pub mod pod_record;
pub mod policies;
pub mod protections;
pub mod sharing;
pub mod storage;
pub mod supporting;
pub mod ungated;
pub mod workload;
