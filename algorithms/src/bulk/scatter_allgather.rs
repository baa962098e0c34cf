//! The large-message algorithms MPI libraries use when they ignore the
//! torus, as baselines: broadcast by binomial scatter then ring allgather
//! (van de Geijn), allreduce by ring reduce-scatter then ring allgather.
//! Tagged messages over the communicator's rank order; O(M/P) per process
//! beyond the root's message.

use std::ops::Range;

use catena_fabric::{ContextId, Rank, Result, Time, Transport};

const SCATTER: u32 = 1;
const RING: u32 = 2;

/// Piece k of P near-equal pieces of `len` units.
fn piece(len: usize, parts: usize, k: usize) -> Range<usize> {
    let (base, extra) = (len / parts, len % parts);
    let start = k * base + k.min(extra);
    start..start + base + usize::from(k < extra)
}

/// Where this process sits: its index relative to the root, and the rank
/// at any relative index.
struct Ring<'a> {
    ranks: &'a [Rank],
    root: usize,
    me: usize,
}

impl Ring<'_> {
    fn new<'a>(ranks: &'a [Rank], root: Rank, me: Rank) -> Ring<'a> {
        let at = |r| ranks.iter().position(|&x| x == r).expect("a member");
        let (root, me) = (at(root), at(me));
        Ring {
            ranks,
            root,
            me: (me + ranks.len() - root) % ranks.len(),
        }
    }

    fn rank(&self, relative: usize) -> Rank {
        self.ranks[(relative + self.root) % self.ranks.len()]
    }

    fn parts(&self) -> usize {
        self.ranks.len()
    }
}

/// Ring allgather of P pieces of `len` units: this process starts with
/// piece `first` (relative index), sends what it got last to the right and
/// hands every piece it receives to `sink` with its offset in units.
async fn ring_allgather<T: Transport>(
    t: &T,
    ring: &Ring<'_>,
    ctx: ContextId,
    len: usize,
    first: (usize, Vec<u8>),
    sink: &mut dyn FnMut(usize, &[u8]),
    deadline: Time,
) -> Result<()> {
    let p = ring.parts();
    let (right, left) = (
        ring.rank((ring.me + 1) % p),
        ring.rank((ring.me + p - 1) % p),
    );
    let (mut k, mut data) = first;
    for _ in 0..p - 1 {
        t.send(right, ctx, RING, &data, deadline).await?;
        data = t.recv(Some(left), ctx, RING, deadline).await?.data;
        k = (k + p - 1) % p;
        sink(piece(len, p, k).start, &data);
    }
    Ok(())
}

/// Broadcast of `len` bytes from `root`: the root's `source` fills the
/// message, every process gets every piece through `sink`.
#[allow(clippy::too_many_arguments)]
pub async fn scatter_allgather<T: Transport>(
    t: &T,
    ranks: &[Rank],
    root: Rank,
    ctx: ContextId,
    len: usize,
    source: &mut dyn FnMut(usize, &mut [u8]),
    sink: &mut dyn FnMut(usize, &[u8]),
    deadline: Time,
) -> Result<()> {
    let ring = Ring::new(ranks, root, t.rank());
    let (p, me) = (ring.parts(), ring.me);
    // Binomial scatter: relative index i holds pieces [i, i + lowbit(i)).
    let span = if me == 0 {
        p.next_power_of_two()
    } else {
        1 << me.trailing_zeros()
    };
    let held = piece(len, p, me).start..piece(len, p, (me + span).min(p) - 1).end;
    let mut data = vec![0; held.len()];
    if me == 0 {
        source(0, &mut data);
    } else {
        let parent = ring.rank(me - (1 << me.trailing_zeros()));
        data = t.recv(Some(parent), ctx, SCATTER, deadline).await?.data;
    }
    let mut mask = span / 2;
    while mask > 0 {
        let child = me + mask;
        if child < p {
            let sub = piece(len, p, child).start..piece(len, p, (child + mask).min(p) - 1).end;
            let bytes = &data[sub.start - held.start..sub.end - held.start];
            t.send(ring.rank(child), ctx, SCATTER, bytes, deadline)
                .await?;
        }
        mask /= 2;
    }
    let own = piece(len, p, me);
    data.truncate(own.len());
    sink(own.start, &data);
    ring_allgather(t, &ring, ctx, len, (me, data), sink, deadline).await
}

/// Allreduce (i64 wrapping sum) of `len` elements: ring reduce-scatter,
/// then ring allgather of the reduced pieces.
#[allow(clippy::too_many_arguments)]
pub async fn ring_allreduce<T: Transport>(
    t: &T,
    ranks: &[Rank],
    ctx: ContextId,
    len: usize,
    contribution: &mut dyn FnMut(usize, &mut [i64]),
    result: &mut dyn FnMut(usize, &[i64]),
    deadline: Time,
) -> Result<()> {
    let ring = Ring::new(ranks, ranks[0], t.rank());
    let (p, me) = (ring.parts(), ring.me);
    let (right, left) = (ring.rank((me + 1) % p), ring.rank((me + p - 1) % p));
    let own = |k: usize, contribution: &mut dyn FnMut(usize, &mut [i64])| {
        let range = piece(len, p, k);
        let mut v = vec![0i64; range.len()];
        contribution(range.start, &mut v);
        v
    };
    let mut k = me;
    let mut partial = own(k, contribution);
    for _ in 0..p - 1 {
        let bytes: Vec<u8> = partial.iter().flat_map(|x| x.to_le_bytes()).collect();
        t.send(right, ctx, RING, &bytes, deadline).await?;
        let got = t.recv(Some(left), ctx, RING, deadline).await?.data;
        k = (k + p - 1) % p;
        partial = own(k, contribution);
        for (a, b) in partial.iter_mut().zip(got.chunks_exact(8)) {
            *a = a.wrapping_add(i64::from_le_bytes(b.try_into().expect("8 bytes")));
        }
    }
    // This process now holds piece k reduced over everyone.
    let elements = |bytes: &[u8]| -> Vec<i64> {
        bytes
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect()
    };
    result(piece(len, p, k).start, &partial);
    let bytes: Vec<u8> = partial.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut sink = |offset: usize, data: &[u8]| result(offset, &elements(data));
    ring_allgather(t, &ring, ctx, len, (k, bytes), &mut sink, deadline).await
}
