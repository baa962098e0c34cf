//! The ranks a range triple names as an arithmetic progression, and the
//! smallest rank two or more range triples share, found by arithmetic
//! (Chinese remainders) in memory proportional to the number of triples,
//! never by listing ranges that may name billions of ranks.

use super::RankRange;

/// `low, low + step, ..., low + step * (count - 1)`: a triple's ranks in
/// increasing order.
#[derive(Clone, Copy, Debug)]
struct Progression {
    low: i128,
    step: i128,
    count: i128,
}

impl Progression {
    /// The ranks of `range`, which names `count >= 1` ranks.
    fn of(range: &RankRange, count: u32) -> Progression {
        let count = i128::from(count);
        let step = if count > 1 {
            i128::from(range.stride).abs()
        } else {
            1
        };
        let first = i128::from(range.first);
        let low = if range.stride > 0 {
            first
        } else {
            first - step * (count - 1)
        };
        Progression { low, step, count }
    }

    fn high(&self) -> i128 {
        self.low + self.step * (self.count - 1)
    }

    /// The smallest rank in both progressions, if any.
    fn first_common(&self, other: &Progression) -> Option<i128> {
        let (lo, hi) = (self.low.max(other.low), self.high().min(other.high()));
        if lo > hi {
            return None;
        }
        // x = self.low + self.step * t with self.step * t = d (mod other.step).
        let (g, inverse, _) = extended_gcd(self.step, other.step);
        let d = other.low - self.low;
        if d.rem_euclid(g) != 0 {
            return None;
        }
        let modulus = other.step / g;
        let t = ((d / g).rem_euclid(modulus) * inverse.rem_euclid(modulus)).rem_euclid(modulus);
        let period = self.step * modulus;
        let x = self.low + self.step * t;
        // The first solution at or above lo (x < self.low + period <= lo + period).
        let x = x + (lo - x + period - 1).max(0) / period * period;
        (x <= hi).then_some(x)
    }
}

/// (gcd(a, b), s, t) with a * s + b * t = gcd, for positive a and b.
fn extended_gcd(a: i128, b: i128) -> (i128, i128, i128) {
    if b == 0 {
        (a, 1, 0)
    } else {
        let (g, s, t) = extended_gcd(b, a % b);
        (g, t, s - (a / b) * t)
    }
}

/// The smallest rank that more than one of `ranges` names, where `counts`
/// are their (positive) rank counts. O(ranges) memory; time grows with the
/// pairs of ranges whose spans overlap.
pub(crate) fn smallest_repeat(ranges: &[RankRange], counts: &[u32]) -> Option<u32> {
    let mut progressions: Vec<Progression> = ranges
        .iter()
        .zip(counts)
        .filter(|(_, &count)| count > 0)
        .map(|(r, &count)| Progression::of(r, count))
        .collect();
    progressions.sort_unstable_by_key(|p| p.low);
    let mut best: Option<i128> = None;
    for (i, p) in progressions.iter().enumerate() {
        if best.is_some_and(|b| b < p.low) {
            break;
        }
        for q in &progressions[i + 1..] {
            if q.low > p.high() || best.is_some_and(|b| b < q.low) {
                break;
            }
            if let Some(x) = p.first_common(q) {
                best = Some(best.map_or(x, |b| b.min(x)));
            }
        }
    }
    best.map(|x| x as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(ranges: &[RankRange], counts: &[u32]) -> Option<u32> {
        let mut seen = std::collections::BTreeMap::new();
        for (r, &c) in ranges.iter().zip(counts) {
            for k in 0..i64::from(c) {
                *seen.entry(i64::from(r.first) + k * r.stride).or_insert(0) += 1;
            }
        }
        seen.into_iter()
            .find(|&(_, n)| n > 1)
            .map(|(x, _)| x as u32)
    }

    #[test]
    fn repeats_match_listing_every_rank() {
        let mut state = 7u64;
        for _ in 0..20_000 {
            let mut next = |n: u64| crate::strategy::splitmix64(&mut state) % n;
            let world = 1 + next(60) as u32;
            let ranges: Vec<RankRange> = (0..1 + next(4))
                .map(|_| {
                    let (a, b) = (next(world.into()) as u32, next(world.into()) as u32);
                    let step = 1 + next(world.into()) as i64;
                    RankRange::new(a, b, if b < a { -step } else { step })
                })
                .collect();
            let counts: Vec<u32> = ranges
                .iter()
                .map(|r| ((i64::from(r.last) - i64::from(r.first)) / r.stride) as u32 + 1)
                .collect();
            assert_eq!(
                smallest_repeat(&ranges, &counts),
                listed(&ranges, &counts),
                "{ranges:?}"
            );
        }
    }
}
