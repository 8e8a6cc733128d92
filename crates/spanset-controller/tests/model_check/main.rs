//! The move protocol model-checked with stateright over the controller's own decisions
//! (`model_check`), and the model it explores (`model`): `cargo test -p spanset-controller
//! --test model_check`.

mod model;
mod model_check;
