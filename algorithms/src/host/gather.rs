//! Gather inside a host: every member posts its value to the root (a long
//! one offered to the root, or exposed for it alone) and the root copies
//! each into place.

use catena_fabric::{HostMemory, Time};

use super::gathered::Gathered;
use super::layout::CELL;
use super::message::{announce, receive_appended, receive_into};
use super::offer::{refused, Offer, Round};
use super::stream::{expose, Readers};
use super::{others_then_me, Op, Team};
use crate::{Error, Result};

/// Every member's `send` (all of one length) in rank order into the
/// root's `recv`.
pub(crate) async fn gather<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    send: &[u8],
    recv: Option<&mut [u8]>,
    deadline: Time,
) -> Result<()> {
    let me = team.me();
    let Some(recv) = recv.filter(|_| me == root) else {
        return send_to_root(team, seq, root, send, true, deadline).await;
    };
    let each = send.len();
    // A member's value of another length is reported once every member's
    // was taken (that one drained), so that none waits for the root.
    let mut mismatch = Ok(());
    for m in others_then_me(me, team.size()) {
        let part = &mut recv[m as usize * each..(m as usize + 1) * each];
        match m == me {
            true => part.copy_from_slice(send),
            false => match receive_into(team, Op::Gather, m, seq, part, deadline).await {
                Err(e @ Error::Mismatch { .. }) => mismatch = mismatch.and(Err(e)),
                got => got?,
            },
        }
    }
    mismatch?;
    team.all_entered(seq);
    Ok(())
}

/// Every member's `send` (of any length) in rank order, on the root.
pub(crate) async fn gather_any<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    send: &[u8],
    deadline: Time,
) -> Result<Option<Gathered>> {
    let me = team.me();
    if me != root {
        // The root takes values of any length as they land, not by copies.
        send_to_root(team, seq, root, send, false, deadline).await?;
        return Ok(None);
    }
    let mut all = Gathered::with_capacity(team.size() as usize, send.len());
    for m in 0..team.size() {
        match m == me {
            true => all.buffer().extend_from_slice(send),
            false => receive_appended(team, m, seq, all.buffer(), deadline).await?,
        }
        all.close();
    }
    team.all_entered(seq);
    Ok(Some(all))
}

/// Posts `send` to the root; a long one offered (if `offer` and it is worth
/// one) or exposed.
async fn send_to_root<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    send: &[u8],
    offer: bool,
    deadline: Time,
) -> Result<()> {
    let long = send.len() > team.layout().inline();
    let offer = match long && offer {
        true => Offer::of(team, Op::Gather, send, send.len())?,
        false => None,
    };
    let offered = offer.as_ref().map(|offer| (offer.handle(), 0));
    announce(team, root, seq, send, 0, offered, deadline).await?;
    let exposed = match offer {
        Some(_) => !refused(team, Round::first(seq), [root].into_iter(), deadline)
            .await?
            .is_empty(),
        None => long,
    };
    if exposed {
        expose(team, &[(send, Readers::One(root))], CELL, deadline).await?;
    }
    Ok(())
}
