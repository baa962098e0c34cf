//! catena's group algorithms, each written once against the
//! `catena_fabric::Transport` contract so it runs unchanged on every provider
//! and in the simulator.

pub mod shift;

pub use shift::shift;
