//! The chain level: a group as a [`Chain`], a distributed doubly-linked
//! list, and every collective that runs on one, as free functions of the
//! transport, the chain and a deadline. A [`Comm`](crate::Comm) is made of
//! a chain and calls these for its members; this module is for programs
//! that build and keep their own chains (tests, benchmarks, runtimes).

mod node;

pub(crate) use node::{CallTags, Calls, Side};
pub use node::{Chain, Neighbours};

pub use crate::bulk::{
    ring_allreduce, ring_allreduce_stream, scatter_allgather, scatter_allgather_stream, BulkCall,
};
pub use crate::scan::{
    allreduce, barrier, double_scan, exscan, exscan_rl, scan, scan_rl, DoubleScan,
};
pub use crate::shift::shift;
pub use crate::split::{
    split, split_by, Group, Split, AUTO_SERIAL_MAX_REORDER, AUTO_SERIAL_MAX_SPLIT, CHENG_MAX_ITEMS,
    HASH64_SERIAL_BELOW,
};
pub use crate::tree::{
    allgather, bcast, bcast_bytes, gather, gather_bytes, reduce, scatter, scatter_bytes,
};
