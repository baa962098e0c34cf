//! Single copies of long data: a writer offers its own buffer (where the
//! provider can, from `single_copy_min` bytes), its readers copy straight
//! out of it and each replies whether it did, in a word of the writer's
//! region (not a post: in an exchange the reader has posted to the writer
//! in the call already); the writer stays in the call until every reader
//! replied, and exposes the data in its cells, as without an offer, to the
//! readers that could not copy.

use catena_fabric::{wait_until, HostMemory, Time};

use super::layout::Layout;
use super::mailbox::read;
use super::{Op, Team, Way};
use crate::Result;

/// How a long message's post says where its bytes are: 32 bytes, the
/// index of its first chunk in the writer's exposure, a kind, a handle and
/// an offset.
pub(crate) const WHERE_BYTES: usize = 32;
const IN_CELLS: u64 = 0;
const OFFERED: u64 = 1;

/// Where a long message is for its reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Where {
    /// In the writer's cells, from chunk `first` of its exposure.
    Cells { first: u64 },
    /// `at` bytes into the writer's offer `handle`; in its cells from chunk
    /// `first` if the reader cannot copy it.
    Offered { first: u64, handle: u64, at: u64 },
}

impl Where {
    /// Where a value lies that is exposed from chunk 0, and offered whole
    /// if `offered` (the offer's handle).
    pub(crate) fn from_start(offered: Option<u64>) -> Where {
        match offered {
            Some(handle) => Where::Offered {
                first: 0,
                handle,
                at: 0,
            },
            None => Where::Cells { first: 0 },
        }
    }

    pub(crate) fn encode(self) -> [u8; WHERE_BYTES] {
        let words = match self {
            Where::Cells { first } => [first, IN_CELLS, 0, 0],
            Where::Offered { first, handle, at } => [first, OFFERED, handle, at],
        };
        let mut bytes = [0; WHERE_BYTES];
        for (to, word) in bytes.chunks_exact_mut(8).zip(words) {
            to.copy_from_slice(&word.to_le_bytes());
        }
        bytes
    }

    /// What member `from` posted for call `seq`; a kind it does not know is
    /// taken as the cells, the way that needs nothing of the writer's
    /// memory but what it exposes.
    pub(crate) fn read<T: HostMemory>(team: &Team<'_, T>, from: u32, seq: u64) -> Result<Where> {
        let mut bytes = [0; WHERE_BYTES];
        read(team, from, seq, &mut bytes)?;
        let word = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8"));
        Ok(match word(1) {
            OFFERED => Where::Offered {
                first: word(0),
                handle: word(2),
                at: word(3),
            },
            _ => Where::Cells { first: word(0) },
        })
    }
}

/// This member's offer of its own buffer, withdrawn when dropped (whatever
/// way the call ends).
pub(crate) struct Offer<'a, 't, T: HostMemory> {
    team: &'a Team<'t, T>,
    handle: u64,
}

impl<'a, 't, T: HostMemory> Offer<'a, 't, T> {
    /// An offer of `data` for `op`, if the `copied` bytes a reader copies
    /// out of it are worth one (see `HostTuning::single_copy_min`), its
    /// readers were faster with one (see `Team::way`) and the provider
    /// makes offers.
    pub(crate) fn of(
        team: &'a Team<'t, T>,
        op: Op,
        data: &[u8],
        copied: usize,
    ) -> Result<Option<Offer<'a, 't, T>>> {
        match copied <= team.tuning().single_copy_max {
            true => Self::of_any_length(team, op, data, copied),
            false => Ok(None),
        }
    }

    /// [`Offer::of`] with no maximum, for a call in which every member
    /// copies (an allgather; a scatter, whose root copies its own piece):
    /// there the cells add no idle writer's core to the copying, only a
    /// second copy.
    pub(crate) fn of_any_length(
        team: &'a Team<'t, T>,
        op: Op,
        data: &[u8],
        copied: usize,
    ) -> Result<Option<Offer<'a, 't, T>>> {
        if copied < team.tuning().single_copy_min || team.way(op, copied)? == Way::Cells {
            return Ok(None);
        }
        let handle = team.t().host_offer(data);
        Ok(handle.map(|handle| Offer { team, handle }))
    }

    pub(crate) fn handle(&self) -> u64 {
        self.handle
    }
}

impl<T: HostMemory> Drop for Offer<'_, '_, T> {
    fn drop(&mut self) {
        self.team.t().host_withdraw(self.handle);
    }
}

