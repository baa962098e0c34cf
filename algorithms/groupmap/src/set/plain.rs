//! The plain array MPI libraries keep, bit-packed: `ceil(log2 world)` bits a
//! member, in group order rather than sorted, so `select(g)` is the world
//! rank of group rank `g` and `rank` scans. It is the yardstick the other
//! representations must beat: Space and Auto never pick anything larger.
//! This is the candidate the strategies build and time; a map keeps the
//! array it chose as `Listed` (inline when small), and its bytes count so.

use super::SortedSet;
use crate::packed::PackedArray;
use crate::stats::Stats;

#[derive(Clone, Debug)]
pub(crate) struct Plain {
    ranks: PackedArray,
    world: u32,
}

impl Plain {
    /// The world its ranks are drawn from.
    pub(crate) fn world(&self) -> u32 {
        self.world
    }
}

impl SortedSet for Plain {
    /// Unlike every other representation, `members` are taken in the order
    /// given: the group's.
    fn build(members: &[u32], stats: &Stats) -> Option<Plain> {
        let ranks = PackedArray::new(members.iter().copied(), u64::from(stats.world));
        Some(Plain {
            ranks,
            world: stats.world,
        })
    }

    fn estimate_heap_bytes(stats: &Stats) -> Option<usize> {
        Some(PackedArray::estimate_heap_bytes(
            stats.len,
            u64::from(stats.world),
        ))
    }

    fn len(&self) -> u32 {
        self.ranks.len()
    }

    fn select(&self, i: u32) -> u32 {
        self.ranks.get(i)
    }

    /// A scan, as MPICH's and Open MPI's arrays answer it.
    fn rank(&self, w: u32) -> Option<u32> {
        (0..self.ranks.len()).find(|&i| self.ranks.get(i) == w)
    }

    fn heap_bytes(&self) -> usize {
        self.ranks.heap_bytes()
    }
}
