//! Scatter inside a host. Where every piece together fits a mailbox slot,
//! they go down bcast's tree, each member posting each child the pieces
//! of the child's subtree in one message (a root posting to every member
//! pays a line's crossing per member, one after another); else the root
//! posts each member its piece (long pieces exposed one after another,
//! each for its member alone) and every member copies its own out.

use catena_fabric::{HostMemory, Time};

use super::layout::CELL;
use super::mailbox::{arrived, post, read};
use super::message::{announce, drain, receive, receive_into};
use super::offer::{refused, Offer, Round};
use super::stream::{chunks, expose, Readers};
use super::tree::{children, member_of, parent, subtree_end, virtual_of};
use super::{select, Op, Team};
use crate::{Error, Result};

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
    let piece = match pieces {
        Some(Pieces::Even(_, piece)) => Some(piece),
        Some(Pieces::Any(_)) => None,
        None => Some(recv.len()),
    };
    if piece.is_some_and(|piece| by_tree(team, piece)) {
        return down_the_tree(team, seq, root, pieces, recv, deadline).await;
    }
    match pieces {
        Some(pieces) => deal(team, seq, pieces, |own| recv.copy_from_slice(own), deadline).await,
        None => receive_into(team, Op::Scatter, root, seq, recv, deadline).await,
    }
}

/// Whether pieces of `piece` bytes go down the tree: all of them fit a
/// mailbox slot (every member decides alike from the call's piece size).
fn by_tree<T: HostMemory>(team: &Team<'_, T>, piece: usize) -> bool {
    let n = team.size() as usize;
    n > 2
        && piece
            .checked_mul(n)
            .is_some_and(|all| all <= team.layout().inline())
}

/// Pieces down bcast's tree: a member receives its subtree's pieces in
/// virtual order (its own first) and passes each child the child's.
async fn down_the_tree<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    pieces: Option<Pieces<'_>>,
    recv: &mut [u8],
    deadline: Time,
) -> Result<()> {
    let (me, n) = (team.me(), team.size());
    let radix = select::tree_radix(n, team.tuning());
    let v = virtual_of(me, root, n);
    let piece = recv.len();
    let mut block = team.take_buffer();
    block.clear();
    let result = async {
        if let Some(pieces) = pieces {
            recv.copy_from_slice(pieces.get(me as usize));
            for c in children(0, n, radix) {
                block.clear();
                for w in c..subtree_end(c, n, radix) {
                    block.extend_from_slice(pieces.get(member_of(w, root, n) as usize));
                }
                post(
                    team,
                    member_of(c, root, n),
                    seq,
                    block.len() as u64,
                    &block,
                    deadline,
                )
                .await?;
            }
            return Ok(());
        }
        let from = member_of(parent(v, radix).expect("not the root"), root, n);
        let len = arrived(team, from, seq, deadline).await?;
        let want = (subtree_end(v, n, radix) - v) as usize * piece;
        if len != want as u64 {
            // Drained, and the children told with an empty block, so that
            // every member below learns of it too.
            drain(team, from, seq, len, deadline).await?;
            for c in children(v, n, radix) {
                post(team, member_of(c, root, n), seq, 0, &[], deadline).await?;
            }
            return Err(Error::Mismatch {
                what: format!(
                    "scatter pieces: member {from} sent {len} bytes where {want} were expected"
                ),
            });
        }
        block.resize(want, 0);
        read(team, from, seq, &mut block)?;
        recv.copy_from_slice(&block[..piece]);
        for c in children(v, n, radix) {
            let at = |w: u32| (w - v) as usize * piece;
            let sub = &block[at(c)..at(subtree_end(c, n, radix))];
            post(
                team,
                member_of(c, root, n),
                seq,
                sub.len() as u64,
                sub,
                deadline,
            )
            .await?;
        }
        Ok(())
    }
    .await;
    team.put_buffer(block);
    result
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
            let mut kept = Vec::new();
            let own = |own: &[u8]| kept = own.to_vec();
            deal(team, seq, Pieces::Any(pieces), own, deadline).await?;
            Ok(kept)
        }
        None => receive(team, root, seq, deadline).await,
    }
}

/// Posts each member its piece; offers the long ones where they are cut
/// from one buffer and worth it, and exposes them in rank order to the
/// members that did not copy them (all, without an offer). The root's own
/// piece goes to `keep` once every member has been posted its own, so
/// that the root copies while the members do.
async fn deal<'p, T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    pieces: Pieces<'p>,
    keep: impl FnOnce(&'p [u8]),
    deadline: Time,
) -> Result<()> {
    let me = team.me();
    let offer = match pieces {
        // At any length: the root copies its own piece meanwhile, so
        // cells would add a copy but no idle core.
        Pieces::Even(all, piece) if piece > team.layout().inline() => {
            Offer::of_any_length(team, Op::Scatter, all, piece)?
        }
        _ => None,
    };
    let mut first = 0;
    let mut long = Vec::new();
    for m in 0..pieces.count(team.size()) {
        let piece = pieces.get(m);
        let m = m as u32;
        if m == me {
            continue;
        }
        let is_long = piece.len() > team.layout().inline();
        let offered = match (&offer, pieces) {
            (Some(offer), Pieces::Even(_, each)) if is_long => {
                Some((offer.handle(), u64::from(m) * each as u64))
            }
            _ => None,
        };
        announce(team, m, seq, piece, first, offered, deadline).await?;
        if is_long {
            first += chunks(piece.len(), CELL);
            long.push((piece, m));
        }
    }
    keep(pieces.get(me as usize));
    let refused = match offer {
        Some(_) => {
            refused(
                team,
                Round::first(seq),
                long.iter().map(|&(_, m)| m),
                deadline,
            )
            .await?
        }
        None => long.iter().map(|&(_, m)| m).collect(),
    };
    if refused.is_empty() {
        return Ok(());
    }
    // Every long piece keeps its place in the exposure (its chunks as
    // announced); only those of members that did not copy are written.
    let exposed: Vec<(&[u8], Readers<'_>)> = long
        .iter()
        .map(|&(piece, m)| match refused.binary_search(&m).is_ok() {
            true => (piece, Readers::One(m)),
            false => (piece, Readers::Some(&[])),
        })
        .collect();
    expose(team, &exposed, CELL, deadline).await
}
