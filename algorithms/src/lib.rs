//! catena's group algorithms, each written once against the
//! `catena_fabric::Transport` contract so it runs unchanged on every provider
//! and in the simulator.
//!
//! Two levels. Here at the root: the communicator, [`Comm`], the types its
//! calls take, and [`prelude`] to import them at once. Beneath, [`chain`]:
//! the chains communicators are made of and every algorithm that runs on
//! one, for programs that build and keep chains themselves.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod alltoall;
mod blocking;
mod bulk;
mod call;
pub mod chain;
mod codec;
pub mod comm;
pub mod context;
mod deadline;
mod doubling;
mod error;
mod host;
mod join;
mod once;
pub use catena_groupmap as groupmap;
mod pipeline;
pub mod prelude;
mod scan;
mod shift;
mod split;
mod tree;

pub use alltoall::{
    AlltoallPlan, Emit, Options as AlltoallOptions, Peers as AlltoallPeers,
    Variant as AlltoallVariant,
};
pub use codec::Wire;
pub use comm::{Comm, CreateAlgorithm};
pub use error::{Error, Result};
pub use groupmap::{GroupMap, GroupMapError, Strategy};
pub use pipeline::{torus_plan, PipelineConfig, TreeCollective, TreePlace, TreePlan};
pub use split::{Algorithm, Color, Key};
