//! Compact group maps (seed 003, Taheri's "Scalability of Communicators in
//! MPI"): a group's rank-to-world map as an ordered set plus an optional
//! permutation, each in the representation a [`Strategy`] picks, with
//! sublinear lookups both ways (`select`: group -> world, `rank`: world -> group).
//!
//! # Target features: build with them, or lookups are 2-4x slower
//!
//! The bitmap, Elias-Fano, complement, indexed and wavelet representations
//! answer `select` and `rank` with vers-vecs, whose rank and select use the
//! x86-64 instructions `popcnt`, `pdep` (BMI2) and `tzcnt`/`lzcnt` only when
//! the *whole build* is compiled with those target features: vers-vecs picks
//! them with `cfg(target_feature)` at compile time and has no runtime
//! detection. Without them it falls back to software loops (measured: a
//! bitmap select 143 ns instead of 54 ns, an Elias-Fano rank 177-221 ns
//! instead of 57 ns). catena's workspace turns them on in
//! `.cargo/config.toml`; a build outside it must do the same, in its own
//! `.cargo/config.toml`:
//!
//! ```toml
//! [target.'cfg(target_arch = "x86_64")']
//! rustflags = ["-C", "target-feature=+popcnt,+bmi1,+bmi2,+lzcnt"]
//! ```
//!
//! or with `RUSTFLAGS="-C target-feature=+popcnt,+bmi1,+bmi2,+lzcnt"` (or
//! `-C target-cpu=native`, or `x86-64-v3`). Every x86-64 CPU since Haswell
//! and Excavator has them. The build script prints a `cargo:warning` when
//! they are missing (cargo shows it for path dependencies, not for git or
//! registry ones), and [`fast_lookups`] tells a program at run time which
//! build it got.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod error;
mod listed;
mod ops;
mod order;
mod packed;
mod progression;
mod repr;
mod set;
mod spans;
mod stats;
mod strategy;

use std::fmt;

pub use error::GroupMapError;
pub use ops::{Comparison, RankRange};
pub use repr::{OrderKind, SetKind};
pub use strategy::{Measured, Report, Strategy};

/// Results of group operations up to this many members are listed, so that
/// the strategy chooses among every representation; larger ones stay spans.
const LISTED_AT: u64 = 1 << 20;

use listed::Listed;
use order::{Blocks, OrderStats};
use repr::{OrderRepr, SetRepr};
use stats::Stats;

/// Whether this build's rank and select use the hardware instructions
/// (x86-64 with the `popcnt` and `bmi2` target features), rather than the
/// 2-4x slower software fallbacks: see [Target
/// features](crate#target-features-build-with-them-or-lookups-are-2-4x-slower).
/// A benchmark or a program that cares should check it and say so loudly.
pub const fn fast_lookups() -> bool {
    cfg!(all(
        target_arch = "x86_64",
        target_feature = "popcnt",
        target_feature = "bmi2"
    ))
}

/// The world ranks of a group's members, in group order.
///
/// ```
/// use catena_groupmap::{GroupMap, RankRange, Strategy};
///
/// // World ranks 90, 80, ..., 0 of a world of 100: a stride, O(1) bytes.
/// let falling = [RankRange::new(90, 0, -10)];
/// let map = GroupMap::from_ranges(100, &falling, Strategy::Auto)?;
/// assert_eq!((map.len(), map.select(2)?, map.rank(70)?), (10, 70, Some(2)));
/// assert_eq!(map.rank(71)?, None);
/// // Any list, compressed by the strategy's choice.
/// let listed = GroupMap::from_ranks(100, &[5, 17, 3, 99], Strategy::Auto)?;
/// assert_eq!(listed.iter().collect::<Vec<_>>(), [5, 17, 3, 99]);
/// # Ok::<(), catena_groupmap::GroupMapError>(())
/// ```
#[derive(Clone, Debug)]
pub struct GroupMap {
    world: u32,
    strategy: Strategy,
    body: Body,
}

/// What holds the members: a set and the group order over it, or the plain
/// array, which holds group order itself (and small enough, inside the map).
#[derive(Clone, Debug)]
enum Body {
    Split { set: SetRepr, order: OrderRepr },
    Listed(Listed),
}

