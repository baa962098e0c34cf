//! MPI's group operations on maps: translate, compare, union, intersection
//! and difference (with MPI's ordering and as plain sets), include, exclude
//! and their range forms. Results take the left operand's strategy.

use super::repr::SetRepr;
use super::spans::{self, Span};
use super::{Body, GroupMap, GroupMapError};

/// How two groups relate, as MPI_Group_compare defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// The same members in the same order.
    Identical,
    /// The same members in another order.
    Similar,
    /// Different members.
    Unequal,
}

/// An MPI range triple: `first, first + stride, ...` up to and including
/// `last` where the progression meets it. `stride` may be negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankRange {
    /// The rank the progression starts at.
    pub first: u32,
    /// The bound it stops at, itself included where the stride lands on it.
    pub last: u32,
    /// The step between ranks, never zero, negative to count down.
    pub stride: i64,
}

impl RankRange {
    /// The triple `(first, last, stride)`, checked only when a map uses it.
    pub fn new(first: u32, last: u32, stride: i64) -> RankRange {
        RankRange {
            first,
            last,
            stride,
        }
    }
}

/// The number of ranks each range names, checking every one is below
/// `bound` (`outside` names the error for one that is not).
pub(crate) fn count_ranges(
    ranges: &[RankRange],
    bound: u32,
    outside: fn(u64, u32) -> GroupMapError,
) -> Result<Vec<u32>, GroupMapError> {
    ranges
        .iter()
        .enumerate()
        .map(|(index, r)| {
            let RankRange {
                first,
                last,
                stride,
            } = *r;
            if stride == 0 {
                return Err(GroupMapError::ZeroStride {
                    index,
                    first,
                    last,
                    stride,
                });
            }
            let distance = i64::from(last) - i64::from(first);
            if distance != 0 && (distance > 0) != (stride > 0) {
                return Err(GroupMapError::StrideAwayFromLast {
                    index,
                    first,
                    last,
                    stride,
                });
            }
            if first.max(last) >= bound {
                return Err(outside(u64::from(first.max(last)), bound));
            }
            Ok((distance / stride) as u32 + 1)
        })
        .collect()
}

/// The smallest rank the ranges name twice, where they name more than
/// `bound` ranks in all (so some must repeat): found by arithmetic, because
/// listing them could take gigabytes. `None` otherwise: a listing of at most
/// `bound` ranks is then checked as usual.
pub(crate) fn repeat_beyond(ranges: &[RankRange], counts: &[u32], bound: u32) -> Option<u32> {
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    if total <= u64::from(bound) {
        return None;
    }
    super::progression::smallest_repeat(ranges, counts)
}

/// The ranks the ranges name, in order.
pub(crate) fn expand_ranges(ranges: &[RankRange], counts: &[u32]) -> Vec<u32> {
    let mut ranks = Vec::with_capacity(counts.iter().map(|&c| c as usize).sum());
    for (r, &count) in ranges.iter().zip(counts) {
        ranks.extend((0..i64::from(count)).map(|k| (i64::from(r.first) + k * r.stride) as u32));
    }
    ranks
}

pub(crate) fn group_rank_outside(rank: u64, size: u32) -> GroupMapError {
    GroupMapError::GroupRankOutOfRange { rank, size }
}

pub(crate) fn world_rank_outside(rank: u64, world: u32) -> GroupMapError {
    GroupMapError::WorldRankOutOfRange { rank, world }
}

/// Group ranks of many world ranks at once. Every representation but the
/// plain array answers one `rank` in sublinear time; the plain array scans,
/// so many lookups into it sort a copy once (O(n) bytes for the call, as
/// the member lists the operations build take anyway).
enum Lookup<'a> {
    Map(&'a GroupMap),
    /// (world rank, group rank), sorted.
    Sorted(Vec<(u32, u32)>),
}

impl<'a> Lookup<'a> {
    fn of(map: &'a GroupMap) -> Lookup<'a> {
        match map.body {
            Body::Listed(_) => {
                let mut pairs: Vec<(u32, u32)> = map.iter().zip(0..).collect();
                pairs.sort_unstable();
                Lookup::Sorted(pairs)
            }
            Body::Split { .. } => Lookup::Map(map),
        }
    }

    /// The group rank of `w`; `w` is below the map's world.
    fn rank(&self, w: u32) -> Option<u32> {
        match self {
            Lookup::Map(map) => map.rank_within(w),
            Lookup::Sorted(pairs) => pairs
                .binary_search_by_key(&w, |&(world, _)| world)
                .ok()
                .map(|at| pairs[at].1),
        }
    }
}

impl GroupMap {
    fn same_world(&self, other: &GroupMap) -> Result<(), GroupMapError> {
        if self.world == other.world {
            Ok(())
        } else {
            Err(GroupMapError::WorldMismatch {
                left: self.world,
                right: other.world,
            })
        }
    }

