//! pi and pi^-1 as two bit-packed arrays of `ceil(log2 n)` bits an entry:
//! O(1) both ways for twice the space of one array.

use super::{OrderStats, Permutation};
use crate::packed::PackedArray;

#[derive(Clone, Debug)]
pub(crate) struct PackedPermutation {
    pi: PackedArray,
    inverse: PackedArray,
}

impl Permutation for PackedPermutation {
    fn build(pi: &[u32], stats: &OrderStats) -> PackedPermutation {
        let mut inverse = vec![0u32; pi.len()];
        for (g, &s) in pi.iter().enumerate() {
            inverse[s as usize] = g as u32;
        }
        let bound = u64::from(stats.len);
        PackedPermutation {
            pi: PackedArray::new(pi.iter().copied(), bound),
            inverse: PackedArray::new(inverse.into_iter(), bound),
        }
    }

    fn estimate_heap_bytes(stats: &OrderStats) -> usize {
        2 * PackedArray::estimate_heap_bytes(stats.len, u64::from(stats.len))
    }

    fn to_sorted(&self, g: u32) -> u32 {
        self.pi.get(g)
    }

    fn to_group(&self, s: u32) -> u32 {
        self.inverse.get(s)
    }

    fn heap_bytes(&self) -> usize {
        self.pi.heap_bytes() + self.inverse.heap_bytes()
    }
}
