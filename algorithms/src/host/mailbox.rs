//! Mailboxes: in each member's region, one slot per writer and call
//! (modulo `SLOTS`) holding the call's stamp (the team's, with the call's
//! sequence number), the message's length and its first bytes (as many as
//! the team's slots hold). A writer stores the stamp last, so a reader that
//! sees it sees the rest;
//! before it writes a slot again it makes sure the reader finished the call
//! that used it last.

use catena_fabric::{wait_until, HostMemory, Time};

use super::layout::{SLOTS, SLOT_HEADER};
use super::Team;
use crate::Result;

/// The length a member posts in place of a value it cannot give because
/// the call failed below it (a member's value of another length): longer
/// than any message, so it matches no length a reader expects, and it
/// carries nothing to read or drain. Readers pass it on along the same
/// tree, so every member waiting on it learns of the failure at once.
pub(crate) const POISON: u64 = u64::MAX;

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
    // Mostly known free: the rare wait is boxed, so that a post's future
    // (in every small call's) stays small.
    if seq > SLOTS && !team.known_finished(to, seq - SLOTS) {
        Box::pin(team.await_finished(to, seq, seq - SLOTS, deadline)).await?;
    }
    let t = team.t();
    let peer = team.peer(to)?;
    let slot = team.at(to, team.layout().mailbox(seq, team.me()));
    t.host_write(peer, slot + 8, &len.to_le_bytes())?;
    t.host_write(peer, slot + SLOT_HEADER, inline)?;
    t.host_store(peer, slot, team.stamp(seq))?;
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
    // The writer waits for this call to finish before it stores the slot
    // again, so it holds this call's stamp until it is read.
    let stamp = team.stamp(seq);
    wait_until(t, deadline, "a host peer's post", || {
        Ok((t.host_load(own, slot)? == stamp).then_some(()))
    })
    .await?;
    // The writer may be a call ahead: its next post starts on its way here
    // while this call and the next one's entry run.
    let next = team.at(team.me(), team.layout().mailbox(seq.wrapping_add(1), from));
    t.host_prefetch(own, next);
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