    fn derived(&self, ranks: &[u32]) -> Result<GroupMap, GroupMapError> {
        GroupMap::from_ranks(self.world, ranks, self.strategy)
    }

    /// The ranks in `other` of this group's ranks `ranks`
    /// (MPI_Group_translate_ranks; `None` is MPI_UNDEFINED).
    pub fn translate_ranks(
        &self,
        ranks: &[u32],
        other: &GroupMap,
    ) -> Result<Vec<Option<u32>>, GroupMapError> {
        self.same_world(other)?;
        let other = Lookup::of(other);
        ranks
            .iter()
            .map(|&g| Ok(other.rank(self.select(g)?)))
            .collect()
    }

    /// MPI_Group_compare.
    pub fn compare(&self, other: &GroupMap) -> Comparison {
        if self.world != other.world
            || self.len() != other.len()
            || !self.members().eq(other.members())
        {
            Comparison::Unequal
        } else if self.is_sorted() && other.is_sorted() || self.iter().eq(other.iter()) {
            Comparison::Identical
        } else {
            Comparison::Similar
        }
    }

    /// MPI_Group_union: this group's members in its order, then `other`'s
    /// members not in it, in `other`'s order.
    pub fn union(&self, other: &GroupMap) -> Result<GroupMap, GroupMapError> {
        self.same_world(other)?;
        if let (Some(mine), Some(theirs)) = (self.sorted_set(), other.sorted_set()) {
            // Sorted both, with every newcomer above this group's members:
            // the union in MPI's order is the sorted one.
            let newcomers = spans::merge(theirs.spans(), mine.spans(), |o, s| o && !s);
            let above = match (self.len().checked_sub(1), newcomers.first()) {
                (Some(last), Some(&(first, _))) => first > mine.select(last),
                _ => true,
            };
            if above {
                return self.set_union(other);
            }
        }
        let mut ranks: Vec<u32> = self.iter().collect();
        let this = Lookup::of(self);
        ranks.extend(other.iter().filter(|&w| this.rank(w).is_none()));
        self.derived(&ranks)
    }

    /// MPI_Group_intersection: this group's members also in `other`, in this
    /// group's order.
    pub fn intersection(&self, other: &GroupMap) -> Result<GroupMap, GroupMapError> {
        if self.is_sorted() {
            return self.set_intersection(other);
        }
        self.same_world(other)?;
        let other = Lookup::of(other);
        let ranks: Vec<u32> = self.iter().filter(|&w| other.rank(w).is_some()).collect();
        self.derived(&ranks)
    }

    /// MPI_Group_difference: this group's members not in `other`, in this
    /// group's order.
    pub fn difference(&self, other: &GroupMap) -> Result<GroupMap, GroupMapError> {
        if self.is_sorted() {
            return self.set_difference(other);
        }
        self.same_world(other)?;
        let other = Lookup::of(other);
        let ranks: Vec<u32> = self.iter().filter(|&w| other.rank(w).is_none()).collect();
        self.derived(&ranks)
    }

    /// The members of either group, in increasing order.
    pub fn set_union(&self, other: &GroupMap) -> Result<GroupMap, GroupMapError> {
        self.merged(other, |a, b| a || b)
    }

    /// The members of both groups, in increasing order.
    pub fn set_intersection(&self, other: &GroupMap) -> Result<GroupMap, GroupMapError> {
        self.merged(other, |a, b| a && b)
    }

    /// The members of this group not in `other`, in increasing order.
    pub fn set_difference(&self, other: &GroupMap) -> Result<GroupMap, GroupMapError> {
        self.merged(other, |a, b| a && !b)
    }

    /// One merge of both groups' members as spans, keeping the ranks
    /// `keep` accepts given (in this group, in `other`).
    fn merged(
        &self,
        other: &GroupMap,
        keep: impl Fn(bool, bool) -> bool,
    ) -> Result<GroupMap, GroupMapError> {
        self.same_world(other)?;
        let spans = spans::merge(self.member_spans(), other.member_spans(), keep);
        GroupMap::from_spans(self.world, self.strategy, &spans)
    }

    /// The sorted group of the members of `set` (this group's, sorted) at
    /// the positions `positions` (increasing, disjoint spans of group ranks).
    fn at_positions(&self, set: &SetRepr, positions: &[Span]) -> Result<GroupMap, GroupMapError> {
        let spans = spans::at_positions(set.spans(), positions);
        GroupMap::from_spans(self.world, self.strategy, &spans)
    }

    /// This sorted group without the group ranks in `dropped` (spans,
    /// checked to lie within it and not to overlap).
    fn without_positions(
        &self,
        set: &SetRepr,
        dropped: &[Span],
    ) -> Result<GroupMap, GroupMapError> {
        let all = self.len().checked_sub(1).map(|last| (0, last));
        let dropped = spans::merge(dropped.iter().copied(), std::iter::empty(), |d, _| d);
        let kept = spans::merge(all.into_iter(), dropped.into_iter(), |a, d| a && !d);
        self.at_positions(set, &kept)
    }

