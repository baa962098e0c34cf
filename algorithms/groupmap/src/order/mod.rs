//! Order layer: the permutation between a group's order and the sorted order
//! of its members. `to_sorted(g)` is pi, `to_group(s)` is pi^-1; both are
//! sublinear in every representation.

mod blocks;
mod packed;
mod shortcuts;
mod wavelet;

pub(crate) use blocks::Blocks;
pub(crate) use packed::PackedPermutation;
pub(crate) use shortcuts::Shortcuts;
pub(crate) use wavelet::Wavelet;

/// One pass over pi (`pi[g]` = sorted index of group rank `g`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OrderStats {
    pub len: u32,
    /// Maximal blocks of group ranks whose sorted indices climb or fall by one.
    pub blocks: u32,
    /// Elements `Shortcuts` keeps a back pointer for.
    pub marks: u32,
}

impl OrderStats {
    pub(crate) fn of(pi: &[u32]) -> OrderStats {
        let blocks = blocks::block_starts(pi).count() as u32;
        // The identity has only cycles of one: nothing to mark.
        let identity = blocks <= 1 && pi.first().is_none_or(|&s| s == 0);
        let marks = match identity {
            true => 0,
            false => shortcuts::marks(pi).count_ones() as u32,
        };
        OrderStats {
            len: pi.len() as u32,
            blocks,
            marks,
        }
    }

    pub(crate) fn is_identity(&self, pi: &[u32]) -> bool {
        self.blocks <= 1 && pi.first().is_none_or(|&s| s == 0)
    }
}

/// What every permutation representation answers; callers keep `g` and `s`
/// below `len`.
pub(crate) trait Permutation {
    fn build(pi: &[u32], stats: &OrderStats) -> Self
    where
        Self: Sized;
    fn estimate_heap_bytes(stats: &OrderStats) -> usize;
    /// pi: the sorted index of group rank `g`.
    fn to_sorted(&self, g: u32) -> u32;
    /// pi^-1: the group rank of the member with sorted index `s`.
    fn to_group(&self, s: u32) -> u32;
    fn heap_bytes(&self) -> usize;
}
