//! What an operator can see: the Prometheus series, their controller-runtime aliases, the
//! exposition of `/metrics`, and the tracing spans.
//!
//! | module | one reason to change |
//! |---|---|
//! | [`metrics`] | which `spanset_` series exist, with which labels |
//! | [`runtime_metrics`] | the controller-runtime names dashboards expect |
//! | [`exposition`] | how `/metrics` is rendered |
//! | [`spans`] | the tracing spans' names and fields |

pub mod exposition;
pub mod metrics;
pub mod runtime_metrics;
pub mod spans;
