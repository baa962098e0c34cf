//! Allgather inside a host: every member posts its value to every other (a
//! long one exposed once for all of them) and copies everyone's into place.

use catena_fabric::{HostMemory, Time};

use super::layout::CELL;
use super::message::{announce, receive, receive_into};
use super::stream::{expose, Readers};
use super::{others_then_me, Team};
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
    let (me, each) = (team.me(), send.len());
    let exposing = offer(team, seq, send, deadline);
    let copying = async {
        for m in others_then_me(me, team.size()) {
            let part = &mut recv[m as usize * each..(m as usize + 1) * each];
            match m == me {
                true => part.copy_from_slice(send),
                false => receive_into(team, m, seq, part, deadline).await?,
            }
        }
        Ok::<(), Error>(())
    };
    crate::join::join(exposing, copying).await?;
    team.all_entered(seq);
    Ok(())
}

/// Every member's `send` (of any length) in rank order, on every member.
pub(crate) async fn allgather_any<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    send: &[u8],
    deadline: Time,
) -> Result<Vec<Vec<u8>>> {
    let me = team.me();
    let exposing = offer(team, seq, send, deadline);
    let copying = async {
        let mut all = Vec::with_capacity(team.size() as usize);
        for m in 0..team.size() {
            all.push(match m == me {
                true => send.to_vec(),
                false => receive(team, m, seq, deadline).await?,
            });
        }
        Ok::<_, Error>(all)
    };
    let ((), all) = crate::join::join(exposing, copying).await?;
    team.all_entered(seq);
    Ok(all)
}

/// Posts `send` to every other member, exposing it once if it is long.
async fn offer<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    send: &[u8],
    deadline: Time,
) -> Result<()> {
    for m in (0..team.size()).filter(|&m| m != team.me()) {
        announce(team, m, seq, send, 0, deadline).await?;
    }
    if send.len() > team.layout().inline() {
        expose(team, &[(send, Readers::All)], CELL, deadline).await?;
    }
    Ok(())
}
