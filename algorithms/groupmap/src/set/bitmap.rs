//! Bitmap with rank/select: one bit per rank between the smallest and the
//! largest member, with vers' popcount directories for O(1) lookups. Best
//! for dense groups.

use vers_vecs::{BitVec, RsVec};

use super::SortedSet;
use crate::stats::Stats;

#[derive(Clone, Debug)]
pub(crate) struct Bitmap {
    min: u32,
    bits: RsVec,
}

/// Bytes of vers' `RsVec` over `len` bits with `ones` set: the words, a
/// 16-bit count per 512 bits, a word per 8192 bits, and 16-byte select
/// samples (each holds a one and a zero position) per 8192 of the commoner
/// bit plus two sentinels.
pub(crate) fn rs_vec_bytes(len: u64, ones: u64) -> usize {
    let words = len.div_ceil(64);
    let blocks = len.div_ceil(512).max(1);
    let supers = len.div_ceil(8192).max(1);
    let samples = 2 + ones.max(len - ones) / 8192;
    (words * 8 + blocks * 2 + supers * 8 + samples * 16) as usize
}

/// The members as bits over their span, starting at `min`.
pub(crate) fn span_bits(members: &[u32], min: u32, span: u64) -> RsVec {
    let mut bits = BitVec::from_zeros(span as usize);
    for &w in members {
        bits.flip_bit_unchecked((w - min) as usize);
    }
    RsVec::from_bit_vec(bits)
}

impl SortedSet for Bitmap {
    fn build(members: &[u32], stats: &Stats) -> Option<Bitmap> {
        Some(Bitmap {
            min: stats.min,
            bits: span_bits(members, stats.min, stats.span()),
        })
    }

    fn estimate_heap_bytes(stats: &Stats) -> Option<usize> {
        Some(rs_vec_bytes(stats.span(), u64::from(stats.len)))
    }

    fn len(&self) -> u32 {
        self.bits.rank1(self.bits.len()) as u32
    }

    fn select(&self, i: u32) -> u32 {
        self.min + self.bits.select1(i as usize) as u32
    }

    fn rank(&self, w: u32) -> Option<u32> {
        let p = w.checked_sub(self.min)? as usize;
        (self.bits.get(p)? == 1).then(|| self.bits.rank1(p) as u32)
    }

    fn heap_bytes(&self) -> usize {
        self.bits.heap_size()
    }

    fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        Box::new(
            self.bits
                .iter()
                .enumerate()
                .filter(|&(_, b)| b == 1)
                .map(|(p, _)| self.min + p as u32),
        )
    }
}
