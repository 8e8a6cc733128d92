//! The process: how it starts, serves its endpoints and connects to the host and the members.
//! Nothing here decides what a federation needs; it wires what does.
//!
//! | module | one reason to change |
//! |---|---|
//! | [`app`] | which actors and endpoints the process runs, in which order |
//! | [`http`] | what `/metrics`, `/healthz` and `/readyz` answer |
//! | [`connection`] | the HTTP stack of every kube client (timeouts, User-Agent, HTTP/2) |
//! | [`host_client`] | how the host cluster is reached from the command line |
//! | [`member_http`] | what every request to a member is counted and logged as |
//! | [`crd_check`] | which CRD fields the controller needs installed before it starts |

pub mod app;
pub mod connection;
pub mod crd_check;
pub mod host_client;
pub mod http;
pub mod member_http;
