//! Allreduce of a large message on a ring: a reduce-scatter leaves each
//! process one piece reduced over everyone, then an allgather passes the
//! reduced pieces round. Each process sends 2(P-1)/P of the message, the
//! least any allreduce can; latency grows with P.

use std::cell::Cell;

use bytemuck::Pod;
use catena_fabric::Transport;

use super::ring::{allgather, expect_bytes, piece, zeroed, Ring, RING};
use super::{read_cells, write_cells, BulkCall};
use crate::error::user_code;
use crate::{Error, Result};

/// Elementwise allreduce of `len` elements over `call.ranks`:
/// `contribution(offset, out)` fills this process's elements from `offset`
/// on (called once per piece), `op(acc, other)` folds `other` into `acc`,
/// and `result(offset, data)` gets each piece of the reduced elements once,
/// in no particular order. `op` must be associative and commutative: each
/// piece's fold starts at a different process of the ring. Every process
/// calls it with the same `len`. Memory: about two pieces (2M/P).
///
/// Errors: `InvalidArgument` for an empty rank list, a rank twice, the
/// calling process not in the list, or zero-sized elements (before
/// anything is sent), or a piece memory cannot hold; `Transport(InvalidRank)` for a rank outside the job;
/// `Mismatch` when a piece of the wrong length arrives (processes disagree
/// on `len` or `ranks`); `UserCode` if a callback or `op` panics.
pub async fn ring_allreduce_stream<T: Transport, E: Pod>(
    call: BulkCall<'_, T>,
    len: usize,
    mut contribution: impl FnMut(usize, &mut [E]),
    op: impl Fn(&mut [E], &[E]),
    mut result: impl FnMut(usize, &[E]),
) -> Result<()> {
    let BulkCall {
        t,
        ranks,
        context: ctx,
        deadline,
    } = call;
    let unit = size_of::<E>();
    if unit == 0 {
        return Err(Error::InvalidArgument(
            "an allreduce of zero-sized elements".into(),
        ));
    }
    let ring = Ring::new(ranks, None, t.rank(), t.size())?;
    let p = ring.parts();
    let mut own = |k: usize, out: &mut Vec<E>| {
        let range = piece(len, p, k);
        zeroed(out, range.len())?;
        user_code("an allreduce contribution", || {
            contribution(range.start, out)
        })
    };
    // Reduce-scatter: pass the partial sum of piece k right, take piece
    // k - 1's from the left and fold in this process's own.
    let mut k = ring.me;
    let mut partial = Vec::new();
    own(k, &mut partial)?;
    let mut incoming: Vec<E> = Vec::new();
    for _ in 1..p {
        let bytes = bytemuck::cast_slice(&partial);
        t.send(ring.right(), ctx, RING, bytes, deadline).await?;
        let got = t.recv(Some(ring.left()), ctx, RING, deadline).await?.data;
        k = (k + p - 1) % p;
        own(k, &mut partial)?;
        expect_bytes(got.len(), partial.len() * unit, ring.left())?;
        to_elements(&got, &mut incoming);
        user_code("an allreduce operation", || op(&mut partial, &incoming))?;
    }
    // This process now holds piece k reduced over everyone.
    let mut result =
        |offset: usize, data: &[E]| user_code("an allreduce result", || result(offset, data));
    result(piece(len, p, k).start, &partial)?;
    let mut sink = |offset: usize, bytes: &[u8]| {
        to_elements(bytes, &mut incoming);
        result(offset, &incoming)
    };
    let first = (k, bytemuck::cast_slice(&partial).to_vec());
    allgather(call, &ring, len, unit, first, &mut sink).await
}

/// [`ring_allreduce_stream`] in place: `data` holds this process's
/// elements, then the reduced ones (all pass the same length).
pub async fn ring_allreduce<T: Transport, E: Pod>(
    call: BulkCall<'_, T>,
    data: &mut [E],
    op: impl Fn(&mut [E], &[E]),
) -> Result<()> {
    let cells = Cell::from_mut(data).as_slice_of_cells();
    ring_allreduce_stream(
        call,
        cells.len(),
        |offset, out| read_cells(&cells[offset..], out),
        op,
        |offset, reduced| write_cells(&cells[offset..], reduced),
    )
    .await
}

/// `bytes` (a whole number of elements) as elements, in `out`: a received
/// message need not be aligned for `E`, so it is copied.
fn to_elements<E: Pod>(bytes: &[u8], out: &mut Vec<E>) {
    out.clear();
    out.resize(bytes.len() / size_of::<E>(), E::zeroed());
    bytemuck::cast_slice_mut(out).copy_from_slice(bytes);
}
