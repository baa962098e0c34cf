//! Fixed-width bit-packed arrays: `width` bits an entry, the thesis's
//! "optimized canonical" layout, shared by the set and order layers.

use vers_vecs::BitVec;

use super::stats::bits_for;

#[derive(Clone, Debug)]
pub(crate) struct PackedArray {
    bits: BitVec,
    width: u32,
    len: u32,
}

impl PackedArray {
    /// Packs `values`, each below `bound`, in `bits_for(bound)` bits.
    pub(crate) fn new(values: impl ExactSizeIterator<Item = u32>, bound: u64) -> PackedArray {
        let width = bits_for(bound);
        let len = values.len() as u32;
        let mut bits = BitVec::with_capacity(len as usize * width as usize);
        for v in values {
            bits.append_bits_unchecked(u64::from(v), width as usize);
        }
        PackedArray { bits, width, len }
    }

    /// Heap bytes `new` takes for `len` values below `bound`.
    pub(crate) fn estimate_heap_bytes(len: u32, bound: u64) -> usize {
        (len as usize * bits_for(bound) as usize).div_ceil(64) * 8
    }

    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    #[inline]
    pub(crate) fn get(&self, i: u32) -> u32 {
        let w = self.width as usize;
        self.bits.get_bits_unchecked(i as usize * w, w) as u32
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.bits.heap_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_values_read_back() {
        let values: Vec<u32> = (0..1000u32)
            .map(|i| i.wrapping_mul(2_654_435_761) % 200_000)
            .collect();
        let packed = PackedArray::new(values.iter().copied(), 200_000);
        assert_eq!(packed.width, 18);
        assert!((0..1000).all(|i| packed.get(i) == values[i as usize]));
        assert_eq!(
            packed.heap_bytes(),
            PackedArray::estimate_heap_bytes(1000, 200_000)
        );
        let wide = PackedArray::new([u32::MAX, 0, 7].into_iter(), 1 << 32);
        assert_eq!((wide.get(0), wide.get(1), wide.get(2)), (u32::MAX, 0, 7));
    }
}
