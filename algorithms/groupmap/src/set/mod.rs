//! Set layer: the members of a group as a sorted set of world ranks, held in
//! one of several representations that all answer `select` (i-th smallest
//! member) and `rank` (position of a world rank among the members). `Plain`
//! alone keeps the group's order instead, as the array it replaces does.

mod bdd;
mod bitmap;
mod complement;
mod compressed;
mod elias_fano;
mod indexed;
mod packed;
mod plain;
mod runs;
mod stride;

pub(crate) use bdd::Bdd;
pub(crate) use bitmap::{rs_vec_bytes, Bitmap};
pub(crate) use complement::Complement;
pub(crate) use compressed::Compressed;
pub(crate) use elias_fano::EliasFano;
pub(crate) use indexed::Indexed;
pub(crate) use packed::Packed;
pub(crate) use plain::Plain;
pub(crate) use runs::Runs;
pub(crate) use stride::Stride;

use crate::spans::{coalesce, Span};

use super::stats::Stats;

/// What every set representation answers. Callers check bounds: `select`
/// is only called with `i < len()`, `rank` only with `w < world`.
pub(crate) trait SortedSet {
    /// Builds the representation of `members` (sorted, distinct, all below
    /// the world size), or `None` where it cannot hold them (a stride for a
    /// set that is not one, a BDD past its node budget).
    fn build(members: &[u32], stats: &Stats) -> Option<Self>
    where
        Self: Sized;
    /// Whether the statistics alone rule this representation out.
    fn fits(_stats: &Stats) -> bool {
        true
    }
    /// Heap bytes `build` would use, computed from the statistics alone, or
    /// `None` where only building tells.
    fn estimate_heap_bytes(stats: &Stats) -> Option<usize>;
    /// Number of members.
    fn len(&self) -> u32;
    /// The `i`-th smallest member.
    fn select(&self, i: u32) -> u32;
    /// The position of `w` among the members, if it is one.
    fn rank(&self, w: u32) -> Option<u32>;
    /// Bytes held on the heap.
    fn heap_bytes(&self) -> usize;
    /// The members in increasing order.
    fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        Box::new((0..self.len()).map(|i| self.select(i)))
    }
    /// The members as maximal spans of consecutive ranks, in increasing
    /// order (what group operations on huge groups work on).
    fn spans(&self) -> Box<dyn Iterator<Item = Span> + '_> {
        Box::new(coalesce(self.iter()))
    }
}

/// Boxed representations keep `GroupMap` a few words wide whatever it holds;
/// the box counts towards the heap bytes.
impl<T: SortedSet> SortedSet for Box<T> {
    fn build(members: &[u32], stats: &Stats) -> Option<Self> {
        T::build(members, stats).map(Box::new)
    }
    fn fits(stats: &Stats) -> bool {
        T::fits(stats)
    }
    fn estimate_heap_bytes(stats: &Stats) -> Option<usize> {
        T::estimate_heap_bytes(stats).map(|b| b + std::mem::size_of::<T>())
    }
    fn len(&self) -> u32 {
        T::len(self)
    }
    #[inline]
    fn select(&self, i: u32) -> u32 {
        T::select(self, i)
    }
    #[inline]
    fn rank(&self, w: u32) -> Option<u32> {
        T::rank(self, w)
    }
    fn heap_bytes(&self) -> usize {
        std::mem::size_of::<T>() + T::heap_bytes(self)
    }
    fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        T::iter(self)
    }
    fn spans(&self) -> Box<dyn Iterator<Item = Span> + '_> {
        T::spans(self)
    }
}
