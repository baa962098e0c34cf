//! What both bulk algorithms share: the rank list, checked and seen from
//! this process; the split of a message into one near-equal piece per
//! process; and the ring allgather that passes the pieces round.

use std::ops::Range;

use catena_fabric::{Rank, Tag, Transport};

use super::BulkCall;
use crate::{Error, Result};

/// The scatter's messages, within the caller's context.
pub(super) const SCATTER: Tag = 1;
/// The rings' messages. Ring neighbours do not depend on the root, so calls
/// with different roots on one context still match in order.
pub(super) const RING: Tag = 2;

/// Piece `k` of `parts` near-equal contiguous pieces of `len` units: the
/// first `len % parts` pieces have one unit more.
pub(super) fn piece(len: usize, parts: usize, k: usize) -> Range<usize> {
    let (base, extra) = (len / parts, len % parts);
    let start = k * base + k.min(extra);
    start..start + base + usize::from(k < extra)
}

/// A rank list seen from this process. Positions are counted from the
/// root: relative index 0 is the root, and relative index i gets piece i.
pub(super) struct Ring<'a> {
    ranks: &'a [Rank],
    root: usize,
    /// This process's relative index.
    pub(crate) me: usize,
}

impl<'a> Ring<'a> {
    /// Checks `ranks` (not empty, no rank twice, every rank in the job of
    /// `size`, `root` and `me` on it) and places `me`; the root defaults to
    /// the first rank. The checks cost O(P log P), little beside the O(M)
    /// data of a large-message collective.
    pub(crate) fn new(ranks: &'a [Rank], root: Option<Rank>, me: Rank, size: u32) -> Result<Self> {
        let Some(&first) = ranks.first() else {
            return Err(Error::InvalidArgument("an empty rank list".into()));
        };
        if let Some(&rank) = ranks.iter().find(|&&r| r >= size) {
            return Err(catena_fabric::Error::InvalidRank { rank, size }.into());
        }
        let mut sorted = ranks.to_vec();
        sorted.sort_unstable();
        if let Some(twice) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(format!(
                "rank {} appears twice in the rank list",
                twice[0]
            )));
        }
        let at = |rank: Rank, who: String| {
            ranks
                .iter()
                .position(|&r| r == rank)
                .ok_or_else(|| Error::InvalidArgument(format!("{who} is not in the rank list")))
        };
        let root = root.unwrap_or(first);
        let root = at(root, format!("the root {root}"))?;
        let me = at(me, format!("this process (rank {me})"))?;
        Ok(Ring {
            ranks,
            root,
            me: (me + ranks.len() - root) % ranks.len(),
        })
    }

    /// The rank at relative index `relative`, modulo P.
    pub(crate) fn rank(&self, relative: usize) -> Rank {
        self.ranks[(relative + self.root) % self.ranks.len()]
    }

    /// P, the number of processes (and of pieces).
    pub(crate) fn parts(&self) -> usize {
        self.ranks.len()
    }

    pub(crate) fn right(&self) -> Rank {
        self.rank(self.me + 1)
    }

    pub(crate) fn left(&self) -> Rank {
        self.rank(self.me + self.parts() - 1)
    }
}

/// Makes `out` hold `n` zeroed elements, or fails with `InvalidArgument`
/// where memory cannot hold them (a length near `usize::MAX` is an error
/// on this process, not an abort).
pub(super) fn zeroed<E: bytemuck::Zeroable + Clone>(out: &mut Vec<E>, n: usize) -> Result<()> {
    out.clear();
    out.try_reserve_exact(n).map_err(|_| {
        Error::InvalidArgument(format!(
            "a piece of {n} elements of {} bytes does not fit in memory",
            size_of::<E>()
        ))
    })?;
    out.resize(n, E::zeroed());
    Ok(())
}

/// Fails unless `from` sent the `expected` bytes: processes that passed
/// different message lengths (or roots, or rank lists) find out here,
/// instead of reading past a piece.
pub(super) fn expect_bytes(got: usize, expected: usize, from: Rank) -> Result<()> {
    if got == expected {
        return Ok(());
    }
    Err(Error::Mismatch {
        what: format!("the message: rank {from} sent {got} bytes where {expected} were due"),
    })
}

/// Ring allgather of the P pieces of `len` units of `unit` bytes: this
/// process starts with piece `first` (its bytes `data`), sends what it got
/// last to the right, and hands every piece it receives from the left to
/// `sink` with the piece's offset in units.
pub(super) async fn allgather<T: Transport>(
    call: BulkCall<'_, T>,
    ring: &Ring<'_>,
    len: usize,
    unit: usize,
    (mut k, mut data): (usize, Vec<u8>),
    sink: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    let BulkCall {
        t,
        context: ctx,
        deadline,
        ..
    } = call;
    let p = ring.parts();
    for _ in 1..p {
        t.send(ring.right(), ctx, RING, &data, deadline).await?;
        data = t.recv(Some(ring.left()), ctx, RING, deadline).await?.data;
        k = (k + p - 1) % p;
        let range = piece(len, p, k);
        expect_bytes(data.len(), range.len() * unit, ring.left())?;
        sink(range.start, &data)?;
    }
    Ok(())
}
