//! Who may write, and in which term: the leader Lease, the shards and their fair share, and the
//! stamp of the controller version that wrote an object. Every member write carries the term
//! decided here.
//!
//! | module | one reason to change |
//! |---|---|
//! | [`leader`] | how a term is won, renewed, lost and stamped on writes |
//! | [`shards`] | how federations are spread over `spanset run` replicas |
//! | [`share`] | how many shards one replica may hold |
//! | [`shard_hash`] | which shard a federation falls in |
//! | [`written_by`] | how a newer controller version is recognised on an object |

pub mod leader;
pub mod shard_hash;
pub mod shards;
pub mod share;
pub mod written_by;