impl Body {
    fn sorted(set: SetRepr) -> Body {
        Body::Split {
            set,
            order: OrderRepr::Sorted,
        }
    }
}

impl GroupMap {
    /// The group whose rank `g` is world rank `ranks[g]`.
    pub fn from_ranks(
        world: u32,
        ranks: &[u32],
        strategy: Strategy,
    ) -> Result<GroupMap, GroupMapError> {
        Ok(GroupMap::from_ranks_reported(world, ranks, strategy)?.0)
    }

    /// As [`from_ranks`](Self::from_ranks), with the strategy's report.
    pub fn from_ranks_reported(
        world: u32,
        ranks: &[u32],
        strategy: Strategy,
    ) -> Result<(GroupMap, Report), GroupMapError> {
        strategy.check()?;
        if let Some(&rank) = ranks.iter().find(|&&w| w >= world) {
            return Err(GroupMapError::WorldRankOutOfRange {
                rank: u64::from(rank),
                world,
            });
        }
        let ascending = ranks.windows(2).all(|p| p[0] < p[1]);
        let (members, pi) = if ascending {
            (ranks.to_vec(), (0..ranks.len() as u32).collect::<Vec<_>>())
        } else {
            let mut by_rank: Vec<(u32, u32)> = ranks
                .iter()
                .enumerate()
                .map(|(g, &w)| (w, g as u32))
                .collect();
            by_rank.sort_unstable();
            if let Some(p) = by_rank.windows(2).find(|p| p[0].0 == p[1].0) {
                return Err(GroupMapError::DuplicateWorldRank { rank: p[0].0 });
            }
            let mut pi = vec![0u32; ranks.len()];
            for (s, &(_, g)) in by_rank.iter().enumerate() {
                pi[g as usize] = s as u32;
            }
            (by_rank.into_iter().map(|(w, _)| w).collect(), pi)
        };
        let stats = Stats::of(&members, world);
        let order_stats = OrderStats::of(&pi);
        let choice = strategy::choose(strategy, &members, &stats, &pi, &order_stats)?;
        let body = match choice.set {
            // The plain array, in group order, as the map keeps it.
            plain @ SetRepr::Plain(_) => {
                let ranks = (0..plain.len()).map(|g| plain.select(g));
                Body::Listed(Listed::new(ranks, world))
            }
            set => Body::Split {
                set,
                order: choice.order,
            },
        };
        let map = GroupMap {
            world,
            strategy,
            body,
        };
        Ok((map, choice.report))
    }

    /// The group of the world ranks the MPI range triples name, in that
    /// order. A single range becomes a stride in O(1), never a list; ranges
    /// naming more ranks than the world holds are refused before listing.
    pub fn from_ranges(
        world: u32,
        ranges: &[RankRange],
        strategy: Strategy,
    ) -> Result<GroupMap, GroupMapError> {
        strategy.check()?;
        let counted = ops::count_ranges(ranges, world, ops::world_rank_outside)?;
        if let Some(rank) = ops::repeat_beyond(ranges, &counted, world) {
            return Err(GroupMapError::DuplicateWorldRank { rank });
        }
        if let ([range], [count]) = (ranges, counted.as_slice()) {
            // `progression` makes a stride, sorted unless it falls.
            let falling = range.stride < 0 && *count > 1;
            let takes_progression = match strategy {
                Strategy::Fixed { set, order } => {
                    let progression_order = if falling {
                        OrderKind::Blocks
                    } else {
                        OrderKind::Sorted
                    };
                    set == SetKind::Stride && order == progression_order
                }
                _ => true,
            };
            if takes_progression {
                return Ok(GroupMap::progression(
                    world,
                    strategy,
                    range.first,
                    range.stride,
                    *count,
                ));
            }
        }
        let ranks = ops::expand_ranges(ranges, &counted);
        GroupMap::from_ranks(world, &ranks, strategy)
    }

