//! A group's members as a reduced ordered BDD over the bits of a world rank,
//! the compact form for structured groups seeded by Taheri's thesis
//! "Scalability of Communicators in MPI", §4.1.2. Each node also counts the
//! members below its 0-branch, so `select` and `rank` follow a single
//! root-to-terminal path, O(log world), instead of scanning the BDD's paths.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use super::SortedSet;
use crate::stats::{bits_for, Stats};

/// Terminal ids; both sit at `var == bits`, below the last variable.
const FALSE: u32 = 0;
const TRUE: u32 = 1;

/// A node, 16 bytes: 16-byte aligned nodes never straddle a cache line, so a
/// lookup costs at most one miss per level.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Node {
    lo: u32,
    hi: u32,
    /// Members of the 0-branch, counted over variables `var + 1..bits`.
    /// Storing the 0-branch count rather than the node's own lets a lookup
    /// decide each level from this node alone; the 1-branch count is what
    /// is left of the running total.
    zeros: u32,
    /// Variable tested here: 0 is the rank's most significant bit.
    var: u8,
}

/// Members sorted in a world of ranks below `2^bits`, as a reduced ordered
/// BDD whose function is true exactly on the members.
#[derive(Clone, Debug)]
pub(crate) struct Bdd {
    /// `nodes[0]` and `nodes[1]` are the FALSE and TRUE terminals.
    nodes: Vec<Node>,
    root: u32,
    len: u32,
    bits: u8,
}

/// Bottom-up construction state: the nodes so far and the unique table that
/// makes equal subfunctions one node.
struct Builder {
    bits: u32,
    nodes: Vec<Node>,
    unique: FxHashMap<(u8, u32, u32), u32>,
    max_nodes: usize,
}

impl Builder {
    /// The node for the subcube of ranks `base..base + 2^(bits - level)`,
    /// where `members` are exactly the members inside it; `None` once the
    /// node budget is spent. Only cubes that are partly covered recurse, at
    /// most two per run of consecutive members at each level, so the work
    /// is O(runs · bits) binary searches rather than one OR per member.
    fn cube(&mut self, level: u32, base: u64, members: &[u32]) -> Option<u32> {
        if members.is_empty() {
            return Some(FALSE);
        }
        // Members are distinct, so as many as the cube has ranks cover it.
        if level >= self.bits || members.len() as u64 >= 1u64 << (self.bits - level) {
            return Some(TRUE);
        }
        let half = 1u64 << (self.bits - level - 1);
        let mid = base + half;
        let (below, above) = members.split_at(members.partition_point(|&m| u64::from(m) < mid));
        // Halves holding the same pattern make this level a don't-care.
        // Seeing that before building the upper half keeps periodic sets
        // (evens, matrix columns) from visiting every subcube.
        if shifted_copy(below, above, half) {
            return self.cube(level + 1, base, below);
        }
        let lo = self.cube(level + 1, base, below)?;
        let hi = self.cube(level + 1, mid, above)?;
        if lo == hi {
            // The variable does not matter here: the level is skipped.
            return Some(lo);
        }
        match self.unique.entry((level as u8, lo, hi)) {
            Entry::Occupied(e) => Some(*e.get()),
            Entry::Vacant(e) => {
                if self.nodes.len() >= self.max_nodes {
                    return None;
                }
                let id = self.nodes.len() as u32;
                let zeros = below.len() as u32;
                self.nodes.push(Node {
                    lo,
                    hi,
                    zeros,
                    var: level as u8,
                });
                Some(*e.insert(id))
            }
        }
    }
}

/// Whether `upper` is `lower` shifted up by `shift`. Compares run by run,
/// finding each run's end by galloping, so the cost follows the number of
/// runs rather than of members: matching end points of a run of `lower`
/// make the same stretch of `upper` a run too, members being distinct.
fn shifted_copy(lower: &[u32], upper: &[u32], shift: u64) -> bool {
    let matches = |k: usize| u64::from(upper[k]).wrapping_sub(u64::from(lower[k])) == shift;
    if lower.len() != upper.len() {
        return false;
    }
    let mut start = 0;
    while start < lower.len() {
        if !matches(start) {
            return false;
        }
        let first = u64::from(lower[start]);
        let in_run = |k: usize| u64::from(lower[k]).wrapping_sub(first) == (k - start) as u64;
        // `last` is in the run; `past` is past its end or the slice's.
        let (mut last, mut step) = (start, 1);
        let mut past = loop {
            let probe = last + step;
            if probe >= lower.len() || !in_run(probe) {
                break probe.min(lower.len());
            }
            last = probe;
            step *= 2;
        };
        while past - last > 1 {
            let probe = last + (past - last) / 2;
            if in_run(probe) {
                last = probe;
            } else {
                past = probe;
            }
        }
        if !matches(last) {
            return false;
        }
        start = last + 1;
    }
    true
}

