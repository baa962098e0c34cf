//! Errors of the group-map layer: each names the offending value.

/// Why a group map could not be built, queried or combined.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GroupMapError {
    #[error("world rank {rank} is outside a world of {world} ranks")]
    WorldRankOutOfRange { rank: u64, world: u32 },
    #[error("world rank {rank} is listed more than once; a group holds each rank once")]
    DuplicateWorldRank { rank: u32 },
    #[error("group rank {rank} is outside a group of {size} ranks")]
    GroupRankOutOfRange { rank: u64, size: u32 },
    #[error("group rank {rank} is listed more than once")]
    DuplicateGroupRank { rank: u32 },
    #[error("range {index} ({first}, {last}, stride {stride}): the stride is zero")]
    ZeroStride {
        index: usize,
        first: u32,
        last: u32,
        stride: i64,
    },
    #[error(
        "range {index} ({first}, {last}, stride {stride}): the stride leads away from the last rank"
    )]
    StrideAwayFromLast {
        index: usize,
        first: u32,
        last: u32,
        stride: i64,
    },
    #[error("the groups come from worlds of different sizes ({left} and {right})")]
    WorldMismatch { left: u32, right: u32 },
    #[error("{representation} cannot hold this group: {why}")]
    NotApplicable {
        representation: &'static str,
        why: &'static str,
    },
    #[error("alpha {alpha} is not within 0..=1")]
    BadAlpha { alpha: f64 },
}