    /// The sorted group of the ranks in `spans` (increasing, disjoint,
    /// maximal, below the world). Up to `LISTED_AT` members it is listed
    /// and the strategy chooses as for any list; beyond, it stays a stride
    /// or runs (unless a `Fixed` strategy asks otherwise), so that an
    /// operation on a huge group takes memory of its result's spans.
    fn from_spans(
        world: u32,
        strategy: Strategy,
        spans: &[spans::Span],
    ) -> Result<GroupMap, GroupMapError> {
        let runs_asked = match strategy {
            Strategy::Fixed { set, order } => set == SetKind::Runs && order == OrderKind::Sorted,
            _ => true,
        };
        if !runs_asked || spans::count(spans) <= LISTED_AT {
            let ranks: Vec<u32> = spans
                .iter()
                .flat_map(|&(first, last)| first..=last)
                .collect();
            return GroupMap::from_ranks(world, &ranks, strategy);
        }
        let set = match spans {
            [(first, last)] if !matches!(strategy, Strategy::Fixed { .. }) => {
                SetRepr::stride(*first, 1, last - first + 1)
            }
            _ => SetRepr::Runs(Box::new(set::Runs::from_spans(spans))),
        };
        Ok(GroupMap {
            world,
            strategy,
            body: Body::sorted(set),
        })
    }

    /// The members as maximal spans, increasing.
    fn member_spans(&self) -> Box<dyn Iterator<Item = spans::Span> + '_> {
        match &self.body {
            Body::Split { set, .. } => set.spans(),
            Body::Listed(_) => Box::new(spans::coalesce(self.members())),
        }
    }

    /// Every rank of a world of `world` ranks, in O(1) bytes.
    pub fn world_group(world: u32) -> GroupMap {
        GroupMap::progression(world, Strategy::Auto, 0, 1, world)
    }

    /// `count` world ranks from `first`, `step` apart, which the caller has
    /// checked lie within the world and are distinct.
    fn progression(world: u32, strategy: Strategy, first: u32, step: i64, count: u32) -> GroupMap {
        let magnitude = step.unsigned_abs().min(u64::from(u32::MAX)) as u32;
        if step > 0 || count <= 1 {
            return GroupMap {
                world,
                strategy,
                body: Body::sorted(SetRepr::stride(first, magnitude, count)),
            };
        }
        let lowest = (i64::from(first) + step * i64::from(count - 1)) as u32;
        let set = SetRepr::stride(lowest, magnitude, count);
        GroupMap {
            world,
            strategy,
            body: Body::Split {
                set,
                order: OrderRepr::Blocks(Box::new(Blocks::falling(count))),
            },
        }
    }

    /// Ranks in the world this group is drawn from.
    pub fn world_size(&self) -> u32 {
        self.world
    }

    /// Members of the group.
    pub fn len(&self) -> u32 {
        match &self.body {
            Body::Split { set, .. } => set.len(),
            Body::Listed(listed) => listed.len(),
        }
    }

    /// Whether the group has no members (`MPI_GROUP_EMPTY`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The world rank of group rank `g`.
    #[inline]
    pub fn select(&self, g: u32) -> Result<u32, GroupMapError> {
        if g >= self.len() {
            return Err(GroupMapError::GroupRankOutOfRange {
                rank: u64::from(g),
                size: self.len(),
            });
        }
        Ok(match &self.body {
            Body::Split { set, order } => set.select(order.to_sorted(g)),
            Body::Listed(listed) => listed.get(g, self.world),
        })
    }

    /// The group rank of world rank `w`, or `None` if it is not a member.
    #[inline]
    pub fn rank(&self, w: u32) -> Result<Option<u32>, GroupMapError> {
        if w >= self.world {
            return Err(GroupMapError::WorldRankOutOfRange {
                rank: u64::from(w),
                world: self.world,
            });
        }
        Ok(self.rank_within(w))
    }

    /// [`rank`](Self::rank) of a `w` already checked to be in the world.
    fn rank_within(&self, w: u32) -> Option<u32> {
        match &self.body {
            Body::Split { set, order } => set.rank(w).map(|s| order.to_group(s)),
            Body::Listed(listed) => listed.position(w, self.world),
        }
    }

    /// World ranks in group order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        let (set, order) = match &self.body {
            Body::Split { set, order } => (set, order),
            Body::Listed(listed) => return Box::new(listed.iter(self.world)),
        };
        match (order, set) {
            (OrderRepr::Sorted, _) => set.iter(),
            // A compressed select decodes a whole block: decode each block
            // once, in order, and permute the list instead.
            (_, SetRepr::Compressed(_)) => {
                let sorted: Vec<u32> = set.iter().collect();
                Box::new((0..self.len()).map(move |g| sorted[order.to_sorted(g) as usize]))
            }
            _ => Box::new((0..self.len()).map(|g| set.select(order.to_sorted(g)))),
        }
    }

    /// World ranks in increasing order.
    pub fn members(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        match &self.body {
            Body::Split { set, .. } => set.iter(),
            // The plain array holds group order: sort a copy.
            Body::Listed(listed) => {
                let mut sorted: Vec<u32> = listed.iter(self.world).collect();
                sorted.sort_unstable();
                Box::new(sorted.into_iter())
            }
        }
    }

    /// Whether the map stores no permutation, so that group order is the
    /// increasing order of world ranks. Only a `Fixed` order representation
    /// other than `Sorted` stores one that may be the identity (then false),
    /// and the plain array, which holds a permuted group's own order.
    pub fn is_sorted(&self) -> bool {
        self.sorted_set().is_some()
    }

    /// The set of a map that stores no permutation.
    fn sorted_set(&self) -> Option<&SetRepr> {
        match &self.body {
            Body::Split {
                set,
                order: OrderRepr::Sorted,
            } => Some(set),
            _ => None,
        }
    }

    /// The representation holding the members.
    pub fn set_kind(&self) -> SetKind {
        match &self.body {
            Body::Split { set, .. } => set.kind(),
            Body::Listed(_) => SetKind::Plain,
        }
    }

    /// The representation holding the group order.
    pub fn order_kind(&self) -> OrderKind {
        match &self.body {
            Body::Split { order, .. } => order.kind(),
            Body::Listed(_) => OrderKind::Sorted,
        }
    }

    /// The strategy this map was built with; derived maps use it too.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// A 64-bit hash of the world size and the world ranks in group order,
    /// the same for equal groups whatever their representation: it hashes
    /// the sequence as its greedy maximal arithmetic runs, so a stride
    /// costs O(1) and any other map one pass over its members. Processes
    /// compare it to check that they passed the same group.
    pub fn fingerprint(&self) -> u64 {
        let mut runs = Runs::new(self.world);
        match self.sorted_set() {
            Some(set @ SetRepr::Stride(_)) if self.len() >= 2 => {
                let (first, second) = (set.select(0), set.select(1));
                runs.emit(first, i64::from(second) - i64::from(first), self.len());
            }
            _ => self.iter().for_each(|w| runs.push(w)),
        }
        runs.finish()
    }

    /// Bytes the map holds: its own and those on the heap.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<GroupMap>()
            + match &self.body {
                Body::Split { set, order } => set.heap_bytes() + order.heap_bytes(),
                Body::Listed(listed) => listed.heap_bytes(),
            }
    }
}