impl Bdd {
    /// Builds the BDD unless its nodes would take more than `max_bytes`.
    fn build_within(members: &[u32], world: u32, max_bytes: usize) -> Option<Bdd> {
        let bits = bits_for(u64::from(world));
        let len = u32::try_from(members.len()).ok()?;
        let node_bytes = std::mem::size_of::<Node>();
        let max_nodes = (max_bytes / node_bytes).min(u32::MAX as usize);
        if max_nodes < 2 {
            return None;
        }
        let terminal = Node {
            lo: FALSE,
            hi: FALSE,
            zeros: 0,
            var: bits as u8,
        };
        let mut builder = Builder {
            bits,
            nodes: vec![terminal; 2],
            unique: FxHashMap::default(),
            max_nodes,
        };
        let root = builder.cube(0, 0, members)?;
        // The unique table is only needed while building.
        let mut nodes = builder.nodes;
        nodes.shrink_to_fit();
        if nodes.capacity() * node_bytes > max_bytes {
            return None;
        }
        Some(Bdd {
            nodes,
            root,
            len,
            bits: bits as u8,
        })
    }
}

impl SortedSet for Bdd {
    /// Refuses a BDD larger than the plain member array (4 bytes a member)
    /// plus 256 bytes: past that it saves nothing, and, like the thesis's
    /// node limit, this keeps unstructured sets from building huge BDDs.
    fn build(members: &[u32], stats: &Stats) -> Option<Bdd> {
        let max_bytes = members.len().saturating_mul(4).saturating_add(256);
        Bdd::build_within(members, stats.world, max_bytes)
    }

    fn estimate_heap_bytes(_stats: &Stats) -> Option<usize> {
        None
    }

    fn len(&self) -> u32 {
        self.len
    }

    fn select(&self, i: u32) -> u32 {
        let bits = u32::from(self.bits);
        let mut i = u64::from(i);
        // Members in the current subcube, over the levels from `level` down.
        let mut total = u64::from(self.len);
        let mut level = 0;
        let mut node = self.root;
        let mut w = 0u64;
        loop {
            if node == FALSE {
                // Only reached for `i >= len()`, outside the contract.
                return w as u32;
            }
            let n = self.nodes[node as usize];
            let var = u32::from(n.var);
            // Levels skipped above this node are don't-cares: the subcube
            // holds 2^skip equal copies, and the high digits of i pick one.
            let skip = var - level;
            if skip > 0 {
                let chunk = (total >> skip).max(1);
                let copy = i / chunk;
                i -= copy * chunk;
                w |= copy << (bits - var);
                total = chunk;
            }
            if node == TRUE {
                return w as u32;
            }
            let zeros = u64::from(n.zeros);
            if i < zeros {
                total = zeros;
                node = n.lo;
            } else {
                i -= zeros;
                total -= zeros;
                w |= 1 << (bits - 1 - var);
                node = n.hi;
            }
            level = var + 1;
        }
    }

    fn rank(&self, w: u32) -> Option<u32> {
        let bits = u32::from(self.bits);
        let w = u64::from(w);
        if w >> bits != 0 {
            return None;
        }
        let mut pos = 0u64;
        let mut total = u64::from(self.len);
        let mut level = 0;
        let mut node = self.root;
        loop {
            if node == FALSE {
                return None;
            }
            let n = self.nodes[node as usize];
            let var = u32::from(n.var);
            // Each skipped level is a don't-care: w's bits there say how
            // many whole copies of the node's subfunction come before it.
            let skip = var - level;
            if skip > 0 {
                let chunk = total >> skip;
                let copy = (w >> (bits - var)) & ((1 << skip) - 1);
                pos += copy * chunk;
                total = chunk;
            }
            if node == TRUE {
                return Some(pos as u32);
            }
            let zeros = u64::from(n.zeros);
            if (w >> (bits - 1 - var)) & 1 == 1 {
                pos += zeros;
                total -= zeros;
                node = n.hi;
            } else {
                total = zeros;
                node = n.lo;
            }
            level = var + 1;
        }
    }

    fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
    }

    fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        let mut stack = Vec::with_capacity(2 * usize::from(self.bits) + 2);
        if self.root != FALSE {
            stack.push((self.root, 0, 0));
        }
        Box::new(Iter {
            bdd: self,
            stack,
            next: 0,
            end: 0,
            word: 0,
            word_base: 0,
            left: self.len as usize,
        })
    }
}

/// Depth-first enumeration, 0-branches first. A TRUE terminal yields its
/// whole subcube as one run, and a subcube of at most 64 ranks is turned
/// into a bit mask in one short descent, so members cost O(1) amortised
/// unless they are isolated; the stack stays O(bits) deep because
/// don't-care levels above that are split one at a time.
struct Iter<'a> {
    bdd: &'a Bdd,
    /// Subcubes still to enumerate, the next on top: (node, level, base).
    stack: Vec<(u32, u32, u64)>,
    /// The run of consecutive members being yielded.
    next: u64,
    end: u64,
    /// The members of a small subcube at `word_base`, as set bits.
    word: u64,
    word_base: u64,
    left: usize,
}

/// Subcubes of at most `2^MASK_LEVELS` ranks are enumerated as a `u64`.
const MASK_LEVELS: u32 = 6;

impl Iter<'_> {
    /// The members of `node`'s subfunction in a subcube of `2^levels` ranks
    /// (`levels <= MASK_LEVELS`), as a bit mask.
    fn mask(&self, node: u32, level: u32, levels: u32) -> u64 {
        match node {
            FALSE => 0,
            TRUE => u64::MAX >> (64 - (1u32 << levels)),
            _ => {
                let n = self.bdd.nodes[node as usize];
                let half = 1u32 << (levels - 1);
                let (lo, hi) = if level < u32::from(n.var) {
                    let m = self.mask(node, level + 1, levels - 1);
                    (m, m)
                } else {
                    (
                        self.mask(n.lo, level + 1, levels - 1),
                        self.mask(n.hi, level + 1, levels - 1),
                    )
                };
                lo | hi << half
            }
        }
    }
}

