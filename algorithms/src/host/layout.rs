//! Where everything lies in a member's region of a host team: one 64-byte
//! line per writer for what peers store (so no two writers share a line),
//! this member's own bookkeeping, then the cells it exposes data in.

use super::Op;

/// A cache line.
pub(crate) const LINE: u64 = 64;
/// Mailbox slots per writer: a writer may run this many calls ahead of a
/// reader before it waits for the reader to finish one.
pub(crate) const SLOTS: u64 = 8;
/// The mailbox slot's first bytes: the sequence number and the length.
pub(crate) const SLOT_HEADER: u64 = 16;
/// The most payload a mailbox slot carries (in a small team; a larger one
/// has smaller slots, so its mailboxes take at most `MAILBOX_BYTES`).
pub(crate) const MAX_INLINE: usize = 1088 - SLOT_HEADER as usize;
const MAILBOX_BYTES: u64 = 18 << 10;
/// Cells a member exposes data in, and their size: a stream of more than
/// `CELLS * CELL` bytes moves as fast as its slowest reader drains cells.
pub(crate) const CELLS: u64 = 4;
pub(crate) const CELL: usize = 16 << 10;
/// The largest team: its mailboxes take `SLOTS * LINE` bytes per member in
/// every member's region.
pub(crate) const MAX_MEMBERS: u32 = 1024;

/// The offsets in a region of a team of `members`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    members: u64,
    rounds: u64,
    /// Bytes of one mailbox slot: whole lines.
    slot: u64,
}

impl Layout {
    /// The users count (the region's first word, see `HostRegion`).
    pub(crate) const USERS: u64 = 0;
    /// The last call this member finished (read by writers before they
    /// reuse a mailbox slot of it).
    pub(crate) const FINISHED: u64 = LINE;
    const BARRIER: u64 = 2 * LINE;

    pub(crate) fn new(members: u32) -> Layout {
        let members = u64::from(members.max(1));
        let slot =
            (MAILBOX_BYTES / members / LINE * LINE).clamp(LINE, SLOT_HEADER + MAX_INLINE as u64);
        Layout {
            members,
            rounds: u64::from(64 - (members - 1).leading_zeros()),
            slot,
        }
    }

    /// Payload bytes a mailbox slot carries.
    pub(crate) fn inline(&self) -> usize {
        (self.slot - SLOT_HEADER) as usize
    }

    /// Round `round`'s barrier flag, stored by the member `2^round` below.
    pub(crate) fn barrier(&self, round: u32) -> u64 {
        Self::BARRIER + LINE * u64::from(round)
    }

    /// How many chunks writer `from` has exposed to this member, in all.
    pub(crate) fn ready(&self, from: u32) -> u64 {
        Self::BARRIER + LINE * (self.rounds + u64::from(from))
    }

    /// Writer `from`'s notice that its data of a call is ready, and where
    /// (see `offer::notify`): two words in the line `from` stores its
    /// ready count in, which no one else writes.
    pub(crate) fn notice(&self, from: u32) -> u64 {
        self.ready(from) + 8
    }

    /// How many of this member's chunks reader `by` has consumed, in all.
    pub(crate) fn consumed(&self, by: u32) -> u64 {
        self.ready(0) + LINE * (self.members + u64::from(by))
    }

    /// Reader `by`'s reply to this member's last offer (see `offer`): in
    /// the line `by` stores its consumed count in, which no one else writes.
    pub(crate) fn replied(&self, by: u32) -> u64 {
        self.consumed(by) + 8
    }

    /// Reader `by`'s report of how long its last read of this member's
    /// long data in `op` (one whose readers report) took (see
    /// `copy_way`): in the same line, a word per operation.
    pub(crate) fn reported(&self, by: u32, op: Op) -> u64 {
        debug_assert!(op.reported());
        self.consumed(by) + 16 + 8 * op as u64
    }

    /// The bytes a new team must find zeroed (past the users count): its
    /// flags and counts. Mailbox slots need not be: a slot is posted when
    /// its sequence word holds the team's stamp of the call (see
    /// `Team::stamp`), which nothing left there by an earlier team does.
    pub(crate) fn reset_bytes(&self) -> usize {
        self.consumed(0) as usize + (LINE * self.members) as usize
    }

    fn mailboxes(&self) -> u64 {
        self.reset_bytes() as u64
    }

    /// Writer `from`'s mailbox slot for call `seq`: its sequence word, a
    /// length word, then [`Layout::inline`] bytes.
    pub(crate) fn mailbox(&self, seq: u64, from: u32) -> u64 {
        self.mailboxes() + self.slot * ((seq % SLOTS) * self.members + u64::from(from))
    }

    /// Cell `index`'s first byte.
    pub(crate) fn cell(&self, index: u64) -> u64 {
        let cells = (self.mailboxes() + self.slot * SLOTS * self.members).next_multiple_of(4096);
        cells + (index % CELLS) * CELL as u64
    }

    /// The region's size.
    pub(crate) fn bytes(&self) -> usize {
        (self.cell(0) + CELLS * CELL as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_do_not_overlap() {
        for members in [1, 2, 3, 16, 17, MAX_MEMBERS] {
            let l = Layout::new(members);
            let mut spans: Vec<(u64, u64)> = vec![(Layout::USERS, 8), (Layout::FINISHED, 8)];
            for round in 0..l.rounds as u32 {
                spans.push((l.barrier(round), LINE));
            }
            assert!(l.inline() >= 48 && l.inline() <= MAX_INLINE);
            for m in 0..members {
                for seq in 0..SLOTS {
                    spans.push((l.mailbox(seq, m), SLOT_HEADER + l.inline() as u64));
                }
                spans.push((l.ready(m), LINE));
                spans.push((l.consumed(m), LINE));
                assert!(l.replied(m) + 8 <= l.reported(m, Op::Bcast));
                assert!(l.reported(m, Op::Scatter) + 8 <= l.consumed(m) + LINE);
                assert_eq!(Op::Scatter as usize + 1, Op::REPORTED);
                assert!(l.notice(m) + 16 <= l.ready(m) + LINE);
                assert!(l.consumed(m) + LINE <= l.reset_bytes() as u64);
                assert!(l.mailbox(0, m) >= l.reset_bytes() as u64);
            }
            for c in 0..CELLS {
                spans.push((l.cell(c), CELL as u64));
            }
            spans.sort();
            for w in spans.windows(2) {
                assert!(w[0].0 + w[0].1 <= w[1].0, "{members}: {w:?}");
            }
            let last = spans.last().unwrap();
            assert!(last.0 + last.1 <= l.bytes() as u64);
        }
        assert!(Layout::new(16).bytes() < 256 << 10);
        assert_eq!(Layout::new(2).inline(), MAX_INLINE);
        // A group split off a team fits in a region sized for the team.
        for (small, large) in [(1, 2), (2, 16), (15, 16), (16, 17), (17, 64), (64, 1024)] {
            let (small, large) = (Layout::new(small), Layout::new(large));
            assert!(small.bytes() <= large.bytes() && small.reset_bytes() <= large.reset_bytes());
        }
        assert!(Layout::new(MAX_MEMBERS).bytes() <= catena_fabric::host::WORLD_REGION_BYTES);
    }
}
