//! Which host algorithm a collective takes, by team size and message size
//! (UCC's score map, reduced to what was measured; the numbers are
//! `HostTuning`'s): values that fit a mailbox slot go along trees, bcast's
//! and reduce's of radix `tree_radix`, and a short allreduce exchanges
//! every value up to `exchange_max` members and goes up and down trees of
//! radix `allreduce_radix` above; longer values are exposed in cells and
//! pulled (reductions split the work: each member reduces a slice).

use catena_fabric::config::HostTuning;

/// The radix of the trees a short bcast or reduce takes among `n` members.
pub(crate) fn tree_radix(n: u32, tuning: HostTuning) -> u32 {
    tuning.tree_radix.clamp(2, n.max(2))
}

/// Whether a short allreduce among `n` members exchanges every value with
/// every member (one crossing) rather than reducing up a tree and
/// broadcasting down (two tree depths).
pub(crate) fn exchange(n: u32, tuning: HostTuning) -> bool {
    n <= tuning.exchange_max
}

/// The radix of the trees a short allreduce among `n` members takes where
/// it does not exchange.
pub(crate) fn allreduce_radix(n: u32, tuning: HostTuning) -> u32 {
    tuning.allreduce_radix.clamp(2, n.max(2))
}
