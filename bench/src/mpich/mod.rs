//! MPICH's algorithms as simulated baselines: what MPICH 4's default
//! selections do for the operations `catena-bench calibrate` compares,
//! written against the same transport traits as catena's algorithms so the
//! simulator runs both under one cost model. They are reference baselines,
//! not library algorithms: small, power-of-two fast paths as MPICH has
//! them, blocking sends (the simulator's sends never block), no error
//! recovery. Each file also gives its closed form under LogGP, which
//! `calibrate` uses where the simulator cannot hold MPICH's O(N) per-rank
//! buffers (a million ranks each gathering 8 MiB), checked against the
//! simulation where both run (the tests below each file).

pub(crate) mod allgather;
pub(crate) mod allreduce;
pub(crate) mod alltoallv;
pub(crate) mod create_group;
pub(crate) mod split;

use catena_fabric::{ContextId, Rank, Result, Tag, Time, Transport};
use catena_sim::LogGp;

/// The context the baselines' messages travel in (apart from catena's).
pub(crate) const CONTEXT: ContextId = 0x4D50_4943_4800_0000;

/// Sends `data` to `peer` and receives what `peer` sent with the same tag.
pub(crate) async fn exchange<T: Transport>(
    t: &T,
    peer: Rank,
    tag: Tag,
    data: &[u8],
    deadline: Time,
) -> Result<Vec<u8>> {
    t.send(peer, CONTEXT, tag, data, deadline).await?;
    Ok(t.recv(Some(peer), CONTEXT, tag, deadline).await?.data)
}

/// One LogGP round in which every rank sends `bytes` to one peer and
/// receives as many from another: o to send, L + k G on the wire, o to
/// receive (the send's gap never binds: one send a round).
pub(crate) fn round_ns(m: &LogGp, bytes: usize) -> f64 {
    2.0 * m.overhead_ns + m.latency_ns + bytes as f64 * m.per_byte_ns
}

/// log2 of a power of two.
pub(crate) fn log2(n: u32) -> u32 {
    debug_assert!(n.is_power_of_two());
    n.trailing_zeros()
}
