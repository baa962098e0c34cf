//! The chain level: [`Chain`], a group as a distributed doubly-linked list,
//! and every algorithm that runs on one. [`Comm`](crate::Comm) is built on
//! it; programs that keep their own chains (tests, benchmarks) work here.

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
