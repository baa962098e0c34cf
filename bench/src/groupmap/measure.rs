//! Timing one map: construction, sequential and random `select`, random
//! `rank`, for a `GroupMap` and for the plain `Vec<u32>` MPICH keeps; the
//! answers are checked against the ranks on a sample, and the
//! information-theoretic bound gives the floor the bytes are compared with.

use std::hint::black_box;
use std::time::Instant;

use catena_groupmap::{GroupMap, GroupMapError, Report, SetKind, Strategy};

use super::classes::Rng;

/// Random lookups come in this many batches; the median batch counts, so a
/// batch that met an interrupt or the other tenant of the machine does not.
const BATCHES: usize = 5;
const BATCH: usize = 10_000;
/// Sequential `select` walks `0..n`, stopping after this many lookups.
const SEQUENTIAL_MAX: u32 = 1 << 20;
/// ... and walks small maps again until it has done this many, so the
/// clock's resolution does not dominate.
const SEQUENTIAL_MIN: u32 = 10_000;
/// Linear-scan `rank` on the plain array (a `Vec<u32>` or the `Plain`
/// representation) is O(n): it gets few queries.
const SCAN_RANK_QUERIES: usize = 200;

/// The random queries every representation of one map answers.
pub struct Probe {
    /// Group ranks, uniform.
    selects: Vec<u32>,
    /// World ranks, alternately a member and uniform in the world, so
    /// `rank` pays for misses too and any prefix is half members.
    ranks: Vec<u32>,
    /// One bit per world rank: whether it is a member, to check misses.
    members: Vec<u64>,
}

impl Probe {
    pub fn new(world: u32, ranks: &[u32], rng: &mut Rng) -> Probe {
        let n = ranks.len() as u32;
        let selects = (0..BATCHES * BATCH).map(|_| rng.below(n)).collect();
        let ranks_q = (0..BATCHES * BATCH)
            .map(|k| {
                if k % 2 == 0 {
                    ranks[rng.below(n) as usize]
                } else {
                    rng.below(world)
                }
            })
            .collect();
        let mut members = vec![0u64; world.div_ceil(64) as usize];
        for &w in ranks {
            members[(w / 64) as usize] |= 1 << (w % 64);
        }
        Probe {
            selects,
            ranks: ranks_q,
            members,
        }
    }

    fn is_member(&self, w: u32) -> bool {
        self.members[(w / 64) as usize] >> (w % 64) & 1 == 1
    }
}

/// What one representation of one map measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timing {
    pub build_us: f64,
    pub seq_select_ns: f64,
    pub rand_select_ns: f64,
    pub rand_rank_ns: f64,
}

/// Builds the map and times the building.
pub fn build(
    world: u32,
    ranks: &[u32],
    strategy: Strategy,
) -> (Result<(GroupMap, Report), GroupMapError>, f64) {
    let start = Instant::now();
    let built = GroupMap::from_ranks_reported(world, ranks, strategy);
    (built, start.elapsed().as_secs_f64() * 1e6)
}

/// Times `map`'s lookups; `build_us` is the caller's.
pub fn time_map(map: &GroupMap, probe: &Probe, build_us: f64) -> Timing {
    let select = |g| map.select(g).unwrap_or(0);
    let rank = |w| map.rank(w).ok().flatten().unwrap_or(0);
    let rand_rank_ns = match map.set_kind() {
        SetKind::Plain => per_lookup(
            &probe.ranks[..SCAN_RANK_QUERIES.min(probe.ranks.len())],
            rank,
        ),
        _ => median_batch(&probe.ranks, rank),
    };
    Timing {
        build_us,
        seq_select_ns: sequential(map.len(), select),
        rand_select_ns: median_batch(&probe.selects, select),
        rand_rank_ns,
    }
}

/// Times the plain array: `select` is an index, `rank` the linear scan
/// MPICH's MPI_Group_translate_ranks does.
pub fn time_vec(ranks: &[u32], probe: &Probe) -> (Timing, usize) {
    let start = Instant::now();
    let array = black_box(ranks.to_vec());
    let build_us = start.elapsed().as_secs_f64() * 1e6;
    let select = |g: u32| array[g as usize];
    let rank = |w| array.iter().position(|&x| x == w).unwrap_or(0) as u32;
    let timing = Timing {
        build_us,
        seq_select_ns: sequential(array.len() as u32, select),
        rand_select_ns: median_batch(&probe.selects, select),
        rand_rank_ns: per_lookup(
            &probe.ranks[..SCAN_RANK_QUERIES.min(probe.ranks.len())],
            rank,
        ),
    };
    let bytes = std::mem::size_of::<Vec<u32>>() + 4 * array.capacity();
    (timing, bytes)
}