    /// MPI_Group_incl: the group whose rank `i` is this group's rank `ranks[i]`.
    pub fn include(&self, ranks: &[u32]) -> Result<GroupMap, GroupMapError> {
        let world_ranks: Vec<u32> = ranks
            .iter()
            .map(|&g| self.select(g))
            .collect::<Result<_, _>>()?;
        GroupMap::from_ranks(self.world, &world_ranks, self.strategy).map_err(|e| match e {
            GroupMapError::DuplicateWorldRank { rank } => GroupMapError::DuplicateGroupRank {
                rank: Lookup::Map(self).rank(rank).unwrap_or(rank),
            },
            e => e,
        })
    }

    /// MPI_Group_excl: this group without its ranks `ranks`, in its order.
    pub fn exclude(&self, ranks: &[u32]) -> Result<GroupMap, GroupMapError> {
        let mut dropped = ranks.to_vec();
        dropped.sort_unstable();
        if let Some(&g) = dropped.iter().find(|&&g| g >= self.len()) {
            return Err(group_rank_outside(u64::from(g), self.len()));
        }
        if let Some(p) = dropped.windows(2).find(|p| p[0] == p[1]) {
            return Err(GroupMapError::DuplicateGroupRank { rank: p[0] });
        }
        if let Some(set) = self.sorted_set() {
            let dropped: Vec<Span> = spans::coalesce(dropped.into_iter()).collect();
            return self.without_positions(set, &dropped);
        }
        let mut next = dropped.iter().peekable();
        let kept: Vec<u32> = (0u32..)
            .zip(self.iter())
            .filter(|&(g, _)| {
                if next.peek() == Some(&&g) {
                    next.next().is_none()
                } else {
                    true
                }
            })
            .map(|(_, w)| w)
            .collect();
        self.derived(&kept)
    }

    /// MPI_Group_range_incl. One range of a stride group stays a stride in
    /// O(1); increasing ranges of step 1 of a sorted group take memory of
    /// the result's spans.
    pub fn range_include(&self, ranges: &[RankRange]) -> Result<GroupMap, GroupMapError> {
        let counts = count_ranges(ranges, self.len(), group_rank_outside)?;
        if let Some(rank) = repeat_beyond(ranges, &counts, self.len()) {
            return Err(GroupMapError::DuplicateGroupRank { rank });
        }
        if let (Some(set), true) = (self.sorted_set(), ranges.len() > 1) {
            let rising: Option<Vec<Span>> = ranges
                .iter()
                .zip(&counts)
                .map(|(r, &count)| match (count, r.stride) {
                    (1, _) => Some((r.first, r.first)),
                    (_, 1) => Some((r.first, r.last)),
                    _ => None,
                })
                .collect();
            if let Some(positions) = rising.filter(|p| p.windows(2).all(|w| w[0].1 < w[1].0)) {
                return self.at_positions(set, &positions);
            }
        }
        if let (Some(set @ SetRepr::Stride(_)), [range], [count]) =
            (self.sorted_set(), ranges, counts.as_slice())
        {
            if !matches!(self.strategy, super::Strategy::Fixed { .. }) {
                // Group rank g of a stride is first + g * d: a range of it is a stride.
                let first = set.select(range.first);
                let d = if self.len() > 1 {
                    i64::from(set.select(1) - set.select(0))
                } else {
                    1
                };
                // One rank has no step (and stride * d might overflow).
                let step = if *count > 1 { range.stride * d } else { 1 };
                return Ok(GroupMap::progression(
                    self.world,
                    self.strategy,
                    first,
                    step,
                    *count,
                ));
            }
        }
        self.include(&expand_ranges(ranges, &counts))
    }

    /// MPI_Group_range_excl. From a sorted group, ranges of step 1 are
    /// dropped as spans, never listed.
    pub fn range_exclude(&self, ranges: &[RankRange]) -> Result<GroupMap, GroupMapError> {
        let counts = count_ranges(ranges, self.len(), group_rank_outside)?;
        if let Some(rank) = repeat_beyond(ranges, &counts, self.len()) {
            return Err(GroupMapError::DuplicateGroupRank { rank });
        }
        if let Some(set) = self.sorted_set() {
            let mut dropped: Vec<Span> = Vec::new();
            for (r, &count) in ranges.iter().zip(&counts) {
                if count == 1 {
                    dropped.push((r.first, r.first));
                } else if r.stride.abs() == 1 {
                    dropped.push((r.first.min(r.last), r.first.max(r.last)));
                } else {
                    let each =
                        (0..i64::from(count)).map(|k| (i64::from(r.first) + k * r.stride) as u32);
                    dropped.extend(each.map(|g| (g, g)));
                }
            }
            if let Some(rank) = spans::first_overlap(&mut dropped) {
                return Err(GroupMapError::DuplicateGroupRank { rank });
            }
            return self.without_positions(set, &dropped);
        }
        self.exclude(&expand_ranges(ranges, &counts))
    }
}
