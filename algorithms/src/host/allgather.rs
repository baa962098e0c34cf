//! Allgather inside a host: every member posts its value to every other (a
//! long one offered, or exposed once for all of them) and copies
//! everyone's into place; short values among more members than a short
//! allreduce exchanges with take its trees instead, gathered up to member
//! 0 and broadcast down.

use catena_fabric::{HostMemory, Time};

use super::bcast::{bcast_along, Value};
use super::gathered::Gathered;
use super::layout::CELL;
use super::mailbox::post;
use super::message::{announce, receive_appended, receive_into};
use super::offer::{refused, Offer, Round};
use super::stream::{expose, expose_mirrored, Readers};
use super::tree::{children, parent, subtree_end};
use super::{select, Op, Team};
use crate::{Error, Result};

/// Every member's `send` (all of one length) in rank order into every
/// member's `recv`.
pub(crate) async fn allgather<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    send: &[u8],
    recv: &mut [u8],
    deadline: Time,
) -> Result<()> {
    let (me, each) = (team.me() as usize, send.len());
    let n = team.size();
    let fits = each
        .checked_mul(n as usize)
        .is_some_and(|all| all <= team.layout().inline());
    if fits && !select::exchange(n, team.tuning()) {
        return Box::pin(up_and_down(team, seq, send, recv, deadline)).await;
    }
    let (before, rest) = recv.split_at_mut(me * each);
    let (mine, after) = rest.split_at_mut(each);
    let long = each > team.layout().inline();
    // A short value's allgather reads no clock (it costs a fifth of one).
    let began = if long { team.t().now() } else { Time(0) };
    let offer = match long {
        true => Offer::of_any_length(team, Op::Allgather, send, each)?,
        false => None,
    };
    let exposing = async {
        let offered = offer.as_ref().map(|offer| (offer.handle(), 0));
        announce_to_all(team, seq, send, offered, deadline).await?;
        match (long, &offer) {
            // Copied into place as it is exposed, from cache.
            (true, None) => {
                expose_mirrored(team, &[(send, Readers::All)], CELL, mine, deadline).await
            }
            (true, Some(_)) => {
                mine.copy_from_slice(send);
                let others = (0..team.size()).filter(|&m| m != team.me());
                let refused = refused(team, Round::first(seq), others, deadline).await?;
                match refused.is_empty() {
                    true => Ok(()),
                    false => expose(team, &[(send, Readers::Some(&refused))], CELL, deadline).await,
                }
            }
            (false, _) => {
                mine.copy_from_slice(send);
                Ok(())
            }
        }
    };
    // A writer of another length is drained (`receive_into`) and reported
    // once every writer was read and this member's own exposure consumed:
    // a reader or writer that stopped at the first mismatch would leave
    // the others waiting for their deadline.
    let kept = |result: Result<()>| match result {
        Err(e @ Error::Mismatch { .. }) => Ok(Some(e)),
        other => other.map(|()| None),
    };
    let copying = async {
        if long {
            // Every writer at once: a writer reuses a cell only once every
            // reader drained it, so readers taking one writer after another
            // would let one writer move at a time.
            let parts = (before.chunks_mut(each).zip(0..))
                .chain(after.chunks_mut(each).zip(me as u32 + 1..))
                .map(|(part, m)| async move {
                    kept(receive_into(team, Op::Allgather, m, seq, part, deadline).await)
                });
            let outcomes = crate::join::join_all(parts).await?;
            return Ok(outcomes.into_iter().flatten().next());
        }
        // The others in rank order, as every reader takes them.
        let mut mismatch = None;
        for m in (0..team.size() as usize).filter(|&m| m != me) {
            let part = match m < me {
                true => &mut before[m * each..(m + 1) * each],
                false => &mut after[(m - me - 1) * each..(m - me) * each],
            };
            let got = kept(receive_into(team, Op::Allgather, m as u32, seq, part, deadline).await)?;
            mismatch = mismatch.or(got);
        }
        Ok::<_, Error>(mismatch)
    };
    let ((), mismatch) = crate::join::join(exposing, copying).await?;
    mismatch.map_or(Ok(()), Err)?;
    team.all_entered(seq);
    if long {
        team.timed(seq, Op::Allgather, each, offer.is_some(), began);
    }
    Ok(())
}

