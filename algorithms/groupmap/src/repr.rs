//! The closed sets of set and order representations, dispatched by `match`
//! so a lookup costs no virtual call.

use std::fmt;
use std::mem::size_of;
use std::str::FromStr;

use super::order::{Blocks, OrderStats, PackedPermutation, Permutation, Shortcuts, Wavelet};
use super::set::{
    Bdd, Bitmap, Complement, Compressed, EliasFano, Indexed, Packed, Plain, Runs, SortedSet, Stride,
};
use super::stats::Stats;
use crate::listed::Listed;

/// How the members (as a sorted set) are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SetKind {
    /// `first + i * stride`: O(1) bytes and time.
    Stride,
    /// Maximal intervals of consecutive ranks.
    Runs,
    /// A bit per rank of the span, with rank/select directories.
    Bitmap,
    /// Elias-Fano gap encoding.
    EliasFano,
    /// Elias-Fano coding of the non-members inside the span.
    Complement,
    /// A reduced ordered BDD over the bits of a world rank.
    Bdd,
    /// `ceil(log2 span)` bits a member ("optimized canonical").
    Packed,
    /// A packed array beside a rank bitmap: O(1) both ways.
    Indexed,
    /// Delta-encoded blocks compressed with zstd.
    Compressed,
    /// The plain array, bit-packed: the members in group order (not
    /// sorted), so it pairs only with the `Sorted` order, the identity over
    /// it; `rank` scans. Space and Auto never pick a map larger than it.
    Plain,
}

/// How a group's order departs from the sorted order of its members.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OrderKind {
    /// Group order is the sorted order: no permutation is stored.
    Sorted,
    /// A few climbing or falling blocks of consecutive sorted indices.
    Blocks,
    /// pi and pi^-1 bit-packed.
    Packed,
    /// pi bit-packed, pi^-1 by walking its cycles with a back pointer
    /// every 16 elements: Packed's speed at `select`, a few times slower
    /// at `rank`, for little over half its bytes.
    Shortcuts,
    /// pi in a wavelet matrix.
    Wavelet,
}

impl SetKind {
    /// Every set representation, in the order strategies weigh them.
    pub const ALL: [SetKind; 10] = [
        SetKind::Stride,
        SetKind::Runs,
        SetKind::Bitmap,
        SetKind::EliasFano,
        SetKind::Complement,
        SetKind::Bdd,
        SetKind::Packed,
        SetKind::Indexed,
        SetKind::Compressed,
        SetKind::Plain,
    ];

    /// The name `Display` prints and `FromStr` parses (any case).
    pub fn name(self) -> &'static str {
        match self {
            SetKind::Stride => "Stride",
            SetKind::Runs => "Runs",
            SetKind::Bitmap => "Bitmap",
            SetKind::EliasFano => "EliasFano",
            SetKind::Complement => "Complement",
            SetKind::Bdd => "Bdd",
            SetKind::Packed => "Packed",
            SetKind::Indexed => "Indexed",
            SetKind::Compressed => "Compressed",
            SetKind::Plain => "Plain",
        }
    }
}

impl OrderKind {
    /// Every order representation.
    pub const ALL: [OrderKind; 5] = [
        OrderKind::Sorted,
        OrderKind::Blocks,
        OrderKind::Packed,
        OrderKind::Shortcuts,
        OrderKind::Wavelet,
    ];

    /// The name `Display` prints and `FromStr` parses (any case).
    pub fn name(self) -> &'static str {
        match self {
            OrderKind::Sorted => "Sorted",
            OrderKind::Blocks => "Blocks",
            OrderKind::Packed => "Packed",
            OrderKind::Shortcuts => "Shortcuts",
            OrderKind::Wavelet => "Wavelet",
        }
    }
}

macro_rules! named {
    ($kind:ty, $what:literal) => {
        impl fmt::Display for $kind {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $kind {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                Self::ALL
                    .into_iter()
                    .find(|k| k.name().eq_ignore_ascii_case(s))
                    .ok_or_else(|| {
                        let names: Vec<_> = Self::ALL.iter().map(|k| k.name()).collect();
                        format!("unknown {} {s:?}; known: {}", $what, names.join(", "))
                    })
            }
        }
    };
}
named!(SetKind, "set representation");
named!(OrderKind, "order representation");

#[derive(Clone, Debug)]
pub(crate) enum SetRepr {
    Stride(Stride),
    Runs(Box<Runs>),
    Bitmap(Box<Bitmap>),
    EliasFano(Box<EliasFano>),
    Complement(Box<Complement>),
    Bdd(Box<Bdd>),
    Packed(Box<Packed>),
    Indexed(Box<Indexed>),
    Compressed(Box<Compressed>),
    Plain(Box<Plain>),
}