impl Iterator for Iter<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let bits = u32::from(self.bdd.bits);
        loop {
            if self.next < self.end {
                let w = self.next;
                self.next += 1;
                self.left = self.left.saturating_sub(1);
                return Some(w as u32);
            }
            if self.word != 0 {
                let w = self.word_base + u64::from(self.word.trailing_zeros());
                self.word &= self.word - 1;
                self.left = self.left.saturating_sub(1);
                return Some(w as u32);
            }
            let (node, level, base) = self.stack.pop()?;
            let levels = bits - level;
            if node == TRUE {
                self.next = base;
                self.end = base + (1 << levels);
                continue;
            }
            if levels <= MASK_LEVELS {
                self.word = self.mask(node, level, levels);
                self.word_base = base;
                continue;
            }
            let n = self.bdd.nodes[node as usize];
            let var = u32::from(n.var);
            if level < var {
                // Don't-care level: both halves hold the same subfunction.
                let half = 1u64 << (levels - 1);
                self.stack.push((node, level + 1, base + half));
                self.stack.push((node, level + 1, base));
            } else {
                let half = 1u64 << (bits - var - 1);
                if n.hi != FALSE {
                    self.stack.push((n.hi, var + 1, base + half));
                }
                if n.lo != FALSE {
                    self.stack.push((n.lo, var + 1, base));
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Each rank of `0..world` is a member with probability `density`.
    fn random_set(world: u32, density: f64, seed: u64) -> Vec<u32> {
        let mut state = seed;
        let cut = (density * (u64::MAX as f64)) as u64;
        (0..world).filter(|_| splitmix(&mut state) < cut).collect()
    }

    /// Builds without a budget and compares every query with the plain
    /// sorted array; also checks the public build's budget decision.
    fn check(members: &[u32], world: u32) -> Bdd {
        let bdd = Bdd::build_within(members, world, usize::MAX).expect("unbudgeted build");
        assert_eq!(bdd.len() as usize, members.len());
        for (i, &m) in members.iter().enumerate() {
            assert_eq!(bdd.select(i as u32), m, "select({i})");
            assert_eq!(bdd.rank(m), Some(i as u32), "rank({m})");
        }
        let expect = |w: u32| members.binary_search(&w).ok().map(|i| i as u32);
        if world <= 1 << 17 {
            for w in 0..world {
                assert_eq!(bdd.rank(w), expect(w), "rank({w})");
            }
        } else {
            let mut probes = vec![0, world - 1];
            for &m in members.iter().step_by((members.len() / 4096).max(1)) {
                probes.extend([m.saturating_sub(1), m.saturating_add(1).min(world - 1)]);
            }
            probes.extend((0..4096u64).map(|k| (k * u64::from(world) / 4096) as u32));
            for w in probes {
                assert_eq!(bdd.rank(w), expect(w), "rank({w})");
            }
        }
        assert!(bdd.iter().eq(members.iter().copied()), "iter");
        assert_eq!(bdd.iter().size_hint(), (members.len(), Some(members.len())));
        let budget = members.len() * 4 + 256;
        let built = Bdd::build(members, &Stats::of(members, world));
        assert_eq!(
            built.is_some(),
            bdd.heap_bytes() <= budget,
            "budget decision"
        );
        if let Some(b) = built {
            assert_eq!(b.nodes, bdd.nodes);
            assert_eq!(b.heap_bytes(), b.nodes.len() * 16);
        }
        bdd
    }

    #[test]
    fn node_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Node>(), 16);
    }

    #[test]
    fn empty_sets() {
        for world in [1, 2, 7, 1 << 20, 1_000_003, u32::MAX] {
            let bdd = check(&[], world);
            assert_eq!(bdd.nodes.len(), 2);
            assert!(Bdd::build(&[], &Stats::of(&[], world)).is_some());
        }
    }

    #[test]
    fn single_members() {
        check(&[0], 1);
        check(&[0], 2);
        check(&[1], 2);
        for m in [0, 4, 9] {
            check(&[m], 10);
        }
        check(&[12345], 1 << 20);
        check(&[0], u32::MAX);
        check(&[u32::MAX - 1], u32::MAX);
    }

    #[test]
    fn full_worlds() {
        for world in [1, 2, 3, 1 << 16, 200_000, 1 << 20] {
            let all: Vec<u32> = (0..world).collect();
            let bdd = check(&all, world);
            assert!(bdd.nodes.len() <= 2 + 20);
            if world.is_power_of_two() && world > 1 {
                assert_eq!(bdd.root, TRUE);
            }
        }
    }

    #[test]
    fn evens_odds_and_multiples_of_three() {
        for world in [1 << 20, 1001, 2] {
            let evens: Vec<u32> = (0..world).step_by(2).collect();
            let odds: Vec<u32> = (1..world).step_by(2).collect();
            assert!(check(&evens, world).nodes.len() <= 2 + 2 * 20);
            assert!(check(&odds, world).nodes.len() <= 2 + 2 * 20);
        }
        let threes: Vec<u32> = (0..100_000).step_by(3).collect();
        check(&threes, 100_000);
    }

    #[test]
    fn matrix_rows_and_columns_are_tiny() {
        let n = 1024u32;
        for k in [0, 1, 517, 1023] {
            let row: Vec<u32> = (k * n..(k + 1) * n).collect();
            let col: Vec<u32> = (0..n).map(|r| r * n + k).collect();
            assert!(check(&row, n * n).nodes.len() <= 32);
            assert!(check(&col, n * n).nodes.len() <= 32);
        }
    }

    #[test]
    fn mesh_faces() {
        // Rank of (x, y, z) in a row-major 128 x 128 x 64 mesh.
        let (nx, ny, nz) = (128u32, 128u32, 64u32);
        let at = |x: u32, y: u32, z: u32| (x * ny + y) * nz + z;
        let world = nx * ny * nz;
        let mut faces: Vec<Vec<u32>> = Vec::new();
        for x in [0, 77] {
            faces.push(
                (0..ny)
                    .flat_map(|y| (0..nz).map(move |z| at(x, y, z)))
                    .collect(),
            );
        }
        for y in [0, 127] {
            faces.push(
                (0..nx)
                    .flat_map(|x| (0..nz).map(move |z| at(x, y, z)))
                    .collect(),
            );
        }
        for z in [0, 63] {
            faces.push(
                (0..nx)
                    .flat_map(|x| (0..ny).map(move |y| at(x, y, z)))
                    .collect(),
            );
        }
        for face in faces {
            assert!(check(&face, world).nodes.len() <= 32);
        }
    }

    #[test]
    fn ranges_of_ranges() {
        // 50 blocks of 250 at stride 1000, and blocks of blocks.
        let blocks: Vec<u32> = (0..50u32)
            .flat_map(|k| k * 1000 + 100..k * 1000 + 350)
            .collect();
        check(&blocks, 60_000);
        let nested: Vec<u32> = (0..8u32)
            .flat_map(|a| {
                (0..16u32).flat_map(move |b| (0..5u32).map(move |c| a * 4096 + b * 64 + c + 3))
            })
            .collect();
        check(&nested, 40_000);
        let top: Vec<u32> = (u32::MAX - 5000..u32::MAX)
            .chain([u32::MAX - 9000])
            .collect::<Vec<_>>();
        let mut top = top;
        top.sort_unstable();
        check(&top, u32::MAX);
        let spread: Vec<u32> = (0..64u32).map(|k| k << 26 | 12345).collect();
        check(&spread, u32::MAX);
    }

    #[test]
    fn random_sets_past_the_budget_are_refused() {
        // An unstructured set takes about a node per member below density
        // 1/3 or so, more than the 4 bytes a member of the plain array.
        let world = 1 << 20;
        let members = random_set(world, 0.125, 7);
        assert!(Bdd::build(&members, &Stats::of(&members, world)).is_none());
        // The same set does build without the budget.
        check(&members, world);
        // Half-density ones fit: about 107,000 nodes, 1.7 MB against 2 MB.
        let half = random_set(world, 0.5, 7);
        assert!(Bdd::build(&half, &Stats::of(&half, world)).is_some());
    }

    #[test]
    fn shifted_copies_are_seen_run_by_run() {
        assert!(shifted_copy(&[], &[], 8));
        assert!(shifted_copy(&[1, 2, 3, 6], &[9, 10, 11, 14], 8));
        assert!(!shifted_copy(&[1, 2, 3, 6], &[9, 10, 12, 14], 8));
        assert!(!shifted_copy(&[1, 2, 3, 6], &[9, 10, 11], 8));
        assert!(!shifted_copy(&[1, 2, 4], &[9, 10, 11], 8));
        let lower: Vec<u32> = (0..1000).chain(1001..3000).collect();
        let mut upper: Vec<u32> = lower.iter().map(|w| w + 4096).collect();
        assert!(shifted_copy(&lower, &upper, 4096));
        upper[1000] += 1;
        assert!(!shifted_copy(&lower, &upper, 4096));
    }

    proptest! {
        #[test]
        fn shifted_copy_matches_elementwise(
            lower in proptest::collection::btree_set(0u32..200, 0..60),
            other in proptest::collection::btree_set(256u32..456, 0..60),
            mode in 0u8..3,
            at in any::<proptest::sample::Index>(),
        ) {
            let lower: Vec<u32> = lower.into_iter().collect();
            let mut upper: Vec<u32> = lower.iter().map(|w| w + 256).collect();
            match mode {
                0 => upper = other.into_iter().collect(),
                // A near copy: one member moved up, which may break a run.
                1 if !upper.is_empty() => {
                    let k = at.index(upper.len());
                    upper[k] += 1;
                    upper.sort_unstable();
                    upper.dedup();
                }
                _ => {}
            }
            let naive = lower.len() == upper.len()
                && lower.iter().zip(&upper).all(|(a, b)| b - a == 256);
            prop_assert_eq!(shifted_copy(&lower, &upper, 256), naive);
        }

        #[test]
        fn random_sets_match_a_sorted_array(
            world in 1u32..=70_000,
            density in 0.0f64..=1.0,
            seed in any::<u64>(),
        ) {
            check(&random_set(world, density, seed), world);
        }

        #[test]
        fn random_runs_match_a_sorted_array(
            world in 1u32..=70_000,
            gap in 1u32..2_000,
            run in 1u32..2_000,
            seed in any::<u64>(),
        ) {
            let mut state = seed;
            let mut members = Vec::new();
            let mut w = (splitmix(&mut state) % u64::from(gap)) as u32;
            while w < world {
                let len = 1 + (splitmix(&mut state) % u64::from(run)) as u32;
                members.extend(w..(w + len).min(world));
                w += len + 1 + (splitmix(&mut state) % u64::from(gap)) as u32;
            }
            check(&members, world);
        }
    }
}
