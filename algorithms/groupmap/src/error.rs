//! Errors of the group-map layer: each names the offending value.

/// Why a group map could not be built, queried or combined. New variants may
/// come, so a `match` on it needs a wildcard arm.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupMapError {
    /// A world rank given (or reached by a range) is not below the world size.
    #[error("world rank {rank} is outside a world of {world} ranks")]
    WorldRankOutOfRange {
        /// The offending world rank.
        rank: u64,
        /// Ranks in the world.
        world: u32,
    },
    /// The list of world ranks names one twice.
    #[error("world rank {rank} is listed more than once; a group holds each rank once")]
    DuplicateWorldRank {
        /// The repeated world rank.
        rank: u32,
    },
    /// A group rank given (or reached by a range) is not below the group size.
    #[error("group rank {rank} is outside a group of {size} ranks")]
    GroupRankOutOfRange {
        /// The offending group rank.
        rank: u64,
        /// Members of the group.
        size: u32,
    },
    /// An include or exclude names one group rank twice.
    #[error("group rank {rank} is listed more than once")]
    DuplicateGroupRank {
        /// The repeated group rank.
        rank: u32,
    },
    /// A range triple's stride is zero, which MPI forbids.
    #[error("range {index} ({first}, {last}, stride {stride}): the stride is zero")]
    ZeroStride {
        /// The triple's position in the list given.
        index: usize,
        /// The triple's first rank.
        first: u32,
        /// The triple's last rank.
        last: u32,
        /// The triple's stride.
        stride: i64,
    },
    /// A range triple's stride has the wrong sign to reach `last` from `first`.
    #[error(
        "range {index} ({first}, {last}, stride {stride}): the stride leads away from the last rank"
    )]
    StrideAwayFromLast {
        /// The triple's position in the list given.
        index: usize,
        /// The triple's first rank.
        first: u32,
        /// The triple's last rank.
        last: u32,
        /// The triple's stride.
        stride: i64,
    },
    /// Two maps combined or compared are drawn from worlds of different sizes.
    #[error("the groups come from worlds of different sizes ({left} and {right})")]
    WorldMismatch {
        /// The world size of the map the operation was called on.
        left: u32,
        /// The world size of the other map.
        right: u32,
    },
    /// A representation cannot hold the group: the one `Strategy::Fixed` asked
    /// for, or (rarely) every one a strategy could try.
    #[error("{representation} cannot hold this group: {why}")]
    NotApplicable {
        /// The representation's name.
        representation: &'static str,
        /// What about the group rules it out.
        why: &'static str,
    },
    /// `Strategy::hybrid` was given an alpha outside `0..=1`.
    #[error("alpha {alpha} is not within 0..=1")]
    BadAlpha {
        /// The alpha given.
        alpha: f64,
    },
}
