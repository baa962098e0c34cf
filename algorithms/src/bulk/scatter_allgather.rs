//! Broadcast of a large message by van de Geijn's algorithm: a binomial
//! scatter of one piece per process from the root, then a ring allgather of
//! the pieces. Each process sends about M bytes whatever P, where a binomial
//! tree makes the root send M log P.

use std::cell::Cell;

use catena_fabric::{Rank, Transport};

use super::ring::{allgather, expect_bytes, piece, zeroed, Ring, SCATTER};
use super::{read_cells, write_cells, BulkCall};
use crate::error::user_code;
use crate::Result;

/// Broadcasts `len` bytes from `root` to every rank of `call.ranks`: the root's
/// `source(0, out)` fills the whole message once, and every process (the
/// root included) gets each piece through `sink(offset, data)`, in no
/// particular order. Every process calls it with the same `root` and
/// `len`. Memory: the root holds the message; a process at relative
/// index i (counted from the root) holds its scatter subtree's pieces,
/// lowbit(i)/P of the message, until it has passed them on; then one piece.
///
/// Errors: `InvalidArgument` for an empty rank list, a rank twice, or a
/// root or calling process not in the list (before anything is sent), or
/// at the root a `len` memory cannot hold;
/// `Transport(InvalidRank)` for a rank outside the job; `Mismatch` when a
/// piece of the wrong length arrives (processes disagree on `len`, `root`
/// or `ranks`); `UserCode` if `source` or `sink` panics.
pub async fn scatter_allgather_stream<T: Transport>(
    call: BulkCall<'_, T>,
    root: Rank,
    len: usize,
    mut source: impl FnMut(usize, &mut [u8]),
    mut sink: impl FnMut(usize, &[u8]),
) -> Result<()> {
    let BulkCall {
        t,
        ranks,
        context: ctx,
        deadline,
    } = call;
    let ring = Ring::new(ranks, Some(root), t.rank(), t.size())?;
    let (p, me) = (ring.parts(), ring.me);
    // Binomial scatter: relative index i receives pieces [i, i + lowbit(i))
    // from i - lowbit(i); the root starts with all of them.
    let span = if me == 0 {
        p.next_power_of_two()
    } else {
        1 << me.trailing_zeros()
    };
    let pieces = |first: usize, count: usize| {
        piece(len, p, first).start..piece(len, p, (first + count).min(p) - 1).end
    };
    let held = pieces(me, span);
    let mut data = Vec::new();
    if me == 0 {
        zeroed(&mut data, held.len())?;
        user_code("a broadcast source", || source(0, &mut data))?;
    } else {
        let parent = ring.rank(me - span);
        data = t.recv(Some(parent), ctx, SCATTER, deadline).await?.data;
        expect_bytes(data.len(), held.len(), parent)?;
    }
    let mut mask = span / 2;
    while mask > 0 {
        let child = me + mask;
        if child < p {
            let sub = pieces(child, mask);
            let bytes = &data[sub.start - held.start..sub.end - held.start];
            t.send(ring.rank(child), ctx, SCATTER, bytes, deadline)
                .await?;
        }
        mask /= 2;
    }
    let own = piece(len, p, me);
    data.truncate(own.len());
    let mut sink =
        |offset: usize, data: &[u8]| user_code("a broadcast sink", || sink(offset, data));
    sink(own.start, &data)?;
    allgather(call, &ring, len, 1, (me, data), &mut sink).await
}

/// [`scatter_allgather_stream`] from the root's `data` into every other
/// process's `data` (all pass the same length).
pub async fn scatter_allgather<T: Transport>(
    call: BulkCall<'_, T>,
    root: Rank,
    data: &mut [u8],
) -> Result<()> {
    let is_root = call.t.rank() == root;
    let cells = Cell::from_mut(data).as_slice_of_cells();
    scatter_allgather_stream(
        call,
        root,
        cells.len(),
        |offset, out| read_cells(&cells[offset..], out),
        // The root has the message already.
        |offset, piece| {
            if !is_root {
                write_cells(&cells[offset..], piece)
            }
        },
    )
    .await
}
