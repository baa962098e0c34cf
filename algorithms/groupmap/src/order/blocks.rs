//! A permutation made of a few blocks of consecutive sorted indices, each
//! climbing or falling: MPI_Group_union and range_incl with negative strides
//! make these. O(blocks) space, a binary search a lookup.

use super::{OrderStats, Permutation};

#[derive(Clone, Debug)]
pub(crate) struct Blocks {
    /// First group rank of each block, increasing, with the total appended.
    group_starts: Vec<u32>,
    /// Sorted index of each block's first group rank.
    sorted_starts: Vec<u32>,
    falling: Vec<bool>,
    /// Block ids by their lowest sorted index, for pi^-1.
    by_sorted: Vec<u32>,
}

/// Group ranks where a new block begins: pi steps by anything but the
/// block's direction (+1 or -1, set by its first step).
pub(crate) fn block_starts(pi: &[u32]) -> impl Iterator<Item = usize> + '_ {
    let mut direction = 0i64;
    (0..pi.len()).filter(move |&g| {
        if g == 0 {
            return true;
        }
        let step = i64::from(pi[g]) - i64::from(pi[g - 1]);
        let continues = (step == 1 || step == -1) && (direction == 0 || direction == step);
        direction = if continues { step } else { 0 };
        !continues
    })
}

impl Blocks {
    /// The whole group in falling sorted order, in O(1) bytes.
    pub(crate) fn falling(len: u32) -> Blocks {
        Blocks {
            group_starts: vec![0, len],
            sorted_starts: vec![len.saturating_sub(1)],
            falling: vec![len > 1],
            by_sorted: vec![0],
        }
    }

    fn block_len(&self, k: usize) -> u32 {
        self.group_starts[k + 1] - self.group_starts[k]
    }

    fn lowest_sorted(&self, k: usize) -> u32 {
        if self.falling[k] {
            self.sorted_starts[k] + 1 - self.block_len(k)
        } else {
            self.sorted_starts[k]
        }
    }
}

impl Permutation for Blocks {
    fn build(pi: &[u32], stats: &OrderStats) -> Blocks {
        let n = stats.blocks as usize;
        let mut group_starts: Vec<u32> = Vec::with_capacity(n + 1);
        group_starts.extend(block_starts(pi).map(|g| g as u32));
        group_starts.push(pi.len() as u32);
        let sorted_starts: Vec<u32> = group_starts[..n].iter().map(|&g| pi[g as usize]).collect();
        let falling = (0..n)
            .map(|k| {
                let g = group_starts[k] as usize;
                g + 1 < group_starts[k + 1] as usize && pi[g + 1] < pi[g]
            })
            .collect();
        let mut blocks = Blocks {
            group_starts,
            sorted_starts,
            falling,
            by_sorted: Vec::new(),
        };
        let mut by_sorted: Vec<u32> = (0..n as u32).collect();
        by_sorted.sort_unstable_by_key(|&k| blocks.lowest_sorted(k as usize));
        blocks.by_sorted = by_sorted;
        blocks
    }

    fn estimate_heap_bytes(stats: &OrderStats) -> usize {
        13 * stats.blocks as usize + 4
    }

    fn to_sorted(&self, g: u32) -> u32 {
        let k = self.group_starts.partition_point(|&start| start <= g) - 1;
        let offset = g - self.group_starts[k];
        if self.falling[k] {
            self.sorted_starts[k] - offset
        } else {
            self.sorted_starts[k] + offset
        }
    }

    fn to_group(&self, s: u32) -> u32 {
        let j = self
            .by_sorted
            .partition_point(|&k| self.lowest_sorted(k as usize) <= s)
            - 1;
        let k = self.by_sorted[j] as usize;
        let offset = if self.falling[k] {
            self.sorted_starts[k] - s
        } else {
            s - self.sorted_starts[k]
        };
        self.group_starts[k] + offset
    }

    fn heap_bytes(&self) -> usize {
        4 * (self.group_starts.capacity()
            + self.sorted_starts.capacity()
            + self.by_sorted.capacity())
            + self.falling.capacity()
    }
}
