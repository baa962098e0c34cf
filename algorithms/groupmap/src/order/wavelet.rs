//! pi as a wavelet matrix (vers): one `ceil(log2 n)`-bit symbol an entry
//! plus rank directories; pi is an access and pi^-1 a select of the symbol,
//! both O(log n). The smallest permutation here, near log2(n!) bits.

use vers_vecs::WaveletMatrix;

use super::{OrderStats, Permutation};
use crate::set::rs_vec_bytes;
use crate::stats::bits_for;

#[derive(Clone, Debug)]
pub(crate) struct Wavelet {
    pi: WaveletMatrix,
}

impl Permutation for Wavelet {
    fn build(pi: &[u32], stats: &OrderStats) -> Wavelet {
        let wide: Vec<u64> = pi.iter().map(|&s| u64::from(s)).collect();
        let width = bits_for(u64::from(stats.len)) as u16;
        Wavelet {
            pi: WaveletMatrix::from_slice(&wide, width),
        }
    }

    fn estimate_heap_bytes(stats: &OrderStats) -> usize {
        let len = u64::from(stats.len);
        let half = len / 2;
        bits_for(len) as usize * rs_vec_bytes(len, half)
    }

    fn to_sorted(&self, g: u32) -> u32 {
        self.pi.get_u64_unchecked(g as usize) as u32
    }

    fn to_group(&self, s: u32) -> u32 {
        self.pi.select_u64_unchecked(0, u64::from(s)) as u32
    }

    fn heap_bytes(&self) -> usize {
        self.pi.heap_size()
    }
}
