//! Scatter inside a host: the root posts each member its piece (long
//! pieces exposed one after another, each for its member alone) and every
//! member copies its own out.

use catena_fabric::{HostMemory, Time};

use super::layout::CELL;
use super::message::{announce, receive, receive_into};
use super::stream::{chunks, expose, Readers};
use super::Team;
use crate::Result;

/// The root's pieces, one per member in rank order.
#[derive(Clone, Copy)]
pub(crate) enum Pieces<'a> {
    /// Cut from one buffer, so many bytes each (a buffer too short for a
    /// member deals it an empty piece): no list made per call.
    Even(&'a [u8], usize),
    /// Of any lengths.
    Any(&'a [&'a [u8]]),
}

impl<'a> Pieces<'a> {
    fn count(&self, members: u32) -> usize {
        match self {
            Pieces::Even(..) => members as usize,
            Pieces::Any(pieces) => pieces.len(),
        }
    }

    fn get(&self, m: usize) -> &'a [u8] {
        match *self {
            Pieces::Even(all, piece) => all.get(m * piece..(m + 1) * piece).unwrap_or(&[]),
            Pieces::Any(pieces) => pieces[m],
        }
    }
}

/// The root's `pieces` (`Some` on the root only) dealt out: this member's
/// piece into `recv` (which must be exactly as long).
pub(crate) async fn scatter<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    pieces: Option<Pieces<'_>>,
    recv: &mut [u8],
    deadline: Time,
) -> Result<()> {
    match pieces {
        Some(pieces) => {
            deal(team, seq, pieces, deadline).await?;
            recv.copy_from_slice(pieces.get(team.me() as usize));
            Ok(())
        }
        None => receive_into(team, root, seq, recv, deadline).await,
    }
}

/// [`scatter`] with pieces of any length: this member's piece.
pub(crate) async fn scatter_any<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    pieces: Option<&[&[u8]]>,
    deadline: Time,
) -> Result<Vec<u8>> {
    match pieces {
        Some(pieces) => {
            deal(team, seq, Pieces::Any(pieces), deadline).await?;
            Ok(pieces[team.me() as usize].to_vec())
        }
        None => receive(team, root, seq, deadline).await,
    }
}

/// Posts each member its piece; exposes the long ones in rank order.
async fn deal<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    pieces: Pieces<'_>,
    deadline: Time,
) -> Result<()> {
    let me = team.me();
    let mut first = 0;
    let mut long = Vec::new();
    for m in 0..pieces.count(team.size()) {
        let piece = pieces.get(m);
        let m = m as u32;
        if m == me {
            continue;
        }
        announce(team, m, seq, piece, first, deadline).await?;
        if piece.len() > team.layout().inline() {
            first += chunks(piece.len(), CELL);
            long.push((piece, Readers::One(m)));
        }
    }
    if !long.is_empty() {
        expose(team, &long, CELL, deadline).await?;
    }
    Ok(())
}
