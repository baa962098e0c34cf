//! The plain array as a map keeps it: the world ranks in group order,
//! `bits_for(world)` bits each, packed in bytes, inside the map itself up to
//! 38 bytes (19 ranks of a world of 65,536) and on the heap beyond, so that
//! a small group costs the map's 64 bytes and no more.

use crate::stats::bits_for;

/// Packed bytes a map holds inline.
pub(crate) const INLINE_BYTES: usize = 38;

#[derive(Clone, Debug)]
pub(crate) enum Listed {
    Inline { len: u8, bytes: [u8; INLINE_BYTES] },
    Heap { len: u32, bytes: Box<[u8]> },
}

impl Listed {
    /// `ranks`, each below `world`, in their order.
    pub(crate) fn new(ranks: impl ExactSizeIterator<Item = u32>, world: u32) -> Listed {
        let width = width(world);
        let len = ranks.len();
        let mut listed = match u8::try_from(len) {
            Ok(short) if packed_bytes(len, width) <= INLINE_BYTES => Listed::Inline {
                len: short,
                bytes: [0; INLINE_BYTES],
            },
            _ => Listed::Heap {
                len: len as u32,
                bytes: vec![0; packed_bytes(len, width)].into_boxed_slice(),
            },
        };
        let bytes = match &mut listed {
            Listed::Inline { bytes, .. } => &mut bytes[..],
            Listed::Heap { bytes, .. } => &mut bytes[..],
        };
        for (i, rank) in ranks.enumerate() {
            put(bytes, i * width, width, rank);
        }
        listed
    }

    /// Heap bytes `new` takes for `len` ranks of a world of `world`.
    pub(crate) fn estimate_heap_bytes(len: u32, world: u32) -> usize {
        let bytes = packed_bytes(len as usize, width(world));
        if len <= u32::from(u8::MAX) && bytes <= INLINE_BYTES {
            0
        } else {
            bytes
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Listed::Inline { bytes, .. } => bytes,
            Listed::Heap { bytes, .. } => bytes,
        }
    }

    pub(crate) fn len(&self) -> u32 {
        match self {
            Listed::Inline { len, .. } => u32::from(*len),
            Listed::Heap { len, .. } => *len,
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Listed::Inline { .. } => 0,
            Listed::Heap { bytes, .. } => bytes.len(),
        }
    }

    /// The rank at group rank `g` (below `len`) of a world of `world`.
    #[inline]
    pub(crate) fn get(&self, g: u32, world: u32) -> u32 {
        let width = width(world);
        get(self.bytes(), g as usize * width, width)
    }

    /// The group rank of `w`: a scan, as MPICH's and Open MPI's arrays
    /// answer it, one 8-byte load a member where 8 bytes are left.
    pub(crate) fn position(&self, w: u32, world: u32) -> Option<u32> {
        let width = width(world);
        let bytes = self.bytes();
        let (len, wanted) = (self.len() as usize, u64::from(w));
        let mask = (1u64 << width) - 1;
        let loadable = match bytes.len().checked_sub(8) {
            Some(last_load) => (last_load * 8 / width + 1).min(len),
            None => 0,
        };
        let found = (0..loadable).find(|&g| {
            let at = g * width;
            let word = u64::from_le_bytes(bytes[at / 8..at / 8 + 8].try_into().expect("8 bytes"));
            (word >> (at % 8)) & mask == wanted
        });
        found
            .or_else(|| (loadable..len).find(|&g| get(bytes, g * width, width) == w))
            .map(|g| g as u32)
    }

    /// The ranks in group order, decoded in one pass: what the scan of
    /// `position` runs on.
    pub(crate) fn iter(&self, world: u32) -> impl Iterator<Item = u32> + '_ {
        let width = width(world);
        let mask = (1u64 << width) - 1;
        let mut bytes = self.bytes().iter();
        // Bits read ahead, lowest first: fewer than `width` + 8 of them.
        let (mut ahead, mut count) = (0u64, 0usize);
        (0..self.len()).map(move |_| {
            while count < width {
                ahead |= u64::from(*bytes.next().expect("len * width bits")) << count;
                count += 8;
            }
            let rank = (ahead & mask) as u32;
            ahead >>= width;
            count -= width;
            rank
        })
    }
}

fn width(world: u32) -> usize {
    bits_for(u64::from(world)) as usize
}

fn packed_bytes(len: usize, width: usize) -> usize {
    (len * width).div_ceil(8)
}

/// The `width`-bit value at bit `at` (little-endian bit order).
fn get(bytes: &[u8], at: usize, width: usize) -> u32 {
    let span = &bytes[at / 8..(at + width).div_ceil(8)];
    let value = span
        .iter()
        .rev()
        .fold(0u64, |v, &b| (v << 8) | u64::from(b));
    ((value >> (at % 8)) & ((1u64 << width) - 1)) as u32
}

fn put(bytes: &mut [u8], at: usize, width: usize, value: u32) {
    for bit in 0..width {
        if value >> bit & 1 == 1 {
            bytes[(at + bit) / 8] |= 1 << ((at + bit) % 8);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length around the inline limit, in worlds of every width,
    /// reads back as written, and inline exactly when it fits.
    #[test]
    fn ranks_read_back_inline_or_on_the_heap() {
        for world in [1u32, 2, 3, 255, 2048, 65_536, 65_537, 1 << 31, u32::MAX] {
            for len in [0u32, 1, 9, 10, 18, 19, 20, 37, 38, 39, 255, 256, 304, 1000] {
                let ranks: Vec<u32> = (0..len)
                    .map(|i| (u64::from(i).wrapping_mul(0x9e37_79b9) % u64::from(world)) as u32)
                    .collect();
                let listed = Listed::new(ranks.iter().copied(), world);
                assert_eq!(listed.len(), len);
                assert_eq!(
                    listed.iter(world).collect::<Vec<_>>(),
                    ranks,
                    "world {world}"
                );
                let first = |r: u32| ranks.iter().position(|&x| x == r).map(|g| g as u32);
                for (g, &r) in ranks.iter().enumerate() {
                    assert_eq!(listed.get(g as u32, world), r);
                    assert_eq!(listed.position(r, world), first(r));
                }
                for absent in [world - 1, world / 2, 0] {
                    assert_eq!(listed.position(absent, world), first(absent));
                }
                assert_eq!(listed.heap_bytes(), Listed::estimate_heap_bytes(len, world));
                let fits = len <= 255 && (len as usize * width(world)).div_ceil(8) <= 38;
                assert_eq!(matches!(listed, Listed::Inline { .. }), fits);
            }
        }
        assert_eq!(width(65_536), 16);
        assert_eq!(Listed::new(0..19, 65_536).heap_bytes(), 0);
    }
}
