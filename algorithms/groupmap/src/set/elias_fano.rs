//! Gap encoding as Elias-Fano (vers' `EliasFanoVec`): about
//! `2 + log2(span / len)` bits a member, within a few percent of the
//! information-theoretic bound for random sets, with O(1) select and rank.

use vers_vecs::EliasFanoVec;

use super::bitmap::rs_vec_bytes;
use super::SortedSet;
use crate::stats::{bits_for, Stats};

#[derive(Clone, Debug)]
pub(crate) struct EliasFano {
    values: EliasFanoVec,
}

impl EliasFano {
    pub(crate) fn from_sorted(values: &[u64]) -> EliasFano {
        EliasFano {
            values: EliasFanoVec::from_slice(values),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    pub(crate) fn get(&self, i: usize) -> u64 {
        self.values.get_unchecked(i)
    }

    /// How many values are below `v`.
    pub(crate) fn count_below(&self, v: u64) -> usize {
        self.values.rank(v) as usize
    }

    pub(crate) fn position(&self, v: u64) -> Option<usize> {
        let r = self.count_below(v);
        (r < self.len() && self.get(r) == v).then_some(r)
    }

    /// Heap bytes of `len` sorted values spanning `span` (max - min + 1),
    /// following the layout `EliasFanoVec::from_slice` picks.
    pub(crate) fn estimate_heap_bytes(len: u64, span: u64) -> usize {
        if len == 0 {
            return 0;
        }
        let universe = (span - 1).max(2);
        let lower = bits_for(universe + 1).max(bits_for(len + 3)) - bits_for(len.max(2));
        let upper_len = 2 + len + ((span - 1) >> lower);
        rs_vec_bytes(upper_len, len) + (len * u64::from(lower)).div_ceil(64) as usize * 8
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.values.heap_size()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.values.iter()
    }
}

impl SortedSet for EliasFano {
    fn build(members: &[u32], _stats: &Stats) -> Option<EliasFano> {
        let wide: Vec<u64> = members.iter().map(|&w| u64::from(w)).collect();
        Some(EliasFano::from_sorted(&wide))
    }

    fn estimate_heap_bytes(stats: &Stats) -> Option<usize> {
        Some(EliasFano::estimate_heap_bytes(
            u64::from(stats.len),
            stats.span(),
        ))
    }

    fn len(&self) -> u32 {
        self.values.len() as u32
    }

    fn select(&self, i: u32) -> u32 {
        self.get(i as usize) as u32
    }

    fn rank(&self, w: u32) -> Option<u32> {
        self.position(u64::from(w)).map(|r| r as u32)
    }

    fn heap_bytes(&self) -> usize {
        EliasFano::heap_bytes(self)
    }

    fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        Box::new(EliasFano::iter(self).map(|w| w as u32))
    }
}
