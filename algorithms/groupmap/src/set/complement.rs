//! Dense groups by their holes: the ranks between the smallest and largest
//! member that are *not* members, Elias-Fano coded. A group holding most of
//! its span costs bits per hole instead of a bit per rank.

use super::elias_fano::EliasFano;
use super::SortedSet;
use crate::spans::Span;
use crate::stats::Stats;

/// Fixed-point steps `select` tries before it binary searches.
const FIXED_POINT_STEPS: usize = 6;

#[derive(Clone, Debug)]
pub(crate) struct Complement {
    min: u32,
    max: u32,
    len: u32,
    /// Offsets from `min` of the non-members inside the span.
    holes: EliasFano,
}

impl SortedSet for Complement {
    fn build(members: &[u32], stats: &Stats) -> Option<Complement> {
        let mut holes = Vec::with_capacity((stats.span() - u64::from(stats.len)) as usize);
        for pair in members.windows(2) {
            holes.extend(u64::from(pair[0] - stats.min) + 1..u64::from(pair[1] - stats.min));
        }
        Some(Complement {
            min: stats.min,
            max: stats.max,
            len: stats.len,
            holes: EliasFano::from_sorted(&holes),
        })
    }

    fn estimate_heap_bytes(stats: &Stats) -> Option<usize> {
        let holes = stats.span() - u64::from(stats.len);
        Some(EliasFano::estimate_heap_bytes(holes, stats.span()))
    }

    fn len(&self) -> u32 {
        self.len
    }

    fn select(&self, i: u32) -> u32 {
        // The member's offset x is the least fixed point of x = i + #holes <= x.
        // Iterating from x = i climbs to it; with few, scattered holes (what
        // this representation is chosen for) a handful of steps get there.
        let i = u64::from(i);
        let mut x = i;
        for _ in 0..FIXED_POINT_STEPS {
            let next = i + self.holes.count_below(x + 1) as u64;
            if next == x {
                return self.min + x as u32;
            }
            x = next;
        }
        // Clustered holes: binary search for the number of holes before the
        // member, from the count already passed. Hole j precedes member i
        // when `hole(j) - j <= i`, which grows with j.
        let (mut lo, mut hi) = ((x - i) as usize, self.holes.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.holes.get(mid) - mid as u64 <= i {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        self.min + (i + lo as u64) as u32
    }

    fn rank(&self, w: u32) -> Option<u32> {
        if self.len == 0 || w > self.max {
            return None;
        }
        let p = w.checked_sub(self.min)?;
        let below = self.holes.count_below(u64::from(p));
        let is_hole = below < self.holes.len() && self.holes.get(below) == u64::from(p);
        (!is_hole).then(|| p - below as u32)
    }

    fn heap_bytes(&self) -> usize {
        self.holes.heap_bytes()
    }

    fn spans(&self) -> Box<dyn Iterator<Item = Span> + '_> {
        // The gaps between holes, from `min` to `max`.
        let (min, max) = (u64::from(self.min), u64::from(self.max));
        let mut holes = self.holes.iter().map(move |h| min + h);
        let mut next = (self.len > 0).then_some(min);
        Box::new(std::iter::from_fn(move || loop {
            let first = next?;
            match holes.next() {
                Some(hole) => {
                    next = Some(hole + 1);
                    if hole > first {
                        return Some((first as u32, (hole - 1) as u32));
                    }
                }
                None => {
                    next = None;
                    return (first <= max).then_some((first as u32, max as u32));
                }
            }
        }))
    }

    fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        let mut holes = self.holes.iter().peekable();
        let span = if self.len == 0 {
            0
        } else {
            self.max - self.min + 1
        };
        Box::new(
            (0..span)
                .filter(move |&p| {
                    if holes.peek() == Some(&u64::from(p)) {
                        holes.next();
                        false
                    } else {
                        true
                    }
                })
                .map(move |p| self.min + p),
        )
    }
}
