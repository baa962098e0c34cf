//! Mailboxes: in each member's region, one slot per writer and call
//! (modulo `SLOTS`) holding the call's sequence number, the message's
//! length and its first bytes (as many as the team's slots hold). A writer
//! stores the sequence number last, so a reader that sees it sees the rest;
//! before it writes a slot again it makes sure the reader finished the call
//! that used it last.

use catena_fabric::{wait_until, HostMemory, Time};

use super::layout::{MAX_INLINE, SLOTS, SLOT_HEADER};
use super::Team;
use crate::{Error, Result};

/// What a mailbox slot carried besides its sequence number.
pub(crate) struct Post {
    /// The whole message's length (beyond the slot, the rest is exposed).
    pub len: u64,
    /// Its first bytes, as many as the slot held.
    pub inline: [u8; MAX_INLINE],
    held: usize,
}

impl Post {
    /// The bytes the slot carried.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.inline[..self.held]
    }
}

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

/// Waits for member `from`'s post of call `seq`.
pub(crate) async fn take<T: HostMemory>(
    team: &Team<'_, T>,
    from: u32,
    seq: u64,
    deadline: Time,
) -> Result<Post> {
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
    let len = t.host_load(own, slot + 8)?;
    // A long message's slot holds where its first chunk is (8 bytes).
    let held = match len > team.layout().inline() as u64 {
        true => 0,
        false => len as usize,
    };
    let mut post = Post {
        len,
        inline: [0; MAX_INLINE],
        held,
    };
    t.host_read(own, slot + SLOT_HEADER, &mut post.inline[..held.max(8)])?;
    Ok(post)
}
