//! The maps the benchmark measures, as world ranks in group order: Taheri's
//! experiment classes A-E (thesis §5.2) and the 14 communicators of his
//! Table 6.1, drawn from a seeded splitmix64 so every run sees the same maps.

/// A splitmix64 stream: small, fast and good enough to draw test maps.
pub struct Rng(u64);

impl Rng {
    /// The stream of map `index` of workload `tag`, independent of which
    /// other workloads a run picks.
    pub fn for_map(seed: u64, tag: u64, index: u64) -> Rng {
        let mut rng = Rng(seed);
        let mixed = rng.next() ^ Rng(tag << 32 | index).next();
        Rng(mixed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), by a multiply-shift without modulo bias
    /// worth caring about at these sizes.
    pub fn below(&mut self, n: u32) -> u32 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u32
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u32, hi: u32) -> u32 {
        lo + ((u128::from(self.next()) * (u128::from(hi - lo) + 1)) >> 64) as u32
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn shuffle(&mut self, items: &mut [u32]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u32 + 1) as usize);
        }
    }
}

/// `n` distinct ranks of `0..world`, uniformly at random, in increasing
/// order. Draws whichever of the subset and its complement is smaller, so a
/// near-full subset costs no more than a sparse one.
pub fn random_subset(world: u32, n: u32, rng: &mut Rng) -> Vec<u32> {
    let n = n.min(world);
    let take = n.min(world - n);
    let mut bits = vec![0u64; world.div_ceil(64) as usize];
    let mut picked = 0;
    while picked < take {
        let w = rng.below(world);
        let (word, bit) = ((w / 64) as usize, 1u64 << (w % 64));
        if bits[word] & bit == 0 {
            bits[word] |= bit;
            picked += 1;
        }
    }
    let keep_set = take == n;
    (0..world)
        .filter(|&w| (bits[(w / 64) as usize] >> (w % 64) & 1 == 1) == keep_set)
        .collect()
}

/// Up to `k` disjoint, non-adjacent, non-empty random intervals of
/// `0..world`, increasing: consecutive pairs of `2k` distinct cut points.
fn random_ranges(world: u32, k: u32, rng: &mut Rng) -> Vec<(u32, u32)> {
    let cuts = random_subset(world + 1, 2 * k.min(world.div_ceil(2)), rng);
    cuts.chunks(2).map(|c| (c[0], c[1])).collect()
}

/// Taheri's experiment classes (thesis §5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "verbatim")]
pub enum Class {
    /// Random members of a random size, sorted.
    A,
    /// One stride: random begin, end and interval.
    B,
    /// Ranges of ranges: 1-100 disjoint random ranges, sorted.
    C,
    /// Random faces of a hypercube, sorted.
    D,
    /// 1-20 disjoint random ranges, listed in decreasing order.
    E,
}

impl Class {
    pub const ALL: [Class; 5] = [Class::A, Class::B, Class::C, Class::D, Class::E];

    pub fn name(self) -> &'static str {
        match self {
            Class::A => "A",
            Class::B => "B",
            Class::C => "C",
            Class::D => "D",
            Class::E => "E",
        }
    }

    /// One map of this class on `world` ranks, in group order.
    pub fn generate(self, world: u32, rng: &mut Rng) -> Vec<u32> {
        match self {
            Class::A => {
                let n = rng.between(1, world);
                random_subset(world, n, rng)
            }
            Class::B => stride(world, rng),
            Class::C => {
                let k = rng.between(1, 100);
                let ranges = random_ranges(world, k, rng);
                ranges.into_iter().flat_map(|(a, b)| a..b).collect()
            }
            Class::D => hypercube_faces(world, rng),
            Class::E => {
                let k = rng.between(1, 20);
                let ranges = random_ranges(world, k, rng);
                ranges.into_iter().rev().flat_map(|(a, b)| a..b).collect()
            }
        }
    }
}

/// `begin, begin + interval, ... <= end`. The interval is log-uniform in
/// `1..=end - begin`: uniform would make almost every stride 1-3 members.
fn stride(world: u32, rng: &mut Rng) -> Vec<u32> {
    let (a, b) = (rng.below(world), rng.below(world));
    let (begin, end) = (a.min(b), a.max(b));
    let span = end - begin;
    if span == 0 {
        return vec![begin];
    }
    let interval = ((rng.unit() * f64::from(span).ln()).exp() as u32).clamp(1, span);
    (begin..=end).step_by(interval as usize).collect()
}

/// The union of 1..=2d random faces of a d-dimensional grid, d a divisor of
/// log2 of the grid's size (sides 2^(bits/d) >= 2). The grid is the largest
/// power of two of the world's ranks; ranks above it are never members.
fn hypercube_faces(world: u32, rng: &mut Rng) -> Vec<u32> {
    let bits = world.ilog2();
    let divisors: Vec<u32> = (1..=bits).filter(|d| bits % d == 0).collect();
    let d = divisors[rng.below(divisors.len() as u32) as usize];
    let width = bits / d;
    let side_max = (1u32 << width) - 1;
    // Face 2i fixes coordinate i to 0, face 2i + 1 to side - 1.
    let count = rng.between(1, 2 * d);
    let faces: Vec<(u32, u32)> = random_subset(2 * d, count, rng)
        .into_iter()
        .map(|f| (f / 2 * width, if f % 2 == 0 { 0 } else { side_max }))
        .collect();
    (0..1u32 << bits)
        .filter(|&r| faces.iter().any(|&(shift, v)| (r >> shift) & side_max == v))
        .collect()
}