/// Short values up a tree to member 0, each member passing its subtree's
/// (a contiguous run of members, in rank order) in one post, and all of
/// them down again.
async fn up_and_down<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    send: &[u8],
    recv: &mut [u8],
    deadline: Time,
) -> Result<()> {
    let (me, n, each) = (team.me(), team.size(), send.len());
    let radix = select::allreduce_radix(n, team.tuning());
    let at = |m: u32| m as usize * each;
    recv[at(me)..at(me + 1)].copy_from_slice(send);
    // A child's wrong length is reported once everything moved on, so that
    // no member waits for one that gave up; and passed on as a run of the
    // wrong length, up to member 0, which then broadcasts a value of the
    // wrong length: every member fails, none keeps a buffer with a hole.
    let mut mismatch = Ok(());
    for c in children(me, n, radix) {
        let part = &mut recv[at(c)..at(subtree_end(c, n, radix))];
        if let Err(e) = receive_into(team, Op::Allgather, c, seq, part, deadline).await {
            match e {
                Error::Mismatch { .. } => mismatch = mismatch.and(Err(e)),
                e => return Err(e),
            }
        }
    }
    let mut wrong = Vec::new();
    let run = &mut recv[at(me)..at(subtree_end(me, n, radix))];
    // One byte where none is due, else none: always a mismatch, always
    // within a mailbox slot.
    let poison = |run: &[u8], wrong: &mut Vec<u8>| wrong.resize(usize::from(run.is_empty()), 0);
    if mismatch.is_err() {
        poison(run, &mut wrong);
    }
    if let Some(to) = parent(me, radix) {
        let run: &[u8] = if mismatch.is_err() { &wrong } else { run };
        post(team, to, seq, run.len() as u64, run, deadline).await?;
    }
    let down = match (me, mismatch.is_err()) {
        (0, true) => {
            poison(recv, &mut wrong);
            bcast_along(team, seq, 0, Value::Fixed(&mut wrong), radix, deadline).await
        }
        _ => bcast_along(team, seq, 0, Value::Fixed(recv), radix, deadline).await,
    };
    mismatch?;
    down?;
    team.all_entered(seq);
    Ok(())
}

/// Every member's `send` (of any length) in rank order, on every member.
pub(crate) async fn allgather_any<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    send: &[u8],
    deadline: Time,
) -> Result<Gathered> {
    let me = team.me();
    // Its readers take values of any length as they land, not by copies.
    let exposing = async {
        announce_to_all(team, seq, send, None, deadline).await?;
        match send.len() > team.layout().inline() {
            true => expose(team, &[(send, Readers::All)], CELL, deadline).await,
            false => Ok(()),
        }
    };
    let copying = async {
        let mut all = Gathered::with_capacity(team.size() as usize, send.len());
        for m in 0..team.size() {
            match m == me {
                true => all.buffer().extend_from_slice(send),
                false => receive_appended(team, m, seq, all.buffer(), deadline).await?,
            }
            all.close();
        }
        Ok::<_, Error>(all)
    };
    let ((), all) = crate::join::join(exposing, copying).await?;
    team.all_entered(seq);
    Ok(all)
}

/// Posts `send` to every other member (a long one, where it lies in this
/// member's exposure, from chunk 0, and in its `offered`, if offered).
async fn announce_to_all<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    send: &[u8],
    offered: Option<(u64, u64)>,
    deadline: Time,
) -> Result<()> {
    for m in (0..team.size()).filter(|&m| m != team.me()) {
        announce(team, m, seq, send, 0, offered, deadline).await?;
    }
    Ok(())
}
