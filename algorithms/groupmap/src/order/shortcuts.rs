//! pi in one bit-packed array, and pi^-1 by walking pi's cycles with a
//! back pointer every `STEP` elements (Munro, Raman, Raman and Rao,
//! "Succinct representations of permutations", ICALP 2003): about
//! `(1 + 1/STEP) n log2 n + n` bits, and at most `2 STEP` reads an inverse.

use vers_vecs::{BitVec, RsVec};

use super::{OrderStats, Permutation};
use crate::packed::PackedArray;
use crate::set::rs_vec_bytes;

/// Elements between two marks on a cycle: the inverse reads pi at most
/// twice this often; the back pointers take `1/STEP` of pi's bits.
pub(crate) const STEP: u32 = 16;

#[derive(Clone, Debug)]
pub(crate) struct Shortcuts {
    pi: PackedArray,
    /// Sorted indices with a back pointer: every `STEP`-th element of each
    /// cycle longer than `STEP`.
    marked: RsVec,
    /// For the k-th marked element, the mark before it on its cycle (at
    /// most `STEP` applications of pi behind).
    back: PackedArray,
}

/// Sorted indices to mark: walking each cycle of pi once, every `STEP`-th
/// element of those longer than `STEP`, as a bit per index.
pub(crate) fn marks(pi: &[u32]) -> BitVec {
    let n = pi.len();
    let mut seen = BitVec::from_zeros(n);
    let mut marked = BitVec::from_zeros(n);
    for start in 0..n {
        if seen.is_bit_set_unchecked(start) {
            continue;
        }
        let mut x = start;
        let mut step = 0u32;
        loop {
            seen.flip_bit_unchecked(x);
            if step % STEP == 0 {
                marked.flip_bit_unchecked(x);
            }
            step += 1;
            x = pi[x] as usize;
            if x == start {
                break;
            }
        }
        // A cycle no longer than STEP is walked whole: its mark goes.
        if step <= STEP {
            marked.flip_bit_unchecked(start);
        }
    }
    marked
}

impl Shortcuts {
    /// pi^-1(s) and the reads of pi it took: walks forward from `s` to the
    /// first mark, jumps to the mark before it, which lies behind `s`, and
    /// walks on to `s`'s predecessor.
    fn walk(&self, s: u32) -> (u32, u32) {
        let mut x = s;
        let mut jumped = false;
        let mut reads = 0;
        loop {
            let next = self.pi.get(x);
            reads += 1;
            if next == s {
                return (x, reads);
            }
            x = match !jumped && self.marked.get(x as usize) == Some(1) {
                true => {
                    jumped = true;
                    self.back.get(self.marked.rank1(x as usize) as u32)
                }
                false => next,
            };
        }
    }
}

impl Permutation for Shortcuts {
    fn build(pi: &[u32], stats: &OrderStats) -> Shortcuts {
        let marked = RsVec::from_bit_vec(marks(pi));
        // Each mark's predecessor mark, found by walking each long cycle once.
        let mut back = vec![0u32; stats.marks as usize];
        let mut done = BitVec::from_zeros(pi.len());
        for start in (0..pi.len()).filter(|&s| marked.get(s) == Some(1)) {
            if done.is_bit_set_unchecked(start) {
                continue;
            }
            let (mut previous, mut x) = (start, pi[start] as usize);
            done.flip_bit_unchecked(start);
            loop {
                if marked.get(x) == Some(1) {
                    back[marked.rank1(x)] = previous as u32;
                    if x == start {
                        break;
                    }
                    done.flip_bit_unchecked(x);
                    previous = x;
                }
                x = pi[x] as usize;
            }
        }
        let bound = u64::from(stats.len);
        Shortcuts {
            pi: PackedArray::new(pi.iter().copied(), bound),
            marked,
            back: PackedArray::new(back.into_iter(), bound),
        }
    }

    fn estimate_heap_bytes(stats: &OrderStats) -> usize {
        let bound = u64::from(stats.len);
        PackedArray::estimate_heap_bytes(stats.len, bound)
            + rs_vec_bytes(bound, u64::from(stats.marks))
            + PackedArray::estimate_heap_bytes(stats.marks, bound)
    }

    fn to_sorted(&self, g: u32) -> u32 {
        self.pi.get(g)
    }

    fn to_group(&self, s: u32) -> u32 {
        self.walk(s).0
    }

    fn heap_bytes(&self) -> usize {
        self.pi.heap_bytes() + self.marked.heap_size() + self.back.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pi: &[u32]) {
        let stats = OrderStats::of(pi);
        let p = Shortcuts::build(pi, &stats);
        for (g, &s) in pi.iter().enumerate() {
            assert_eq!(p.to_sorted(g as u32), s);
            let (group, reads) = p.walk(s);
            assert_eq!(group, g as u32, "pi^-1({s}) of {} elements", pi.len());
            assert!(reads <= 2 * STEP, "pi^-1({s}) read pi {reads} times");
        }
        assert_eq!(p.heap_bytes(), Shortcuts::estimate_heap_bytes(&stats));
    }

    #[test]
    fn inverse_matches_an_array_on_every_cycle_shape() {
        // One long cycle of each length around STEP, a length that is a
        // multiple of STEP, and fixed points beside them.
        for len in [1, 2, STEP - 1, STEP, STEP + 1, 2 * STEP, 5 * STEP + 3, 1000] {
            let cycle: Vec<u32> = (0..len).map(|i| (i + 1) % len).collect();
            check(&cycle);
            let mut with_fixed = cycle.clone();
            with_fixed.extend(len..len + 7);
            check(&with_fixed);
        }
        let mut state = 7u64;
        for n in [3usize, 100, 4097, 50_000] {
            let mut pi: Vec<u32> = (0..n as u32).collect();
            for i in (1..n).rev() {
                let j = (crate::strategy::splitmix64(&mut state) % (i as u64 + 1)) as usize;
                pi.swap(i, j);
            }
            check(&pi);
        }
    }

    #[test]
    fn back_pointers_cost_a_sixteenth_of_pi() {
        let n = 1u32 << 16;
        let cycle: Vec<u32> = (0..n).map(|i| (i + 1) % n).collect();
        let stats = OrderStats::of(&cycle);
        assert_eq!(stats.marks, n / STEP);
        let pi_bytes = PackedArray::estimate_heap_bytes(n, u64::from(n));
        let extra = Shortcuts::estimate_heap_bytes(&stats) - pi_bytes;
        // Back pointers plus a bit per element and its rank directory.
        assert!(
            extra < pi_bytes / 16 + (n as usize / 8) * 11 / 10,
            "{extra}"
        );
    }
}