macro_rules! each_set {
    ($value:expr, $s:ident => $body:expr) => {
        match $value {
            SetRepr::Stride($s) => $body,
            SetRepr::Runs($s) => $body,
            SetRepr::Bitmap($s) => $body,
            SetRepr::EliasFano($s) => $body,
            SetRepr::Complement($s) => $body,
            SetRepr::Bdd($s) => $body,
            SetRepr::Packed($s) => $body,
            SetRepr::Indexed($s) => $body,
            SetRepr::Compressed($s) => $body,
            SetRepr::Plain($s) => $body,
        }
    };
}

macro_rules! each_set_kind {
    ($kind:expr, $t:ident => $body:expr) => {
        match $kind {
            SetKind::Stride => {
                type $t = Stride;
                $body
            }
            SetKind::Runs => {
                type $t = Box<Runs>;
                $body
            }
            SetKind::Bitmap => {
                type $t = Box<Bitmap>;
                $body
            }
            SetKind::EliasFano => {
                type $t = Box<EliasFano>;
                $body
            }
            SetKind::Complement => {
                type $t = Box<Complement>;
                $body
            }
            SetKind::Bdd => {
                type $t = Box<Bdd>;
                $body
            }
            SetKind::Packed => {
                type $t = Box<Packed>;
                $body
            }
            SetKind::Indexed => {
                type $t = Box<Indexed>;
                $body
            }
            SetKind::Compressed => {
                type $t = Box<Compressed>;
                $body
            }
            SetKind::Plain => {
                type $t = Box<Plain>;
                $body
            }
        }
    };
}

impl SetRepr {
    pub(crate) fn stride(first: u32, stride: u32, len: u32) -> SetRepr {
        SetRepr::Stride(Stride::new(first, stride, len))
    }

    /// `kind` over `members`, or `None` where it cannot hold them.
    pub(crate) fn build(kind: SetKind, members: &[u32], stats: &Stats) -> Option<SetRepr> {
        each_set_kind!(kind, T => {
            if !<T as SortedSet>::fits(stats) {
                return None;
            }
            <T as SortedSet>::build(members, stats).map(IntoSetRepr::into_repr)
        })
    }

    /// Whether `kind` can hold a set with these statistics, as far as they tell.
    pub(crate) fn fits(kind: SetKind, stats: &Stats) -> bool {
        each_set_kind!(kind, T => <T as SortedSet>::fits(stats))
    }

    /// Heap bytes of `kind` over a set with these statistics, as a map
    /// keeps it (the plain array inline or in bytes of its own, unboxed).
    pub(crate) fn estimate_heap_bytes(kind: SetKind, stats: &Stats) -> Option<usize> {
        if kind == SetKind::Plain {
            return Some(Listed::estimate_heap_bytes(stats.len, stats.world));
        }
        each_set_kind!(kind, T => <T as SortedSet>::estimate_heap_bytes(stats))
    }

    pub(crate) fn kind(&self) -> SetKind {
        match self {
            SetRepr::Stride(_) => SetKind::Stride,
            SetRepr::Runs(_) => SetKind::Runs,
            SetRepr::Bitmap(_) => SetKind::Bitmap,
            SetRepr::EliasFano(_) => SetKind::EliasFano,
            SetRepr::Complement(_) => SetKind::Complement,
            SetRepr::Bdd(_) => SetKind::Bdd,
            SetRepr::Packed(_) => SetKind::Packed,
            SetRepr::Indexed(_) => SetKind::Indexed,
            SetRepr::Compressed(_) => SetKind::Compressed,
            SetRepr::Plain(_) => SetKind::Plain,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> u32 {
        each_set!(self, s => SortedSet::len(s))
    }

    /// The members as maximal spans, increasing; not for the plain array,
    /// which holds group order.
    pub(crate) fn spans(&self) -> Box<dyn Iterator<Item = crate::spans::Span> + '_> {
        each_set!(self, s => SortedSet::spans(s))
    }

    #[inline]
    pub(crate) fn select(&self, i: u32) -> u32 {
        each_set!(self, s => SortedSet::select(s, i))
    }

    #[inline]
    pub(crate) fn rank(&self, w: u32) -> Option<u32> {
        each_set!(self, s => SortedSet::rank(s, w))
    }

    /// Heap bytes as a map keeps this set (see `estimate_heap_bytes`).
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            SetRepr::Plain(plain) => Listed::estimate_heap_bytes(plain.len(), plain.world()),
            _ => each_set!(self, s => SortedSet::heap_bytes(s)),
        }
    }

    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        each_set!(self, s => SortedSet::iter(s))
    }
}