/// How many of a sample of `map`'s answers disagree with `ranks`: a wrong
/// representation should show in the results, not just be fast.
pub fn wrong_answers(map: &GroupMap, ranks: &[u32], probe: &Probe) -> usize {
    let sample = match map.set_kind() {
        SetKind::Plain => SCAN_RANK_QUERIES / 2,
        _ => 1000,
    };
    let mut wrong = usize::from(map.len() as usize != ranks.len());
    for &g in probe.selects.iter().take(sample) {
        let w = ranks[g as usize];
        wrong += usize::from(map.select(g) != Ok(w));
        wrong += usize::from(map.rank(w) != Ok(Some(g)));
    }
    for &w in probe.ranks.iter().take(sample) {
        wrong += usize::from(match map.rank(w) {
            Ok(Some(g)) => ranks.get(g as usize) != Some(&w),
            Ok(None) => probe.is_member(w),
            Err(_) => true,
        });
    }
    wrong
}

/// Mean ns a lookup over `0..n` in order, repeated for small maps.
fn sequential(n: u32, lookup: impl Fn(u32) -> u32) -> f64 {
    let len = n.min(SEQUENTIAL_MAX);
    if len == 0 {
        return 0.0;
    }
    let passes = SEQUENTIAL_MIN.div_ceil(len);
    let start = Instant::now();
    let mut acc = 0u32;
    for _ in 0..passes {
        for g in 0..len {
            acc = acc.wrapping_add(lookup(black_box(g)));
        }
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / f64::from(passes * len)
}

/// The median over the batches of the mean ns a lookup.
fn median_batch(queries: &[u32], lookup: impl Fn(u32) -> u32) -> f64 {
    let mut per_batch: Vec<f64> = queries
        .chunks(BATCH)
        .map(|batch| per_lookup(batch, &lookup))
        .collect();
    crate::report::quantile(&mut per_batch, 0.5)
}

fn per_lookup(queries: &[u32], lookup: impl Fn(u32) -> u32) -> f64 {
    let start = Instant::now();
    let mut acc = 0u32;
    for &q in queries {
        acc = acc.wrapping_add(lookup(black_box(q)));
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / queries.len() as f64
}

/// The fewest bytes any representation of every `n`-member subset of
/// `world` ranks needs: log2 C(world, n) bits, plus log2 n! when the order
/// is a free permutation. Structured maps (strides, ranges) are a tiny
/// class of their own and may well come in under it.
pub fn bound_bytes(world: u32, n: u32, permuted: bool) -> f64 {
    let choose = ln_factorial(world) - ln_factorial(n) - ln_factorial(world - n);
    let order = if permuted { ln_factorial(n) } else { 0.0 };
    ((choose + order) / std::f64::consts::LN_2 / 8.0).max(0.0)
}

/// ln n!: a sum of logs for small n, Stirling's series (error below 1e-12
/// relative) beyond.
fn ln_factorial(n: u32) -> f64 {
    if n < 64 {
        return (2..=n).map(|k| f64::from(k).ln()).sum();
    }
    let x = f64::from(n);
    x * x.ln() - x + 0.5 * (std::f64::consts::TAU * x).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x.powi(3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_matches_exact_binomials() {
        // C(10, 3) = 120; C(100, 50) ~ 1.0089e29; 4! = 24.
        assert!((bound_bytes(10, 3, false) * 8.0 - 120f64.log2()).abs() < 1e-9);
        assert!(
            (bound_bytes(100, 50, false) * 8.0 - 1.008_913_445_455_642e29f64.log2()).abs() < 1e-9
        );
        assert!((bound_bytes(10, 4, true) * 8.0 - (210.0f64 * 24.0).log2()).abs() < 1e-9);
        // Across the switch to Stirling's series ln n! stays exact.
        let sum: f64 = (2..=200).map(|k| f64::from(k).ln()).sum();
        assert!((ln_factorial(200) - sum).abs() < 1e-9 * sum);
        assert_eq!(bound_bytes(1 << 20, 1 << 20, false), 0.0);
    }
}
