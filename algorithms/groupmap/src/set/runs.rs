//! Ranges of ranges: the members as maximal intervals of consecutive ranks,
//! 8 bytes an interval and a binary search a lookup. It holds the unions of
//! blocks, rows and sub-meshes that group operations produce.

use super::SortedSet;
use crate::spans::Span;
use crate::stats::Stats;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Runs {
    /// First rank of each interval, increasing.
    starts: Vec<u32>,
    /// Members before each interval, with the total appended.
    before: Vec<u32>,
}

impl Runs {
    fn run_len(&self, k: usize) -> u32 {
        self.before[k + 1] - self.before[k]
    }

    /// The members of `spans` (increasing, disjoint, maximal), without
    /// listing them.
    pub(crate) fn from_spans(spans: &[Span]) -> Runs {
        let mut before = Vec::with_capacity(spans.len() + 1);
        let mut total = 0u32;
        for &(first, last) in spans {
            before.push(total);
            total += last - first + 1;
        }
        before.push(total);
        Runs {
            starts: spans.iter().map(|&(first, _)| first).collect(),
            before,
        }
    }
}

impl SortedSet for Runs {
    fn build(members: &[u32], stats: &Stats) -> Option<Runs> {
        let mut starts = Vec::with_capacity(stats.runs as usize);
        let mut before = Vec::with_capacity(stats.runs as usize + 1);
        for (i, &w) in members.iter().enumerate() {
            if i == 0 || members[i - 1] + 1 != w {
                starts.push(w);
                before.push(i as u32);
            }
        }
        before.push(stats.len);
        Some(Runs { starts, before })
    }

    fn estimate_heap_bytes(stats: &Stats) -> Option<usize> {
        Some(8 * stats.runs as usize + 4)
    }

    fn len(&self) -> u32 {
        *self.before.last().unwrap_or(&0)
    }

    fn select(&self, i: u32) -> u32 {
        let k = self.before[..self.starts.len()].partition_point(|&b| b <= i) - 1;
        self.starts[k] + (i - self.before[k])
    }

    fn rank(&self, w: u32) -> Option<u32> {
        let k = self.starts.partition_point(|&s| s <= w).checked_sub(1)?;
        let offset = w - self.starts[k];
        (offset < self.run_len(k)).then(|| self.before[k] + offset)
    }

    fn heap_bytes(&self) -> usize {
        4 * (self.starts.capacity() + self.before.capacity())
    }

    fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        Box::new(
            (0..self.starts.len())
                .flat_map(move |k| self.starts[k]..self.starts[k] + self.run_len(k)),
        )
    }

    fn spans(&self) -> Box<dyn Iterator<Item = Span> + '_> {
        Box::new(
            (0..self.starts.len())
                .map(move |k| (self.starts[k], self.starts[k] + self.run_len(k) - 1)),
        )
    }
}