trait IntoSetRepr {
    fn into_repr(self) -> SetRepr;
}

macro_rules! into_set_repr {
    ($($t:ident),*) => {
        $(impl IntoSetRepr for $t {
            fn into_repr(self) -> SetRepr {
                SetRepr::$t(self)
            }
        })*
    };
    (boxed $($t:ident),*) => {
        $(impl IntoSetRepr for Box<$t> {
            fn into_repr(self) -> SetRepr {
                SetRepr::$t(self)
            }
        })*
    };
}
into_set_repr!(Stride);
into_set_repr!(boxed Runs, Bitmap, EliasFano, Complement, Bdd, Packed, Indexed, Compressed, Plain);

#[derive(Clone, Debug)]
pub(crate) enum OrderRepr {
    Sorted,
    Blocks(Box<Blocks>),
    Packed(Box<PackedPermutation>),
    Shortcuts(Box<Shortcuts>),
    Wavelet(Box<Wavelet>),
}

impl OrderRepr {
    /// `kind` over pi, or `None` where `Sorted` is asked of a permuted order.
    pub(crate) fn build(kind: OrderKind, pi: &[u32], stats: &OrderStats) -> Option<OrderRepr> {
        Some(match kind {
            OrderKind::Sorted => {
                if !stats.is_identity(pi) {
                    return None;
                }
                OrderRepr::Sorted
            }
            OrderKind::Blocks => OrderRepr::Blocks(Box::new(Blocks::build(pi, stats))),
            OrderKind::Packed => OrderRepr::Packed(Box::new(PackedPermutation::build(pi, stats))),
            OrderKind::Shortcuts => OrderRepr::Shortcuts(Box::new(Shortcuts::build(pi, stats))),
            OrderKind::Wavelet => OrderRepr::Wavelet(Box::new(Wavelet::build(pi, stats))),
        })
    }

    pub(crate) fn estimate_heap_bytes(kind: OrderKind, stats: &OrderStats) -> usize {
        match kind {
            OrderKind::Sorted => 0,
            OrderKind::Blocks => size_of::<Blocks>() + Blocks::estimate_heap_bytes(stats),
            OrderKind::Packed => {
                size_of::<PackedPermutation>() + PackedPermutation::estimate_heap_bytes(stats)
            }
            OrderKind::Shortcuts => size_of::<Shortcuts>() + Shortcuts::estimate_heap_bytes(stats),
            OrderKind::Wavelet => size_of::<Wavelet>() + Wavelet::estimate_heap_bytes(stats),
        }
    }

    pub(crate) fn kind(&self) -> OrderKind {
        match self {
            OrderRepr::Sorted => OrderKind::Sorted,
            OrderRepr::Blocks(_) => OrderKind::Blocks,
            OrderRepr::Packed(_) => OrderKind::Packed,
            OrderRepr::Shortcuts(_) => OrderKind::Shortcuts,
            OrderRepr::Wavelet(_) => OrderKind::Wavelet,
        }
    }

    #[inline]
    pub(crate) fn to_sorted(&self, g: u32) -> u32 {
        match self {
            OrderRepr::Sorted => g,
            OrderRepr::Blocks(p) => p.to_sorted(g),
            OrderRepr::Packed(p) => p.to_sorted(g),
            OrderRepr::Shortcuts(p) => p.to_sorted(g),
            OrderRepr::Wavelet(p) => p.to_sorted(g),
        }
    }

    #[inline]
    pub(crate) fn to_group(&self, s: u32) -> u32 {
        match self {
            OrderRepr::Sorted => s,
            OrderRepr::Blocks(p) => p.to_group(s),
            OrderRepr::Packed(p) => p.to_group(s),
            OrderRepr::Shortcuts(p) => p.to_group(s),
            OrderRepr::Wavelet(p) => p.to_group(s),
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            OrderRepr::Sorted => 0,
            OrderRepr::Blocks(p) => size_of::<Blocks>() + p.heap_bytes(),
            OrderRepr::Packed(p) => size_of::<PackedPermutation>() + p.heap_bytes(),
            OrderRepr::Shortcuts(p) => size_of::<Shortcuts>() + p.heap_bytes(),
            OrderRepr::Wavelet(p) => size_of::<Wavelet>() + p.heap_bytes(),
        }
    }
}
