//! The sandbox's commands: [`serve`] runs simulated clusters (`spanset sim`), [`ctl`] drives a
//! running one through its admin API (`spanset sim-ctl`). The `spanset` binary parses and runs
//! them; they live here so that they need nothing of the controller.

pub mod ctl;
pub mod serve;