/// Copies `buf.len()` bytes from `at` bytes into member `from`'s offer
/// `handle` (call `seq`) into `buf`: `Ok(false)` if this member cannot,
/// for whatever reason (the data then comes through cells). Copied whole
/// only while the writer was in the call all along: it posted the offer
/// in it, and it has not ended it since (else `buf` may hold what it
/// wrote later, and the call fails).
pub(crate) fn copy_offered<T: HostMemory>(
    team: &Team<'_, T>,
    from: u32,
    seq: u64,
    (handle, at): (u64, u64),
    buf: &mut [u8],
) -> Result<bool> {
    let t = team.t();
    let writer = team.peer(from)?;
    if !matches!(t.host_copy_from(writer, handle, at, buf), Ok(true)) {
        return Ok(false);
    }
    if t.host_load(writer, team.at(from, Layout::FINISHED))? >= seq {
        return Err(catena_fabric::Error::Protocol(format!(
            "member {from} of a host team ended call {seq} before member {} had copied \
             what it offered",
            team.me()
        ))
        .into());
    }
    Ok(true)
}

/// Which offer of a call a reply answers: a writer makes a reader at most
/// two offers in a call, one after the other (an allreduce its value,
/// then its reduced slice, once every reader replied to the first), and
/// waits for each reply before the next offer or the call's end, so one
/// word per reader holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Round(u64);

impl Round {
    pub(crate) fn first(seq: u64) -> Round {
        Round(seq << 1)
    }

    pub(crate) fn second(seq: u64) -> Round {
        Round(seq << 1 | 1)
    }
}

/// Tells writer `to` whether this member copied its offer of `round`.
pub(crate) fn reply<T: HostMemory>(
    team: &Team<'_, T>,
    to: u32,
    round: Round,
    copied: bool,
) -> Result<()> {
    let word = round.0 << 1 | u64::from(!copied);
    let at = team.at(to, team.layout().replied(team.me()));
    Ok(team.t().host_store(team.peer(to)?, at, word)?)
}

/// Tells reader `to` that this member's data of call `seq` is ready and
/// where: in its offer `handle`, or (`None`) in its cells from chunk 0.
/// For data made after this member posted to `to` in the call (an
/// allreduce's reduced slice); one a call.
pub(crate) fn notify<T: HostMemory>(
    team: &Team<'_, T>,
    to: u32,
    seq: u64,
    offered: Option<u64>,
) -> Result<()> {
    let (t, peer) = (team.t(), team.peer(to)?);
    let at = team.at(to, team.layout().notice(team.me()));
    if let Some(handle) = offered {
        t.host_store(peer, at + 8, handle)?;
    }
    Ok(t.host_store(peer, at, seq << 1 | u64::from(offered.is_some()))?)
}

/// Waits for member `from`'s [`notify`] of call `seq`: the handle of its
/// offer, if it offered.
pub(crate) async fn noticed<T: HostMemory>(
    team: &Team<'_, T>,
    from: u32,
    seq: u64,
    deadline: Time,
) -> Result<Option<u64>> {
    let t = team.t();
    let own = team.peer(team.me())?;
    let at = team.at(team.me(), team.layout().notice(from));
    let word = wait_until(t, deadline, "a host peer's notice", || {
        let word = t.host_load(own, at)?;
        Ok((word >> 1 == seq).then_some(word))
    })
    .await?;
    match word & 1 {
        0 => Ok(None),
        _ => Ok(Some(t.host_load(own, at + 8)?)),
    }
}

/// Waits for the reply of each of `readers` to this member's offer of
/// `round`; the readers that could not copy, in order.
pub(crate) async fn refused<T: HostMemory>(
    team: &Team<'_, T>,
    round: Round,
    readers: impl Iterator<Item = u32>,
    deadline: Time,
) -> Result<Vec<u32>> {
    let t = team.t();
    let own = team.peer(team.me())?;
    let mut refused = Vec::new();
    for m in readers {
        let at = team.at(team.me(), team.layout().replied(m));
        let word = wait_until(t, deadline, "a host peer's reply to an offer", || {
            let word = t.host_load(own, at)?;
            Ok((word >> 1 == round.0).then_some(word))
        })
        .await?;
        if word & 1 != 0 {
            refused.push(m);
        }
    }
    Ok(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_round_trips_and_unknown_kinds_are_cells() {
        let decode = |bytes: [u8; WHERE_BYTES]| {
            let word = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
            (word(0), word(1), word(2), word(3))
        };
        let offered = Where::Offered {
            first: 7,
            handle: u64::MAX,
            at: 1 << 40,
        };
        assert_eq!(decode(offered.encode()), (7, OFFERED, u64::MAX, 1 << 40));
        assert_eq!(
            decode(Where::Cells { first: 3 }.encode()),
            (3, IN_CELLS, 0, 0)
        );
    }
}
