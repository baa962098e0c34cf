//! Context ids that are unique by construction. A new communicator's id is
//! made of its leader's world rank and a serial number the leader's own
//! transport hands out once ([`Rma::next_serial`]): no global counter, no
//! retry, and 64 bits that do not run out. Each communicator owns
//! [`CHANNELS`] consecutive ids, one per kind of traffic.

use catena_fabric::{ContextId, Rank, Rma};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The world communicator's id ([`crate::Comm::world`]).
pub const WORLD_CONTEXT: ContextId = DERIVED - CHANNELS;

/// Ids from here up are made by [`Proposal::context`]; those below
/// [`WORLD_CONTEXT`] are free for callers that pick their own (e.g.
/// [`crate::chain::Chain::world`] in tests and benchmarks).
const DERIVED: ContextId = 1 << 63;

/// Ids per communicator: collectives, point-to-point, group creation, the
/// leaders' chain across hosts.
pub const CHANNELS: ContextId = 4;

// The world's ids lie below every derived one.
const _: () = assert!(WORLD_CONTEXT + CHANNELS <= DERIVED);

/// The kinds of traffic of one communicator besides its collectives (which
/// use its id itself, with tags in call order), each under its own id so
/// that user tags never meet the collectives'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Channel {
    /// Point-to-point messages; the user's tags.
    PointToPoint = 1,
    /// `create_group` on this communicator as the parent; tags from the
    /// user's creation tag.
    Create = 2,
    /// The chain of its hosts' leaders, where it spans hosts
    /// (`comm::levels`); tags in its two-level calls' order.
    Leaders = 3,
}

/// A communicator's id for one channel.
pub(crate) fn channel(context: ContextId, channel: Channel) -> ContextId {
    context | channel as ContextId
}

/// What one process offers as the id of a communicator being made: its
/// rank and a fresh serial of its transport. The members agree on the
/// leader's proposal (the leftmost member's, in a reduction in chain order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Proposal {
    leader: Rank,
    serial: u64,
}

impl Proposal {
    /// Takes a serial from `t`; called when a creating collective is
    /// called, so that concurrent creations take theirs in call order.
    pub(crate) fn new<T: Rma + ?Sized>(t: &T) -> Proposal {
        Proposal {
            leader: t.rank(),
            serial: t.next_serial(),
        }
    }

    /// The id: `DERIVED + CHANNELS * (serial * world + leader)`, one-to-one
    /// in (leader, serial) while it fits, so no two creations that consumed
    /// different serials (or whose leaders differ) ever share it.
    pub(crate) fn context(self, world: u32) -> Result<ContextId> {
        // A leader outside the world (a corrupted or forged proposal) would
        // alias another rank's id: serial x N + (N + r) = (serial + 1) x N + r.
        if self.leader >= world {
            return Err(Error::Mismatch {
                what: format!(
                    "the new context: its leader is rank {} of a world of {world}",
                    self.leader
                ),
            });
        }
        self.serial
            .checked_mul(u64::from(world))
            .and_then(|s| s.checked_add(u64::from(self.leader)))
            .filter(|&n| n < (u64::MAX - DERIVED) / CHANNELS)
            .map(|n| DERIVED + n * CHANNELS)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "context ids are exhausted: rank {} made {} communicators",
                    self.leader, self.serial
                ))
            })
    }

    /// The leader and the serial, as a record carries them.
    pub(crate) fn parts(self) -> (Rank, u64) {
        (self.leader, self.serial)
    }

    /// The proposal a record carried (checked when it becomes an id).
    pub(crate) fn from_parts(leader: Rank, serial: u64) -> Proposal {
        Proposal { leader, serial }
    }

    /// The leftmost of two proposals in chain order: an allreduce in chain
    /// order agrees on rank 0's.
    pub(crate) fn leftmost(a: &Proposal, _b: &Proposal) -> Proposal {
        *a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_one_to_one_in_leader_and_serial_and_spaced_by_channels() {
        let world = 5;
        let mut seen = std::collections::HashSet::new();
        for leader in 0..world {
            for serial in 0..50 {
                let id = Proposal { leader, serial }.context(world).unwrap();
                assert!(id >= DERIVED && id % CHANNELS == 0);
                assert!(seen.insert(id), "{leader}/{serial} repeats {id:#x}");
            }
        }
    }

    #[test]
    fn a_leader_outside_the_world_is_refused_not_aliased() {
        let forged = Proposal {
            leader: 8,
            serial: 0,
        };
        assert!(matches!(forged.context(8), Err(Error::Mismatch { .. })));
    }

    #[test]
    fn an_id_past_64_bits_is_an_error_not_a_wrap() {
        let p = Proposal {
            leader: 3,
            serial: u64::MAX / 4,
        };
        assert!(matches!(p.context(8), Err(Error::InvalidArgument(_))));
    }
}
