//! What a program that uses communicators needs, in one import:
//! `use catena_algorithms::prelude::*;`.

pub use crate::alltoall::{
    AlltoallPlan, Emit, Options as AlltoallOptions, Peers as AlltoallPeers,
    Variant as AlltoallVariant,
};
pub use crate::comm::{with_world, Comm, CreateAlgorithm};
pub use crate::groupmap::{GroupMap, Strategy};
pub use crate::split::{Algorithm, Color, Key};
pub use crate::{Error, PipelineConfig, Result, TreePlan};
pub use catena_fabric::{block_on, Provider, Rma, Transport};