/// Table 6.1's communicators, as the thesis numbers them.
pub const TABLE: [&str; 14] = [
    "all even ranks",
    "y = 81x + 11453, x > 0",
    "6-D grid face [0,*,*,0,*,*]",
    "alternate ranges of 100",
    "multiples of 3",
    "multiples of 5",
    "multiples of 7",
    "5,000 random ranks, sorted",
    "50,000 random ranks, sorted",
    "10,000 random ranks, permuted",
    "20,000 random ranks, permuted",
    "100,000 random ranks, permuted",
    "10 ranges of 1,000, permuted inside",
    "10 ranges of 10,000, permuted inside",
];

/// The world Table 6.1 was measured on; the random communicators' sizes
/// scale with the world from it.
pub const TABLE_WORLD: u32 = 200_000;

/// Communicator `id` (1..=14) of Table 6.1 on `world` ranks, in group order.
pub fn communicator(id: usize, world: u32, rng: &mut Rng) -> Vec<u32> {
    let scaled = |n: u32| (u64::from(n) * u64::from(world) / u64::from(TABLE_WORLD)).max(1) as u32;
    let multiples = |k: usize| (0..world).step_by(k).collect();
    match id {
        1 => multiples(2),
        2 => (1..)
            .map(|x: u32| 81 * x + 11_453)
            .take_while(|&y| y < world)
            .collect(),
        3 => grid_face(world),
        4 => (0..world).filter(|w| w / 100 % 2 == 0).collect(),
        5 => multiples(3),
        6 => multiples(5),
        7 => multiples(7),
        8 => random_subset(world, scaled(5_000), rng),
        9 => random_subset(world, scaled(50_000), rng),
        10..=12 => {
            let n = scaled([10_000, 20_000, 100_000][id - 10]);
            let mut ranks = random_subset(world, n, rng);
            rng.shuffle(&mut ranks);
            ranks
        }
        13 | 14 => {
            // Ten adjacent ranges from rank 0, each shuffled in place.
            let len = scaled(if id == 13 { 1_000 } else { 10_000 });
            let mut ranks: Vec<u32> = (0..10 * len).collect();
            for range in ranks.chunks_mut(len as usize) {
                rng.shuffle(range);
            }
            ranks
        }
        _ => panic!("Table 6.1 has communicators 1 to 14, not {id}"),
    }
}

/// The face `[0,*,*,0,*,*]` of a row-major 6-D grid of sides (4, f, f, 5, f, f)
/// with the largest f that fits the world: on 200,000 ranks f = 10 and the
/// grid is exactly the world, so the face has the thesis's 10^4 members.
fn grid_face(world: u32) -> Vec<u32> {
    let f = (1..)
        .take_while(|f: &u32| 20 * f.pow(4) <= world)
        .last()
        .unwrap_or(1);
    let mut ranks = Vec::with_capacity(f.pow(4) as usize);
    for c1 in 0..f {
        for c2 in 0..f {
            // Coordinates 0 and 3 are 0; 4 and 5 are the fastest-varying.
            let base = (c1 * f + c2) * 5 * f * f;
            ranks.extend(base..base + f * f);
        }
    }
    ranks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(ranks: &[u32]) -> bool {
        ranks.windows(2).all(|p| p[0] < p[1])
    }

    #[test]
    fn table_has_the_thesis_sizes() {
        // The thesis gives 40,001 for the multiples of 5; there are 40,000
        // below 200,000 (its count includes rank 200,000 itself).
        let sizes = [
            100_000, 2_327, 10_000, 100_000, 66_667, 40_000, 28_572, 5_000, 50_000, 10_000, 20_000,
            100_000, 10_000, 100_000,
        ];
        for (id, &size) in (1..=14).zip(&sizes) {
            let mut rng = Rng::for_map(1, 0, id as u64);
            let ranks = communicator(id, TABLE_WORLD, &mut rng);
            assert_eq!(ranks.len(), size, "communicator {id}: {}", TABLE[id - 1]);
            assert!(ranks.iter().all(|&w| w < TABLE_WORLD), "communicator {id}");
            assert_eq!(
                sorted(&ranks),
                !(10..=14).contains(&id),
                "communicator {id}"
            );
            let mut members = ranks.clone();
            members.sort_unstable();
            members.dedup();
            assert_eq!(members.len(), size, "communicator {id} repeats a rank");
        }
    }

    #[test]
    fn classes_draw_valid_maps() {
        let world = 1 << 12;
        for class in Class::ALL {
            for index in 0..50 {
                let mut rng = Rng::for_map(7, class as u64, index);
                let ranks = class.generate(world, &mut rng);
                assert!(!ranks.is_empty(), "{class:?} {index}");
                assert!(ranks.iter().all(|&w| w < world), "{class:?} {index}");
                let mut members = ranks.clone();
                members.sort_unstable();
                members.dedup();
                assert_eq!(
                    members.len(),
                    ranks.len(),
                    "{class:?} {index} repeats a rank"
                );
                if class != Class::E {
                    assert!(sorted(&ranks), "{class:?} {index}");
                }
            }
        }
    }

    #[test]
    fn subsets_and_faces_have_their_sizes() {
        let mut rng = Rng::for_map(3, 0, 0);
        for n in [0, 1, 100, 4000, 4095, 4096] {
            let s = random_subset(4096, n, &mut rng);
            assert_eq!(s.len(), n as usize);
            assert!(sorted(&s));
        }
        // A 2x2 grid (world 4, d = 2): its four faces are its four edges.
        let faces = hypercube_faces(4, &mut rng);
        assert!(!faces.is_empty() && faces.len() <= 4);
        assert_eq!(grid_face(TABLE_WORLD).len(), 10_000);
    }
}
