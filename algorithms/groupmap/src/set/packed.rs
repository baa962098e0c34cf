//! Bit-packed sorted array, the thesis's "optimized canonical" layout:
//! `ceil(log2 span)` bits a member, O(1) select, binary-search rank.

use super::SortedSet;
use crate::packed::PackedArray;
use crate::stats::Stats;

#[derive(Clone, Debug)]
pub(crate) struct Packed {
    min: u32,
    offsets: PackedArray,
}

impl SortedSet for Packed {
    fn build(members: &[u32], stats: &Stats) -> Option<Packed> {
        let offsets = PackedArray::new(members.iter().map(|&w| w - stats.min), stats.span());
        Some(Packed {
            min: stats.min,
            offsets,
        })
    }

    fn estimate_heap_bytes(stats: &Stats) -> Option<usize> {
        Some(PackedArray::estimate_heap_bytes(stats.len, stats.span()))
    }

    fn len(&self) -> u32 {
        self.offsets.len()
    }

    fn select(&self, i: u32) -> u32 {
        self.min + self.offsets.get(i)
    }

    fn rank(&self, w: u32) -> Option<u32> {
        let p = w.checked_sub(self.min)?;
        let (mut lo, mut hi) = (0, self.offsets.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.offsets.get(mid) < p {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < self.offsets.len() && self.offsets.get(lo) == p).then_some(lo)
    }

    fn heap_bytes(&self) -> usize {
        self.offsets.heap_bytes()
    }
}