/// [`GroupMap::fingerprint`]'s hash over arithmetic runs (first, step,
/// length), each folded in by a SplitMix64 step: stable across processes,
/// runs and builds.
struct Runs {
    hash: u64,
    run: Option<(u32, i64, u32)>,
}

impl Runs {
    fn new(world: u32) -> Runs {
        Runs {
            hash: mix(0x6361_7465_6e61, u64::from(world)),
            run: None,
        }
    }

    fn push(&mut self, w: u32) {
        self.run = Some(match self.run {
            None => (w, 0, 1),
            Some((first, _, 1)) => (first, i64::from(w) - i64::from(first), 2),
            Some((first, step, len))
                if i64::from(first) + step * i64::from(len) == i64::from(w) =>
            {
                (first, step, len + 1)
            }
            Some((first, step, len)) => {
                self.emit(first, step, len);
                (w, 0, 1)
            }
        });
    }

    fn emit(&mut self, first: u32, step: i64, len: u32) {
        for x in [u64::from(first), step as u64, u64::from(len)] {
            self.hash = mix(self.hash, x);
        }
    }

    fn finish(mut self) -> u64 {
        if let Some((first, step, len)) = self.run.take() {
            self.emit(first, step, len);
        }
        self.hash
    }
}

fn mix(hash: u64, x: u64) -> u64 {
    let mut z = (hash ^ x).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl fmt::Display for GroupMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} ranks: {} + {}, {} B",
            self.len(),
            self.world,
            self.set_kind(),
            self.order_kind(),
            self.bytes()
        )
    }
}
