//! Mailboxes: in each member's region, one slot per writer and call
//! (modulo `SLOTS`) holding the call's sequence number, the message's
//! length and its first bytes (as many as the team's slots hold). A writer
//! stores the sequence number last, so a reader that sees it sees the rest;
//! before it writes a slot again it makes sure the reader finished the call
//! that used it last.

use catena_fabric::{wait_until, HostMemory, Time};

use super::layout::{SLOTS, SLOT_HEADER};
use super::Team;
use crate::{Error, Result};

/// Posts a message of `len` bytes, whose first bytes are `inline` (at most
/// what a slot holds), to member `to` for call `seq`.
pub(crate) async fn post<T: HostMemory>(
    team: &Team<'_, T>,
    to: u32,
    seq: u64,
    len: u64,
    inline: &[u8],
    deadline: Time,
) -> Result<()> {
    debug_assert!(inline.len() <= team.layout().inline());
    if seq > SLOTS {
        team.await_finished(to, seq, seq - SLOTS, deadline).await?;
    }
    let t = team.t();
    let peer = team.peer(to)?;
    let slot = team.at(to, team.layout().mailbox(seq, team.me()));
    t.host_write(peer, slot + 8, &len.to_le_bytes())?;
    t.host_write(peer, slot + SLOT_HEADER, inline)?;
    t.host_store(peer, slot, seq)?;
    Ok(())
}

/// Waits for member `from`'s post of call `seq`; yields the message's
/// length (the slot holds its bytes if they fit, else the index of its
/// first chunk in the writer's exposure).
pub(crate) async fn arrived<T: HostMemory>(
    team: &Team<'_, T>,
    from: u32,
    seq: u64,
    deadline: Time,
) -> Result<u64> {
    let t = team.t();
    let own = team.peer(team.me())?;
    let slot = team.at(team.me(), team.layout().mailbox(seq, from));
    let got = wait_until(t, deadline, "a host peer's post", || {
        let posted = t.host_load(own, slot)?;
        Ok((posted >= seq).then_some(posted))
    })
    .await?;
    if got != seq {
        return Err(Error::Transport(catena_fabric::Error::Protocol(format!(
            "host member {from} posted call {got} where call {seq} was due"
        ))));
    }
    Ok(t.host_load(own, slot + 8)?)
}

/// Copies the first `out.len()` bytes of member `from`'s post of call
/// `seq` (which has arrived) into `out`.
pub(crate) fn read<T: HostMemory>(
    team: &Team<'_, T>,
    from: u32,
    seq: u64,
    out: &mut [u8],
) -> Result<()> {
    let own = team.peer(team.me())?;
    let slot = team.at(team.me(), team.layout().mailbox(seq, from));
    Ok(team.t().host_read(own, slot + SLOT_HEADER, out)?)
}

/// Where a long message that member `from` posted for call `seq` starts
/// in its exposure.
pub(crate) fn first_chunk<T: HostMemory>(team: &Team<'_, T>, from: u32, seq: u64) -> Result<u64> {
    let mut bytes = [0u8; 8];
    read(team, from, seq, &mut bytes)?;
    Ok(u64::from_le_bytes(bytes))
}
