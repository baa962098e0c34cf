//! Which host algorithm a collective takes, by team size and message size
//! (UCC's score map, reduced to what was measured): values that fit a
//! mailbox line go straight to every member up to `FLAT_MAX` members and
//! along radix-`RADIX` trees above; longer ones are exposed in cells and
//! pulled (reductions split the work: each member reduces a slice).

/// Up to this many members a value goes to every member directly.
pub(crate) const FLAT_MAX: u32 = 8;
/// The tree radix above `FLAT_MAX` members.
pub(crate) const RADIX: u32 = 4;

/// The radix of the trees small values take among `n` members.
pub(crate) fn radix(n: u32) -> u32 {
    if n <= FLAT_MAX {
        n.max(2)
    } else {
        RADIX
    }
}

/// Whether a small allreduce among `n` members exchanges every value with
/// every member (one crossing) rather than reducing up a tree and
/// broadcasting down (two tree depths).
pub(crate) fn exchange(n: u32) -> bool {
    n <= FLAT_MAX
}
