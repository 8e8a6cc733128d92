//! The planner's property tests (`plan_props`) and its differential test against a frozen copy
//! of an earlier planner (`plan_differential`), one binary: `cargo test -p spanset-plan`.

mod plan_gen;
// A frozen copy of the planner (plan_differential compares with it): what the comparison does
// not call stays as it was.
#[allow(dead_code)]
mod plan_reference;

mod plan_differential;
mod plan_props;
