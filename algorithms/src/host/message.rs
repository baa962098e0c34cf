//! A message of any length from one member to another in one call: a post
//! carries its length and, if it fits, its bytes; a longer one says where
//! its first chunk lies in the writer's exposure (see `stream`; chunks of a
//! whole cell), which the writer makes separately, once per call, for all
//! its long messages, and where the writer offered it (see `offer`), where
//! it lies in that offer: the reader then copies it from there and replies,
//! and only the readers that could not copy find it in the exposure. A
//! writer posts to a reader at most once per call.

use catena_fabric::{HostMemory, Time};

use super::layout::CELL;
use super::mailbox::{arrived, post, read, POISON};
use super::offer::{copy_offered, reply, Round, Where};
use super::stream::{pull, pull_into};
use super::{Op, Team, Way};
use crate::{Error, Result};

/// Posts `data`'s header to member `to` for call `seq`: its bytes if they
/// fit, else the index of its first chunk in this member's exposure and
/// where it lies in this member's `offered` (handle, offset), if offered.
pub(crate) async fn announce<T: HostMemory>(
    team: &Team<'_, T>,
    to: u32,
    seq: u64,
    data: &[u8],
    first: u64,
    offered: Option<(u64, u64)>,
    deadline: Time,
) -> Result<()> {
    let len = data.len() as u64;
    if data.len() <= team.layout().inline() {
        return post(team, to, seq, len, data, deadline).await;
    }
    let at = match offered {
        Some((handle, at)) => Where::Offered { first, handle, at },
        None => Where::Cells { first },
    };
    post(team, to, seq, len, &at.encode(), deadline).await
}

/// Receives member `from`'s message of call `seq` of `op` into `out`,
/// which must be exactly as long (else `Mismatch`, after the message was
/// drained so its writer is not held up); a long one's read is reported
/// to its writer where `op`'s readers report (see `Team::way`).
pub(crate) async fn receive_into<T: HostMemory>(
    team: &Team<'_, T>,
    op: Op,
    from: u32,
    seq: u64,
    out: &mut [u8],
    deadline: Time,
) -> Result<()> {
    let len = arrived(team, from, seq, deadline).await?;
    let long = len > team.layout().inline() as u64;
    if len != out.len() as u64 {
        drain(team, from, seq, len, deadline).await?;
        return Err(Error::Mismatch {
            what: format!(
                "message lengths: member {from} sent {len} bytes where {} were expected",
                out.len()
            ),
        });
    }
    if !long {
        return read(team, from, seq, out);
    }
    // Read where the writer takes reports only (an allgather's member
    // times its own call instead).
    let began = if op.reported() {
        team.t().now()
    } else {
        Time(0)
    };
    let first = match Where::read(team, from, seq)? {
        Where::Cells { first } => first,
        Where::Offered { first, handle, at } => {
            let copied = copy_offered(team, from, seq, (handle, at), out);
            // The writer waits for every reply, whatever became of the copy.
            reply(team, from, Round::first(seq), !matches!(copied, Ok(false)))?;
            if copied? {
                return team.report(from, seq, op, out.len(), Way::Offer, began);
            }
            // Refused: the writer's choice was an offer.
            return pull_into(team, from, first, out, CELL, deadline).await;
        }
    };
    pull_into(team, from, first, out, CELL, deadline).await?;
    team.report(from, seq, op, out.len(), Way::Cells, began)
}

/// Consumes member `from`'s message of call `seq`, which has arrived with
/// length `len`, without keeping it: a long one is pulled (into nothing)
/// so that its writer is not held up.
pub(crate) async fn drain<T: HostMemory>(
    team: &Team<'_, T>,
    from: u32,
    seq: u64,
    len: u64,
    deadline: Time,
) -> Result<()> {
    if len <= team.layout().inline() as u64 || len == POISON {
        return Ok(());
    }
    let first = match Where::read(team, from, seq)? {
        Where::Cells { first } => first,
        // Nothing wanted: no copy, and no cells either.
        Where::Offered { .. } => return reply(team, from, Round::first(seq), true),
    };
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    pull(team, from, first, len, CELL, |_, _| Ok(()), deadline).await
}

/// Receives member `from`'s message of call `seq`, of whatever length it
/// has.
pub(crate) async fn receive<T: HostMemory>(
    team: &Team<'_, T>,
    from: u32,
    seq: u64,
    deadline: Time,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    receive_appended(team, from, seq, &mut out, deadline).await?;
    Ok(out)
}

/// Appends member `from`'s message of call `seq`, of whatever length it
/// has, to `out` (memory for it is taken as its bytes arrive, and a length
/// this process cannot hold is an error, not an abort).
pub(crate) async fn receive_appended<T: HostMemory>(
    team: &Team<'_, T>,
    from: u32,
    seq: u64,
    out: &mut Vec<u8>,
    deadline: Time,
) -> Result<()> {
    let len = arrived(team, from, seq, deadline).await?;
    if len <= team.layout().inline() as u64 {
        let start = out.len();
        out.try_reserve(len as usize)
            .map_err(|_| too_long(from, len))?;
        out.resize(start + len as usize, 0);
        return read(team, from, seq, &mut out[start..]);
    }
    let total = usize::try_from(len).map_err(|_| too_long(from, len))?;
    let first = match Where::read(team, from, seq)? {
        Where::Cells { first } => first,
        // Its length is the writer's word, so the bytes come through cells,
        // taking memory as they land.
        Where::Offered { first, .. } => {
            reply(team, from, Round::first(seq), false)?;
            first
        }
    };
    pull(
        team,
        from,
        first,
        total,
        CELL,
        |_, chunk| {
            out.try_reserve(chunk.len())
                .map_err(|_| too_long(from, len))?;
            out.extend_from_slice(chunk);
            Ok(())
        },
        deadline,
    )
    .await
}

fn too_long(from: u32, len: u64) -> Error {
    Error::Codec {
        action: "receive",
        what: "a host message",
        message: format!("member {from} sent {len} bytes, more than this process can hold"),
    }
}
