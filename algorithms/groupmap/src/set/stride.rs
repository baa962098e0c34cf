//! Range/stride representation: `first, first + stride, ...` in constant
//! space and time, detected automatically as MPICH and UCC do.

use super::SortedSet;
use crate::spans::Span;
use crate::stats::Stats;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stride {
    first: u32,
    stride: u32,
    len: u32,
}

impl Stride {
    /// `len` members from `first`, `stride` apart (`stride >= 1`), all
    /// below 2^32; the caller checks the last one fits.
    pub(crate) fn new(first: u32, stride: u32, len: u32) -> Stride {
        Stride {
            first,
            stride: stride.max(1),
            len,
        }
    }
}

impl SortedSet for Stride {
    fn build(members: &[u32], stats: &Stats) -> Option<Stride> {
        let stride = stats.stride?;
        Some(Stride::new(
            members.first().copied().unwrap_or(0),
            stride,
            stats.len,
        ))
    }

    fn fits(stats: &Stats) -> bool {
        stats.stride.is_some()
    }

    fn estimate_heap_bytes(_stats: &Stats) -> Option<usize> {
        Some(0)
    }

    fn len(&self) -> u32 {
        self.len
    }

    fn select(&self, i: u32) -> u32 {
        self.first + i * self.stride
    }

    fn rank(&self, w: u32) -> Option<u32> {
        let offset = w.checked_sub(self.first)?;
        let i = offset / self.stride;
        (offset % self.stride == 0 && i < self.len).then_some(i)
    }

    fn heap_bytes(&self) -> usize {
        0
    }

    fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        Box::new((0..self.len).map(|i| self.select(i)))
    }

    fn spans(&self) -> Box<dyn Iterator<Item = Span> + '_> {
        if self.stride == 1 || self.len <= 1 {
            let whole = (self.first, self.first + self.len.saturating_sub(1));
            Box::new((self.len > 0).then_some(whole).into_iter())
        } else {
            Box::new(self.iter().map(|w| (w, w)))
        }
    }
}
