//! Large-message collectives over an explicit rank list that ignore
//! topology: the baselines torus trees are measured against.

mod scatter_allgather;

pub use scatter_allgather::{ring_allreduce, scatter_allgather};
