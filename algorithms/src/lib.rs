//! catena's group algorithms, each written once against the
//! `catena_fabric::Transport` contract so it runs unchanged on every provider
//! and in the simulator.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod alltoall;
mod blocking;
pub mod bulk;
mod call;
pub mod chain;
mod codec;
pub mod comm;
pub mod context;
mod deadline;
mod error;
mod host;
mod join;
pub use catena_groupmap as groupmap;
pub mod pipeline;
pub mod prelude;
pub mod scan;
pub mod shift;
pub mod split;
pub mod tree;

pub use alltoall::{
    AlltoallPlan, Emit, Options as AlltoallOptions, Peers as AlltoallPeers,
    Variant as AlltoallVariant,
};
pub use bulk::{
    ring_allreduce, ring_allreduce_stream, scatter_allgather, scatter_allgather_stream, BulkCall,
};
pub use chain::{Chain, Neighbours};
pub use codec::Wire;
pub use comm::{Comm, CreateAlgorithm};
pub use error::{Error, Result};
pub use groupmap::{GroupMap, GroupMapError, Strategy};
pub use pipeline::{torus_plan, PipelineConfig, TreeCollective, TreePlace, TreePlan};
pub use scan::{allreduce, barrier, double_scan, exscan, exscan_rl, scan, scan_rl, DoubleScan};
pub use shift::shift;
pub use split::{split, split_by, Algorithm, Color, Group, Key, Split};
pub use tree::{allgather, bcast, gather, gather_bytes, reduce, scatter, scatter_bytes};
