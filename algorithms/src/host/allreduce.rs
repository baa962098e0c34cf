//! Allreduce inside a host, in rank order. A value that fits a mailbox
//! line goes to every member, which folds them all (one crossing), up to
//! `HostTuning::exchange_max` members; above, up a tree to member 0 and
//! down again (of radix `HostTuning::allreduce_radix`).
//! A longer value is reduced by slices (each member reduces its slice of
//! everyone's) and the reduced slices are copied out by everyone: offered
//! (see `offer`) as an allgather's values are, else through cells.

use catena_fabric::{HostMemory, Time};

use super::bcast::{bcast_along, poison_along, Value};
use super::mailbox::{arrived, post, read};
use super::offer::{copy_offered, noticed, notify, refused, reply, Offer, Round};
use super::reduce::{reduce_slices, up_the_tree};
use super::stream::{chunk_for, expose, expose_mirrored, pull_into, Readers};
use super::{select, Combine, Op, Team, TeamCall};
use crate::{Error, Result};

/// Every member's `send` combined in rank order into every member's `recv`
/// (both of one length everywhere, in whole elements of `elem` bytes).
pub(crate) async fn allreduce<T: HostMemory>(
    call: TeamCall<'_, '_, T>,
    send: &[u8],
    recv: &mut [u8],
    elem: usize,
    combine: Combine<'_>,
) -> Result<()> {
    let (team, seq) = (call.team, call.seq);
    // Every member's value reached this one, directly or folded in.
    reduce_everywhere(call, send, recv, elem, combine).await?;
    team.all_entered(seq);
    Ok(())
}

async fn reduce_everywhere<T: HostMemory>(
    call: TeamCall<'_, '_, T>,
    send: &[u8],
    recv: &mut [u8],
    elem: usize,
    combine: Combine<'_>,
) -> Result<()> {
    let TeamCall {
        team,
        seq,
        deadline,
    } = call;
    let n = team.size();
    if recv.len() != send.len() {
        return Err(Error::InvalidArgument(format!(
            "an allreduce of {} bytes into {}",
            send.len(),
            recv.len()
        )));
    }
    let inline = send.len() <= team.layout().inline();
    if inline && select::exchange(n, team.tuning()) {
        return exchange(team, seq, send, recv, combine, deadline).await;
    }
    if inline {
        // Boxed: the exchange's future, which small teams take, stays small.
        return Box::pin(up_and_down(team, seq, send, recv, combine, deadline)).await;
    }
    // Boxed too: its offers and copies take room the short calls need not.
    Box::pin(by_slices(team, seq, send, recv, elem, combine, deadline)).await
}

/// A long value reduced by slices, and the reduced slices copied out by
/// every member.
async fn by_slices<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    send: &[u8],
    recv: &mut [u8],
    elem: usize,
    combine: Combine<'_>,
    deadline: Time,
) -> Result<()> {
    let (me, n) = (team.me(), team.size());
    let (slice, reduced) = reduce_slices(team, seq, send, elem, combine, deadline).await?;
    let chunk = chunk_for(elem).expect("checked by reduce_slices");
    let mine = slice(me);
    let (before, rest) = recv.split_at_mut(mine.start);
    let (own, after) = rest.split_at_mut(mine.len());
    let others = || (0..n).filter(move |&m| m != me);
    // The reduced slice is offered as an allgather's value is (every
    // member copies), else exposed to all.
    let began = team.t().now();
    let offer = Offer::of_any_length(team, Op::Allreduce, &reduced, reduced.len())?;
    for m in others() {
        notify(team, m, seq, offer.as_ref().map(Offer::handle))?;
    }
    let pieces = [(&reduced[..], Readers::All)];
    let exposing = async {
        if offer.is_none() {
            // Copied into place as it is exposed, from cache.
            return expose_mirrored(team, &pieces, chunk, own, deadline).await;
        }
        own.copy_from_slice(&reduced);
        let refused = refused(team, Round::second(seq), others(), deadline).await?;
        match refused.is_empty() {
            true => Ok(()),
            false => {
                expose(
                    team,
                    &[(&reduced, Readers::Some(&refused))],
                    chunk,
                    deadline,
                )
                .await
            }
        }
    };
    // Every writer's slice at once: a writer reuses a cell only once every
    // reader drained it, so readers taking one writer after another would
    // let one writer move at a time.
    let mut parts = Vec::with_capacity(n as usize - 1);
    let (mut before, mut after) = (before, after);
    for m in others() {
        let len = slice(m).len();
        let part;
        match m < me {
            true => (part, before) = std::mem::take(&mut before).split_at_mut(len),
            false => (part, after) = std::mem::take(&mut after).split_at_mut(len),
        }
        parts.push(async move {
            if let Some(handle) = noticed(team, m, seq, deadline).await? {
                let copied = copy_offered(team, m, seq, (handle, 0), part);
                // The writer waits for every reply, whatever became of the copy.
                reply(team, m, Round::second(seq), !matches!(copied, Ok(false)))?;
                if copied? {
                    return Ok(());
                }
            }
            pull_into(team, m, 0, part, chunk, deadline).await
        });
    }
    let copying = crate::join::join_all(parts);
    crate::join::join(exposing, copying).await?;
    team.timed(seq, Op::Allreduce, reduced.len(), offer.is_some(), began);
    Ok(())
}

/// Up a tree to member 0 and down again.
async fn up_and_down<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    send: &[u8],
    recv: &mut [u8],
    combine: Combine<'_>,
    deadline: Time,
) -> Result<()> {
    let radix = select::allreduce_radix(team.size(), team.tuning());
    let mut acc = team.take_buffer();
    let reduced = up_the_tree(team, seq, send, &mut acc, radix, combine, deadline).await;
    if let Ok(true) = reduced {
        recv.copy_from_slice(&acc);
    }
    team.put_buffer(acc);
    match reduced {
        Ok(_) => bcast_along(team, seq, 0, Value::Fixed(recv), radix, deadline).await,
        // The poison went up to member 0, which sends it down: every
        // member still takes part, so that none waits.
        Err(e @ Error::Mismatch { .. }) => {
            let down = match team.me() {
                0 => poison_along(team, seq, 0, radix, deadline).await,
                _ => bcast_along(team, seq, 0, Value::Fixed(recv), radix, deadline).await,
            };
            down.and(Err(e))
        }
        Err(e) => Err(e),
    }
}

/// Every member posts its value to every other and folds all of them.
async fn exchange<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    send: &[u8],
    recv: &mut [u8],
    combine: Combine<'_>,
    deadline: Time,
) -> Result<()> {
    let (me, n) = (team.me(), team.size());
    for m in (0..n).filter(|&m| m != me) {
        post(team, m, seq, send.len() as u64, send, deadline).await?;
    }
    let mut mismatch = None;
    for m in 0..n {
        if m != me {
            let len = arrived(team, m, seq, deadline).await?;
            if len != send.len() as u64 {
                mismatch.get_or_insert((m, len));
                continue;
            }
        }
        match (m, m == me) {
            (0, true) => recv.copy_from_slice(send),
            (0, false) => read(team, m, seq, recv)?,
            (_, true) => combine(recv, send)?,
            (_, false) => team.with_scratch(send.len(), |value| {
                read(team, m, seq, value)?;
                combine(recv, value)
            })?,
        }
    }
    match mismatch {
        Some((m, len)) => Err(Error::Mismatch {
            what: format!(
                "allreduce lengths: member {m} passes {len} bytes where this one passes {}",
                send.len()
            ),
        }),
        None => Ok(()),
    }
}
