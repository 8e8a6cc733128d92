//! Member-side logic without actors: the objects spanset writes in a member, and the compact
//! cache its watcher keeps.

pub mod cache;
pub mod objects;
